"""Opening the store: resolve the URL (a server, or the embedded default), migrate, pool.

One `Database` per process. Repositories take a psycopg connection inside a transaction
that the caller owns, so a step's writes commit or roll back together. A one-shot read-only
command (status, recall, export) takes `OneConnection` instead: the connection that checked
the migrations serves the command, with no pool (no second connection, no pool threads).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Self

import psycopg
from psycopg.rows import DictRow, dict_row

from anima_pipeline.config import Settings
from anima_pipeline.core.errors import StoreError
from anima_pipeline.store import embedded
from anima_pipeline.store.migrations import NotMigrated, migrate, pending

if TYPE_CHECKING:  # psycopg_pool only where a pool is opened: not at a one-shot command's start
    from psycopg_pool import ConnectionPool

# every connection of the pool returns rows as dicts (dict_row below)
Connection = psycopg.Connection[DictRow]


def one(cursor: psycopg.Cursor[DictRow]) -> DictRow:
    """The row of a statement that always returns one (an aggregate, INSERT ... RETURNING, a
    row the transaction holds locked): its absence is a store fault, not a None to check."""
    row = cursor.fetchone()
    if row is None:
        raise StoreError("the statement returned no row")
    return row


def db_now(conn: Connection) -> datetime:
    """The database's clock (the transaction's start): what every timestamp a step writes uses."""
    return one(conn.execute("SELECT now() AS now"))["now"]


def read_only(conn: Connection) -> None:
    """Make the current transaction read-only (recall: a query can never write)."""
    conn.execute("SET TRANSACTION READ ONLY")


# How long a caller waits for a connection, and a connection attempt for the server: bounded,
# so a night whose database went away fails in seconds instead of queueing for minutes.
POOL_TIMEOUT_S = 10.0
CONNECT_TIMEOUT_S = 10


class Store(ABC):
    """What a command holds of the store: its `url`, `transaction()` and `close()`; a `with`
    block closes it. `Database` (a pool) and `OneConnection` (one plain connection) differ only
    in where the connection comes from."""

    url: str

    @abstractmethod
    def transaction(self) -> AbstractContextManager[Connection]:
        """A connection inside one transaction: committed on success, rolled back on error."""

    @abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Database(Store):
    """The store behind a pool. `home` names the embedded server's home when the store is the
    embedded default (`embedded_home`): a transaction asked after `anima db stop` stopped that
    server fails at once (`embedded.StoppedUnderfoot`) instead of waiting POOL_TIMEOUT_S."""

    def __init__(self, url: str, *, max_size: int = 8, home: Path | None = None) -> None:
        from psycopg_pool import ConnectionPool

        self.url = url
        self.home = home
        self.pool: ConnectionPool[Connection] = ConnectionPool(
            url,
            connection_class=psycopg.Connection[DictRow],
            min_size=1,
            max_size=max_size,
            kwargs={"row_factory": dict_row, "connect_timeout": CONNECT_TIMEOUT_S},
            timeout=POOL_TIMEOUT_S,
            open=True,
        )

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A connection inside one transaction: committed on success, rolled back on error."""
        if self.home is not None and embedded.stopped_by_operator(self.home):
            raise embedded.StoppedUnderfoot(
                f"the memory database was stopped (anima db stop) while this command ran "
                f"({embedded.pgdata_dir(self.home)}); it is not started again behind the operator's "
                "back: run the command again to start it (a night carries on where it stopped)"
            )
        with self.pool.connection() as conn, conn.transaction():
            yield conn

    def close(self) -> None:
        self.pool.close()


def embedded_home(settings: Settings) -> Path | None:
    """The embedded server's home when `settings` name no server (ANIMA_DATABASE_URL), else None."""
    return None if settings.database_url else settings.home


def resolve_url(settings: Settings) -> str:
    """ANIMA_DATABASE_URL when set (start nothing), else the embedded server under ANIMA_HOME."""
    if settings.database_url:
        return settings.database_url
    return embedded.ensure_running(settings.home)


