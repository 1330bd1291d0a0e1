"""The night's definitions, built when Dagster loads the code location (not at import): the
partitions start at the store's first day (partitions.py, read from a running store as they
load: loading starts no server and writes nothing), the schedule's time zone and shard
count come from the settings, and a check says when last night did not run (freshness.py). The schedule and the check read the first day
again each time they run, so a first day moved earlier since the load is seen by them at
once (the partitions themselves follow at the next reload)."""

from __future__ import annotations

from datetime import date

import dagster as dg

from anima_pipeline.config import Settings
from anima_pipeline.core.steps import STEP_ORDER
from anima_pipeline.defs.night.assets import asset_key, build_night
from anima_pipeline.defs.night.freshness import build_freshness
from anima_pipeline.defs.night.partitions import night_partitions, start_date
from anima_pipeline.defs.night.schedules import build_job, build_schedule
from anima_pipeline.llm.factory import engine_class

FRESHNESS_KEY = STEP_ORDER[-1]  # the night's last step: materialized every night that ran (assets.py)


def night_definitions(settings: Settings) -> dg.Definitions:
    first_day = start_date(settings)  # one read at load: the partitions are fixed until a reload
    partitions = night_partitions(settings, first_day)

    def current_first_day() -> date:  # read at each tick / evaluation
        return start_date(settings)

    # the LLM provider's pool: `dagster instance concurrency set anthropic N` lets at most N
    # nights talk to the API at once on the instance (inside a night ANIMA_LLM_CONCURRENCY
    # bounds the requests in flight); offline nights need no pool (`Engine.pool`)
    night = build_night(partitions, pool=engine_class(settings).pool)
    freshness, freshness_schedule = build_freshness(
        asset_key(FRESHNESS_KEY), settings.timezone, current_first_day
    )
    job = build_job(night, [freshness])
    return dg.Definitions(
        assets=[night],
        jobs=[job],
        schedules=[
            build_schedule(
                job, settings.timezone, current_first_day, settings.night_shards, settings.engine, first_day
            ),
            freshness_schedule,
        ],
        asset_checks=[freshness],
    )


@dg.definitions
def night() -> dg.Definitions:
    # a bad ANIMA_* value stops the code location with the variable's name
    return night_definitions(Settings())
