"""Forget and correct: what an agent (or its operator) retires, fixes, unpins or erases.

Corrections of one memory, for the agent (facade, HTTP, MCP), each through the memory tool
executor (validated, scoped to the anima, audited like a night's tool call) under the step
``agent/correct``:

- ``deprecate``: retire it with a reason (soft; it stays in the store, out of recall);
- ``update``: the night's update rule: only the fields passed change, `source_sessions: []`
  clears them (passed sources are added, as in the night's update);
- ``pin`` / ``unpin``;
- ``delete``: erase it for good (a purge of the memory, below).

A correction *settles* the memory (`settled_at`): the nights leave it as it is. Deep sleep
does not merge, split, rewrite, re-pin or unpin it, and retires it only in favour of a fact
learned after the correction; light sleep treats it, and the wording it replaced, as known,
so re-reading the same messages never brings the old fact back.

``forget(target, purge=...)`` follows lineage from a message, a conversation, a memory or a
whole anima (store/erasure.py holds the queries):

- memories whose sources are all forgotten are deprecated (soft) or erased (purge);
- memories with other sources lose the forgotten ones and are rewritten from what remains
  (the memories merged into them that do not cite the forgotten conversations), else keep
  their text, which the remaining sources also say;
- anchors and narratives of those conversations are deprecated / erased, the dream entries
  and the day / week / month / year summaries of those days are deleted, and on a purge the
  self block versions written since go (the block returns to its last earlier version);
- citations of erased memories move to their successor, or go;
- soft: the messages are hidden (`forgotten_at`: out of recall and the nights; a revert of
  the forget brings them back). Purge: they are deleted, every earlier event of an erased
  row is scrubbed (before/after emptied, `erased_at` set: a revert skips it), the words only
  they held leave `recall_word`, and one tombstone event (ids, op, time, who asked, no
  content) records the purge.

Recomputation: the report's `recompute` lists the (day, steps) to run again (the summaries
of the forgotten days, the weeks / months / years over them on their closing days, the self
blocks on the last slept day); those steps' sleep_state rows are cleared (marked stale).
`anima forget` re-runs them through Dagster right away (`launch_night` with force, the same
run the UI launches); the HTTP and MCP faces leave them marked and the report names the
`anima sleep` command that does it.

The same forget twice changes nothing the second time (no second tombstone either).
"""

from __future__ import annotations

import uuid
from collections import defaultdict
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

from anima_pipeline.config import Settings
from anima_pipeline.core.errors import InputError, InternalError, NotFound
from anima_pipeline.core.steps import StepKey
from anima_pipeline.core.types import TargetKind
from anima_pipeline.core.validation import ExternalId, MemoryRef, MessageRef, check
from anima_pipeline.memory.models import ForgetReport, MemoryInfo, Recompute
from anima_pipeline.memory.quotes import Quotes
from anima_pipeline.store import catalog, vectors
from anima_pipeline.store import erasure as q
from anima_pipeline.store.animas import UnknownAnima, known_animas
from anima_pipeline.store.db import Connection, Database, anima_lock, db_now, forget_lock
from anima_pipeline.store.events import Audit
from anima_pipeline.store.layers import AutobiographyRepo
from anima_pipeline.store.memories import MemoryRepo, SemanticMemory
from anima_pipeline.store.shadows import list_shadows, open_shadow
from anima_pipeline.tools.executor import ToolExecutor
from anima_pipeline.tools.scope import Scope

CORRECT_STEP = q.CORRECT_STEP
FORGET_STEP = "forget"
CORRECTION_TOOLS = (
    "update_semantic_memory",
    "deprecate_semantic_memory",
    "pin_semantic_memory",
    "unpin_semantic_memory",
)
# what a forget re-runs, per day (steps of the night: night/registry.py)
DAY_STEPS = (StepKey.DAY_SUMMARY, StepKey.DREAM, StepKey.CASCADE)
CASCADE_STEP = StepKey.CASCADE
SELF_STEPS = (StepKey.AUTOBIOGRAPHY_SUMMARY, StepKey.SELF_REFRESHED)
TOMBSTONE_IDS = 100_000  # ids per table in a tombstone (the counts are always whole)


