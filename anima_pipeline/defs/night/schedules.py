"""The nightly job and schedule: 02:00 in ANIMA_TIMEZONE, the previous day's partition, mode
'scheduled' (full on Mondays, incremental otherwise), split into ANIMA_NIGHT_SHARDS runs."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date, datetime

import dagster as dg

from anima_pipeline.defs.night import assets as night_assets
from anima_pipeline.defs.night.partitions import previous_day_partition

JOB_NAME = "nightly_sleep"
SCHEDULE_NAME = "nightly_sleep_schedule"
TRIGGER_TAG = night_assets.TRIGGER_TAG
ENGINE_TAG = night_assets.ENGINE_TAG
MODE_TAG = night_assets.MODE_TAG


def scheduled_run_config(shard: str = "") -> dict:
    config: dict = {"mode": "scheduled"}
    if shard:
        config["shard"] = shard
    return {"ops": {night_assets.NIGHT_OP: {"config": config}}}


def shard_requests(partition: str, shards: int, run_config_for, tags: dict[str, str]) -> list[dg.RunRequest]:
    """One run request per shard of `partition` (one without a shard tag when shards == 1)."""
    if shards <= 1:
        return [
            dg.RunRequest(
                run_key=f"night-{partition}",
                partition_key=partition,
                run_config=run_config_for(""),
                tags={**tags, night_assets.DAY_TAG: partition},
            )
        ]
    return [
        dg.RunRequest(
            run_key=f"night-{partition}-shard-{i}-of-{shards}",
            partition_key=partition,
            run_config=run_config_for(f"{i}/{shards}"),
            tags={**tags, night_assets.DAY_TAG: partition, night_assets.SHARD_TAG: f"{i}/{shards}"},
        )
        for i in range(shards)
    ]


def build_job(
    night: dg.AssetsDefinition, exclude: Sequence[dg.AssetChecksDefinition] = ()
) -> dg.UnresolvedAssetJobDefinition:
    selection: dg.AssetSelection = dg.AssetSelection.assets(night)
    if exclude:  # the freshness check watches the night from outside; it is not part of it
        selection = selection - dg.AssetSelection.checks(*exclude)
    return dg.define_asset_job(
        name=JOB_NAME,
        selection=selection,
        # One process: the night's steps and its checks share the night's connection, a run
        # started by the CLI and by the UI behave alike, and a signal reaches the step at once.
        executor_def=dg.in_process_executor,
        description="The whole night for a day or a range of days (all 14 steps and their checks). "
        + night_assets.ONE_STEP,
    )


def build_schedule(
    job: dg.UnresolvedAssetJobDefinition,
    timezone: str,
    first_day: Callable[[], date],
    shards: int,
    engine: str,
    loaded_first_day: date | None = None,
) -> dg.ScheduleDefinition:
    """`first_day` is called at each tick (the store's first day as the database has it now);
    `loaded_first_day` is where the job's partitions start (read when the definitions loaded)."""

    @dg.schedule(
        name=SCHEDULE_NAME,
        job=job,
        cron_schedule="0 2 * * *",
        execution_timezone=timezone,
        # on as soon as a daemon runs (dagster dev): the nightly cycle is the point of the project
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description="02:00 local: consolidate the day that just ended"
        + (f", in {shards} shard runs" if shards > 1 else "")
        + ".",
    )
    def nightly_sleep_schedule(context: dg.ScheduleEvaluationContext):
        tick = context.scheduled_execution_time or datetime.now().astimezone()  # by hand: now
        partition = previous_day_partition(tick, timezone)
        first = first_day()
        if date.fromisoformat(partition) < first:
            return dg.SkipReason(f"{partition} is before the first day of data, {first}")
        if loaded_first_day is not None and date.fromisoformat(partition) < loaded_first_day:
            # older data came in after the load: Dagster refuses a partition it does not know
            return dg.SkipReason(
                f"{partition}: the first day of data moved to {first} after the code location loaded "
                f"(its partitions start at {loaded_first_day}); reload the code location to sleep it"
            )
        tags = {TRIGGER_TAG: "schedule", ENGINE_TAG: engine, MODE_TAG: "scheduled"}
        return shard_requests(partition, shards, scheduled_run_config, tags)

    return nightly_sleep_schedule
