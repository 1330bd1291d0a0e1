"""A 3-day backfill launched as the UI launches it, and where its time goes: the night's
steps or the asset checks.

Imports the bundled demo week into a fresh store (a temporary ANIMA_HOME with the embedded
server, or ANIMA_DATABASE_URL if set), starts `dg dev` on it, launches a backfill of the
night's 14 keys over its first three days through the webserver's GraphQL (the mutation the
asset graph's "Materialize" dialog sends), waits for the daemon to run it, and prints, from
that run's own event log: the run's wall time, the night step's time, and within it the time
spent running the nights and evaluating the checks (the body measures both; see
defs/night/assets.py TIMING_LOG). All numbers come from this one run.

    .venv/bin/python -m benchmarks.ui_backfill [--days 3]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from datetime import date, timedelta
from pathlib import Path

from testkit.dagster_dev import BACKFILL, LAUNCH, REPO, dagster_dev, dev_env, graphql

WEEK = REPO / "anima_pipeline" / "sample" / "week.archive.jsonl"
FIRST = date(2026, 11, 16)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=3)
    args = parser.parse_args()
    days = [(FIRST + timedelta(days=i)).isoformat() for i in range(args.days)]

    from anima_pipeline.core.steps import STEP_ORDER

    with tempfile.TemporaryDirectory(prefix="anima-ui-backfill-") as tmp:
        root = Path(tmp)
        env = dev_env(root / "home", root / "dagster")
        subprocess.run(
            [sys.executable, "-m", "anima_pipeline.cli", "import", str(WEEK)],
            env=env,
            check=True,
            capture_output=True,
        )
        with dagster_dev(env, root / "dev.log") as url:
            params = {
                "assetSelection": [{"path": key.split("/")} for key in STEP_ORDER],
                "partitionNames": days,
                "fromFailure": False,
            }
            t0 = time.monotonic()
            launched = graphql(url, LAUNCH, {"params": params})["launchPartitionBackfill"]
            if launched["__typename"] != "LaunchBackfillSuccess":
                raise SystemExit(f"backfill not launched: {launched}")
            backfill_id = launched["backfillId"]
            while True:
                state = graphql(url, BACKFILL, {"id": backfill_id})["partitionBackfillOrError"]
                if state["status"] in (
                    "COMPLETED",
                    "COMPLETED_SUCCESS",
                    "COMPLETED_FAILED",
                    "FAILED",
                    "CANCELED",
                ):
                    break
                if time.monotonic() - t0 > 900:
                    raise SystemExit(f"backfill {backfill_id} still {state['status']} after 15 minutes")
                time.sleep(2)
            wall = time.monotonic() - t0
            run_ids = [r["runId"] for r in state["runs"]]
            report(env, backfill_id, state["status"], run_ids, days, wall)
        # the embedded server of the temporary store (nothing to stop with ANIMA_DATABASE_URL)
        subprocess.run(
            [sys.executable, "-m", "anima_pipeline.cli", "db", "stop"], env=env, capture_output=True
        )


def report(
    env: dict[str, str], backfill_id: str, status: str, run_ids: list[str], days: list[str], wall: float
) -> None:
    import os

    os.environ.update(DAGSTER_HOME=env["DAGSTER_HOME"], ANIMA_HOME=env["ANIMA_HOME"])
    import dagster as dg

    from anima_pipeline.defs.instance import get_instance
    from anima_pipeline.defs.night.assets import TIMING_LOG

    pattern = re.compile(
        re.escape(TIMING_LOG)
        .replace(r"\{night_s:\.3f\}", r"([\d.]+)")
        .replace(r"\{checks_s:\.3f\}", r"([\d.]+)")
    )
    with get_instance() as instance:
        night_s = checks_s = step_s = run_s = 0.0
        for run_id in run_ids:
            record = instance.get_run_record_by_id(run_id)
            run_s += (record.end_time or time.time()) - (
                record.start_time or record.create_timestamp.timestamp()
            )
            starts: dict[str, float] = {}
            for entry in instance.all_logs(run_id):
                match = pattern.search(entry.user_message or "")
                if match:
                    night_s += float(match.group(1))
                    checks_s += float(match.group(2))
                event = entry.dagster_event
                if event is None or event.step_key is None:
                    continue
                if event.event_type_value == "STEP_START":
                    starts[event.step_key] = entry.timestamp
                elif event.event_type_value in ("STEP_SUCCESS", "STEP_FAILURE") and event.step_key in starts:
                    step_s += entry.timestamp - starts.pop(event.step_key)
        checks = instance.fetch_materializations(
            dg.AssetRecordsFilter(
                asset_key=dg.AssetKey(["temporal_summaries", "day"]), asset_partitions=days
            ),
            limit=10,
        ).records
    print(
        f"3-day UI backfill ({days[0]}..{days[-1]}), backfill {backfill_id}: {status}, {len(run_ids)} run(s)"
    )
    print(f"  launch to done (daemon, run worker, code load): {wall:8.2f} s")
    print(f"  run (worker start to end):                     {run_s:8.2f} s")
    print(f"  the night step:                                {step_s:8.2f} s")
    print(f"    of which the nights (14 steps x {len(days)} days):    {night_s:8.2f} s")
    print(f"    of which the asset checks (5, one connection): {checks_s:8.2f} s")
    ratio = checks_s / night_s if night_s else float("nan")
    print(
        f"  checks / night: {ratio:.3f}   ({'less' if checks_s < night_s else 'MORE'} time in checks than in the night)"
    )
    print(f"  temporal_summaries/day materialized for {len(checks)} of {len(days)} day(s)")


if __name__ == "__main__":
    main()