# ---- corrections -----------------------------------------------------------------------


def _audit(
    conn: Connection, anima_id: str, step: str, settings: Settings, run_id: str | None = None
) -> Audit:
    return Audit(
        conn=conn,
        anima_id=anima_id,
        run_id=run_id or f"agent-{uuid.uuid4().hex[:12]}",
        step=step,
        day=datetime.now(settings.tz).date(),
    )


def parse_ref(ref: str, field: str = "id") -> int:
    return int(check(MemoryRef, ref, field).removeprefix("f-"))


def check_target(kind: TargetKind, target_id: str) -> None:
    """Refuse a target id of the wrong form before it reaches SQL (PostgreSQL answers a NUL or
    a bigint cast of '²' with an error, which a door would turn into a 500): a conversation id
    with the other doors' words (NUL, lone surrogate, whitespace, over 200 characters), a
    message or memory id as m-N / f-N."""
    if kind == "conversation":
        check(ExternalId, target_id, "conversation_id")
    elif kind == "message":
        message_id(target_id)
    elif kind == "memory":
        parse_ref(target_id)


def message_id(ref: str) -> int:
    return int(check(MessageRef, ref, "message").removeprefix("m-"))


def get_memory(conn: Connection, anima_id: str, ref: str) -> SemanticMemory:
    """The anima's memory `ref` (f-N); NotFound for another anima's, unknown or erased ids."""
    mid = parse_ref(ref)
    mem = MemoryRepo(conn).get(mid)
    if mem is None or mem.anima_id != anima_id:
        raise NotFound("memory", f"f-{mid}", q.erased(conn, anima_id, "semantic_memory", mid), field="id")
    return mem


def correct(db: Database, settings: Settings, anima_id: str, tool: str, args: dict[str, Any]) -> MemoryInfo:
    """One correction (a tool of CORRECTION_TOOLS, its input as the night's tool takes it),
    in one transaction, settling the memory. InputError names the refused field."""
    if tool not in CORRECTION_TOOLS:
        raise InputError(f"not a correction: {tool!r}", field="tool")
    with db.transaction() as conn:
        anima_lock(conn, anima_id)  # never between a night's reads and writes
        mem = get_memory(conn, anima_id, str(args.get("id", "")))
        audit = _audit(conn, anima_id, CORRECT_STEP, settings)
        now = db_now(conn)
        scope = Scope(
            anima_id=anima_id, tools=CORRECTION_TOOLS, may_change_settled=True, default_observed_at=now
        )
        executor = ToolExecutor(conn, scope, audit)
        result = executor.call(tool, {**args, "id": mem.ref})
        if result.is_error:
            detail = result.content.split(": ", 1)[-1]
            field = None
            if "field '" in detail:
                field = detail.split("field '", 1)[1].split("'", 1)[0]
                detail = detail.split("': ", 1)[-1]
            raise InputError(detail, field=field)
        repo = MemoryRepo(conn, audit)
        after = repo.get(mem.id)
        assert after is not None  # the row this transaction just corrected
        if _fields(after) != _fields(mem):
            after = repo.update(mem.id, {"settled_at": now}, op="settle")
        return MemoryInfo.of(after)


def _fields(m: SemanticMemory) -> dict[str, Any]:
    return m.model_dump(exclude={"updated_at", "settled_at"})


# ---- forgetting ------------------------------------------------------------------------


