"""The frame every step of the night runs in: one (anima, day, step) at a time, in one
transaction, under a per-anima lock, skipped when already done unless forced, with its
outcome recorded in sleep_state.

A step's body gets the open connection and an Audit and returns a StepOutcome; the frame
adds timing and bookkeeping so each step module only holds its own logic.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo

import psycopg
from pydantic import BaseModel, Field

from anima_pipeline.config import DEFAULT_TIMEZONE, DeepSettings, RecallSettings
from anima_pipeline.core.errors import NightError
from anima_pipeline.llm.contract import Engine, OfflinePlan, ToolCall, ToolResult, Usage
from anima_pipeline.llm.failures import ModelAnswerError
from anima_pipeline.night import failpoints, guards
from anima_pipeline.store import sleep_state
from anima_pipeline.store.db import Connection, Database, anima_lock
from anima_pipeline.store.events import Audit, event_watermark

logger = logging.getLogger(__name__)

Mode = Literal["full", "incremental"]


@dataclass
class Night:
    """Everything a step needs to know about the night it runs in."""

    day: date
    engine: Engine
    tz: ZoneInfo = field(default_factory=lambda: ZoneInfo(DEFAULT_TIMEZONE))
    run_id: str = field(default_factory=lambda: f"run-{uuid.uuid4().hex[:12]}")
    force: bool = False
    mode: Mode = "full"
    log_dir: Path | None = None
    recall: RecallSettings = field(default_factory=RecallSettings)  # the references step's counts
    deep: DeepSettings = field(default_factory=DeepSettings)
    limits: guards.LossLimits = field(default_factory=guards.LossLimits)
    growth: guards.GrowthLimits = field(default_factory=guards.GrowthLimits)
    review: bool = False  # ANIMA_REVIEW_MODE: destructive operations become proposals

    @property
    def start(self) -> datetime:
        return datetime.combine(self.day, datetime.min.time(), tzinfo=self.tz)

    @property
    def end(self) -> datetime:
        """The night's cutoff: the end of the partition day, not the wall clock."""
        return datetime.combine(self.day + timedelta(days=1), datetime.min.time(), tzinfo=self.tz)


def scheduled_mode(day: date) -> Mode:
    """Full on the night of a Monday partition, incremental Tuesday to Sunday (docs/ordering.md)."""
    return "full" if day.weekday() == 0 else "incremental"


class StepOutcome(BaseModel):
    stats: dict[str, float | int | str] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)
    details: dict[str, Any] = Field(default_factory=dict)


class StepResult(BaseModel):
    step: str
    anima_id: str
    day: date
    status: Literal["done", "skipped"]
    stats: dict[str, float | int | str] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)
    duration_s: float = 0.0
    details: dict[str, Any] = Field(default_factory=dict)


class StepFailed(NightError):
    """A step stopped; its writes were rolled back. The message names the step, anima and day."""


def unchanged(**zeros: int) -> StepOutcome:
    """The outcome of a step that cannot change anything tonight (the anima's store did not
    change that day): nothing is sent, and the skip is recorded in the step's stats, so the
    Dagster metadata and `anima sleep --estimate` see it (docs/cost.md)."""
    return StepOutcome(stats={**zeros, "skipped_unchanged": 1, "skip_reason": "store unchanged that day"})


def plan_of(*calls: ToolCall) -> OfflinePlan:
    """An offline plan that makes fixed calls (for steps whose heuristic is computed up front)."""

    def plan() -> Generator[ToolCall, ToolResult, None]:
        for call in calls:  # noqa: UP028 (yield from a tuple cannot receive send())
            yield call

    return plan


StepBody = Callable[[Connection, Audit], StepOutcome]


def run_step(db: Database, night: Night, anima_id: str, step: str, body: StepBody) -> StepResult:
    t0 = time.monotonic()
    failpoints.reached("before_step", day=night.day, anima_id=anima_id, step=step)
    try:
        with db.transaction() as conn:
            anima_lock(conn, anima_id)
            if not night.force:
                prev = sleep_state.get(conn, anima_id, night.day, step)
                if prev and prev["status"] in ("done", "skipped"):
                    return StepResult(
                        step=step,
                        anima_id=anima_id,
                        day=night.day,
                        status="skipped",
                        stats={**prev["stats"], "already_done": 1},
                        duration_s=time.monotonic() - t0,
                    )
            audit = Audit(
                conn=conn,
                anima_id=anima_id,
                run_id=night.run_id,
                step=step,
                day=night.day,
                review=night.review,
            )
            watermark = event_watermark(conn)
            outcome = _declining(conn, audit, body)
            _refused(audit, outcome)
            # the loss guard of every step: raises (and so rolls the step back) when it retired too much
            guarded = guards.check_step(conn, audit, night.limits, watermark)
            guarded |= guards.check_growth(conn, audit, night.growth, watermark, night.start, night.end)
            stats = {**outcome.stats, **guarded, **_usage_stats(outcome.usage), **_declined_stats(audit)}
            sleep_state.finish(conn, anima_id, night.day, step, stats, night.run_id)
            failpoints.reached("in_step", day=night.day, anima_id=anima_id, step=step)
    except Exception as exc:
        spent = getattr(exc, "usage", None)
        undone = ""
        if isinstance(exc, guards.LossGuardTripped) and exc.kind == "night":
            undone = _undo_night(db, night, anima_id)
        try:
            with db.transaction() as conn:
                sleep_state.fail(
                    conn,
                    anima_id,
                    night.day,
                    step,
                    f"{type(exc).__name__}: {exc}",
                    night.run_id,
                    _usage_stats(spent) if isinstance(spent, Usage) else None,
                )
        except psycopg.Error as record_exc:  # the store is gone too: the step's own error is raised below
            logger.error(
                "%s for anima %s on %s: the failure could not be recorded (%s: %s)",
                step,
                anima_id,
                night.day,
                type(record_exc).__name__,
                record_exc,
            )
            exc.add_note(f"recording this failure failed too: {type(record_exc).__name__}: {record_exc}")
        raise StepFailed(
            f"{step} for anima {anima_id} on {night.day} failed, nothing written: {exc}{undone}"
        ) from exc
    return StepResult(
        step=step,
        anima_id=anima_id,
        day=night.day,
        status="done",
        stats=stats,
        usage=outcome.usage,
        duration_s=round(time.monotonic() - t0, 3),
        details=outcome.details,
    )


