"""Which steps of a night send one prompt prefix, byte for byte, so the provider's cache
serves it: caches are per model, so the steps of a family that run on the same model share
one prefix (its tools and framing are the union of what they need), and a step alone on its
model sends only its own (docs/cost.md).

Families: deep sleep's four rounds with the dream and the self refresh (the store as message
1, the self-block snapshot); light sleep's day transcript with the day summary.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from anima_pipeline.core.steps import STEP_ORDER
from anima_pipeline.llm.contract import Engine
from anima_pipeline.night.frame import Night
from anima_pipeline.recall.identity import identity_context
from anima_pipeline.store.db import Connection
from anima_pipeline.store.events import night_writes
from anima_pipeline.store.layers import SelfBlockRepo
from anima_pipeline.store.memories import active_before

ModelOf = Callable[[str], str]


def engine_models(engine: Engine) -> ModelOf:
    """The model `engine` runs a step on. An engine without models (offline) caches nothing:
    each step sends only its own tools and framing, as if alone on its model."""
    return lambda step: engine.model_for(step) or step


def sharing(model_of: ModelOf, step: str, family: Sequence[str]) -> tuple[str, ...]:
    """The members of `family` (in its order) that run on the same model as `step`."""
    model = model_of(step)
    return tuple(s for s in family if model_of(s) == model)


def tools_of(members: Sequence[str], tools: Mapping[Any, Sequence[str]]) -> tuple[str, ...]:
    """The tool list the members send: every member's tools, once, in family order."""
    return tuple(dict.fromkeys(t for m in members for t in tools[m]))


def identity_as_found(conn: Connection, anima_id: str, night: Night) -> str:
    """The identity context as the night found it, before any of its steps wrote (their writes
    to memories and self blocks undone): what the steps that read the day's transcript send in
    their shared prefix (light sleep stages 1 and 2, the day summary; night/prefix.py), the
    same whether a step runs first or after deep sleep and reference sync."""
    steps = [str(s) for s in STEP_ORDER]
    memories = active_before(
        conn, anima_id, night_writes(conn, anima_id, night.day, "semantic_memory", steps)
    )
    blocks = SelfBlockRepo(conn).all(anima_id)
    for e in reversed(night_writes(conn, anima_id, night.day, "self_block", steps)):
        if e["memory_id"] in blocks:
            blocks[e["memory_id"]] = (e["before"] or {}).get("content", "")
    return identity_context(conn, anima_id, memories=memories, blocks=blocks)
