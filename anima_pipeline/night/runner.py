"""Running nights in plain Python: the loop that Dagster (defs/night/assets.py), the CLI and
the tests all use, so the ordering rules live in one place and hold without Dagster.

- `run_night` runs one day: it asks once which animas have anything to do that day
  (`registry.plan_day`) and records the others as skipped in one statement; it refuses an anima
  whose night of D-1 is failed or not over (the order rule, per anima, unless forced); it
  runs the busy animas in a bounded pool (`night/pool.py`), each anima's selected steps in
  registry order under its own night row (`night/anima_night.py`: lease, heartbeat, takeover);
  and when any anima failed it raises NightFailed naming every failed anima, step and cause,
  after the others finished. A re-run redoes only what failed.
- `run_days` runs whole nights strictly one day after another, one pool and one heartbeat
  for the whole run.

The night rows and their states are in docs/ordering.md.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import date, timedelta

from anima_pipeline.config import Settings
from anima_pipeline.core.steps import STEP_ORDER
from anima_pipeline.llm.budget import Budget
from anima_pipeline.llm.contract import Engine
from anima_pipeline.llm.factory import make_engine
from anima_pipeline.night.anima_night import Heartbeat, end_unrecorded
from anima_pipeline.night.embedding import NightVectors
from anima_pipeline.night.estimate import estimate_run, refuse_over_budget
from anima_pipeline.night.failure_kinds import AnimaFailure, NightFailed, NightOrderError
from anima_pipeline.night.frame import Mode, Night, StepResult, scheduled_mode
from anima_pipeline.night.guards import GrowthLimits, LossLimits
from anima_pipeline.night.pool import AnimaPool, Task, default_workers
from anima_pipeline.night.registry import (
    NIGHT_MARKER,
    STEPS,
    in_shard,
    plan_day,
    select_steps,
    step_functions,
)
from anima_pipeline.store import sleep_state
from anima_pipeline.store.db import Database
from anima_pipeline.store.planner_stats import NIGHT_TABLES, VECTOR_TABLES, keep_fresh

logger = logging.getLogger(__name__)

# on_step(night, step_key, results): called once per (day, step) with that step's results
# over animas, in registry order, after the day's animas ran (only the steps before the
# first failing one when the day failed).
OnStep = Callable[[Night, str, list[StepResult]], None]
# on_night(night, results): called once per day after the whole night finished.
OnNight = Callable[[Night, list[StepResult]], None]


def run_night(
    db: Database,
    night: Night,
    steps: Sequence[str] | None = None,
    animas: Sequence[str] | None = None,
    *,
    pool: AnimaPool,
    on_step: OnStep | None = None,
    shard: tuple[int, int] | None = None,
) -> list[StepResult]:
    """Run the selected steps of one day for every anima that has them (filtered by `animas`
    and `shard` when given) in `pool` (run_days opens it, with its heartbeat, from the
    run's settings), idle animas recorded as skipped. Raises NightFailed, after every other anima
    finished, when any anima failed or was refused by the order rule."""
    selected = [s.key for s in select_steps(steps)]
    partial = len(selected) < len(STEPS)
    only = sorted(set(animas)) if animas else None
    if not night.force:
        _wait_for_previous_nights(db, night, only, pool.lease_s)
    with db.transaction() as conn:
        plan = plan_day(conn, night)
        if only is not None:
            plan = {a: keys for a, keys in plan.items() if a in only}
        unfinished = sleep_state.unfinished_nights(conn, night.day - timedelta(days=1), only)
        blocked = {} if night.force else unfinished
        scope = only
        if (
            shard is not None
        ):  # this run's share of the day, idle animas included; the other shards' runs do the rest
            plan = {a: keys for a, keys in plan.items() if in_shard(a, shard)}
            blocked = {a: row for a, row in blocked.items() if in_shard(a, shard)}
            everyone = only if only is not None else sleep_state.animas_with_conversations(conn)
            scope = [a for a in everyone if in_shard(a, shard)]
        skipped = sleep_state.skip_idle(conn, night.day, night.run_id, [*plan, *blocked], scope)
    failures = [
        AnimaFailure(a, NIGHT_MARKER, NightOrderError(night.day, a, row))
        for a, row in sorted(blocked.items())
    ]
    tasks = [
        Task(a, tuple(k for k in selected if k in keys), tuple(keys) if partial else None)
        for a, keys in plan.items()
        if a not in blocked and set(keys) & set(selected)
    ]
    logger.info(
        "night of %s: %d anima(s) to run (%s), %d idle recorded as skipped, %d refused by the order rule",
        night.day,
        len(tasks),
        pool.kind(len(tasks)),
        skipped,
        len(blocked),
    )
    made = NightVectors(db, night, pool.settings)
    outcomes = pool.run(night, tasks, on_done=made.add)
    made.flush()
    if tasks:  # the night's writes: recall's plans need fresh statistics (autovacuum may be off)
        with db.transaction() as conn:
            keep_fresh(conn, dict.fromkeys((*NIGHT_TABLES, *VECTOR_TABLES), 0))
    failures += [o.failure for o in outcomes if o.failure is not None]
    end_unrecorded(db, night, failures)
    results = [r for o in outcomes for r in o.results]
    failed_at = min((_index(f.step) for f in failures), default=len(STEPS))
    if on_step is not None:
        for key in selected:
            if _index(key) < failed_at:
                on_step(night, key, [r for r in results if r.step == key])
    if failures:
        raise NightFailed(night.day, failures, results)
    return results


def _wait_for_previous_nights(db: Database, night: Night, animas: list[str] | None, lease_s: float) -> None:
    """While another run holds a night of the day before under a live lease (a forget's
    recompute re-running a few steps of it, docs/forget.md; a second run of that day), wait
    for it, up to two leases, as a night waits for its own claim (night/anima_night.py): runs
    that meet on one anima are ordered, not refused. What is still unfinished afterwards
    (failed, or held past the wait) the order rule refuses as before."""
    deadline = time.monotonic() + 2 * lease_s
    while True:
        with db.transaction() as conn:
            rows = sleep_state.unfinished_nights(conn, night.day - timedelta(days=1), animas)
        held = [r for r in rows.values() if r["alive"] and r["run_id"] != night.run_id]
        if not held or time.monotonic() > deadline:
            return
        logger.info(
            "night of %s: waiting for run %s, which holds the night of %s for %s",
            night.day,
            held[0]["run_id"],
            held[0]["day"],
            held[0]["anima_id"],
        )
        time.sleep(min(1.0, lease_s / 4))


def _budget_guard(
    db: Database,
    settings: Settings,
    engine: Engine,
    days: list[date],
    mode: Mode | None,
    animas: Sequence[str] | None,
    steps: list[str],
    force: bool,
    shard: tuple[int, int] | None,
) -> None:
    """Refuse, before anything is sent, a run whose estimate is over the budget's remainder
    (the same estimate `anima sleep --estimate` prints; night/estimate.py)."""
    budget = engine.budget
    if not engine.priced or budget is None or budget.max_usd is None:
        return
    estimates = estimate_run(db, settings, days, mode, animas, steps, force=force, shard=shard)
    refuse_over_budget(estimates, budget.max_usd - budget.spent.cost_usd)


def _index(step: str) -> int:
    """A step's place in the registry; a failure of the night itself comes before them all."""
    return STEP_ORDER.index(step) if step in STEP_ORDER else -1


def run_days(
    db: Database,
    settings: Settings,
    days: Iterable[date],
    steps: Sequence[str] | None = None,
    mode: Mode | None = None,
    force: bool = False,
    animas: Sequence[str] | None = None,
    *,
    on_step: OnStep | None = None,
    on_night: OnNight | None = None,
    run_id: str | None = None,
    engine: Engine | None = None,
    workers: int | None = None,
    shard: tuple[int, int] | None = None,
) -> list[StepResult]:
    """Run whole nights strictly one day after another (ascending, each day once).

    `mode` None means the scheduled rule per day (Monday full, else incremental). One engine
    (and so one budget), one pool of `workers` (default: settings.workers, else the number
    of cores) and one heartbeat serve the whole run. Raises NightFailed at the end of the
    first day on which any anima failed or was refused by the order rule (the later days are
    not run)."""
    ordered = sorted(set(days))
    keys = [s.key for s in select_steps(steps)]
    fns = step_functions(keys)
    run_id = run_id or f"run-{uuid.uuid4().hex[:12]}"
    if engine is None:
        engine = make_engine(settings, Budget.from_settings(settings))
    _budget_guard(db, settings, engine, ordered, mode, animas, list(keys), force, shard)
    all_results: list[StepResult] = []
    with (
        Heartbeat(db.url, run_id, settings.night_lease_s),
        AnimaPool(
            db,
            settings,
            engine,
            fns,
            workers=workers or default_workers(settings),
            lease_s=settings.night_lease_s,
        ) as pool,
    ):
        for day in ordered:
            night = Night(
                day=day,
                engine=engine,
                tz=settings.tz,
                run_id=run_id,
                force=force,
                mode=mode or scheduled_mode(day),
                log_dir=settings.log_dir,
                recall=settings.recall,
                deep=settings.deep,
                limits=LossLimits.from_settings(settings),
                growth=GrowthLimits.from_settings(settings),
                review=settings.review_mode,
            )
            results = run_night(db, night, keys, animas, on_step=on_step, pool=pool, shard=shard)
            all_results.extend(results)
            if on_night is not None:
                on_night(night, results)
    return all_results


# ---- what a (day, step) did, summed over animas: Dagster metadata and CLI output ---------

SUMMARY_KEYS: tuple[str, ...] = (
    "created",
    "updated",
    "deprecated",
    "merged",
    "split",
    "input_chars",
    "llm_calls",
    "tokens_in",
    "tokens_out",
    "cache_read",
    "cache_write",
    "cost_usd",
    "billed_equiv_in",
    "one_pass_in",
    "duration_s",
    "chunks",
    "skipped_rounds",
)
_USAGE_FIELDS = {
    "llm_calls": "calls",
    "tokens_in": "input_tokens",
    "tokens_out": "output_tokens",
    "cache_read": "cache_read_tokens",
    "cache_write": "cache_write_tokens",
    "cost_usd": "cost_usd",
    "one_pass_in": "one_pass_tokens",
}


def summarize(results: Sequence[StepResult]) -> dict[str, int | float]:
    """Sum the results of one (day, step) over animas: every SUMMARY_KEYS entry (0 when no
    result has it), plus any other numeric stat the steps reported, plus `animas` (how many
    ran) and `already_done` (how many were skipped as done before); strings and `*_index` /
    `*_cap` labels are left out. A skipped step reports
    the stats recorded when it ran, so re-runs do not flatten the plots."""
    out: dict[str, int | float] = dict.fromkeys(SUMMARY_KEYS, 0)
    out["cost_usd"] = 0.0
    out["duration_s"] = 0.0
    extra: dict[str, int | float] = {}
    for r in results:
        stats = dict(r.stats)
        for key, field in _USAGE_FIELDS.items():
            if key not in stats:
                stats[key] = getattr(r.usage, field)
        stats.setdefault("billed_equiv_in", r.usage.billed_equiv_tokens)
        for key, value in stats.items():
            if (
                key in ("duration_s", "already_done")
                or isinstance(value, bool)
                or not isinstance(value, int | float)
            ):
                continue
            if key.endswith(
                ("_index", "_cap")
            ):  # labels and constants, not amounts (round_index, resident_cap)
                continue
            target = out if key in out else extra
            target[key] = target.get(key, 0) + value
        out["duration_s"] += r.duration_s
    out["cost_usd"] = round(float(out["cost_usd"]), 6)
    out["duration_s"] = round(float(out["duration_s"]), 3)
    out["billed_equiv_in"] = round(float(out["billed_equiv_in"]), 1)
    # billed-equivalent input per pass of the input: 1.0 uncached, 1.25 for a first write,
    # towards 0.1 for a prefix read again and again
    out["billed_equiv_ratio"] = (
        round(out["billed_equiv_in"] / out["one_pass_in"], 3) if out["one_pass_in"] else 0.0
    )
    out["animas"] = len({r.anima_id for r in results})
    out["already_done"] = sum(1 for r in results if r.status == "skipped")
    return {**out, **dict(sorted(extra.items()))}
