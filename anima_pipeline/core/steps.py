"""The night's steps as a type, their DAG order, and the one check of step names.

A `StepKey` is the step's Dagster asset key path ("semantic_memory/extracted"); the same
string is `sleep_state.step` and `memory_event.step` in the store, so a StrEnum member equals
the stored text and rows written before the type existed still match. What each step runs is
in night/registry.py (the registry); this module holds only the names, so everyone can import it:
it imports nothing of the package but core/errors.py, which imports nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from anima_pipeline.core.errors import InputError


class StepKey(StrEnum):
    # declared in the night's order: STEP_ORDER below is this order
    CLEANED = "conversations/cleaned"
    # light sleep, in order
    SEMANTIC_EXTRACTED = "semantic_memory/extracted"
    ANCHORS_MARKED = "emotional_anchors/marked"
    AUTOBIOGRAPHY_NARRATED = "autobiographical_memory/narrated"
    AUTOBIOGRAPHY_SUMMARY = "self_blocks/autobiography_summary"
    # deep sleep, in order
    DECONFLICTED = "semantic_memory/deconflicted"
    SPLIT = "semantic_memory/split"
    MERGED = "semantic_memory/merged"
    PINS_REVIEWED = "semantic_memory/pins_reviewed"
    REFERENCES_SYNCED = "memory_references/synced"
    DAY_SUMMARY = "temporal_summaries/day"
    CASCADE = "temporal_summaries/cascade"
    DREAM = "dreams/journal"
    SELF_REFRESHED = "self_blocks/refreshed"

    @property
    def path(self) -> list[str]:
        """The Dagster AssetKey path: ["semantic_memory", "extracted"]."""
        return self.value.split("/")


# The DAG order (docs/ordering.md): the order the night runs them in plain Python, which is the
# members' declaration order above (one list to keep, not two).
STEP_ORDER: tuple[StepKey, ...] = tuple(StepKey)
LIGHT_SLEEP: tuple[StepKey, ...] = STEP_ORDER[1:5]
DEEP_SLEEP: tuple[StepKey, ...] = STEP_ORDER[5:9]
# The steps that write semantic memories, in order (what the day summary and the dream read back).
MEMORY_STEPS: tuple[StepKey, ...] = (*LIGHT_SLEEP, *DEEP_SLEEP)
# Each step's default model role: these run on the small model (ANIMA_SMALL_MODEL), every other
# step on the main one (ANIMA_MODEL): light sleep stage 1 and deep sleep round 1, where
# judgement matters. Measured in benchmarks/night_cost.py (docs/cost.md has the table and the
# prices). ANIMA_LLM_STEP_MODELS overrides it per step (config.py). Kept here, beside the
# keys, not in the step folders: the settings and the engines below the night read it.
SMALL_MODEL_STEPS: tuple[StepKey, ...] = (
    StepKey.ANCHORS_MARKED,
    StepKey.AUTOBIOGRAPHY_NARRATED,
    StepKey.AUTOBIOGRAPHY_SUMMARY,
    StepKey.SPLIT,
    StepKey.MERGED,
    StepKey.PINS_REVIEWED,
    StepKey.DAY_SUMMARY,
    StepKey.CASCADE,
    StepKey.DREAM,
    StepKey.SELF_REFRESHED,
)


class UnknownStepError(InputError):
    """Step names that are not steps; the message lists the steps."""

    def __init__(self, unknown: list[str]) -> None:
        super().__init__(f"unknown step(s) {unknown}; the steps are: {', '.join(STEP_ORDER)}")
        self.unknown = unknown


def parse_steps(names: Iterable[str]) -> list[StepKey]:
    """`names` as StepKeys in DAG order (duplicates once); any unknown name raises
    UnknownStepError naming all of them and listing the steps."""
    wanted = set(names)
    unknown = sorted(wanted - set(STEP_ORDER))
    if unknown:
        raise UnknownStepError(unknown)
    return [k for k in STEP_ORDER if k in wanted]