def _declining(conn: Connection, audit: Audit, body: StepBody) -> StepOutcome:
    """The step's body; what the model answered for this input (a refusal, a cut answer, a
    conversation that would not end: `ModelAnswerError`) rolls the body back and is recorded
    as declined, like a text-only answer. A re-run would get the same answer, so it must not
    fail the night and block the anima's later days (docs/ordering.md, "Restraint")."""
    try:
        with conn.transaction():  # a savepoint: the declined step keeps nothing of its answer
            return body(conn, audit)
    except ModelAnswerError as exc:
        logger.warning(
            "%s for anima %s: declined (%s): %s", audit.step, audit.anima_id, type(exc).__name__, exc
        )
        audit.declined.append(f"{type(exc).__name__}: {exc}")
        return StepOutcome(stats={"declined_cause": type(exc).__name__}, usage=exc.usage)


class StepRefused(NightError):
    """Every tool call of a step was refused and one of the refusals was the store failing
    (a lost connection, a deadlock): a re-run may write, so the step fails."""


def _refused(audit: Audit, outcome: StepOutcome) -> None:
    """A step whose every tool call the executor refused wrote nothing: it is not done. It is
    declined with the executor's first words (the model's calls were wrong for this input: a
    re-run asks the same), or fails when the store refused for a reason of its own, which a
    re-run may not meet (docs/ordering.md, "Restraint")."""
    tally = audit.tools
    if not tally.calls or len(tally.refused) < tally.calls:
        return
    first = tally.refused[0]
    if tally.retryable:
        raise StepRefused(f"every tool call ({tally.calls:,}) was refused, the store failing: {first}")
    logger.warning(
        "%s for anima %s: declined, every tool call refused: %s", audit.step, audit.anima_id, first
    )
    audit.declined.append(f"every tool call ({tally.calls:,}) refused; the first: {first}")
    outcome.stats.setdefault("declined_cause", "refused")


def _declined_stats(audit: Audit) -> dict[str, int | str]:
    """`declined` (times the model wrote nothing in the step) and its words, for the step's
    stats, the Dagster metadata and the `model_declined` check."""
    if not audit.declined:
        return {}
    words = " | ".join(dict.fromkeys(audit.declined))
    return {"declined": len(audit.declined), "declined_text": words[:1000]}


def _undo_night(db: Database, night: Night, anima_id: str) -> str:
    """After the night guard tripped: undo this run's earlier steps of that night for that anima."""
    revert_id = f"guard-revert-{uuid.uuid4().hex[:12]}"
    try:
        with db.transaction() as conn:
            anima_lock(conn, anima_id)
            stats = guards.undo_night(conn, anima_id, night.day, night.run_id, revert_id)
    except psycopg.Error as exc:  # the guard's own failure is the one to report; say the undo did not happen
        logger.error("undoing the night of %s for %s failed: %s", night.day, anima_id, exc)
        return f"; undoing the earlier steps of this night for {anima_id} FAILED ({type(exc).__name__}): revert run {night.run_id}"
    return f"; the earlier steps of this night for {anima_id} were undone as {revert_id} ({sum(stats.values())} rows)"


def _usage_stats(u: Usage) -> dict[str, float | int]:
    return {
        "llm_calls": u.calls,
        "tokens_in": u.input_tokens,
        "tokens_out": u.output_tokens,
        "cache_read": u.cache_read_tokens,
        "cache_write": u.cache_write_tokens,
        "cost_usd": u.cost_usd,
        # input as billed (cache writes 1.25x, reads 0.1x) against one pass of the input
        "billed_equiv_in": round(u.billed_equiv_tokens, 1),
        "one_pass_in": u.one_pass_tokens,
        "batched_calls": u.batched_calls,
    }
