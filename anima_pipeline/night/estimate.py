"""What a night will cost, from the stores' sizes, before anything is sent: `anima sleep
--estimate` prints it and the budget guard refuses a run whose estimate is over
ANIMA_BUDGET_USD (docs/cost.md).

Each step that would run for an anima (`registry.plan_day`, the same plan the runner follows)
becomes one planned conversation: its cached prefix (tools, framing, identity, message 1) and
its uncached tail, in tokens from the characters the store holds (store/sizes.py) and the
real prompt texts, on the model the step runs on, sharing a prefix with the steps that send
the same one (night/prefix.py). llm/prompt_cost.py prices the plan with the price table and the
cache rules. What is assumed, not read: that every step answers once, its calls in one
answer (`StepRequest.one_answer`), what a model answers (llm/prompt_cost.py's STEP_OUTPUT),
how large the pre-filter and the day's changes are, and how many memories an incremental
night's candidates hold (CANDIDATES_PER_CHANGE).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import date
from functools import cache
from typing import ClassVar

from pydantic import BaseModel

from anima_pipeline.config import Settings
from anima_pipeline.core.errors import InternalError
from anima_pipeline.core.steps import StepKey
from anima_pipeline.llm.contract import Usage
from anima_pipeline.llm.failures import BudgetExceeded
from anima_pipeline.llm.offline import OfflineEngine
from anima_pipeline.llm.prompt_cost import Conversation, price, tokens
from anima_pipeline.night import prefix
from anima_pipeline.night.frame import Mode, Night, scheduled_mode
from anima_pipeline.night.registry import STEPS, in_shard, plan_day
from anima_pipeline.night.steps.deep.prompt import ROUNDS, deep_system
from anima_pipeline.night.steps.dream.prompt import DREAM
from anima_pipeline.night.steps.framing import system_blocks
from anima_pipeline.night.steps.light.prompt import PROMPTS as LIGHT_PROMPTS
from anima_pipeline.night.steps.light.tools import NARRATIVE_TOOLS, SUMMARY_TOOLS
from anima_pipeline.night.steps.self_refresh.prompt import SELF_REFRESH
from anima_pipeline.night.steps.temporal.prompt import TEMPORAL_CASCADE, TEMPORAL_DAY, TEMPORAL_SYSTEM
from anima_pipeline.night.steps.temporal.step import closed_periods
from anima_pipeline.night.steps.temporal.tools import TOOLS as TEMPORAL_TOOLS
from anima_pipeline.store import sleep_state
from anima_pipeline.store.db import Database
from anima_pipeline.store.sizes import NightSizes, night_sizes
from anima_pipeline.tools.schemas import tool_specs

BLOCK_CHARS = 40  # what the request's JSON adds around each text block
LINE_CHARS = 28  # message 1 per memory beside its content: id, type, date, spaces, newline
MESSAGE_CHARS = 24  # the transcript per message beside its text: time, role, speaker marks
CONVERSATION_CHARS = 80  # the transcript's header per conversation
NEW_MEMORIES = 2  # what light sleep adds on an active day (message 2 of the dream, changes)
MEMORY_LINE_CHARS = 150  # a rendered memory with its id, type, confidence, sources and dates
CHANGES_CHARS = 400  # the day's changes to memory as the day summary and self refresh read them
PREFILTER_CHARS = 600  # deep sleep's message 2 (pairs, candidates, pins)
SUMMARY_CHARS = 1_200  # a day / week summary the cascade reads
# an incremental night's rounds 1 and 3 see what changed and its neighbours: memories per
# memory that changed that day (benchmarks/deep_candidates.py measures it on the dialogues)
CANDIDATES_PER_CHANGE = 4  # 3.2 measured on the tuned dialogues


class StepEstimate(BaseModel):
    step: str
    model: str
    animas: int = 0
    usage: Usage = Usage()


class NightEstimate(BaseModel):
    day: date
    mode: str
    batch: bool
    animas: int
    steps: list[StepEstimate]
    # (anima, step) pairs left out because that night already did them (without `force`): what
    # tells "nothing to estimate" from "nothing to do" (`anima sleep --estimate` says which)
    already_done: int = 0

    @property
    def total(self) -> Usage:
        return sum((s.usage for s in self.steps), Usage())


@cache
def _tools_chars(names: tuple[str, ...]) -> int:
    return len(json.dumps([t.model_dump() for t in tool_specs(names)], ensure_ascii=False))


def _framing_chars(framing: str, night: Night) -> int:
    return len(system_blocks(framing, night.day, night.tz, "")[0].text) + 2 * BLOCK_CHARS


def _identity_chars(anima_id: str, s: NightSizes) -> int:
    blocks = 6 * 25 + (s.self_block_chars or 6 * 7)
    return 100 + len(anima_id) + blocks + s.resident * 22 + s.resident_chars


def _transcript_chars(s: NightSizes) -> int:
    return (
        120
        + s.conversations * CONVERSATION_CHARS
        + s.messages * MESSAGE_CHARS
        + s.speaker_chars
        + s.message_chars
        + BLOCK_CHARS
    )


def _message_one_chars(s: NightSizes, shown: int | None = None) -> int:
    """Message 1 over the whole store, or over `shown` of its memories (of average length)."""
    memories = s.memories + NEW_MEMORIES
    chars = s.memory_chars + NEW_MEMORIES * 60 + memories * LINE_CHARS
    if shown is not None and shown < memories:
        chars = chars * shown // memories
    return chars + 100 + BLOCK_CHARS


def _block(text: str | int) -> int:
    return (text if isinstance(text, int) else len(text)) + BLOCK_CHARS


def conversations(
    settings: Settings, night: Night, anima_id: str, steps: Sequence[str], s: NightSizes
) -> list[Conversation]:
    """The planned conversations of one anima's night, in run order."""
    model_of = settings.step_model
    identity = _identity_chars(anima_id, s)
    transcript = _transcript_chars(s)
    out: list[Conversation] = []

    def add(
        step: str, key: str | None, prefix_chars: int, tail_chars: int, members: tuple[str, ...] = ()
    ) -> None:
        out.append(
            Conversation(
                step=step,
                model=model_of(step),
                key=f"{anima_id}/{key}" if key else None,
                prefix=tokens(prefix_chars),
                tail=tokens(tail_chars),
                cached=prefix.read_follows(members or (step,)),
            )
        )

    def light(step: str, tools: tuple[str, ...], msg1: int, tail: int) -> None:
        framing, task = LIGHT_PROMPTS[step]
        add(
            step,
            None,
            _tools_chars(tools) + _framing_chars(framing, night) + identity + msg1,
            tail + _block(task),
        )

    def day(step: str, tail: int) -> None:  # the day family: one prefix per model (night/prefix.py)
        members = prefix.sharing(model_of, step, prefix.DAY_FAMILY)
        framing = _framing_chars("\n\n".join(prefix.DAY_FRAMING[StepKey(m)] for m in members), night)
        head = (
            _tools_chars(prefix.tools_of(members, prefix.DAY_FAMILY_TOOLS)) + framing + identity + transcript
        )
        add(step, f"day/{members}", head, tail, members)

    deep_members = {step: prefix.deep_members(model_of, step, night.mode) for step in prefix.DEEP_FAMILY}
    msg1 = _message_one_chars(s)
    # what changed that day: light sleep's new memories, the agent's own writes
    changes = NEW_MEMORIES
    candidates_msg1 = _message_one_chars(s, changes * CANDIDATES_PER_CHANGE)
    for step in (d.key for d in STEPS if d.key in steps):
        if step == StepKey.SEMANTIC_EXTRACTED and s.conversations:
            day(step, _block(100) + _block(LIGHT_PROMPTS[step][1]))
        elif step == StepKey.ANCHORS_MARKED and s.conversations:
            day(step, _block(60) + _block(LIGHT_PROMPTS[step][1]))
        elif step == StepKey.AUTOBIOGRAPHY_NARRATED and (s.conversations or s.recent_experiences):
            recent = s.recent_experience_chars + (s.recent_experiences + NEW_MEMORIES) * MEMORY_LINE_CHARS
            light(step, NARRATIVE_TOOLS, _block(recent), _block(100 + s.narratives * 80))
        elif step == StepKey.AUTOBIOGRAPHY_SUMMARY and s.narratives:
            light(step, SUMMARY_TOOLS, _block(60 + s.narratives * 80), 0)
        elif step in prefix.DEEP_FAMILY and s.memories + NEW_MEMORIES:
            members = deep_members[step]
            rounds = tuple(name for key, name in ROUNDS if key in members)
            after = StepKey.DREAM in members or StepKey.SELF_REFRESHED in members
            candidates = prefix.sees_candidates(step, night.mode)
            framing = _framing_chars(deep_system(rounds, after, candidates), night)
            head = (
                _tools_chars(prefix.tools_of(members, prefix.DEEP_FAMILY_TOOLS))
                + framing
                + identity
                + (candidates_msg1 if candidates else msg1)
            )
            if step == StepKey.DREAM:
                tail = _block(200) + _block(NEW_MEMORIES * MEMORY_LINE_CHARS) + _block(DREAM)
            elif step == StepKey.SELF_REFRESHED:
                tail = _block(200) + _block(CHANGES_CHARS) + _block(SELF_REFRESH)
            else:
                tail = _block(200) + _block(PREFILTER_CHARS) + _block(120)
            add(step, f"deep/{members}", head, tail, members)
        elif step == StepKey.DAY_SUMMARY and s.conversations:
            day(step, _block(CHANGES_CHARS) + _block(70) + _block(TEMPORAL_DAY))
        elif step == StepKey.CASCADE:
            head = _tools_chars(TEMPORAL_TOOLS) + _framing_chars(TEMPORAL_SYSTEM, night)
            for level, start, end in closed_periods(night.day):
                parts = min((end - start).days + 1, 7 if level == "week" else 5)
                tail = _block(70) + _block(TEMPORAL_CASCADE)
                add(step, None, head + identity + _block(parts * SUMMARY_CHARS), tail)
    return out


