"""The Python facade (AnimaMemory) on a real store: validation shared with import, errors that
name the message and field, one anima per facade, remember through the tool executor, status."""

from __future__ import annotations

from datetime import date

import pytest

from anima_pipeline.config import Settings
from anima_pipeline.core.errors import InputError
from anima_pipeline.memory.facade import AnimaMemory, WrongAnimaError
from anima_pipeline.night.frame import Night
from anima_pipeline.night.steps.cleanup.step import cleanup
from anima_pipeline.store.db import Database


@pytest.fixture
def memory(db: Database, db_url: str, tmp_path) -> AnimaMemory:
    return AnimaMemory(db, "aria", settings=Settings(database_url=db_url, home=tmp_path))


def msg(mid: str, **extra) -> dict:
    return {
        "conversation_id": "c1",
        "message_id": mid,
        "role": "user",
        "content": f"hello {mid}",
        "created_at": "2026-11-30T23:30:00+08:00",
        **extra,
    }


def _rows(db: Database, sql: str) -> list[dict]:
    with db.transaction() as conn:
        return conn.execute(sql).fetchall()


def test_one_message_or_many_idempotent_by_message_id(memory: AnimaMemory, db: Database) -> None:
    one = memory.append(msg("m1", title="Evening chat", platform="telegram"))
    assert (one.received, one.added, one.conversations_added) == (1, 1, 1)
    assert one.days == [date(2026, 11, 30)]  # 23:30 in Shanghai is still the 30th
    many = memory.append([msg("m1"), msg("m2", created_at="2026-11-30T16:30:00+00:00")])
    assert (many.received, many.added, many.conversations_added) == (2, 1, 0)
    assert many.days == [date(2026, 11, 30), date(2026, 12, 1)]  # 16:30 UTC is 00:30 the next local day
    conv = _rows(db, "SELECT title, platform FROM conversation")
    assert conv == [{"title": "Evening chat", "platform": "telegram"}]
    events = _rows(db, "SELECT op, step FROM memory_event WHERE table_name = 'conversation'")
    assert events == [{"op": "import", "step": "agent/append"}]


@pytest.mark.parametrize(
    "bad, field, reason",
    [
        ({"created_at": "2026-11-30 10:00"}, "messages[1].created_at", "no UTC offset"),
        ({"role": "bot"}, "messages[1].role", "user"),
        ({"message_id": ""}, "messages[1].message_id", "empty"),
        ({"content": None}, "messages[1].content", "string"),
        ({"metadata": {"k": "a\u0000"}}, "messages[1].metadata", "NUL"),
    ],
)
def test_a_bad_message_names_index_id_and_field_and_nothing_is_written(
    memory: AnimaMemory, db: Database, bad: dict, field: str, reason: str
) -> None:
    with pytest.raises(InputError) as err:
        memory.append([msg("m1"), msg("m2", **bad)])
    assert err.value.field == field and reason in str(err.value)
    if bad.get("message_id") != "":
        assert err.value.message_id == "m2" and "'m2'" in str(err.value)
    assert _rows(db, "SELECT count(*) AS n FROM message") == [{"n": 0}]


def test_an_older_message_moves_the_nights_first_day_earlier(memory: AnimaMemory, db: Database) -> None:
    from anima_pipeline.store.calendar import first_day

    def recorded() -> date | None:
        with db.transaction() as conn:
            return first_day(conn, "Asia/Shanghai")

    memory.append(msg("m1"))
    assert recorded() == date(2026, 11, 30)
    memory.append(msg("m0", created_at="2026-03-01T08:00:00+08:00"))  # a late-synced old turn
    assert recorded() == date(2026, 3, 1)
    memory.append(msg("m2"))
    assert recorded() == date(2026, 3, 1)  # never later
    # one audited event per move, written by the append that moved it
    assert (
        _rows(
            db,
            "SELECT step, after->>'source' AS source FROM memory_event WHERE table_name = 'store_calendar'",
        )
        == [{"step": "agent/append", "source": "messages"}] * 2
    )


def test_an_append_that_fails_leaves_the_first_day(memory: AnimaMemory, db: Database) -> None:
    from anima_pipeline.store.calendar import first_message_at

    memory.append(msg("m1"))
    with pytest.raises(Exception, match="m1"):  # a conflicting re-send: the whole append is refused
        memory.append([msg("m0", created_at="2026-03-01T08:00:00+08:00"), msg("m1", content="other")])
    with db.transaction() as conn:
        at = first_message_at(conn)
    assert at is not None and at.isoformat().startswith("2026-11-30T15:30")  # same transaction: rolled back


