"""Which steps of a night send one prompt prefix, byte for byte, so the provider's cache
serves it: caches are per model, so the steps of a family that run on the same model share
one prefix (its tools and framing are the union of what they need), and a step alone on its
model sends only its own (docs/cost.md).

Two families:
- the day: light sleep's stages 1 and 2 with the day summary send the identity as the night
  found it and the day's transcript as message 1;
- the store: deep sleep's four rounds with the dream and the self refresh send the identity
  over the self-block snapshot and the store as deep sleep found it as message 1 (in slices
  under the size limit), then message 1.5, the rounds' changes so far. On an incremental
  night rounds 1 and 3 send only the candidates (what changed and its neighbours,
  night/steps/deep/candidates.py): they form their own family, and the others keep the store.

A prefix is marked for the cache only where a later request of the night reads it: another
member of its family on its model. Every step answers once (its calls in one answer,
`StepRequest.one_answer`), so its own conversation has no later turn to read it; a cache
write costs 1.25 times the input price, and a prefix nobody reads is cheaper sent as plain
input (docs/cost.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from anima_pipeline.core.steps import DEEP_SLEEP, LIGHT_SLEEP, STEP_ORDER, StepKey
from anima_pipeline.llm.contract import Engine, StepRequest, TextBlock, ToolSpec
from anima_pipeline.night.steps.deep.candidates import candidate_ids
from anima_pipeline.night.steps.deep.prompt import (
    REFUSE_CHARS,
    ROUNDS,
    DeepSleepTooLarge,
    compact,
    deep_system,
    message_one,
    message_one_five,
    slices,
)
from anima_pipeline.night.steps.deep.tools import ROUND_TOOLS
from anima_pipeline.night.steps.dream.tools import TOOLS as DREAM_TOOLS
from anima_pipeline.night.steps.framing import system_blocks, tagged
from anima_pipeline.night.steps.light.day_input import chunk_conversations, render_day
from anima_pipeline.night.steps.light.prompt import LIGHT_LIMBIC_SYSTEM, LIGHT_SEMANTIC_SYSTEM
from anima_pipeline.night.steps.light.tools import ANCHOR_TOOLS, SEMANTIC_TOOLS
from anima_pipeline.night.steps.self_refresh.tools import TOOLS as SELF_TOOLS
from anima_pipeline.night.steps.temporal.prompt import TEMPORAL_SYSTEM
from anima_pipeline.night.steps.temporal.tools import TOOLS as TEMPORAL_TOOLS
from anima_pipeline.recall.identity import identity_context
from anima_pipeline.store.archive import DayConversation
from anima_pipeline.store.db import Connection
from anima_pipeline.store.events import (
    events_of_steps,
    memories_changed_outside,
    night_writes,
    semantic_writes,
)
from anima_pipeline.store.layers import SelfBlockRepo
from anima_pipeline.store.memories import SemanticMemory, active_before
from anima_pipeline.tools.schemas import tool_specs

if TYPE_CHECKING:  # a type only: the agent's flush sends light sleep's stage 1 without the frame
    from anima_pipeline.night.frame import Night

ModelOf = Callable[[str], str]


def engine_models(engine: Engine) -> ModelOf:
    """The model `engine` runs a step on. An engine without models (offline) caches nothing:
    each step sends only its own tools and framing, as if alone on its model."""
    return lambda step: engine.model_for(step) or step


def sharing(model_of: ModelOf, step: str, family: Sequence[str]) -> tuple[str, ...]:
    """The members of `family` (in its order) that run on the same model as `step`."""
    model = model_of(step)
    return tuple(s for s in family if model_of(s) == model)


def read_follows(members: Sequence[str]) -> bool:
    """Whether a later request of the night reads the prefix a step sends with `members` (the
    family members on its model): another member does. The step's own conversation ends with
    its one answer (`StepRequest.one_answer`); a turn after a failed call is the exception."""
    return len(members) > 1


def tools_of(members: Sequence[str], tools: Mapping[Any, Sequence[str]]) -> tuple[str, ...]:
    """The tool list the members send: every member's tools, once, in family order."""
    return tuple(dict.fromkeys(t for m in members for t in tools[m]))


# ---- the day: light sleep's transcript with the day summary ---------------------------------

DAY_FAMILY = (StepKey.SEMANTIC_EXTRACTED, StepKey.ANCHORS_MARKED, StepKey.DAY_SUMMARY)
DAY_FAMILY_TOOLS = {
    StepKey.SEMANTIC_EXTRACTED: SEMANTIC_TOOLS,
    StepKey.ANCHORS_MARKED: ANCHOR_TOOLS,
    StepKey.DAY_SUMMARY: TEMPORAL_TOOLS,
}
DAY_FRAMING = {
    StepKey.SEMANTIC_EXTRACTED: LIGHT_SEMANTIC_SYSTEM,
    StepKey.ANCHORS_MARKED: LIGHT_LIMBIC_SYSTEM,
    StepKey.DAY_SUMMARY: TEMPORAL_SYSTEM,
}


