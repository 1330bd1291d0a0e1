"""Numbered SQL migrations against a real PostgreSQL: the schema they build, idempotence,
and every way a migrations folder can be refused (changed, missing or misnamed file, a failing
migration that must leave nothing behind)."""

from __future__ import annotations

import re
import shutil
import threading
import time
from pathlib import Path

import psycopg
import pytest

from anima_pipeline.store.migrations import _LOCK_KEY, SQL_DIR, MigrationError, load_migrations, migrate

TABLES = {
    "conversation",
    "message",
    "semantic_memory",
    "memory_event",
    "emotional_anchor",
    "autobiographical_memory",
    "self_block",
    "self_block_history",
    "temporal_summary",
    "memory_reference",
    "dream_journal",  # the dream entries
    "sleep_state",
    "store_calendar",  # the store's first day (0009)
    "schema_migration",
}
ALL_NAMES = [m.name for m in load_migrations()]


def _tables(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'"
        ).fetchall()
    return {r[0] for r in rows}


def _recorded(url: str) -> list[tuple[int, str, str]]:
    with psycopg.connect(url) as conn:
        if conn.execute("SELECT to_regclass('schema_migration')").fetchone()[0] is None:
            return []
        return conn.execute(
            "SELECT version, name, checksum FROM schema_migration ORDER BY version"
        ).fetchall()


def _index_defs(url: str, table: str) -> list[str]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = 'public' AND tablename = %s", (table,)
        ).fetchall()
    return [r[0] for r in rows]


@pytest.fixture
def sql_copy(tmp_path: Path) -> Path:
    """The project's migrations copied to tmp_path, free to edit."""
    target = tmp_path / "sql"
    shutil.copytree(SQL_DIR, target)
    return target


def test_the_project_ships_numbered_migrations() -> None:
    assert ALL_NAMES == sorted(ALL_NAMES)
    versions = [m.version for m in load_migrations()]
    # numbers are reserved per line of work, so a gap may stand between landed ones
    assert versions == sorted(set(versions)) and versions[0] == 1


def test_fresh_apply_creates_every_table_and_records_checksums(empty_db_url: str) -> None:
    assert migrate(empty_db_url) == ALL_NAMES
    assert TABLES <= _tables(empty_db_url)
    assert _recorded(empty_db_url) == [(m.version, m.name, m.checksum) for m in load_migrations()]
    with psycopg.connect(empty_db_url) as conn:
        extensions = {r[0] for r in conn.execute("SELECT extname FROM pg_extension").fetchall()}
    assert "pg_trgm" in extensions


INDEXES = [
    ("message", "USING btree (anima_id, created_at)"),  # a day's messages of one anima
    ("semantic_memory", "USING btree (anima_id, status)"),  # active memories of one anima
    ("autobiographical_memory", "USING btree (anima_id, status"),
    ("semantic_memory", "USING gin (source_sessions)"),
    ("semantic_memory", "USING gin (search)"),
    ("semantic_memory", "USING gin (content gin_trgm_ops)"),
    ("semantic_memory", "USING gin (fts)"),  # chat-time recall (0005)
    ("message", "USING gin (fts)"),
    ("recall_word", "USING gin (word gin_trgm_ops)"),  # spelling correction at recall (0007)
    ("temporal_summary", "USING gin (anima_search_vector(content))"),
]


def test_fresh_apply_creates_the_indexes(db_url: str) -> None:
    for table, fragment in INDEXES:
        defs = _index_defs(db_url, table)
        assert any(fragment in d for d in defs), f"no index with {fragment!r} on {table}: {defs}"


def test_the_planner_can_use_the_search_indexes(db_url: str) -> None:
    with psycopg.connect(db_url) as conn:
        conn.execute("SET enable_seqscan = off")

        def plan(sql: str) -> str:
            return "\n".join(r[0] for r in conn.execute("EXPLAIN " + sql).fetchall())

        assert "semantic_memory_trgm_idx" in plan("SELECT id FROM semantic_memory WHERE content % 'coffee'")
        assert "semantic_memory_search_idx" in plan(
            "SELECT id FROM semantic_memory WHERE search @@ to_tsquery('simple', 'coffee')"
        )
        assert "semantic_memory_sources_idx" in plan(
            "SELECT id FROM semantic_memory WHERE source_sessions && ARRAY['s1']"
        )
        assert "message_anima_time_idx" in plan(  # ordered: no tie with the unique index
            "SELECT id FROM message WHERE anima_id = 'a' AND created_at >= now() - interval '1 day'"
            " ORDER BY created_at"
        )
        assert "message_fts_idx" in plan(
            "SELECT id FROM message WHERE fts @@ plainto_tsquery('english', 'paintings')"
        )


