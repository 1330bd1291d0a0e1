"""The one facade a running agent uses: hand in its conversations, get its memory back.

``AnimaMemory(db_or_url, anima_id)`` is bound to one anima. The CLI, the HTTP service
(``anima serve``) and the MCP server (``anima mcp``) are thin faces over it; it calls the
same store code as ``anima import`` and ``anima recall``.

The turn cycle it serves (seed: context management)::

    ctx = memory.context(user_text, session_id="c-42")     # before the model call
    reply = model(system=... + ctx.rendered, messages=...)
    memory.append([user_msg, assistant_msg])                 # after the turn
    memory.remember("Lena is allergic to peanuts", "world", session_id="c-42")  # explicit

**Citations.** Every memory in a context block is shown with its marker ``[[anima:f-N]]``
(``f-N`` is the memory's id). When the assistant's reply uses a memory it should keep that
exact marker in its text, e.g. ``"You said [[anima:f-12]] you prefer tea."``; appended
assistant messages are what the night's memory-ref-sync step reads, and each marker (regex
``\\[\\[anima:f-(\\d+)\\]\\]``) becomes a reference that raises the memory's decayed
reference count, which decides what stays resident.

**Late messages.** A message belongs to the local day (ANIMA_TIMEZONE) of its
``created_at``. Appending never waits for the night (night steps lock the anima, appends do
not), so a message may land while a night for its day runs or after it finished; the
append result lists such days in ``stale_days``, and ``anima sleep --day D --force`` re-runs
them (see README, "Late messages").
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import date, datetime
from functools import partial
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from anima_pipeline.config import Settings, get_settings
from anima_pipeline.core.errors import AccessError
from anima_pipeline.core.types import MemoryType
from anima_pipeline.core.validation import (
    AnimaId,
    AnimaInputError,
    ExternalId,
    Instant,
    Name,
    QueryText,
    Text,
    Title,
    check,
    context_of,
)
from anima_pipeline.embed.embedder import make_embedder
from anima_pipeline.llm.contract import Engine, TokenCounter
from anima_pipeline.llm.factory import make_engine
from anima_pipeline.memory import forget as forgetting
from anima_pipeline.memory.flush import flush_turns
from anima_pipeline.memory.forget import ForgetReport, MemoryInfo, TargetKind
from anima_pipeline.recall.assemble import assemble_context, search_memories, search_messages
from anima_pipeline.recall.dense import recall_status
from anima_pipeline.recall.identity import identity_context
from anima_pipeline.recall.render import memory_item
from anima_pipeline.recall.resident import resident_set
from anima_pipeline.recall.sections import AssembledContext, ContextItem, SearchPage
from anima_pipeline.recall.tokens import RatioCounter
from anima_pipeline.recall.working import WorkingContext, default_budget
from anima_pipeline.recall.working import working_context as build_working_context
from anima_pipeline.store import sleep_state
from anima_pipeline.store.archive import (
    CONVERSATION_FIELDS,
    ArchiveRecord,
    ImportConflict,
    ImportStats,
    MessageRecord,
    close_conversation,
    field_errors,
    import_records,
    open_conversation,
)
from anima_pipeline.store.db import Connection, Database, db_now, open_database
from anima_pipeline.store.events import AGENT_STEP_PREFIX, Audit
from anima_pipeline.store.layers import SelfBlockRepo
from anima_pipeline.store.planner_stats import keep_fresh
from anima_pipeline.store.status import recent_nights
from anima_pipeline.store.status import status as store_status
from anima_pipeline.store.vectors import Backfill
from anima_pipeline.tools.executor import ToolExecutor
from anima_pipeline.tools.scope import Scope

MAX_BATCH = 10_000  # messages per append call: one transaction, all or nothing
MAX_SEARCH_LIMIT = 100
MIN_BUDGET = 500  # tokens: below this a working context cannot hold a turn and its self
REMEMBER_STEP = f"{AGENT_STEP_PREFIX}remember"
# what an API caller does about a conflict (the CLI's answer is `anima import --update`)
MESSAGE_CONFLICT_ADVICE = "a stored message does not change: send the new text under a new message_id"
CONVERSATION_CONFLICT_ADVICE = (
    "change it with PUT /v1/animas/{anima}/conversations/{conversation_id} (AnimaMemory.open_conversation)"
)


class AnimaConflictError(AnimaInputError):
    """A message or conversation field that contradicts what is stored (HTTP 409); nothing
    was written. The message gives the API's way out, not the CLI's --update."""

    http_status = 409
    code = "conflict"


class WrongAnimaError(AccessError):
    """A message addressed to an anima other than the one this facade is bound to."""


# --- results ------------------------------------------------------------------------------


class AppendResult(BaseModel):
    received: int
    added: int = Field(description="messages new to the store (a repeated message_id adds nothing)")
    conversations_added: int
    skipped_cleaned: int = Field(0, description="messages of conversations the night's cleanup deleted")
    days: list[date] = Field(description="local days (ANIMA_TIMEZONE) the messages belong to")
    stale_days: list[date] = Field(
        default_factory=list,
        description="days whose night already ran or is running: re-run with `anima sleep --day D --force`",
    )


class ConversationInfo(BaseModel):
    id: str
    anima_id: str
    platform: str
    title: str | None
    debug: bool
    created_at: datetime
    updated_at: datetime
    closed_at: datetime | None


class Remembered(BaseModel):
    id: str
    content: str
    type: str
    source_sessions: list[str]


# --- the facade ---------------------------------------------------------------------------


class AnimaMemory:
    """The memory of one anima, for the agent that is talking right now.

    ``db`` is an open :class:`Database` (shared, not closed here), a PostgreSQL URL, or None
    for the configured store (ANIMA_DATABASE_URL, else the embedded server under ANIMA_HOME).
    """

    def __init__(self, db: Database | str | None, anima_id: str, *, settings: Settings | None = None) -> None:
        if not isinstance(anima_id, str):
            raise AnimaInputError("must be a string", field="anima_id")
        self.anima_id = check(AnimaId, anima_id, "anima_id")
        self.settings = settings or get_settings()
        self._engine: Engine | None = None
        self._owns_db = not isinstance(db, Database)
        if isinstance(db, Database):
            self.db = db
        elif isinstance(db, str):
            self.db = Database(db)
        else:
            self.db = open_database(self.settings)
        settings = self.settings
        self._vectors = Backfill(self.db, anima_id, lambda: make_embedder(settings), settings.embedder_batch)

    def close(self) -> None:
        self._vectors.wait(self.settings.embedder_timeout_s)
        if self._owns_db:
            self.db.close()

    def __enter__(self) -> AnimaMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _audit(self, conn: Connection, step: str) -> Audit:
        # day = the local day of the write: incremental deep sleep of that night sees it
        return Audit(
            conn=conn,
            anima_id=self.anima_id,
            run_id=f"agent-{uuid.uuid4().hex[:12]}",
            step=step,
            day=datetime.now(self.settings.tz).date(),
        )

    # --- writing ------------------------------------------------------------------------

    def validate_messages(self, messages: Iterable[MessageRecord | Mapping[str, Any]]) -> list[ArchiveRecord]:
        """The archive's validation with this facade's configured limits (message size,
        timestamp years), message by message; the first bad one raises AnimaInputError naming
        its index, message_id and field."""
        records: list[ArchiveRecord] = []
        context = context_of(self.settings)
        for i, raw in enumerate(messages):
            if i >= MAX_BATCH:
                raise AnimaInputError(f"at most {MAX_BATCH} messages per append", field="messages")
            if isinstance(raw, MessageRecord):  # built without the limits: validated again with them
                raw = raw.model_dump(exclude_unset=True)
            if isinstance(raw, Mapping):
                try:
                    msg = MessageRecord.model_validate(raw, context=context)
                except ValidationError as exc:
                    loc, reason = field_errors(exc)[0]
                    mid = raw.get("message_id")
                    raise AnimaInputError(
                        reason + (f" (message_id {mid!r})" if isinstance(mid, str) else ""),
                        field=f"messages[{i}].{loc}",
                        message_id=mid if isinstance(mid, str) else None,
                    ) from None
            else:
                raise AnimaInputError(
                    f"a message is a JSON object, got {type(raw).__name__}", field=f"messages[{i}]"
                )
            if msg.anima_id is not None and msg.anima_id != self.anima_id:
                raise WrongAnimaError(
                    f"messages[{i}].anima_id: message {msg.message_id!r} names another anima than this one"
                )
            records.append(ArchiveRecord.model_construct(**{**dict(msg), "anima_id": self.anima_id}))
        return records

    def append(self, messages: MessageRecord | Mapping[str, Any] | Iterable[Any]) -> AppendResult:
        """Store one message or many, in one transaction (all or nothing), validated like
        ``anima import``. Idempotent: a (conversation_id, message_id) already stored is
        skipped, so a host may re-send a turn after a timeout.

        Assistant messages should keep the ``[[anima:f-N]]`` markers of the memories they
        used: the night counts them (see the module docstring)."""
        batch: Iterable[Any] = [messages] if isinstance(messages, (MessageRecord, Mapping)) else messages
        records = self.validate_messages(batch)
        stats = ImportStats()
        tz = self.settings.tz
        days = sorted({r.created_at.astimezone(tz).date() for r in records})
        with self.db.transaction() as conn:
            try:
                # also moves the store's first day earlier when a message is older than it
                # (store/calendar.py), so that its day can be slept
                import_records(conn, records, self._audit(conn, f"{AGENT_STEP_PREFIX}append"), stats)
            except ImportConflict as exc:  # a re-sent message_id with other content: refused, not taken
                i = next(i for i, r in enumerate(records) if r.message_id == exc.message_id)
                raise AnimaConflictError(
                    f"{exc.detail}; "
                    + (
                        CONVERSATION_CONFLICT_ADVICE
                        if exc.field in CONVERSATION_FIELDS
                        else MESSAGE_CONFLICT_ADVICE
                    ),
                    field=f"messages[{i}].{exc.field}",
                    message_id=exc.message_id,
                ) from None
            stale = sleep_state.days_with_steps(conn, [self.anima_id], days) if stats.messages_added else []
        if stats.messages_added:
            with self.db.transaction() as conn:  # after the commit: ANALYZE sees the rows as others will
                keep_fresh(conn, stats.written())  # a bulk append keeps recall's plans right
            self._vectors.kick()  # embedded in the background: the append does not wait
        return AppendResult(
            received=len(records),
            added=stats.messages_added,
            conversations_added=stats.conversations_added,
            skipped_cleaned=stats.skipped_cleaned,
            days=days,
            stale_days=stale,
        )

    def open_conversation(
        self,
        conversation_id: str,
        *,
        title: str | None = None,
        platform: str | None = None,
        debug: bool | None = None,
    ) -> ConversationInfo:
        """Create (or reopen) a conversation and set its title / platform / debug flag. A debug
        conversation is never consolidated; platform 'cron' marks scheduled jobs (not the anima's life)."""
        check(ExternalId, conversation_id, "conversation_id")
        for name, kind, value in (("title", Title, title), ("platform", Name, platform)):
            if value is not None:
                check(kind, value, name)
        with self.db.transaction() as conn:
            try:
                row = open_conversation(
                    conn,
                    self._audit(conn, f"{AGENT_STEP_PREFIX}conversation"),
                    self.anima_id,
                    conversation_id,
                    platform=platform,
                    title=title,
                    debug=debug,
                )
            except ValueError as exc:
                raise AnimaInputError(str(exc), field="conversation_id") from None
        return ConversationInfo.model_validate(row)

    def close_conversation(self, conversation_id: str) -> ConversationInfo:
        """Mark a conversation closed. Raises LookupError for an unknown conversation."""
        check(ExternalId, conversation_id, "conversation_id")
        with self.db.transaction() as conn:
            row = close_conversation(
                conn, self._audit(conn, f"{AGENT_STEP_PREFIX}conversation"), self.anima_id, conversation_id
            )
        return ConversationInfo.model_validate(row)

    def remember(self, content: str, type: MemoryType = "world", session_id: str | None = None) -> Remembered:
        """Store an explicit memory now, through the memory tool executor (validated and
        audited like a night's `create_semantic_memory`), with `session_id` as its source.
        Its audit event carries today's local day, so that night's deep sleep (incremental
        or full) reviews it with the rest: merges it into a duplicate, deprecates it when
        contradicted."""
        check(Text, content, "content")
        if session_id is not None:
            check(ExternalId, session_id, "session_id")
        with self.db.transaction() as conn:
            now = db_now(conn)
            scope = Scope(anima_id=self.anima_id, tools=("create_semantic_memory",), default_observed_at=now)
            executor = ToolExecutor(conn, scope, self._audit(conn, REMEMBER_STEP))
            args: dict[str, Any] = {"type": type, "content": content}
            args["source_sessions"] = [session_id] if session_id else []
            result = executor.call("create_semantic_memory", args)
            if result.is_error:
                raise AnimaInputError(_tool_field_error(result.content), field=_tool_field(result.content))
            mem = executor.memories.get(executor.created_ids[-1])
            assert mem is not None  # created in this transaction
        return Remembered(id=mem.ref, content=mem.content, type=mem.type, source_sessions=mem.source_sessions)

    # --- corrections and forgetting (anima_pipeline/memory/forget.py) ---------------------------

    def memory(self, ref: str) -> MemoryInfo:
        """One memory by id (f-N). NotFound when this anima has no such memory, or it was erased."""
        with self.db.transaction() as conn:
            return MemoryInfo.of(forgetting.get_memory(conn, self.anima_id, ref))

    def deprecate(self, ref: str, reason: str, *, superseded_by: str | None = None) -> MemoryInfo:
        """Retire a memory (soft: it stays in the store, out of recall), with a reason."""
        args = {"id": ref, "reason": reason} | ({"superseded_by": superseded_by} if superseded_by else {})
        return self._correct("deprecate_semantic_memory", args)

    def update(self, ref: str, **fields: Any) -> MemoryInfo:
        """Correct a memory: only the fields given change (content, type, confidence,
        source_sessions, observed_at, valid_from, valid_until; `source_sessions=[]` clears).
        The memory is settled: the nights leave the correction as it is."""
        return self._correct("update_semantic_memory", {"id": ref, **fields})

    def pin(self, ref: str, reason: str | None = None) -> MemoryInfo:
        """Keep a memory resident in every context."""
        return self._correct("pin_semantic_memory", {"id": ref} | ({"reason": reason} if reason else {}))

    def unpin(self, ref: str, reason: str) -> MemoryInfo:
        """Stop keeping a memory resident (it stays active and searchable)."""
        return self._correct("unpin_semantic_memory", {"id": ref, "reason": reason})

    def delete(self, ref: str, *, requested_by: str = "agent") -> ForgetReport:
        """Erase a memory for good (and what was merged into it): a purge, with a tombstone."""
        return self.forget("memory", ref, purge=True, requested_by=requested_by)

    def forget(
        self, kind: TargetKind, target_id: str, *, purge: bool = False, requested_by: str = "agent"
    ) -> ForgetReport:
        """Forget a message (m-N), a conversation, a memory (f-N) or this anima (its id):
        soft by default, erased with `purge`; see anima_pipeline/memory/forget.py."""
        try:
            return forgetting.forget(
                self.db, self.settings, self.anima_id, kind, target_id, purge=purge, requested_by=requested_by
            )
        except forgetting.ForgetError as exc:
            raise AnimaInputError(exc.detail, field=exc.field) from None

    def _correct(self, tool: str, args: dict[str, Any]) -> MemoryInfo:
        try:
            return forgetting.correct(self.db, self.settings, self.anima_id, tool, args)
        except forgetting.ForgetError as exc:
            raise AnimaInputError(exc.detail, field=exc.field) from None

    # --- reading ------------------------------------------------------------------------

    def context(self, query: str, session_id: str | None = None) -> AssembledContext:
        """What to put into the model's context before answering `query`, in sections
        (``resident``, ``summaries``, ``memories``, ``episodic``: each its items within its
        character budget, see `recall.sections`) and `rendered`, the block for the prompt.
        `session_id` is the current conversation: its messages, and memories sourced only
        from it, are already in the window and are not recalled again. Memories appear as
        ``[[anima:f-N]]`` lines; keep the marker when the reply uses one."""
        check(QueryText, query, "query")
        if session_id is not None:
            check(ExternalId, session_id, "session_id")
        # this facade's own appends are searchable by meaning before its next context
        self._vectors.wait(self.settings.embedder_timeout_s)
        with self.db.transaction() as conn:
            return assemble_context(conn, self.anima_id, query, settings=self.settings, session_id=session_id)

    def search(
        self,
        query: str,
        *,
        types: Sequence[MemoryType] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 20,
        offset: int = 0,
    ) -> SearchPage:
        """Active search (the agent asks on purpose): more results than passive recall, resident
        memories included, best first, paged with `limit` / `offset` (`has_more` says whether
        another page exists), filtered by memory type and by when the fact was observed
        (`since` <= observed_at < `until`, created_at when never observed)."""
        return self._search(search_memories, query, since, until, limit, offset, types=types)

    def search_messages(
        self,
        query: str,
        *,
        conversation_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 20,
        offset: int = 0,
    ) -> SearchPage:
        """Active search over past messages (Letta's conversation search): what was said, in
        which conversation and when, best first, paged like `search`, optionally within one
        conversation and a time range (`since` <= created_at < `until`). Cron and debug
        conversations are left out."""
        if conversation_id is not None:
            check(ExternalId, conversation_id, "conversation_id")
        return self._search(
            search_messages, query, since, until, limit, offset, conversation_id=conversation_id
        )

    def _search(
        self,
        find: Callable[..., SearchPage],
        query: str,
        since: datetime | None,
        until: datetime | None,
        limit: int,
        offset: int,
        **filters: Any,
    ) -> SearchPage:
        """One page of `find` (recall.assemble's search_memories or search_messages), checked
        as every door checks it."""
        self._check_page(limit, offset)
        self._check_search(query, since, until)
        self._vectors.wait(self.settings.embedder_timeout_s)  # this facade's appends, by meaning too
        with self.db.transaction() as conn:
            return find(
                conn,
                self.anima_id,
                query,
                settings=self.settings,
                since=since,
                until=until,
                limit=limit,
                offset=offset,
                **filters,
            )

    def working_context(self, session_id: str, message: str, *, budget: int | None = None) -> WorkingContext:
        """Everything the model gets for the turn that answers `message` in conversation
        `session_id`, within `budget` tokens (default: ANIMA_CONTEXT_WINDOW_TOKENS less
        ANIMA_CONTEXT_RESERVE_TOKENS): `system` (the self blocks, resident memories, the
        temporal segment and the recall sections, folded: `recall.working`), `messages` (the
        session's stored messages as summary | slim | raw: `recall.session`) and `segments`
        (characters, estimated tokens, items and cut flag of each; they add up to `chars` and
        `tokens`). `message` itself is not stored here (append it after the turn) and its
        tokens are kept free in the budget.

        When the session's turns no longer fit, a compaction cycle moves the oldest into the
        session's rolling summary, kept per (session, watermark) so the next turns reuse it,
        after a flush has written the durable facts in them as memories sourced from the
        session (light sleep stage 1's rules, once per cycle)."""
        check(ExternalId, session_id, "session_id")
        check(Text, message, "message")
        if budget is not None and (
            isinstance(budget, bool) or not isinstance(budget, int) or budget < MIN_BUDGET
        ):
            raise AnimaInputError(f"must be an integer of at least {MIN_BUDGET} tokens", field="budget")
        engine = self.engine
        now = datetime.now(self.settings.tz)
        ratio = RatioCounter(self.settings.chars_per_token, self.settings.tokens_per_cjk_char)
        counter: TokenCounter = engine.token_counter() or ratio
        with self.db.transaction() as conn:
            summarizer = engine.summarizer(partial(identity_context, conn, self.anima_id), self.settings.tz)
            return build_working_context(
                conn,
                self._audit(conn, f"{AGENT_STEP_PREFIX}working_context"),
                session_id,
                message,
                budget=budget or default_budget(self.settings),
                settings=self.settings,
                count=ratio.count,
                measure=counter.count if counter is not ratio else None,
                counter_name=counter.name,
                summarizer=summarizer,
                flusher=partial(flush_turns, engine=engine, session_id=session_id, tz=self.settings.tz),
                now=now,
            )

    @property
    def engine(self) -> Engine:
        """The engine of the day-time writes that need one (the session summary, the flush):
        ANIMA_ENGINE, built once per facade."""
        if self._engine is None:
            self._engine = make_engine(self.settings)
        return self._engine

    def self_blocks(self) -> dict[str, str]:
        """The six self blocks as the night last wrote them (empty when never written)."""
        with self.db.transaction() as conn:
            return SelfBlockRepo(conn).all(self.anima_id)

    def resident(self) -> list[ContextItem]:
        """The resident set: pinned memories, then the most cited (what every turn carries)."""
        with self.db.transaction() as conn:
            memories, _ = resident_set(
                conn, self.anima_id, self.settings.recall_resident_top_n, self.settings.recall_pinned_max
            )
        return [memory_item(m.model_dump(), score=0.0, why="resident", tz=self.settings.tz) for m in memories]

    @staticmethod
    def _check_search(query: str, since: datetime | None, until: datetime | None) -> None:
        check(QueryText, query, "query")
        for name, value in (("since", since), ("until", until)):
            if value is not None:
                check(Instant, value, name)

    @staticmethod
    def _check_page(limit: int, offset: int) -> None:
        if not 1 <= limit <= MAX_SEARCH_LIMIT:
            raise AnimaInputError(f"must be between 1 and {MAX_SEARCH_LIMIT}", field="limit")
        if offset < 0:
            raise AnimaInputError("must not be negative", field="offset")

    def status(self) -> dict[str, Any]:
        """Counts for this anima (conversations, messages, memories, …), its latest nights, and
        how recall runs (`recall`: hybrid or lexical and why, provider, model, dimension, backlog)."""
        with self.db.transaction() as conn:
            counts = store_status(conn, self.anima_id)["animas"][0]
            nights = recent_nights(conn, self.anima_id)
            recall = recall_status(conn, self.settings, self.anima_id)
        return {**counts, "recent_nights": [dict(n) for n in nights], "recall": recall}


def _tool_field(message: str) -> str | None:
    """The field a refused create_semantic_memory names ("field 'content': …"), if any."""
    m = _TOOL_FIELD.search(message)
    return m.group(1) if m else None


def _tool_field_error(message: str) -> str:
    """The executor's reason without its tool name and field prefix (the field is reported apart)."""
    m = _TOOL_FIELD.search(message)
    return message[m.end() :] if m else message.removeprefix("create_semantic_memory: ")


_TOOL_FIELD = re.compile(r"field '([^']+)': ")
