"""The catalog of what the store remembers (store/catalog.py) against the live schema: every
table and every text, JSON, array and vector column of the migrated store, and of a shadow
store made from it, is catalogued; a column added without an entry is found; a purge refuses
to run on a store with such a column."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from anima_pipeline.config import Settings
from anima_pipeline.core.errors import InternalError
from anima_pipeline.memory.forget import forget
from anima_pipeline.store import catalog
from anima_pipeline.store import shadows as shadow
from anima_pipeline.store.db import Database


def test_every_text_json_and_array_column_of_the_live_and_a_shadow_schema_is_catalogued(
    db: Database, db_url: str
) -> None:
    with db.transaction() as conn:
        assert catalog.missing(conn) == []
        walked = conn.execute(
            """SELECT count(*) AS n FROM information_schema.columns WHERE table_schema = 'public'
               AND (data_type IN ('text', 'jsonb', 'ARRAY', 'tsvector') OR udt_name = 'vector')"""
        ).fetchone()
    assert walked is not None and walked["n"] > 60  # the walk saw the schema, not an empty one
    url, _ = shadow.create(db_url, "catalog", date(2026, 11, 1))
    try:
        with Database(url) as copy, copy.transaction() as conn:
            assert catalog.missing(conn) == []
    finally:
        shadow.drop(db_url, "catalog")


def test_a_column_or_a_table_the_catalog_does_not_know_is_found(db: Database) -> None:
    with db.transaction() as conn:
        conn.execute("ALTER TABLE dream_journal ADD COLUMN musings text")
        conn.execute("CREATE TABLE scratchpad (anima_id text, note jsonb)")
        conn.execute("ALTER TABLE semantic_memory DROP COLUMN deprecated_reason")
        found = catalog.missing(conn)
    assert "dream_journal.musings" in found and "scratchpad" in found
    assert "semantic_memory.deprecated_reason (catalogued, not in the schema)" in found


def test_a_purge_refuses_a_store_with_an_uncatalogued_text_column(
    db: Database, db_url: str, tmp_path: Path
) -> None:
    with db.transaction() as conn:
        conn.execute("ALTER TABLE temporal_summary ADD COLUMN draft text")
    with pytest.raises(InternalError, match="temporal_summary.draft"):
        forget(db, Settings(database_url=db_url, home=tmp_path), "aria", "conversation", "c-1", purge=True)


def test_the_lists_of_forget_snapshot_and_replay_are_the_catalogs() -> None:
    from anima_pipeline.store import as_of, erasure, shadow_reads

    assert set(erasure.ANIMA_TABLES) <= set(catalog.names())
    assert "semantic_memory" in as_of.AUDITED and "message" not in as_of.AUDITED
    assert set(shadow_reads._COUNTED) == set(catalog.counted())
    # every table holding learnt text is one a purge scans, or reaches by lineage
    learnt = {t.name for t in catalog.TABLES for c in t.columns if c.holds == "learnt"}
    assert learnt <= {*catalog.learnt_columns(), *catalog.names(purge="lineage")}
    assert "semantic_memory" not in catalog.learnt_columns()  # what the anima knows: by lineage only
    assert {"dream_journal", "temporal_summary", "self_block", "session_summary"} <= set(
        catalog.learnt_columns()
    )


def test_the_vector_tables_are_catalogued_where_pgvector_is(vector_db_url: str) -> None:
    with Database(vector_db_url, max_size=1) as db, db.transaction() as conn:
        assert conn.execute("SELECT to_regclass('embedding') IS NOT NULL AS ok").fetchone()["ok"]  # type: ignore[index]
        assert catalog.missing(conn) == []
