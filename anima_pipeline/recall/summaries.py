"""Temporal summaries for a question about a time: those covering a period the question names,
then those whose text matches it (the expression GIN index on anima_search_vector)."""

from __future__ import annotations

from anima_pipeline.recall.query import QueryPlan
from anima_pipeline.recall.render import summary_item
from anima_pipeline.recall.sections import ContextItem
from anima_pipeline.store.db import Connection

LIMIT = 12
_LEVEL_ORDER = "array_position(ARRAY['day', 'week', 'month', 'year'], level)"

# any of the words: the english parser's stems joined by OR (plainto_tsquery would AND them)
_OR_QUERY = (
    "SELECT coalesce(string_agg(quote_literal(l), ' | '), '')::tsquery AS q"
    " FROM unnest(tsvector_to_array(to_tsvector('english'::regconfig, %(words)s))) AS l"
)
_SQL = f"""
WITH q AS ({_OR_QUERY})
SELECT id, level, period_start, period_end, content, in_period,
       (CASE WHEN in_period THEN 1 ELSE 0 END) + rank AS score
FROM (
    SELECT s.*, EXISTS (SELECT 1 FROM unnest(%(p_start)s::date[], %(p_end)s::date[]) AS p(ps, pe)
                        WHERE s.period_start < p.pe AND s.period_end >= p.ps) AS in_period,
           ts_rank_cd(anima_search_vector(s.content), (SELECT q FROM q), 32) AS rank
    FROM temporal_summary s
    WHERE s.anima_id = %(anima)s AND s.id IN (
        (SELECT id FROM temporal_summary t
         WHERE t.anima_id = %(anima)s AND t.period_start < %(p_max)s::date AND t.period_end >= %(p_min)s::date
         LIMIT 200)
        UNION
        (SELECT id FROM temporal_summary t
         WHERE t.anima_id = %(anima)s AND anima_search_vector(t.content) @@ (SELECT q FROM q)
         LIMIT 200))
) found
WHERE in_period OR rank > 0
ORDER BY score DESC, {_LEVEL_ORDER}, period_start DESC
LIMIT %(limit)s
"""


def rank_summaries(conn: Connection, anima_id: str, plan: QueryPlan) -> list[ContextItem]:
    if not plan.about_time:
        return []
    words = " ".join(plan.terms)
    starts, ends = [p.start for p in plan.periods], [p.end for p in plan.periods]
    rows = conn.execute(
        _SQL,
        {
            "anima": anima_id,
            "words": words,
            "p_start": starts,
            "p_end": ends,
            "p_min": min(starts) if starts else None,
            "p_max": max(ends) if ends else None,
            "limit": LIMIT,
        },
    ).fetchall()
    return [
        summary_item(r, score=float(r["score"]), why="covers the period" if r["in_period"] else "matched")
        for r in rows
    ]
