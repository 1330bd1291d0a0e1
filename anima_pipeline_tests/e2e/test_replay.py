"""The store as of a day, replay into a shadow store, diff and promote, on a real PostgreSQL:
the snapshot rebuilt from the audit log reaches today's store when the same nights run again;
a replay through Dagster leaves the live store byte-identical (a checksum over every table)
and equals a fresh run of its setting; promote, then revert, gives the original store back."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path

import psycopg
import pytest
from psycopg.rows import dict_row

from anima_pipeline.cli.demo import SAMPLE
from anima_pipeline.config import Settings
from anima_pipeline.memory.facade import AnimaMemory
from anima_pipeline.night.revert import revert_run
from anima_pipeline.night.runner import run_days
from anima_pipeline.replay.promote import check_base
from anima_pipeline.store import as_of as snapshot
from anima_pipeline.store import shadows as shadow
from anima_pipeline.store.archive import ImportStats, import_records, parse_lines
from anima_pipeline.store.db import Database
from anima_pipeline.store.events import Audit
from anima_pipeline_tests.conftest import cli_env, invoke_cli

FIRST, LAST = date(2026, 11, 16), date(2026, 11, 22)
DAYS = [FIRST + timedelta(days=i) for i in range((LAST - FIRST).days + 1)]


def knowledge(url: str) -> dict[str, list]:
    """What an anima knows, without ids or clocks: memories, summaries, self blocks, layers."""
    with psycopg.connect(url, row_factory=dict_row) as conn:
        q = {
            "memories": "SELECT anima_id, type, content, status, source_sessions FROM semantic_memory",
            "summaries": "SELECT anima_id, level, period_start, content FROM temporal_summary",
            "self": "SELECT anima_id, name, content FROM self_block",
            "anchors": "SELECT anima_id, conversation_id, emotion, status FROM emotional_anchor",
            "narratives": "SELECT anima_id, title, status FROM autobiographical_memory",
            "nights": "SELECT anima_id, day, step, status FROM sleep_state WHERE status <> 'running'",
        }
        # memory ids differ by design: rows born in a shadow start past the live store's ids
        return {
            k: sorted(
                tuple(re.sub(r"f-\d+", "f-N", str(x)) for x in r.values()) for r in conn.execute(v).fetchall()
            )
            for k, v in q.items()
        }


def active(url: str) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return sorted(
            conn.execute(
                "SELECT anima_id, type, content FROM semantic_memory WHERE status = 'active'"
            ).fetchall()
        )


def _import(db: Database) -> None:
    with db.transaction() as conn:
        audit = Audit(conn=conn, anima_id="", run_id="import", step="import")
        import_records(conn, parse_lines(SAMPLE.read_text().splitlines(), str(SAMPLE)), audit, ImportStats())


@pytest.fixture
def shadows(db_url: str) -> Iterator[list[str]]:
    made: list[str] = []
    yield made
    for name in made:
        shadow.drop(db_url, name)


def test_the_store_as_of_a_day_sleeps_again_into_todays_store(
    db: Database, db_url: str, tmp_path: Path, shadows
) -> None:
    settings = Settings(database_url=db_url, home=tmp_path)
    _import(db)
    run_days(db, settings, DAYS, workers=1)
    today = knowledge(db_url)
    live_sums = _checksums(db_url)

    url, undone = shadow.create(db_url, "asof", date(2026, 11, 18))
    shadows.append("asof")
    assert undone["semantic_memory"] > 0 and undone["sleep_state"] > 0
    assert _checksums(db_url) == live_sums  # making it only read the live store
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT max(day) FROM sleep_state").fetchone()[0] == date(2026, 11, 18)
        assert conn.execute("SELECT count(*) FROM memory_event WHERE day > '2026-11-18'").fetchone()[0] == 0
    assert knowledge(url) != today

    with Database(url) as sdb:
        run_days(sdb, Settings(database_url=url, home=tmp_path), DAYS[3:], workers=1)
    assert knowledge(url) == today


def test_snapshot_help_says_it_prints_a_connection_string(tmp_path: Path) -> None:
    said = invoke_cli(["snapshot", "--help"], cli_env(tmp_path))
    assert said.returncode == 0 and "connection string" in said.stdout and "conninfo" in said.stdout
    assert "its URL" not in said.stdout, said.stdout


def test_replay_leaves_the_live_store_as_it_was_and_equals_a_fresh_run(
    db_url: str, tmp_path: Path, shadows
) -> None:
    env = cli_env(tmp_path, db_url, ANIMA_ENGINE="offline")

    def anima(*args: str):
        out = invoke_cli(list(args), env)
        assert out.returncode == 0, out.stdout + out.stderr
        return out

    anima("import", str(SAMPLE))
    anima("sleep", "--from", str(FIRST), "--to", str(LAST))  # scheduled modes: incremental on most days
    before = _checksums(db_url)

    out = anima("replay", "--from", "2026-11-17", "--to", str(LAST), "--mode", "full", "--name", "full")
    shadows.append("full")
    assert _checksums(db_url) == before  # byte-identical live store
    assert "Memories:" in out.stdout and "tag anima/replay=full" in out.stdout
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        json.dumps({"anima_id": "aria", "question": "What does Lin Wei drink now?", "answer": "oolong tea"})
        + "\n"
    )
    diff = json.loads(anima("diff", "full", "--json", "--questions", str(questions)).stdout)
    assert diff["recall"]["questions"] == 1 and 0 <= diff["recall"]["shadow"] <= 1
    assert (
        diff["added"] or diff["removed"] or diff["changed"]
    )  # full deep sleep every night changes something
    assert {m["content"] for m in diff["added"]} <= {
        c for _, _, c in active(shadow.shadow_url(db_url, "full"))
    }

    # the shadow equals a fresh run of that setting from the same starting state
    fresh, _ = shadow.create(db_url, "fresh", date(2026, 11, 16))
    shadows.append("fresh")
    with Database(fresh) as fdb:
        run_days(fdb, Settings(database_url=fresh, home=tmp_path), DAYS[1:], mode="full", workers=1)
    assert knowledge(fresh)["memories"] == knowledge(shadow.shadow_url(db_url, "full"))["memories"]

    # the replay run is in the run history, tagged
    listed = anima("replay", "--list")
    assert "full" in listed.stdout and "replayed" in listed.stdout
    row = next(line for line in listed.stdout.splitlines() if " full " in line and "replayed" in line)
    assert "offline" in row and "claude" not in row, row  # no model for a night that called none

    original = active(db_url)
    promoted = anima("replay", "--promote", "full")
    run_id = promoted.stdout.split("as run ")[1].split(":")[0]
    assert active(db_url) == active(shadow.shadow_url(db_url, "full"))
    refused = invoke_cli(["replay", "--promote", "full"], env)
    assert refused.returncode == 2 and "promoted already" in refused.stderr

    with Database(db_url) as db, db.transaction() as conn:
        revert_run(conn, run_id, "revert-promote")
    assert active(db_url) == original


def test_a_later_night_first_then_the_week_gives_the_live_store_as_of_its_last_day(
    db: Database, db_url: str, tmp_path: Path, shadows
) -> None:
    """README's first sleep example (the night of 2026-11-28), then the week: the store as of
    2026-11-22 is the live one (the later night only deleted a stale conversation, which the
    snapshot keeps: the archive stays whole); a replay of 11-20..11-22 changes nothing."""
    settings = Settings(database_url=db_url, home=tmp_path)
    _import(db)
    run_days(db, settings, [date(2026, 11, 28)], workers=1)
    run_days(db, settings, DAYS, workers=1)
    today = knowledge(db_url)
    assert len(active(db_url)) == 80

    url, _ = shadow.create(db_url, "asof", LAST)
    shadows.append("asof")
    got = knowledge(url)
    assert {k: v for k, v in got.items() if k != "nights"} == {
        k: v for k, v in today.items() if k != "nights"
    }
    assert got["nights"] == [n for n in today["nights"] if n[1] != "2026-11-28"]
    with psycopg.connect(url) as conn, psycopg.connect(db_url) as live:
        count = "SELECT count(*) FROM conversation"
        assert conn.execute(count).fetchone()[0] == live.execute(count).fetchone()[0] + 1

    # the replay's base (as of 11-19), the nights 20..22 again: the live store's knowledge
    base, _ = shadow.create(db_url, "replayed", date(2026, 11, 19))
    shadows.append("replayed")
    with Database(base) as sdb:
        run_days(sdb, Settings(database_url=base, home=tmp_path), DAYS[4:], workers=1)
    assert knowledge(base)["memories"] == today["memories"]
    meta = shadow.info(db_url, "replayed")
    with psycopg.connect(db_url, row_factory=dict_row) as live:
        check_base(live, "replayed", meta, DAYS[4], LAST)  # its base is still the live store's
    AnimaMemory(db, "aria").remember("Lin Wei keeps a spare key under the mat.")  # today's write
    with psycopg.connect(db_url, row_factory=dict_row) as live:
        with pytest.raises(shadow.ShadowError, match="changed since shadow 'replayed' was made"):
            check_base(live, "replayed", meta, DAYS[4], LAST)
        with pytest.raises(shadow.ShadowError, match="writes of days after the replayed") as after:
            check_base(
                live, "replayed", {k: v for k, v in meta.items() if k != "live_max_event_id"}, DAYS[4], LAST
            )
    assert "anima replay --from 2026-11-20 --to " in str(after.value)


def test_a_store_that_nights_out_of_order_wrote_is_refused_naming_the_days(
    db: Database, db_url: str, tmp_path: Path, shadows
) -> None:
    """The night of 11-22 first, then 11-16..11-21: those nights rewrote the self blocks and
    the memories the later night wrote, so no store as of 11-16..11-21 is in the log. The
    snapshot refuses, naming the days and the replay that sleeps them in order, and makes
    nothing; that replay's base (as of 11-15) rebuilds, and the nights in order run on it."""
    settings = Settings(database_url=db_url, home=tmp_path)
    _import(db)
    run_days(db, settings, [LAST], workers=1)
    run_days(db, settings, DAYS[:-1], workers=1)
    before = _checksums(db_url)

    for day in (date(2026, 11, 21), date(2026, 11, 18)):
        with pytest.raises(snapshot.OutOfOrder) as refused:
            shadow.create(db_url, "asof", day)
        assert refused.value.later_days == [LAST] and refused.value.exact == date(2026, 11, 15)
        assert DAYS[0] in refused.value.earlier_days
        assert f"`anima replay --from 2026-11-16 --to {day}`" in str(refused.value)
        assert "self_block" in str(refused.value)
    with pytest.raises(snapshot.OutOfOrder, match="--to 2026-11-21`"):
        shadow.create(db_url, "asof", date(2026, 11, 18), to=date(2026, 11, 21))  # replay's hint
    assert shadow.list_shadows(db_url) == [] and _checksums(db_url) == before

    url, _ = shadow.create(db_url, "asof", date(2026, 11, 15))
    shadows.append("asof")
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT count(*) FROM semantic_memory").fetchone()[0] == 0
    with Database(url) as sdb:
        run_days(sdb, Settings(database_url=url, home=tmp_path), DAYS[:-1], workers=1)
    assert len(active(url)) < len(active(db_url))  # without what the night of 11-22 learnt
    with psycopg.connect(db_url, row_factory=dict_row) as live:
        with pytest.raises(
            shadow.ShadowError, match=r"days after the replayed 2026-11-16..2026-11-21 \(2026-11-22\)"
        ):
            check_base(live, "asof", shadow.info(db_url, "asof"), DAYS[0], DAYS[-2])


def test_a_shadow_name_and_a_missing_shadow_are_named_errors(db_url: str) -> None:
    with pytest.raises(shadow.ShadowError, match="shadow name"):
        shadow.create(db_url, "Bad Name", date(2026, 1, 1))
    with pytest.raises(shadow.ShadowError, match="no shadow store named 'nope'"):
        shadow.info(db_url, "nope")


def _checksums(url: str) -> dict[str, str]:
    with psycopg.connect(url, row_factory=dict_row) as conn:
        return snapshot.checksums(conn)
