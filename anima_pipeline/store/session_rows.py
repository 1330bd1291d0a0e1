"""The store side of a session's working context: its messages in order, its rolling summaries
per watermark and its pre-compaction flushes (sql/0013), and the temporal summaries the
system prompt carries; one past message read by its id, in parts. Every write is audited."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from psycopg.types.json import Jsonb

from anima_pipeline.store.db import Connection, one
from anima_pipeline.store.events import Audit


@dataclass(frozen=True)
class Turn:
    """One stored message of the session, in (created_at, id) order."""

    id: int
    external_id: str
    role: str
    speaker: str | None
    content: str
    created_at: datetime


def session_turns(conn: Connection, anima_id: str, conversation_id: str) -> list[Turn]:
    rows = conn.execute(
        """SELECT id, external_id, role, speaker, content, created_at FROM message
           WHERE anima_id = %s AND conversation_id = %s AND forgotten_at IS NULL ORDER BY created_at, id""",
        (anima_id, conversation_id),
    ).fetchall()
    return [Turn(**r) for r in rows]


def consolidated(conn: Connection, anima_id: str, conversation_id: str) -> bool:
    """Whether the night consolidates this conversation (not debug, not a cron job): only
    then may a flush write memories from it."""
    row = conn.execute(
        "SELECT platform, debug FROM conversation WHERE anima_id = %s AND id = %s",
        (anima_id, conversation_id),
    ).fetchone()
    return row is not None and row["platform"] != "cron" and not row["debug"]


def latest_summary(conn: Connection, anima_id: str, conversation_id: str) -> dict[str, Any] | None:
    """The summary with the furthest watermark: what the next compaction extends."""
    return conn.execute(
        """SELECT * FROM session_summary WHERE anima_id = %s AND conversation_id = %s
           ORDER BY watermark_at DESC, watermark DESC LIMIT 1""",
        (anima_id, conversation_id),
    ).fetchone()


def save_summary(
    conn: Connection,
    audit: Audit,
    conversation_id: str,
    turn: Turn,
    previous: int | None,
    content: str,
    messages: int,
    engine: str,
) -> dict[str, Any]:
    """Store the summary up to `turn` (its watermark); a second writer of the same watermark
    (a retried or concurrent call) keeps the first one."""
    row = one(
        conn.execute(
            """INSERT INTO session_summary
               (anima_id, conversation_id, watermark, watermark_at, previous, content, messages, engine)
           VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
           ON CONFLICT (anima_id, conversation_id, watermark) DO NOTHING RETURNING *""",
            (audit.anima_id, conversation_id, turn.id, turn.created_at, previous, content, messages, engine),
        )
    )
    if row is None:
        return conn.execute(
            "SELECT * FROM session_summary WHERE anima_id = %s AND conversation_id = %s AND watermark = %s",
            (audit.anima_id, conversation_id, turn.id),
        ).fetchone()
    audit.record("session_summary", f"{conversation_id}@{turn.id}", "create", None, row)
    return row


def flush_of(conn: Connection, anima_id: str, conversation_id: str, watermark: int) -> dict[str, Any] | None:
    return conn.execute(
        "SELECT * FROM session_flush WHERE anima_id = %s AND conversation_id = %s AND watermark = %s",
        (anima_id, conversation_id, watermark),
    ).fetchone()


def record_flush(
    conn: Connection,
    audit: Audit,
    conversation_id: str,
    watermark: int,
    from_watermark: int | None,
    memory_ids: list[int],
    stats: dict[str, int],
    engine: str,
) -> dict[str, Any]:
    row = one(
        conn.execute(
            """INSERT INTO session_flush
               (anima_id, conversation_id, watermark, from_watermark, memory_ids, stats, engine)
           VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING *""",
            (audit.anima_id, conversation_id, watermark, from_watermark, memory_ids, Jsonb(stats), engine),
        )
    )
    audit.record("session_flush", f"{conversation_id}@{watermark}", "create", None, row)
    return row


def flushed_memory_ids(conn: Connection, anima_id: str, conversation_id: str) -> set[int]:
    rows = conn.execute(
        """SELECT DISTINCT unnest(memory_ids) AS id FROM session_flush
           WHERE anima_id = %s AND conversation_id = %s""",
        (anima_id, conversation_id),
    ).fetchall()
    return {r["id"] for r in rows}


def lock_session(conn: Connection, anima_id: str, conversation_id: str) -> None:
    """One compaction of a session at a time (until the transaction ends): two turns racing
    extend the summary once, and flush once."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"session:{anima_id}:{conversation_id}",))


def temporal_for(conn: Connection, anima_id: str, today: date) -> list[dict[str, Any]]:
    """The temporal segment's summaries: yesterday's day summary, and for week and month the
    one covering today when the night already wrote it, else the latest one before today."""
    return conn.execute(
        """(SELECT * FROM temporal_summary WHERE anima_id = %(a)s AND level = 'day'
              AND period_start = %(today)s::date - 1)
           UNION ALL
           (SELECT * FROM temporal_summary WHERE anima_id = %(a)s AND level = 'week'
              AND period_start <= %(today)s ORDER BY period_start DESC LIMIT 1)
           UNION ALL
           (SELECT * FROM temporal_summary WHERE anima_id = %(a)s AND level = 'month'
              AND period_start <= %(today)s ORDER BY period_start DESC LIMIT 1)""",
        {"a": anima_id, "today": today},
    ).fetchall()


def message_part(conn: Connection, anima_id: str, message_id: int, start: int, count: int) -> dict | None:
    """The anima's message `message_id` with `count` characters of its text from `start`
    (0-based) as `content`, its whole length as `total_chars`, and `forgotten_at`; None when
    it has no such message. A long text is decompressed once for both (each function given a
    stored value decompresses it anew)."""
    return conn.execute(
        """SELECT m.id, m.conversation_id, c.title, m.role, m.speaker, m.created_at, m.forgotten_at,
                  length(d.text) AS total_chars, substr(d.text, %(start)s::int + 1, %(count)s::int) AS content
           FROM message m
           JOIN conversation c ON c.anima_id = m.anima_id AND c.id = m.conversation_id
           CROSS JOIN LATERAL (SELECT m.content || '' AS text OFFSET 0) d
           WHERE m.anima_id = %(anima)s AND m.id = %(id)s""",
        {"anima": anima_id, "id": message_id, "start": start, "count": count},
    ).fetchone()
