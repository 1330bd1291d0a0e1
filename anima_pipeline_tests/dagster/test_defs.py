"""The Dagster definitions without running a night: what loads, what the UI shows, the
schedule, the storage choice of dagster.yaml, and the runner's pure helpers."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, date, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import dagster as dg
import psycopg
import pytest

from anima_pipeline import definitions
from anima_pipeline.config import Settings
from anima_pipeline.core.steps import STEP_ORDER
from anima_pipeline.defs import instance as dinstance
from anima_pipeline.defs.night import assets as night_assets
from anima_pipeline.defs.night.assets import ONE_STEP
from anima_pipeline.defs.night.partitions import night_partitions
from anima_pipeline.defs.night.resources import EngineResource, build_resources
from anima_pipeline.llm.contract import Usage
from anima_pipeline.llm.failures import BudgetExceeded, RetriesExhausted
from anima_pipeline.night import failure_kinds, registry, runner
from anima_pipeline.night.frame import StepResult
from anima_pipeline.night.registry import STEPS
from testkit.hygiene import signals_kept

REPO = Path(__file__).resolve().parents[2]
SHANGHAI = ZoneInfo("Asia/Shanghai")
EXPECTED_KEYS = {
    "conversations/cleaned",
    "semantic_memory/extracted",
    "emotional_anchors/marked",
    "autobiographical_memory/narrated",
    "self_blocks/autobiography_summary",
    "semantic_memory/deconflicted",
    "semantic_memory/split",
    "semantic_memory/merged",
    "semantic_memory/pins_reviewed",
    "memory_references/synced",
    "temporal_summaries/day",
    "temporal_summaries/cascade",
    "dreams/journal",
    "self_blocks/refreshed",
}


@pytest.fixture(scope="module")
def loaded() -> dg.Definitions:
    """The code location's definitions, as Dagster loads them (a pinned first day: no
    database is asked; the tests below that read it from one set it up themselves)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ANIMA_START_DATE", "2026-01-01")
        mp.delenv("ANIMA_DATABASE_URL", raising=False)
        return definitions.defs()


@pytest.fixture(scope="module")
def repo_def(loaded: dg.Definitions):
    return loaded.get_repository_def()


@pytest.fixture(scope="module")
def night_def(loaded: dg.Definitions) -> dg.AssetsDefinition:
    return loaded.resolve_assets_def(dg.AssetKey(["semantic_memory", "extracted"]))


def shanghai_settings(**kw) -> Settings:
    return Settings(timezone="Asia/Shanghai", **kw)


def night_repo(settings: Settings):
    from anima_pipeline.defs.night.build import night_definitions

    merged = dg.Definitions.merge(
        night_definitions(settings), dg.Definitions(resources=build_resources(settings))
    )
    return merged.get_repository_def()


def test_definitions_load_and_validate(loaded: dg.Definitions, repo_def) -> None:
    dg.Definitions.validate_loadable(loaded)
    keys = {k.to_user_string() for k in repo_def.asset_graph.get_all_asset_keys()}
    assert keys == EXPECTED_KEYS == set(STEP_ORDER)
    assert set(loaded.resources) == {"memory_store", "anima_engine"}
    assert sorted(s.name for s in repo_def.schedule_defs) == [
        "last_night_check_schedule",
        "nightly_sleep_schedule",
    ]


def test_one_multi_asset_follows_the_registry(repo_def, night_def) -> None:
    night = night_def
    # no two nodes of the asset graph read the same (the graph shows a key's last part)
    labels = [k.path[-1] for k in night.keys]
    assert len(labels) == len(set(labels)), sorted(labels)
    assert night.op.name == "night" and ONE_STEP in (night.op.description or "")
    assert ONE_STEP in (repo_def.get_job("nightly_sleep").description or "")
    assert {k.to_user_string() for k in night.keys} == EXPECTED_KEYS
    specs = {s.key.to_user_string(): s for s in night.specs}
    for step in STEPS:
        spec = specs[step.key]
        assert {d.asset_key.to_user_string() for d in spec.deps} == set(step.deps), step.key
        assert spec.group_name == step.group
        # the step's own words, then why the run's page shows one step, `night`, for all 14
        assert spec.description == f"{step.description}\n\n{ONE_STEP}"
        assert "one Dagster step, `night`" in ONE_STEP and "run_log" in ONE_STEP
        assert spec.kinds == {"postgres", "python"}
        [ref] = spec.metadata["dagster/code_references"].code_references
        source = Path(ref.file_path).read_text().splitlines()
        assert source[ref.line_number - 1].startswith(f"def {step.fn}("), step.key  # the step function
    # the step DAG of night/registry.py, spot-checked: the cascade waits for deep sleep and the day summary
    graph = repo_def.asset_graph
    cascade = dg.AssetKey(["temporal_summaries", "cascade"])
    assert {k.to_user_string() for k in graph.get(cascade).parent_keys} == {
        "semantic_memory/pins_reviewed",
        "temporal_summaries/day",
    }


