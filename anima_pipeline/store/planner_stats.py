"""Planner statistics kept by the project, not left to autovacuum (off on some servers, and
late on any): recall's plans rest on them (`recall.ranking` reads the `fts` statistics, and
without any the planner walks a status index through every active row: 25-45 ms recall
became 220-760 ms at 100,000 memories).

`keep_fresh` applies autovacuum's own analyze rule to the tables a write touched: ANALYZE a
table changed in more than 50 + 10 % of its rows since its last analyze, or never analysed.
Called after an import, a night, a bulk append and an embedding backfill; one catalog read
when nothing is due."""

from __future__ import annotations

import logging
from collections.abc import Mapping

from anima_pipeline.store.db import Connection

log = logging.getLogger(__name__)

ARCHIVE_TABLES = ("conversation", "message", "recall_word")
NIGHT_TABLES = (
    "semantic_memory",
    "memory_event",
    "memory_reference",
    "emotional_anchor",
    "autobiographical_memory",
    "temporal_summary",
    "self_block",
    "sleep_state",
)
VECTOR_TABLES = ("embedding",)
THRESHOLD, SCALE = 50, 0.1  # autovacuum_analyze_threshold and _scale_factor's defaults


def stale(conn: Connection, written: Mapping[str, int]) -> list[str]:
    """The tables among `written` (table -> rows this write changed) whose statistics are due:
    never analysed, or changed (this write and earlier ones, as the statistics collector saw
    them) in more than THRESHOLD + SCALE x their rows. The caller's own count matters because
    the collector flushes its counters up to a second after a commit."""
    rows = conn.execute(
        """SELECT c.relname, c.reltuples, coalesce(s.n_mod_since_analyze, 0) AS mods,
                  coalesce(s.n_live_tup, 0) AS live,
                  coalesce(s.last_analyze, s.last_autoanalyze) IS NULL AS never
           FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
           WHERE c.relnamespace = current_schema()::regnamespace AND c.relname = ANY(%s::text[])""",
        (list(written),),
    ).fetchall()
    due = []
    for r in rows:
        changed = written[r["relname"]] + r["mods"]
        if r["never"] or r["reltuples"] < 0:
            if changed or r["live"]:
                due.append(r["relname"])
        elif changed > THRESHOLD + SCALE * r["reltuples"]:
            due.append(r["relname"])
    return sorted(due)


def keep_fresh(conn: Connection, written: Mapping[str, int]) -> list[str]:
    """ANALYZE what is due among `written` (table -> rows changed); returns the tables analysed."""
    due = stale(conn, written)
    for table in due:
        conn.execute(f"ANALYZE {table}")  # names from the catalog, matched against this module's constants
    if due:
        log.info("planner statistics refreshed: %s", ", ".join(due))
    return due
