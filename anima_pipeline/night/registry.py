"""The night in plain Python: the steps in DAG order, which animas each one processes, and
running whole nights day after day. Dagster wraps exactly this (defs/), and tests and the
CLI can run it without Dagster.

Order (the dependency graph in docs/ordering.md): cleanup → light sleep (4 stages) → deep
sleep (4 rounds) → memory-ref-sync; temporal day → cascade; dream; self-layer refresh. Run
sequentially, the dependencies hold trivially; the Dagster asset graph states them explicitly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta

from anima_pipeline.core.steps import StepKey
from anima_pipeline.night.frame import Night, StepResult
from anima_pipeline.night.steps.cleanup import step as cleanup
from anima_pipeline.night.steps.deep import step as deep_sleep
from anima_pipeline.night.steps.dream import step as dream
from anima_pipeline.night.steps.light import step as light_sleep
from anima_pipeline.night.steps.references import step as ref_sync
from anima_pipeline.night.steps.self_refresh import step as self_refresh
from anima_pipeline.night.steps.temporal import step as temporal
from anima_pipeline.store import sleep_state
from anima_pipeline.store.archive import animas_active_between
from anima_pipeline.store.db import Connection, Database

StepFn = Callable[[Database, Night, str], StepResult]
AnimasFn = Callable[[Connection, Night], list[str]]


@dataclass
class StepDef:
    key: StepKey  # the Dagster asset key path, also sleep_state.step and memory_event.step
    group: str
    description: str
    run: StepFn
    deps: tuple[StepKey, ...]
    # which animas the step processes on a day; None = those with conversations that day
    animas: AnimasFn | None = None

    @property
    def module(self) -> str:
        """The step's module under anima_pipeline (for display: Dagster metadata)."""
        return self.run.__module__.removeprefix("anima_pipeline.")

    @property
    def fn(self) -> str:
        return self.run.__name__


STEPS: tuple[StepDef, ...] = (
    StepDef(
        StepKey.CLEANED,
        "cleanup",
        "Stale empty, single-message and assistant-less conversations deleted (audited, recoverable from memory_event).",
        cleanup.cleanup,
        (),
        animas=cleanup.animas_for,
    ),
    StepDef(
        StepKey.SEMANTIC_EXTRACTED,
        "light_sleep",
        "Stage 1: the day's conversations into semantic memories (create / update / deprecate within message 2).",
        light_sleep.extract_semantic,
        (StepKey.CLEANED,),
    ),
    StepDef(
        StepKey.ANCHORS_MARKED,
        "light_sleep",
        "Stage 2: the day's mood and emotional turning points as anchors.",
        light_sleep.extract_anchors,
        (StepKey.SEMANTIC_EXTRACTED,),
    ),
    StepDef(
        StepKey.AUTOBIOGRAPHY_NARRATED,
        "light_sleep",
        "Stage 3 (phase A): narratives from the last 7 days' experience and imprint memories, only when worth telling.",
        light_sleep.narrate,
        (StepKey.ANCHORS_MARKED,),
    ),
    StepDef(
        StepKey.AUTOBIOGRAPHY_SUMMARY,
        "light_sleep",
        "Stage 3b (phase B): the autobiography summary self block, a grouped outline fading with distance.",
        light_sleep.summarize_autobiography,
        (StepKey.AUTOBIOGRAPHY_NARRATED,),
    ),
    StepDef(
        StepKey.DECONFLICTED,
        "deep_sleep",
        "Round 1: exclusive contradictions and expired facts deprecated, superseded_by set.",
        deep_sleep.deconflict,
        (StepKey.AUTOBIOGRAPHY_SUMMARY,),
    ),
    StepDef(
        StepKey.SPLIT,
        "deep_sleep",
        "Round 2: entries holding several independent facts split into one memory each.",
        deep_sleep.split,
        (StepKey.DECONFLICTED,),
    ),
    StepDef(
        StepKey.MERGED,
        "deep_sleep",
        "Round 3: duplicates and near-duplicates merged (sources union, earliest observed_at).",
        deep_sleep.merge,
        (StepKey.SPLIT,),
    ),
    StepDef(
        StepKey.PINS_REVIEWED,
        "deep_sleep",
        "Round 4: stale pins unpinned; the resident read stays capped at 40.",
        deep_sleep.review_pins,
        (StepKey.MERGED,),
    ),
    StepDef(
        StepKey.REFERENCES_SYNCED,
        "references",
        "[[anima:f-N]] citations collected, re-pointed to successors, decayed reference counts and the resident set.",
        ref_sync.sync_references,
        (StepKey.PINS_REVIEWED,),
        animas=ref_sync.animas_for,
    ),
    StepDef(
        StepKey.DAY_SUMMARY,
        "temporal",
        "The day summary from the day's conversations and memory changes.",
        temporal.summarize_day,
        (StepKey.AUTOBIOGRAPHY_SUMMARY,),
        animas=temporal.animas_for,
    ),
    StepDef(
        StepKey.CASCADE,
        "temporal",
        "Week (on Sunday), month (last day) and year (31 December) summaries from the level below.",
        temporal.cascade,
        (StepKey.PINS_REVIEWED, StepKey.DAY_SUMMARY),
        animas=temporal.animas_for,
    ),
    StepDef(
        StepKey.DREAM,
        "dream",
        "REM synthesis: cross-memory connections, confidence updates, next-session actions, bank page suggestions.",
        dream.dream,
        (StepKey.AUTOBIOGRAPHY_SUMMARY,),
    ),
    StepDef(
        StepKey.SELF_REFRESHED,
        "self_layer",
        "The self blocks other than identity refreshed from the day's consolidated memories.",
        self_refresh.refresh_self,
        (StepKey.AUTOBIOGRAPHY_SUMMARY,),
    ),
)
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
        raise ValueError(f"--to {last} is before --from {first}")
    return [first + timedelta(days=i) for i in range((last - first).days + 1)]
