"""The store's first day: where the night's daily partitions start.

Kept in the memory database (table store_calendar, store/sql/0009_first_day.sql), one row per
store: the time of the earliest message, so every process on every host that opens the
store sees the same first day; the day is that time's local date in ANIMA_TIMEZONE. It only
moves earlier: `import_records` (`anima import`, `AnimaMemory.append`) compares the batch's
earliest message with the known value in the same transaction as the messages (one one-row
read, no scan) and moves it, audited in memory_event, when the batch holds an older one.
ANIMA_START_DATE overrides it (defs/night/partitions.py). The table's `legacy_files` column
is no longer used; an applied migration is checksummed, so it goes only with a new one."""

from __future__ import annotations

import uuid
from datetime import date, datetime
from zoneinfo import ZoneInfo

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row

from anima_pipeline.core.errors import StoreError
from anima_pipeline.store.db import CONNECT_TIMEOUT_S, Connection, read_only
from anima_pipeline.store.events import Audit
from anima_pipeline.store.migrations import NotMigrated

TABLE = "store_calendar"
_LOCK_KEY = 7_231_009  # serialises the (rare) moves: two writers never both record one
AUDIT_STEP = "first_day"  # memory_event.step of the moves made outside an import or append


def _run_id() -> str:
    return f"first-day-{uuid.uuid4().hex[:12]}"


def first_message_at(conn: Connection) -> datetime | None:
    """The recorded time of the store's earliest message, None for a store with none yet."""
    row = conn.execute("SELECT first_message_at FROM store_calendar").fetchone()
    return row["first_message_at"] if row else None


def first_day(conn: Connection, timezone: str) -> date | None:
    """The recorded first day: the local day (in `timezone`) of the earliest message."""
    at = first_message_at(conn)
    return None if at is None else at.astimezone(ZoneInfo(timezone)).date()


def move_first_message(conn: Connection, audit: Audit, at: datetime, source: str) -> bool:
    """Record `at` as the earliest message time when it is earlier than the known one (or
    none is known), audited as one event; whether it moved. A later `at` changes nothing: the
    common case costs one read of a one-row table."""
    known = first_message_at(conn)
    if known is not None and known <= at:
        return False
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_KEY,))
    known = first_message_at(conn)  # again under the lock: another writer may have moved it
    if known is not None and known <= at:
        return False
    conn.execute(
        """INSERT INTO store_calendar (first_message_at) VALUES (%s)
           ON CONFLICT (id) DO UPDATE SET first_message_at = EXCLUDED.first_message_at, updated_at = now()""",
        (at,),
    )
    audit.for_anima("").record(
        TABLE,
        "first_message_at",
        "move",
        None if known is None else {"first_message_at": known},
        {"first_message_at": at, "source": source},
    )
    return True


def note_first_day(conn: Connection, timezone: str) -> date | None:
    """Bring the recorded first day up to date with the store's earliest message (a scan, also
    catching messages written by another path than `import_records`, such as a script); the
    first day now recorded. `anima sleep` calls it once per run."""
    earliest = conn.execute("SELECT min(created_at) AS at FROM message").fetchone()
    if earliest and earliest["at"] is not None:
        audit = Audit(conn=conn, anima_id="", run_id=_run_id(), step=AUDIT_STEP)
        move_first_message(conn, audit, earliest["at"], "messages")
    return first_day(conn, timezone)


def describe_database(url: str) -> str:
    """The database a URL names, without its password: "'anima' at host:port"."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.Error:
        return "(an unreadable ANIMA_DATABASE_URL)"
    where = str(params.get("host") or "localhost")
    if params.get("port"):
        where += f":{params['port']}"
    return f"{params.get('dbname', '?')!r} at {where}"


def read_first_day(url: str, timezone: str) -> date | None:
    """The store's first day as the database at `url` has it now, None when none is recorded
    (the Dagster definitions when they load, the schedule at each tick, the freshness check
    when it runs). One read-only transaction on one connection: nothing is started, migrated
    or written (README, "Where the partitions start"). An unreachable or unmigrated database
    is a StoreError naming it: the partitions are never guessed from a server that is set."""
    try:
        with psycopg.connect(
            url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S, row_factory=dict_row
        ) as conn:
            with conn.transaction():
                read_only(conn)
                return first_day(conn, timezone)
    except psycopg.errors.UndefinedTable:
        raise NotMigrated(
            f"the memory database {describe_database(url)} has no {TABLE} table (the store's first "
            "day): run `anima db migrate` (or `anima import`) first, or check ANIMA_DATABASE_URL"
        ) from None
    except psycopg.OperationalError as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StoreError(
            f"cannot read the store's first day (where the night's partitions start): the memory "
            f"database {describe_database(url)} cannot be reached ({reason}); start it or fix "
            "ANIMA_DATABASE_URL, or set ANIMA_START_DATE"
        ) from None
