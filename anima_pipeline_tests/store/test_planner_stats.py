"""Planner statistics kept by the project (store/planner_stats.py): autovacuum is off on CI's server, and
recall's plans rest on the statistics. A bulk append (and an import, a night) analyses the
tables it changed when autovacuum's rule says they are due; recall then stays on its indexes."""

from __future__ import annotations

import time

import psycopg
from psycopg.rows import dict_row

from anima_pipeline.config import Settings
from anima_pipeline.memory.facade import AnimaMemory
from anima_pipeline.recall.episodic import MessageSearch
from anima_pipeline.recall.query import plan_query
from anima_pipeline.store.planner_stats import keep_fresh
from anima_pipeline.store.recall_queries import SOURCES

WORDS = "harbour lantern violin orchard glacier canyon meadow bakery tunnel island".split()


def _analysed(conn, table: str) -> bool:
    row = conn.execute(
        "SELECT coalesce(last_analyze, last_autoanalyze) IS NOT NULL AS a FROM pg_stat_user_tables WHERE relname = %s",
        (table,),
    ).fetchone()
    return bool(row["a"])


def test_a_bulk_append_keeps_the_statistics_and_recall_stays_on_the_index(db_url, tmp_path) -> None:
    messages = [
        {
            "conversation_id": f"c{i // 50}",
            "message_id": f"m{i}",
            "role": "user",
            "speaker": "Ines",
            "content": f"Note {i}: the {WORDS[i % 10]} near the {WORDS[(i * 7) % 10]} again"
            + (" with a rare zeppelin" if i == 777 else ""),
            "created_at": f"2026-11-{1 + i % 28:02d}T10:{i % 60:02d}:00+00:00",
        }
        for i in range(3000)
    ]
    with psycopg.connect(db_url, row_factory=dict_row, autocommit=True) as conn:
        assert not _analysed(conn, "message")  # a store never analysed (autovacuum is off here)
    settings = Settings(database_url=db_url, home=tmp_path, embedder={"kind": "none"})
    with AnimaMemory(db_url, "aria", settings=settings) as mem:
        mem.append(messages)
        with psycopg.connect(db_url, row_factory=dict_row, autocommit=True) as conn:
            assert _analysed(conn, "message") and _analysed(conn, "recall_word")  # done by the append
            time.sleep(1.5)  # a backend flushes its counters at most once a second
            conn.execute("ANALYZE message")  # so that what follows starts from zero changes
            assert keep_fresh(conn, {"message": 10}) == []  # a small change is not worth an ANALYZE
            assert keep_fresh(conn, {"message": 400}) == ["message"]  # beyond 50 + 10 % of 3,000 rows
            # the probe of a rare word reads the full-text index, not every row of the anima
            search = MessageSearch("aria", plan_query("zeppelin", None), tz=settings.tz)
            q = "plainto_tsquery('english'::regconfig, 'zeppelin')"
            plan = "\n".join(
                r["QUERY PLAN"]
                for r in conn.execute(
                    f"EXPLAIN SELECT x.id FROM message x WHERE {SOURCES[search.table].filter.full} AND x.fts @@ {q} LIMIT 100",
                    search.params,
                ).fetchall()
            )
            assert "message_fts_idx" in plan, plan
        ctx = mem.context("zeppelin")
        assert [i.text for i in ctx.section("episodic").items][0].endswith("zeppelin")
