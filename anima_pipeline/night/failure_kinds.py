"""How a night fails: the kinds of failure of one anima's night and of a whole day, and which of
them are worth a retry. The runner (night/runner.py) raises them, one anima's night
(night/anima_night.py) records them, Dagster's asset (defs/night/assets.py) retries the
transient ones; docs/ordering.md describes the night rows they leave.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date

import psycopg

from anima_pipeline.core.errors import NightError
from anima_pipeline.llm.contract import Usage
from anima_pipeline.night.frame import StepResult
from anima_pipeline.store import sleep_state


class NightBusy(NightError):
    """Another run, still alive (its lease is being renewed), is working on this night."""


@dataclass
class AnimaFailure:
    """Why one anima's night stopped: at `step` (a step key, or 'night' for the night itself:
    order guard, a busy night, the store), with what it had spent."""

    anima_id: str
    step: str
    cause: BaseException
    usage: Usage = field(default_factory=Usage)
    transient: bool = False
    recorded: bool = True  # the night row says failed (False: the worker died before it could)

    def describe(self) -> str:
        return f"{self.anima_id} at {self.step}: {type(self.cause).__name__}: {self.cause}"


def usage_of(exc: BaseException) -> Usage:
    spent = getattr(exc, "usage", None)
    return spent if isinstance(spent, Usage) else Usage()


def _portable(exc: BaseException) -> BaseException:
    """The exception itself when it survives pickling (a worker process hands it back), else
    a RuntimeError with its type and message."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except (pickle.PicklingError, TypeError, AttributeError, ValueError):
        return RuntimeError(f"{type(exc).__name__}: {exc}")


def failure(anima_id: str, step: str, exc: BaseException, *, recorded: bool = True) -> AnimaFailure:
    return AnimaFailure(
        anima_id=anima_id,
        step=step,
        cause=_portable(exc),
        usage=usage_of(exc),
        transient=is_transient(exc),
        recorded=recorded,
    )


class NightOrderError(NightError):
    """An anima's day D was refused because its night of D-1 is failed or not over."""

    def __init__(self, day: date, anima_id: str, previous: dict) -> None:
        self.day = day
        self.anima_id = anima_id
        self.previous_day = previous["day"]
        self.previous_status = previous["status"]
        self.previous_run_id = previous.get("run_id")
        if previous["status"] == sleep_state.FAILED:
            state, hint = "failed", "re-run that day first"
        elif previous.get("alive"):
            state, hint = "still running", "wait for that run to finish"
        else:
            state, hint = "interrupted (its run is gone)", "re-run that day to take it over"
        super().__init__(
            f"night of {day} for anima {anima_id} not started: its night of {self.previous_day} is "
            f"{state} (run {self.previous_run_id}); {hint}, or force this run "
            f"(Dagster run config force: true, CLI --force) to run {day} anyway"
        )


class NightFailed(NightError):
    """One or more animas' nights failed on `day`. Each failed step's writes were rolled back;
    earlier steps, the other animas and earlier days stay done. `failures` has every failed
    anima, step and cause; `step`, `anima_id` and `cause` are the first's, `usage` the sum of
    what the failed steps had spent."""

    def __init__(self, day: date, failures: Sequence[AnimaFailure], results: list[StepResult]) -> None:
        self.day = day
        self.failures = list(failures)
        self.results = results  # what finished this day, every anima
        first = self.failures[0]
        self.step = first.step
        self.anima_id: str | None = first.anima_id
        self.cause = first.cause
        self.usage: Usage = sum((f.usage for f in self.failures), Usage())
        if len(self.failures) == 1:
            who = f" for anima {first.anima_id}" if first.anima_id else ""
            msg = f"{first.step}{who} on {day} failed: {type(first.cause).__name__}: {first.cause}"
        else:
            msg = f"the night of {day} failed for {len(self.failures)} animas: " + "; ".join(
                f.describe() for f in self.failures
            )
        super().__init__(msg)


def is_transient(exc: BaseException) -> bool:
    """Whether the night should be retried: lost database connections, serialization
    failures, deadlocks. One owner per failure kind: an API overload (429/529/5xx/timeout) is
    retried per request by the engine (tenacity, ANIMA_LLM_MAX_RETRIES with capped waits), so
    its RetriesExhausted is final here, as are budget, configuration, refusals, bad tool calls
    and ordering errors: a retry would fail the same way (or spend more)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        seen.add(id(cur))
        if isinstance(cur, NightFailed):  # a retry helps only if every failure could pass
            return all(f.transient for f in cur.failures)
        if isinstance(
            cur,
            psycopg.OperationalError
            | psycopg.errors.SerializationFailure
            | psycopg.errors.DeadlockDetected
            | ConnectionError
            | TimeoutError,
        ):
            return True
        cur = cur.__cause__ or cur.__context__
    return False