def running_url(settings: Settings) -> str | None:
    """Where the store is served now, starting nothing: ANIMA_DATABASE_URL when set, else the
    embedded server under ANIMA_HOME when it runs, else None (loading the Dagster definitions,
    README "Where the partitions start")."""
    if settings.database_url:
        return settings.database_url
    return embedded.running_url(settings.home)


def open_database(settings: Settings, *, run_migrations: bool = True) -> Database:
    """The store, migrated first, behind a pool (the service, the night, the writing commands)."""
    url = resolve_url(settings)
    if run_migrations:
        migrate(url)
    return Database(url, home=embedded_home(settings))


class OneConnection(Store):
    """What `Database` offers a one-shot read-only command (`url`, `transaction()`, `close()`),
    on one plain connection: opening a pool costs a second connection and its threads, more
    than the command's own queries. Transactions run one after another on it."""

    def __init__(self, url: str, conn: Connection) -> None:
        self.url = url
        self.conn = conn

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """The connection inside one transaction: committed on success, rolled back on error."""
        with self.conn.transaction():
            yield self.conn

    def close(self) -> None:
        self.conn.close()


def open_read_only(settings: Settings) -> OneConnection:
    """The store for a read-only command (status, recall, export), on one connection. It never
    migrates a server's database (ANIMA_DATABASE_URL): one with pending migrations is
    NotMigrated, naming them, and nothing is created. The embedded store is this program's own
    database, created under ANIMA_HOME by `ensure_running`: it is brought up to date by any
    command."""
    url = resolve_url(settings)
    # autocommit: each `transaction()` is its own BEGIN ... COMMIT, as on a pooled connection
    conn = psycopg.connect(url, autocommit=True, row_factory=dict_row, connect_timeout=CONNECT_TIMEOUT_S)
    try:
        if settings.database_url:
            missing = pending(conn)
            if missing:
                raise NotMigrated(
                    f"the memory database is not migrated ({len(missing)} pending: {', '.join(missing[:3])}"
                    f"{', …' if len(missing) > 3 else ''}); a read-only command changes nothing: run "
                    "`anima db migrate` (or `anima import`) first, or check ANIMA_DATABASE_URL"
                )
        else:
            migrate(conn)
    except BaseException:
        conn.close()
        raise
    return OneConnection(url, conn)


def connect(url: str, *, autocommit: bool = False) -> Connection:
    """One plain connection with dict rows, outside any pool: a second store read beside this
    one (a shadow, replay/), a server's admin database, or a thread of its own (the night's
    heartbeat). The caller closes it (a `with` block)."""
    return psycopg.connect(url, autocommit=autocommit, row_factory=dict_row)


def anima_lock(conn: Connection, anima_id: str) -> None:
    """Serialise writers of one anima (a schedule tick during a backfill) until the transaction ends."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"anima:{anima_id}",))


def try_anima_lock(conn: Connection, anima_id: str) -> bool:
    """`anima_lock` if no other writer of the anima holds it now (a night's step holds it for
    the whole step, model calls included), else False at once: for a chat turn, which must not
    wait for a night."""
    return bool(
        one(conn.execute("SELECT pg_try_advisory_xact_lock(hashtext(%s)) AS ok", (f"anima:{anima_id}",)))[
            "ok"
        ]
    )


def forget_lock(conn: Connection, *anima_ids: str, shared: bool = False) -> None:
    """A forget of an anima (exclusive) against the sessions read for a working context and the
    vectors a batch is about to keep (shared), until the transaction ends: neither writes from
    what a forget is hiding or erasing; sessions still compact side by side (docs/forget.md).
    Several animas are locked in one statement, in a fixed order."""
    lock = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
    conn.execute(
        f"SELECT {lock}(hashtext('forget:' || a)) FROM unnest(%s::text[]) AS a ORDER BY a",
        (sorted(set(anima_ids)),),
    )
