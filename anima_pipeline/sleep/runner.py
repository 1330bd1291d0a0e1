"""Running nights in plain Python: the loop that Dagster (defs/night/assets.py), the CLI and
the tests all use, so the ordering rules live in one place and hold without Dagster.

- `run_night` runs the selected steps of one day in registry order (DESIGN §4), each step
  for every anima that step processes that day, before the next step starts.
- `run_days` runs whole nights strictly one day after another, with a guard: day D does not
  start while the night of D-1 is recorded as running or failed (unless forced). Each night
  is recorded in sleep_state as the row (anima_id '*', day, NIGHT_MARKER): running, then
  done or failed.

A run that selects only some steps or some animas (a diagnostic re-run from the UI) marks
the night done only if, afterwards, every step is done for every anima of that day;
otherwise the night keeps the status it had, so a one-step re-run cannot unblock the next
day over a night that is still incomplete.
"""

from __future__ import annotations

import uuid
import zlib
from collections.abc import Callable, Iterable, Sequence
from datetime import date, timedelta
from typing import Any

from anima_pipeline.config import Settings
from anima_pipeline.llm.types import Engine, Usage
from anima_pipeline.sleep.cycle import NIGHT_MARKER, STEP_KEYS, STEPS, StepDef, animas_for
from anima_pipeline.sleep.night import Mode, Night, StepFailed, StepResult, scheduled_mode
from anima_pipeline.store import sleep_state
from anima_pipeline.store.db import Connection, Database

NIGHT_ANIMA = "*"  # sleep_state.anima_id of the night marker rows

# on_step(night, step_key, results): called once per (day, step) after every anima ran it.
OnStep = Callable[[Night, str, list[StepResult]], None]
# on_night(night, results): called once per day after the whole night finished.
OnNight = Callable[[Night, list[StepResult]], None]


class NightOrderError(RuntimeError):
    """Day D was refused because the night of D-1 is recorded as running or failed."""

    def __init__(self, day: date, previous: dict) -> None:
        self.day = day
        self.previous_day = previous["day"]
        self.previous_status = previous["status"]
        self.previous_run_id = previous.get("run_id")
        hint = (
            "if no run is working on it any more, re-run that day"
            if self.previous_status == "running"
            else "re-run that day first"
        )
        super().__init__(
            f"night of {day} not started: the night of {self.previous_day} is recorded as "
            f"{self.previous_status} (run {self.previous_run_id}); {hint}, or force this run "
            f"(Dagster run config force: true, CLI --force) to run {day} anyway"
        )


class StepUnavailable(RuntimeError):
    """A selected step's module cannot be imported (nothing was run)."""


class NightFailed(RuntimeError):
    """A step failed; its own writes were rolled back, earlier steps and days stay done."""

    def __init__(
        self, day: date, step: str, anima_id: str | None, cause: BaseException, results: list[StepResult]
    ) -> None:
        self.day = day
        self.step = step
        self.anima_id = anima_id
        self.cause = cause
        self.results = results  # what finished before the failure, this day
        self.usage: Usage = getattr(cause, "usage", None) or Usage()
        who = f" for anima {anima_id}" if anima_id else ""
        super().__init__(f"{step}{who} on {day} failed: {type(cause).__name__}: {cause}")


def select_steps(steps: Iterable[str] | None) -> list[StepDef]:
    """The selected steps in registry (DAG) order; all of them for None. Unknown keys are an
    error naming the valid ones."""
    if steps is None:
        return list(STEPS)
    wanted = set(steps)
    unknown = sorted(wanted - set(STEP_KEYS))
    if unknown:
        raise ValueError(f"unknown step(s) {unknown}; the steps are: {', '.join(STEP_KEYS)}")
    return [s for s in STEPS if s.key in wanted]


def _resolve(selected: list[StepDef]) -> dict[str, Callable[..., StepResult]]:
    fns: dict[str, Callable[..., StepResult]] = {}
    for s in selected:
        try:
            fns[s.key] = s.resolve()
        except (ImportError, AttributeError) as exc:
            raise StepUnavailable(
                f"step {s.key} needs anima_pipeline.sleep.{s.module}.{s.fn}, which cannot be loaded "
                f"({type(exc).__name__}: {exc}); nothing was run"
            ) from exc
    return fns


def run_night(
    db: Database,
    night: Night,
    steps: Sequence[str] | None = None,
    animas: Sequence[str] | None = None,
    *,
    on_step: OnStep | None = None,
    shard: tuple[int, int] | None = None,
) -> list[StepResult]:
    """Run the selected steps of one day in registry order, each for every anima that step
    processes that day (filtered by `animas` and `shard` when given). Raises NightFailed at the first
    failing step; a step already done for (anima, day) is skipped unless night.force."""
    selected = select_steps(steps)
    fns = _resolve(selected)
    only = set(animas) if animas else None
    results: list[StepResult] = []
    for s in selected:
        try:
            who = [
                a
                for a in animas_for(db, night, s.key)
                if (only is None or a in only) and (shard is None or in_shard(a, shard))
            ]
        except Exception as exc:
            raise NightFailed(night.day, s.key, None, exc, results) from exc
        step_results: list[StepResult] = []
        for anima_id in who:
            try:
                step_results.append(fns[s.key](db, night, anima_id))
            except StepFailed as exc:
                raise NightFailed(night.day, s.key, anima_id, exc.__cause__ or exc, results) from exc
            except Exception as exc:
                raise NightFailed(night.day, s.key, anima_id, exc, results) from exc
        results.extend(step_results)
        if on_step is not None:
            on_step(night, s.key, step_results)
    return results