def test_backfill_subset_and_retry_policies(night_def) -> None:
    night = night_def
    assert night.can_subset
    assert night.backfill_policy == dg.BackfillPolicy.single_run()
    assert night.op.retry_policy is None  # Dagster would retry interrupts too; the body asks itself
    policy = night_assets.RETRY_POLICY
    assert policy is not None and policy.max_retries >= 1 and policy.backoff == dg.Backoff.EXPONENTIAL


def test_daily_partitions_in_shanghai() -> None:
    parts = night_partitions(shanghai_settings(start_date=date(2026, 1, 1)))
    assert isinstance(parts, dg.DailyPartitionsDefinition)
    assert parts.timezone == "Asia/Shanghai"
    window = parts.time_window_for_partition_key("2026-11-28")
    assert window.start == datetime(2026, 11, 28, tzinfo=SHANGHAI)
    assert window.end == datetime(2026, 11, 29, tzinfo=SHANGHAI)
    # the partition of a chat at 23:30 UTC on Nov 27 is Nov 28 (07:30 in Shanghai)
    assert (
        parts.get_partition_key_for_timestamp(datetime(2026, 11, 27, 23, 30, tzinfo=UTC).timestamp())
        == "2026-11-28"
    )


def test_schedule_requests_the_previous_day() -> None:
    repo_def = night_repo(shanghai_settings(start_date=date(2026, 1, 1)))
    schedule = repo_def.get_schedule_def("nightly_sleep_schedule")
    assert schedule.cron_schedule == "0 2 * * *"
    assert schedule.execution_timezone == "Asia/Shanghai"
    job = repo_def.get_job(schedule.job_name)
    assert {k.to_user_string() for k in job.asset_layer.selected_asset_keys} == EXPECTED_KEYS
    for tick in (datetime(2026, 11, 29, 2, 0, tzinfo=SHANGHAI), datetime(2026, 11, 28, 18, 0, tzinfo=UTC)):
        ctx = dg.build_schedule_context(repository_def=repo_def, scheduled_execution_time=tick)
        with signals_kept():
            [request] = schedule.evaluate_tick(ctx).run_requests
        assert request.partition_key == "2026-11-28"
        assert request.run_config == {"ops": {"night": {"config": {"mode": "scheduled"}}}}
        assert request.tags["anima/trigger"] == "schedule" and request.tags["anima/day"] == "2026-11-28"


def test_schedule_splits_a_day_into_shard_runs() -> None:
    repo = night_repo(shanghai_settings(start_date=date(2026, 1, 1), night_shards=3))
    schedule = repo.get_schedule_def("nightly_sleep_schedule")
    tick = datetime(2026, 11, 29, 2, 0, tzinfo=SHANGHAI)
    with signals_kept():
        requests = schedule.evaluate_tick(
            dg.build_schedule_context(repository_def=repo, scheduled_execution_time=tick)
        ).run_requests
    assert [r.tags["anima/shard"] for r in requests] == ["0/3", "1/3", "2/3"]
    assert {r.partition_key for r in requests} == {"2026-11-28"}
    assert len({r.run_key for r in requests}) == 3
    assert [r.run_config["ops"]["night"]["config"]["shard"] for r in requests] == ["0/3", "1/3", "2/3"]


