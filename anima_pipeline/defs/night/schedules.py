"""The nightly schedule: 02:00 in ANIMA_TIMEZONE, the previous day's partition, mode
'scheduled' (full on Mondays, incremental otherwise)."""

from __future__ import annotations

import dagster as dg

from anima_pipeline.defs.night import assets as night_assets
from anima_pipeline.defs.night.partitions import (
    START_DATE,
    TIMEZONE,
    night_partitions,
    previous_day_partition,
)

SCHEDULED_RUN_CONFIG = {"ops": {night_assets.NIGHT_OP: {"config": {"mode": "scheduled"}}}}

night_job = dg.define_asset_job(
    name="nightly_sleep",
    selection=dg.AssetSelection.assets(night_assets.night),
    partitions_def=night_partitions,
    description="The whole night for one day (all 14 steps, then the checks).",
)


@dg.schedule(
    name="nightly_sleep_schedule",
    job=night_job,
    cron_schedule="0 2 * * *",
    execution_timezone=TIMEZONE,
    # on as soon as a daemon runs (dagster dev): the nightly cycle is the point of the project
    default_status=dg.DefaultScheduleStatus.RUNNING,
    description="02:00 local: consolidate the day that just ended.",
)
def nightly_sleep_schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest | dg.SkipReason:
    tick = context.scheduled_execution_time
    if tick is None:  # evaluated by hand, outside a tick
        from datetime import datetime

        tick = datetime.now().astimezone()
    partition = previous_day_partition(tick, TIMEZONE)
    if partition < START_DATE.isoformat():
        return dg.SkipReason(f"{partition} is before ANIMA_START_DATE {START_DATE}")
    return dg.RunRequest(
        run_key=f"night-{partition}",
        partition_key=partition,
        run_config=SCHEDULED_RUN_CONFIG,
        tags={"anima/trigger": "schedule"},
    )
