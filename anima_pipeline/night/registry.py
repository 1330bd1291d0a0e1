"""The night's step table: every step folder's declaration (night/steps/*/step.py, DECLARED)
in DAG order, which animas each step processes, and the plan of a day. Dagster wraps exactly
this (defs/), and tests and the CLI can run it without Dagster (night/runner.py).

Order (the dependency graph in docs/ordering.md): cleanup → light sleep (4 stages) → deep
sleep (4 rounds) → memory-ref-sync; temporal day → cascade; dream; self-layer refresh. Run
sequentially, the dependencies hold trivially; the Dagster asset graph states them explicitly.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable
from datetime import date, timedelta
from typing import TYPE_CHECKING

from anima_pipeline.core.errors import InputError
from anima_pipeline.core.steps import STEP_ORDER, StepKey, parse_steps
from anima_pipeline.night.frame import Night, StepResult
from anima_pipeline.night.steps.cleanup import step as cleanup
from anima_pipeline.night.steps.declaration import StepDef
from anima_pipeline.night.steps.deep import step as deep_sleep
from anima_pipeline.night.steps.dream import step as dream
from anima_pipeline.night.steps.light import step as light_sleep
from anima_pipeline.night.steps.references import step as ref_sync
from anima_pipeline.night.steps.self_refresh import step as self_refresh
from anima_pipeline.night.steps.temporal import step as temporal
from anima_pipeline.store import sleep_state
from anima_pipeline.store.archive import animas_active_between
from anima_pipeline.store.db import Connection, Database

if TYPE_CHECKING:
    from anima_pipeline.night.steps.declaration import AnimasFn

# Every folder's declared steps, in the one order of core/steps.py (a step no folder declares
# is a KeyError here, at import).
_DECLARED: dict[StepKey, StepDef] = {
    s.key: s
    for folder in (cleanup, light_sleep, deep_sleep, ref_sync, temporal, dream, self_refresh)
    for s in folder.DECLARED
}
STEPS: tuple[StepDef, ...] = tuple(_DECLARED[k] for k in STEP_ORDER)
BY_KEY: dict[StepKey, StepDef] = {s.key: s for s in STEPS}
NIGHT_MARKER = sleep_state.NIGHT  # sleep_state.step of the row that records one anima's whole night


def _default_animas(conn: Connection, night: Night) -> list[str]:
    return animas_active_between(conn, night.start, night.end)


def animas_for(db: Database, night: Night, step: str) -> list[str]:
    """Which animas a step processes on this day (a day without activity is cheap)."""
    with db.transaction() as conn:
        return list((BY_KEY[StepKey(step)].animas or _default_animas)(conn, night))


def plan_day(conn: Connection, night: Night) -> dict[str, list[str]]:
    """Which steps each anima has to run on this day, for every anima that has anything to do
    (an anima absent from the answer is idle that night: runner skips it in bulk).

    The rules are the steps' own `animas` hooks, each asked once per day for every anima
    (four cheap queries, one per distinct hook): messages that day (light sleep, deep sleep,
    dream, self refresh, the day summary), stale junk to clean, memories changed that day or
    citations crossing the decay boundary (reference sync), a week / month / year closing
    over day summaries (cascade). Asked before the night, not step by step: a step's writes
    only ever add an anima that the day's messages already made busy."""
    per_hook: dict[AnimasFn, set[str]] = {}
    plan: dict[str, list[str]] = {}
    for s in STEPS:
        hook = s.animas or _default_animas
        if hook not in per_hook:
            per_hook[hook] = set(hook(conn, night))
        for anima_id in sorted(per_hook[hook]):
            plan.setdefault(anima_id, []).append(s.key)
    return dict(sorted(plan.items()))


def day_range(first: date, last: date) -> list[date]:
    if last < first:
        raise InputError(f"--to {last} is before --from {first}")
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]


def select_steps(steps: Iterable[str] | None) -> list[StepDef]:
    """The selected steps in registry (DAG) order; all of them for None. Unknown keys are an
    error naming the valid ones."""
    if steps is None:
        return list(STEPS)
    return [BY_KEY[k] for k in parse_steps(steps)]


def step_functions(steps: Iterable[str] | None) -> dict[str, Callable[..., StepResult]]:
    """The registry's functions of the selected steps (read at call time, so a test that
    swaps a step's `run` is honoured)."""
    return {s.key: s.run for s in select_steps(steps)}


def in_shard(anima_id: str, shard: tuple[int, int]) -> bool:
    """Whether `anima_id` belongs to shard (index, count): crc32 of its id mod count, stable
    across processes and machines (unlike hash())."""
    index, count = shard
    return zlib.crc32(anima_id.encode()) % count == index
