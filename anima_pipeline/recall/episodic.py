"""Episodic recall: search over past messages (Letta's "recall memory"), ranked like memories
by `recall.ranking`, shown with their date, speaker and conversation title. Cron and debug
conversations are not the anima's life and are never recalled."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from anima_pipeline.recall.query import QueryPlan
from anima_pipeline.recall.ranking import Search, hits_sql, run
from anima_pipeline.recall.render import message_item
from anima_pipeline.recall.sections import ContextItem
from anima_pipeline.store.db import Connection

PERIOD_BONUS = 0.3  # a message of the period the question names
DENSE_WEIGHT = 0.0  # as for memories: the nearest come after the lexical list and get the reserve

_WHERE = """x.anima_id = %(anima)s AND x.role IN ('user', 'assistant') AND x.forgotten_at IS NULL
    AND NOT (x.conversation_id = ANY(%(exclude_sessions)s::text[]))
    AND (%(conversation)s::text IS NULL OR x.conversation_id = %(conversation)s::text)
    AND (%(speaker)s::text IS NULL OR x.speaker = %(speaker)s::text)
    AND (%(since)s::timestamptz IS NULL OR x.created_at >= %(since)s::timestamptz)
    AND (%(until)s::timestamptz IS NULL OR x.created_at < %(until)s::timestamptz)"""

_SCORE_SQL = f"""
SELECT id, conversation_id, role, speaker, content, created_at, title, matched, in_period,
       coverage + %(rank_w)s * rank_cd + CASE WHEN in_period THEN %(period_bonus)s ELSE 0 END AS score
FROM (
    SELECT x.id, x.conversation_id, x.role, x.speaker, x.content, x.created_at, c.title,
           {hits_sql("sp.v @@ t.tsq::tsquery")},
           EXISTS (SELECT 1 FROM unnest(%(p_start)s::date[], %(p_end)s::date[]) AS p(s, e)
                   WHERE (x.created_at AT TIME ZONE %(tz)s)::date >= p.s
                     AND (x.created_at AT TIME ZONE %(tz)s)::date < p.e) AS in_period
    FROM message x
    JOIN conversation c ON c.anima_id = x.anima_id AND c.id = x.conversation_id
    CROSS JOIN LATERAL (SELECT to_tsvector('english'::regconfig, coalesce(x.speaker, '')) AS v) sp
    WHERE x.id = ANY(%(ids)s::bigint[]) AND c.platform <> 'cron' AND NOT c.debug
    OFFSET 0  -- score each candidate once (no flattening into the outer WHERE and ORDER BY)
) scored
WHERE coverage > 0 OR in_period
ORDER BY score DESC, length(content), id
LIMIT %(limit)s OFFSET %(offset)s
"""


_DENSE_SQL = f"""
SELECT x.id, x.conversation_id, x.role, x.speaker, x.content, x.created_at, c.title,
       '{{{{}}}}'::text[] AS matched, false AS in_period,
       1 - (e.v::vector({{d}}) <=> %(qv)s::vector({{d}})) AS sim, 1 - (e.v::vector({{d}}) <=> %(qv)s::vector({{d}})) AS score
FROM embedding e
JOIN message x ON x.id = e.item_id
JOIN conversation c ON c.anima_id = x.anima_id AND c.id = x.conversation_id
WHERE e.anima_id = %(anima)s AND e.kind = 'message' AND e.model_id = %(model)s
  AND {_WHERE} AND c.platform <> 'cron' AND NOT c.debug
ORDER BY e.v::vector({{d}}) <=> %(qv)s::vector({{d}})
LIMIT %(k)s
"""


class MessageSearch(Search):
    table = "message"
    where = _WHERE
    dense_sql = _DENSE_SQL
    dense_weight = DENSE_WEIGHT
    time_column = "created_at"  # indexed with anima_id: the rows of a period the question names
    score_sql = _SCORE_SQL

    def filter_params(  # type: ignore[override]
        self,
        *,
        exclude_sessions: Sequence[str] = (),
        conversation_id: str | None = None,
        speaker: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> dict[str, Any]:
        return {
            "exclude_sessions": list(exclude_sessions),
            "conversation": conversation_id,
            "speaker": speaker,
            "since": since,
            "until": until,
        }

    def score_args(self) -> dict[str, Any]:
        return {**super().score_args(), "period_bonus": PERIOD_BONUS}

    def items(self, rows: list[dict[str, Any]]) -> list[ContextItem]:
        return [
            message_item(
                r,
                score=float(r["score"]),
                why="matched " + ", ".join(r["matched"]) + (" (in the period)" if r["in_period"] else ""),
                tz=self.tz,
            )
            for r in rows
        ]


def rank_messages(conn: Connection, anima_id: str, plan: QueryPlan, **kw: Any) -> list[ContextItem]:
    """Messages matching the plan, best first (a term may also match the speaker's name)."""
    (items,), _ = run(conn, anima_id, [MessageSearch(anima_id, plan, **kw)])
    return items
