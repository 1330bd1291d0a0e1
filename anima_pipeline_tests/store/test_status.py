"""`status`: counts per anima and in total, with an exact, stable key set."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from anima_pipeline.store.db import Database
from anima_pipeline.store.status import STATUS_KEYS, status
from anima_pipeline_tests.conftest import cli_env, run_cli

KEYS = {
    "conversations",
    "messages",
    "semantic_active",
    "semantic_deprecated",
    "emotional_anchors",
    "autobiographical_active",
    "temporal_summaries",
    "memory_references",
    "dream_entries",
}


def _insert_world(conn) -> None:
    """Rows for two animas, straight in SQL (no repository in between), plus rows that must not count."""
    for anima, conv, n_msgs in [("ana", "c1", 3), ("ana", "c2", 2), ("bob", "b1", 1)]:
        conn.execute(
            "INSERT INTO conversation (id, anima_id, created_at, updated_at) VALUES (%s, %s, now(), now())",
            (conv, anima),
        )
        for i in range(n_msgs):
            conn.execute(
                """INSERT INTO message (anima_id, conversation_id, external_id, role, content, created_at)
                   VALUES (%s, %s, %s, 'user', 'hello', now())""",
                (anima, conv, f"{conv}:{i}"),
            )
    facts = {}
    for anima, content, st in [
        ("ana", "Lin works at a bank", "active"),
        ("ana", "Lin likes jazz", "active"),
        ("ana", "Lin lives in Pudong", "deprecated"),
        ("bob", "Bob has a dog", "active"),
        ("bob", "Bob had a cat", "deprecated"),
        ("bob", "Bob had a fish", "deprecated"),
    ]:
        facts[content] = conn.execute(
            "INSERT INTO semantic_memory (anima_id, type, content, status) VALUES (%s, 'world', %s, %s) RETURNING id",
            (anima, content, st),
        ).fetchone()["id"]
    for anima, st in [("ana", "active"), ("ana", "active"), ("ana", "deprecated"), ("carl", "deprecated")]:
        conn.execute(
            """INSERT INTO emotional_anchor (anima_id, occurred_at, emotion, valence, arousal, status)
               VALUES (%s, now(), 'joy', 0.7, 0.4, %s)""",
            (anima, st),
        )
    for anima, st in [("ana", "active"), ("ana", "deprecated"), ("bob", "active")]:
        conn.execute(
            """INSERT INTO autobiographical_memory (anima_id, title, narrative, significance, status)
               VALUES (%s, 'A week', 'It was a week.', 'notable', %s)""",
            (anima, st),
        )
    for level, start, end in [("day", "2024-03-01", "2024-03-01"), ("week", "2024-02-26", "2024-03-03")]:
        conn.execute(
            "INSERT INTO temporal_summary (anima_id, level, period_start, period_end, content) VALUES ('ana', %s, %s, %s, 'x')",
            (level, start, end),
        )
    message_id = conn.execute("SELECT id FROM message WHERE anima_id = 'bob'").fetchone()["id"]
    conn.execute(
        """INSERT INTO memory_reference (anima_id, memory_id, cited_memory_id, message_id, conversation_id, referenced_at)
           VALUES ('bob', %s, %s, %s, 'b1', now())""",
        (facts["Bob has a dog"], facts["Bob has a dog"], message_id),
    )
    conn.execute(
        "INSERT INTO dream_journal (anima_id, day) VALUES ('ana', '2024-03-01'), ('ana', '2024-03-02')"
    )
    # not counted anywhere
    conn.execute("INSERT INTO self_block (anima_id, name, content) VALUES ('dora', 'identity', 'I am Dora')")
    conn.execute(
        "INSERT INTO sleep_state (anima_id, day, step, status) VALUES ('ana', '2024-03-01', 'light', 'done')"
    )


def test_status_keys_are_exactly_these() -> None:
    assert set(STATUS_KEYS) == KEYS
    assert len(STATUS_KEYS) == len(KEYS)


def test_status_of_an_empty_store(db: Database) -> None:
    with db.transaction() as conn:
        data = status(conn)
    assert data == {"totals": dict.fromkeys(STATUS_KEYS, 0), "animas": []}


def test_status_counts_rows_inserted_directly(db: Database) -> None:
    with db.transaction() as conn:
        _insert_world(conn)
    with db.transaction() as conn:
        data = status(conn)

    assert set(data) == {"totals", "animas"}
    assert set(data["totals"]) == KEYS
    for row in data["animas"]:
        assert set(row) == KEYS | {"anima_id"}
    assert [row["anima_id"] for row in data["animas"]] == [
        "ana",
        "bob",
    ]  # sorted; carl has only deprecated rows

    ana, bob = data["animas"]
    assert ana == {
        "anima_id": "ana",
        "conversations": 2,
        "messages": 5,
        "semantic_active": 2,
        "semantic_deprecated": 1,
        "emotional_anchors": 2,
        "autobiographical_active": 1,
        "temporal_summaries": 2,
        "memory_references": 0,
        "dream_entries": 2,
    }
    assert bob == {
        "anima_id": "bob",
        "conversations": 1,
        "messages": 1,
        "semantic_active": 1,
        "semantic_deprecated": 2,
        "emotional_anchors": 0,
        "autobiographical_active": 1,
        "temporal_summaries": 0,
        "memory_references": 1,
        "dream_entries": 0,
    }
    assert data["totals"] == {k: ana[k] + bob[k] for k in STATUS_KEYS}


@pytest.mark.parametrize(
    ("sql", "key"),
    [
        (
            "UPDATE semantic_memory SET status = 'deprecated' WHERE content = 'Lin likes jazz'",
            "semantic_active",
        ),
        ("UPDATE emotional_anchor SET status = 'deprecated' WHERE anima_id = 'ana'", "emotional_anchors"),
        ("DELETE FROM dream_journal WHERE day = '2024-03-02'", "dream_entries"),
    ],
)
def test_status_follows_changes(db: Database, sql: str, key: str) -> None:
    with db.transaction() as conn:
        _insert_world(conn)
        before = status(conn)["totals"]
        conn.execute(sql)
        after = status(conn)["totals"]
    assert after[key] < before[key]
    assert {k: v for k, v in after.items() if k not in (key, "semantic_deprecated")} == {
        k: v for k, v in before.items() if k not in (key, "semantic_deprecated")
    }


def test_bad_configuration_names_the_variable():
    import pytest

    from anima_pipeline.config import Settings

    for env, var in (
        ({"ANIMA_START_DATE": "2023-13-01"}, "ANIMA_START_DATE"),
        ({"ANIMA_TIMEZONE": "Mars/Base"}, "ANIMA_TIMEZONE"),
        ({"ANIMA_ENGINE": "gpt"}, "ANIMA_ENGINE"),
        ({"ANIMA_BUDGET_USD": "lots"}, "ANIMA_BUDGET_USD"),
    ):
        with pytest.MonkeyPatch.context() as mp, pytest.raises(ValueError, match=var):
            mp.setenv(var, env[var])
            Settings()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ANTHROPIC_API_KEY", "sk-ant-hidden-1")
        mp.setenv("ANIMA_TIMEZONE", "Europe/Paris")
        settings = Settings()
    assert settings.tz.key == "Europe/Paris" and "sk-ant-hidden-1" not in repr(settings)


@pytest.mark.parametrize(
    "args",
    [["status"], ["recall", "where does Lin live?", "--anima", "aria"], ["export", "--markdown", "OUT"]],
)
@pytest.mark.processes  # a fresh interpreter is the point
def test_a_read_only_command_on_an_unmigrated_database_says_so_and_migrates_nothing(
    empty_db_url: str, tmp_path: Path, args: list[str]
) -> None:
    args = [str(tmp_path / "out") if a == "OUT" else a for a in args]
    result = run_cli(args, cli_env(tmp_path, empty_db_url), timeout=120)
    assert result.returncode != 0
    assert "not migrated" in result.stderr and "anima db migrate" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr
    with psycopg.connect(empty_db_url) as conn:
        (tables,) = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()
    assert tables == 0  # nothing was created


@pytest.mark.processes  # a fresh interpreter is the point
def test_a_database_url_without_a_database_name_is_refused(tmp_path: Path) -> None:
    for url in ("postgresql://", "postgresql://postgres@127.0.0.1:5432", "host=127.0.0.1 user=postgres"):
        result = run_cli(["status"], cli_env(tmp_path, url), timeout=120)
        assert result.returncode == 2, (url, result.stderr)
        assert "ANIMA_DATABASE_URL" in result.stderr and "database name" in result.stderr, result.stderr
