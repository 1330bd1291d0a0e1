"""kill -9 of `anima sleep --anima X --anima Y --from D1 --to D2` (a real subprocess, through
Dagster) at three points of a multi-anima, multi-day run, then the same command again: it
exits 0 and the store equals the store of an uninterrupted run of that command (same active
contents, anchors, narratives, self blocks, summaries, dreams, step states, and no duplicate
in the audit log).

The points are set with the failpoint hook of testkit/faults.py (`faults.env`: ANIMA_FAULT and
the hook's entry point for the `anima` process), which makes the night hang there and writes
the ready file, so the kill is deterministic:
- in_step: inside a deep-sleep step's transaction, after all its writes, before the commit;
- before_step: between two steps of a later day;
- night_end: every step of an anima's night committed, the night not yet marked done.
The lease is short (ANIMA_NIGHT_LEASE_S=2) so the re-run takes the dead run's night over
after two seconds instead of thirty. The killed run is a real process; the uninterrupted run and
the re-runs are the CLI in this process (`invoke_cli`): what they prove is the store.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import date, timedelta
from pathlib import Path

import psycopg
import pytest
from psycopg.rows import dict_row

from anima_pipeline.store.archive import ImportStats, import_records, parse_lines
from anima_pipeline.store.db import Database
from anima_pipeline.store.events import Audit
from anima_pipeline_tests.conftest import CLI, _with_dbname, cli_env, invoke_cli, run_cli
from testkit import faults

SAMPLE = Path(__file__).resolve().parents[2] / "anima_pipeline" / "sample" / "week.archive.jsonl"
FIRST, LAST = date(2026, 11, 16), date(2026, 11, 17)
# aria talks on every day of the sample week; bo is the same week one day later; cy is the
# third anima of the store, left out of the command (--anima) and so never touched.
ANIMAS = {"aria": 0, "bo": 1, "cy": 0}
COMMAND = ["sleep", "--anima", "aria", "--anima", "bo", "--from", str(FIRST), "--to", str(LAST)]


def archive_lines() -> list[str]:
    """The bundled synthetic week, relabelled per anima and shifted by its offset in days,
    cut to the days the command sleeps."""
    out = []
    for line in SAMPLE.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        for anima, shift in ANIMAS.items():
            r = dict(row)
            at = row["created_at"]
            day = date.fromisoformat(at[:10]) + timedelta(days=shift)
            if day > LAST:
                continue
            r["created_at"] = day.isoformat() + at[10:]
            r["anima_id"] = anima
            r["conversation_id"] = f"{anima}:{row['conversation_id']}"
            r["message_id"] = f"{anima}:{row['message_id']}"
            out.append(json.dumps(r, ensure_ascii=False))
    return out


@pytest.fixture(scope="module")
def make_store(pg_admin_url: str, template_db: str) -> Iterator[Callable[[], str]]:
    """Fresh imported databases (the killed run's and the uninterrupted one's)."""
    import uuid

    made: list[str] = []

    def make(lines: list[str] | None = None) -> str:
        name = f"anima_k_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(pg_admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
        made.append(name)
        url = _with_dbname(pg_admin_url, name)
        with Database(url, max_size=1) as db, db.transaction() as conn:
            audit = Audit(conn=conn, anima_id="", run_id="import", step="import")
            import_records(conn, parse_lines(lines or archive_lines(), "week"), audit, ImportStats())
        return url

    yield make
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        for name in made:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def env_for(url: str, home: Path, **extra: str) -> dict[str, str]:
    return cli_env(
        home,
        url,
        ANIMA_ENGINE="offline",
        ANIMA_NIGHT_LEASE_S="2",
        ANIMA_START_DATE=str(FIRST),  # imported here without `anima import`, which records it
        **extra,
    )


def kill_at(args: list[str], env: dict[str, str], ready: Path) -> None:
    """Start `anima` and kill -9 it once it hangs at the fault point."""
    proc = subprocess.Popen(
        [*CLI, *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300
        while not ready.exists():
            if proc.poll() is not None:
                pytest.fail(
                    f"anima exited ({proc.returncode}) before the fault point: {proc.stderr.read()[-3000:]}"
                )
            if time.monotonic() > deadline:
                pytest.fail("the fault point was not reached in 300 s")
            time.sleep(0.1)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL


_F_ID = re.compile(r"\bf-\d+\b")


def _no_ids(value: object, key: str = "") -> object:
    """Memory ids differ between two runs (a rolled-back insert still uses up its id): in
    JSON, numbers under a key naming ids, and `f-N` in text, are masked."""
    if isinstance(value, dict):
        return {k: _no_ids(v, k) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return [_no_ids(v, key) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and "id" in key:
        return "#"
    if isinstance(value, str):
        return _F_ID.sub("f-#", value)
    return value


def snapshot(url: str) -> dict[str, list]:
    """What a night leaves, without ids, times and run ids that differ between two runs."""
    with psycopg.connect(url, row_factory=dict_row) as conn:

        def rows(sql: str) -> list:
            return sorted(
                json.dumps(_no_ids(dict(r)), default=str, ensure_ascii=False) for r in conn.execute(sql)
            )

        return {
            "memories": rows(
                """SELECT m.anima_id, m.type, m.content, m.status, m.pinned, m.confidence, m.source_sessions,
                          m.observed_at, m.valid_from, m.valid_until, m.deprecated_reason,
                          s.content AS successor, m.reference_count
                   FROM semantic_memory m LEFT JOIN semantic_memory s ON s.id = m.superseded_by"""
            ),
            "anchors": rows(
                """SELECT anima_id, conversation_id, occurred_at, emotion, valence, arousal, intensity,
                          trigger, note, status FROM emotional_anchor"""
            ),
            "narratives": rows(
                """SELECT anima_id, title, narrative, significance, occurred_from, occurred_until,
                          source_sessions, cardinality(source_memory_ids) AS sources, status
                   FROM autobiographical_memory"""
            ),
            "self_blocks": rows("SELECT anima_id, name, content, version FROM self_block"),
            "summaries": rows(
                "SELECT anima_id, level, period_start, period_end, content FROM temporal_summary"
            ),
            "dreams": rows(
                """SELECT anima_id, day, aha_moments, creative_connections, confidence_updates,
                          next_session_actions, bank_suggestions FROM dream_journal"""
            ),
            "references": rows("SELECT anima_id, count(*) FROM memory_reference GROUP BY anima_id"),
            "conversations": rows("SELECT anima_id, id FROM conversation"),
            "states": rows("SELECT anima_id, day, step, status FROM sleep_state"),
            "events": rows(
                """SELECT anima_id, table_name, op, step, day, count(*) FROM memory_event
                   WHERE step <> 'import' GROUP BY 1, 2, 3, 4, 5"""
            ),
        }


@pytest.fixture(scope="module")
def uninterrupted(make_store, tmp_path_factory) -> dict[str, list]:
    url = make_store()
    done = invoke_cli(COMMAND, env_for(url, tmp_path_factory.mktemp("clean")))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return snapshot(url)


POINTS = {
    "mid_transaction": "at=in_step,step=semantic_memory/merged,day=2026-11-17,anima=bo",
    "between_steps": "at=before_step,step=semantic_memory/extracted,day=2026-11-17,anima=aria",
    "night_end": "at=night_end,day=2026-11-16,anima=aria",
}


@pytest.mark.parametrize("point", list(POINTS))
def test_kill_9_then_the_same_command_gives_the_uninterrupted_store(
    point: str, make_store, uninterrupted: dict[str, list], tmp_path: Path
) -> None:
    url = make_store()
    ready = tmp_path / "ready"
    kill_at(
        COMMAND,
        env_for(url, tmp_path, **faults.env(f"action=hang,{POINTS[point]}", ready)),
        ready,
    )
    with psycopg.connect(url) as conn:  # the kill left a night running that nobody renews
        running = conn.execute(
            "SELECT count(*) FROM sleep_state WHERE step = 'night' AND status = 'running'"
        ).fetchone()
    assert running[0] >= 1
    again = invoke_cli(COMMAND, env_for(url, tmp_path))
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    after = snapshot(url)
    for part, expected in uninterrupted.items():
        assert after[part] == expected, part
    assert after["memories"] and after["summaries"] and after["self_blocks"]
    nights = [json.loads(s) for s in after["states"]]
    assert {n["status"] for n in nights if n["step"] == "night"} <= {"done", "skipped"}
    assert {n["anima_id"] for n in nights} == {"aria", "bo"}  # cy, left out by --anima, untouched


# ---- with worker processes -------------------------------------------------------------------

WORKERS = [f"w{i}" for i in range(8)]  # pool.PROCESS_MIN: the offline engine uses worker processes


def same_day_lines() -> list[str]:
    """aria's first day of the sample week, once per worker anima."""
    out = []
    for line in SAMPLE.read_text(encoding="utf-8").splitlines():
        if line.strip() and json.loads(line)["created_at"].startswith(str(FIRST)):
            row = json.loads(line)
            for name in WORKERS:
                r = {
                    **row,
                    "anima_id": name,
                    "conversation_id": f"{name}:{row['conversation_id']}",
                    "message_id": f"{name}:{row['message_id']}",
                }
                out.append(json.dumps(r, ensure_ascii=False))
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat")
    return not (state.exists() and state.read_text().split(")")[-1].split()[0] == "Z")


