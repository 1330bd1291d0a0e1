"""Night state per (anima, day) on a real store, through `runner.run_days` (the loop the CLI
and Dagster run): a failed `--anima` night no longer wedges that anima, a night whose run is
gone is taken over once its lease lapses, a live run's night is not, a one-step re-run keeps
an incomplete night blocking, a failed step records what it spent, one anima's failure does
not stop the others, idle animas are recorded as skipped in bulk, and the CLI's per-day
totals count only the rows of its own run.

Failures are injected with the failpoint hook of testkit/faults.py (night/failpoints.py)."""

from __future__ import annotations

import logging
import threading
import time
from datetime import date, timedelta
from pathlib import Path

import pytest

from anima_pipeline.config import Settings
from anima_pipeline.llm.contract import Usage
from anima_pipeline.llm.failures import BudgetExceeded
from anima_pipeline.night import failure_kinds, registry, runner
from anima_pipeline.night.frame import run_step
from anima_pipeline.store import sleep_state
from anima_pipeline.store.archive import ImportStats, import_records, parse_lines
from anima_pipeline.store.db import Database
from anima_pipeline.store.events import Audit
from anima_pipeline_tests.conftest import DATA_DIR
from testkit import faults

# unseen.archive.jsonl in Asia/Shanghai days: kai on 12-02, 12-05, 12-11, 12-20;
# yue on 12-02, 12-06, 12-13, 12-21.
D = date(2026, 12, 2)


@pytest.fixture
def store(db: Database) -> Database:
    lines = (DATA_DIR / "unseen.archive.jsonl").read_text().splitlines()
    with db.transaction() as conn:
        audit = Audit(conn=conn, anima_id="", run_id="import-test", step="import")
        import_records(conn, parse_lines(lines, "unseen.archive.jsonl"), audit, ImportStats())
    return db


@pytest.fixture
def settings(db_url: str, tmp_path: Path) -> Settings:
    return Settings(database_url=db_url, home=tmp_path / "home", night_lease_s=1.0)


def nights(db: Database, anima: str) -> dict[date, dict]:
    with db.transaction() as conn:
        rows = conn.execute(
            "SELECT * FROM sleep_state WHERE anima_id = %s AND step = %s ORDER BY day",
            (anima, sleep_state.NIGHT),
        ).fetchall()
    return {r["day"]: r for r in rows}


def fault(monkeypatch: pytest.MonkeyPatch, **spec: str) -> None:
    faults.install(monkeypatch, ",".join(f"{k}={v}" for k, v in spec.items()))


