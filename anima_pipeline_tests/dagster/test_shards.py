"""Two shards of one day at once, through a real Dagster instance (dagster-postgres, as
docs/deploy.md sets it up): two `anima sleep --shard i/2` processes started together, each
a run of the nightly_sleep job tagged anima/shard and anima/day; every anima with talk that
day is done by exactly one of them, and together they do the whole day."""

from __future__ import annotations

import json
import subprocess
import zlib
from pathlib import Path

import dagster as dg
import psycopg
import pytest

from anima_pipeline_tests.conftest import CLI, REPO, cli_env

WEEK = REPO / "anima_pipeline" / "sample" / "week.archive.jsonl"
DAY = "2026-11-17"
ANIMAS = [f"a{i}" for i in range(6)]  # crc32 mod 2 puts a0-a3 in shard 1, a4-a5 in shard 0


def _archive(path: Path) -> Path:
    """The demo's first two days, said by six animas (ids relabelled)."""
    lines = []
    for line in WEEK.read_text(encoding="utf-8").splitlines():
        rec = json.loads(line)
        if rec["created_at"][:10] > DAY:
            continue
        for anima in ANIMAS:
            lines.append(json.dumps({**rec, **_relabel(rec, anima)}, ensure_ascii=False))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _relabel(rec: dict, anima: str) -> dict:
    return {
        "anima_id": anima,
        "conversation_id": rec["conversation_id"].replace("aria:", f"{anima}:", 1),
        "message_id": rec["message_id"].replace("aria:", f"{anima}:", 1),
    }


def test_two_shards_of_one_day_at_once_do_every_anima_once(
    db_url: str, dagster_pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert {zlib.crc32(a.encode()) % 2 for a in ANIMAS} == {0, 1}  # both shards have work
    env = cli_env(tmp_path, db_url, DAGSTER_PG_URL=dagster_pg_url, ANIMA_WORKERS="1")
    cli = CLI
    imported = subprocess.run(
        [*cli, "import", str(_archive(tmp_path / "six.jsonl"))], env=env, capture_output=True, text=True
    )
    assert imported.returncode == 0, imported.stderr
    first = subprocess.run([*cli, "sleep", "--day", "2026-11-16"], env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]

    shards = [
        subprocess.Popen(
            [*cli, "sleep", "--day", DAY, "--shard", f"{i}/2"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    outputs = [p.communicate(timeout=600) for p in shards]
    for p, (out, err) in zip(shards, outputs, strict=True):
        assert p.returncode == 0, out[-2000:] + err[-2000:]

    monkeypatch.setenv("DAGSTER_PG_URL", dagster_pg_url)
    monkeypatch.setenv("DAGSTER_HOME", env["DAGSTER_HOME"])
    from anima_pipeline.defs.instance import get_instance

    with get_instance(env) as instance:
        runs = instance.get_runs(filters=dg.RunsFilter(job_name="nightly_sleep", tags={"anima/day": DAY}))
        assert sorted(r.tags["anima/shard"] for r in runs) == ["0/2", "1/2"]
        assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
        by_shard = {r.tags["anima/shard"]: r.run_id for r in runs}
        # they overlapped: each started before the other ended
        a, b = (instance.get_run_record_by_id(r.run_id) for r in runs)
        assert a.start_time < b.end_time and b.start_time < a.end_time

    with psycopg.connect(db_url) as conn:
        steps = conn.execute(
            "SELECT anima_id, array_agg(DISTINCT run_id) AS runs, count(*) AS n FROM sleep_state "
            "WHERE day = %s AND step <> 'night' AND status = 'done' GROUP BY anima_id ORDER BY anima_id",
            (DAY,),
        ).fetchall()
        nights = dict(
            conn.execute(
                "SELECT anima_id, status FROM sleep_state WHERE day = %s AND step = 'night'", (DAY,)
            ).fetchall()
        )
        writers = dict(
            conn.execute(
                "SELECT anima_id, count(DISTINCT run_id) FROM memory_event WHERE day = %s GROUP BY anima_id",
                (DAY,),
            ).fetchall()
        )
        created = dict(
            conn.execute(
                "SELECT anima_id, count(*) FROM memory_event WHERE day = %s AND step = 'semantic_memory/extracted' "
                "AND op = 'create' GROUP BY anima_id",
                (DAY,),
            ).fetchall()
        )
    assert [r[0] for r in steps] == ANIMAS  # every anima was done ...
    for anima, runs_of, _n in steps:
        shard = f"{zlib.crc32(anima.encode()) % 2}/2"
        assert runs_of == [by_shard[shard]], anima  # ... by its own shard's run only
    assert nights == dict.fromkeys(ANIMAS, "done")
    assert writers == dict.fromkeys(ANIMAS, 1)  # one run wrote each anima's day
    assert len(set(created.values())) == 1 and set(created) == set(ANIMAS)  # same talk, same work, once


def test_the_deploy_guide_queue_limits_load(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/deploy.md's `concurrency:` block is valid dagster.yaml for this Dagster version."""
    from anima_pipeline.defs.instance import DAGSTER_YAML

    doc = (REPO / "docs" / "deploy.md").read_text()
    block = doc[doc.index("```yaml\nconcurrency:") + len("```yaml\n") :]
    block = block[: block.index("```")]
    (tmp_path / "dagster.yaml").write_text(DAGSTER_YAML + block)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    monkeypatch.delenv("DAGSTER_PG_URL", raising=False)
    from dagster._core.instance.ref import InstanceRef  # test only: the instance under a given home

    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(tmp_path))) as instance:
        settings = instance.get_concurrency_config()
        assert settings.run_queue_config.max_concurrent_runs == 8
        assert settings.pool_config.default_pool_limit == 2
