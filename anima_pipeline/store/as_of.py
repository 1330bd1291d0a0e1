"""The store as of a day, rebuilt from the audit log, in a database of its own (docs/replay.md).

`copy_store` copies every table of a migrated store into another migrated database on the
same server (COPY in binary, foreign-key triggers off while copying, identity sequences moved
past the source's so rows born in the copy never reuse a live id). `rewind` then replays the
audit log backwards in that copy: every memory_event of a later day (by its day, whatever
order the nights ran in) is undone newest first, by restoring the row's `before` (or deleting
a row the event created), so each table stands as the events of `day` and before left it.
When an event of `day` or before came after one of a later day and changed or named what it
wrote, that state is not in the log: `rewind` refuses (`OutOfOrder`), naming the days and the
replay that rebuilds the store in order, rather than make a wrong store. The archive
(conversations and messages as imported) stays whole: a replay sleeps the same talk again.
`checksums` is one digest per table, to show that a replay left the live store as it was.
"""

from __future__ import annotations

import hashlib
from datetime import date, timedelta
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from anima_pipeline.core.errors import Conflict
from anima_pipeline.store import catalog
from anima_pipeline.store.db import Connection

# Tables a night or an agent writes through the audit log; each event's before/after is the
# row (store/catalog.py says which tables these are, and which keep a row's day).
AUDITED = (*catalog.names(snapshot="audited"), *catalog.names(snapshot="by_day"))
_BY_DAY = catalog.names(snapshot="by_day")
_SKIP = set(catalog.names(snapshot="schema"))


def tables(conn: Connection) -> list[str]:
    return [
        r["table_name"]
        for r in conn.execute(
            """SELECT table_name FROM information_schema.tables
               WHERE table_schema = 'public' AND table_type = 'BASE TABLE' ORDER BY table_name"""
        ).fetchall()
        if r["table_name"] not in _SKIP
    ]


def columns(conn: Connection, table: str) -> list[str]:
    """The columns a row can be written with (stored generated ones are computed)."""
    return [
        r["column_name"]
        for r in conn.execute(
            """SELECT column_name FROM information_schema.columns
               WHERE table_schema = 'public' AND table_name = %s AND is_generated = 'NEVER'
               ORDER BY ordinal_position""",
            (table,),
        ).fetchall()
    ]


def primary_key(conn: Connection, table: str) -> list[str]:
    return [
        r["attname"]
        for r in conn.execute(
            """SELECT a.attname FROM pg_index i
               JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
               WHERE i.indrelid = %s::regclass AND i.indisprimary ORDER BY array_position(i.indkey, a.attnum)""",
            (table,),
        ).fetchall()
    ]


def copy_store(src: Connection, dst: Connection) -> dict[str, int]:
    """Copy every row of every table from `src` to the (migrated, empty) `dst`; rows per table."""
    counts: dict[str, int] = {}
    dst.execute("SET session_replication_role = replica")  # no FK checks while tables arrive in any order
    try:
        for table in tables(src):
            cols = sql.SQL(", ").join(map(sql.Identifier, columns(src, table)))
            out_q = sql.SQL("COPY {} ({}) TO STDOUT (FORMAT BINARY)").format(sql.Identifier(table), cols)
            in_q = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(sql.Identifier(table), cols)
            with src.cursor().copy(out_q) as out, dst.cursor().copy(in_q) as into:
                for chunk in out:
                    into.write(chunk)
            counts[table] = dst.execute(
                sql.SQL("SELECT count(*) AS n FROM {}").format(sql.Identifier(table))
            ).fetchone()["n"]  # type: ignore[index]
    finally:
        dst.execute("SET session_replication_role = origin")
    for seq in dst.execute(
        """SELECT table_name, column_name, pg_get_serial_sequence(table_name, column_name) AS seq
           FROM information_schema.columns WHERE table_schema = 'public' AND is_identity = 'YES'"""
    ).fetchall():
        high = src.execute(
            sql.SQL("SELECT coalesce(max({}), 0) AS n FROM {}").format(
                sql.Identifier(seq["column_name"]), sql.Identifier(seq["table_name"])
            )
        ).fetchone()["n"]  # type: ignore[index]
        last = src.execute("SELECT last_value FROM " + seq["seq"]).fetchone()["last_value"]  # type: ignore[index]
        dst.execute("SELECT setval(%s, %s)", (seq["seq"], max(high, last, 1)))
    return counts


# The tables whose rows an event's before/after are, and which other rows a row can name: a
# semantic memory by id in these columns (or as `f-N` in any text of the row).
_MEMORY_REFS = {
    "semantic_memory": ("superseded_by",),
    "memory_reference": ("memory_id", "cited_memory_id"),
    "autobiographical_memory": ("source_memory_ids",),
    "review_proposal": ("memory_ids",),
}
_REF_SQL = " OR ".join(
    f"(e.table_name = '{table}' AND ("
    + " OR ".join(f"e.after->'{c}' @> to_jsonb(l.memory_id::bigint)" for c in cols)
    + "))"
    for table, cols in _MEMORY_REFS.items()
)


