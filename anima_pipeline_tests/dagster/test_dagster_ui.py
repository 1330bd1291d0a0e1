"""What a Dagster user sees after `anima demo`, through a real webserver: the CLI's runs are
runs of the nightly_sleep job, tagged, and re-executable (a GraphQL re-execution launch
succeeds and the re-executed run finishes); the partitions start at the demo's first day;
the day summary reads as Markdown on temporal_summaries/day.

And the signals: SIGTERM ends `anima sleep` within seconds, non-zero, the Dagster run
CANCELED, and the same command carries on."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from zoneinfo import ZoneInfo

import dagster as dg
import psycopg
import pytest

from anima_pipeline_tests.conftest import AMBIENT, CLI, REPO, cli_env, invoke_cli
from testkit.dagster_dev import BACKFILL, LAUNCH, dagster_dev, dev_env, fast_daemon, graphql


@pytest.fixture
def demo_env(db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    env = cli_env(tmp_path, db_url)
    for var in AMBIENT:
        monkeypatch.delenv(var, raising=False)
    # this process reads the same run history (the storage is chosen from the environment)
    monkeypatch.setenv("DAGSTER_HOME", env["DAGSTER_HOME"])
    return env


REEXECUTE = """
mutation($parent: String!) {
  launchPipelineReexecution(reexecutionParams: {parentRunId: $parent, strategy: ALL_STEPS}) {
    __typename
    ... on LaunchRunSuccess { run { runId status pipelineName } }
    ... on PythonError { message }
    ... on InvalidSubsetError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}"""

RUN = """
query($id: ID!) {
  runOrError(runId: $id) {
    ... on Run { status pipelineName repositoryOrigin { repositoryLocationName repositoryName } tags { key value } }
  }
}"""

JOB_PARTITIONS = """
{
  pipelineOrError(params: {repositoryLocationName: "anima_pipeline", repositoryName: "__repository__",
                           pipelineName: "nightly_sleep"}) {
    ... on Pipeline { partitionKeysOrError { ... on PartitionKeys { partitionKeys } } }
  }
}"""


def _instance(env: dict[str, str]) -> dg.DagsterInstance:
    from anima_pipeline.defs.instance import get_instance

    return get_instance(env)


def test_demo_runs_are_nightly_sleep_runs_the_ui_can_reexecute(
    demo_env: dict[str, str], tmp_path: Path
) -> None:
    demo = invoke_cli(["demo"], demo_env)
    assert demo.returncode == 0, demo.stdout[-3000:] + demo.stderr[-3000:]
    with psycopg.connect(demo_env["ANIMA_DATABASE_URL"]) as conn:  # the first day is the store's
        [(first,)] = conn.execute("SELECT first_message_at FROM store_calendar").fetchall()
    assert first.astimezone(ZoneInfo("Asia/Shanghai")).date().isoformat() == "2026-11-16"

    with _instance(demo_env) as instance:
        [run] = instance.get_runs(filters=dg.RunsFilter(job_name="nightly_sleep"))
        assert run.status == dg.DagsterRunStatus.SUCCESS
        assert run.tags["anima/trigger"] == "cli" and run.tags["anima/engine"] == "offline"
        assert run.tags["anima/mode"] == "weekday rule (full Mondays, else incremental)"  # Mon..Mon
        assert run.tags["anima/command"] == "anima demo"
        assert run.tags["dagster/asset_partition_range_start"] == "2026-11-16"
        assert run.tags["dagster/asset_partition_range_end"] == "2026-11-23"
        # the day summary of a demo day, described in Markdown on temporal_summaries/day
        [record] = instance.fetch_materializations(
            dg.AssetRecordsFilter(
                asset_key=dg.AssetKey(["temporal_summaries", "day"]), asset_partitions=["2026-11-18"]
            ),
            limit=1,
        ).records
        preview = record.asset_materialization.metadata["preview"]
        assert isinstance(preview, dg.MarkdownMetadataValue)
    with psycopg.connect(demo_env["ANIMA_DATABASE_URL"]) as conn:
        [(summary,)] = conn.execute(
            "SELECT content FROM temporal_summary WHERE level = 'day' AND period_start = '2026-11-18'"
        ).fetchall()
    # by size, never its text: Dagster's storage must hold nothing a forget --purge erases
    assert f"{len(summary)} chars" in preview.value and summary.strip()[:60] not in preview.value

    env = dev_env(
        tmp_path / "webserver-home",  # another host's home: the first day comes from the database
        Path(demo_env["DAGSTER_HOME"]),
        ANIMA_DATABASE_URL=demo_env["ANIMA_DATABASE_URL"],
    )
    with dagster_dev(env, tmp_path / "dg-dev.log") as url:  # webserver and daemon, as a user runs them
        _check_in_the_ui(url, run.run_id)


def _check_in_the_ui(webserver: str, run_id: str) -> None:
    # the webserver (a separate process, as a user runs it) sees the run under the job
    seen = graphql(webserver, RUN, {"id": run_id})["runOrError"]
    assert seen["pipelineName"] == "nightly_sleep"
    assert seen["repositoryOrigin"] == {
        "repositoryLocationName": "anima_pipeline",
        "repositoryName": "__repository__",
    }
    # ... whose partitions start at the demo's first day
    keys = graphql(webserver, JOB_PARTITIONS)["pipelineOrError"]["partitionKeysOrError"]["partitionKeys"]
    assert keys[0] == "2026-11-16"
    # ... and can re-execute it ("Re-execute all" in the UI is this mutation)
    launched = graphql(webserver, REEXECUTE, {"parent": run_id})["launchPipelineReexecution"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    child = launched["run"]["runId"]
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        status = graphql(webserver, RUN, {"id": child})["runOrError"]
        if status["status"] in ("SUCCESS", "FAILURE", "CANCELED"):
            break
        time.sleep(0.25)
    assert status["status"] == "SUCCESS", status
    tags = {t["key"]: t["value"] for t in status["tags"]}
    assert tags["dagster/parent_run_id"] == run_id and tags["anima/trigger"] == "ui"


def test_sigterm_stops_anima_sleep_and_the_next_run_carries_on(
    demo_env: dict[str, str], tmp_path: Path
) -> None:
    archive = REPO / "anima_pipeline" / "sample" / "week.archive.jsonl"
    assert invoke_cli(["import", str(archive)], demo_env).returncode == 0
    # slow each step down so the signal lands inside the night (the fault is injected by a
    # sitecustomize on the child's path, not by changing the code under test)
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import time\n"
        "from anima_pipeline.night import frame as night\n"
        "_run_step = night.run_step\n"
        "def run_step(*a, **k):\n"
        "    time.sleep(0.4)\n"
        "    return _run_step(*a, **k)\n"
        "night.run_step = run_step\n"
    )
    slow = {**demo_env, "PYTHONPATH": f"{hook}{os.pathsep}{REPO}"}
    args = [*CLI, "sleep", "--from", "2026-11-16", "--to", "2026-11-23"]
    proc = subprocess.Popen(args, env=slow, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with psycopg.connect(demo_env["ANIMA_DATABASE_URL"], autocommit=True) as conn:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:  # wait until the second night is under way
            done = conn.execute(
                "SELECT count(*) FROM sleep_state WHERE status = 'done' AND day > '2026-11-16'"
            ).fetchone()[0]
            if done:
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.2)
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=30)
    elapsed = time.monotonic() - sent
    assert elapsed < 10, elapsed
    assert proc.returncode == 128 + signal.SIGTERM, (proc.returncode, err[-2000:])
    assert "stopped by SIGTERM" in err

    with _instance(demo_env) as instance:
        [run] = instance.get_runs(filters=dg.RunsFilter(job_name="nightly_sleep"))
        assert run.status == dg.DagsterRunStatus.CANCELED
        events = {r.dagster_event.event_type_value for r in instance.all_logs(run.run_id) if r.dagster_event}
        assert "STEP_UP_FOR_RETRY" not in events  # a termination is never retried
    with psycopg.connect(demo_env["ANIMA_DATABASE_URL"]) as conn:
        running = conn.execute("SELECT count(*) FROM sleep_state WHERE status = 'running'").fetchone()[0]
    assert running == 0  # nothing is left marked as running: the interrupted night is failed
    with psycopg.connect(demo_env["ANIMA_DATABASE_URL"]) as conn:
        interrupted = conn.execute(
            "SELECT count(*) FROM sleep_state WHERE step = 'night' AND status = 'failed' AND error LIKE '%%interrupted%%'"
        ).fetchone()[0]
    assert interrupted == 1

    again = invoke_cli(["sleep", "--from", "2026-11-16", "--to", "2026-11-23"], demo_env)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    with psycopg.connect(demo_env["ANIMA_DATABASE_URL"]) as conn:
        nights = conn.execute(
            "SELECT count(*) FROM sleep_state WHERE anima_id = 'aria' AND step = 'night' "
            "AND status IN ('done', 'skipped')"
        ).fetchone()[0]
    assert nights == 8  # every night over (one demo day is quiet: skipped)

    # what the range run wrote to Dagster's event log: one planned event per asset for the
    # whole range, and a materialization per (day, step) only where an anima had work, but
    # every step on every day, a quiet (day, step) with zeros: the partitions read the same
    # however the days were run
    days = [f"2026-11-{d}" for d in range(16, 24)]
    with _instance(demo_env) as instance:
        latest = instance.get_runs(filters=dg.RunsFilter(job_name="nightly_sleep"), limit=1)[0]
        planned = [
            r.dagster_event.event_specific_data
            for r in instance.all_logs(latest.run_id)
            if r.dagster_event and r.dagster_event.event_type_value == "ASSET_MATERIALIZATION_PLANNED"
        ]
        assert len(planned) == 14
        assert all(sorted(p.partitions_subset.get_partition_keys()) == days for p in planned)
        last = dg.AssetKey(["self_blocks", "refreshed"])
        assert set(days) <= instance.get_materialized_partitions(last)
        cleaned = instance.get_materialized_partitions(dg.AssetKey(["conversations", "cleaned"]))
    with psycopg.connect(demo_env["ANIMA_DATABASE_URL"]) as conn:
        talk = {
            r[0].isoformat()
            for r in conn.execute(
                "SELECT DISTINCT day FROM sleep_state WHERE step = 'conversations/cleaned' AND status = 'done'"
            )
        }
    assert talk and set(days) <= cleaned and talk < set(days)  # quiet days included


PARTITION_STATS = """
query($path: [String!]!) {
  assetNodeOrError(assetKey: {path: $path}) {
    ... on AssetNode { partitionStats { numMaterialized numFailed numMaterializing } }
  }
}"""


def test_a_cli_range_and_a_ui_backfill_leave_every_step_of_every_day_materialized(
    demo_env: dict[str, str], tmp_path: Path
) -> None:
    """However a day was run (a CLI range, a UI backfill over overlapping days), a processed
    day shows every step materialized in the UI, and the backfill's run carries the anima tags."""
    from anima_pipeline.core.steps import STEP_ORDER

    archive = REPO / "anima_pipeline" / "sample" / "week.archive.jsonl"
    assert invoke_cli(["import", str(archive)], demo_env).returncode == 0
    slept = invoke_cli(["sleep", "--from", "2026-11-16", "--to", "2026-11-20"], demo_env)
    assert slept.returncode == 0, slept.stderr[-2000:]
    env = dev_env(
        tmp_path / "webserver-home",  # another host's home: the first day comes from the database
        Path(demo_env["DAGSTER_HOME"]),
        ANIMA_DATABASE_URL=demo_env["ANIMA_DATABASE_URL"],
    )
    env = fast_daemon(env, tmp_path / "daemon-hook")  # the backfill daemon ticks every second, not 30
    backfill_days = [f"2026-11-{d}" for d in range(19, 24)]  # overlaps the CLI's 19th and 20th
    with dagster_dev(env, tmp_path / "dg-dev.log") as url:
        params = {
            "assetSelection": [{"path": key.split("/")} for key in STEP_ORDER],
            "partitionNames": backfill_days,
            "fromFailure": False,
        }
        launched = graphql(url, LAUNCH, {"params": params})["launchPartitionBackfill"]
        assert launched["__typename"] == "LaunchBackfillSuccess", launched
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            state = graphql(url, BACKFILL, {"id": launched["backfillId"]})["partitionBackfillOrError"]
            if state["status"] not in ("REQUESTED", "IN_PROGRESS"):
                break
            time.sleep(0.25)
        assert state["status"] in ("COMPLETED", "COMPLETED_SUCCESS"), state
        for key in STEP_ORDER:  # what the asset's partition bar shows: 8 days, none failed
            stats = graphql(url, PARTITION_STATS, {"path": key.split("/")})["assetNodeOrError"][
                "partitionStats"
            ]
            assert stats == {"numMaterialized": 8, "numFailed": 0, "numMaterializing": 0}, (key, stats)
    with _instance(demo_env) as instance:
        [run_id] = [r["runId"] for r in state["runs"]]
        tags = instance.get_run_by_id(run_id).tags
        assert tags["anima/trigger"] == "backfill" and tags["anima/engine"] == "offline", tags
        assert tags["anima/mode"] == "full"  # a UI launch is full unless its config says otherwise
