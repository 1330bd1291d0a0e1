"""The night's invariants, in one small class over a connection; their SQL is in
store/invariants.py.

Each method returns the violations it finds (empty = the invariant holds), as plain rows the
checks turn into metadata. The timezone is the partitions' one, so "the conversations of day
D" means the same as in the steps.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from anima_pipeline.config import DEFAULT_TIMEZONE
from anima_pipeline.core.steps import StepKey
from anima_pipeline.night.steps.deep.prompt import DeepSleepTooLarge, message_one, slices
from anima_pipeline.store import invariants
from anima_pipeline.store.db import Connection
from anima_pipeline.store.memories import MemoryRepo

LIGHT_STEP_TABLES: dict[str, tuple[str, ...]] = {
    StepKey.SEMANTIC_EXTRACTED: ("semantic_memory",),
    StepKey.ANCHORS_MARKED: ("emotional_anchor",),
    StepKey.AUTOBIOGRAPHY_NARRATED: ("autobiographical_memory",),
    StepKey.AUTOBIOGRAPHY_SUMMARY: ("self_block",),
}


@dataclass
class MemoryInvariants:
    conn: Connection
    timezone: str = DEFAULT_TIMEZONE

    # None = every anima; otherwise only these (the animas a run touched: an invariant of one
    # anima can only break on a night that anima ran)
    animas: list[str] | None = None

    def duplicate_active(self) -> list[dict]:
        """Groups of active memories of one anima with the same normalized content."""
        return invariants.duplicate_active(self.conn, self.animas)

    def broken_supersede_chains(self) -> list[dict]:
        """superseded_by pointing at no memory or another anima's, set on an active memory,
        or part of a cycle."""
        pointers = invariants.bad_supersede_pointers(self.conn, self.animas)
        cycles = invariants.supersede_cycles(self.conn, self.animas)
        return [*pointers, *({**c, "problem": "superseded_by cycle"} for c in cycles)]

    def deep_sleep_input_chars(self) -> dict[str, tuple[int, str | None]]:
        """Per anima: the size of deep sleep's message 1 (all active memories as compact JSON),
        built by the same function deep sleep uses, and why it would be refused (a slice that
        cannot be cut), or None."""
        repo = MemoryRepo(self.conn)
        out: dict[str, tuple[int, str | None]] = {}
        for a in invariants.animas_with_active_memories(self.conn, self.animas):
            memories = repo.active(a)
            try:
                slices(memories)
                refused = None
            except DeepSleepTooLarge as exc:
                refused = str(exc)
            out[a] = (len(message_one(memories)), refused)
        return out

    def light_scope_violations(self, days: list[date] | None = None) -> list[dict]:
        """Light-sleep writes outside the step's scope, from memory_event:
        a table the step does not own; semantic memories created with sources outside the
        day's conversations, updated / deprecated when their sources did not meet the day's
        conversations, or given new sources from outside them; anchors on a conversation
        not of that day; a self block other than autobiography_summary."""
        return invariants.light_scope_violations(
            self.conn, list(LIGHT_STEP_TABLES), self.timezone, self.animas, days
        )

    def orphan_sources(self) -> list[dict]:
        """Active memories citing a source conversation that neither exists nor was cleaned
        (a cleanup deletion is in memory_event and can be restored)."""
        return invariants.orphan_sources(self.conn, self.animas)
