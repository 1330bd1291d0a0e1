"""The reads of `anima export --markdown` (anima_pipeline/memory/workspace.py), per anima: its day
summaries, its memory changes and the dream journal's bank suggestions. Read-only. Which
animas the store knows is store/animas.known_animas."""

from __future__ import annotations

from anima_pipeline.store.db import Connection


def day_summaries(conn: Connection, anima_id: str) -> list[dict]:
    """The anima's day-level summaries: period_start and content."""
    return conn.execute(
        "SELECT period_start, content FROM temporal_summary WHERE anima_id = %s AND level = 'day'",
        (anima_id,),
    ).fetchall()


def memory_changes(conn: Connection, anima_id: str) -> list[dict]:
    """The audit log's semantic-memory events of the anima that carry a day, oldest first:
    day, step, op, memory_id, before, after."""
    return conn.execute(
        """SELECT day, step, op, memory_id, before, after FROM memory_event
           WHERE anima_id = %s AND table_name = 'semantic_memory' AND day IS NOT NULL ORDER BY id""",
        (anima_id,),
    ).fetchall()


def bank_suggestions(conn: Connection, anima_id: str) -> list[dict]:
    """The dream journal's bank_suggestions of the anima, one row per night in day order."""
    return conn.execute(
        "SELECT bank_suggestions FROM dream_journal WHERE anima_id = %s ORDER BY day", (anima_id,)
    ).fetchall()
