"""The offline deep-sleep plans: per round, the tool calls the heuristics decide over the
active memories (contradictions.py, splits.py, merges.py, pins.py). Pure: the step
(step.py) reads the store, builds the pre-filter and passes the memories in.
"""

from __future__ import annotations

from collections.abc import Generator
from datetime import datetime
from typing import TYPE_CHECKING, Any

from anima_pipeline.llm.contract import ToolCall, ToolResult
from anima_pipeline.night.steps.deep.contradictions import find_contradictions
from anima_pipeline.night.steps.deep.memory_view import memory_view
from anima_pipeline.night.steps.deep.merges import MergeGroup, merge_groups
from anima_pipeline.night.steps.deep.pins import stale_pins
from anima_pipeline.night.steps.deep.splits import split_parts
from anima_pipeline.text.attributes import extract_attributes
from anima_pipeline.text.similarity import normalize_content

if TYPE_CHECKING:
    from anima_pipeline.store.memories import SemanticMemory


def attribute_pairs(memories: list[SemanticMemory]) -> list[tuple[int, int, str]]:
    by_key: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for m in memories:
        for fact in extract_attributes(m.content):  # every fact of a memory, not just its first
            by_key.setdefault((fact.subject.lower(), fact.attribute), []).append(
                (m.id, f"{fact.value}|{fact.polarity}")
            )
    pairs = []
    for (subject, attribute), items in sorted(by_key.items()):
        for i, (a, va) in enumerate(items):
            for b, vb in items[i + 1 :]:
                if va != vb:
                    pairs.append((a, b, f"{subject}: {attribute}"))
    return pairs


def merge_candidates(memories: list[SemanticMemory], threshold: float) -> list[MergeGroup]:
    """Exact twins (same normalized content, whatever their type) first, then near-duplicates
    and containment within a type. Containment pairs can have low trigram similarity, so the
    heuristic looks at the whole active set rather than only the SQL pairs."""
    by_norm: dict[str, list[SemanticMemory]] = {}
    for m in memories:
        by_norm.setdefault(normalize_content(m.content), []).append(m)
    groups, taken = [], set()
    for twins in by_norm.values():
        if len(twins) > 1:
            keep = max(twins, key=lambda m: (len(m.content), m.updated_at, m.id))
            groups.append(
                MergeGroup(ids=tuple(m.id for m in twins), content=keep.content, reason="exact twins")
            )
            taken |= {m.id for m in twins}
    rest = [memory_view(m) for m in memories if m.id not in taken]
    groups += merge_groups(rest, threshold=threshold)
    return groups


def round_plan(
    round_name: str,
    current: list[SemanticMemory],
    candidates: set[int],
    now: datetime,
    stale_pin_days: int,
    full_split: bool,
    groups: list[MergeGroup],
) -> Generator[ToolCall, ToolResult, None]:
    """The tool calls of one deep-sleep round over the active memories: `candidates` are the
    pre-filter's ids (contradiction pairs, split candidates), `full_split` ignores them;
    `groups`: round 3's merge groups, as the pre-filter computed them (step.py's Prefilter)."""
    views = [memory_view(m) for m in current]
    if round_name == "contradiction":
        active = {m.id for m in current}
        for c in find_contradictions([v for v in views if v.id in candidates]):
            if c.loser_id not in active:
                continue
            args: dict[str, Any] = {"id": f"f-{c.loser_id}", "reason": f"{c.kind}: {c.reason}"}
            if c.winner_id is not None and c.winner_id in active:
                args["superseded_by"] = f"f-{c.winner_id}"
                winner = next(m for m in current if m.id == c.winner_id)
                if winner.observed_at:
                    args["valid_until"] = winner.observed_at.isoformat()
            active.discard(c.loser_id)
            yield ToolCall(name="deprecate_semantic_memory", input=args)
    elif round_name == "split":
        for v in views:
            if full_split or v.id in candidates:
                parts = split_parts(v)
                if parts:
                    yield ToolCall(
                        name="split_semantic_memory",
                        input={
                            "id": f"f-{v.id}",
                            "parts": parts,
                            "reason": f"{len(parts)} independent facts in one memory",
                        },
                    )
    elif round_name == "merge":
        for g in groups:
            yield ToolCall(
                name="merge_semantic_memories",
                input={
                    "source_ids": [f"f-{i}" for i in g.ids],
                    "content": g.content,
                    "reason": g.reason[:500],
                },
            )
    else:
        for mid, reason in stale_pins(views, now=now, stale_days=stale_pin_days):
            yield ToolCall(name="unpin_semantic_memory", input={"id": f"f-{mid}", "reason": reason})
