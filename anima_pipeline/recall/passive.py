"""Passive recall and active search over semantic memories, ranked by `recall.ranking`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from anima_pipeline.recall.query import DATED_RE, QueryPlan
from anima_pipeline.recall.ranking import Search, hits_sql, run
from anima_pipeline.recall.render import memory_item
from anima_pipeline.recall.sections import ContextItem
from anima_pipeline.store.db import Connection

DATE_BONUS = 0.2  # a memory carrying a date, when the question asks when
PERIOD_BONUS = 0.3  # a memory observed in the period the question names
DENSE_WEIGHT = 0.0  # RRF weight of the nearest memories: above 0 lowered the tuned figures

# The resident set is left out when candidates are scored (it is read in the same round trip).
_WHERE = """x.anima_id = %(anima)s AND x.status = 'active'
    AND NOT (cardinality(x.source_sessions) > 0 AND x.source_sessions <@ %(exclude_sessions)s::text[])
    AND (%(types)s::text[] IS NULL OR x.type = ANY(%(types)s::text[]))
    AND (%(since)s::timestamptz IS NULL OR coalesce(x.observed_at, x.created_at) >= %(since)s::timestamptz)
    AND (%(until)s::timestamptz IS NULL OR coalesce(x.observed_at, x.created_at) < %(until)s::timestamptz)"""

_SCORE_SQL = f"""
SELECT id, type, content, source_sessions, observed_at, created_at, pinned, matched, dated, in_period,
       coverage + %(rank_w)s * rank_cd
           + CASE WHEN %(asks_time)s AND dated THEN %(date_bonus)s ELSE 0 END
           + CASE WHEN in_period THEN %(period_bonus)s ELSE 0 END AS score
FROM (
    SELECT x.id, x.type, x.content, x.source_sessions, x.observed_at, x.created_at, x.pinned, {hits_sql()},
           %(asks_time)s AND x.content ~* %(dated_re)s AS dated,  -- the regex only when asked when
           EXISTS (SELECT 1 FROM unnest(%(p_start)s::date[], %(p_end)s::date[]) AS p(s, e)
                   WHERE (coalesce(x.observed_at, x.valid_from) AT TIME ZONE %(tz)s)::date >= p.s
                     AND (coalesce(x.observed_at, x.valid_from) AT TIME ZONE %(tz)s)::date < p.e) AS in_period
    FROM semantic_memory x
    WHERE x.id = ANY(%(ids)s::bigint[])
    OFFSET 0  -- score each candidate once (no flattening into the outer WHERE and ORDER BY)
) scored
WHERE coverage > 0
ORDER BY score DESC, length(content), id
LIMIT %(limit)s OFFSET %(offset)s
"""


# The nearest memories under the same filters (the resident set left out here too); the
# columns of _SCORE_SQL, the similarity as score.
_DENSE_SQL = f"""
SELECT x.id, x.type, x.content, x.source_sessions, x.observed_at, x.created_at, x.pinned,
       '{{{{}}}}'::text[] AS matched, false AS dated, false AS in_period,
       1 - (e.v::vector({{d}}) <=> %(qv)s::vector({{d}})) AS sim, 1 - (e.v::vector({{d}}) <=> %(qv)s::vector({{d}})) AS score
FROM embedding e
JOIN semantic_memory x ON x.id = e.item_id
WHERE e.anima_id = %(anima)s AND e.kind = 'memory' AND e.model_id = %(model)s
  AND {_WHERE} AND NOT (x.id = ANY(%(exclude_ids)s::bigint[]))
ORDER BY e.v::vector({{d}}) <=> %(qv)s::vector({{d}})
LIMIT %(k)s
"""


class MemorySearch(Search):
    table = "semantic_memory"
    where = _WHERE
    score_sql = _SCORE_SQL
    dense_sql = _DENSE_SQL
    dense_weight = DENSE_WEIGHT

    def filter_params(  # type: ignore[override]
        self,
        *,
        exclude_ids: Sequence[int] = (),
        exclude_sessions: Sequence[str] = (),
        types: Sequence[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> dict[str, Any]:
        return {
            "exclude_ids": list(exclude_ids),
            "exclude_sessions": list(exclude_sessions),
            "types": list(types) if types else None,
            "since": since,
            "until": until,
        }

    def score_args(self) -> dict[str, Any]:
        return {
            **super().score_args(),
            "asks_time": self.plan.asks_time,
            "date_bonus": DATE_BONUS,
            "period_bonus": PERIOD_BONUS,
            "dated_re": DATED_RE,
        }

    def items(self, rows: list[dict[str, Any]]) -> list[ContextItem]:
        out = []
        for r in rows:
            why = "matched " + ", ".join(r["matched"])
            if self.plan.asks_time and r["dated"]:
                why += " (dated)"
            if r["in_period"]:
                why += " (in the period)"
            out.append(memory_item(r, score=float(r["score"]), why=why, tz=self.tz))
        return out


def rank_memories(conn: Connection, anima_id: str, plan: QueryPlan, **kw: Any) -> list[ContextItem]:
    """Active memories matching the plan, best first; none when nothing matches."""
    (items,), _ = run(conn, anima_id, [MemorySearch(anima_id, plan, **kw)])
    return items