def day_prefix(
    engine: Engine, step: str, own: Sequence[str] | None = None
) -> tuple[tuple[str, ...], str, bool]:
    """(tools, framing, cached) that `step` of the day family sends: those of the members on
    `engine`'s model for it, and whether a later request reads that prefix (`read_follows`). A
    member alone on its model sends only `own` when given (the tools its scope allows tonight)."""
    members = sharing(engine_models(engine), step, DAY_FAMILY)
    framing = "\n\n".join(DAY_FRAMING[StepKey(m)] for m in members)
    tools = tuple(own) if own is not None and members == (step,) else tools_of(members, DAY_FAMILY_TOOLS)
    return tools, framing, read_follows(members)


def day_transcript(convs: list[DayConversation], night: Night) -> str:
    """The day as message 1, rendered as stage 1 sends it (one chunk: newest first), so every
    step of the day family sends the same bytes."""
    chunks = chunk_conversations(convs, night.tz)
    return render_day(chunks[0] if len(chunks) == 1 else convs, night.tz, night.day.isoformat())


def identity_as_found(conn: Connection, anima_id: str, night: Night) -> str:
    """The identity context as the night found it, before any of its steps wrote (their writes
    to memories and self blocks undone): what the steps that read the day's transcript send in
    their shared prefix (light sleep stages 1 and 2, the day summary: the day family), the
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


# ---- the store: deep sleep's rounds with the dream and the self refresh ---------------------

DEEP_FAMILY: tuple[str, ...] = (*DEEP_SLEEP, StepKey.DREAM, StepKey.SELF_REFRESHED)
# The rounds that see only the candidates on an incremental night (contradiction, merge).
CANDIDATE_ROUNDS: tuple[str, ...] = (StepKey.DECONFLICTED, StepKey.MERGED)


def sees_candidates(step: str, mode: str) -> bool:
    """Whether `step` sees only the candidates tonight (an incremental night's rounds 1 and 3):
    its message 1, its framing, and its skip when nothing changed that day (deep/step.py)."""
    return mode == "incremental" and step in CANDIDATE_ROUNDS


def deep_family(step: str, mode: str) -> tuple[str, ...]:
    """The members of the store family `step` belongs to on a night of `mode`: on an
    incremental night the candidate rounds are a family of their own (another message 1)."""
    if mode != "incremental":
        return DEEP_FAMILY
    if step in CANDIDATE_ROUNDS:
        return CANDIDATE_ROUNDS
    return tuple(s for s in DEEP_FAMILY if s not in CANDIDATE_ROUNDS)


def deep_members(model_of: ModelOf, step: str, mode: str) -> tuple[str, ...]:
    """The steps that send the prefix `step` sends on a night of `mode`."""
    return sharing(model_of, step, deep_family(step, mode))


DEEP_FAMILY_TOOLS: dict[str, tuple[str, ...]] = {
    **{step: ROUND_TOOLS[name] for step, name in ROUNDS},
    StepKey.DREAM: DREAM_TOOLS,
    StepKey.SELF_REFRESHED: SELF_TOOLS,
}
# The steps that finish before deep sleep starts (DAG order); every later write of the night
# is undone when the family rebuilds its shared prompt.
BEFORE_DEEP_SLEEP = (StepKey.CLEANED, *LIGHT_SLEEP)


def deep_writes(conn: Connection, anima_id: str, night: Night) -> list[dict]:
    """The rounds' writes to semantic memory this night, in order (message 1.5 is made from them)."""
    return semantic_writes(conn, anima_id, night.day, list(DEEP_SLEEP))


def _after_light_sleep(conn: Connection, anima_id: str, night: Night, table: str) -> list[dict]:
    """This night's writes to `table` by the steps that run from deep sleep on (the rounds
    themselves, the dream, the self refresh, reference sync): undone, they give the store as
    deep sleep found it, which every round shows the same (one cached prompt prefix). An
    agent's own writes of that day (remember) are part of what deep sleep finds, not undone;
    nor are a revert's (`anima revert`, the night guard's undo), and the writes of a run
    that was reverted are undone already: undoing either again would bring back what the
    revert retired (a reverted flood of 5,000 memories in message 1)."""
    return events_of_steps(
        conn, anima_id, night.day, table, [k for k in STEP_ORDER if k not in BEFORE_DEEP_SLEEP]
    )


def self_blocks_snapshot(conn: Connection, anima_id: str, night: Night) -> dict[str, str]:
    """The self blocks as they were when deep sleep started this night."""
    blocks = SelfBlockRepo(conn).all(anima_id)
    for e in reversed(_after_light_sleep(conn, anima_id, night, "self_block")):
        if e["memory_id"] in blocks:
            blocks[e["memory_id"]] = (e["before"] or {}).get("content", "")
    return blocks


def changed_today(conn: Connection, anima_id: str, night: Night) -> set[int]:
    """Memories written in the 24 h before the night's cutoff by anything but deep sleep:
    keyed to the partition day so a backfill skips exactly what the nights it replays would
    have skipped. An audited write belongs to its event's day; updated_at inside the day only
    counts for a write no day-tagged event explains (unaudited), since the wall-clock time of
    a backfill's or of the previous night's writes says nothing about this day."""
    return memories_changed_outside(conn, anima_id, night.day, list(DEEP_SLEEP), night.start, night.end)


@dataclass
class Prefix:
    """What every deep-sleep round, the dream and the self refresh of a night send first, byte
    for byte (one cached prefix per model): the system blocks over the identity snapshot, then
    message 1 per slice of the store as deep sleep found it. `events` are the rounds' writes
    so far (message 1.5 is made from them)."""

    system: list[TextBlock]
    tools: list[ToolSpec]
    slices: list[tuple[str, list[SemanticMemory], TextBlock]]
    base: list[SemanticMemory]
    events: list[dict]
    chars: int  # of the whole message 1 (the size thresholds are defined on it)
    refused: str | None = None  # why deep sleep is skipped tonight (a slice that cannot be cut)


TITLE = {False: "active semantic memories", True: "changed active memories and their neighbours"}


def deep_candidates(
    conn: Connection, anima_id: str, night: Night, base: list[SemanticMemory], changed: set[int] | None = None
) -> set[int]:
    """The ids of `base` (the store as deep sleep found it) an incremental night's rounds 1 and
    3 see: what changed in the 24 h before the night (`changed`, `changed_today` unless the
    caller read it already) and its neighbours."""
    if changed is None:
        changed = changed_today(conn, anima_id, night)
    return candidate_ids(conn, base, changed, night.deep.trgm_threshold)


def deep_prefix(
    conn: Connection, anima_id: str, night: Night, step: str, changed: set[int] | None = None
) -> Prefix:
    """The prefix `step` sends (shared with the family members on its model), message 1 in
    slices each under the limit (`slices`); `refused` says why deep sleep is skipped tonight
    when one slice cannot be cut. `changed`: `changed_today`, when the round read it in the
    same transaction."""
    members = deep_members(engine_models(night.engine), step, night.mode)
    rounds = tuple(name for s, name in ROUNDS if s in members)
    base = active_before(conn, anima_id, _after_light_sleep(conn, anima_id, night, "semantic_memory"))
    system = identity_context(
        conn, anima_id, memories=base, blocks=self_blocks_snapshot(conn, anima_id, night)
    )
    candidates = sees_candidates(step, night.mode)
    shown = base
    if candidates:
        keep = deep_candidates(conn, anima_id, night, base, changed)
        shown = [m for m in base if m.id in keep]
    cached = read_follows(members)
    try:
        cut, refused = slices(shown, night.tz), None
    except DeepSleepTooLarge as exc:  # the rounds skip; the dream and the self refresh read what fits
        cut, refused = (
            slices([m for m in shown if len(compact(m, night.tz)) <= REFUSE_CHARS], night.tz),
            str(exc),
        )
    sliced = [
        (
            label,
            batch,
            TextBlock(
                text=tagged(
                    "memories",
                    f"# Message 1: {TITLE[candidates]} ({label})\n{message_one(batch, night.tz)}",
                ),
                cache=cached,
            ),
        )
        for label, batch in cut
    ]
    after = StepKey.DREAM in members or StepKey.SELF_REFRESHED in members
    framing = deep_system(rounds, after=after, candidates=candidates)
    return Prefix(
        system=system_blocks(framing, night.day, night.tz, system, cache=cached),
        tools=tool_specs(tools_of(members, DEEP_FAMILY_TOOLS)),
        slices=sliced,
        refused=refused,
        base=base,
        events=deep_writes(conn, anima_id, night),
        chars=len(message_one(base, night.tz)),
    )


def store_changed(conn: Connection, anima_id: str, night: Night) -> bool:
    """Whether the anima's store changed that day: a write by any step (or the agent) other than
    deep sleep, the rule deep sleep's incremental mode skips rounds 1 and 3 by, or a deep-sleep
    write that night. The dream and the self refresh cannot change anything otherwise."""
    return bool(changed_today(conn, anima_id, night) or deep_writes(conn, anima_id, night))


def deep_request(
    step: str,
    shared: Prefix,
    msg1: TextBlock,
    events: list[dict],
    message_two: str,
    task: str,
    *,
    must_write: bool = False,
) -> StepRequest:
    """The request of a step of the store family: the shared prefix (tools, system, one slice
    of message 1), then message 1.5 (the rounds' changes in `events`), the step's message 2
    and its task."""
    return StepRequest(
        step=step,
        system=shared.system,
        user=[
            msg1,
            TextBlock(text=tagged("changes", message_one_five(events))),
            TextBlock(text=message_two),
            TextBlock(text=task),
        ],
        tools=shared.tools,
        must_write=must_write,
        one_answer=True,  # every call in one answer (framing.py's RESTRAINT_RULE)
    )
