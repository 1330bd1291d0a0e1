"""What conversation cleanup (night/steps/cleanup/step.py) reads, deletes and puts back: the stale
conversations that never became a dialogue, a conversation whole (row, messages, citations)
as its deletion event records it, and the inserts that restore it from that record. The
caller audits every write, except `restore_conversation` (what `anima revert`, night/revert.py,
runs for a deleted conversation), which audits its own."""

from __future__ import annotations

from typing import Any

from psycopg.types.json import Jsonb

from anima_pipeline.core.errors import InputError
from anima_pipeline.store.db import Connection, one
from anima_pipeline.store.events import Audit
from anima_pipeline.store.events import event as memory_event

RESTORE_STEP = "conversations/restored"

# The cleanup's rules, in the order they are read: the first matching rule names the deletion.
_RULE_SQL = """
    CASE WHEN n_messages = 0 THEN 'deleted_empty'
         WHEN n_messages = 1 THEN 'deleted_single'
         WHEN NOT has_assistant THEN 'deleted_no_assistant'
    END
"""


def animas_with_junk(conn: Connection, stale_hours: float) -> list[str]:
    """The animas with a conversation not touched for `stale_hours`, not debug, of fewer than
    two messages or without an assistant message, by anima id."""
    rows = conn.execute(
        """SELECT DISTINCT c.anima_id FROM conversation c
           WHERE NOT c.debug AND c.updated_at < now() - make_interval(hours => %s)
             AND (NOT EXISTS (SELECT 1 FROM message m WHERE m.anima_id = c.anima_id
                                  AND m.conversation_id = c.id AND m.role = 'assistant')
                  OR NOT EXISTS (SELECT 1 FROM message m WHERE m.anima_id = c.anima_id
                                     AND m.conversation_id = c.id OFFSET 1))
           ORDER BY c.anima_id""",
        (stale_hours,),
    ).fetchall()
    return [r["anima_id"] for r in rows]


def candidates(conn: Connection, anima_id: str, stale_hours: float, only: str | None = None) -> list[dict]:
    """The anima's conversations (only `only` when given) of at most one message or without
    an assistant message, by id: id, debug, stale (not touched for `stale_hours`) and `rule`,
    the deletion rule that matches (deleted_empty, deleted_single, deleted_no_assistant).
    Debug and recent ones are among them."""
    return conn.execute(
        f"""SELECT id, debug, stale, {_RULE_SQL} AS rule FROM (
                SELECT c.id, c.debug,
                       c.updated_at < now() - make_interval(hours => %s) AS stale,
                       count(m.id) AS n_messages,
                       coalesce(bool_or(m.role = 'assistant'), false) AS has_assistant
                FROM conversation c
                LEFT JOIN message m ON m.anima_id = c.anima_id AND m.conversation_id = c.id
                WHERE c.anima_id = %s AND (%s::text IS NULL OR c.id = %s)
                GROUP BY c.anima_id, c.id
            ) t
            WHERE n_messages <= 1 OR NOT has_assistant
            ORDER BY id""",
        (stale_hours, anima_id, only, only),
    ).fetchall()


def lock_conversation(conn: Connection, anima_id: str, conversation_id: str) -> dict | None:
    """The conversation row, locked FOR UPDATE until the transaction ends, or None."""
    return conn.execute(
        "SELECT * FROM conversation WHERE anima_id = %s AND id = %s FOR UPDATE", (anima_id, conversation_id)
    ).fetchone()


def conversation_messages(conn: Connection, anima_id: str, conversation_id: str) -> list[dict]:
    """The conversation's messages in order (created_at, id), every column a restore needs."""
    return conn.execute(
        """SELECT id, anima_id, conversation_id, external_id, role, speaker, content, created_at, metadata
           FROM message WHERE anima_id = %s AND conversation_id = %s ORDER BY created_at, id""",
        (anima_id, conversation_id),
    ).fetchall()


def conversation_references(conn: Connection, anima_id: str, conversation_id: str) -> list[dict]:
    """The memory_reference rows (whole, by id) of the conversation's messages."""
    return conn.execute(
        """SELECT r.* FROM memory_reference r JOIN message m ON m.id = r.message_id
           WHERE m.anima_id = %s AND m.conversation_id = %s ORDER BY r.id""",
        (anima_id, conversation_id),
    ).fetchall()


