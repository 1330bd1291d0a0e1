"""`anima sleep` end to end with ANIMA_ENGINE=openai: the real openai SDK (the CLI in this
process: `invoke_cli`), pointed through OPENAI_BASE_URL at the fake chat-completions server,
recorded by Dagster; and the same scripted night through the Anthropic engine beside it, row for row."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import date
from pathlib import Path
from typing import Any

import dagster as dg
import psycopg
import pytest
from psycopg.rows import dict_row

from anima_pipeline.core.steps import STEP_ORDER
from anima_pipeline.defs.instance import get_instance
from anima_pipeline.defs.night.assets import asset_key
from anima_pipeline.defs.night.checks import CheckScope, model_declined
from anima_pipeline.store.archive import ImportStats, import_records, parse_lines
from anima_pipeline.store.db import Database
from anima_pipeline.store.events import Audit
from anima_pipeline_tests.conftest import cli_env, cloned_database, invoke_cli
from testkit import fake_chat_completions as chat
from testkit import fake_messages_api as messages

KEY = "sk-proj-test-E2E-OPENAI-9191"
ANTHROPIC_KEY = "sk-ant-test-E2E-TWIN-9292"
MODEL = "gpt-4.1-mini"
DAY = "2026-11-17"  # a day of the bundled synthetic week
CONV = "aria:2026-11-17-a"
SAMPLE = Path(__file__).resolve().parents[2] / "anima_pipeline" / "sample" / "week.archive.jsonl"
SEMANTIC = "semantic_memory/extracted"
FACT = {
    "type": "world",
    "content": "Lin Wei's mother Wang Xiulan lives in Leshan.",
    "source_sessions": [CONV],
}
MISSING = {"id": "f-999999", "reason": "test"}


def imported(db_url: str) -> None:
    db = Database(db_url, max_size=2)
    try:
        with db.transaction() as conn:
            audit = Audit(conn=conn, anima_id="", run_id="import-test", step="import")
            import_records(
                conn, parse_lines(SAMPLE.read_text().splitlines(), str(SAMPLE)), audit, ImportStats()
            )
    finally:
        db.close()


def openai_env(home: Path, db_url: str, fake: chat.FakeChatCompletions, **extra: str) -> dict[str, str]:
    settings = {
        "ANIMA_ENGINE": "openai",
        "ANIMA_MODEL": MODEL,
        "OPENAI_API_KEY": KEY,
        "OPENAI_BASE_URL": fake.url,
        "ANIMA_START_DATE": "2026-11-01",  # imported in-process, not through `anima import`
    }
    return cli_env(home, db_url, **{**settings, **extra})


def sleep(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return invoke_cli(["sleep", "--day", DAY, "--anima", "aria", *args], env)


def rows(db_url: str, sql: str, *params: Any) -> list[tuple]:
    with psycopg.connect(db_url) as conn:
        return conn.execute(sql, params).fetchall()


def state(db_url: str, step: str) -> tuple[str, str | None, dict]:
    (row,) = rows(
        db_url,
        "SELECT status, error, stats FROM sleep_state WHERE anima_id = 'aria' AND day = %s AND step = %s",
        DAY,
        step,
    )
    return row


# The same model for both APIs: stage 1 records one fact and tries to retire a memory that does
# not exist (refused by the executor), then ends; the steps that must write get the autopilot's
# write; everything else ends the turn with text.


def _stage_one(task: str, answered: bool) -> bool:
    return "Record the durable facts" in task and not answered


def openai_model(body: dict[str, Any]) -> chat.Action | None:
    msgs = body["messages"]
    task = msgs[1]["content"] if len(msgs) > 1 else ""
    if _stage_one(task, any(m["role"] == "tool" for m in msgs)):
        return chat.reply(
            chat.call("create_semantic_memory", FACT, id="t1"),
            chat.call("deprecate_semantic_memory", MISSING, id="t2"),
        )
    return chat.night_autopilot(body)


def anthropic_model(body: dict[str, Any]) -> messages.Action | None:
    first = body["messages"][0]["content"]
    answered = any(
        isinstance(b, dict) and b.get("type") == "tool_result" for m in body["messages"] for b in m["content"]
    )
    if _stage_one(first[-1]["text"], answered):
        return messages.reply(
            messages.tool_use("create_semantic_memory", FACT, id="t1"),
            messages.tool_use("deprecate_semantic_memory", MISSING, id="t2"),
        )
    return messages.sleep_autopilot(body)


def test_a_night_of_the_sample_week_through_tool_calls(db_url: str, tmp_path: Path) -> None:
    imported(db_url)
    with chat.FakeChatCompletions([chat.error(429), chat.error(500)], responder=openai_model) as fake:
        env = openai_env(tmp_path, db_url, fake, ANIMA_LOG_LEVEL="DEBUG")
        result = sleep(env)
        bodies = fake.bodies
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert KEY not in out
    tool_results = {
        m["tool_call_id"]: m["content"] for b in bodies for m in b["messages"] if m["role"] == "tool"
    }
    assert tool_results["t1"].startswith("created") or "f-" in tool_results["t1"]
    # a refused call goes back to the model as the tool's error (stage 1 with no memory of the day
    # shown offers the create tool alone: docs/cost.md)
    assert tool_results["t2"].startswith("Error:") and "deprecate_semantic_memory" in tool_results["t2"]
    assert {b["model"] for b in bodies} == {MODEL} and all(b.get("tool_choice") == "auto" for b in bodies)
    assert rows(
        db_url,
        "SELECT content, source_sessions FROM semantic_memory WHERE anima_id = 'aria' AND status = 'active'",
    ) == [(FACT["content"], [CONV])]
    night, _, _ = state(db_url, "night")
    assert night == "done"
    _, _, stats = state(db_url, SEMANTIC)
    assert stats["llm_calls"] == 2 and stats["tokens_in"] > 0 and stats["cost_usd"] > 0, stats
    # the steps that must write wrote through the model, not the offline fallback
    ((written_by,),) = rows(
        db_url, "SELECT stats->>'written_by' FROM temporal_summary WHERE anima_id = 'aria' AND level = 'day'"
    )
    assert written_by is None
    # the key is in no file under ANIMA_HOME or DAGSTER_HOME (logs, run storage, event logs)
    scanned = 0
    for home in (Path(env["ANIMA_HOME"]), Path(env["DAGSTER_HOME"])):
        for path in home.rglob("*"):
            if path.is_file():
                scanned += 1
                assert KEY.encode() not in path.read_bytes(), path
    assert scanned > 0


def test_a_text_only_model_is_declined_not_failed(db_url: str, tmp_path: Path) -> None:
    """Restraint: a model that answers text only everywhere declines each step; the night is done."""
    imported(db_url)
    with chat.FakeChatCompletions([]) as fake:  # no script: text only, every turn
        result = sleep(openai_env(tmp_path, db_url, fake))
        said = fake.responses[0]["choices"][0]["message"]["content"]
    assert result.returncode == 0, result.stdout + result.stderr
    assert state(db_url, "night")[0] == "done"
    for step in (SEMANTIC, "emotional_anchors/marked", "temporal_summaries/day"):
        status, _, stats = state(db_url, step)
        assert status == "done" and stats["declined"] == 1 and said in stats["declined_text"], (step, stats)
    ((content, marks),) = rows(
        db_url, "SELECT content, stats FROM temporal_summary WHERE anima_id = 'aria' AND level = 'day'"
    )
    assert content and marks["written_by"] == "offline"  # the product's row, written without the model
    with psycopg.connect(db_url, row_factory=dict_row) as conn:
        check = model_declined(conn, CheckScope([date.fromisoformat(DAY)], ["aria"], "Asia/Shanghai"))
    assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN


def test_a_cut_answer_and_malformed_arguments_are_declined_with_their_cause(
    db_url: str, tmp_path: Path
) -> None:
    imported(db_url)
    script = [
        chat.cut(chat.call("create_semantic_memory", FACT)),
        chat.cut(chat.call("create_semantic_memory", FACT)),
    ]
    with chat.FakeChatCompletions(script) as fake:
        result = sleep(openai_env(tmp_path, db_url, fake, ANIMA_LLM_MAX_TOKENS="8000"), "--step", SEMANTIC)
        limits = [b["max_completion_tokens"] for b in fake.bodies]
    assert result.returncode == 0, result.stdout + result.stderr
    assert limits == [8000, 16000]  # retried once, larger
    status, _, stats = state(db_url, SEMANTIC)
    assert status == "done" and stats["declined_cause"] == "OutputTruncated"
    assert rows(db_url, "SELECT 1 FROM semantic_memory WHERE anima_id = 'aria'") == []
    script = [chat.malformed("create_semantic_memory"), chat.malformed("create_semantic_memory")]
    with chat.FakeChatCompletions(script) as fake:
        result = sleep(openai_env(tmp_path, db_url, fake), "--step", SEMANTIC, "--force")
    assert result.returncode == 0, result.stdout + result.stderr
    assert state(db_url, SEMANTIC)[2]["declined_cause"] == "MalformedToolInput"


def test_the_estimate_prices_the_servers_model_and_a_local_one_at_zero(db_url: str, tmp_path: Path) -> None:
    imported(db_url)
    with chat.FakeChatCompletions([]) as fake:
        priced = sleep(openai_env(tmp_path, db_url, fake), "--estimate")
        local = sleep(
            openai_env(tmp_path, db_url, fake, ANIMA_MODEL="llama3.1:8b", ANIMA_LLM_UNPRICED="llama3.1"),
            "--estimate",
        )
        unnamed = sleep(openai_env(tmp_path, db_url, fake, ANIMA_MODEL="llama3.1:8b"), "--estimate")
        assert fake.requests == []  # an estimate sends nothing
    assert priced.returncode == 0, priced.stdout + priced.stderr
    assert MODEL in priced.stdout and "claude" not in priced.stdout  # the small-model steps too
    cost = re.search(r"estimated cost of the run: \$([\d.]+)", priced.stdout)
    assert cost and float(cost.group(1)) > 0
    assert local.returncode == 0 and "estimated cost of the run: $0.0000" in local.stdout, local.stdout
    assert "llama3.1:8b" in local.stdout
    assert unnamed.returncode != 0 and "ANIMA_LLM_UNPRICED" in unnamed.stdout + unnamed.stderr


def _dagster_metadata(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, set[str]]:
    """The metadata keys of each step's materialization of the day, from the run's instance
    (its storage is chosen from this process's environment: defs/instance.py)."""
    for var in ("DAGSTER_HOME", "ANIMA_HOME"):
        monkeypatch.setenv(var, env[var])
    instance = get_instance(env)
    try:
        out = {}
        for step in STEP_ORDER:
            records = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=asset_key(step), asset_partitions=[DAY]), limit=10
            ).records
            out[step] = {k for r in records for k in (r.asset_materialization.metadata or {})}
        return out
    finally:
        instance.dispose()


