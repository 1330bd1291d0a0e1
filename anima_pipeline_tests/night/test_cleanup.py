"""Conversation cleanup on a real database: its rules one by one (empty, single message, no
assistant reply), every deletion
audited with the conversation and its messages, and restored from that event."""

from __future__ import annotations

from datetime import date

import pytest

from anima_pipeline.llm.offline import OfflineEngine
from anima_pipeline.night.frame import Night
from anima_pipeline.night.steps.cleanup.step import animas_for, cleanup
from anima_pipeline.store.db import Connection
from anima_pipeline.store.stale_conversations import restore_conversation

DAY = date(2026, 11, 16)


def _conv(
    conn: Connection, anima: str, cid: str, roles: list[str], hours_ago: float, debug: bool = False
) -> None:
    """A conversation last updated `hours_ago` before now, with one message per role."""
    conn.execute(
        """INSERT INTO conversation (id, anima_id, title, debug, created_at, updated_at)
           VALUES (%s, %s, %s, %s, now() - make_interval(hours => %s + 1), now() - make_interval(hours => %s))""",
        (cid, anima, f"title of {cid}", debug, hours_ago, hours_ago),
    )
    for i, role in enumerate(roles):
        conn.execute(
            """INSERT INTO message (anima_id, conversation_id, external_id, role, speaker, content, created_at, metadata)
               VALUES (%s, %s, %s, %s, %s, %s, now() - make_interval(hours => %s, mins => %s), '{"k": 1}')""",
            (anima, cid, f"{cid}:{i}", role, role, f"{role} says {i}", hours_ago, 30 - i),
        )


def _ids(conn: Connection, anima: str) -> set[str]:
    return {
        r["id"] for r in conn.execute("SELECT id FROM conversation WHERE anima_id = %s", (anima,)).fetchall()
    }


@pytest.fixture
def seeded(db):
    with db.transaction() as conn:
        _conv(conn, "a", "stale-empty", [], 30)
        _conv(conn, "a", "stale-single", ["assistant"], 30)
        _conv(conn, "a", "stale-no-assistant", ["user", "user", "system"], 48)
        _conv(conn, "a", "stale-dialogue", ["user", "assistant"], 72)
        _conv(conn, "a", "debug-empty", [], 72, debug=True)
        _conv(conn, "a", "recent-empty", [], 2)
        _conv(conn, "a", "recent-single", ["user"], 23)
        _conv(conn, "b", "other-anima", [], 30)
    return db


def test_rules_one_by_one(seeded):
    night = Night(day=DAY, engine=OfflineEngine())
    result = cleanup(seeded, night, "a")
    s = result.stats
    assert (s["deleted_empty"], s["deleted_single"], s["deleted_no_assistant"]) == (1, 1, 1)
    assert s["kept_debug"] == 1 and s["kept_recent"] == 2 and s["deleted"] == 3
    with seeded.transaction() as conn:
        assert _ids(conn, "a") == {"stale-dialogue", "debug-empty", "recent-empty", "recent-single"}
        assert _ids(conn, "b") == {"other-anima"}  # another anima is its own step run
        assert (
            conn.execute(
                "SELECT count(*) AS n FROM message WHERE conversation_id LIKE 'stale-%%'"
            ).fetchone()["n"]
            == 2
        )  # only the kept dialogue's messages


def test_every_deletion_is_audited_with_its_messages(seeded):
    night = Night(day=DAY, engine=OfflineEngine())
    cleanup(seeded, night, "a")
    with seeded.transaction() as conn:
        events = conn.execute(
            """SELECT * FROM memory_event WHERE table_name = 'conversation' AND op = 'delete'
               ORDER BY memory_id"""
        ).fetchall()
    assert [e["memory_id"] for e in events] == ["stale-empty", "stale-no-assistant", "stale-single"]
    by_id = {e["memory_id"]: e for e in events}
    assert all(
        e["step"] == "conversations/cleaned" and e["day"] == DAY and e["after"] is None for e in events
    )
    no_assistant = by_id["stale-no-assistant"]["before"]
    assert no_assistant["conversation"]["title"] == "title of stale-no-assistant"
    assert [m["role"] for m in no_assistant["messages"]] == ["user", "user", "system"]
    assert no_assistant["rule"] == "deleted_no_assistant"
    assert by_id["stale-empty"]["before"]["messages"] == []