def test_rerun_applies_nothing(empty_db_url: str) -> None:
    migrate(empty_db_url)
    with psycopg.connect(empty_db_url) as conn:
        before = conn.execute("SELECT * FROM schema_migration ORDER BY version").fetchall()
    assert migrate(empty_db_url) == []
    assert migrate(empty_db_url) == []
    with psycopg.connect(empty_db_url) as conn:
        assert conn.execute("SELECT * FROM schema_migration ORDER BY version").fetchall() == before


def test_the_test_template_is_up_to_date(db_url: str) -> None:
    assert migrate(db_url) == []


def test_a_store_with_messages_gets_its_first_day_from_them(empty_db_url: str, sql_copy: Path) -> None:
    """0009 on a store that slept before: the first day is its earliest message, audited."""
    later = [p for p in sql_copy.glob("*.sql") if int(p.name[:4]) >= 9]
    held = {p.name: p.read_text() for p in later}
    for p in later:
        p.unlink()
    migrate(empty_db_url, sql_dir=sql_copy)  # up to 0008
    with psycopg.connect(empty_db_url) as conn:
        conn.execute("INSERT INTO conversation (anima_id, id) VALUES ('aria', 'c')")
        conn.execute(
            """INSERT INTO message (anima_id, conversation_id, external_id, role, content, created_at)
               VALUES ('aria', 'c', 'm2', 'user', 'x', '2026-05-02T10:00:00Z'),
                      ('aria', 'c', 'm1', 'user', 'x', '2026-05-01T10:00:00Z')"""
        )
    for name, text in held.items():
        (sql_copy / name).write_text(text)
    migrate(empty_db_url, sql_dir=sql_copy)
    with psycopg.connect(empty_db_url) as conn:
        [(at,)] = conn.execute("SELECT first_message_at FROM store_calendar").fetchall()
        [(op, after)] = conn.execute(
            "SELECT op, after FROM memory_event WHERE table_name = 'store_calendar'"
        ).fetchall()
    assert at.isoformat() == "2026-05-01T10:00:00+00:00"
    assert op == "move" and after["source"] == "messages"


def test_only_pending_migrations_are_applied(empty_db_url: str, sql_copy: Path) -> None:
    migrate(empty_db_url, sql_dir=sql_copy)
    (sql_copy / "0099_extra.sql").write_text("CREATE TABLE extra_table (id int);\n")
    assert migrate(empty_db_url, sql_dir=sql_copy) == ["0099_extra.sql"]
    assert "extra_table" in _tables(empty_db_url)
    assert [r[1] for r in _recorded(empty_db_url)] == [*ALL_NAMES, "0099_extra.sql"]


def test_a_changed_applied_file_is_refused(empty_db_url: str, sql_copy: Path) -> None:
    migrate(empty_db_url, sql_dir=sql_copy)
    changed = sql_copy / "0002_memory.sql"
    changed.write_text(changed.read_text() + "\n-- an afterthought\n")
    (sql_copy / "0099_extra.sql").write_text("CREATE TABLE extra_table (id int);\n")
    recorded = _recorded(empty_db_url)

    with pytest.raises(MigrationError, match="0002_memory.sql") as info:
        migrate(empty_db_url, sql_dir=sql_copy)
    assert "changed" in str(info.value)
    # refused before applying anything, even the new file
    assert _recorded(empty_db_url) == recorded
    assert "extra_table" not in _tables(empty_db_url)


def test_a_missing_applied_file_is_refused(empty_db_url: str, sql_copy: Path) -> None:
    migrate(empty_db_url, sql_dir=sql_copy)
    (sql_copy / "0003_layers.sql").unlink()
    with pytest.raises(MigrationError, match="0003_layers.sql") as info:
        migrate(empty_db_url, sql_dir=sql_copy)
    assert "missing" in str(info.value)