def _night_rows(db_url: str) -> dict[str, Any]:
    """What a night leaves, without what only the engine's own numbers could make differ."""
    steps = {
        step: (
            status,
            sorted(stats),
            {k: v for k, v in stats.items() if k in ("llm_calls", "calls", "errors", "created")},
        )
        for step, status, stats in rows(
            db_url, "SELECT step, status, stats FROM sleep_state WHERE anima_id = 'aria' AND day = %s", DAY
        )
    }
    events = rows(
        db_url,
        "SELECT table_name, op, step, count(*) FROM memory_event WHERE anima_id = 'aria' AND day = %s "
        "GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
        DAY,
    )
    memories = rows(db_url, "SELECT type, content, source_sessions, status FROM semantic_memory ORDER BY id")
    layers = {
        table: rows(db_url, f"SELECT count(*) FROM {table} WHERE anima_id = 'aria'")[0][0]
        for table in ("emotional_anchor", "autobiographical_memory", "temporal_summary", "dream_journal")
    }
    return {"steps": steps, "events": events, "memories": memories, "layers": layers}


def _twin_night(
    name: str, url: str, home: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[dict[str, Any], dict[str, set[str]]]:
    """The scripted night through engine `name`, on the store at `url`: its rows and metadata."""
    imported(url)
    if name == "openai":
        with chat.FakeChatCompletions([], responder=openai_model, min_cache_tokens=1) as fake:
            env = openai_env(home, url, fake)
            result = sleep(env)
    else:
        with messages.FakeMessagesAPI([], responder=anthropic_model, min_cache_tokens=1) as fake_api:
            env = cli_env(
                home,
                url,
                ANIMA_ENGINE="anthropic",
                ANTHROPIC_API_KEY=ANTHROPIC_KEY,
                ANTHROPIC_BASE_URL=fake_api.url,
                ANIMA_START_DATE="2026-11-01",
            )
            result = sleep(env)
    assert result.returncode == 0, (name, result.stdout + result.stderr)
    return _night_rows(url), _dagster_metadata(env, monkeypatch)


def test_the_same_guard_audit_and_metadata_rows_as_an_anthropic_night(
    db_url: str, pg_admin_url: str, template_db: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    openai_rows, openai_md = _twin_night("openai", db_url, tmp_path / "openai", monkeypatch)
    with cloned_database(pg_admin_url, template_db) as twin_url:
        anthropic_rows, anthropic_md = _twin_night("anthropic", twin_url, tmp_path / "anthropic", monkeypatch)
    assert openai_rows["memories"] == [("world", FACT["content"], [CONV], "active")]
    assert openai_rows["events"] and openai_rows["layers"]["temporal_summary"] >= 1
    assert openai_rows == anthropic_rows, json.dumps([openai_rows, anthropic_rows], default=str, indent=1)
    assert openai_md == anthropic_md
    assert {"llm_calls", "tokens_in", "cost_usd"} <= openai_md[SEMANTIC], openai_md[SEMANTIC]
