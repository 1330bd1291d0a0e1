"""What a quiet (day, step) costs in Dagster's SQLite event log, one by one vs in one batch.

A night reports its quiet steps (13 of the 14 on a day no anima had work) in batches
(defs/night/assets.py log_in_one_batch, written by defs/instance.py's batch SQLite write).
This runs a partitioned multi-asset of 13 keys that logs N days x 13 zero materializations,
once one by one (context.log_event) and once in batches as the night writes them (QUIET_BATCH),
each on a fresh SQLite instance
configured by the project's dagster.yaml, and prints both times and their ratio from one run.

    .venv/bin/python -m benchmarks.event_batch [--days 40]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from datetime import date, timedelta

import dagster as dg

from anima_pipeline.defs.instance import get_instance
from anima_pipeline.defs.night.assets import QUIET_BATCH, log_in_one_batch

STEPS = 13
KEYS = [dg.AssetKey(["bench", f"step{i}"]) for i in range(STEPS)]
PARTS = dg.DailyPartitionsDefinition(start_date="2020-01-01")


def job(days: int, batch: bool) -> dg.JobDefinition:
    @dg.multi_asset(specs=[dg.AssetSpec(k) for k in KEYS], partitions_def=PARTS, can_subset=True)
    def quiet_nights(context):  # (no annotation: Dagster reads it at runtime, and it is a string here)
        pending: list[dg.AssetMaterialization] = []
        for d in range(days):
            day = (date(2020, 1, 1) + timedelta(days=d)).isoformat()
            quiet = [
                dg.AssetMaterialization(asset_key=k, partition=day, metadata={"animas": 0}) for k in KEYS
            ]
            if not batch:
                for m in quiet:
                    context.log_event(m)
                continue
            pending += quiet
            if len(pending) >= QUIET_BATCH:  # as the night does
                log_in_one_batch(context, pending)
        log_in_one_batch(context, pending)
        yield from ()

    defs = dg.Definitions(assets=[quiet_nights], jobs=[dg.define_asset_job("quiet", selection=KEYS)])
    return defs.resolve_job_def("quiet")


def timed(days: int, batch: bool) -> float:
    with tempfile.TemporaryDirectory() as home, get_instance({"DAGSTER_HOME": home}) as instance:
        t = time.monotonic()
        job(days, batch).execute_in_process(instance=instance, partition_key="2020-01-01")
        elapsed = time.monotonic() - t
        materialized = len(instance.get_materialized_partitions(KEYS[-1]))
    assert materialized >= days, materialized
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=40)
    args = parser.parse_args()
    one_by_one, batched = timed(args.days, False), timed(args.days, True)
    n = args.days * STEPS
    print(f"{n} quiet materializations, load average {os.getloadavg()[0]:.1f}:")
    print(f"  one by one   {one_by_one:7.2f} s  ({1000 * one_by_one / n:.1f} ms each)")
    print(f"  in batches   {batched:7.2f} s  ({1000 * batched / n:.1f} ms each)")
    print(f"  ratio        {one_by_one / batched:7.2f}")


if __name__ == "__main__":
    main()