def test_partitions_start_at_the_first_day_in_the_database(db_url: str, tmp_path: Path) -> None:
    """Two homes (a webserver on one host, the daemon on another) against one database see
    the same first day, moved earlier only, through the audit log."""
    from anima_pipeline.store.calendar import move_first_message
    from anima_pipeline.store.db import Database
    from anima_pipeline.store.events import Audit

    def on(home: str, **kw) -> Settings:
        return shanghai_settings(home=tmp_path / home, database_url=db_url, **kw)

    def move(at: datetime) -> bool:
        with Database(db_url, max_size=1) as db, db.transaction() as conn:
            return move_first_message(conn, Audit(conn=conn, anima_id="", run_id="t", step="t"), at, "test")

    fresh = night_partitions(on("webserver"))  # nothing imported: yesterday only
    assert fresh.get_first_partition_key() == fresh.get_last_partition_key()
    assert move(datetime(2026, 11, 16, 9, 0, tzinfo=SHANGHAI))
    assert night_partitions(on("webserver")).get_first_partition_key() == "2026-11-16"
    assert night_partitions(on("daemon")).get_first_partition_key() == "2026-11-16"
    # older data moves the start earlier (those days can be backfilled), newer data does not move it
    assert not move(datetime(2026, 11, 20, tzinfo=SHANGHAI))
    # 23:30 UTC on Sep 30 is Oct 1 in Shanghai: the day is local
    assert move(datetime(2026, 9, 30, 23, 30, tzinfo=UTC))
    assert {night_partitions(on(h)).get_first_partition_key() for h in ("webserver", "daemon")} == {
        "2026-10-01"
    }
    with psycopg.connect(db_url) as conn:
        events = conn.execute(
            "SELECT op, before->>'first_message_at', after->>'source' FROM memory_event"
            " WHERE table_name = 'store_calendar' ORDER BY id"
        ).fetchall()
    assert [(op, before is None, source) for op, before, source in events] == [
        ("move", True, "test"),
        ("move", False, "test"),
    ]
    # ANIMA_START_DATE wins, and asks no database at all
    pinned = shanghai_settings(
        home=tmp_path / "x", database_url="postgresql://nobody@127.0.0.1:1/gone", start_date=date(2026, 11, 1)
    )
    assert night_partitions(pinned).get_first_partition_key() == "2026-11-01"


def test_an_unreachable_database_stops_the_load_naming_it(tmp_path: Path) -> None:
    from anima_pipeline.core.errors import StoreError

    gone = shanghai_settings(home=tmp_path, database_url="postgresql://nobody@127.0.0.1:1/anima_gone")
    with pytest.raises(StoreError, match=r"'anima_gone' at 127\.0\.0\.1:1 cannot be reached"):
        night_partitions(gone)


def test_the_schedule_reads_the_first_day_at_each_tick(db_url: str, tmp_path: Path) -> None:
    """A first day moved earlier after the load is seen by the schedule without a reload."""
    from anima_pipeline.memory.facade import AnimaMemory

    settings = shanghai_settings(home=tmp_path, database_url=db_url)
    with AnimaMemory(db_url, "aria", settings=settings) as memory:
        memory.append(
            {
                "conversation_id": "c",
                "message_id": "m1",
                "role": "user",
                "content": "hi",
                "created_at": "2026-11-28T10:00:00+08:00",
            }
        )
        repo = night_repo(settings)  # loaded: the first day is the 28th
        schedule = repo.get_schedule_def("nightly_sleep_schedule")

        def tick(day: int) -> list:
            at = datetime(2026, 11, day, 2, 0, tzinfo=SHANGHAI)
            ctx = dg.build_schedule_context(repository_def=repo, scheduled_execution_time=at)
            with signals_kept():
                result = schedule.evaluate_tick(ctx)
            return (
                [result.skip_message]
                if result.skip_message
                else [r.partition_key for r in result.run_requests]
            )

        assert tick(28) == ["2026-11-27 is before the first day of data, 2026-11-28"]
        assert tick(29) == ["2026-11-28"]
        memory.append(
            {
                "conversation_id": "c",
                "message_id": "m0",
                "role": "user",
                "content": "earlier",
                "created_at": "2026-11-20T10:00:00+08:00",
            }
        )
        # the same definitions see it at the next tick (Dagster refuses a partition the loaded
        # definitions do not have: the skip says to reload)
        [reason] = tick(28)
        assert "moved to 2026-11-20 after the code location loaded" in reason and "reload" in reason
        repo = night_repo(settings)  # reloaded: the day can sleep
        schedule = repo.get_schedule_def("nightly_sleep_schedule")
        assert tick(28) == ["2026-11-27"]


