"""Review mode: approve or reject what a night proposed (docs/review.md).

With ANIMA_REVIEW_MODE on, the executor stores a night's deprecations, merges, splits and unpins
as proposals (store/proposals.py). Approving one applies exactly that tool call through the same
executor, scope check and audit as the night would have, under a run id of its own
(`review-…`), so `anima revert --run` undoes an approval like any run. The loss guards still
apply: an approval batch counts against the step and night allowances of the proposal's day.

A proposal whose memories changed after it was proposed (a later night, an agent's correction,
a revert) is refused and marked `conflict`: what the model saw is no longer what is there.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import date
from typing import Any

from pydantic import BaseModel

from anima_pipeline.config import Settings
from anima_pipeline.core.errors import InputError
from anima_pipeline.core.types import ProposalStatus
from anima_pipeline.night import guards
from anima_pipeline.store import proposals as review
from anima_pipeline.store.db import Database, anima_lock
from anima_pipeline.store.events import Audit, event_watermark
from anima_pipeline.store.memories import MemoryRepo, SemanticMemory
from anima_pipeline.tools.executor import REVIEWED_TOOLS, ToolExecutor
from anima_pipeline.tools.scope import Scope

APPROVE_STEP = "review/approved"
REJECT_STEP = "review/rejected"


class ReviewError(InputError):
    """A proposal that cannot be decided: unknown, already decided, or in conflict."""


class ProposalNotFound(ReviewError):
    code = "not_found"
    http_status = 404


class AlreadyDecided(ReviewError):
    code = "conflict"
    http_status = 409


class Decision(BaseModel):
    proposal: str
    status: ProposalStatus
    message: str
    run_id: str | None = None


class ProposalView(BaseModel):
    """A proposal with the memories it would change, side by side, for a person to judge."""

    proposal: review.Proposal
    memories: list[SemanticMemory]


def pending(
    db: Database, anima_id: str | None = None, day: date | None = None, status: str | None = "pending"
) -> list[ProposalView]:
    with db.transaction() as conn:
        props = review.listing(conn, anima_id, day, status)  # type: ignore[arg-type]
        repo = MemoryRepo(conn)
        return [ProposalView(proposal=p, memories=repo.get_many(p.memory_ids)) for p in props]


def _resolve(db: Database, anima_id: str, refs: Sequence[str | int], day: date | None) -> list[int]:
    raw = [str(r).removeprefix("r-") for r in refs]
    if bad := [r for r in raw if not r.isdecimal()]:
        raise ReviewError(f"{bad[0]!r} is not a proposal id; ids look like 'r-12'", field="proposal")
    ids = [int(r) for r in raw]
    if day is not None:
        with db.transaction() as conn:
            ids += review.ids_of_day(conn, anima_id, day)
    if not ids:
        raise ReviewError("name proposals (r-N) or a day with pending proposals")
    return sorted(dict.fromkeys(ids))


def approve(
    db: Database,
    settings: Settings,
    anima_id: str,
    refs: Sequence[str | int] = (),
    *,
    day: date | None = None,
    who: str = "operator",
) -> list[Decision]:
    """Apply the named proposals (and every pending one of `day`) in order, in one transaction
    per anima: all or nothing when the loss guard trips. A proposal in conflict is refused and
    marked so; the others still apply."""
    ids = _resolve(db, anima_id, refs, day)
    run_id = f"review-{uuid.uuid4().hex[:12]}"
    limits = guards.LossLimits.from_settings(settings)
    decisions: list[Decision] = []
    with db.transaction() as conn:
        anima_lock(conn, anima_id)
        watermark = event_watermark(conn)
        applied_days: set[date | None] = set()
        for pid in ids:
            p = _open(conn, anima_id, pid)
            audit = Audit(conn=conn, anima_id=anima_id, run_id=run_id, step=APPROVE_STEP, day=p.day)
            later = review.later_changes(conn, p)
            if later:
                first = later[0]
                why = (
                    f"f-{first['memory_id']} changed after it was proposed "
                    f"({first['op']} by {first['step']}, run {first['run_id']}); the proposal no longer "
                    "describes the store: let the next night propose again"
                )
                review.decide(conn, audit, p, "conflict", who, {"error": why})
                decisions.append(Decision(proposal=p.ref, status="conflict", message=why))
                continue
            executor = ToolExecutor(conn, Scope(anima_id=anima_id, tools=tuple(REVIEWED_TOOLS)), audit)
            result = executor.call(p.tool, p.input)
            if result.is_error:
                review.decide(conn, audit, p, "conflict", who, {"error": result.content})
                decisions.append(Decision(proposal=p.ref, status="conflict", message=result.content))
                continue
            review.decide(conn, audit, p, "approved", who, {"run_id": run_id, "result": result.content})
            decisions.append(
                Decision(proposal=p.ref, status="approved", message=result.content, run_id=run_id)
            )
            applied_days.add(p.day)
        for d in applied_days:  # the night's allowance holds for what a person lets through too
            guards.check_step(
                conn,
                Audit(conn=conn, anima_id=anima_id, run_id=run_id, step=APPROVE_STEP, day=d),
                limits,
                watermark,
            )
    return decisions


def reject(
    db: Database,
    anima_id: str,
    refs: Sequence[str | int] = (),
    *,
    day: date | None = None,
    who: str = "operator",
    reason: str | None = None,
) -> list[Decision]:
    """Mark proposals rejected: nothing in the store changes, and a later night proposing the
    same operation is told a person said no."""
    ids = _resolve(db, anima_id, refs, day)
    run_id = f"review-{uuid.uuid4().hex[:12]}"
    decisions = []
    with db.transaction() as conn:
        anima_lock(conn, anima_id)
        for pid in ids:
            p = _open(conn, anima_id, pid)
            audit = Audit(conn=conn, anima_id=anima_id, run_id=run_id, step=REJECT_STEP, day=p.day)
            review.decide(conn, audit, p, "rejected", who, {"reason": reason})
            decisions.append(Decision(proposal=p.ref, status="rejected", message=reason or "rejected"))
    return decisions


def _open(conn: Any, anima_id: str, pid: int) -> review.Proposal:
    p = review.get(conn, pid, for_update=True)
    if p is None or p.anima_id != anima_id:
        raise ProposalNotFound(f"r-{pid} is not a proposal of anima {anima_id!r}", field="proposal")
    if p.status != "pending":
        raise AlreadyDecided(
            f"{p.ref} was already decided: {p.status} by {p.decided_by} at {p.decided_at}", field="proposal"
        )
    return p