def test_rerun_with_force_deletes_and_records_nothing_more(seeded):
    cleanup(seeded, Night(day=DAY, engine=OfflineEngine()), "a")
    again = cleanup(seeded, Night(day=DAY, engine=OfflineEngine(), force=True), "a")
    assert again.status == "done" and again.stats["deleted"] == 0
    with seeded.transaction() as conn:
        n = conn.execute("SELECT count(*) AS n FROM memory_event WHERE op = 'delete'").fetchone()["n"]
    assert n == 3


def test_animas_for_lists_the_animas_with_stale_junk(seeded):
    with seeded.transaction() as conn:
        _conv(conn, "c", "c-dialogue", ["user", "assistant"], 72)  # nothing to delete
        _conv(conn, "c", "c-recent", [], 1)  # junk, but not stale yet
        _conv(conn, "d", "d-debug", [], 72, debug=True)  # junk, but debug
        assert animas_for(conn, Night(day=DAY, engine=OfflineEngine())) == ["a", "b"]
    cleanup(seeded, Night(day=DAY, engine=OfflineEngine()), "a")
    cleanup(seeded, Night(day=DAY, engine=OfflineEngine()), "b")
    with seeded.transaction() as conn:  # cleaned: nobody has anything left to do
        assert animas_for(conn, Night(day=DAY, engine=OfflineEngine())) == []


def test_restore_puts_back_conversation_messages_and_citations(db):
    with db.transaction() as conn:
        _conv(conn, "a", "cited-single", ["assistant"], 30)
        msg = conn.execute("SELECT * FROM message WHERE conversation_id = 'cited-single'").fetchone()
        mem = conn.execute(
            "INSERT INTO semantic_memory (anima_id, type, content) VALUES ('a', 'world', 'Lin Wei has a cat.') RETURNING id"
        ).fetchone()["id"]
        conn.execute(
            """INSERT INTO memory_reference (anima_id, memory_id, cited_memory_id, message_id, conversation_id,
                                             referenced_at) VALUES ('a', %s, %s, %s, 'cited-single', %s)""",
            (mem, mem, msg["id"], msg["created_at"]),
        )
    cleanup(db, Night(day=DAY, engine=OfflineEngine()), "a")
    with db.transaction() as conn:
        assert "cited-single" not in _ids(conn, "a")
        assert conn.execute("SELECT count(*) AS n FROM memory_reference").fetchone()["n"] == 0
        event = conn.execute("SELECT id FROM memory_event WHERE op = 'delete'").fetchone()["id"]
        restored = restore_conversation(conn, event)
        assert restored["id"] == "cited-single" and restored["title"] == "title of cited-single"
        back = conn.execute("SELECT * FROM message WHERE conversation_id = 'cited-single'").fetchone()
        assert (back["id"], back["content"], back["created_at"], back["metadata"]) == (
            msg["id"],
            msg["content"],
            msg["created_at"],
            {"k": 1},
        )
        ref = conn.execute("SELECT * FROM memory_reference").fetchone()
        assert ref["message_id"] == msg["id"] and ref["memory_id"] == mem
        audit = conn.execute("SELECT * FROM memory_event WHERE op = 'restore'").fetchone()
        assert audit["memory_id"] == "cited-single" and audit["after"]["from_event"] == event
        with pytest.raises(ValueError, match="exists"):
            restore_conversation(conn, event)
        with pytest.raises(ValueError, match="not a deleted conversation"):
            restore_conversation(conn, audit["id"])