def test_night_config_defaults() -> None:
    config = night_assets.NightConfig()
    assert (config.mode, config.force, config.animas) == ("full", False, [])
    assert config.runner_mode() == "full"
    assert night_assets.NightConfig(mode="scheduled").runner_mode() is None


def test_checks_are_specs_of_the_night_and_scope_is_blocking(night_def) -> None:
    specs = {s.name: s for s in night_def.check_specs}
    assert set(specs) == {
        "no_duplicate_active_memories",
        "superseded_by_chains_end",
        "deep_sleep_input_within_limits",
        "light_sleep_within_scope",
        "memory_sources_exist",
        "model_declined",
    }
    assert [n for n, s in specs.items() if s.blocking] == ["light_sleep_within_scope"]


def test_last_night_check_fails_after_six_without_the_night(repo_def, tmp_path: Path) -> None:
    from anima_pipeline.defs.night import freshness

    checks = {(k.asset_key.to_user_string(), k.name) for k in repo_def.asset_graph.asset_check_keys}
    assert ("self_blocks/refreshed", freshness.CHECK_NAME) in checks
    assert repo_def.get_schedule_def(freshness.SCHEDULE_NAME).cron_schedule == "5 6 * * *"
    job = repo_def.get_job("nightly_sleep")  # it watches the night; it is not part of it
    assert freshness.CHECK_NAME not in {k.name for k in job.asset_layer.asset_graph.asset_check_keys}
    key = dg.AssetKey(["self_blocks", "refreshed"])
    first = date(2026, 11, 1)
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        at_7 = datetime(2026, 11, 29, 7, 0, tzinfo=SHANGHAI)
        at_5 = datetime(2026, 11, 29, 5, 0, tzinfo=SHANGHAI)
        missing = freshness.evaluate(instance, key, at_7, first)
        assert not missing.passed and "2026-11-28" in (missing.description or "")
        instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=key, partition="2026-11-27"))
        assert freshness.evaluate(instance, key, at_5, first).passed  # before 06:00: the 27th is enough
        assert not freshness.evaluate(instance, key, at_7, first).passed
        instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=key, partition="2026-11-28"))
        assert freshness.evaluate(instance, key, at_7, first).passed
        assert freshness.evaluate(instance, key, at_7, date(2026, 11, 29)).passed  # no data yet


def test_the_last_night_check_reads_the_first_day_when_it_runs(tmp_path: Path) -> None:
    from anima_pipeline.defs.night import freshness

    days = iter([date(2999, 1, 1), date(2000, 1, 1)])  # what the database says at each evaluation
    check, _ = freshness.build_freshness(
        dg.AssetKey(["self_blocks", "refreshed"]), "Asia/Shanghai", lambda: next(days)
    )
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        ctx = dg.build_asset_check_context(instance=instance)
        early = check(ctx)
        assert early.passed and "before the first day of data (2999-01-01)" in (early.description or "")
        assert not check(ctx).passed  # the same definition, a first day read anew: the night is missing


def test_at_least_four_checks_on_night_keys(repo_def) -> None:
    checks = {(k.asset_key.to_user_string(), k.name) for k in repo_def.asset_graph.asset_check_keys}
    assert len(checks) >= 4
    assert {
        ("semantic_memory/merged", "no_duplicate_active_memories"),
        ("semantic_memory/pins_reviewed", "superseded_by_chains_end"),
        ("semantic_memory/extracted", "deep_sleep_input_within_limits"),
        ("semantic_memory/extracted", "light_sleep_within_scope"),
        ("conversations/cleaned", "memory_sources_exist"),
    } <= checks


def test_api_key_is_an_env_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-ant-test-never-print-me"
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-oa-never-print-me")
    monkeypatch.setenv("ANIMA_DATABASE_URL", "postgresql://u:pw-never-print@127.0.0.1/x")
    res = build_resources()
    engine = res["anima_engine"]
    assert isinstance(engine.anthropic_api_key, dg.EnvVar) and isinstance(engine.openai_api_key, dg.EnvVar)
    assert "sk-oa-never-print-me" not in repr(res)
    assert isinstance(res["memory_store"].database_url, dg.EnvVar)
    assert secret not in repr(res) and "pw-never-print" not in repr(res)
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    assert build_resources()["anima_engine"].anthropic_api_key is None