def delete_conversation(conn: Connection, anima_id: str, conversation_id: str) -> None:
    """Delete the conversation; its messages and their memory_reference rows go with it
    (ON DELETE CASCADE)."""
    conn.execute("DELETE FROM conversation WHERE anima_id = %s AND id = %s", (anima_id, conversation_id))


def conversation_exists(conn: Connection, anima_id: str, conversation_id: str) -> bool:
    """Whether the anima has conversation `conversation_id`."""
    return (
        conn.execute(
            "SELECT 1 FROM conversation WHERE anima_id = %s AND id = %s", (anima_id, conversation_id)
        ).fetchone()
        is not None
    )


def insert_conversation(conn: Connection, conv: dict[str, Any]) -> dict:
    """Insert the conversation row `conv` (as a deletion recorded it, its id kept); the new row."""
    return one(
        conn.execute(
            """INSERT INTO conversation (id, anima_id, platform, title, debug, created_at, updated_at)
           VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING *""",
            (
                conv["id"],
                conv["anima_id"],
                conv["platform"],
                conv["title"],
                conv["debug"],
                conv["created_at"],
                conv["updated_at"],
            ),
        )
    )


def insert_message(conn: Connection, m: dict[str, Any]) -> None:
    """Insert the message `m` as a deletion recorded it, its id kept (OVERRIDING SYSTEM
    VALUE), so whatever names the message still points at it."""
    conn.execute(
        """INSERT INTO message (id, anima_id, conversation_id, external_id, role, speaker, content,
                                created_at, metadata)
           OVERRIDING SYSTEM VALUE VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)""",
        (
            m["id"],
            m["anima_id"],
            m["conversation_id"],
            m["external_id"],
            m["role"],
            m["speaker"],
            m["content"],
            m["created_at"],
            Jsonb(m.get("metadata") or {}),
        ),
    )


def insert_reference(conn: Connection, r: dict[str, Any]) -> int:
    """Insert the memory_reference row `r` as a deletion recorded it, its id kept, unless its
    memory is gone (forgotten since) or the row exists: 1 when inserted, else 0."""
    return conn.execute(
        """INSERT INTO memory_reference (id, anima_id, memory_id, cited_memory_id, message_id,
                                         conversation_id, referenced_at, created_at)
           OVERRIDING SYSTEM VALUE
           SELECT %s, %s, %s, %s, %s, %s, %s, %s WHERE EXISTS (SELECT 1 FROM semantic_memory WHERE id = %s)
           ON CONFLICT DO NOTHING""",
        (
            r["id"],
            r["anima_id"],
            r["memory_id"],
            r["cited_memory_id"],
            r["message_id"],
            r["conversation_id"],
            r["referenced_at"],
            r["created_at"],
            r["memory_id"],
        ),
    ).rowcount


def restore_conversation(conn: Connection, event_id: int, audit: Audit | None = None) -> dict[str, Any]:
    """Re-insert a conversation deleted by cleanup, from its memory_event (the revert story).

    Message ids are kept (OVERRIDING SYSTEM VALUE), so citations and anything else that
    names a message still point at it. The restore is itself audited (op 'restore').
    Raises InputError when the event is not a cleanup deletion or the conversation exists.
    """
    event = memory_event(conn, event_id)
    if event is None or event["table_name"] != "conversation" or event["op"] != "delete":
        raise InputError(f"memory_event {event_id} is not a deleted conversation")
    before = event["before"] or {}
    conv = before.get("conversation")
    if not conv:
        raise InputError(f"memory_event {event_id} holds no conversation row to restore")
    if conversation_exists(conn, conv["anima_id"], conv["id"]):
        raise InputError(f"conversation {conv['id']} of anima {conv['anima_id']} exists; nothing to restore")
    row = insert_conversation(conn, conv)
    for m in before.get("messages", []):
        insert_message(conn, m)
    restored_refs = 0
    for r in before.get("references", []):
        # A memory may have been forgotten (physically deleted) since: skip its citation.
        restored_refs += insert_reference(conn, r)
    audit = audit or Audit(
        conn=conn,
        anima_id=conv["anima_id"],
        run_id=f"restore-{event_id}",
        step=RESTORE_STEP,
        day=event["day"],
    )
    after = {
        "conversation": row,
        "messages": len(before.get("messages", [])),
        "references": restored_refs,
        "from_event": event_id,
    }
    audit.for_anima(conv["anima_id"]).record("conversation", conv["id"], "restore", None, after)
    return row
