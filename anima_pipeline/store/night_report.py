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


# The run whose writes a (day, step) stands for, per anima: the one its sleep_state row names,
# i.e. this run when the step ran, the earlier run that did it when it was skipped as done. A
# revert clears a run's rows and a forced re-run takes them over, so the counts and previews
# of a materialization are that run's writes, never the sum over every run of the day.
_WRITERS = """writer AS (SELECT anima_id, run_id FROM sleep_state
                          WHERE anima_id = ANY(%(animas)s) AND day = %(day)s AND step = %(step)s)"""


def change_counts(
    conn: Connection, day: date, step: str, animas: Sequence[str]
) -> dict[tuple[str, str], int]:
    """(table, op) -> audited changes of `step` on `day` for `animas`, by the run each anima's
    step row names (_WRITERS): what this run wrote, or, for a step skipped as done, what the
    run that did it wrote."""
    if not animas:
        return {}
    rows = conn.execute(
        f"""WITH {_WRITERS}
            SELECT e.table_name, e.op, count(*) AS n FROM memory_event e
            JOIN writer w ON w.anima_id = e.anima_id AND w.run_id = e.run_id
            WHERE e.anima_id = ANY(%(animas)s) AND e.day = %(day)s AND e.step = %(step)s
            GROUP BY e.table_name, e.op""",
        {"animas": list(animas), "day": day, "step": step},
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
    """The semantic-memory changes of `steps` on `day` by the run each step row names (oldest
    first, at most `limit`): event id, anima, memory id, op, and the content after (before,
    for a deprecation without after)."""
    if not animas:
        return []
    return conn.execute(
        """SELECT e.id AS event_id, e.anima_id, e.memory_id, e.op, e.step,
                  COALESCE(e.after ->> 'content', e.before ->> 'content', '') AS content
           FROM memory_event e
           JOIN sleep_state w ON w.anima_id = e.anima_id AND w.day = e.day AND w.step = e.step AND w.run_id = e.run_id
           WHERE e.anima_id = ANY(%s) AND e.day = %s AND e.step = ANY(%s) AND e.table_name = 'semantic_memory'
           ORDER BY e.id LIMIT %s""",
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
    """The rows of `table` that `step` wrote on `day` in the run its step row names, each once,
    with its content as the step left it (self blocks, cascade summaries)."""
    if not animas:
        return []
    return conn.execute(
        """SELECT * FROM (
               SELECT DISTINCT ON (e.anima_id, e.memory_id) e.anima_id, e.memory_id,
                      COALESCE(e.after ->> 'level', '') AS level, COALESCE(e.after ->> 'content', '') AS content
               FROM memory_event e
               JOIN sleep_state s ON s.anima_id = e.anima_id AND s.day = e.day AND s.step = e.step AND s.run_id = e.run_id
               WHERE e.anima_id = ANY(%s) AND e.day = %s AND e.step = %s AND e.table_name = %s
               ORDER BY e.anima_id, e.memory_id, e.id DESC
           ) w ORDER BY anima_id, memory_id LIMIT %s""",
        (list(animas), day, step, table, limit),
    ).fetchall()