def test_kill_9_leaves_no_worker_process_and_the_same_command_carries_on(make_store, tmp_path: Path) -> None:
    from anima_pipeline.night.pool import PROCESS_MIN

    assert len(WORKERS) >= PROCESS_MIN
    url = make_store(same_day_lines())
    ready = tmp_path / "ready"
    command = ["sleep", "--day", str(FIRST)]
    hang = "action=hang,at=in_step,step=semantic_memory/merged,anima=w3"
    env = env_for(url, tmp_path, ANIMA_WORKERS="2", **faults.env(hang, ready))
    kill_at(command, env, ready)
    worker = int(ready.read_text().split("pid")[1])
    deadline = time.monotonic() + 15
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _alive(worker), "the worker process outlived the killed night"
    again = invoke_cli(command, env_for(url, tmp_path, ANIMA_WORKERS="2"))
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    # every anima had the same day: the one killed mid-transaction ends like the others
    per_anima: dict[str, list] = {}
    for part, found in snapshot(url).items():
        for row in found:
            values = json.loads(row)
            anima_id = values.pop("anima_id", None)
            if isinstance(anima_id, str):
                text = json.dumps(values, ensure_ascii=False).replace(anima_id, "<anima>")
                per_anima.setdefault(anima_id, []).append((part, text))
    assert sorted(per_anima) == WORKERS
    assert all(sorted(v) == sorted(per_anima["w0"]) for v in per_anima.values())


def test_a_failed_night_prints_one_line_naming_the_step_and_cause(make_store, tmp_path: Path) -> None:
    url = make_store()
    fault = f"action=fail,at=in_step,step=semantic_memory/merged,day={FIRST},anima=aria"
    result = run_cli(
        ["sleep", "--anima", "aria", "--day", str(FIRST)],
        env_for(url, tmp_path, **faults.env(fault)),
        timeout=300,
    )
    assert result.returncode == 1
    err = result.stderr.strip()
    assert "Traceback" not in err and "STEP_FAILURE" not in err and 'File "' not in err, err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "semantic_memory/merged" in lines[0] and "aria" in lines[0] and "FaultInjected" in lines[0], err
