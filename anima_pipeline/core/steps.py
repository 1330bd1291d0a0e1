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

# What a real model writes in a step, in output tokens (its words and its tool calls: a fact is
# about 65 tokens in benchmarks/night_cost.py --dialogue, a summary up to 400 for its 1,500
# characters, a "nothing to do" a sentence), spread over the step's tool turns; each later turn
# that only ends the conversation writes END_OUTPUT. The estimate and the budget guard price
# these (llm/prompt_cost.py; about 2,600 tokens an active night). STEP_MAX_TOKENS bounds each
# call by need, about eight times its share, when thinking is off (a thinking model needs the
# global room, ANIMA_LLM_MAX_TOKENS; a cut answer is asked again with twice the limit,
# llm/tool_loop.py). Kept here, beside the keys: the settings read them.
STEP_OUTPUT: dict[str, int] = {
    StepKey.SEMANTIC_EXTRACTED: 500,
    StepKey.ANCHORS_MARKED: 150,
    StepKey.AUTOBIOGRAPHY_NARRATED: 250,
    StepKey.AUTOBIOGRAPHY_SUMMARY: 300,
    StepKey.DECONFLICTED: 120,
    StepKey.SPLIT: 120,
    StepKey.MERGED: 120,
    StepKey.PINS_REVIEWED: 80,
    StepKey.DAY_SUMMARY: 400,
    StepKey.CASCADE: 500,
    StepKey.DREAM: 250,
    StepKey.SELF_REFRESHED: 250,
}
DEFAULT_STEP_OUTPUT = 200
END_OUTPUT = 20
STEP_MAX_TOKENS: dict[str, int] = {
    step: max(2_048, -(-8 * tokens // 1_024) * 1_024) for step, tokens in STEP_OUTPUT.items()
}


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