def estimate_night(
    db: Database,
    settings: Settings,
    day: date,
    mode: Mode,
    animas: Sequence[str] | None = None,
    steps: Sequence[str] | None = None,
    *,
    force: bool = True,
    shard: tuple[int, int] | None = None,
) -> NightEstimate:
    """The expected tokens and dollars per step of one night, from the stores as they are.
    Without `force`, steps already done that day cost nothing (the runner skips them)."""
    night = Night(
        day=day, engine=_NoEngine(), tz=settings.tz, mode=mode, recall=settings.recall, deep=settings.deep
    )
    with db.transaction() as conn:
        plan = plan_day(conn, night)
        if animas:
            plan = {a: k for a, k in plan.items() if a in set(animas)}
        if shard is not None:
            plan = {a: k for a, k in plan.items() if in_shard(a, shard)}
        sizes = night_sizes(conn, list(plan), night.start, night.end)
        done = {} if force else sleep_state.steps_done_of(conn, list(plan), day)
    batch = settings.llm.mode == "batch"
    per_step: dict[str, StepEstimate] = {}
    already_done = 0
    for anima_id, keys in plan.items():
        wanted = [k for k in keys if steps is None or k in steps]
        chosen = [k for k in wanted if k not in done.get(anima_id, ())]
        already_done += len(wanted) - len(chosen)
        planned = conversations(settings, night, anima_id, chosen, sizes[anima_id])
        priced = price(planned, batch=batch, unpriced=settings.llm.unpriced)
        for step, usage in priced.items():
            row = per_step.setdefault(step, StepEstimate(step=step, model=settings.step_model(step)))
            row.animas += 1
            row.usage = row.usage + usage
    order = [d.key for d in STEPS]
    return NightEstimate(
        day=day,
        mode=mode,
        batch=batch,
        animas=len(plan),
        steps=sorted(per_step.values(), key=lambda r: order.index(r.step)),
        already_done=already_done,
    )


