"""Numbered SQL migrations (sql/0001_*.sql …), applied in order, each in its own transaction.

An applied migration's checksum is recorded; if its file changes later we refuse to run,
because the database would no longer match what the code reads from the files.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import psycopg

from anima_pipeline.errors import StoreError
from anima_pipeline.packaged import top_level

SQL_DIR = top_level("sql")
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


def load_migrations(sql_dir: Path = SQL_DIR) -> list[Migration]:
    if not sql_dir.is_dir():
        raise MigrationError(f"migrations folder not found: {sql_dir}")
    found: list[Migration] = []
    for path in sorted(sql_dir.glob("*.sql")):
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


def pending(url: str, sql_dir: Path = SQL_DIR) -> list[str]:
    """The migrations not applied to the database at `url`, creating nothing: what a read-only
    command checks instead of migrating (`anima status`, `recall`, `export`)."""
    with psycopg.connect(url, autocommit=True) as conn:
        found = conn.execute("SELECT to_regclass('schema_migration') AS t").fetchone()
        if found is None or found[0] is None:
            applied: set[int] = set()
        else:
            applied = {v for (v,) in conn.execute("SELECT version FROM schema_migration")}
    return [m.name for m in load_migrations(sql_dir) if m.version not in applied]


def migrate(url: str, sql_dir: Path = SQL_DIR) -> list[str]:
    """Apply pending migrations; return the names applied (empty when up to date)."""
    migrations = load_migrations(sql_dir)
    applied_now: list[str] = []
    with psycopg.connect(url, autocommit=True) as conn:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
            # Under the lock: two processes migrating a fresh database at once would otherwise
            # race CREATE TABLE IF NOT EXISTS into a unique violation on pg_type.
            conn.execute(
                """CREATE TABLE IF NOT EXISTS schema_migration (
                       version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,
                       applied_at timestamptz NOT NULL DEFAULT now())"""
            )
            applied = {
                v: (n, c) for v, n, c in conn.execute("SELECT version, name, checksum FROM schema_migration")
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
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
                if conn.execute("SELECT 1 FROM schema_migration WHERE version = %s", (m.version,)).fetchone():
                    continue  # another process applied it while we waited
                try:
                    conn.execute(m.sql)
                except psycopg.Error as exc:
                    raise MigrationError(f"{m.name}: {exc}") from exc
                conn.execute(
                    "INSERT INTO schema_migration (version, name, checksum) VALUES (%s, %s, %s)",
                    (m.version, m.name, m.checksum),
                )
            applied_now.append(m.name)
    return applied_now
