"""What one (day, step) changed, read back for people: counts from the audit log, row counts,
and the rows a preview shows (day summaries, changed memories, dream entries, self blocks).

Every query is limited to the animas that ran the step that night (indexed on anima_id), so
a report costs about as much as the step's own reads, and nothing on a night nobody ran.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from anima_pipeline.core.errors import InternalError
from anima_pipeline.store.db import Connection, one

# Tables a step writes (the only ones a row count may be asked for: the name is not a parameter).
TABLES = (
    "conversation",
    "semantic_memory",
    "emotional_anchor",
    "autobiographical_memory",
    "self_block",
    "memory_reference",
    "temporal_summary",
    "dream_journal",
)


def change_counts(
    conn: Connection, day: date, step: str, animas: Sequence[str]
) -> dict[tuple[str, str], int]:
    """(table, op) -> audited changes of `step` on `day` for `animas` (every run, so a re-run
    that skips a done step still reports what the step did)."""
    if not animas:
        return {}
    rows = conn.execute(
        """SELECT table_name, op, count(*) AS n FROM memory_event
           WHERE anima_id = ANY(%s) AND day = %s AND step = %s GROUP BY table_name, op""",
        (list(animas), day, step),
    ).fetchall()
    return {(r["table_name"], r["op"]): r["n"] for r in rows}


def row_count(conn: Connection, table: str, animas: Sequence[str]) -> int:
    """Rows of `table` (one of TABLES) belonging to `animas`."""
    if table not in TABLES:
        raise InternalError(f"row_count: {table!r} is not a table the night writes ({', '.join(TABLES)})")
    if not animas:
        return 0
    return one(conn.execute(f"SELECT count(*) AS n FROM {table} WHERE anima_id = ANY(%s)", (list(animas),)))[
        "n"
    ]


def changed_memories(
    conn: Connection, day: date, steps: Sequence[str], animas: Sequence[str], limit: int = 20
) -> list[dict]:
    """The semantic-memory changes of `steps` on `day` (oldest first, at most `limit`): event id,
    anima, memory id, op, and the content after (before, for a deprecation without after)."""
    if not animas:
        return []
    return conn.execute(
        """SELECT id AS event_id, anima_id, memory_id, op, step,
                  COALESCE(after ->> 'content', before ->> 'content', '') AS content
           FROM memory_event
           WHERE anima_id = ANY(%s) AND day = %s AND step = ANY(%s) AND table_name = 'semantic_memory'
           ORDER BY id LIMIT %s""",
        (list(animas), day, list(steps), limit),
    ).fetchall()


def day_summaries(conn: Connection, day: date, animas: Sequence[str]) -> list[dict]:
    if not animas:
        return []
    return conn.execute(
        """SELECT anima_id, content FROM temporal_summary
           WHERE anima_id = ANY(%s) AND level = 'day' AND period_start = %s ORDER BY anima_id""",
        (list(animas), day),
    ).fetchall()


def dream_entries(conn: Connection, day: date, animas: Sequence[str]) -> list[dict]:
    if not animas:
        return []
    return conn.execute(
        """SELECT anima_id, aha_moments, creative_connections, confidence_updates, next_session_actions,
                  bank_suggestions
           FROM dream_journal WHERE anima_id = ANY(%s) AND day = %s ORDER BY anima_id""",
        (list(animas), day),
    ).fetchall()


def written_rows(
    conn: Connection, day: date, step: str, table: str, animas: Sequence[str], limit: int = 20
) -> list[dict]:
    """The rows of `table` that `step` wrote on `day`, each once, with its content as the step
    left it (self blocks, cascade summaries)."""
    if not animas:
        return []
    return conn.execute(
        """SELECT * FROM (
               SELECT DISTINCT ON (anima_id, memory_id) anima_id, memory_id,
                      COALESCE(after ->> 'level', '') AS level, COALESCE(after ->> 'content', '') AS content
               FROM memory_event
               WHERE anima_id = ANY(%s) AND day = %s AND step = %s AND table_name = %s
               ORDER BY anima_id, memory_id, id DESC
           ) w ORDER BY anima_id, memory_id LIMIT %s""",
        (list(animas), day, step, table, limit),
    ).fetchall()