def test_a_badly_named_file_is_refused(empty_db_url: str, sql_copy: Path) -> None:
    for bad_name in ["4_short.sql", "0004_Upper.sql", "0004-dash.sql", "0004_.sql", "v0004_x.sql"]:
        bad = sql_copy / bad_name
        bad.write_text("CREATE TABLE never (id int);\n")
        with pytest.raises(MigrationError, match=re.escape(bad_name)):
            migrate(empty_db_url, sql_dir=sql_copy)
        bad.unlink()
    assert _tables(empty_db_url) == set()  # refused before touching the database


def test_two_files_with_one_version_are_refused(empty_db_url: str, sql_copy: Path) -> None:
    (sql_copy / "0003_other.sql").write_text("CREATE TABLE never (id int);\n")
    with pytest.raises(MigrationError, match="share a version"):
        migrate(empty_db_url, sql_dir=sql_copy)
    assert _tables(empty_db_url) == set()


def test_a_missing_folder_is_refused(empty_db_url: str, tmp_path: Path) -> None:
    with pytest.raises(MigrationError, match="not found"):
        migrate(empty_db_url, sql_dir=tmp_path / "nowhere")


def test_other_files_in_the_folder_are_ignored(empty_db_url: str, sql_copy: Path) -> None:
    (sql_copy / "README.md").write_text("notes\n")
    assert migrate(empty_db_url, sql_dir=sql_copy) == ALL_NAMES


def test_a_failing_migration_rolls_back_its_own_transaction(empty_db_url: str, sql_copy: Path) -> None:
    broken = sql_copy / "0099_broken.sql"
    broken.write_text(
        "CREATE TABLE half_done (id int);\n"
        "INSERT INTO half_done VALUES (1);\n"
        "ALTER TABLE message ADD COLUMN half_done_flag boolean;\n"
        "SELECT no_such_column FROM half_done;\n"
    )
    with pytest.raises(MigrationError, match="0099_broken.sql") as info:
        migrate(empty_db_url, sql_dir=sql_copy)
    assert "no_such_column" in str(info.value)

    # the earlier migrations committed in their own transactions; the broken one left nothing
    assert [r[1] for r in _recorded(empty_db_url)] == ALL_NAMES
    tables = _tables(empty_db_url)
    assert "half_done" not in tables and "message" in tables
    with psycopg.connect(empty_db_url) as conn:
        columns = {
            r[0]
            for r in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_name = 'message'"
            ).fetchall()
        }
    assert "half_done_flag" not in columns

    # once fixed, it applies alone
    broken.write_text("CREATE TABLE half_done (id int);\n")
    assert migrate(empty_db_url, sql_dir=sql_copy) == ["0099_broken.sql"]


def test_a_failing_first_migration_records_nothing(empty_db_url: str, tmp_path: Path) -> None:
    sql_dir = tmp_path / "sql"
    sql_dir.mkdir()
    (sql_dir / "0001_first.sql").write_text("CREATE TABLE first_table (id int);\nSELECT 1 / 0;\n")
    with pytest.raises(MigrationError, match="0001_first.sql"):
        migrate(empty_db_url, sql_dir=sql_dir)
    assert _recorded(empty_db_url) == []
    assert _tables(empty_db_url) <= {"schema_migration"}


def test_concurrent_migrations_of_a_fresh_database_apply_each_file_once(empty_db_url: str) -> None:
    results: list[list[str]] = []
    errors: list[BaseException] = []
    start = threading.Barrier(5)

    def run() -> None:
        try:
            start.wait()
            results.append(migrate(empty_db_url))
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert sorted(name for names in results for name in names) == sorted(ALL_NAMES)
    assert [r[1] for r in _recorded(empty_db_url)] == ALL_NAMES


def test_nothing_is_created_while_another_process_migrates(empty_db_url: str) -> None:
    """Even the bookkeeping table waits for the migration lock (CREATE TABLE IF NOT EXISTS is
    not safe against a concurrent twin: it can fail on pg_type's unique index)."""
    results: list[list[str]] = []
    with psycopg.connect(empty_db_url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (_LOCK_KEY,))
        worker = threading.Thread(target=lambda: results.append(migrate(empty_db_url)))
        worker.start()
        time.sleep(0.5)
        assert worker.is_alive()
        assert _tables(empty_db_url) == set()
        holder.execute("SELECT pg_advisory_unlock(%s)", (_LOCK_KEY,))
    worker.join(timeout=60)
    assert results == [ALL_NAMES]
