"""Shadow stores: the live store as of a day, in a database of its own beside the live one
(docs/replay.md). Replay (replay/) runs nights into them, diffs and promotes them; a purge
(memory/forget.py) reaches them too.

A shadow is named; its database is `<live database>__shadow_<name>` on the live store's
server, and what it is (as of which day, replayed how) is kept as a JSON comment on that
database, so that listing and diffing need nothing in the live store. Nothing here writes to
the live store: promote (replay/promote.py) is the one way a shadow's state reaches it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from typing import Any

from psycopg.conninfo import conninfo_to_dict, make_conninfo

from anima_pipeline.core.errors import InputError
from anima_pipeline.store import as_of as snapshot
from anima_pipeline.store import shadow_reads as queries
from anima_pipeline.store.db import Connection, Database, connect
from anima_pipeline.store.migrations import migrate

NAME = re.compile(r"^[a-z0-9][a-z0-9_]{0,30}$")
SEPARATOR = "__shadow_"


class ShadowError(InputError):
    """A shadow that cannot be made, found or used: the message says which and why."""


def check_name(name: str) -> str:
    if not NAME.fullmatch(name):
        raise ShadowError(f"shadow name {name!r}: 1 to 31 of a-z, 0-9 and _, starting with a letter or digit")
    return name


def _dbname(url: str) -> str:
    name = conninfo_to_dict(url).get("dbname")
    if not name:
        raise ShadowError("the live store's URL names no database")
    return str(name)


def shadow_dbname(live_url: str, name: str) -> str:
    db = f"{_dbname(live_url)}{SEPARATOR}{check_name(name)}"
    if len(db.encode()) > 63:
        raise ShadowError(
            f"shadow database name {db!r} is longer than PostgreSQL's 63 bytes: choose a shorter name"
        )
    return db


def shadow_url(live_url: str, name: str) -> str:
    return make_conninfo(live_url, dbname=shadow_dbname(live_url, name))


@contextmanager
def _admin(live_url: str) -> Iterator[Connection]:
    with connect(make_conninfo(live_url, dbname="postgres"), autocommit=True) as conn:
        yield conn


def info(live_url: str, name: str) -> dict[str, Any]:
    """What the shadow is (its JSON comment); ShadowError when there is none of that name."""
    with _admin(live_url) as admin:
        meta = queries.shadow_description(admin, shadow_dbname(live_url, name))
    if meta is None:
        raise ShadowError(f"no shadow store named {name!r} (see `anima replay --list`)")
    return {"name": name, **meta}


def set_info(live_url: str, name: str, values: dict[str, Any]) -> None:
    merged = {k: v for k, v in info(live_url, name).items() if k != "name"} | values
    with _admin(live_url) as admin:
        queries.describe_shadow(admin, shadow_dbname(live_url, name), merged)


def list_shadows(live_url: str) -> list[dict[str, Any]]:
    prefix = f"{_dbname(live_url)}{SEPARATOR}"
    with _admin(live_url) as admin:
        names = [n.removeprefix(prefix) for n in snapshot.databases_named(admin, prefix)]
    return [info(live_url, n) for n in names]


def create(
    live_url: str, name: str, as_of: date, *, replace: bool = False, to: date | None = None
) -> tuple[str, dict[str, int]]:
    """A new database holding the live store as it stood when the night of `as_of` was over.
    Returns its URL and the rows undone per table. Refuses (as_of.OutOfOrder, nothing made)
    when the audit log cannot rebuild that store exactly; `to` is the last day of the replay
    the refusal suggests (default `as_of`)."""
    dbname = shadow_dbname(live_url, name)
    with connect(live_url) as live:
        snapshot.check_rebuildable(live, as_of, to)  # before a database is made for nothing
    with _admin(live_url) as admin:
        if snapshot.exists(admin, dbname):
            if not replace:
                raise ShadowError(f"a shadow store named {name!r} exists: drop it first or pass --replace")
            snapshot.drop_database(admin, dbname)
        snapshot.create_database(admin, dbname)
    url = make_conninfo(live_url, dbname=dbname)
    try:
        migrate(url)
        with connect(live_url) as live, connect(url) as shadow:
            queries.read_consistently(live)  # one consistent copy
            snapshot.copy_store(live, shadow)
            high = queries.max_memory_id(live)
            watermark = queries.max_event_id(live)
            undone = snapshot.rewind(shadow, as_of, to)  # checks again, on the consistent copy
            live.rollback()
    except BaseException:
        drop(live_url, name)
        raise
    set_info(
        live_url,
        name,
        {
            "as_of": as_of.isoformat(),
            "status": "snapshot",
            "live_max_memory_id": high,
            # the live store's newest event when the copy was made: a promote refuses when the
            # live store has moved since (replay/promote.py)
            "live_max_event_id": watermark,
        },
    )
    return url, undone


def open_shadow(live_url: str, name: str) -> Database:
    """The shadow `name` as a store on one connection, migrated first (a copy made by an older
    version lacks the newer columns)."""
    url = shadow_url(live_url, name)
    migrate(url)
    return Database(url, max_size=1)


def drop(live_url: str, name: str) -> None:
    with _admin(live_url) as admin:
        snapshot.drop_database(admin, shadow_dbname(live_url, name))
