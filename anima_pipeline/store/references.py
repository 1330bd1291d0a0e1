"""memory_reference: the citations an agent made of its memories (``[[anima:f-123]]`` in an
assistant message), as reference sync (night/steps/references/step.py) reads and writes them. The writes
return the row; the caller audits it."""

from __future__ import annotations

from datetime import date, datetime

from anima_pipeline.store.db import Connection


def animas_with_changes_or_aging_citations(
    conn: Connection, day: date, aging_from: datetime, aging_until: datetime
) -> set[str]:
    """The animas whose semantic memories changed on `day` (an audited write), and those
    with a citation made in [aging_from, aging_until) (it crosses the decay boundary)."""
    rows = conn.execute(
        """SELECT DISTINCT anima_id FROM memory_event WHERE day = %s AND table_name = 'semantic_memory'
           UNION
           SELECT DISTINCT anima_id FROM memory_reference WHERE referenced_at >= %s AND referenced_at < %s""",
        (day, aging_from, aging_until),
    ).fetchall()
    return {r["anima_id"] for r in rows}


def citing_messages(conn: Connection, anima_id: str, start: datetime, end: datetime) -> list[dict]:
    """The anima's assistant messages of [start, end) that cite a memory and were not
    forgotten, oldest first: id, conversation_id, content, created_at."""
    return conn.execute(
        """SELECT id, conversation_id, content, created_at FROM message
           WHERE anima_id = %s AND role = 'assistant' AND created_at >= %s AND created_at < %s
             AND content LIKE '%%[[anima:f-%%' AND forgotten_at IS NULL
           ORDER BY created_at, id""",
        (anima_id, start, end),
    ).fetchall()


def add_reference(
    conn: Connection,
    anima_id: str,
    memory_id: int,
    cited_memory_id: int,
    message_id: int,
    conversation_id: str,
    referenced_at: datetime,
) -> dict | None:
    """Record that `message_id` cited `cited_memory_id` (counted for `memory_id`, the end of
    its chain). The new row, or None when that message's citation of it is recorded already."""
    return conn.execute(
        """INSERT INTO memory_reference (anima_id, memory_id, cited_memory_id, message_id,
                                         conversation_id, referenced_at)
           VALUES (%s, %s, %s, %s, %s, %s)
           ON CONFLICT (message_id, cited_memory_id) DO NOTHING RETURNING *""",
        (anima_id, memory_id, cited_memory_id, message_id, conversation_id, referenced_at),
    ).fetchone()


def references_to_superseded(conn: Connection, anima_id: str) -> list[dict]:
    """The anima's references (whole rows, by id) counted for a deprecated memory that has a
    successor."""
    return conn.execute(
        """SELECT r.* FROM memory_reference r JOIN semantic_memory s ON s.id = r.memory_id
           WHERE r.anima_id = %s AND s.status = 'deprecated' AND s.superseded_by IS NOT NULL
           ORDER BY r.id""",
        (anima_id,),
    ).fetchall()


def repoint_reference(conn: Connection, reference_id: int, memory_id: int) -> dict | None:
    """Count reference `reference_id` for `memory_id` from now on; the row after, or None
    when it does not exist."""
    return conn.execute(
        "UPDATE memory_reference SET memory_id = %s WHERE id = %s RETURNING *", (memory_id, reference_id)
    ).fetchone()


def reference_times(conn: Connection, anima_id: str, before: datetime) -> list[dict]:
    """Every reference of the anima made before `before`: memory_id, referenced_at."""
    return conn.execute(
        "SELECT memory_id, referenced_at FROM memory_reference WHERE anima_id = %s AND referenced_at < %s",
        (anima_id, before),
    ).fetchall()