def test_not_a_message_and_another_animas_message_are_refused(memory: AnimaMemory, db: Database) -> None:
    with pytest.raises(InputError) as err:
        memory.append([msg("m1"), "just text"])
    assert err.value.field == "messages[1]"
    with pytest.raises(WrongAnimaError, match=r"messages\[0\]\.anima_id"):
        memory.append([msg("m1", anima_id="bruno")])
    memory.append([msg("m1", anima_id="aria")])  # naming its own anima is fine
    assert _rows(db, "SELECT anima_id FROM message") == [{"anima_id": "aria"}]


def test_remember_refusals_name_the_field(memory: AnimaMemory, db: Database) -> None:
    with pytest.raises(InputError) as err:
        memory.remember("fact", "gossip")  # type: ignore[arg-type]
    assert err.value.field == "type"
    with pytest.raises(InputError) as err:
        memory.remember("   ")
    assert (
        err.value.field == "content" and str(err.value) == "content: String should have at least 1 character"
    )
    with pytest.raises(InputError) as err:
        memory.remember("fact", session_id=" ")
    assert err.value.field == "session_id"
    assert _rows(db, "SELECT count(*) AS n FROM semantic_memory") == [{"n": 0}]
    made = memory.remember("  Lena   is allergic to peanuts ", "world", session_id="c1")
    assert made.content == "Lena is allergic to peanuts" and made.source_sessions == ["c1"]
    # README's turn cycle: the session that remembered it holds it already; another recalls it
    same = memory.context("What is Lena allergic to?", session_id="c1")
    other = memory.context("What is Lena allergic to?", session_id="c2")
    assert "peanuts" not in same.rendered and "peanuts" in other.rendered


def test_a_conversation_the_cleanup_deleted_is_not_reopened(memory: AnimaMemory, db: Database) -> None:
    memory.append(msg("m1", created_at="2026-01-01T10:00:00+08:00"))  # one old message: cleanup deletes it
    result = cleanup(db, Night(day=date(2026, 11, 30), engine=None), "aria")
    assert result.stats["deleted"] == 1
    with pytest.raises(InputError, match="cleanup"):
        memory.open_conversation("c1", title="again")
    assert memory.append(msg("m2")).skipped_cleaned == 1  # its messages stay out, as with import
    with pytest.raises(LookupError):
        memory.close_conversation("c1")


def test_status_counts_this_anima_only(memory: AnimaMemory, db: Database, db_url: str, tmp_path) -> None:
    memory.append([msg("m1"), msg("m2")])
    memory.remember("Lena lives in Lisbon")
    AnimaMemory(db, "bruno", settings=Settings(database_url=db_url, home=tmp_path)).append(msg("x1"))
    status = memory.status()
    assert status["anima_id"] == "aria"
    assert (status["conversations"], status["messages"], status["semantic_active"]) == (1, 2, 1)
    assert status["recent_nights"] == []


def test_a_remembered_fact_is_reviewed_by_that_nights_incremental_deep_sleep(
    memory: AnimaMemory, db: Database, tmp_path
) -> None:
    from datetime import datetime, timedelta
    from zoneinfo import ZoneInfo

    from anima_pipeline.llm.offline import OfflineEngine
    from anima_pipeline.night.steps.deep.step import merge

    tz = ZoneInfo("Asia/Shanghai")
    long_ago = datetime.now(tz) - timedelta(days=3)
    with db.transaction() as conn:
        for anima in ("aria", "bruno"):  # the same old fact; only aria's agent remembers it again today
            conn.execute(
                """INSERT INTO semantic_memory (anima_id, type, content, source_sessions, created_at, updated_at)
                   VALUES (%s, 'world', 'Bob works at a bakery in Lisbon.', ARRAY['c0'], %s, %s)""",
                (anima, long_ago, long_ago),
            )
    made = memory.remember("Bob works at a bakery in Lisbon.", "world", session_id="c1")
    tonight = Night(
        day=datetime.now(tz).date(), engine=OfflineEngine(), tz=tz, mode="incremental", log_dir=tmp_path
    )
    assert merge(db, tonight, "bruno").stats["skipped_rounds"] == 1  # nothing changed today: skipped
    result = merge(db, tonight, "aria")
    assert result.stats["skipped_rounds"] == 0 and result.stats["merged"] == 2
    assert _rows(db, f"SELECT status FROM semantic_memory WHERE id = {made.id[2:]}") == [
        {"status": "deprecated"}
    ]
    merged = _rows(
        db, "SELECT source_sessions FROM semantic_memory WHERE anima_id = 'aria' AND status = 'active'"
    )
    assert merged == [{"source_sessions": ["c0", "c1"]}]
