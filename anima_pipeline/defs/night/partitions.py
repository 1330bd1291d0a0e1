"""Daily partitions in ANIMA_TIMEZONE: partition D covers [D 00:00, D+1 00:00) local time,
from ANIMA_START_DATE. The last partition is yesterday: a day is processed once it is over."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import dagster as dg

from anima_pipeline.config import Settings

_settings = Settings.from_env()  # a bad ANIMA_* value stops the code location with its name

TIMEZONE: str = _settings.timezone
START_DATE: date = _settings.start_date

night_partitions = dg.DailyPartitionsDefinition(start_date=START_DATE.isoformat(), timezone=TIMEZONE)


def partition_day(key: str) -> date:
    return date.fromisoformat(key)


def previous_day_partition(tick: datetime, timezone: str = TIMEZONE) -> str:
    """The partition a tick at `tick` processes: the local day before the tick's local date
    (the 02:00 run of 2026-11-29 processes 2026-11-28)."""
    local = tick.astimezone(ZoneInfo(timezone)) if tick.tzinfo else tick.replace(tzinfo=ZoneInfo(timezone))
    return (local.date() - timedelta(days=1)).isoformat()