class OutOfOrder(Conflict):
    """The store as of a day cannot be rebuilt exactly from the audit log: a night (or a write)
    of a later day came first, and an event of that day or an earlier one then changed or
    named what it wrote (docs/replay.md). The message names the days and what to run."""

    def __init__(self, day: date, found: list[dict[str, Any]], exact: date, to: date | None = None) -> None:
        later = sorted({r["later_day"] for r in found})
        earlier = sorted({r["earlier_day"] for r in found})
        shown = _rows(found)
        first = exact + timedelta(days=1)
        super().__init__(
            f"the store as of {day} cannot be rebuilt exactly from the audit log: nights ran out of "
            f"order: the night(s) of {_days(later)} wrote before the night(s) of {_days(earlier)}, "
            f"which then changed or named what they wrote ({shown}). Run instead "
            f"`anima replay --from {first} --to {to or day}`: it starts from the store as of {exact}, "
            "which rebuilds exactly, and sleeps those nights again in order"
        )
        self.day, self.later_days, self.earlier_days, self.exact = day, later, earlier, exact


def _rows(found: list[dict[str, Any]]) -> str:
    """The rows in question, per table: up to three of each, and how many."""
    by_table: dict[str, list[str]] = {}
    for r in found:
        ref = f"f-{r['memory_id']}" if r["table_name"] == "semantic_memory" else r["memory_id"]
        if ref not in by_table.setdefault(r["table_name"], []):
            by_table[r["table_name"]].append(ref)
    return "; ".join(
        f"{table} {', '.join(refs[:3])}" + (f" and {len(refs) - 3} more" if len(refs) > 3 else "")
        for table, refs in sorted(by_table.items())
    )


def _days(days: list[date]) -> str:
    return ", ".join(str(d) for d in days[:6]) + (f" and {len(days) - 6} more" if len(days) > 6 else "")


def out_of_order(conn: Connection, day: date) -> list[dict[str, Any]]:
    """What forbids rebuilding the store as of `day` exactly: pairs of a live event of a later
    day and a later-id live event of `day` or before that changed the same row, or named a
    memory the first created (its id in a column of _MEMORY_REFS, or `f-N` in its text). Each:
    later_day, earlier_day, table_name, memory_id. Empty when every event of days after `day`
    can be undone without touching what the earlier days' events left (reads leave no trace in
    the log: what a night only read of a later day's rows is not a dependency it records)."""
    return conn.execute(
        rf"""WITH later AS (
                SELECT id, anima_id, table_name, memory_id, op, day FROM memory_event
                WHERE day > %(day)s AND erased_at IS NULL AND memory_id IS NOT NULL AND table_name <> 'run'),
            earlier AS (
                SELECT id, anima_id, table_name, memory_id, after, day FROM memory_event
                WHERE day <= %(day)s AND erased_at IS NULL AND table_name <> 'run'
                  AND id > (SELECT coalesce(min(id), 0) FROM later))
            SELECT DISTINCT l.day AS later_day, e.day AS earlier_day, l.table_name, l.memory_id
            FROM later l JOIN earlier e ON e.id > l.id AND e.anima_id = l.anima_id
            WHERE (e.table_name = l.table_name AND e.memory_id = l.memory_id)
               OR (l.table_name = 'semantic_memory' AND l.op = 'create'
                   AND ({_REF_SQL} OR e.after::text ~ ('\mf-' || l.memory_id || '\M')))
            ORDER BY 1, 2, 3, 4""",
        {"day": day},
    ).fetchall()


def check_rebuildable(conn: Connection, day: date, to: date | None = None) -> None:
    """Raise OutOfOrder when the store as of `day` cannot be rebuilt exactly, naming the days
    and the latest earlier day whose store can (`to`: the last day of the replay it hints at)."""
    found = out_of_order(conn, day)
    if not found:
        return
    exact = day
    blocking = found
    while blocking:  # the days that depend move the start back until nothing depends
        exact = min(r["earlier_day"] for r in blocking) - timedelta(days=1)
        blocking = out_of_order(conn, exact)
    raise OutOfOrder(day, found, exact, to)


