"""Did last night run? A check on the night's last key that fails when the previous day's
partition has no materialization after 06:00 local time (the 02:00 night should be long
done), evaluated by its own schedule at 06:05 local so that a missing night shows up in
the UI the same morning."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import dagster as dg

DEADLINE = time(6, 0)
CHECK_NAME = "last_night_ran"
JOB_NAME = "last_night_check"
SCHEDULE_NAME = "last_night_check_schedule"


def expected_day(now: datetime) -> date:
    """The latest day whose night must be done at `now` (local): yesterday from 06:00, else
    the day before."""
    return now.date() - timedelta(days=1 if now.time() >= DEADLINE else 2)


def evaluate(
    instance: dg.DagsterInstance, key: dg.AssetKey, now: datetime, first_day: date
) -> dg.AssetCheckResult:
    day = expected_day(now)
    if day < first_day:
        return dg.AssetCheckResult(
            passed=True, description=f"{day} is before the first day of data ({first_day})"
        )
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[day.isoformat()]), limit=1
    ).records
    metadata = {"day": dg.MetadataValue.text(day.isoformat()), "now": dg.MetadataValue.text(now.isoformat())}
    if records:
        return dg.AssetCheckResult(passed=True, metadata=metadata)
    return dg.AssetCheckResult(
        passed=False,
        severity=dg.AssetCheckSeverity.ERROR,
        description=f"the night of {day} has not run (it should be done by {DEADLINE:%H:%M} local on the next day)",
        metadata=metadata,
    )


def build_freshness(
    key: dg.AssetKey, timezone: str, first_day: Callable[[], date]
) -> tuple[dg.AssetChecksDefinition, dg.ScheduleDefinition]:
    """`first_day` is called at each evaluation (the store's first day as the database has it now)."""

    @dg.asset_check(
        asset=key,
        name=CHECK_NAME,
        description=f"Fails when the previous day's night has not run by {DEADLINE:%H:%M} {timezone} "
        "(checked every morning at 06:05 by its schedule).",
    )
    def last_night_ran(context) -> dg.AssetCheckResult:  # (a string annotation is refused by Dagster)
        return evaluate(context.instance, key, datetime.now(ZoneInfo(timezone)), first_day())

    job = dg.define_asset_job(JOB_NAME, selection=dg.AssetSelection.checks(last_night_ran))
    schedule = dg.ScheduleDefinition(
        name=SCHEDULE_NAME,
        job=job,
        cron_schedule="5 6 * * *",
        execution_timezone=timezone,
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description="06:05 local: did last night run?",
    )
    return last_night_ran, schedule
