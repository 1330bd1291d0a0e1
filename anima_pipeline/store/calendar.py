"""The store's first day: where the night's daily partitions start.

`anima import` records the local day of the earliest message in the store in
`$ANIMA_HOME/first_day` (an ISO date). A later import of older data moves it earlier, never
later, so those days can be backfilled (after the code location is reloaded). The Dagster
definitions read it when they load (see defs/night/partitions.py); ANIMA_START_DATE
overrides it."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from anima_pipeline.store.db import Connection

FIRST_DAY_FILE = "first_day"


def first_message_day(conn: Connection, timezone: str) -> date | None:
    """The local day (in `timezone`) of the store's earliest message, or None when empty."""
    row = conn.execute(
        "SELECT (min(created_at) AT TIME ZONE %s)::date AS day FROM message", (timezone,)
    ).fetchone()
    return row["day"] if row else None


def recorded_first_day(home: Path) -> date | None:
    path = Path(home) / FIRST_DAY_FILE
    try:
        text = path.read_text().strip()
    except FileNotFoundError:
        return None
    try:
        return date.fromisoformat(text)
    except ValueError as exc:
        raise ValueError(f"{path}: {text!r} is not a date (YYYY-MM-DD); fix or delete the file") from exc


def record_first_day(home: Path, day: date | None) -> date | None:
    """Keep the earlier of the recorded first day and `day`; returns the first day now recorded."""
    known = recorded_first_day(home)
    if day is None or (known is not None and known <= day):
        return known
    Path(home).mkdir(parents=True, exist_ok=True)
    tmp = Path(home) / f".{FIRST_DAY_FILE}.tmp"
    tmp.write_text(day.isoformat() + "\n")
    tmp.replace(Path(home) / FIRST_DAY_FILE)  # atomic: a reader never sees half a date
    return day


def note_first_day(conn: Connection, home: Path, timezone: str) -> date | None:
    """Record the store's first day as its messages say (also when they came by another path
    than `anima import`: the agent API, a script); returns the first day now recorded."""
    return record_first_day(home, first_message_day(conn, timezone))
