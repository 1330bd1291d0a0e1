"""Temporal summaries for a question about a time: those covering a period the question names,
then those whose text matches it (the expression GIN index on anima_search_vector)."""

from __future__ import annotations

from collections.abc import Callable

from anima_pipeline.recall.query import QueryPlan
from anima_pipeline.recall.ranking import CAP
from anima_pipeline.recall.render import summary_item
from anima_pipeline.recall.sections import ContextItem
from anima_pipeline.store import recall_queries as queries
from anima_pipeline.store.db import Connection

LIMIT = 12


def rank_summaries(conn: Connection, anima_id: str, plan: QueryPlan) -> list[ContextItem]:
    """Summaries of the periods the question names first (finest level first), then by match."""
    return send_summaries(conn, anima_id, plan)()


def send_summaries(conn: Connection, anima_id: str, plan: QueryPlan) -> Callable[[], list[ContextItem]]:
    """`rank_summaries` in two halves (pipeline mode)."""
    starts, ends = [p.start for p in plan.periods], [p.end for p in plan.periods]
    # any of the words, through the english configuration (a constant: the index can be used)
    or_q = " | ".join("'" + w.replace("'", "''") + "'" for w in plan.terms) or None
    if not plan.about_time or (not starts and not or_q):
        return list
    rows = queries.send_summaries(
        conn,
        {
            "anima": anima_id,
            "or_q": or_q,
            "p_start": starts,
            "p_end": ends,
            "p_min": min(starts) if starts else None,
            "p_max": max(ends) if ends else None,
            "cap": CAP,
            "limit": LIMIT,
        },
    )
    return lambda: [
        summary_item(r, score=float(r["score"]), why="covers the period" if r["in_period"] else "matched")
        for r in rows()
    ]
