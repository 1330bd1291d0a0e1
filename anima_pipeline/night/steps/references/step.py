"""Memory-ref-sync: the chat-time citation loop closed at night (docs/content_is_data.md, "Citations").

The agent cites a memory it used as ``[[anima:f-123]]``. This step (program bookkeeping,
no LLM) turns the day's citations into memory_reference rows, re-points references of
merged or deprecated memories to the end of their superseded_by chain (so a merge does not
reset what was learned about use), recomputes each active memory's decayed
reference_count and reports the resident set.

The decayed count: a reference inside ``recall.reference_decay_days`` before the night's
cutoff weighs ``recall.reference_recent_weight``, an older one ``recall.reference_stale_weight``
(config.py). The cutoff is ``night.end``, not the wall clock, so a backfill or a forced re-run
of an old day computes what that night computed. Resident = pinned ∪ top-N by reference_count
(``recall.resident_top_n``, as chat-time recall reads it); pinned is read capped at
``recall.pinned_max`` and an overflow is reported, never fixed by unpinning (the forgetting
contract).
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta
from typing import Any

from anima_pipeline.config import RecallSettings
from anima_pipeline.core.citations import CITATION
from anima_pipeline.core.steps import StepKey
from anima_pipeline.night.frame import Night, StepOutcome, StepResult, run_step
from anima_pipeline.night.steps.declaration import StepDef
from anima_pipeline.night.steps.references.preview import CHANGES
from anima_pipeline.recall.resident import resident_set
from anima_pipeline.store import references
from anima_pipeline.store.archive import animas_active_between
from anima_pipeline.store.db import Connection, Database
from anima_pipeline.store.events import Audit
from anima_pipeline.store.memories import MemoryRepo, supersede_links

STEP = StepKey.REFERENCES_SYNCED
_EPS = 1e-4  # reference_count is a real (float4): compare with a tolerance


def animas_for(conn: Connection, night: Night) -> list[str]:
    """Animas active that day, those whose memories changed that night (re-pointing), and
    those with a citation crossing the decay boundary tonight (their counts change even on a
    quiet day)."""
    decay = timedelta(days=night.recall.reference_decay_days)
    found = references.animas_with_changes_or_aging_citations(
        conn, night.day, night.start - decay, night.end - decay
    )
    return sorted(found | set(animas_active_between(conn, night.start, night.end)))


def sync_references(db: Database, night: Night, anima_id: str) -> StepResult:
    def body(conn: Connection, audit: Audit) -> StepOutcome:
        chains = _chains(conn, anima_id)
        added, unknown = _collect(conn, audit, night, anima_id, chains)
        repointed, cycles = _repoint(conn, audit, anima_id, chains)
        updated = _recount(conn, audit, night, anima_id)
        resident, pinned, overflow, warnings = _resident(conn, anima_id, night.recall)
        if cycles:
            warnings.append(f"superseded_by cycle at {', '.join(f'f-{i}' for i in cycles)}; left as is")
        stats = {
            "citations_added": added,
            "unknown_citations": unknown,
            "repointed": repointed,
            "counts_updated": updated,
            "resident": len(resident),
            "pinned": pinned,
            "resident_overflow": overflow,
        }
        return StepOutcome(
            stats=stats, details={"resident": [f"f-{i}" for i in resident], "warnings": warnings}
        )

    return run_step(db, night, anima_id, STEP, body)


# ---- superseded_by chains -------------------------------------------------------------


class _Chains:
    """Every memory of the anima with its status and successor, to follow chains in memory."""

    def __init__(self, rows: list[dict]) -> None:
        self.status = {r["id"]: r["status"] for r in rows}
        self.next = {r["id"]: r["superseded_by"] for r in rows if r["superseded_by"] is not None}

    def end(self, memory_id: int) -> int | None:
        """The last memory of the chain from memory_id; None on a cycle (no end exists)."""
        seen = {memory_id}
        current = memory_id
        while current in self.next and self.status.get(current) == "deprecated":
            current = self.next[current]
            if current in seen:
                return None
            seen.add(current)
        return current if current in self.status else memory_id


def _chains(conn: Connection, anima_id: str) -> _Chains:
    return _Chains(supersede_links(conn, anima_id))


# ---- 1. citations ---------------------------------------------------------------------


def _collect(conn: Connection, audit: Audit, night: Night, anima_id: str, chains: _Chains) -> tuple[int, int]:
    """Insert one memory_reference per (message, cited id); a re-run adds nothing."""
    messages = references.citing_messages(conn, anima_id, night.start, night.end)
    added = unknown = 0
    for msg in messages:
        for cited in sorted({int(x) for x in CITATION.findall(msg["content"])}):
            if cited not in chains.status:  # missing or another anima's memory
                unknown += 1
                continue
            target = chains.end(cited) or cited
            row = references.add_reference(
                conn, anima_id, target, cited, msg["id"], msg["conversation_id"], msg["created_at"]
            )
            if row is not None:
                audit.record("memory_reference", row["id"], "create", None, row)
                added += 1
    return added, unknown


# ---- 2. re-pointing -------------------------------------------------------------------


def _repoint(conn: Connection, audit: Audit, anima_id: str, chains: _Chains) -> tuple[int, list[int]]:
    """Move references of deprecated memories to the end of their superseded_by chain."""
    rows = references.references_to_superseded(conn, anima_id)
    moved, cycles = 0, set()
    for ref in rows:
        target = chains.end(ref["memory_id"])
        if target is None:
            cycles.add(ref["memory_id"])
            continue
        if target == ref["memory_id"]:
            continue
        after = references.repoint_reference(conn, ref["id"], target)
        audit.record("memory_reference", ref["id"], "repoint", ref, after)
        moved += 1
    return moved, sorted(cycles)


# ---- 3. decayed counts ----------------------------------------------------------------


def decayed_count(
    referenced: list[datetime], cutoff: datetime, decay_days: float, recent: float, stale: float
) -> float:
    """Sum of weights: inside [cutoff - decay_days, cutoff) recent, before that stale.

    A reference exactly decay_days before the cutoff is still recent; references at or after
    the cutoff (a later day, seen by a backfill of an earlier one) do not count.
    """
    boundary = cutoff - timedelta(days=decay_days)
    total = sum(recent if t >= boundary else stale for t in referenced if t < cutoff)
    return round(total, 4)


def _recount(conn: Connection, audit: Audit, night: Night, anima_id: str) -> int:
    refs: dict[int, list[datetime]] = defaultdict(list)
    for r in references.reference_times(conn, anima_id, night.end):
        refs[r["memory_id"]].append(r["referenced_at"])
    repo = MemoryRepo(conn, audit)
    updated = 0
    for mem in repo.active(anima_id):
        times = refs.get(mem.id, [])
        count = decayed_count(
            times,
            night.end,
            night.recall.reference_decay_days,
            night.recall.reference_recent_weight,
            night.recall.reference_stale_weight,
        )
        last = max(times) if times else mem.last_referenced_at
        changes: dict[str, Any] = {}
        if abs(count - mem.reference_count) > _EPS:
            changes["reference_count"] = count
        if last != mem.last_referenced_at:
            changes["last_referenced_at"] = last
        if changes:
            # Bookkeeping, not a change of what the memory says: keep updated_at, which deep
            # sleep's incremental mode reads as "the store changed".
            repo.update(mem.id, changes, op="reference_count", now=mem.updated_at)
            updated += 1
    return updated


# ---- 4. resident set ------------------------------------------------------------------


def _resident(
    conn: Connection, anima_id: str, recall: RecallSettings
) -> tuple[list[int], int, int, list[str]]:
    """(resident ids, pinned count, overflow, warnings), read exactly as chat-time recall reads it."""
    pinned_max = recall.pinned_max
    memories, overflow = resident_set(conn, anima_id, top_n=recall.resident_top_n, pinned_max=pinned_max)
    pinned = sum(1 for m in memories if m.pinned) + overflow
    warnings = []
    if overflow:
        warnings.append(
            f"{pinned} memories are pinned but the resident read shows at most {pinned_max}; "
            f"{overflow} left out of the resident set (none unpinned: review pins)"
        )
    return [m.id for m in memories], pinned, overflow, warnings


DECLARED = (
    StepDef(
        STEP,
        "references",
        "[[anima:f-N]] citations collected, re-pointed to successors, decayed reference counts and the resident set.",
        sync_references,
        (StepKey.PINS_REVIEWED,),
        CHANGES,
        animas=animas_for,
        sends_request=False,
    ),
)
