"""One anima's night: claim it (a lease, taking over a run that is gone), run its steps in
registry order, record how it ended. And the heartbeat that keeps a run's leases alive.

The night row (sleep_state step 'night', one per anima and day) is what the order guard and
a re-run read; docs/ordering.md describes its states. A run that is killed leaves its nights
RUNNING with a lease nobody renews: once the lease lapses (ANIMA_NIGHT_LEASE_S, default 30 s)
the next run of that day takes the night over and redoes what was not committed (each step
commits with its own sleep_state row, so finished steps are skipped).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import psycopg

from anima_pipeline.core.errors import NightError
from anima_pipeline.llm.contract import Usage
from anima_pipeline.night import failpoints
from anima_pipeline.night.failure_kinds import AnimaFailure, NightBusy, failure
from anima_pipeline.night.frame import Night, StepFailed, StepResult
from anima_pipeline.store import sleep_state
from anima_pipeline.store.db import Connection, Database, connect

logger = logging.getLogger(__name__)

NIGHT = sleep_state.NIGHT


@dataclass
class AnimaOutcome:
    anima_id: str
    results: list[StepResult]
    failure: AnimaFailure | None = None


def _claim(db: Database, night: Night, anima_id: str, lease_s: float, stats: dict) -> dict | None:
    """Take the night for this run; None when it is done and not forced (left untouched: its
    steps skip on their own). Waits while another live run holds it (its lease renewed), up to
    two leases, then raises NightBusy; a lapsed lease is taken over at once."""
    deadline = time.monotonic() + 2 * lease_s
    while True:
        with db.transaction() as conn:
            row = sleep_state.get(conn, anima_id, night.day, NIGHT)
            if row is not None and row["status"] == sleep_state.DONE and not night.force:
                return None
            prev = sleep_state.claim_night(conn, anima_id, night.day, night.run_id, lease_s, stats)
        if prev is not None:
            if prev.get("status") == sleep_state.RUNNING and prev.get("run_id") != night.run_id:
                logger.warning(
                    "night of %s for %s: run %s is gone (lease lapsed at %s); taken over by run %s",
                    night.day,
                    anima_id,
                    prev["run_id"],
                    prev["lease_until"],
                    night.run_id,
                )
            return prev
        if time.monotonic() > deadline:
            raise NightBusy(
                f"the night of {night.day} for {anima_id} is being run by run {row['run_id'] if row else '?'}, "
                f"which is alive (its lease is renewed); wait for it, or re-run when it is over"
            )
        time.sleep(min(1.0, lease_s / 4))


def run_anima_night(
    db: Database,
    night: Night,
    anima_id: str,
    keys: Sequence[str],
    fns: dict[str, Callable[..., StepResult]],
    *,
    lease_s: float,
    whole_night: Sequence[str] | None = None,
) -> AnimaOutcome:
    """Run `keys` (registry order) for one anima, stopping at its first failing step.

    `whole_night`: every step this anima has on this day, when the run selected only some of
    them; the night then becomes done only if all of those are done afterwards, otherwise it
    gets back the state it had (a one-step re-run cannot unblock the next day)."""
    stats: dict = {"mode": night.mode, "steps": len(keys)}
    try:
        prev = _claim(db, night, anima_id, lease_s, stats)
    except (NightBusy, psycopg.Error) as exc:
        return AnimaOutcome(anima_id, [], failure(anima_id, NIGHT, exc, recorded=False))
    results: list[StepResult] = []
    failed: AnimaFailure | None = None
    for key in keys:
        try:
            results.append(fns[key](db, night, anima_id))
        except StepFailed as exc:
            failed = failure(anima_id, key, exc.__cause__ or exc)
            break
        except Exception as exc:  # noqa: BLE001 - a step's error fails this anima, not the night
            failed = failure(anima_id, key, exc)
            break
        except BaseException as exc:  # SIGINT / SIGTERM: the step rolled back; the run stops
            if prev is not None:
                _interrupted(db, night, anima_id, key, exc)
            raise
    if failed is None:
        try:
            failpoints.reached("night_end", day=night.day, anima_id=anima_id)
        except NightError as exc:  # a failpoint's failure (night/failpoints.py)
            failed = failure(anima_id, NIGHT, exc)
    if prev is not None:
        spent = sum((r.usage for r in results), Usage()) + (failed.usage if failed else Usage())
        stats.update(llm_calls=spent.calls, cost_usd=spent.cost_usd)
        try:
            failed = _end(db, night, anima_id, prev, failed, stats, whole_night)
        except psycopg.Error as exc:
            logger.error(
                "could not record the night of %s for %s: %s: %s",
                night.day,
                anima_id,
                type(exc).__name__,
                exc,
            )
            if failed is None:
                failed = failure(anima_id, NIGHT, exc, recorded=False)
            else:
                failed.recorded = False
    return AnimaOutcome(anima_id, results, failed)


def _interrupted(db: Database, night: Night, anima_id: str, step: str, exc: BaseException) -> None:
    """An interrupted night is recorded as failed (not left running until its lease lapses),
    so the same command run again carries on at once."""
    try:
        with db.transaction() as conn:
            sleep_state.end_night(
                conn,
                anima_id,
                night.day,
                night.run_id,
                sleep_state.FAILED,
                {"interrupted": True, "step": step},
                f"{step}: interrupted ({type(exc).__name__})",
            )
    except psycopg.Error as err:
        logger.error("could not record the interrupted night of %s for %s: %s", night.day, anima_id, err)


def _end(
    db: Database,
    night: Night,
    anima_id: str,
    prev: dict,
    failed: AnimaFailure | None,
    stats: dict,
    whole_night: Sequence[str] | None,
) -> AnimaFailure | None:
    with db.transaction() as conn:
        if failed is not None:
            kept = sleep_state.end_night(
                conn, anima_id, night.day, night.run_id, sleep_state.FAILED, stats, failed.describe()
            )
        elif whole_night is not None and not set(whole_night) <= sleep_state.steps_done(
            conn, anima_id, night.day
        ):
            sleep_state.restore_night(conn, anima_id, night.day, night.run_id, prev)
            return None
        else:
            kept = sleep_state.end_night(conn, anima_id, night.day, night.run_id, sleep_state.DONE, stats)
    if not kept:
        logger.warning(
            "the night of %s for %s was taken over by another run while run %s worked on it "
            "(its lease lapsed); that run's record stands",
            night.day,
            anima_id,
            night.run_id,
        )
    return failed


def end_unrecorded(db: Database, night: Night, failures: Sequence[AnimaFailure]) -> None:
    """Mark failed the nights whose worker could not (it died); logged when that fails too."""
    for f in failures:
        if f.recorded or isinstance(f.cause, NightBusy):
            continue
        try:
            with db.transaction() as conn:
                sleep_state.end_night(
                    conn, f.anima_id, night.day, night.run_id, sleep_state.FAILED, {}, f.describe()
                )
        except psycopg.Error as exc:
            logger.error(
                "could not record that the night of %s for %s failed (%s): %s: %s",
                night.day,
                f.anima_id,
                f.describe(),
                type(exc).__name__,
                exc,
            )


class Heartbeat:
    """Renews the leases of the run's running nights every lease/3 seconds, on its own
    connection, until closed. A missed beat is logged; the lease covers two more."""

    def __init__(self, url: str, run_id: str, lease_s: float) -> None:
        self.url, self.run_id, self.lease_s = url, run_id, lease_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"heartbeat-{run_id}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        conn: Connection | None = None
        try:
            while not self._stop.wait(self.lease_s / 3):
                try:
                    if conn is None:
                        conn = connect(self.url, autocommit=True)
                    sleep_state.heartbeat(conn, self.run_id, self.lease_s)
                except psycopg.Error as exc:
                    logger.warning("heartbeat of run %s missed: %s: %s", self.run_id, type(exc).__name__, exc)
                    if conn is not None:
                        conn.close()
                    conn = None
        finally:
            if conn is not None:
                conn.close()
