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

from anima_pipeline.llm.types import Engine

ModelOf = Callable[[str], str]


def engine_models(engine: Engine) -> ModelOf:
    """The model `engine` runs a step on. An engine without models (offline) caches nothing:
    each step sends only its own tools and framing, as if alone on its model."""
    model_for = getattr(engine, "model_for", None)
    return model_for if callable(model_for) else (lambda step: step)


def sharing(model_of: ModelOf, step: str, family: Sequence[str]) -> tuple[str, ...]:
    """The members of `family` (in its order) that run on the same model as `step`."""
    model = model_of(step)
    return tuple(s for s in family if model_of(s) == model)


def tools_of(members: Sequence[str], tools: Mapping[Any, Sequence[str]]) -> tuple[str, ...]:
    """The tool list the members send: every member's tools, once, in family order."""
    return tuple(dict.fromkeys(t for m in members for t in tools[m]))
