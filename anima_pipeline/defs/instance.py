"""Dagster's own storage (run history, event log, schedules), chosen by the environment.

dagster.yaml cannot say "PostgreSQL if DAGSTER_PG_URL is set, else SQLite": an `env:`
reference to an unset variable is an error when the instance loads. So dagster.yaml names
this module's `AnimaDagsterStorage` as its storage, and the choice happens each time an
instance loads (webserver, daemon, run workers, `anima sleep`), from the environment:

- DAGSTER_PG_URL set: dagster-postgres on that database (a postgresql:// URL is given the
  psycopg2 driver, see `sqlalchemy_pg_url`). It must not be the memory store's database
  (ANIMA_DATABASE_URL): the two are kept apart, and that is checked.
- otherwise: SQLite under $DAGSTER_HOME/storage, exactly where Dagster puts it when no
  storage is configured; with DAGSTER_HOME unset (`dagster dev` with a temporary instance),
  under $ANIMA_HOME/dagster/storage, so run history survives the session.

The one dagster.yaml is this package's (defs/dagster.yaml, package data, so a checkout and
a wheel read the same file). The checkout's top-level dagster.yaml is a link to it, because
`dg dev` with DAGSTER_HOME unset reads ./dagster.yaml only (and then stores under
$ANIMA_HOME/dagster/storage); the CLI's instance (`get_instance`) is its home (DAGSTER_HOME,
or $ANIMA_HOME/dagster) configured by that same file, unless the home holds a dagster.yaml of
its own. Nothing is copied, so a run launched by `anima sleep` shows up in `dg dev` and vice
versa, and `dg dev` has no second dagster.yaml to warn about. For Dagster's own commands
with DAGSTER_HOME set to the CLI's default home (what `anima demo` prints: no temporary
instance in the current folder), `link_template` makes that home's dagster.yaml a link to
the template.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg

# A storage chosen when the instance loads has to subclass these: Dagster exports no public
# base for a custom `storage:` class in dagster.yaml (checked with 1.13.27).
from dagster._core.storage.base_storage import DagsterStorage
from dagster._serdes import ConfigurableClass, ConfigurableClassData
from psycopg.conninfo import conninfo_to_dict

from anima_pipeline.core.errors import ConfigError

# Dagster reads an instance's dagster.yaml from a folder (config_dir): the package is installed
# as files (a checkout, a wheel), so its resource is a path of the file system
DAGSTER_YAML_PATH = Path(str(resources.files("anima_pipeline.defs") / "dagster.yaml"))
DAGSTER_YAML = DAGSTER_YAML_PATH.read_text()


class StorageConfigError(ConfigError):
    pass


def sqlalchemy_pg_url(url: str) -> str:
    """DAGSTER_PG_URL for dagster-postgres, with the psycopg2 driver named explicitly.

    dagster-postgres hands the URL to SQLAlchemy, and SQLAlchemy 2.1 maps a bare
    postgresql:// to psycopg 3, under which dagster-postgres' `NOTIFY run_events, %(id)s`
    fails (server-side binding: syntax error at or near "$1"). psycopg2 (a dependency of
    dagster-postgres) interpolates client-side, so the storage works."""
    for scheme in ("postgresql://", "postgres://"):
        if url.startswith(scheme):
            return "postgresql+psycopg2://" + url[len(scheme) :]
    if "://" not in url:  # libpq keyword form: host=... dbname=...
        p = conninfo_to_dict(url)
        auth = quote(str(p.get("user", "")), safe="")
        if p.get("password"):
            auth += ":" + quote(str(p["password"]), safe="")
        host = str(p.get("host") or "localhost") + (f":{p['port']}" if p.get("port") else "")
        return f"postgresql+psycopg2://{auth + '@' if auth else ''}{host}/{quote(str(p.get('dbname', '')), safe='')}"
    return url


def _libpq_url(url: str) -> str:
    head, sep, rest = url.partition("://")
    return f"{head.split('+')[0]}{sep}{rest}" if sep else url


def _database_key(url: str, var: str) -> tuple:
    """(host, port, database) of a PostgreSQL URL or libpq string; a StorageConfigError naming
    `var` when it cannot be parsed (the "never the memory database" guard must not guess)."""
    try:
        p = conninfo_to_dict(_libpq_url(url))
    except psycopg.ProgrammingError as exc:
        raise StorageConfigError(f"{var} is not a PostgreSQL URL or connection string: {exc}") from exc
    return (p.get("host") or "localhost", str(p.get("port") or 5432), p.get("dbname") or p.get("user"))


def _same_database(a: str, b: str) -> bool:
    return _database_key(a, "DAGSTER_PG_URL") == _database_key(b, "ANIMA_DATABASE_URL")


def sqlite_base_dir(env: Mapping[str, str] | None = None) -> Path:
    e = os.environ if env is None else env
    if e.get("DAGSTER_HOME"):
        return Path(e["DAGSTER_HOME"]).expanduser() / "storage"
    return Path(e.get("ANIMA_HOME") or "~/.anima").expanduser() / "dagster" / "storage"


def storage_choice(env: dict[str, str] | None = None) -> tuple[str, dict[str, Any]]:
    """("postgres", {"postgres_url": ...}) or ("sqlite", {"base_dir": ...}) for this environment."""
    e = os.environ if env is None else env
    pg = (e.get("DAGSTER_PG_URL") or "").strip()
    if pg:
        memory = (e.get("ANIMA_DATABASE_URL") or "").strip()
        if memory and _same_database(pg, memory):
            raise StorageConfigError(
                "DAGSTER_PG_URL and ANIMA_DATABASE_URL name the same database; Dagster's storage must be "
                "a separate database (e.g. CREATE DATABASE dagster on the same server)"
            )
        return "postgres", {"postgres_url": sqlalchemy_pg_url(pg)}
    return "sqlite", {"base_dir": str(sqlite_base_dir(e))}


def batch_sqlite_storage(base_dir: str, inst_data: ConfigurableClassData) -> DagsterStorage:
    """Dagster's SQLite storage with an event log that writes a batch of materializations in
    two transactions (the run's file, the cross-run index) instead of two per event: Dagster's
    SQLite event log has no batch write of its own (dagster-postgres has), and a quiet night
    reports its 13 quiet steps as one batch (night/assets.py). Checked with 1.13.27."""
    # no public export of the SQLite storages (checked with 1.13.27)
    from dagster import DagsterEventType
    from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
    from dagster._core.storage.sqlite_storage import DagsterSqliteStorage, _event_logs_directory

    class BatchSqliteEventLogStorage(SqliteEventLogStorage):
        def store_event_batch(self, events) -> None:
            if (
                len({e.run_id for e in events}) != 1
                or any(e.dagster_event_type != DagsterEventType.ASSET_MATERIALIZATION for e in events)
                or any(e.dagster_event.asset_key is None for e in events)
            ):
                super().store_event_batch(events)
                return
            statements = [self.prepare_insert_event(e) for e in events]
            with self.run_connection(events[0].run_id) as conn:
                for statement in statements:
                    conn.execute(statement)
            with self.index_transaction() as conn:  # what store_event mirrors there, per event
                ids: list[int] = []
                for statement in statements:
                    with conn.execute(statement) as result:  # SQLAlchemy 2's CursorResult
                        ids.append(result.lastrowid)  # SQLite: the new row's id, its primary key
                self._store_asset_event_tags(conn, events, ids)
                # the asset table holds each key's latest event: only the batch's last per key
                # (as dagster-postgres' batch write does)
                latest = {e.dagster_event.asset_key: (e, i) for e, i in zip(events, ids, strict=True)}
                for event, event_id in latest.values():
                    self._store_asset_event(conn, event, event_id)

    storage = DagsterSqliteStorage(base_dir, inst_data=inst_data)
    storage._event_log_storage.dispose()
    storage._event_log_storage = BatchSqliteEventLogStorage(_event_logs_directory(base_dir))
    return storage


class AnimaDagsterStorage(DagsterStorage, ConfigurableClass):
    """A storage 'class' for dagster.yaml that builds the real storage the environment asks
    for: DagsterPostgresStorage or DagsterSqliteStorage (see the module docstring). It is a
    DagsterStorage only for Dagster's type check when loading; it is never instantiated."""

    @classmethod
    def config_type(cls) -> dict:
        return {}

    @classmethod
    def from_config_value(  # type: ignore[override]  # builds another class, as dagster.yaml allows
        cls, inst_data: ConfigurableClassData, config_value: Any
    ) -> DagsterStorage:
        kind, config = storage_choice()
        if kind == "postgres":
            from dagster_postgres import DagsterPostgresStorage

            return DagsterPostgresStorage.from_config_value(inst_data, config)  # type: ignore[arg-type]
        Path(config["base_dir"]).mkdir(parents=True, exist_ok=True)
        return batch_sqlite_storage(config["base_dir"], inst_data)


def dagster_home(env: dict[str, str] | None = None) -> Path:
    """DAGSTER_HOME (or $ANIMA_HOME/dagster when unset), created."""
    e = os.environ if env is None else env
    home = Path(e.get("DAGSTER_HOME") or Path(e.get("ANIMA_HOME") or "~/.anima") / "dagster").expanduser()
    home.mkdir(parents=True, exist_ok=True)
    return home


def config_dir(home: Path) -> Path:
    """Where the instance of `home` reads its dagster.yaml: the home's own when it has one
    (a deployment's), else the project's template."""
    return home if (home / "dagster.yaml").exists() else DAGSTER_YAML_PATH.parent


def link_template(home: Path) -> bool:
    """Make `home/dagster.yaml` a link to the template when the home has none, so Dagster's own
    commands run with DAGSTER_HOME=home (no temporary instance in the current folder, which is
    site-packages for a wheel) read what the CLI's instance reads; True when the home reads the
    template now. A link, not a copy: an upgrade's template is read at once (README, "The Dagster UI")."""
    target = home / "dagster.yaml"
    if target.is_symlink() or target.exists():
        return target.resolve() == DAGSTER_YAML_PATH.resolve()
    try:
        home.mkdir(parents=True, exist_ok=True)
        target.symlink_to(DAGSTER_YAML_PATH)
    except OSError:  # a file system without links: the caller says how instead
        return False
    return True


def get_instance(env: dict[str, str] | None = None):
    """The persistent Dagster instance the CLI records its runs in (see dagster_home)."""
    from dagster import DagsterInstance

    # DagsterInstance.get() reads DAGSTER_HOME from the environment only; an instance for a
    # given home configured by another folder's dagster.yaml needs InstanceRef (no public
    # export, docs/decisions.md "Dagster internals")
    from dagster._core.instance.ref import InstanceRef

    home = dagster_home(env)
    return DagsterInstance.from_ref(InstanceRef.from_dir(str(home), config_dir=str(config_dir(home))))