def rewind(conn: Connection, day: date, to: date | None = None) -> dict[str, int]:
    """Undo, newest first, every audited write of a day after `day` (by the event's day, not its
    position in the log: nights may have run in any order), then drop the later days' nights
    and the undone events themselves. Refuses (OutOfOrder) when an event of `day` or before
    came after one of a later day and depends on it. Returns rows undone per table."""
    check_rebuildable(conn, day, to)
    undone: dict[str, int] = {}
    events = conn.execute(
        """SELECT id, anima_id, table_name, memory_id, op, before FROM memory_event
           WHERE day > %s AND erased_at IS NULL ORDER BY id DESC""",
        (day,),
    ).fetchall()
    shapes: dict[str, tuple[list[str], list[str]]] = {}
    for e in events:
        table = e["table_name"]
        if table == "conversation" and e["op"] == "delete":
            _restore_conversation(conn, e["before"] or {})
        elif table in AUDITED:
            if table not in shapes:
                shapes[table] = (columns(conn, table), primary_key(conn, table))
            _undo_row(conn, table, *shapes[table], e)
        else:
            continue  # bookkeeping rows (imports, run markers) are not state
        undone[table] = undone.get(table, 0) + 1
    conn.execute("DELETE FROM memory_event WHERE day > %s", (day,))
    # a self block's history keeps only the versions up to the one that now stands
    conn.execute(
        """DELETE FROM self_block_history h WHERE NOT EXISTS (
               SELECT 1 FROM self_block b WHERE b.anima_id = h.anima_id AND b.name = h.name AND h.version <= b.version)"""
    )
    for table in _BY_DAY:  # the later nights' own rows (sleep_state, proposals)
        n = conn.execute(
            sql.SQL("DELETE FROM {} WHERE day > %s").format(sql.Identifier(table)), (day,)
        ).rowcount
        if table == "sleep_state":
            undone[table] = n
    return undone


def _undo_row(conn: Connection, table: str, cols: list[str], pk: list[str], e: dict[str, Any]) -> None:
    ident = sql.Identifier(table)
    key_values = [e["anima_id"], e["memory_id"]] if pk == ["anima_id", "name"] else [e["memory_id"]]
    where = sql.SQL(" AND ").join(sql.SQL("{} = %s").format(sql.Identifier(k)) for k in pk)
    if e["before"] is None:  # the event created the row
        conn.execute(sql.SQL("DELETE FROM {} WHERE {}").format(ident, where), key_values)
        return
    col_list = sql.SQL(", ").join(map(sql.Identifier, cols))
    updates = sql.SQL(", ").join(
        sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(c)) for c in cols if c not in pk
    )
    conn.execute(
        sql.SQL(
            "INSERT INTO {t} ({c}) OVERRIDING SYSTEM VALUE SELECT {c} FROM jsonb_populate_record(NULL::{t}, %s) "
            "ON CONFLICT ({k}) DO UPDATE SET {u}"
        ).format(t=ident, c=col_list, k=sql.SQL(", ").join(map(sql.Identifier, pk)), u=updates),
        (Jsonb(e["before"]),),
    )


def _restore_conversation(conn: Connection, before: dict[str, Any]) -> None:
    """A conversation the cleanup deleted after `day`: back with its messages (the same ids)."""
    conv = before.get("conversation")
    if not conv:
        return
    parts = (
        ("conversation", [conv]),
        ("message", before.get("messages") or []),
        ("memory_reference", before.get("references") or []),
    )
    for table, rows in parts:
        cols = [c for c in columns(conn, table) if rows and c in rows[0]]
        for row in rows:
            conn.execute(
                sql.SQL(
                    "INSERT INTO {t} ({c}) OVERRIDING SYSTEM VALUE SELECT {c} FROM jsonb_populate_record(NULL::{t}, %s) "
                    "ON CONFLICT DO NOTHING"
                ).format(t=sql.Identifier(table), c=sql.SQL(", ").join(map(sql.Identifier, cols))),
                (Jsonb(row),),
            )


def checksums(conn: Connection) -> dict[str, str]:
    """One digest per table over every row in primary-key order: equal digests, equal tables."""
    out: dict[str, str] = {}
    for table in [*tables(conn), "schema_migration"]:
        pk = primary_key(conn, table) or columns(conn, table)
        order = sql.SQL(", ").join(map(sql.Identifier, pk))
        digest = hashlib.sha256()
        with conn.cursor().copy(
            sql.SQL("COPY (SELECT * FROM {} ORDER BY {}) TO STDOUT").format(sql.Identifier(table), order)
        ) as copy:
            for chunk in copy:
                digest.update(bytes(chunk))
        out[table] = digest.hexdigest()
    return out


def exists(admin: psycopg.Connection[Any], name: str) -> bool:
    return admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone() is not None


def create_database(admin: psycopg.Connection[Any], name: str) -> None:
    admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


def drop_database(admin: psycopg.Connection[Any], name: str) -> None:
    admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def databases_named(admin: psycopg.Connection[Any], prefix: str) -> list[str]:
    return [
        r["datname"]  # the admin connection of store/shadows.py returns dict rows
        for r in admin.execute(
            "SELECT datname FROM pg_database WHERE starts_with(datname, %s) ORDER BY datname", (prefix,)
        ).fetchall()
    ]
