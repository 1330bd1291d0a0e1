"""The store's first day in the database (store/calendar.py): moves only earlier, and two
writers at once (an import and an append) never record a later day or an event too many."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

from anima_pipeline.store.calendar import first_message_at, move_first_message
from anima_pipeline.store.db import Database
from anima_pipeline.store.events import Audit


def _audit(conn, run_id: str) -> Audit:
    return Audit(conn=conn, anima_id="", run_id=run_id, step="test")


def test_two_writers_at_once_keep_the_earlier_time(db: Database) -> None:
    early, late = datetime(2026, 3, 1, tzinfo=UTC), datetime(2026, 5, 1, tzinfo=UTC)
    moved: dict[str, bool] = {}
    holding = threading.Event()

    def second() -> None:
        holding.wait(10)
        with db.transaction() as conn:  # waits for the first writer's lock, then sees its value
            moved["late"] = move_first_message(conn, _audit(conn, "late"), late, "test")

    thread = threading.Thread(target=second)
    thread.start()
    with db.transaction() as conn:
        moved["early"] = move_first_message(conn, _audit(conn, "early"), early, "test")
        holding.set()
        thread.join(0.5)
        assert thread.is_alive()  # the later writer waits until the earlier one commits
    thread.join(10)
    assert moved == {"early": True, "late": False}
    with db.transaction() as conn:
        assert first_message_at(conn) == early
        events = conn.execute(
            "SELECT run_id FROM memory_event WHERE table_name = 'store_calendar' ORDER BY id"
        ).fetchall()
    assert [e["run_id"] for e in events] == ["early"]


def test_a_rolled_back_move_leaves_no_trace(db: Database) -> None:
    with db.transaction() as conn:
        move_first_message(conn, _audit(conn, "kept"), datetime(2026, 5, 1, tzinfo=UTC), "test")
    try:
        with db.transaction() as conn:
            assert move_first_message(conn, _audit(conn, "gone"), datetime(2026, 1, 1, tzinfo=UTC), "test")
            raise RuntimeError("the import failed after its messages")
    except RuntimeError:
        pass
    with db.transaction() as conn:
        assert first_message_at(conn) == datetime(2026, 5, 1, tzinfo=UTC)
        assert (
            conn.execute(
                "SELECT count(*) AS n FROM memory_event WHERE table_name = 'store_calendar'"
            ).fetchone()["n"]
            == 1
        )
