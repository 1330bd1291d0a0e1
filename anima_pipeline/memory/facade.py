"""The one facade a running agent uses: hand in its conversations, get its memory back.

``AnimaMemory(db_or_url, anima_id)`` is bound to one anima. The CLI, the HTTP service
(``anima serve``) and the MCP server (``anima mcp``) are thin faces over it; it calls the
same store code as ``anima import`` and ``anima recall``. It implements the agent API's
Protocol (memory/api.py), as the HTTP client does; each method validates its arguments with
the operation's request model (memory/models.py), the one the HTTP routes and MCP tools use,
and refuses with InputError naming the field (NotFound, Conflict, AccessError where they apply).

The turn cycle it serves::

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
from datetime import datetime
from functools import partial
from typing import Any, Self, TypeVar

from pydantic import ValidationError

from anima_pipeline.config import Settings, get_settings
from anima_pipeline.core.errors import AccessError, Conflict, InputError
from anima_pipeline.core.types import MemoryType, TargetKind
from anima_pipeline.core.validation import AnimaId, check, context_of
from anima_pipeline.embed.provider import make_embedder
from anima_pipeline.llm.contract import Engine, TokenCounter
from anima_pipeline.llm.factory import make_engine
from anima_pipeline.memory import forget as forgetting
from anima_pipeline.memory.flush import flush_turns
from anima_pipeline.memory.models import (
    READ_DEFAULT,
    AppendResult,
    ContextRequest,
    ConversationInfo,
    ConversationRequest,
    DeprecateRequest,
    ForgetReport,
    ForgetRequest,
    MemoryInfo,
    MemoryRequest,
    MessageRequest,
    MessageSearchRequest,
    MessagesRequest,
    OpenConversationRequest,
    PinRequest,
    Remembered,
    RememberRequest,
    Request,
    SearchRequest,
    UnpinRequest,
    UpdateRequest,
    WorkingContextRequest,
    batch,
)
from anima_pipeline.recall.assemble import assemble_context, search_memories, search_messages
from anima_pipeline.recall.dense import recall_status
from anima_pipeline.recall.episodic import read_message
from anima_pipeline.recall.identity import identity_context
from anima_pipeline.recall.render import memory_item
from anima_pipeline.recall.resident import resident_set
from anima_pipeline.recall.sections import AssembledContext, ContextItem, MessagePart, SearchPage
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

R = TypeVar("R", bound=Request)
REMEMBER_STEP = f"{AGENT_STEP_PREFIX}remember"
IN_PROCESS = "agent"  # who asked, in the audit log, when a caller in this process says nothing
# what an API caller does about a conflict (the CLI's answer is `anima import --update`)
MESSAGE_CONFLICT_ADVICE = "a stored message does not change: send the new text under a new message_id"
CONVERSATION_CONFLICT_ADVICE = (
    "change it with PUT /v1/animas/{anima}/conversations/{conversation_id} (AnimaMemory.open_conversation)"
)


class WrongAnimaError(AccessError):
    """A message addressed to an anima other than the one this facade is bound to."""


# --- the facade ---------------------------------------------------------------------------


class AnimaMemory:
    """The memory of one anima, for the agent that is talking right now.

    ``db`` is an open :class:`Database` (shared, not closed here), a PostgreSQL URL, or None
    for the configured store (ANIMA_DATABASE_URL, else the embedded server under ANIMA_HOME).
    """

    def __init__(self, db: Database | str | None, anima_id: str, *, settings: Settings | None = None) -> None:
        if not isinstance(anima_id, str):
            raise InputError("must be a string", field="anima_id")
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
        self._vectors = Backfill(self.db, anima_id, lambda: make_embedder(settings), settings.embedder.batch)

    def close(self) -> None:
        self._vectors.wait(self.settings.embedder.timeout_s)
        if self._owns_db:
            self.db.close()

    def __enter__(self) -> Self:
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

    def _request(self, model: type[R], **values: Any) -> R:
        """The arguments as `model` (memory/models.py) validates them at every door, with this
        facade's configured limits."""
        return model.of(self.settings, **values)

    # --- writing ------------------------------------------------------------------------

    def validate_messages(self, messages: Iterable[MessageRecord | Mapping[str, Any]]) -> list[ArchiveRecord]:
        """The archive's validation with this facade's configured limits (message size,
        timestamp years), message by message; the first bad one raises InputError naming
        its index, message_id and field. A batch holds 1 to MAX_BATCH messages."""
        records: list[ArchiveRecord] = []
        context = context_of(self.settings)
        raws: Sequence[MessageRecord | Mapping[str, Any]] = self._request(
            MessagesRequest, messages=batch(messages)
        ).messages
        for i, raw in enumerate(raws):
            if isinstance(raw, MessageRecord):  # built without the limits: validated again with them
                raw = raw.model_dump(exclude_unset=True)
            if isinstance(raw, Mapping):
                try:
                    msg = MessageRecord.model_validate(raw, context=context)
                except ValidationError as exc:
                    loc, reason = field_errors(exc)[0]
                    mid = raw.get("message_id")
                    raise InputError(
                        reason + (f" (message_id {mid!r})" if isinstance(mid, str) else ""),
                        field=f"messages[{i}].{loc}",
                        message_id=mid if isinstance(mid, str) else None,
                    ) from None
            else:
                raise InputError(
                    f"a message is a JSON object, got {type(raw).__name__}", field=f"messages[{i}]"
                )
            if msg.anima_id is not None and msg.anima_id != self.anima_id:
                raise WrongAnimaError(
                    f"messages[{i}].anima_id: message {msg.message_id!r} names another anima than this one",
                    field="anima_id",
                )
            records.append(ArchiveRecord.model_construct(**{**dict(msg), "anima_id": self.anima_id}))
        return records

    def append(self, messages: MessageRecord | Mapping[str, Any] | Iterable[Any]) -> AppendResult:
        """Store one message or many, in one transaction (all or nothing), validated like
        ``anima import``. Idempotent: a (conversation_id, message_id) already stored is
        skipped, so a host may re-send a turn after a timeout.

        Assistant messages should keep the ``[[anima:f-N]]`` markers of the memories they
        used: the night counts them (see the module docstring)."""
        records = self.validate_messages(batch(messages))
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
                raise Conflict(
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
        req = self._request(
            OpenConversationRequest,
            conversation_id=conversation_id,
            title=title,
            platform=platform,
            debug=debug,
        )
        with self.db.transaction() as conn:
            row = open_conversation(
                conn,
                self._audit(conn, f"{AGENT_STEP_PREFIX}conversation"),
                self.anima_id,
                req.conversation_id,
                platform=req.platform,
                title=req.title,
                debug=req.debug,
            )
        return ConversationInfo.model_validate(row)

    def close_conversation(self, conversation_id: str) -> ConversationInfo:
        """Mark a conversation closed. NotFound for an unknown conversation."""
        req = self._request(ConversationRequest, conversation_id=conversation_id)
        with self.db.transaction() as conn:
            row = close_conversation(
                conn,
                self._audit(conn, f"{AGENT_STEP_PREFIX}conversation"),
                self.anima_id,
                req.conversation_id,
            )
        return ConversationInfo.model_validate(row)

    def remember(self, content: str, type: MemoryType = "world", session_id: str | None = None) -> Remembered:
        """Store an explicit memory now, through the memory tool executor (validated and
        audited like a night's `create_semantic_memory`), with `session_id` as its source.
        Its audit event carries today's local day, so that night's deep sleep (incremental
        or full) reviews it with the rest: merges it into a duplicate, deprecates it when
        contradicted."""
        req = self._request(RememberRequest, content=content, type=type, session_id=session_id)
        with self.db.transaction() as conn:
            now = db_now(conn)
            scope = Scope(anima_id=self.anima_id, tools=("create_semantic_memory",), default_observed_at=now)
            executor = ToolExecutor(conn, scope, self._audit(conn, REMEMBER_STEP))
            args: dict[str, Any] = {"type": req.type, "content": req.content}
            args["source_sessions"] = [req.session_id] if req.session_id else []
            result = executor.call("create_semantic_memory", args)
            if result.is_error:
                raise InputError(_tool_field_error(result.content), field=_tool_field(result.content))
            mem = executor.memories.get(executor.created_ids[-1])
            assert mem is not None  # created in this transaction
        return Remembered(id=mem.ref, content=mem.content, type=mem.type, source_sessions=mem.source_sessions)

    # --- corrections and forgetting (anima_pipeline/memory/forget.py) ---------------------------

    def memory(self, ref: str) -> MemoryInfo:
        """One memory by id (f-N). NotFound when this anima has no such memory, or it was erased."""
        req = self._request(MemoryRequest, id=ref)
        with self.db.transaction() as conn:
            return MemoryInfo.of(forgetting.get_memory(conn, self.anima_id, req.id))

    def deprecate(self, ref: str, reason: str, *, superseded_by: str | None = None) -> MemoryInfo:
        """Retire a memory (soft: it stays in the store, out of recall), with a reason."""
        req = self._request(DeprecateRequest, id=ref, reason=reason, superseded_by=superseded_by)
        return self._correct("deprecate_semantic_memory", req.model_dump(exclude_none=True))

    def update(self, ref: str, **fields: Any) -> MemoryInfo:
        """Correct a memory: only the fields given change (content, type, confidence,
        source_sessions, observed_at, valid_from, valid_until; `source_sessions=[]` clears).
        The memory is settled: the nights leave the correction as it is."""
        req = self._request(UpdateRequest, id=ref, **fields)
        return self._correct("update_semantic_memory", req.model_dump(exclude_unset=True))

    def pin(self, ref: str, reason: str | None = None) -> MemoryInfo:
        """Keep a memory resident in every context."""
        req = self._request(PinRequest, id=ref, reason=reason)
        return self._correct("pin_semantic_memory", req.model_dump(exclude_none=True))

    def unpin(self, ref: str, reason: str) -> MemoryInfo:
        """Stop keeping a memory resident (it stays active and searchable)."""
        req = self._request(UnpinRequest, id=ref, reason=reason)
        return self._correct("unpin_semantic_memory", req.model_dump())

    def delete(self, ref: str, *, requested_by: str | None = None) -> ForgetReport:
        """Erase a memory for good (and what was merged into it): a purge, with a tombstone."""
        return self.forget("memory", ref, purge=True, requested_by=requested_by)

    def forget(
        self, kind: TargetKind, target_id: str, *, purge: bool = False, requested_by: str | None = None
    ) -> ForgetReport:
        """Forget a message (m-N), a conversation, a memory (f-N) or this anima (its id):
        soft by default, erased with `purge`; see anima_pipeline/memory/forget.py."""
        req = self._request(
            ForgetRequest, kind=kind, target_id=target_id, purge=purge, requested_by=requested_by
        )
        return forgetting.forget(
            self.db,
            self.settings,
            self.anima_id,
            req.kind,
            req.target_id,
            purge=req.purge,
            requested_by=req.requested_by or IN_PROCESS,
        )

    def _correct(self, tool: str, args: dict[str, Any]) -> MemoryInfo:
        return forgetting.correct(self.db, self.settings, self.anima_id, tool, args)

    # --- reading ------------------------------------------------------------------------

    def context(self, query: str, session_id: str | None = None) -> AssembledContext:
        """What to put into the model's context before answering `query`, in sections
        (``resident``, ``summaries``, ``memories``, ``episodic``: each its items within its
        character budget, see `recall.sections`) and `rendered`, the block for the prompt.
        `session_id` is the current conversation: its messages, and memories sourced only
        from it, are already in the window and are not recalled again. Memories appear as
        ``[[anima:f-N]]`` lines; keep the marker when the reply uses one."""
        req = self._request(ContextRequest, query=query, session_id=session_id)
        # this facade's own appends are searchable by meaning before its next context
        self._vectors.wait(self.settings.embedder.timeout_s)
        with self.db.transaction() as conn:
            return assemble_context(
                conn, self.anima_id, req.query, settings=self.settings, session_id=req.session_id
            )

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
        req = self._request(
            SearchRequest, query=query, types=types, since=since, until=until, limit=limit, offset=offset
        )
        return self._search(search_memories, req, types=req.types)

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
        req = self._request(
            MessageSearchRequest,
            query=query,
            conversation_id=conversation_id,
            since=since,
            until=until,
            limit=limit,
            offset=offset,
        )
        return self._search(search_messages, req, conversation_id=req.conversation_id)

    def _search(
        self, find: Callable[..., SearchPage], req: SearchRequest | MessageSearchRequest, **filters: Any
    ) -> SearchPage:
        """One page of `find` (recall.assemble's search_memories or search_messages)."""
        self._vectors.wait(self.settings.embedder.timeout_s)  # this facade's appends, by meaning too
        with self.db.transaction() as conn:
            return find(
                conn,
                self.anima_id,
                req.query,
                settings=self.settings,
                since=req.since,
                until=req.until,
                limit=req.limit,
                offset=req.offset,
                **filters,
            )

    def message(self, ref: str, *, offset: int = 0, limit: int = READ_DEFAULT) -> MessagePart:
        """One past message by id (m-N, as a context or `search_messages` shows it): `limit`
        characters of its text from `offset`, its length, and `next_offset` while there is
        more. A context and a search page show a long message in part (`truncated`); this
        reads the rest. NotFound when this anima has no such message, or it was forgotten
        or erased."""
        req = self._request(MessageRequest, id=ref, offset=offset, limit=limit)
        with self.db.transaction() as conn:
            return read_message(conn, self.anima_id, req.number, req.offset, req.limit)

    def working_context(self, session_id: str, message: str, *, budget: int | None = None) -> WorkingContext:
        """Everything the model gets for the turn that answers `message` in conversation
        `session_id`, within `budget` tokens (default: ANIMA_CONTEXT_WINDOW_TOKENS less
        ANIMA_CONTEXT_RESERVE_TOKENS): `system` (the self blocks, resident memories, the
        temporal segment and the recall sections, folded: `recall.working`), `messages` (the
        session's stored messages as summary | slim | raw: `recall.session_view`) and `segments`
        (characters, estimated tokens, items and cut flag of each; they add up to `chars` and
        `tokens`). `message` itself is not stored here (append it after the turn) and its
        tokens are kept free in the budget.

        When the session's turns no longer fit, a compaction cycle moves the oldest into the
        session's rolling summary, kept per (session, watermark) so the next turns reuse it,
        after a flush has written the durable facts in them as memories sourced from the
        session (light sleep stage 1's rules, once per cycle)."""
        self._request(WorkingContextRequest, session_id=session_id, message=message, budget=budget)
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
                conn, self.anima_id, self.settings.recall.resident_top_n, self.settings.recall.pinned_max
            )
        return [memory_item(m.model_dump(), score=0.0, why="resident", tz=self.settings.tz) for m in memories]

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
