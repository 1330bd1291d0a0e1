"""Appending and the night never fight: an agent appends while a night step of the same anima
holds the anima lock; the messages land at once, belong to the local day of created_at, and a
forced re-run of that day reads them. The cleanup does not delete a conversation an agent
turned into a dialogue while the night was choosing what to delete."""

from __future__ import annotations

import threading
import time
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from anima_pipeline.config import Settings
from anima_pipeline.memory.facade import AnimaMemory
from anima_pipeline.night.frame import Night, StepOutcome, run_step
from anima_pipeline.night.steps.cleanup.step import cleanup
from anima_pipeline.store.archive import day_conversations
from anima_pipeline.store.db import Database

TZ = ZoneInfo("Asia/Shanghai")
DAY = date(2026, 11, 28)


def m(mid: str, role: str, content: str, at: datetime, conv: str = "c1") -> dict:
    return {
        "conversation_id": conv,
        "message_id": mid,
        "role": role,
        "content": content,
        "created_at": at.isoformat(),
    }


def at(hour: int, minute: int = 0, day: date = DAY) -> datetime:
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=TZ)


def test_an_append_during_a_running_step_lands_at_once_and_the_forced_rerun_reads_it(
    db: Database, db_url: str, tmp_path
) -> None:
    memory = AnimaMemory(db, "aria", settings=Settings(database_url=db_url, home=tmp_path))
    memory.append(
        [
            m("u1", "user", "I start the new job on Monday.", at(9)),
            m("a1", "assistant", "Good luck!", at(9, 1)),
        ]
    )
    night = Night(day=DAY, engine=None, tz=TZ)
    inside, release = threading.Event(), threading.Event()

    def body(conn, audit) -> StepOutcome:
        n = sum(len(c.messages) for c in day_conversations(conn, "aria", night.start, night.end))
        inside.set()
        assert release.wait(30), "the test never released the step"
        return StepOutcome(stats={"messages": n})

    results = []
    step = threading.Thread(target=lambda: results.append(run_step(db, night, "aria", "test/reader", body)))
    step.start()
    assert inside.wait(30)
    t0 = time.monotonic()
    late = memory.append(
        [
            m("u2", "user", "Actually it is at the harbour office.", at(23, 50)),  # still DAY, Shanghai time
            m("u3", "user", "Good night!", at(0, 10, DAY + timedelta(days=1))),  # the next local day
        ]
    )
    waited = time.monotonic() - t0
    assert step.is_alive(), "the step finished early: the append did not overlap it"
    release.set()
    step.join(30)
    assert waited < 5  # the append did not wait for the step's anima lock
    assert late.added == 2 and late.days == [DAY, DAY + timedelta(days=1)]
    assert results[0].status == "done" and results[0].stats["messages"] == 2  # read before the late message

    # the day is now stale: the next append for it says so, and a forced re-run reads the late message
    again = memory.append([m("a2", "assistant", "Noted: the harbour office.", at(23, 52))])
    assert again.stale_days == [DAY]
    assert run_step(db, night, "aria", "test/reader", lambda c, a: StepOutcome()).status == "skipped"
    forced = Night(day=DAY, engine=None, tz=TZ, force=True)
    release.set()
    rerun = run_step(db, forced, "aria", "test/reader", body)
    assert rerun.stats["messages"] == 4  # u1, a1, u2, a2; u3 belongs to the next day
    next_day = Night(day=DAY + timedelta(days=1), engine=None, tz=TZ)
    with db.transaction() as conn:
        ids = [
            x.external_id
            for c in day_conversations(conn, "aria", next_day.start, next_day.end)
            for x in c.messages
        ]
    assert ids == ["u3"]


def test_cleanup_keeps_a_conversation_an_agent_turns_into_a_dialogue_meanwhile(
    db: Database, db_url: str, tmp_path
) -> None:
    memory = AnimaMemory(db, "aria", settings=Settings(database_url=db_url, home=tmp_path))
    old = datetime.now(TZ) - timedelta(days=3)
    memory.append([m("u1", "user", "hello?", old, conv="c-old")])  # stale, one message: a cleanup candidate
    holding, commit = threading.Event(), threading.Event()

    def agent_append() -> None:
        # the append's transaction, held open while the cleanup chooses its candidates
        from anima_pipeline.store.archive import ArchiveRecord, ImportStats, import_records
        from anima_pipeline.store.events import Audit

        with db.transaction() as conn:
            rec = ArchiveRecord.model_validate(
                {
                    "anima_id": "aria",
                    **m("a1", "assistant", "Hi! Sorry for the wait.", datetime.now(TZ), "c-old"),
                }
            )
            import_records(
                conn, [rec], Audit(conn=conn, anima_id="aria", run_id="t", step="agent/append"), ImportStats()
            )
            holding.set()
            commit.wait(30)

    agent = threading.Thread(target=agent_append)
    agent.start()
    assert holding.wait(30)
    result = []
    night = threading.Thread(
        target=lambda: result.append(cleanup(db, Night(day=DAY, engine=None, tz=TZ), "aria"))
    )
    night.start()
    time.sleep(1.0)  # the cleanup has read its candidates and waits for the conversation's row lock
    commit.set()
    agent.join(30)
    night.join(30)
    assert result[0].stats["deleted"] == 0
    with db.transaction() as conn:
        n = conn.execute("SELECT count(*) AS n FROM message WHERE conversation_id = 'c-old'").fetchone()["n"]
    assert n == 2