def test_engine_resource_applies_to_settings() -> None:
    from anima_pipeline.config import Settings

    s = EngineResource(engine="anthropic", model="m", anthropic_api_key="sk-zz-secret", budget_usd=1.5).apply(
        Settings()
    )
    assert (s.engine, s.model, s.budget_usd) == ("anthropic", "m", 1.5)
    assert s.anthropic_api_key.get_secret_value() == "sk-zz-secret" and "sk-zz" not in repr(s)
    with pytest.raises(ValueError, match="ANIMA_ENGINE"):
        EngineResource(engine="gpt").apply(Settings())
    # an OpenAI-compatible server: its key and URL carried; a model nobody named stays unnamed
    local = EngineResource(
        engine="openai", openai_api_key="sk-oa-secret", openai_base_url="http://127.0.0.1:1/v1"
    )
    s = local.apply(Settings())
    assert (s.engine, s.openai_base_url) == (
        "openai",
        "http://127.0.0.1:1/v1",
    ) and "model" not in s.model_fields_set
    assert s.openai_api_key is not None and s.openai_api_key.get_secret_value() == "sk-oa-secret"
    assert local.apply(Settings(model="llama3.1:8b")).model == "llama3.1:8b"


# ---- Dagster's own storage (dagster.yaml) -------------------------------------------------


def test_storage_choice_follows_the_environment(tmp_path: Path) -> None:
    kind, cfg = dinstance.storage_choice({"DAGSTER_HOME": str(tmp_path)})
    assert (kind, cfg) == ("sqlite", {"base_dir": str(tmp_path / "storage")})
    kind, cfg = dinstance.storage_choice({"ANIMA_HOME": str(tmp_path)})
    assert cfg["base_dir"] == str(tmp_path / "dagster" / "storage")
    kind, cfg = dinstance.storage_choice(
        {
            "DAGSTER_PG_URL": "postgresql://postgres@127.0.0.1:5432/dagster",
            "ANIMA_DATABASE_URL": "postgresql://postgres@127.0.0.1:5432/anima",
        }
    )
    assert (kind, cfg) == (
        "postgres",
        {"postgres_url": "postgresql+psycopg2://postgres@127.0.0.1:5432/dagster"},
    )
    with pytest.raises(dinstance.StorageConfigError, match="separate database"):
        dinstance.storage_choice(
            {
                "DAGSTER_PG_URL": "postgresql://postgres@127.0.0.1/anima",
                "ANIMA_DATABASE_URL": "postgresql://postgres@127.0.0.1:5432/anima",
            }
        )
    # a URL the guard cannot read is refused, naming the variable (never compared as text)
    for bad in ("postgresql://[::1", "garbage = = ="):
        with pytest.raises(dinstance.StorageConfigError, match="DAGSTER_PG_URL is not a PostgreSQL URL"):
            dinstance.storage_choice(
                {"DAGSTER_PG_URL": bad, "ANIMA_DATABASE_URL": "postgresql://postgres@127.0.0.1:5432/anima"}
            )
    with pytest.raises(dinstance.StorageConfigError, match="ANIMA_DATABASE_URL is not"):
        dinstance.storage_choice(
            {"DAGSTER_PG_URL": "postgresql://postgres@127.0.0.1/dagster", "ANIMA_DATABASE_URL": "nope = ="}
        )


def test_dagster_yaml_gives_sqlite_under_dagster_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dagster._core.instance.ref import InstanceRef
    from dagster._core.storage.runs import SqliteRunStorage

    # the one template is the package's (package data); the checkout's top-level dagster.yaml,
    # what `dg dev` reads there, is a link to it
    assert dinstance.DAGSTER_YAML_PATH == REPO / "anima_pipeline" / "defs" / "dagster.yaml"
    assert (REPO / "dagster.yaml").is_symlink()
    assert (REPO / "dagster.yaml").resolve() == dinstance.DAGSTER_YAML_PATH
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    monkeypatch.delenv("DAGSTER_PG_URL", raising=False)
    with dinstance.get_instance() as instance:
        assert isinstance(instance.run_storage, SqliteRunStorage)
        assert not instance.telemetry_enabled  # the template's setting, not Dagster's default
    assert (tmp_path / "storage").is_dir()
    assert not (tmp_path / "dagster.yaml").exists()  # nothing copied into the home
    # `dg dev` with DAGSTER_HOME unset: a temporary instance configured by ./dagster.yaml,
    # storing where the CLI's default home does
    monkeypatch.delenv("DAGSTER_HOME")
    monkeypatch.setenv("ANIMA_HOME", str(tmp_path / "anima"))
    with dg.DagsterInstance.from_ref(
        InstanceRef.from_dir(str(tmp_path / "tmp_home"), config_dir=str(REPO))
    ) as instance:
        assert isinstance(instance.run_storage, SqliteRunStorage)
    assert (tmp_path / "anima" / "dagster" / "storage").is_dir()


