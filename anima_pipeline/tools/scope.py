"""What one step may touch. The executor refuses anything outside it.

Light sleep: the memories shown in its message 2 (plus what it creates itself), sources
only from the day's conversations. Deep sleep: every active memory of the anima.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass
class Scope:
    anima_id: str
    tools: tuple[str, ...]
    # None: any active memory of the anima; else only these (and those created in the step).
    memory_ids: frozenset[int] | None = None
    # None: any source; else source_sessions must come from these.
    conversation_ids: frozenset[str] | None = None
    # What create_semantic_memory cites when the call omits source_sessions / observed_at.
    default_sources: tuple[str, ...] = ()
    default_observed_at: datetime | None = None
    # None: any narrative of the anima; else only these.
    narrative_ids: frozenset[int] | None = None
    # Which self blocks this step may write.
    self_blocks: frozenset[str] = field(default_factory=frozenset)
    # Temporal summary levels this step may write.
    summary_levels: frozenset[str] = field(default_factory=frozenset)
    # A night leaves a memory the user corrected (settled_at) as it is; the agent's own
    # corrections (anima_pipeline/memory/forget.py) may change it again.
    may_change_settled: bool = False

    def describe_memories(self, limit: int = 12) -> str:
        if self.memory_ids is None:
            return "any active memory of this anima"
        ids = sorted(self.memory_ids)
        shown = ", ".join(f"f-{i}" for i in ids[:limit]) + (" …" if len(ids) > limit else "")
        return f"the memories shown to you ({shown or 'none'})"
