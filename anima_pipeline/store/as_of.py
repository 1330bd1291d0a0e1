"""The store as of a day, rebuilt from the audit log, in a database of its own (docs/replay.md).

`copy_store` copies every table of a migrated store into another migrated database on the
same server (COPY in binary, foreign-key triggers off while copying, identity sequences moved
past the source's so rows born in the copy never reuse a live id). `rewind` then replays the
audit log backwards in that copy: every memory_event after the first event of a later day is
undone in reverse order, by restoring the row's `before` (or deleting a row the event
created), so each table stands as it did when the night of `day` was over. The archive
(conversations and messages as imported) stays whole: a replay sleeps the same talk again.
`checksums` is one digest per table, to show that a replay left the live store as it was.
"""

from __future__ import annotations

import hashlib
from datetime import date
from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

from anima_pipeline.store.db import Connection

# Tables a night or an agent writes through the audit log; each event's before/after is the row.
AUDITED = (
    "semantic_memory",
    "emotional_anchor",
    "autobiographical_memory",
    "self_block",
    "temporal_summary",
    "memory_reference",
    "dream_journal",
    "review_proposal",
)
_SKIP = {"schema_migration"}


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


def cutoff(conn: Connection, day: date) -> int | None:
    """The first audit event that belongs after `day` (a later night's or a later day's agent
    write); None when the store holds nothing after it. Imports (no day) never count."""
    row = conn.execute("SELECT min(id) AS id FROM memory_event WHERE day > %s", (day,)).fetchone()
    return row["id"] if row else None


def rewind(conn: Connection, day: date) -> dict[str, int]:
    """Undo, newest first, every audited write from the first event after `day` on; then drop
    the later nights' state and the undone events themselves. Returns rows undone per table."""
    first = cutoff(conn, day)
    undone: dict[str, int] = {}
    if first is not None:
        events = conn.execute(
            """SELECT id, anima_id, table_name, memory_id, op, before FROM memory_event
               WHERE id >= %s AND day IS NOT NULL AND erased_at IS NULL ORDER BY id DESC""",
            (first,),
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
        conn.execute("DELETE FROM memory_event WHERE id >= %s", (first,))
    # a self block's history keeps only the versions up to the one that now stands
    conn.execute(
        """DELETE FROM self_block_history h WHERE NOT EXISTS (
               SELECT 1 FROM self_block b WHERE b.anima_id = h.anima_id AND b.name = h.name AND h.version <= b.version)"""
    )
    undone["sleep_state"] = conn.execute("DELETE FROM sleep_state WHERE day > %s", (day,)).rowcount
    conn.execute("DELETE FROM review_proposal WHERE day > %s", (day,))
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