def forget(
    db: Database,
    settings: Settings,
    anima_id: str,
    kind: TargetKind,
    target_id: str,
    *,
    purge: bool = False,
    requested_by: str = "operator",
    in_shadow: bool = False,
) -> ForgetReport:
    """Forget a message (its id), a conversation, a memory (f-N) or the whole anima (its id),
    soft or with `purge`, in one transaction under the anima's lock; the report says what
    changed per table and what to recompute. NotFound for an id the anima never had. A purge
    is applied to every shadow store of this one too (store/shadows.py: copies of the store
    as of a day), so no copy keeps what was erased."""
    check_target(kind, target_id)
    run_id = f"forget-{uuid.uuid4().hex[:12]}"
    report = ForgetReport(
        anima_id=anima_id,
        target=f"{kind}:{target_id}",
        purge=purge,
        run_id=run_id,
        requested_by=requested_by,
        changed=False,
    )
    erased_ids: dict[str, list] = {}
    with db.transaction() as conn:
        if purge:
            _check_catalog(conn)
        anima_lock(conn, anima_id)
        forget_lock(conn, anima_id)  # a working context compacting a session waits, or is waited for
        audit = _audit(conn, anima_id, FORGET_STEP, settings, run_id)
        if kind == "anima":
            _forget_anima(conn, settings, anima_id, target_id, report, audit)
        else:
            cascade = _Cascade(conn, settings, anima_id, report, audit)
            erased_ids = cascade.erased_ids
            if kind == "memory":
                cascade.memory(target_id)
            elif kind == "conversation":
                cascade.conversations([target_id])
            elif kind == "message":
                cascade.message(target_id)
            else:
                raise InputError(f"unknown target {kind!r}", field="target")
            if report.changed:
                cascade.forward()
        if report.changed and purge:
            q.tombstone(
                conn,
                anima_id,
                report.target,
                "purge",
                run_id,
                audit.day,
                {
                    "requested_by": requested_by,
                    "target": report.target,
                    "counts": {t: c.model_dump(exclude_defaults=True) for t, c in report.tables.items()},
                    "ids": {t: [str(i) for i in ids[:TOMBSTONE_IDS]] for t, ids in erased_ids.items()},
                },
            )
        elif report.changed:
            q.tombstone(
                conn,
                anima_id,
                report.target,
                "forget",
                run_id,
                audit.day,
                {"requested_by": requested_by, "target": report.target},
            )
    if report.changed and purge:
        _purge_files(settings, anima_id, report)
        if not in_shadow:
            report.shadows = _purge_shadows(db, settings, anima_id, kind, target_id, requested_by)
    if report.recompute:
        days = [r.day for r in report.recompute]
        report.recompute_command = (
            f"anima sleep --anima {anima_id} --force "
            + " ".join(f"--step {s}" for s in sorted({s for r in report.recompute for s in r.steps}))
            + f" --from {min(days)} --to {max(days)}"
        )
    return report


def _check_catalog(conn: Connection) -> None:
    """A purge promises to reach every place that keeps text (store/catalog.py): on a store
    with a table or a text column the catalog does not know, it cannot, and refuses."""
    unknown = catalog.missing(conn)
    if unknown:
        raise InternalError(
            "this store has tables or text columns that store/catalog.py does not know, so a purge "
            f"cannot say whether it reaches them: {', '.join(unknown)}; nothing was erased"
        )


def _forget_anima(
    conn: Connection, settings: Settings, anima_id: str, target_id: str, report: ForgetReport, audit: Audit
) -> None:
    if target_id != anima_id:
        raise InputError(f"this forget is bound to anima {anima_id!r}, not {target_id!r}", field="anima_id")
    counts = q.counts(conn, anima_id)
    if not any(n for t, n in counts.items() if t != "memory_event"):
        if not counts["memory_event"]:  # not even the tombstone of an earlier purge
            known = known_animas(conn, limit=21)
            raise UnknownAnima(
                f"unknown anima {anima_id!r}: it has no rows and was never purged; known: "
                + (", ".join(known[:20]) or "none")
                + (", …" if len(known) > 20 else ""),
                field="anima_id",
            )
        report.note = "nothing left: the anima has no rows (erased before)"
        return
    if report.purge:
        report.changed = True
        for table, n in q.purge_anima(conn, anima_id).items():
            if table == "api_key":
                report.note = f"{n} API key(s) revoked"
            elif n:
                report.table(table).erased = n
        return
    # soft: every memory deprecated, every message hidden, the derived layers retired
    cascade = _Cascade(conn, settings, anima_id, report, audit)
    convs = q.conversations_of(conn, anima_id)
    cascade.conversations(convs)
    repo = MemoryRepo(conn, audit)
    for m in repo.active(anima_id):
        repo.deprecate(m.id, f"forgotten: anima {anima_id}", op="forget")
        report.table("semantic_memory").deprecated += 1
        report.memories_deprecated.append(m.ref)
        report.changed = True
    if not report.changed:
        report.note = "already forgotten (every message hidden, every memory deprecated)"


