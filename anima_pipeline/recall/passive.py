"""Passive recall and active search over semantic memories, ranked by `recall.ranking`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from anima_pipeline.recall.query import DATED_RE, QueryPlan
from anima_pipeline.recall.ranking import Search, run
from anima_pipeline.recall.render import memory_item
from anima_pipeline.recall.sections import ContextItem
from anima_pipeline.store.db import Connection

DATE_BONUS = 0.2  # a memory carrying a date, when the question asks when
PERIOD_BONUS = 0.3  # a memory observed in the period the question names
DENSE_WEIGHT = 0.0  # RRF weight of the nearest memories: above 0 lowered the tuned figures


class MemorySearch(Search):
    table = "semantic_memory"
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
