"""Rollback: a whole night undone from its audit log, nothing lost, and the night re-runnable."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from anima_pipeline.config import Settings
from anima_pipeline.sleep.revert import revert_run
from anima_pipeline.sleep.runner import run_days
from anima_pipeline.store.archive import ImportStats, import_records, parse_lines
from anima_pipeline.store.db import Database
from anima_pipeline.store.events import Audit
from anima_pipeline.store.status import status

SAMPLE = Path(__file__).resolve().parents[1] / "anima_pipeline" / "sample" / "week.archive.jsonl"


def _counts(db: Database) -> dict:
    with db.transaction() as conn:
        totals = status(conn)["totals"]
        blocks = conn.execute("SELECT name, content FROM self_block ORDER BY name").fetchall()
    return {**totals, "blocks": [(b["name"], b["content"]) for b in blocks]}


def test_revert_a_night_restores_the_store_and_lets_it_run_again(db: Database, db_url: str, tmp_path: Path):
    with db.transaction() as conn:
        audit = Audit(conn=conn, anima_id="", run_id="import", step="import")
        import_records(
            conn,
            parse_lines(SAMPLE.read_text(encoding="utf-8").split("\n"), str(SAMPLE)),
            audit,
            ImportStats(),
        )
    settings = Settings(database_url=db_url, home=tmp_path)
    run_days(db, settings, [date(2026, 11, 16), date(2026, 11, 17)], run_id="run-first")
    after_first = _counts(db)
    run_days(db, settings, [date(2026, 11, 18)], run_id="run-second")
    after_second = _counts(db)
    assert after_second["semantic_active"] > after_first["semantic_active"]

    with db.transaction() as conn:
        stats = revert_run(conn, "run-second", "revert-1")
    assert stats["memories_deprecated"] > 0 and stats["sleep_state_cleared"] > 0
    reverted = _counts(db)
    # what the night created is deprecated, not deleted; everything else is as before it
    assert reverted["semantic_active"] == after_first["semantic_active"]
    assert (
        reverted["semantic_deprecated"] == after_first["semantic_deprecated"] + stats["memories_deprecated"]
    )
    assert reverted["blocks"] == after_first["blocks"]
    assert reverted["temporal_summaries"] == after_first["temporal_summaries"]
    assert reverted["emotional_anchors"] == after_first["emotional_anchors"]
    with db.transaction() as conn:
        undo_events = conn.execute(
            "SELECT count(*) AS n FROM memory_event WHERE run_id = 'revert-1'"
        ).fetchone()["n"]
        assert undo_events >= stats["memories_deprecated"]

    # the night of 11-18 can run again (its sleep_state is gone), and learns it again
    run_days(db, settings, [date(2026, 11, 18)], run_id="run-third")
    assert _counts(db)["semantic_active"] == after_second["semantic_active"]
