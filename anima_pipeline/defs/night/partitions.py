"""Daily partitions in ANIMA_TIMEZONE: partition D covers [D 00:00, D+1 00:00) local time.

They start at the store's first day: ANIMA_START_DATE when set, otherwise the day of the
earliest message, recorded in $ANIMA_HOME/first_day by `anima import` (store/calendar.py;
an import of older data moves it earlier, and after a code-location reload those days can be
backfilled). With nothing imported yet there is one partition, yesterday. The last
partition is yesterday: a day is processed once it is over.

Nothing here reads the environment at import time: `night_partitions(settings)` is called
when the definitions load (defs/night/build.py).
"""

from __future__ import annotations

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import dagster as dg

from anima_pipeline.config import Settings
from anima_pipeline.store.calendar import recorded_first_day


def start_date(settings: Settings) -> date:
    """Where the partitions start for these settings (see the module docstring)."""
    if settings.start_date is not None:
        return settings.start_date
    recorded = recorded_first_day(settings.home)
    if recorded is not None:
        return recorded
    return datetime.now(settings.tz).date() - timedelta(days=1)


def night_partitions(settings: Settings) -> dg.DailyPartitionsDefinition:
    return dg.DailyPartitionsDefinition(
        start_date=start_date(settings).isoformat(), timezone=settings.timezone
    )


def partition_day(key: str) -> date:
    return date.fromisoformat(key)


def previous_day_partition(tick: datetime, timezone: str) -> str:
    """The partition a tick at `tick` processes: the local day before the tick's local date
    (the 02:00 run of 2026-11-29 processes 2026-11-28)."""
    local = tick.astimezone(ZoneInfo(timezone)) if tick.tzinfo else tick.replace(tzinfo=ZoneInfo(timezone))
    return (local.date() - timedelta(days=1)).isoformat()