def in_shard(anima_id: str, shard: tuple[int, int]) -> bool:
    """Whether `anima_id` belongs to shard (index, count): crc32 of its id mod count, stable
    across processes and machines (unlike hash())."""
    index, count = shard
    return zlib.crc32(anima_id.encode()) % count == index


def night_marker(conn: Connection, day: date) -> dict | None:
    return sleep_state.get(conn, NIGHT_ANIMA, day, NIGHT_MARKER)


def _mark_running(db: Database, day: date, run_id: str, stats: dict) -> None:
    from psycopg.types.json import Jsonb

    with db.transaction() as conn:
        conn.execute(
            """INSERT INTO sleep_state (anima_id, day, step, status, stats, run_id, started_at, finished_at, error)
               VALUES (%s, %s, %s, 'running', %s, %s, now(), NULL, NULL)
               ON CONFLICT (anima_id, day, step) DO UPDATE SET status = 'running', stats = EXCLUDED.stats,
                   run_id = EXCLUDED.run_id, started_at = now(), finished_at = NULL, error = NULL""",
            (NIGHT_ANIMA, day, NIGHT_MARKER, Jsonb(stats), run_id),
        )


def _restore_marker(db: Database, day: date, prev: dict | None) -> None:
    """Put the night marker back as it was before a partial run (or remove it)."""
    from psycopg.types.json import Jsonb

    with db.transaction() as conn:
        if prev is None:
            conn.execute(
                "DELETE FROM sleep_state WHERE anima_id = %s AND day = %s AND step = %s",
                (NIGHT_ANIMA, day, NIGHT_MARKER),
            )
            return
        conn.execute(
            """UPDATE sleep_state SET status = %s, stats = %s, run_id = %s, started_at = %s,
                   finished_at = %s, error = %s
               WHERE anima_id = %s AND day = %s AND step = %s""",
            (
                prev["status"],
                Jsonb(prev["stats"]),
                prev["run_id"],
                prev["started_at"],
                prev["finished_at"],
                prev["error"],
                NIGHT_ANIMA,
                day,
                NIGHT_MARKER,
            ),
        )


def night_complete(db: Database, night: Night) -> bool:
    """Every registry step done (or skipped) for every anima it processes on that day."""
    for s in STEPS:
        try:
            who = animas_for(db, night, s.key)
        except ImportError:
            return False
        with db.transaction() as conn:
            if not all(sleep_state.is_done(conn, a, night.day, s.key) for a in who):
                return False
    return True


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
    step_settings: dict[str, Any] | None = None,
    shard: tuple[int, int] | None = None,
) -> list[StepResult]:
    """Run whole nights strictly one day after another (ascending, each day once).

    `mode` None means the scheduled rule per day (Monday full, else incremental). One engine
    (and so one budget) serves the whole run. Raises NightOrderError before a day whose
    previous night is running or failed (unless `force`), StepUnavailable before anything
    runs when a selected step cannot be loaded, NightFailed when a step fails (that night is
    then recorded as failed; earlier days stay done)."""
    from anima_pipeline.llm.budget import Budget
    from anima_pipeline.llm.factory import make_engine

    ordered = sorted(set(days))
    selected = select_steps(steps)
    _resolve(selected)  # fail before touching any state when a step cannot load
    partial = len(selected) < len(STEPS) or bool(animas) or shard is not None
    run_id = run_id or f"run-{uuid.uuid4().hex[:12]}"
    if engine is None:
        engine = make_engine(settings, Budget.from_settings(settings))
    keys = [s.key for s in selected]
    all_results: list[StepResult] = []
    for day in ordered:
        night = Night(
            day=day,
            engine=engine,
            tz=settings.tz,
            run_id=run_id,
            force=force,
            mode=mode or scheduled_mode(day),
            log_dir=settings.log_dir,
            settings=dict(step_settings or {}),
        )
        with db.transaction() as conn:
            before = night_marker(conn, day - timedelta(days=1))
            prev = night_marker(conn, day)
        if before and before["status"] in ("running", "failed") and not force:
            raise NightOrderError(day, before)
        stats: dict[str, Any] = {
            "steps": keys,
            "mode": night.mode,
            "animas": sorted(animas) if animas else [],
        }
        _mark_running(db, day, run_id, stats)
        try:
            results = run_night(db, night, [s.key for s in selected], animas, on_step=on_step, shard=shard)
        except BaseException as exc:
            try:
                with db.transaction() as conn:
                    sleep_state.fail(
                        conn, NIGHT_ANIMA, day, NIGHT_MARKER, f"{type(exc).__name__}: {exc}", run_id
                    )
            except Exception:  # the store is gone too: the original error is the one to report
                pass
            raise
        stats["animas"] = sorted({r.anima_id for r in results})
        if not partial or night_complete(db, night):
            with db.transaction() as conn:
                sleep_state.finish(conn, NIGHT_ANIMA, day, NIGHT_MARKER, {**stats, "complete": True}, run_id)
        else:
            _restore_marker(db, day, prev)
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


def is_transient(exc: BaseException) -> bool:
    """Whether retrying later could help: network / API overload after the SDK's own retries,
    lost database connections, deadlocks. Budget, configuration, refusals, bad tool calls
    and ordering errors are not: a retry would fail the same way (or spend more)."""
    import psycopg

    from anima_pipeline.llm.errors import RetriesExhausted

    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, NightFailed):
            cur = cur.cause
            continue
        if isinstance(
            cur,
            RetriesExhausted
            | psycopg.OperationalError
            | psycopg.errors.SerializationFailure
            | psycopg.errors.DeadlockDetected
            | ConnectionError
            | TimeoutError,
        ):
            return True
        cur = cur.__cause__ or cur.__context__
    return False
