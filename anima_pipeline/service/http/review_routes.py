"""HTTP routes of review mode (docs/review.md): list a night's proposals, approve or reject them.
Same keys as the memory routes: a key decides over its own anima's proposals only. A proposal
it does not have is a 404, one decided before (or a tripped loss guard) a 409: the errors' own
statuses (review/decisions.py, night/guards.py)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel, Field

from anima_pipeline.core.types import ProposalStatus
from anima_pipeline.core.validation import Day, Name, Text
from anima_pipeline.review import decisions as review
from anima_pipeline.service.http.auth import Memory

router = APIRouter(prefix="/v1/animas/{anima_id}/review", tags=["review"])
ProposalRef = Annotated[str, Path(pattern=r"^r-\d{1,18}$", description="a proposal id, r-N")]


class DecisionBody(BaseModel):
    by: Name = Field("api", description="who decides (kept in the audit log)")
    reason: Text | None = Field(None, max_length=2000, description="why (kept with a rejection)")


@router.get("", response_model=list[review.ProposalView], summary="Proposals of review mode")
def proposals(
    request: Request,
    memory: Memory,
    day: Annotated[Day | None, Query(description="only this night, YYYY-MM-DD")] = None,
    status: Annotated[ProposalStatus, Query()] = "pending",
) -> list[review.ProposalView]:
    """Each proposal with the model's reason and the memories it would change."""
    return review.pending(request.app.state.db, memory.anima_id, day, status)


@router.post("/{proposal}/approve", response_model=list[review.Decision], summary="Approve a proposal")
def approve(
    request: Request, memory: Memory, proposal: ProposalRef, body: DecisionBody | None = None
) -> list[review.Decision]:
    """Apply exactly the proposed operation (audited, revertible); 409 when it was decided before
    or the loss guard refuses it; a proposal whose memories changed since comes back as `conflict`."""
    by = body.by if body else "api"
    return review.approve(
        request.app.state.db, request.app.state.settings, memory.anima_id, [proposal], who=by
    )


@router.post("/{proposal}/reject", response_model=list[review.Decision], summary="Reject a proposal")
def reject(
    request: Request, memory: Memory, proposal: ProposalRef, body: DecisionBody | None = None
) -> list[review.Decision]:
    body = body or DecisionBody()
    return review.reject(request.app.state.db, memory.anima_id, [proposal], who=body.by, reason=body.reason)
