"""Conversation cleanup, the first step of the night (seed sleep-v2, "Session cleanup").

A stale conversation (updated_at more than 24 hours before the wall clock, not the CST day
boundary) is deleted when it holds 0 messages, 1 message of any role, or several messages
but no assistant reply: such a conversation never became a dialogue and would only feed
noise to light sleep. Debug conversations are kept (they have their own cleanup), and a
recent one is kept until a later night, because a "new conversation" opened at 23:59 may
still get its first message.

Deletion is never a loss: each deleted conversation is recorded in memory_event with the
conversation row, all its messages and their citations, and `restore_conversation` puts it
back from that event.
"""

from __future__ import annotations

from typing import Any

from psycopg.types.json import Jsonb

from anima_pipeline.sleep.night import Night, StepOutcome, StepResult, run_step
from anima_pipeline.steps import StepKey
from anima_pipeline.store.db import Connection, Database, one
from anima_pipeline.store.events import Audit

STEP = StepKey.CLEANED
RESTORE_STEP = "conversations/restored"
STALE_HOURS = 24
DETAIL_IDS = 200  # how many deleted ids the step result lists (the audit has all of them)

# The seed's table, in the order it is read: the first matching rule names the deletion.
_RULE_SQL = """
    CASE WHEN n_messages = 0 THEN 'deleted_empty'
         WHEN n_messages = 1 THEN 'deleted_single'
         WHEN NOT has_assistant THEN 'deleted_no_assistant'
    END
"""


def animas_for(conn: Connection, night: Night) -> list[str]:
    """Every anima with something to delete: a stale, non-debug conversation of fewer than two
    messages or without an assistant message (stale junk may be older than the night's day).
    An anima with none has nothing to clean, so an idle night skips the step (runner)."""
    rows = conn.execute(
        """SELECT DISTINCT c.anima_id FROM conversation c
           WHERE NOT c.debug AND c.updated_at < now() - make_interval(hours => %s)
             AND (NOT EXISTS (SELECT 1 FROM message m WHERE m.anima_id = c.anima_id
                                  AND m.conversation_id = c.id AND m.role = 'assistant')
                  OR NOT EXISTS (SELECT 1 FROM message m WHERE m.anima_id = c.anima_id
                                     AND m.conversation_id = c.id OFFSET 1))
           ORDER BY c.anima_id""",
        (STALE_HOURS,),
    ).fetchall()
    return [r["anima_id"] for r in rows]


def cleanup(db: Database, night: Night, anima_id: str) -> StepResult:
    def body(conn: Connection, audit: Audit) -> StepOutcome:
        stats = {
            "deleted_empty": 0,
            "deleted_single": 0,
            "deleted_no_assistant": 0,
            "kept_debug": 0,
            "kept_recent": 0,
        }
        deleted: list[str] = []
        for cand in _candidates(conn, anima_id):
            if cand["debug"]:
                stats["kept_debug"] += 1
            elif not cand["stale"]:
                stats["kept_recent"] += 1
            elif rule := _delete(conn, audit, anima_id, cand["id"]):
                stats[rule] += 1
                deleted.append(cand["id"])
            else:
                stats["kept_changed"] = stats.get("kept_changed", 0) + 1
        stats["deleted"] = len(deleted)
        return StepOutcome(stats=stats, details={"deleted": deleted[:DETAIL_IDS]})

    return run_step(db, night, anima_id, STEP, body)


def _candidates(conn: Connection, anima_id: str, only: str | None = None) -> list[dict]:
    """Conversations that match a deletion rule, with whether they are stale (`only`: that one).

    Debug and recent ones are returned too, so the step can say how many it kept and why.
    """
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
        (STALE_HOURS, anima_id, only, only),
    ).fetchall()


def _delete(conn: Connection, audit: Audit, anima_id: str, conv_id: str) -> str | None:
    """Delete one candidate, re-checked under its row lock: an agent may have appended to it
    since the candidates were read (appends do not take the night's anima lock), and a
    conversation that became a dialogue or recent is kept. The rule that deleted it, or None."""
    conversation = conn.execute(
        "SELECT * FROM conversation WHERE anima_id = %s AND id = %s FOR UPDATE", (anima_id, conv_id)
    ).fetchone()
    now = _candidates(conn, anima_id, only=conv_id)
    if conversation is None or not now or now[0]["debug"] or not now[0]["stale"]:
        return None
    rule = now[0]["rule"]
    messages = conn.execute(
        """SELECT id, anima_id, conversation_id, external_id, role, speaker, content, created_at, metadata
           FROM message WHERE anima_id = %s AND conversation_id = %s ORDER BY created_at, id""",
        (anima_id, conv_id),
    ).fetchall()
    references = conn.execute(
        """SELECT r.* FROM memory_reference r JOIN message m ON m.id = r.message_id
           WHERE m.anima_id = %s AND m.conversation_id = %s ORDER BY r.id""",
        (anima_id, conv_id),
    ).fetchall()
    before = {"conversation": conversation, "messages": messages, "references": references, "rule": rule}
    audit.record("conversation", conv_id, "delete", before, None)
    # Messages and their memory_reference rows go with the conversation (ON DELETE CASCADE).
    conn.execute("DELETE FROM conversation WHERE anima_id = %s AND id = %s", (anima_id, conv_id))
    return rule


def restore_conversation(conn: Connection, event_id: int, audit: Audit | None = None) -> dict[str, Any]:
    """Re-insert a conversation deleted by cleanup, from its memory_event (the revert story).

    Message ids are kept (OVERRIDING SYSTEM VALUE), so citations and anything else that
    names a message still point at it. The restore is itself audited (op 'restore').
    Raises ValueError when the event is not a cleanup deletion or the conversation exists.
    """
    event = conn.execute("SELECT * FROM memory_event WHERE id = %s", (event_id,)).fetchone()
    if event is None or event["table_name"] != "conversation" or event["op"] != "delete":
        raise ValueError(f"memory_event {event_id} is not a deleted conversation")
    before = event["before"] or {}
    conv = before.get("conversation")
    if not conv:
        raise ValueError(f"memory_event {event_id} holds no conversation row to restore")
    exists = conn.execute(
        "SELECT 1 FROM conversation WHERE anima_id = %s AND id = %s", (conv["anima_id"], conv["id"])
    ).fetchone()
    if exists:
        raise ValueError(f"conversation {conv['id']} of anima {conv['anima_id']} exists; nothing to restore")
    row = one(
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
    for m in before.get("messages", []):
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
    restored_refs = 0
    for r in before.get("references", []):
        # A memory may have been forgotten (physically deleted) since: skip its citation.
        restored_refs += conn.execute(
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
