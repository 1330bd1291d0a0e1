"""Daily partitions in ANIMA_TIMEZONE: partition D covers [D 00:00, D+1 00:00) local time.

They start at the store's first day: ANIMA_START_DATE when set, otherwise the local day of
the earliest message, kept in the memory database (store/calendar.py; an import or append of
older data moves it earlier, and after a code-location reload those days can be
backfilled). With nothing imported yet there is one partition, yesterday. The last
partition is yesterday: a day is processed once it is over.

Reading the first day starts no server and writes nothing (README, "Where the partitions
start"; docs/decisions.md): a server in ANIMA_DATABASE_URL is read, and one that cannot be
reached is an error naming it; the embedded server is read only while it runs, and while it
is stopped the partitions start yesterday, with a warning, until a reload after any `anima`
command started it.

Nothing here reads the environment or the database at import time: `night_partitions` is
called when the definitions load (defs/night/build.py), `start_date` also by the schedule
and the freshness check when they run.
"""

from __future__ import annotations

import logging
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import dagster as dg

from anima_pipeline.config import Settings
from anima_pipeline.store.calendar import read_first_day
from anima_pipeline.store.db import running_url

logger = logging.getLogger(__name__)


def start_date(settings: Settings) -> date:
    """Where the partitions start for these settings, read now (see the module docstring)."""
    if settings.start_date is not None:
        return settings.start_date  # pinned: the database is not asked
    yesterday = datetime.now(settings.tz).date() - timedelta(days=1)
    url = running_url(settings)
    if url is None:
        logger.warning(
            "the embedded PostgreSQL under %s is not running, and loading the Dagster definitions "
            "starts no server: the partitions start yesterday (%s). Run any `anima` command (anima "
            "status) to start it, then reload the code location; or set ANIMA_START_DATE",
            settings.home,
            yesterday,
        )
        return yesterday
    return read_first_day(url, settings.timezone) or yesterday


def night_partitions(settings: Settings, first_day: date | None = None) -> dg.DailyPartitionsDefinition:
    """The partitions from `first_day` (read by `start_date` when not given)."""
    return dg.DailyPartitionsDefinition(
        start_date=(first_day or start_date(settings)).isoformat(), timezone=settings.timezone
    )


def partition_day(key: str) -> date:
    return date.fromisoformat(key)


def previous_day_partition(tick: datetime, timezone: str) -> str:
    """The partition a tick at `tick` processes: the local day before the tick's local date
    (the 02:00 run of 2026-11-29 processes 2026-11-28)."""
    local = tick.astimezone(ZoneInfo(timezone)) if tick.tzinfo else tick.replace(tzinfo=ZoneInfo(timezone))
    return (local.date() - timedelta(days=1)).isoformat()