class _Cascade:
    """One forget's walk through lineage, inside its transaction."""

    def __init__(
        self, conn: Connection, settings: Settings, anima_id: str, report: ForgetReport, audit: Audit
    ):
        self.conn, self.settings, self.anima, self.report, self.audit = (
            conn,
            settings,
            anima_id,
            report,
            audit,
        )
        self.purge = report.purge
        self.memories = MemoryRepo(conn, audit)
        self.days: set[date] = set()
        self.erased_texts: list[str] = []
        # what this forget retired or erased, for the rows of later days that quote it
        self.forgotten_texts: list[str] = []
        self.forgotten_ids: set[int] = set()
        self.plan: dict[date, set[str]] = defaultdict(set)
        self.erased_ids: dict[str, list] = defaultdict(list)  # for the tombstone

    # --- targets

    def _erased_before(self, what: str, at: datetime) -> None:
        """The same forget again: it changes nothing, and says when `what` was erased."""
        self.report.note = f"{what} was erased before ({at:%Y-%m-%d %H:%M:%S %Z})"

    def memory(self, ref: str) -> None:
        try:
            mem = get_memory(self.conn, self.anima, ref)
        except NotFound as gone:
            if gone.erased_at is None:
                raise
            # forgetting it again changes nothing, as for a message or a conversation
            self._erased_before(f"memory {gone.ref}", gone.erased_at)
            return
        if not self.purge:
            if mem.status == "active":
                self._forgotten_memories([mem])
                self.memories.deprecate(mem.id, "forgotten by request", op="forget")
                self.report.table("semantic_memory").deprecated += 1
                self.report.memories_deprecated.append(mem.ref)
                self._narratives([], [mem.id])
                self._days_of_memories([mem.id])
                self._derived_by_day()
                self.report.changed = True
            else:
                self.report.note = f"{mem.ref} is already deprecated"
            return
        # the memory and what was merged or split into it: the same knowledge
        ids = sorted({mem.id, *(r["id"] for r in q.predecessors(self.conn, [mem.id]))})
        self._days_of_memories(ids)
        self._narratives([], ids)
        self._erase_memories(ids)
        self._derived_by_day()
        self.report.changed = True

    def conversations(self, ids: list[str]) -> None:
        known = q.conversation_ids(self.conn, self.anima, ids)
        if not known:
            if len(ids) == 1:
                at = q.erased(self.conn, self.anima, "conversation", ids[0])
                if at is None:
                    raise NotFound("conversation", ids[0], field="conversation_id")
                self._erased_before(f"conversation {ids[0]}", at)
            return
        messages = q.message_ids(self.conn, self.anima, known)
        if not self.purge:
            hidden = q.hide_messages(self.conn, self.anima, messages)
            if not hidden:
                self.report.note = "already forgotten (every message hidden)"
                return
            self.audit.record("message", None, "hide", None, {"ids": messages, "conversations": known})
            self.forgotten_texts += q.texts(self.conn, "message", messages)
            self.report.table("message").hidden = hidden
        self.report.changed = True
        self.days |= set(q.message_days(self.conn, self.anima, messages, self.settings.timezone))
        self._sessions(known)
        if not self.purge:  # hidden messages are not searched by meaning either
            self._delete_vectors("message", messages)
        mems = q.memories_meeting(self.conn, self.anima, known)
        gone = set(known)
        orphans = [m["id"] for m in mems if not set(m["source_sessions"]) - gone]
        shared = [m for m in mems if set(m["source_sessions"]) - gone]
        self._retire_memories(orphans)
        self._narratives(known, orphans)
        self._anchors(q.anchors_of(self.conn, self.anima, known))
        self._rewrite_shared(shared, gone)
        self._derived_by_day()
        if self.purge:
            self.erased_texts += q.texts(self.conn, "message", messages)
            self._delete_vectors("message", messages)
            q.delete_conversations(self.conn, self.anima, known)
            self.report.table("conversation").erased = len(known)
            self.report.table("message").erased = len(messages)
            self.erased_ids["conversation"] += known
            self.erased_ids["message"] += messages
            t = self.report.table("message")
            t.events_scrubbed += q.scrub_events(self.conn, self.anima, "message", messages)
            self.report.table("conversation").events_scrubbed += q.scrub_events(
                self.conn, self.anima, "conversation", known
            )
            self._prune_words()

    def message(self, ref: str) -> None:
        mid = message_id(ref)
        msg = q.message(self.conn, self.anima, mid)
        if msg is None:
            at = q.erased(self.conn, self.anima, "message", mid)
            if at is None:
                raise NotFound("message", f"m-{mid}", field="message")
            self._erased_before(f"message m-{mid}", at)
            return
        if msg["forgotten_at"] is not None and not self.purge:
            self.report.note = f"message m-{mid} is already forgotten"
            return
        if not q.remaining_messages(self.conn, self.anima, msg["conversation_id"], [mid]):
            # the conversation's last remaining message: forgetting it is forgetting the conversation
            self.conversations([msg["conversation_id"]])
            return
        self.report.changed = True
        self.days |= set(q.message_days(self.conn, self.anima, [mid], self.settings.timezone))
        self._sessions([msg["conversation_id"]], from_message=mid)
        self._delete_vectors("message", [mid])
        derived = [m["id"] for m in q.derived_from_message(self.conn, self.anima, msg)]
        self._retire_memories(derived)
        self._narratives([], derived)
        anchors = [
            a
            for a in q.anchors_of(self.conn, self.anima, [msg["conversation_id"]])
            if self._anchor_at(a["id"]) == msg["created_at"]
        ]
        self._anchors(anchors)
        self._derived_by_day()
        if self.purge:
            self.erased_texts.append(msg["content"])
            self.report.table("message").erased = q.delete_rows(self.conn, "message", [mid])
            self.erased_ids["message"].append(mid)
            self.report.table("message").events_scrubbed += q.scrub_events(
                self.conn, self.anima, "message", [mid]
            )
            self._prune_words()
        else:
            self.report.table("message").hidden = q.hide_messages(self.conn, self.anima, [mid])
            self.forgotten_texts.append(msg["content"])
            self.audit.record(
                "message", mid, "hide", None, {"ids": [mid], "conversations": [msg["conversation_id"]]}
            )

    # --- memories

    def _retire_memories(self, ids: list[int]) -> None:
        if not ids:
            return
        if self.purge:
            self._days_of_memories(ids)
            self._erase_memories(ids)
            return
        for m in self.memories.get_many(ids):
            if m.status == "active":
                self._forgotten_memories([m])
                self.memories.deprecate(m.id, f"forgotten: {self.report.target}", op="forget")
                self.report.table("semantic_memory").deprecated += 1
                self.report.memories_deprecated.append(m.ref)

    def _forgotten_memories(self, mems: list[SemanticMemory]) -> None:
        self.forgotten_texts += [m.content for m in mems]
        self.forgotten_ids |= {m.id for m in mems}

    def _erase_memories(self, ids: list[int]) -> None:
        self.erased_texts += q.texts(self.conn, "semantic_memory", ids)
        self.forgotten_ids |= set(ids)
        moved, dropped = q.repoint_references(self.conn, ids)
        refs = self.report.table("memory_reference")
        refs.repointed += moved
        refs.erased += dropped
        q.unlink_successors(self.conn, ids)
        self._delete_vectors("memory", ids)
        proposals = q.proposals_of(self.conn, self.anima, ids)  # their input holds the memories' text
        if proposals:
            t = self.report.table("review_proposal")
            t.erased += q.delete_rows(self.conn, "review_proposal", proposals)
            t.events_scrubbed += q.scrub_events(self.conn, self.anima, "review_proposal", proposals)
        t = self.report.table("semantic_memory")
        t.erased += q.delete_rows(self.conn, "semantic_memory", ids)
        t.events_scrubbed += q.scrub_events(self.conn, self.anima, "semantic_memory", ids)
        self.report.memories_erased += [f"f-{i}" for i in ids]
        self.erased_ids["semantic_memory"] += ids

    def _rewrite_shared(self, shared: list[dict], gone: set[str]) -> None:
        """A memory with other sources keeps them; its text is rewritten from the memories
        merged into it that do not cite the forgotten conversations, when it has such."""
        for row in shared:
            keep = sorted(set(row["source_sessions"]) - gone)
            changes: dict[str, Any] = {"source_sessions": keep}
            parts = [p for p in q.merged_from(self.conn, row["id"]) if not set(p["source_sessions"]) & gone]
            if parts:
                text = " ".join(dict.fromkeys(p["content"].strip() for p in parts))
                if text != row["content"]:
                    changes["content"] = text
                    self.forgotten_texts.append(row["content"])
            self.memories.update(row["id"], changes, op="forget")
            t = self.report.table("semantic_memory")
            t.rewritten += 1
            self.report.memories_rewritten.append(f"f-{row['id']}")
        if self.purge and shared:
            ids = [r["id"] for r in shared]
            self.report.table("semantic_memory").events_scrubbed += q.scrub_memory_versions(
                self.conn, self.anima, ids, sorted(gone)
            )

    def _days_of_memories(self, ids: list[int]) -> None:
        self.days |= q.days_of_memories(self.conn, self.anima, ids)

    # --- the layers around memory

    def _sessions(self, conversations: list[str], from_message: int | None = None) -> None:
        n = q.drop_session_summaries(self.conn, self.anima, conversations, from_message)
        if n:
            self.report.table("session_summary").erased += n

    def _anchor_at(self, anchor_id: int) -> datetime | None:
        return q.anchor_time(self.conn, anchor_id)

    def _anchors(self, rows: list[dict]) -> None:
        ids = [r["id"] for r in rows]
        if not ids:
            return
        t = self.report.table("emotional_anchor")
        if self.purge:
            t.erased += q.delete_rows(self.conn, "emotional_anchor", ids)
            t.events_scrubbed += q.scrub_events(self.conn, self.anima, "emotional_anchor", ids)
            return
        for row in q.deprecate_anchors(self.conn, ids):
            before = {**row, "status": "active"}
            self.audit.record("emotional_anchor", row["id"], "forget", before, row)
            t.deprecated += 1

    def _narratives(self, conversations: list[str], memory_ids: list[int]) -> None:
        rows = q.narratives_of(self.conn, self.anima, conversations, memory_ids)
        if rows:
            self._drop_narratives(rows)

    def _drop_narratives(self, rows: list[dict]) -> None:
        """Erased (events scrubbed) on a purge, else the active ones deprecated."""
        t = self.report.table("autobiographical_memory")
        if self.purge:
            ids = [r["id"] for r in rows]
            t.erased += q.delete_rows(self.conn, "autobiographical_memory", ids)
            t.events_scrubbed += q.scrub_events(self.conn, self.anima, "autobiographical_memory", ids)
            return
        repo = AutobiographyRepo(self.conn, self.audit)
        for r in rows:
            if r["status"] == "active":
                repo.deprecate(r["id"], f"forgotten: {self.report.target}")
                t.deprecated += 1

    def _derived_by_day(self) -> None:
        """Summaries and dreams of the forgotten days go; self blocks since go back on a
        purge; each is listed for recomputation (and its sleep_state marked stale)."""
        if not self.days:
            return
        days = sorted(self.days)
        for d in days:
            self.plan[d] |= set(DAY_STEPS)
        summaries = q.summaries_covering(self.conn, self.anima, days)
        for s in summaries:
            if s["level"] != "day":
                self.plan[s["period_end"]].add(CASCADE_STEP)  # the day that closes the period writes it
        self._drop("temporal_summary", [s["id"] for s in summaries])
        self._drop("dream_journal", [r["id"] for r in q.dreams_of(self.conn, self.anima, days)])
        if self.purge:
            self._scrub_self(q.self_versions_since(self.conn, self.anima, days[0]))
        self._publish_plan(self_blocks=True)
        self.days = set()

    def _publish_plan(self, *, self_blocks: bool = False) -> None:
        """The plan as the report's recomputation: days up to the last slept one (a later day
        is done by its own night), with the self blocks on that day; those steps' sleep_state
        rows are marked stale."""
        last = q.last_slept_day(self.conn, self.anima)
        if last is not None and self_blocks:
            self.plan[last] |= set(SELF_STEPS)
        self.report.recompute = [
            Recompute(day=d, steps=sorted(steps))
            for d, steps in sorted(self.plan.items())
            if last and d <= last and steps
        ]
        pairs = [(r.day, s) for r in self.report.recompute for s in r.steps]
        if pairs:
            q.mark_stale(self.conn, self.anima, pairs)

    def _scrub_self(self, since: dict[str, int]) -> None:
        if not since:
            return
        history, events = q.scrub_self_versions(self.conn, self.anima, since)
        t = self.report.table("self_block")
        t.rewritten += len(since)
        t.events_scrubbed += events
        self.report.table("self_block_history").erased += history

    # --- later days: the derived rows that quote what was forgotten

    def forward(self) -> None:
        """Every catalogued place of learnt text (store/catalog.py), of any day, whose rows
        quote what this forget retired or erased (memory/quotes.py): dream entries and
        summaries are dropped and recomputed, self blocks go back to their last version
        before the quote, narratives, anchors and proposals are retired or erased, session
        summaries dropped, a step's words scrubbed; on a purge every audit event that still
        quotes it is scrubbed too."""
        texts = [*self.forgotten_texts, *self.erased_texts]
        words = q.unheld_words(self.conn, self.anima, q.words_of(texts), soft=not self.purge)
        quotes = Quotes(texts, self.forgotten_ids, words)
        if not quotes:
            return
        since: dict[str, int] = {}
        for table, columns in catalog.learnt_columns().items():
            handle = self._QUOTING.get(table)
            if handle is None:
                raise InternalError(f"forget: the catalogued place {table!r} has no rule for later days")
            rows = [r for r in q.learnt_rows(self.conn, self.anima, table, columns) if quotes(r["_text"])]
            if rows:
                handle(self, rows, quotes, since)
        if self.purge:
            self._scrub_self(since)
            ids = [e["id"] for e in q.event_texts(self.conn, self.anima) if quotes(e["text"])]
            self.report.table("memory_event").events_scrubbed += q.scrub_event_ids(self.conn, ids)
        self._publish_plan(self_blocks=bool(since))

    def _q_dreams(self, rows: list[dict], quotes: Quotes, since: dict[str, int]) -> None:
        self._drop("dream_journal", [r["id"] for r in rows])
        for r in rows:
            self.plan[r["day"]].add(StepKey.DREAM)

    def _q_summaries(self, rows: list[dict], quotes: Quotes, since: dict[str, int]) -> None:
        self._drop("temporal_summary", [r["id"] for r in rows])
        for r in rows:
            if r["level"] == "day":
                self.plan[r["period_start"]].add(StepKey.DAY_SUMMARY)
            else:
                self.plan[r["period_end"]].add(CASCADE_STEP)

    def _q_self(self, rows: list[dict], quotes: Quotes, since: dict[str, int]) -> None:
        for r in rows:  # a block (its current version) or one of its earlier versions
            since[r["name"]] = min(since.get(r["name"], r["version"]), r["version"])

    def _q_narratives(self, rows: list[dict], quotes: Quotes, since: dict[str, int]) -> None:
        self._drop_narratives(rows)

    def _q_anchors(self, rows: list[dict], quotes: Quotes, since: dict[str, int]) -> None:
        self._anchors([r for r in rows if self.purge or r["status"] == "active"])

    def _q_sessions(self, rows: list[dict], quotes: Quotes, since: dict[str, int]) -> None:
        keys = [(r["conversation_id"], r["watermark"]) for r in rows]
        n = q.delete_session_summaries(self.conn, self.anima, keys)
        if n:
            self.report.table("session_summary").erased += n

    def _q_proposals(self, rows: list[dict], quotes: Quotes, since: dict[str, int]) -> None:
        if not self.purge:
            return  # a soft forget keeps the record of what was proposed
        ids = [r["id"] for r in rows]
        t = self.report.table("review_proposal")
        t.erased += q.delete_rows(self.conn, "review_proposal", ids)
        t.events_scrubbed += q.scrub_events(self.conn, self.anima, "review_proposal", ids)

    def _q_steps(self, rows: list[dict], quotes: Quotes, since: dict[str, int]) -> None:
        if not self.purge:
            return
        scrubbed = [
            (r["day"], r["step"], quotes.scrub(r["stats"] or {}), None if quotes(r["error"]) else r["error"])
            for r in rows
        ]
        self.report.table("sleep_state").rewritten += q.set_step_stats(self.conn, self.anima, scrubbed)

    _QUOTING = {
        "dream_journal": _q_dreams,
        "temporal_summary": _q_summaries,
        "self_block": _q_self,
        "self_block_history": _q_self,
        "autobiographical_memory": _q_narratives,
        "emotional_anchor": _q_anchors,
        "session_summary": _q_sessions,
        "review_proposal": _q_proposals,
        "sleep_state": _q_steps,
    }

    def _drop(self, table: str, ids: list[int]) -> None:
        if not ids:
            return
        t = self.report.table(table)
        if self.purge:
            t.erased += q.delete_rows(self.conn, table, ids)
            t.events_scrubbed += q.scrub_events(self.conn, self.anima, table, ids)
            return
        for row in q.take_rows(self.conn, table, ids):  # derived text: recomputed, the old one audited
            self.audit.record(table, row["id"], "forget", row, None)
            t.erased += 1

    def _prune_words(self) -> None:
        if self.erased_texts:
            self.report.table("recall_word").erased += q.prune_recall_words(
                self.conn, self.anima, self.erased_texts
            )

    def _delete_vectors(self, kind: vectors.Kind, ids: list[int]) -> None:
        """Embeddings of erased rows, under every model (a no-op without pgvector)."""
        n = vectors.delete_vectors(self.conn, self.anima, kind, ids)
        if n:
            self.report.table("embedding").erased += n


