"""The queries of replays (anima_pipeline/replay/: shadow, diff, promote): a shadow store's
description on its database, the consistent read a shadow is copied under, and what a diff and
a promote read of a store (live or shadow). Each takes the connection of the store it reads;
the caller owns the transaction."""

from __future__ import annotations

import json
from datetime import date
from typing import Any

from psycopg import sql

from anima_pipeline.store import catalog
from anima_pipeline.store.db import Connection, one

# the layers a diff counts beside memories, with which of their rows count (store/catalog.py)
_COUNTED = catalog.counted()

# ---- a shadow's description (the admin connection, to the server's `postgres` database) ----


def shadow_description(admin: Connection, dbname: str) -> dict[str, Any] | None:
    """What a shadow is, kept as a JSON comment on its database ({} when it has none); None
    when there is no database of that name."""
    row = admin.execute(
        "SELECT shobj_description(oid, 'pg_database') AS c FROM pg_database WHERE datname = %s", (dbname,)
    ).fetchone()
    return None if row is None else json.loads(row["c"] or "{}")


def describe_shadow(admin: Connection, dbname: str, description: dict[str, Any]) -> None:
    """Replace the JSON comment on database `dbname` (dates and the like as text)."""
    admin.execute(
        sql.SQL("COMMENT ON DATABASE {} IS {}").format(
            sql.Identifier(dbname), sql.Literal(json.dumps(description, default=str))
        )
    )


# ---- copying the live store ---------------------------------------------------------------


def read_consistently(conn: Connection) -> None:
    """Make the connection's transaction (its first statement) one read-only snapshot: every
    table copied from it is as of the same instant."""
    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")


def max_memory_id(conn: Connection) -> int:
    """The highest semantic_memory id (0 when none): ids up to it are shared with a copy."""
    return one(conn.execute("SELECT coalesce(max(id), 0) AS n FROM semantic_memory"))["n"]


def max_event_id(conn: Connection) -> int:
    """The newest memory_event id (0 when none)."""
    return one(conn.execute("SELECT coalesce(max(id), 0) AS n FROM memory_event"))["n"]


def state_days(
    conn: Connection, tables: tuple[str, ...], *, after_event: int = 0, after_day: date | None = None
) -> list[date]:
    """The days of the live events on `tables` (no purge scrubbed them) with an id past
    `after_event` and, when given, a day past `after_day`, in order."""
    rows = conn.execute(
        """SELECT DISTINCT day FROM memory_event
           WHERE table_name = ANY(%s) AND day IS NOT NULL AND erased_at IS NULL AND id > %s
             AND (%s::date IS NULL OR day > %s) ORDER BY day""",
        (list(tables), after_event, after_day, after_day),
    ).fetchall()
    return [r["day"] for r in rows]


# ---- what a diff reads --------------------------------------------------------------------


def memories_with_day(conn: Connection) -> dict[int, dict[str, Any]]:
    """Every memory (any status) by id: id, anima_id, type, content, status, and `day`, the
    day of its create event (the night that wrote it; None for one without)."""
    rows = conn.execute(
        """SELECT m.id, m.anima_id, m.type, m.content, m.status,
                  (SELECT min(e.day) FROM memory_event e
                   WHERE e.table_name = 'semantic_memory' AND e.memory_id = m.id::text AND e.op = 'create') AS day
           FROM semantic_memory m"""
    ).fetchall()
    return {r["id"]: r for r in rows}


def layer_counts(conn: Connection) -> dict[str, int]:
    """Rows per derived layer a diff compares (active anchors and narratives, every summary,
    dream and self block), in a fixed table order."""
    return {
        table: one(conn.execute(f"SELECT count(*) AS n FROM {table} WHERE {where}"))["n"]
        for table, where in _COUNTED.items()
    }


def nights_cost(conn: Connection, first: date, last: date) -> float:
    """The summed `cost_usd` of the steps slept for the days first..last (the nights' own
    rows excluded: their stats repeat the steps')."""
    return one(
        conn.execute(
            """SELECT coalesce(sum((stats->>'cost_usd')::float), 0) AS c FROM sleep_state
               WHERE day BETWEEN %s AND %s AND step <> 'night' AND stats ? 'cost_usd'""",
            (first, last),
        )
    )["c"]


# ---- what a promote reads of the shadow ---------------------------------------------------


def all_memories(conn: Connection) -> dict[int, dict[str, Any]]:
    """Every semantic_memory row, whole, by id."""
    return {r["id"]: r for r in conn.execute("SELECT * FROM semantic_memory").fetchall()}


def summaries_touching(conn: Connection, anima_id: str, first: date, last: date) -> list[dict]:
    """The anima's summaries (any level) whose period meets first..last, by level and start."""
    return conn.execute(
        """SELECT * FROM temporal_summary WHERE anima_id = %s AND period_end >= %s AND period_start <= %s
           ORDER BY level, period_start""",
        (anima_id, first, last),
    ).fetchall()


def self_blocks(conn: Connection, anima_id: str) -> list[dict]:
    """The anima's self blocks: name and content."""
    return conn.execute("SELECT name, content FROM self_block WHERE anima_id = %s", (anima_id,)).fetchall()
