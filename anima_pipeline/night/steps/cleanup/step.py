"""Conversation cleanup, the first step of the night.

A stale conversation (updated_at more than 24 hours before the wall clock, not the CST day
boundary) is deleted when it holds 0 messages, 1 message of any role, or several messages
but no assistant reply: such a conversation never became a dialogue and would only feed
noise to light sleep. Debug conversations are kept (they have their own cleanup), and a
recent one is kept until a later night, because a "new conversation" opened at 23:59 may
still get its first message.

Deletion is never a loss: each deleted conversation is recorded in memory_event with the
conversation row, all its messages and their citations, and `restore_conversation`
(store/stale_conversations.py, what `anima revert` runs) puts it back from that event.
"""

from __future__ import annotations

from anima_pipeline.core.steps import StepKey
from anima_pipeline.night.frame import Night, StepOutcome, StepResult, run_step
from anima_pipeline.night.steps.cleanup.preview import CHANGES
from anima_pipeline.night.steps.declaration import StepDef
from anima_pipeline.store import stale_conversations as store
from anima_pipeline.store.db import Connection, Database
from anima_pipeline.store.events import Audit

STEP = StepKey.CLEANED
STALE_HOURS = 24
DETAIL_IDS = 200  # how many deleted ids the step result lists (the audit has all of them)


def animas_for(conn: Connection, night: Night) -> list[str]:
    """Every anima with something to delete: a stale, non-debug conversation of fewer than two
    messages or without an assistant message (stale junk may be older than the night's day).
    An anima with none has nothing to clean, so an idle night skips the step (runner)."""
    return store.animas_with_junk(conn, STALE_HOURS)


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
    return store.candidates(conn, anima_id, STALE_HOURS, only)


def _delete(conn: Connection, audit: Audit, anima_id: str, conv_id: str) -> str | None:
    """Delete one candidate, re-checked under its row lock: an agent may have appended to it
    since the candidates were read (appends do not take the night's anima lock), and a
    conversation that became a dialogue or recent is kept. The rule that deleted it, or None."""
    conversation = store.lock_conversation(conn, anima_id, conv_id)
    now = _candidates(conn, anima_id, only=conv_id)
    if conversation is None or not now or now[0]["debug"] or not now[0]["stale"]:
        return None
    rule = now[0]["rule"]
    messages = store.conversation_messages(conn, anima_id, conv_id)
    references = store.conversation_references(conn, anima_id, conv_id)
    before = {"conversation": conversation, "messages": messages, "references": references, "rule": rule}
    audit.record("conversation", conv_id, "delete", before, None)
    # Messages and their memory_reference rows go with the conversation (ON DELETE CASCADE).
    store.delete_conversation(conn, anima_id, conv_id)
    return rule


DECLARED = (
    StepDef(
        STEP,
        "cleanup",
        "Stale empty, single-message and assistant-less conversations deleted (audited, recoverable from memory_event).",
        cleanup,
        (),
        CHANGES,
        animas=animas_for,
        sends_request=False,
    ),
)