def _purge_shadows(
    db: Database, settings: Settings, anima_id: str, kind: TargetKind, target_id: str, requested_by: str
) -> list[str]:
    done = []
    for shadow in list_shadows(db.url):
        name = shadow["name"]
        with open_shadow(db.url, name) as copy:  # migrated: a copy made before this version lacks erased_at
            try:
                forget(
                    copy,
                    settings,
                    anima_id,
                    kind,
                    target_id,
                    purge=True,
                    requested_by=requested_by,
                    in_shadow=True,
                )
            except NotFound:
                continue  # the copy is older than what was erased
        done.append(name)
    return done


def _purge_files(settings: Settings, anima_id: str, report: ForgetReport) -> None:
    """Deep sleep's per-round op logs of the anima hold memory text: the anima's files go
    (debug logs, rebuilt by the next night)."""
    logs = Path(settings.log_dir)
    if not logs.is_dir():
        return
    name = f"{quote(anima_id, safe='')}.json"
    removed = 0
    for path in logs.glob(f"deep_sleep_*/{name}"):
        path.unlink(missing_ok=True)
        removed += 1
    if removed:
        report.table("op_log_files").erased = removed


def recompute_ranges(report: ForgetReport) -> list[tuple[date, date, list[str]]]:
    """The report's recomputation as night runs: consecutive days with the same steps in one."""
    out: list[tuple[date, date, list[str]]] = []
    for r in report.recompute:
        if out and out[-1][2] == r.steps and out[-1][1] + timedelta(days=1) == r.day:
            out[-1] = (out[-1][0], r.day, r.steps)
        else:
            out.append((r.day, r.day, r.steps))
    return out
