"""Review proposals: the destructive operations a night proposed instead of applying them
(review mode, docs/review.md). The queries only; approving runs in anima_pipeline.review.decisions."""

from __future__ import annotations

from datetime import date
from typing import Any

from psycopg.types.json import Jsonb
from pydantic import BaseModel

from anima_pipeline.core.types import ProposalStatus
from anima_pipeline.store.db import Connection
from anima_pipeline.store.events import Audit

_COLUMNS = (
    "id, anima_id, day, run_id, step, tool, input, reason, memory_ids, watermark, status, "
    "decided_at, decided_by, decision, created_at"
)


class Proposal(BaseModel):
    id: int
    anima_id: str
    day: date | None
    run_id: str
    step: str
    tool: str
    input: dict[str, Any]
    reason: str | None
    memory_ids: list[int]
    watermark: int
    status: ProposalStatus
    decided_at: Any = None
    decided_by: str | None = None
    decision: dict[str, Any] | None = None
    created_at: Any = None

    @property
    def ref(self) -> str:
        return f"r-{self.id}"


def add(
    conn: Connection,
    audit: Audit,
    tool: str,
    input: dict[str, Any],
    reason: str | None,
    memory_ids: list[int],
) -> tuple[Proposal, bool]:
    """Store a pending proposal; (the proposal, True) when new, (the open identical one, False)."""
    row = conn.execute(
        f"""INSERT INTO review_proposal (anima_id, day, run_id, step, tool, input, reason, memory_ids, watermark)
            VALUES (%s, %s, %s, %s, %s, %s, %s, %s, (SELECT coalesce(max(id), 0) FROM memory_event))
            ON CONFLICT (anima_id, tool, md5(input::text)) WHERE status = 'pending' DO NOTHING
            RETURNING {_COLUMNS}""",
        (audit.anima_id, audit.day, audit.run_id, audit.step, tool, Jsonb(input), reason, memory_ids),
    ).fetchone()
    if row is None:
        same = conn.execute(
            f"""SELECT {_COLUMNS} FROM review_proposal
                WHERE anima_id = %s AND tool = %s AND md5(input::text) = md5(%s::jsonb::text)
                  AND status = 'pending'""",
            (audit.anima_id, tool, Jsonb(input)),
        ).fetchone()
        return Proposal.model_validate(same), False
    proposal = Proposal.model_validate(row)
    audit.record("review_proposal", proposal.id, "propose", None, proposal.model_dump(mode="json"))
    return proposal, True


def rejected_before(conn: Connection, anima_id: str, tool: str, input: dict[str, Any]) -> Proposal | None:
    """The latest rejected proposal of exactly this operation: a person said no to it once."""
    row = conn.execute(
        f"""SELECT {_COLUMNS} FROM review_proposal
            WHERE anima_id = %s AND tool = %s AND md5(input::text) = md5(%s::jsonb::text)
              AND status = 'rejected' ORDER BY id DESC LIMIT 1""",
        (anima_id, tool, Jsonb(input)),
    ).fetchone()
    return Proposal.model_validate(row) if row else None


def get(conn: Connection, proposal_id: int, *, for_update: bool = False) -> Proposal | None:
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM review_proposal WHERE id = %s" + (" FOR UPDATE" if for_update else ""),
        (proposal_id,),
    ).fetchone()
    return Proposal.model_validate(row) if row else None


def listing(
    conn: Connection,
    anima_id: str | None = None,
    day: date | None = None,
    status: ProposalStatus | None = "pending",
    limit: int = 200,
) -> list[Proposal]:
    rows = conn.execute(
        f"""SELECT {_COLUMNS} FROM review_proposal
            WHERE (%(a)s::text IS NULL OR anima_id = %(a)s) AND (%(d)s::date IS NULL OR day = %(d)s)
              AND (%(s)s::text IS NULL OR status = %(s)s)
            ORDER BY id LIMIT %(n)s""",
        {"a": anima_id, "d": day, "s": status, "n": limit},
    ).fetchall()
    return [Proposal.model_validate(r) for r in rows]


def ids_of_day(conn: Connection, anima_id: str, day: date) -> list[int]:
    return [
        r["id"]
        for r in conn.execute(
            "SELECT id FROM review_proposal WHERE anima_id = %s AND day = %s AND status = 'pending' ORDER BY id",
            (anima_id, day),
        ).fetchall()
    ]


def later_changes(conn: Connection, proposal: Proposal) -> list[dict[str, Any]]:
    """Events on the proposal's memories written after it was proposed (by anything but its own run)."""
    return conn.execute(
        """SELECT memory_id, run_id, step, op, created_at FROM memory_event
           WHERE table_name = 'semantic_memory' AND memory_id = ANY(%s::text[]) AND id > %s
           ORDER BY id""",
        ([str(m) for m in proposal.memory_ids], proposal.watermark),
    ).fetchall()


def decide(
    conn: Connection,
    audit: Audit,
    proposal: Proposal,
    status: ProposalStatus,
    who: str,
    decision: dict[str, Any],
) -> Proposal:
    row = conn.execute(
        f"""UPDATE review_proposal SET status = %s, decided_at = now(), decided_by = %s, decision = %s
            WHERE id = %s RETURNING {_COLUMNS}""",
        (status, who, Jsonb(decision), proposal.id),
    ).fetchone()
    after = Proposal.model_validate(row)
    audit.record(
        "review_proposal",
        proposal.id,
        status,
        proposal.model_dump(mode="json"),
        after.model_dump(mode="json"),
    )
    return after
