"""Counts per anima and in total, for `anima status` and the Dagster metadata."""

from __future__ import annotations

from anima_pipeline.store.db import Connection

STATUS_KEYS: tuple[str, ...] = (
    "conversations",
    "messages",
    "semantic_active",
    "semantic_deprecated",
    "emotional_anchors",
    "autobiographical_active",
    "temporal_summaries",
    "memory_references",
    "dream_entries",
)

_QUERIES: dict[str, str] = {
    "conversations": "SELECT anima_id, count(*) FROM conversation GROUP BY anima_id",
    "messages": "SELECT anima_id, count(*) FROM message GROUP BY anima_id",
    "semantic_active": "SELECT anima_id, count(*) FROM semantic_memory WHERE status = 'active' GROUP BY anima_id",
    "semantic_deprecated": "SELECT anima_id, count(*) FROM semantic_memory WHERE status = 'deprecated' GROUP BY anima_id",
    "emotional_anchors": "SELECT anima_id, count(*) FROM emotional_anchor WHERE status = 'active' GROUP BY anima_id",
    "autobiographical_active": (
        "SELECT anima_id, count(*) FROM autobiographical_memory WHERE status = 'active' GROUP BY anima_id"
    ),
    "temporal_summaries": "SELECT anima_id, count(*) FROM temporal_summary GROUP BY anima_id",
    "memory_references": "SELECT anima_id, count(*) FROM memory_reference GROUP BY anima_id",
    "dream_entries": "SELECT anima_id, count(*) FROM dream_journal GROUP BY anima_id",
}


def status(conn: Connection) -> dict:
    """{"totals": {key: n}, "animas": [{"anima_id": a, key: n, ...}]} with exactly STATUS_KEYS."""
    per: dict[str, dict[str, int]] = {}
    for key, sql in _QUERIES.items():
        for row in conn.execute(sql).fetchall():
            anima, n = row["anima_id"], row["count"]
            per.setdefault(anima, dict.fromkeys(STATUS_KEYS, 0))[key] = int(n)
    totals = {k: sum(a[k] for a in per.values()) for k in STATUS_KEYS}
    return {"totals": totals, "animas": [{"anima_id": a, **per[a]} for a in sorted(per)]}
