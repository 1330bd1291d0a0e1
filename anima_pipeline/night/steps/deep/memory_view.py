"""What deep sleep's offline heuristics read of a memory: a frozen view of an active
`semantic_memory` row, and which of two memories is the newer.

The heuristics (contradictions.py, splits.py, merges.py, pins.py) are pure functions over
such views: no database, no Dagster. Each answers one round's question with a conservative
baseline (when unsure, it proposes nothing), and the offline plan (plan.py) turns the
answers into ordinary tool calls, so validation, scope and audit are the same as for the
LLM engine.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from anima_pipeline.store.memories import SemanticMemory


@dataclass(frozen=True)
class MemoryView:
    """The fields of an active `semantic_memory` row the heuristics read."""

    id: int
    type: str
    content: str
    confidence: float
    source_sessions: tuple[str, ...]
    observed_at: datetime | None
    updated_at: datetime
    pinned: bool
    pinned_at: datetime | None
    reference_count: float
    last_referenced_at: datetime | None


def recency(m: MemoryView) -> tuple[datetime, int]:
    """Which of two memories is newer: when it was observed (falling back to when the row
    last changed, for memories written without observed_at), then the id."""
    return (m.observed_at or m.updated_at, m.id)


_VIEW_FIELDS = tuple(f.name for f in fields(MemoryView))


def memory_view(m: SemanticMemory) -> MemoryView:
    """The row's fields the heuristics read, by name (its sources as a tuple: a view is frozen)."""
    values = {name: getattr(m, name) for name in _VIEW_FIELDS}
    values["source_sessions"] = tuple(m.source_sessions)
    return MemoryView(**values)
