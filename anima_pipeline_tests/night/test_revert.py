"""Rollback: a whole night undone from its audit log, nothing lost, and the night re-runnable."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from anima_pipeline.config import Settings
from anima_pipeline.night.revert import RevertError, revert_run
from anima_pipeline.night.runner import run_days
from anima_pipeline.store.archive import ImportStats, import_records, parse_lines
from anima_pipeline.store.db import Database
from anima_pipeline.store.events import Audit
from anima_pipeline.store.status import status

SAMPLE = Path(__file__).resolve().parents[2] / "anima_pipeline" / "sample" / "week.archive.jsonl"


def _counts(db: Database) -> dict:
    with db.transaction() as conn:
        totals = status(conn)["totals"]
        blocks = conn.execute("SELECT name, content FROM self_block ORDER BY name").fetchall()
    return {**totals, "blocks": [(b["name"], b["content"]) for b in blocks]}


def _import_sample(db: Database) -> None:
    with db.transaction() as conn:
        audit = Audit(conn=conn, anima_id="", run_id="import", step="import")
        import_records(
            conn,
            parse_lines(SAMPLE.read_text(encoding="utf-8").split("\n"), str(SAMPLE)),
            audit,
            ImportStats(),
        )


def test_revert_a_night_restores_the_store_and_lets_it_run_again(db: Database, db_url: str, tmp_path: Path):
    _import_sample(db)
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


def test_a_run_is_reverted_once_and_a_second_revert_is_refused_naming_the_first(
    db: Database, db_url: str, tmp_path: Path
) -> None:
    _import_sample(db)
    settings = Settings(database_url=db_url, home=tmp_path)
    run_days(db, settings, [date(2026, 11, 16)], run_id="run-a")
    with db.transaction() as conn:
        revert_run(conn, "run-a", "revert-1")
    reverted = _counts(db)
    with pytest.raises(RevertError, match=r"run 'run-a' was already reverted by revert-1 .*revert revert-1"):
        with db.transaction() as conn:
            revert_run(conn, "run-a", "revert-2")
    assert _counts(db) == reverted  # the refused revert wrote nothing


def test_reverting_an_older_run_over_later_changes_is_refused_unless_forced(
    db: Database, db_url: str, tmp_path: Path
) -> None:
    _import_sample(db)
    settings = Settings(database_url=db_url, home=tmp_path)
    run_days(db, settings, [date(2026, 11, 16)], run_id="run-old")
    run_days(db, settings, [date(2026, 11, 17)], run_id="run-new")
    latest = _counts(db)
    with db.transaction() as conn:
        touched_by_new = {
            (r["table_name"], r["memory_id"])
            for r in conn.execute(
                "SELECT table_name, memory_id FROM memory_event WHERE run_id = 'run-new'"
            ).fetchall()
        }
        old_rows = {
            (r["table_name"], r["memory_id"])
            for r in conn.execute(
                "SELECT table_name, memory_id FROM memory_event WHERE run_id = 'run-old'"
            ).fetchall()
        }
    shared = touched_by_new & old_rows
    assert ("self_block", "autobiography_summary") in shared or shared  # the night rewrites self blocks

    with pytest.raises(RevertError, match=r"later run\(s\) run-new changed"):
        with db.transaction() as conn:
            revert_run(conn, "run-old", "revert-refused")
    assert _counts(db) == latest

    with db.transaction() as conn:
        stats = revert_run(conn, "run-old", "revert-forced", force=True)
        blocks_now = {
            r["name"]: r["content"]
            for r in conn.execute("SELECT name, content FROM self_block WHERE anima_id = 'aria'").fetchall()
        }
        reverted_rows = {
            (r["table_name"], r["memory_id"])
            for r in conn.execute(
                "SELECT table_name, memory_id FROM memory_event WHERE run_id = 'revert-forced' AND table_name <> 'run'"
            ).fetchall()
        }
    assert stats["kept_newer_rows"] > 0
    assert not (reverted_rows & shared)  # no row a later run changed was touched
    # the self blocks the later run wrote are as it left them; those only the old run wrote went back
    newer_blocks = {m for t, m in touched_by_new if t == "self_block"}
    assert newer_blocks, "the later night rewrote no self block; the test needs one"
    assert {n: c for n, c in latest["blocks"] if n in newer_blocks} == {
        n: c for n, c in blocks_now.items() if n in newer_blocks
    }