def test_a_failed_anima_night_does_not_wedge_that_anima(
    store: Database, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`anima sleep --anima kai` failing on D leaves D failed: the next day alone is refused
    naming D, and the same command again redoes D from where it failed, then D+1 (a failed
    night never blocks an anima's later nights for good)."""
    fault(monkeypatch, action="fail", at="before_step", step="dreams/journal", day=str(D), anima="kai")
    with pytest.raises(failure_kinds.NightFailed) as failed:
        runner.run_days(store, settings, [D, D + timedelta(days=1)], animas=["kai"], run_id="run-1")
    assert failed.value.day == D and failed.value.step == "dreams/journal"
    assert nights(store, "kai")[D]["status"] == "failed"
    faults.install(monkeypatch, "")  # no fault from here on
    # the next day alone is refused over the failed one, naming it
    with pytest.raises(failure_kinds.NightFailed) as refused:
        runner.run_days(store, settings, [D + timedelta(days=1)], animas=["kai"], run_id="run-2")
    assert isinstance(refused.value.cause, failure_kinds.NightOrderError)
    assert "2026-12-02" in str(refused.value) and "kai" in str(refused.value)
    # the same command again carries on: D is redone from where it failed, then D+1
    runner.run_days(store, settings, [D, D + timedelta(days=1)], animas=["kai"], run_id="run-3")
    kai = nights(store, "kai")
    assert kai[D]["status"] == "done" and kai[D]["run_id"] == "run-3"
    assert kai[D + timedelta(days=1)]["status"] in sleep_state.FINISHED
    with store.transaction() as conn:  # the steps done before the failure were not redone
        light = sleep_state.get(conn, "kai", D, "semantic_memory/extracted")
    assert light["run_id"] == "run-1"
    assert D not in nights(store, "yue")  # --anima kai never touched yue


def test_force_and_day_clear_what_they_redo(store: Database, settings: Settings, monkeypatch) -> None:
    fault(monkeypatch, action="fail", at="in_step", step="semantic_memory/merged", day=str(D), anima="kai")
    with pytest.raises(failure_kinds.NightFailed):
        runner.run_days(store, settings, [D], animas=["kai"], run_id="run-1")
    faults.install(monkeypatch, "")  # no fault from here on
    runner.run_days(store, settings, [D], animas=["kai"], force=True, run_id="run-forced")
    assert nights(store, "kai")[D]["status"] == "done"
    runner.run_days(store, settings, [D + timedelta(days=1)], animas=["kai"], run_id="run-next")


def test_a_night_whose_run_is_gone_is_taken_over(
    store: Database, settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    with store.transaction() as conn:  # a run that died mid-night: running, lease lapsed
        sleep_state.claim_night(conn, "kai", D, "run-dead", 1.0, {})
        conn.execute("UPDATE sleep_state SET lease_until = now() - interval '1 second'")
    with caplog.at_level(logging.WARNING, logger="anima_pipeline.night.anima_night"):
        runner.run_days(store, settings, [D], run_id="run-new")
    assert nights(store, "kai")[D]["status"] == "done"
    assert nights(store, "kai")[D]["run_id"] == "run-new"
    assert "run-dead is gone" in caplog.text


def test_a_live_run_is_waited_for_then_reported_busy(store: Database, settings: Settings) -> None:
    with store.transaction() as conn:  # another run holds kai's night and keeps renewing it
        sleep_state.claim_night(conn, "kai", D, "run-alive", 3600.0, {})
    with pytest.raises(failure_kinds.NightFailed) as busy:
        runner.run_days(store, settings, [D], run_id="run-second")
    assert [(f.anima_id, type(f.cause).__name__) for f in busy.value.failures] == [("kai", "NightBusy")]
    assert "run-alive" in str(busy.value)
    assert nights(store, "kai")[D]["run_id"] == "run-alive"  # left as it was
    assert nights(store, "yue")[D]["status"] == "done"  # the other anima was not held up


def test_the_next_day_waits_for_a_recompute_holding_the_previous_night(
    store: Database, settings: Settings
) -> None:
    """A forget's recompute re-runs a few steps of a finished night and holds it, under its
    live lease, meanwhile: a range reaching the next day waits for it, then runs, instead of
    being refused over a night "still running" (a recompute never breaks a range)."""
    runner.run_days(store, settings, [D], run_id="run-range")
    with store.transaction() as conn:
        prev = sleep_state.claim_night(conn, "kai", D, "run-recompute", 3600.0, {})
    assert prev is not None and prev["status"] == "done"

    def recompute_ends() -> None:
        time.sleep(0.6)
        with store.transaction() as conn:
            sleep_state.restore_night(conn, "kai", D, "run-recompute", prev)

    ending = threading.Thread(target=recompute_ends)
    started = time.monotonic()
    ending.start()
    try:
        runner.run_days(store, settings, [D + timedelta(days=1)], run_id="run-range")
    finally:
        ending.join()
    assert time.monotonic() - started >= 0.5  # it waited
    assert nights(store, "kai")[D + timedelta(days=1)]["status"] in sleep_state.FINISHED
    # a claim that outlives the wait (two leases) is refused by the order rule, as before
    with store.transaction() as conn:
        sleep_state.claim_night(conn, "kai", D + timedelta(days=1), "run-stuck", 3600.0, {})
    with pytest.raises(failure_kinds.NightFailed) as refused:
        runner.run_days(store, settings, [D + timedelta(days=2)], run_id="run-range")
    assert isinstance(refused.value.cause, failure_kinds.NightOrderError)


def test_a_one_step_rerun_keeps_an_incomplete_night_blocking(store: Database, settings: Settings) -> None:
    runner.run_days(store, settings, [D], steps=["conversations/cleaned", "semantic_memory/extracted"])
    assert D not in nights(store, "kai")  # a partial run records no night
    runner.run_days(store, settings, [D], run_id="run-full")
    assert nights(store, "kai")[D]["status"] == "done"


def test_a_failed_step_records_what_it_spent(store: Database, settings: Settings, monkeypatch) -> None:
    from anima_pipeline.night import registry as cycle

    spent = Usage(calls=2, input_tokens=1000, output_tokens=200, cost_usd=0.0123)

    def over_budget(db, night, anima_id):
        def body(conn, audit):
            raise BudgetExceeded("budget exhausted", step="dreams/journal", usage=spent)

        return run_step(db, night, anima_id, "dreams/journal", body)

    monkeypatch.setattr(cycle.BY_KEY["dreams/journal"], "run", over_budget)
    with pytest.raises(failure_kinds.NightFailed) as failed:
        runner.run_days(store, settings, [D], run_id="run-budget")
    assert failed.value.usage.cost_usd == pytest.approx(2 * 0.0123)  # both animas spent it
    with store.transaction() as conn:
        row = sleep_state.get(conn, "kai", D, "dreams/journal")
    assert row["status"] == "failed" and row["stats"]["cost_usd"] == pytest.approx(0.0123)
    assert row["stats"]["llm_calls"] == 2
    from anima_pipeline.cli.sleep import _day_totals

    assert _day_totals(store, D, "run-budget")["cost_usd"] == pytest.approx(2 * 0.0123)


def test_one_anima_failing_does_not_stop_the_others(store: Database, settings: Settings, monkeypatch) -> None:
    fault(monkeypatch, action="fail", at="before_step", step="semantic_memory/split", day=str(D), anima="kai")
    with pytest.raises(failure_kinds.NightFailed) as failed:
        runner.run_days(store, settings, [D], run_id="run-1")
    assert [(f.anima_id, f.step) for f in failed.value.failures] == [("kai", "semantic_memory/split")]
    assert "FaultInjected" in str(failed.value)
    assert nights(store, "yue")[D]["status"] == "done"
    assert nights(store, "kai")[D]["status"] == "failed"
    faults.install(monkeypatch, "")  # no fault from here on
    runner.run_days(store, settings, [D], run_id="run-2")  # redoes only kai, from the failed step
    with store.transaction() as conn:
        redone = conn.execute(
            "SELECT DISTINCT anima_id FROM sleep_state WHERE day = %s AND run_id = 'run-2' AND step <> 'night'",
            (D,),
        ).fetchall()
        first_light = sleep_state.get(conn, "kai", D, "semantic_memory/extracted")["run_id"]
    assert [r["anima_id"] for r in redone] == ["kai"] and first_light == "run-1"


def test_every_failed_anima_is_named(store: Database, settings: Settings, monkeypatch) -> None:
    fault(monkeypatch, action="fail", at="before_step", step="dreams/journal", day=str(D))
    with pytest.raises(failure_kinds.NightFailed) as failed:
        runner.run_days(store, settings, [D], run_id="run-1")
    assert [(f.anima_id, f.step) for f in failed.value.failures] == [
        ("kai", "dreams/journal"),
        ("yue", "dreams/journal"),
    ]
    assert "kai at dreams/journal" in str(failed.value) and "yue at dreams/journal" in str(failed.value)


def test_idle_animas_are_recorded_skipped_in_one_go(store: Database, settings: Settings) -> None:
    quiet = date(2026, 12, 3)  # nobody talked; Thursday closes nothing
    results = runner.run_days(store, settings, [D, quiet], run_id="run-1")
    assert {r.day for r in results} == {D}  # no step ran on the quiet day
    for anima in ("kai", "yue"):
        night = nights(store, anima)[quiet]
        assert night["status"] == "skipped" and night["stats"] == {"idle": True}
    runner.run_days(store, settings, [quiet], run_id="run-2")  # a re-run leaves them as they are
    assert nights(store, "kai")[quiet]["run_id"] == "run-1"


def test_a_shard_records_only_its_own_idle_animas(store: Database, settings: Settings) -> None:
    quiet = date(2026, 12, 3)
    assert registry.in_shard("kai", (0, 5)) and registry.in_shard("yue", (4, 5))  # crc32 mod 5
    runner.run_days(store, settings, [quiet], run_id="shard-0", shard=(0, 5))
    assert quiet in nights(store, "kai") and quiet not in nights(store, "yue")  # yue is shard 4's
    runner.run_days(store, settings, [quiet], run_id="shard-4", shard=(4, 5))
    assert nights(store, "kai")[quiet]["run_id"] == "shard-0"
    assert nights(store, "yue")[quiet]["run_id"] == "shard-4"


def test_the_day_totals_count_only_this_runs_rows(store: Database, settings: Settings) -> None:
    from anima_pipeline.cli.sleep import _day_totals

    runner.run_days(store, settings, [D], run_id="run-1")
    first = _day_totals(store, D, "run-1")
    assert first["created"] > 0 and first["animas"] == 2
    runner.run_days(store, settings, [D], steps=["semantic_memory/merged"], force=True, run_id="run-2")
    second = _day_totals(store, D, "run-2")
    assert second["created"] == 0 and second["animas"] == 0  # light sleep was run-1's
    assert _day_totals(store, D, "run-1")["created"] == first["created"]


def test_the_migration_carries_day_markers_over_to_each_anima(empty_db_url: str, tmp_path: Path) -> None:
    """Stores written before night rows were per anima keep their nights' states."""
    import shutil

    import psycopg

    from anima_pipeline.store.migrations import SQL_DIR, migrate

    old = tmp_path / "sql"
    old.mkdir()
    for name in ("0001_archive.sql", "0002_memory.sql", "0003_layers.sql"):
        shutil.copy(SQL_DIR / name, old / name)
    migrate(empty_db_url, old)
    with psycopg.connect(empty_db_url) as conn:
        conn.execute(
            """INSERT INTO sleep_state (anima_id, day, step, status, run_id, error) VALUES
               ('*', '2026-12-02', 'night', 'failed', 'run-old', 'boom'),
               ('kai', '2026-12-02', 'conversations/cleaned', 'done', 'run-old', NULL),
               ('yue', '2026-12-02', 'semantic_memory/extracted', 'failed', 'run-old', 'boom')"""
        )
    migrate(empty_db_url)
    with psycopg.connect(empty_db_url) as conn:
        rows = conn.execute(
            "SELECT anima_id, status, run_id FROM sleep_state WHERE step = 'night' ORDER BY anima_id"
        ).fetchall()
    assert rows == [("kai", "failed", "run-old"), ("yue", "failed", "run-old")]


# ---- animas in worker processes --------------------------------------------------------------


@pytest.fixture
def eight(db: Database) -> list[str]:
    """Eight animas with the same day of talk (kai's 12-02, relabelled): enough for the offline
    engine's worker processes (pool.PROCESS_MIN), and each anima's night must come out the same."""
    import json

    from anima_pipeline.night.pool import PROCESS_MIN

    names = [f"a{i}" for i in range(PROCESS_MIN)]
    lines = []
    for line in (DATA_DIR / "unseen.archive.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["anima_id"] != "kai" or not row["conversation_id"].startswith("kai:2026-12-01"):
            continue
        for name in names:
            lines.append(
                json.dumps(
                    {
                        **row,
                        "anima_id": name,
                        "conversation_id": row["conversation_id"].replace("kai", name),
                        "message_id": row["message_id"].replace("kai", name),
                    }
                )
            )
    with db.transaction() as conn:
        audit = Audit(conn=conn, anima_id="", run_id="import-test", step="import")
        import_records(conn, parse_lines(lines, "eight"), audit, ImportStats())
    return names


def test_worker_processes_run_the_others_and_name_every_failure(
    db: Database, eight: list[str], settings: Settings, monkeypatch
) -> None:
    # the fault hook reaches the worker processes through their environment and path
    fault(monkeypatch, action="fail", at="before_step", step="semantic_memory/merged", anima="a2|a5")
    with pytest.raises(failure_kinds.NightFailed) as failed:
        runner.run_days(db, settings, [D], workers=2, run_id="run-1")
    assert [(f.anima_id, f.step) for f in failed.value.failures] == [
        ("a2", "semantic_memory/merged"),
        ("a5", "semantic_memory/merged"),
    ]
    assert "a2 at semantic_memory/merged: FaultInjected" in str(failed.value)
    assert "a5 at semantic_memory/merged: FaultInjected" in str(failed.value)
    status = {a: nights(db, a)[D]["status"] for a in eight}
    assert status == {a: "failed" if a in ("a2", "a5") else "done" for a in eight}
    faults.install(monkeypatch, "")  # no fault from here on
    runner.run_days(db, settings, [D], workers=2, run_id="run-2")  # redoes only a2 and a5
    with db.transaction() as conn:
        redone = conn.execute(
            "SELECT DISTINCT anima_id FROM sleep_state WHERE run_id = 'run-2' AND step <> 'night' ORDER BY 1"
        ).fetchall()
        contents = conn.execute(
            """SELECT anima_id, array_agg(content ORDER BY content) AS c FROM semantic_memory
               WHERE status = 'active' GROUP BY anima_id"""
        ).fetchall()
    assert [r["anima_id"] for r in redone] == ["a2", "a5"]
    # every anima had the same day, so every anima ends with the same memories
    assert len({tuple(r["c"]) for r in contents}) == 1 and len(contents) == len(eight)


def test_the_pool_is_chosen_by_engine_and_size(db: Database, settings: Settings) -> None:
    from anima_pipeline.llm.offline import OfflineEngine
    from anima_pipeline.night.pool import PROCESS_MIN, AnimaPool

    offline = AnimaPool(db, settings, OfflineEngine(), {}, workers=2, lease_s=1.0)
    assert offline.kind(PROCESS_MIN) == "processes" and offline.kind(PROCESS_MIN - 1) == "serial"
    assert AnimaPool(db, settings, OfflineEngine(), {}, workers=1, lease_s=1.0).kind(100) == "serial"

    class Remote(OfflineEngine):
        worker_processes = False  # an engine that waits on the network

    assert AnimaPool(db, settings, Remote(), {}, workers=4, lease_s=1.0).kind(2) == "threads"
