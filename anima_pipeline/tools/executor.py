"""The one way a step changes the store: validate a tool call, check it against the step's
scope, apply it, audit it.

The executor works inside the transaction the step opened, so the valid calls of a step
commit together when the step ends and an exception anywhere leaves nothing behind. Each
call runs in its own savepoint: a call the database refuses is answered with is_error and
undone alone. An invalid call writes nothing and gets a message the model can act on.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from itertools import groupby
from typing import Any

import psycopg
from pydantic import ValidationError

from anima_pipeline.core.citations import inert
from anima_pipeline.core.errors import AnimaError
from anima_pipeline.llm.contract import OfflinePlan, StepRequest, ToolCall, ToolResult
from anima_pipeline.llm.offline import OfflineEngine
from anima_pipeline.store import proposals as review
from anima_pipeline.store.db import Connection, db_now
from anima_pipeline.store.events import Audit
from anima_pipeline.store.layers import AnchorRepo, AutobiographyRepo, DreamRepo, SelfBlockRepo, TemporalRepo
from anima_pipeline.store.memories import MemoryRepo, SemanticMemory
from anima_pipeline.tools import schemas as s
from anima_pipeline.tools.scope import Scope


class ToolError(AnimaError, ValueError):
    """A refused call; the message goes back to the model as an is_error tool_result (the tool
    area of anima_pipeline.core.errors)."""

    code = "tool_refused"
    http_status = 422
    retryable = False  # the store failed (a lost connection, a deadlock): not the call's fault


CREATE = "create_semantic_memory"  # the one tool whose runs `call_many` writes together

# What review mode (Audit.review, docs/review.md) turns into proposals: the operations that
# retire or rewrite what the anima knows. Creations, updates of sources and confidence stay.
REVIEWED_TOOLS = frozenset(
    {
        "deprecate_semantic_memory",
        "merge_semantic_memories",
        "split_semantic_memory",
        "unpin_semantic_memory",
    }
)


def _validation_message(name: str, exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"]) or "input"
        msg = "unknown field" if err["type"] == "extra_forbidden" else err["msg"]
        parts.append(f"field '{loc}': {msg}")
    return f"{name}: invalid input: " + "; ".join(parts)


class ToolExecutor:
    def __init__(self, conn: Connection, scope: Scope, audit: Audit) -> None:
        self.conn = conn
        self.scope = scope
        self.audit = audit
        self.memories = MemoryRepo(conn, audit)
        self.stats: Counter[str] = Counter()
        self.log: list[dict[str, Any]] = []
        self.created_ids: list[int] = []
        self.said: list[str] = []  # the model's words each time it wrote nothing (declined)
        self.marks: dict[str, Any] = {}  # added to what this executor writes (written_by offline)
        self._handlers: dict[str, Callable[[Any], ToolResult]] = {
            CREATE: self._create,
            "update_semantic_memory": self._update,
            "deprecate_semantic_memory": self._deprecate,
            "merge_semantic_memories": self._merge,
            "split_semantic_memory": self._split,
            "pin_semantic_memory": self._pin,
            "unpin_semantic_memory": self._unpin,
            "create_emotional_anchor": self._anchor,
            "create_autobiographical_memory": self._narrative,
            "deprecate_autobiographical_memory": self._deprecate_narrative,
            "write_self_block": self._self_block,
            "write_temporal_summary": self._summary,
            "write_dream_entry": self._dream,
        }

    def declined(self, said: str) -> None:
        """The model wrote nothing and said why (restraint): recorded with the step, not an error."""
        self.said.append(said)
        self.audit.declined.append(said)

    def without_model(self, request: StepRequest, plan: OfflinePlan) -> None:
        """After the model declined: write what the product needs anyway (a day summary) with
        the offline planner, each row marked written_by offline with the model's words."""
        self.marks = {"written_by": OfflineEngine.name, "declined_text": " | ".join(self.said)[:1000]}
        OfflineEngine().run(request, self, plan)
        self.stats["written_offline"] += 1

    # the ToolRunner protocol
    def call(self, name: str, input: dict[str, Any]) -> ToolResult:
        self._counted()
        try:
            result = self._call(name, input)
        except ToolError as exc:
            result = self._refused(exc)
        return self._noted(name, input, result)

    def _counted(self) -> None:
        self.stats["calls"] += 1
        self.audit.tools.calls += 1

    def _refused(self, exc: ToolError) -> ToolResult:
        self.stats["errors"] += 1
        self.audit.tools.refused.append(str(exc))
        self.audit.tools.retryable |= exc.retryable
        return ToolResult(content=str(exc), is_error=True)

    def _noted(self, name: str, input: dict[str, Any], result: ToolResult) -> ToolResult:
        self.log.append({"tool": name, "input": input, "is_error": result.is_error, "result": result.content})
        return result

    # the BatchRunner protocol
    def call_many(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        """Each call's result, as `call` one at a time would give it; a run of creations is
        written together (`MemoryRepo.create_many`: one savepoint, pipelined)."""
        results: list[ToolResult] = []
        for creating, run in groupby(calls, key=lambda c: c.name == CREATE):
            group = list(run)
            if creating and len(group) > 1:
                results += self._create_run(group)
            else:
                results += [self.call(c.name, c.input) for c in group]
        return results

    def _create_run(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        checked: list[ToolError | dict[str, Any]] = []
        for c in calls:
            try:
                checked.append(self._create_values(self._checked(c.name, c.input)))
            except ToolError as exc:
                checked.append(exc)
        try:
            with self.conn.transaction():
                made = iter(
                    self.memories.create_many(
                        self.scope.anima_id, [v for v in checked if isinstance(v, dict)]
                    )
                )
        except psycopg.Error:
            # the store refused one of them: one at a time, each savepoint names and undoes it alone
            return [self.call(c.name, c.input) for c in calls]
        results = []
        for c, v in zip(calls, checked, strict=True):
            self._counted()
            results.append(
                self._noted(
                    c.name,
                    c.input,
                    self._refused(v) if isinstance(v, ToolError) else self._created(next(made)),
                )
            )
        return results

    def _checked(self, name: str, input: dict[str, Any]) -> Any:
        """The call's validated arguments, or the ToolError that refuses it before any write."""
        if name not in s.TOOLS:
            raise ToolError(f"unknown tool {name!r}; this step may use: {', '.join(self.scope.tools)}")
        if name not in self.scope.tools:
            raise ToolError(
                f"tool {name!r} is not available in this step; use one of: {', '.join(self.scope.tools)}"
            )
        if not isinstance(input, dict):
            raise ToolError(f"{name}: the input must be a JSON object")
        try:  # content is data: no text a tool writes may carry a citation marker
            return s.TOOLS[name].model_validate(_inert(input))
        except ValidationError as exc:
            raise ToolError(_validation_message(name, exc)) from None

    def _call(self, name: str, input: dict[str, Any]) -> ToolResult:
        args = self._checked(name, input)
        try:
            with self.conn.transaction():
                if self.audit.review and name in REVIEWED_TOOLS:
                    return self._propose(name, input, args)
                return self._handlers[name](args)
        except psycopg.Error as exc:
            # a client-side refusal (e.g. a NUL character in text) has no diag: its message is the reason
            text = str(exc).strip()
            diag = exc.diag.message_primary or (text.splitlines()[0] if text else type(exc).__name__)
            refused = ToolError(f"{name}: the store refused the write: {diag}")
            refused.retryable = isinstance(
                exc, psycopg.OperationalError
            )  # deadlock, serialization, lost connection
            raise refused from None

    def _propose(self, name: str, input: dict[str, Any], args: Any) -> ToolResult:
        """Review mode: check the call exactly as if it were applied (a dry run whose writes are
        rolled back), then store it as a proposal that only a person's approval applies."""
        stats, created = self.stats.copy(), list(self.created_ids)
        try:
            with self.conn.transaction(force_rollback=True):
                self._handlers[name](args)  # raises ToolError for a call that could not be applied
        finally:
            self.stats, self.created_ids = stats, created
        refs = list(getattr(args, "source_ids", None) or [args.id])
        memory_ids = [s.parse_fact_id(r) for r in refs]
        if (rejected := review.rejected_before(self.conn, self.scope.anima_id, name, input)) is not None:
            self.stats["review_rejected_before"] += 1
            return ToolResult(
                content=f"a person rejected this {name} before ({rejected.ref}); leave {', '.join(refs)} as they are",
                data={"proposal": rejected.ref},
            )
        proposal, new = review.add(
            self.conn, self.audit, name, input, getattr(args, "reason", None), memory_ids
        )
        self.stats["proposed" if new else "proposed_before"] += 1
        return ToolResult(
            content=f"proposed for review as {proposal.ref}: nothing changes until a person approves it, "
            f"so {', '.join(refs)} stay as they are",
            data={"proposal": proposal.ref},
        )

    # id and scope checks
    def _memory(self, ref: str, *, active: bool = True) -> SemanticMemory:
        try:
            mid = s.parse_fact_id(ref)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        mem = self.memories.get(mid)
        if mem is None or mem.anima_id != self.scope.anima_id:
            raise ToolError(f"{ref} does not exist; use an id you were shown")
        in_scope = self.scope.memory_ids is None or mid in self.scope.memory_ids or mid in self.created_ids
        if not in_scope:
            raise ToolError(
                f"{ref} is outside this step's scope; you may change only {self.scope.describe_memories()}"
            )
        if active and mem.status != "active":
            hint = f"; it was superseded by f-{mem.superseded_by}" if mem.superseded_by else ""
            raise ToolError(f"{ref} is deprecated{hint}; act on an active memory")
        return mem

    def _changeable(self, ref: str) -> SemanticMemory:
        """An active memory this step may rewrite: never one the user corrected (settled)."""
        mem = self._memory(ref)
        if mem.settled_at is not None and not self.scope.may_change_settled:
            raise ToolError(
                f"{ref} was corrected by the user on {mem.settled_at:%Y-%m-%d}; it is settled: leave it as it is"
            )
        return mem

    def _check_sources(self, sources: list[str], also_allowed: Sequence[str] = ()) -> list[str]:
        if any(not isinstance(x, str) or not x.strip() for x in sources):
            raise ToolError("source_sessions must be non-empty conversation ids")
        allowed = self.scope.conversation_ids
        if allowed is not None:
            outside = sorted(set(sources) - set(allowed) - set(also_allowed))
            if outside:
                shown = ", ".join(sorted(allowed)[:8])
                raise ToolError(
                    f"source_sessions {outside} are not among this input's conversations ({shown}); "
                    "cite only conversations you were shown"
                )
        return sorted(dict.fromkeys(sources))

    @staticmethod
    def _content(text: str) -> str:
        text = " ".join(text.split())
        if not text:
            raise ToolError("content must not be empty")
        return text

    # semantic memory
    def _create(self, a: s.CreateSemanticMemory) -> ToolResult:
        return self._created(self.memories.create(self.scope.anima_id, self._create_values(a)))

    def _created(self, mem: SemanticMemory) -> ToolResult:
        self.created_ids.append(mem.id)
        self.stats["created"] += 1
        return ToolResult(content=f"created {mem.ref}", data={"id": mem.ref})

    def _create_values(self, a: s.CreateSemanticMemory) -> dict[str, Any]:
        """The new memory's columns, or the ToolError that refuses it (no database)."""
        if a.source_sessions is not None:
            sources = self._check_sources(a.source_sessions)
        elif len(self.scope.default_sources) > 1:
            # Citing every conversation of the input would tie the fact to talks it was not in.
            shown = ", ".join(self.scope.default_sources[:8])
            raise ToolError(
                f"source_sessions is required: this input has {len(self.scope.default_sources)} "
                f"conversations ({shown}); name the one(s) the fact was said in"
            )
        else:
            sources = list(self.scope.default_sources)
        return {
            "type": a.type,
            "content": self._content(a.content),
            "confidence": a.confidence,
            "source_sessions": sources,
            "observed_at": a.observed_at or self.scope.default_observed_at,
            "valid_from": a.valid_from,
            "valid_until": a.valid_until,
        }

    def _update(self, a: s.UpdateSemanticMemory) -> ToolResult:
        mem = self._changeable(a.id)
        changes = a.model_dump(exclude_unset=True, exclude={"id"})
        if changes.get("content") is not None:  # null, as for every field but the validity: unchanged
            changes["content"] = self._content(changes["content"])
        if "source_sessions" in changes and changes["source_sessions"] is not None:
            # Sources accumulate: an update names today's conversations, and the older evidence
            # stays cited. Only an explicit empty list clears them (the one way to drop wrong sources).
            cited = self._check_sources(changes["source_sessions"], mem.source_sessions)
            changes["source_sessions"] = sorted(set(mem.source_sessions) | set(cited)) if cited else []
        changes = {k: v for k, v in changes.items() if v is not None or k in ("valid_until", "valid_from")}
        changed = {k: v for k, v in changes.items() if getattr(mem, k) != v}
        if not changed:
            self.stats["noop"] += 1
            return ToolResult(content=f"{a.id} already says that; nothing changed", data={"id": a.id})
        self.memories.update(mem.id, changed)
        self.stats["updated"] += 1
        return ToolResult(content=f"updated {a.id}: {', '.join(sorted(changed))}", data={"id": a.id})

    def _deprecate(self, a: s.DeprecateSemanticMemory) -> ToolResult:
        mem = self._memory(a.id)
        successor = None
        if a.superseded_by is not None:
            try:  # named like a schema refusal, so a door can say which field (forget.correct)
                succ = self._memory(a.superseded_by)
            except ToolError as exc:
                raise ToolError(f"deprecate_semantic_memory: field 'superseded_by': {exc}") from None
            if succ.id == mem.id:
                raise ToolError(f"{a.id} cannot supersede itself")
            successor = succ.id
        if mem.settled_at is not None and not self.scope.may_change_settled:
            # only newer evidence retires a user's correction: a fact learned after it
            newer = a.superseded_by is not None and succ.created_at > mem.settled_at
            if not newer:
                self._changeable(a.id)  # raises: settled
        self.memories.deprecate(
            mem.id, a.reason, superseded_by=successor, valid_until=a.valid_until or _now(self.conn)
        )
        self.stats["deprecated"] += 1
        return ToolResult(content=f"deprecated {a.id}", data={"id": a.id})

    def _merge(self, a: s.MergeSemanticMemories) -> ToolResult:
        if len(a.source_ids) < 2:
            raise ToolError(
                "merge_semantic_memories needs at least two source ids; to change a single memory "
                "use update_semantic_memory"
            )
        sources = [self._changeable(ref) for ref in a.source_ids]
        # compare the resolved ids, not the strings: "f-3" and "f-03" are the same memory
        if len({m.id for m in sources}) != len(sources):
            raise ToolError(f"merge_semantic_memories: source_ids repeat an id: {a.source_ids}")
        observed = [m.observed_at for m in sources if m.observed_at is not None]
        pinned = [m for m in sources if m.pinned]
        merged = self.memories.create(
            self.scope.anima_id,
            {
                "type": a.type or sources[0].type,
                "content": self._content(a.content),
                "confidence": a.confidence
                if a.confidence is not None
                else max(m.confidence for m in sources),
                "source_sessions": sorted({x for m in sources for x in m.source_sessions}),
                "observed_at": min(observed) if observed else None,
                "valid_from": min((m.valid_from for m in sources if m.valid_from), default=None),
                # a merge never silently unpins: the merged memory keeps the pin of any source
                "pinned": bool(pinned),
                "pinned_at": min((m.pinned_at for m in pinned if m.pinned_at), default=None),
                "reference_count": sum(m.reference_count for m in sources),
            },
        )
        self.created_ids.append(merged.id)
        for m in sources:
            self.memories.deprecate(m.id, f"merged into {merged.ref}", superseded_by=merged.id, op="merge")
        self.stats["merged"] += len(sources)
        self.stats["created"] += 1
        return ToolResult(
            content=f"merged {', '.join(a.source_ids)} into {merged.ref}",
            data={"id": merged.ref, "sources": a.source_ids},
        )

    def _split(self, a: s.SplitSemanticMemory) -> ToolResult:
        mem = self._changeable(a.id)
        parts = [self._content(p) for p in a.parts]
        if len(set(parts)) != len(parts):
            raise ToolError("split_semantic_memory: two parts are the same; give each independent fact once")
        created = []
        for part in parts:
            new = self.memories.create(
                self.scope.anima_id,
                {
                    "type": mem.type,
                    "content": part,
                    "confidence": mem.confidence,
                    "source_sessions": mem.source_sessions,
                    "observed_at": mem.observed_at,
                    "valid_from": mem.valid_from,
                    "valid_until": mem.valid_until,
                    "pinned": mem.pinned,
                    "pinned_at": mem.pinned_at,
                },
            )
            self.created_ids.append(new.id)
            created.append(new.ref)
        self.memories.deprecate(
            mem.id, f"split into {', '.join(created)}", superseded_by=int(created[0][2:]), op="split"
        )
        self.stats["split"] += 1
        self.stats["created"] += len(created)
        return ToolResult(
            content=f"split {a.id} into {', '.join(created)}", data={"id": a.id, "parts": created}
        )

    def _pin(self, a: s.PinSemanticMemory) -> ToolResult:
        mem = self._changeable(a.id)
        if mem.pinned:
            return ToolResult(content=f"{a.id} is already pinned", data={"id": a.id})
        self.memories.update(mem.id, {"pinned": True, "pinned_at": _now(self.conn)}, op="pin")
        self.stats["pinned"] += 1
        return ToolResult(content=f"pinned {a.id}", data={"id": a.id})

    def _unpin(self, a: s.UnpinSemanticMemory) -> ToolResult:
        mem = self._changeable(a.id)
        if not mem.pinned:
            return ToolResult(content=f"{a.id} is not pinned", data={"id": a.id})
        self.memories.update(mem.id, {"pinned": False, "pinned_at": None}, op="unpin")
        self.stats["unpinned"] += 1
        return ToolResult(content=f"unpinned {a.id}: {a.reason}", data={"id": a.id})

    # limbic, autobiographical, self, temporal, dream
    def _anchor(self, a: s.CreateEmotionalAnchor) -> ToolResult:
        self._check_sources([a.conversation_id])
        row = AnchorRepo(self.conn, self.audit).create(self.scope.anima_id, a.model_dump())
        self.stats["anchors"] += 1
        return ToolResult(content=f"anchored {a.emotion} (e-{row['id']})", data={"id": f"e-{row['id']}"})

    def _narrative(self, a: s.CreateAutobiographicalMemory) -> ToolResult:
        memory_ids = [self._memory(ref, active=False).id for ref in a.source_memory_ids]
        sources = (
            self._check_sources(a.source_sessions)
            if a.source_sessions is not None
            else sorted({x for m in self.memories.get_many(memory_ids) for x in m.source_sessions})
        )
        values = a.model_dump(exclude={"source_memory_ids", "source_sessions"})
        values["title"] = " ".join(a.title.split())
        row = AutobiographyRepo(self.conn, self.audit).create(
            self.scope.anima_id, {**values, "source_memory_ids": memory_ids, "source_sessions": sources}
        )
        self.stats["narratives"] += 1
        return ToolResult(content=f"created narrative a-{row['id']}", data={"id": f"a-{row['id']}"})

    def _deprecate_narrative(self, a: s.DeprecateAutobiographicalMemory) -> ToolResult:
        try:
            nid = s.parse_narrative_id(a.id)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        repo = AutobiographyRepo(self.conn, self.audit)
        row = repo.get(nid)
        if row is None or row["anima_id"] != self.scope.anima_id:
            raise ToolError(f"{a.id} does not exist; use a narrative id you were shown")
        if self.scope.narrative_ids is not None and nid not in self.scope.narrative_ids:
            raise ToolError(f"{a.id} is outside this step's scope")
        if row["status"] != "active":
            raise ToolError(f"{a.id} is already deprecated")
        repo.deprecate(nid, a.reason)
        self.stats["narratives_deprecated"] += 1
        return ToolResult(content=f"deprecated {a.id}", data={"id": a.id})

    def _self_block(self, a: s.WriteSelfBlock) -> ToolResult:
        if a.name not in self.scope.self_blocks:
            allowed = ", ".join(sorted(self.scope.self_blocks)) or "none"
            raise ToolError(f"self block {a.name!r} is not written by this step (it may write: {allowed})")
        changed = SelfBlockRepo(self.conn, self.audit).write(
            self.scope.anima_id, a.name, a.content, self.audit.step
        )
        self.stats["self_blocks"] += int(changed)
        return ToolResult(content=f"wrote self block {a.name}" if changed else f"{a.name} unchanged")

    def _summary(self, a: s.WriteTemporalSummary) -> ToolResult:
        if a.level not in self.scope.summary_levels:
            raise ToolError(f"level {a.level!r} is not written by this step")
        if a.period_end < a.period_start:
            raise ToolError("period_end is before period_start")
        TemporalRepo(self.conn, self.audit).upsert(
            self.scope.anima_id,
            a.level,
            a.period_start,
            a.period_end,
            a.content,
            {"writer": self.audit.step, **self.marks},
        )
        self.stats["summaries"] += 1
        return ToolResult(content=f"wrote {a.level} summary for {a.period_start}")

    def _dream(self, a: s.WriteDreamEntry) -> ToolResult:
        if self.audit.day is None:
            raise ToolError("write_dream_entry needs a night (day) to file the entry under")
        for upd in a.confidence_updates:
            mem = self._memory(upd.id)
            if mem.settled_at is not None and not self.scope.may_change_settled:
                continue  # the user's correction keeps its confidence; the entry itself is kept
            if abs(mem.confidence - upd.new_confidence) > 1e-6:
                self.memories.update(mem.id, {"confidence": upd.new_confidence}, op="confidence")
                self.stats["confidence_updates"] += 1
        DreamRepo(self.conn, self.audit).upsert(
            self.scope.anima_id, self.audit.day, a.model_dump(mode="json")
        )
        self.stats["dreams"] += 1
        return ToolResult(content="dream entry written")


def _inert(value: Any) -> Any:
    """A tool input with every string made inert (citations.inert), whatever the field."""
    if isinstance(value, str):
        return inert(value)
    if isinstance(value, dict):
        return {k: _inert(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_inert(v) for v in value]
    return value


def _now(conn: Connection) -> datetime:
    return db_now(conn)
