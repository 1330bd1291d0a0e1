"""Numbered SQL migrations (store/sql/0001_*.sql …, package data), applied in order, each in
its own transaction.

An applied migration's checksum is recorded; if its file changes later we refuse to run,
because the database would no longer match what the code reads from the files.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

import psycopg
from psycopg.rows import tuple_row

from anima_pipeline.core.errors import StoreError

SQL_DIR = resources.files("anima_pipeline.store") / "sql"  # the same in a checkout and a wheel
_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
_LOCK_KEY = 7_231_001  # one advisory lock id for "migrating", so two processes never apply twice


class MigrationError(StoreError):
    pass


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def load_migrations(sql_dir: Traversable = SQL_DIR) -> list[Migration]:
    if not sql_dir.is_dir():
        raise MigrationError(f"migrations folder not found: {sql_dir}")
    found: list[Migration] = []
    for path in sorted((p for p in sql_dir.iterdir() if p.name.endswith(".sql")), key=lambda p: p.name):
        m = _NAME.match(path.name)
        if not m:
            raise MigrationError(f"{path}: a migration file is named NNNN_name.sql")
        found.append(Migration(int(m.group(1)), path.name, path.read_text()))
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise MigrationError(f"{sql_dir}: two migrations share a version number")
    return found


class NotMigrated(MigrationError):
    """A read-only command found a database whose migrations are not (all) applied."""


def pending(target: str | psycopg.Connection[Any], sql_dir: Traversable = SQL_DIR) -> list[str]:
    """The migrations not applied to the database at `target` (a URL, or an open autocommit
    connection a one-shot command goes on using), creating nothing: what a read-only command
    checks instead of migrating (`anima status`, `recall`, `export`)."""
    with _connected(target) as conn:
        cur = conn.cursor(row_factory=tuple_row)
        found = cur.execute("SELECT to_regclass('schema_migration') AS t").fetchone()
        if found is None or found[0] is None:
            applied: set[int] = set()
        else:
            applied = {v for (v,) in cur.execute("SELECT version FROM schema_migration")}
    return [m.name for m in load_migrations(sql_dir) if m.version not in applied]


@contextmanager
def _connected(target: str | psycopg.Connection[Any]) -> Iterator[psycopg.Connection[Any]]:
    """A connection of our own for a URL (closed after), or the caller's, left open."""
    if not isinstance(target, str):
        yield target
        return
    with psycopg.connect(target, autocommit=True) as conn:
        yield conn


def migrate(target: str | psycopg.Connection[Any], sql_dir: Traversable = SQL_DIR) -> list[str]:
    """Apply pending migrations; return the names applied (empty when up to date). `target`
    is a URL or an open autocommit connection (left open)."""
    migrations = load_migrations(sql_dir)
    applied_now: list[str] = []
    with _connected(target) as conn:
        cur = conn.cursor(row_factory=tuple_row)
        with conn.transaction():
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            # Under the lock: two processes migrating a fresh database at once would otherwise
            # race CREATE TABLE IF NOT EXISTS into a unique violation on pg_type.
            cur.execute(
                """CREATE TABLE IF NOT EXISTS schema_migration (
                       version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,
                       applied_at timestamptz NOT NULL DEFAULT now())"""
            )
            applied = {
                v: (n, c) for v, n, c in cur.execute("SELECT version, name, checksum FROM schema_migration")
            }
        by_version = {m.version: m for m in migrations}
        for version, (name, checksum) in sorted(applied.items()):
            m = by_version.get(version)
            if m is None:
                raise MigrationError(f"migration {name} is applied but its file is missing from {sql_dir}")
            if m.checksum != checksum:
                raise MigrationError(
                    f"migration {name} was applied but {sql_dir / m.name} has changed since; "
                    "restore the file and add a new numbered migration instead"
                )
        for m in migrations:
            if m.version in applied:
                continue
            with conn.transaction():
                cur.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
                if cur.execute("SELECT 1 FROM schema_migration WHERE version = %s", (m.version,)).fetchone():
                    continue  # another process applied it while we waited
                try:
                    cur.execute(m.sql)
                except psycopg.Error as exc:
                    raise MigrationError(f"{m.name}: {exc}") from exc
                cur.execute(
                    "INSERT INTO schema_migration (version, name, checksum) VALUES (%s, %s, %s)",
                    (m.version, m.name, m.checksum),
                )
            applied_now.append(m.name)
    return applied_now