def test_a_home_with_its_own_dagster_yaml_keeps_it(tmp_path: Path) -> None:
    home = dinstance.dagster_home({"ANIMA_HOME": str(tmp_path)})
    assert home == tmp_path / "dagster"
    assert dinstance.config_dir(home) == REPO / "anima_pipeline" / "defs"
    (home / "dagster.yaml").write_text(dinstance.DAGSTER_YAML)
    assert dinstance.config_dir(home) == home


def test_dagster_cli_validates_the_workspace(db_url: str, tmp_path: Path) -> None:
    (tmp_path / "dagster.yaml").write_text(dinstance.DAGSTER_YAML)
    # the code location reads the store's first day from the memory database as it loads
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "ANIMA_DATABASE_URL": db_url}
    env.pop("DAGSTER_PG_URL", None)
    env.pop("ANIMA_START_DATE", None)
    dagster = Path(sys.executable).parent / "dagster"
    proc = subprocess.run(
        [str(dagster), "definitions", "validate", "-w", "workspace.yaml"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Validation successful" in proc.stdout + proc.stderr


# ---- runner helpers (no database) ---------------------------------------------------------


def test_select_steps_keeps_registry_order() -> None:
    picked = registry.select_steps(["dreams/journal", "conversations/cleaned", "semantic_memory/merged"])
    assert [s.key for s in picked] == ["conversations/cleaned", "semantic_memory/merged", "dreams/journal"]
    assert [s.key for s in registry.select_steps(None)] == list(STEP_ORDER)
    with pytest.raises(ValueError, match="unknown step"):
        registry.select_steps(["semantic_memory/typo"])


def test_summarize_sums_over_animas() -> None:
    day = date(2026, 11, 28)
    results = [
        StepResult(
            step="s",
            anima_id="a",
            day=day,
            status="done",
            duration_s=0.5,
            stats={
                "created": 2,
                "input_chars": 100,
                "llm_calls": 1,
                "tokens_in": 10,
                "cost_usd": 0.25,
                "size_band": "normal",
                "anchors": 1,
            },
        ),
        StepResult(
            step="s",
            anima_id="b",
            day=day,
            status="skipped",
            duration_s=0.25,
            stats={"created": 3, "merged": 1, "already_done": 1},
            usage=Usage(calls=4),
        ),
    ]
    s = runner.summarize(results)
    assert s["created"] == 5 and s["merged"] == 1 and s["input_chars"] == 100
    assert s["llm_calls"] == 5 and s["tokens_in"] == 10 and s["cost_usd"] == 0.25
    assert s["duration_s"] == 0.75 and s["animas"] == 2 and s["already_done"] == 1
    assert s["split"] == 0 and s["skipped_rounds"] == 0 and s["anchors"] == 1
    assert "size_band" not in s
    empty = runner.summarize([])
    assert all(empty[k] == 0 for k in runner.SUMMARY_KEYS) and empty["animas"] == 0


def test_transient_errors_are_the_only_retried_ones() -> None:
    day = date(2026, 11, 28)
    failure = failure_kinds.failure
    step = "semantic_memory/extracted"
    budget = failure_kinds.NightFailed(day, [failure("a", step, BudgetExceeded("spent", step="x"))], [])
    overload = failure_kinds.NightFailed(day, [failure("a", step, RetriesExhausted("529", step="x"))], [])
    both = failure_kinds.NightFailed(
        day,
        [failure("a", step, RetriesExhausted("529", step="x")), failure("b", step, BudgetExceeded("spent"))],
        [],
    )
    lost = failure_kinds.NightFailed(day, [failure("a", step, psycopg.OperationalError("server closed"))], [])
    assert not failure_kinds.is_transient(budget)
    assert not failure_kinds.is_transient(overload)  # the engine retried it per request already
    assert failure_kinds.is_transient(lost)  # a lost database connection is the night's to retry
    assert not failure_kinds.is_transient(both)  # a retry would spend again on the budget failure
    assert not failure_kinds.is_transient(ValueError("bad setting"))


def test_launch_refuses_days_that_are_not_over() -> None:
    from anima_pipeline.defs.night.launch import check_days, check_steps

    parts = night_partitions(shanghai_settings(start_date=date(2026, 1, 1)))
    with dg.partition_loading_context(effective_dt=datetime(2026, 11, 29, 1, 0, tzinfo=SHANGHAI)):
        with pytest.raises(ValueError, match="not over yet.*latest day that can sleep is 2026-11-28"):
            check_days(parts, date(2026, 11, 28), date(2026, 11, 29), "Asia/Shanghai")
        with pytest.raises(ValueError, match="before the first day of data"):
            check_days(parts, date(2000, 1, 1), date(2000, 1, 1), "Asia/Shanghai")
        with pytest.raises(ValueError, match="unknown step"):
            check_steps(["semantic_memory/typo"])


def test_runs_left_started_by_a_dead_cli_process_are_marked_failed(tmp_path: Path) -> None:
    import socket

    from anima_pipeline.defs.night import launch

    @dg.op
    def noop() -> None:
        return None

    @dg.job(name="nightly_sleep")
    def stand_in() -> None:  # a job of the same name: only the run records matter here
        noop()

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()  # a pid that was ours and is dead now
    host = socket.gethostname()
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:

        def started(pid: int, status: dg.DagsterRunStatus, **tags: str) -> str:
            run = instance.create_run_for_job(
                stand_in,
                status=status,
                tags={"anima/trigger": "cli", "anima/host": host, "anima/pid": str(pid), **tags},
            )
            return run.run_id

        dead = started(gone.pid, dg.DagsterRunStatus.STARTED)
        canceling = started(gone.pid, dg.DagsterRunStatus.CANCELING)
        alive = started(os.getppid(), dg.DagsterRunStatus.STARTED)  # pytest's parent lives
        elsewhere = started(gone.pid, dg.DagsterRunStatus.STARTED, **{"anima/host": "another-host"})
        assert sorted(launch.mark_dead_runs(instance)) == sorted([dead, canceling])
        status = {r: instance.get_run_by_id(r).status for r in (dead, canceling, alive, elsewhere)}
        assert status == {
            dead: dg.DagsterRunStatus.FAILURE,
            canceling: dg.DagsterRunStatus.CANCELED,
            alive: dg.DagsterRunStatus.STARTED,
            elsewhere: dg.DagsterRunStatus.STARTED,  # not this host's to judge
        }
        assert launch.mark_dead_runs(instance) == []  # once


def test_importing_the_definitions_opens_no_connection(tmp_path: Path) -> None:
    """The code location's module builds nothing at import: a database that only listens
    (it would see any connection attempt) is not contacted until Dagster calls `defs`."""
    import socket

    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "ANIMA_START_DATE"}
    env.update(
        ANIMA_DATABASE_URL=f"postgresql://nobody@127.0.0.1:{port}/anima_listening",
        ANIMA_HOME=str(tmp_path),
        PGCONNECT_TIMEOUT="2",
    )

    def accepted() -> int:
        n = 0
        try:
            while True:
                conn, _ = listener.accept()
                conn.close()  # the client sees the server go away: its error names the database
                n += 1
        except TimeoutError:
            return n

    code = "import anima_pipeline.definitions as d; print(type(d.defs).__name__)"
    imported = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert imported.returncode == 0, imported.stderr[-2000:]
    assert imported.stdout.strip() == "LazyDefinitions"
    assert accepted() == 0
    # ... and when Dagster loads it, it asks the database, and fails naming it
    proc = subprocess.Popen(
        [sys.executable, "-c", "import anima_pipeline.definitions as d; d.defs()"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen = 0
    while proc.poll() is None:
        seen += accepted()
    seen += accepted()
    listener.close()
    _, err = proc.communicate(timeout=60)
    assert seen >= 1 and proc.returncode != 0
    assert f"'anima_listening' at 127.0.0.1:{port} cannot be reached" in err, err[-2000:]
