"""Whole nights on dialogues the heuristics were not written against (MemoryBank, English and
Chinese, read from ../shared/data, never copied): provenance holds and a second pass changes
no count."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

from anima_pipeline.config import Settings
from anima_pipeline.night.registry import day_range
from anima_pipeline.night.runner import run_days
from anima_pipeline.store.archive import ImportStats, import_records, parse_lines
from anima_pipeline.store.db import Database
from anima_pipeline.store.events import Audit
from anima_pipeline.store.status import status
from anima_pipeline_tests.conftest import shared_file

ANIMAS = {"mb-en-01", "mb-en-02", "mb-cn-01", "mb-cn-02"}


def _load(db: Database) -> None:
    lines = []
    for lang in ("en", "cn"):
        path = shared_file("memorybank", f"memorybank_{lang}.archive.jsonl")
        lines += [
            raw
            for raw in path.read_text(encoding="utf-8").splitlines()
            if json.loads(raw)["anima_id"] in ANIMAS
        ]
    with db.transaction() as conn:
        audit = Audit(conn=conn, anima_id="", run_id="import-test", step="import")
        import_records(conn, parse_lines(lines, "memorybank"), audit, ImportStats())


def test_nights_on_unseen_dialogues_keep_provenance_and_are_idempotent(
    db: Database, db_url: str, tmp_path: Path
):
    _load(db)
    settings = Settings(database_url=db_url, home=tmp_path)
    days = day_range(date(2023, 4, 27), date(2023, 5, 7))
    run_days(db, settings, days)
    with db.transaction() as conn:
        first = status(conn)["totals"]
        assert first["semantic_active"] > 20
        assert first["temporal_summaries"] >= 4 * 10  # one day summary per anima and day with talk
        # every memory a light sleep created cites only conversations with messages on its night
        bad = conn.execute(
            """SELECT e.memory_id, e.day, e.after->'source_sessions' AS sources FROM memory_event e
               WHERE e.step = 'semantic_memory/extracted' AND e.op = 'create'
                 AND EXISTS (
                   SELECT 1 FROM jsonb_array_elements_text(e.after->'source_sessions') s(cid)
                   WHERE NOT EXISTS (
                     SELECT 1 FROM message m WHERE m.anima_id = e.anima_id AND m.conversation_id = s.cid
                       AND (m.created_at AT TIME ZONE 'Asia/Shanghai')::date = e.day))""",
        ).fetchall()
        assert bad == []
        # and every active memory's sources exist as conversations of its own anima
        orphans = conn.execute(
            """SELECT id FROM semantic_memory m WHERE status = 'active' AND (cardinality(source_sessions) = 0
                 OR EXISTS (SELECT 1 FROM unnest(m.source_sessions) s(cid) WHERE NOT EXISTS (
                   SELECT 1 FROM conversation c WHERE c.anima_id = m.anima_id AND c.id = s.cid)))"""
        ).fetchall()
        assert orphans == []
        chinese = conn.execute(
            "SELECT count(*) AS n FROM semantic_memory WHERE anima_id LIKE 'mb-cn-%%' AND content ~ '[一-龥]'"
        ).fetchone()["n"]
        assert chinese > 5  # Chinese dialogues give Chinese memories

    run_days(db, settings, days)  # a second pass: every step already done, nothing added
    run_days(db, settings, days, force=True)  # and forced: the steps re-run and recognise their work
    with db.transaction() as conn:
        assert status(conn)["totals"] == first