def estimate_run(
    db: Database,
    settings: Settings,
    days: Sequence[date],
    mode: Mode | None = None,
    animas: Sequence[str] | None = None,
    steps: Sequence[str] | None = None,
    *,
    force: bool = False,
    shard: tuple[int, int] | None = None,
) -> list[NightEstimate]:
    """One estimate per night of a run (`mode` None: the schedule's rule per day)."""
    return [
        estimate_night(db, settings, d, mode or scheduled_mode(d), animas, steps, force=force, shard=shard)
        for d in sorted(set(days))
    ]


def refuse_over_budget(estimates: Sequence[NightEstimate], budget_usd: float) -> None:
    """The per-run budget guard: raise BudgetExceeded, before anything is sent, when the run's
    estimate is over what the budget has left."""
    total = sum(e.total.cost_usd for e in estimates)
    if total > budget_usd:
        nights = ", ".join(f"{e.day} ${e.total.cost_usd:.4f}" for e in estimates if e.total.calls)
        raise BudgetExceeded(
            f"the run is estimated at ${total:.4f}, over the budget of ${budget_usd:.4f} "
            f"(ANIMA_BUDGET_USD); nothing was sent. Per night: {nights}. See `anima sleep --estimate` "
            "for the steps; raise the budget, move steps to the small model (ANIMA_LLM_STEP_MODELS) or "
            "use batch mode (docs/cost.md)",
            step="estimate",
        )


class _NoEngine(OfflineEngine):
    """The night's engine slot while estimating: nothing is sent."""

    name: ClassVar[str] = "estimate"

    def run(self, request, runner, offline_plan):  # pragma: no cover - never called
        raise InternalError("an estimate sends nothing")
