"""`anima sleep` end to end with the Anthropic engine: the real SDK in a real subprocess,
pointed through ANTHROPIC_BASE_URL at the fake Messages API, recorded by Dagster."""

from __future__ import annotations

from pathlib import Path

import psycopg

from anima_pipeline_tests.conftest import cli_env, run_cli
from testkit.fake_messages_api import (
    FakeMessagesAPI,
    error,
    reply,
    sleep_autopilot,
    text,
    tool_use,
)

KEY = "sk-ant-test-E2E-SECRET-4242"
DAY = "2026-11-17"  # a day of the bundled synthetic week (mostly Chinese)
SAMPLE = Path(__file__).resolve().parents[2] / "anima_pipeline" / "sample" / "week.archive.jsonl"


def test_sleep_with_anthropic_engine_against_fake_api(db_url: str, tmp_path: Path) -> None:
    script = [
        error(529),
        reply(
            tool_use(
                "create_semantic_memory",
                {"type": "world", "content": "Lin Wei的妈妈叫王秀兰，住在乐山。"},
                id="t1",
            ),
            tool_use("deprecate_semantic_memory", {"id": "f-999999", "reason": "test"}, id="t2"),
        ),
        reply(text("done")),
    ]
    env = cli_env(tmp_path, db_url, ANIMA_ENGINE="anthropic", ANTHROPIC_API_KEY=KEY, ANIMA_LOG_LEVEL="DEBUG")
    anima_home, dagster_home = Path(env["ANIMA_HOME"]), Path(env["DAGSTER_HOME"])
    with FakeMessagesAPI(script, min_cache_tokens=1, responder=sleep_autopilot) as fake:
        env["ANTHROPIC_BASE_URL"] = fake.url
        imported = run_cli(["import", str(SAMPLE)], env, timeout=300)
        assert imported.returncode == 0, imported.stderr
        result = run_cli(["sleep", "--day", DAY, "--anima", "aria"], env, timeout=300)
        requests = list(fake.requests)

    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert KEY not in out
    # 529 first, then the retried request, then the tool results, then every later step
    assert len(requests) >= 4
    assert all(r.headers.get("x-api-key") == KEY for r in requests)
    results = [
        block
        for r in requests
        for m in r.body.get("messages", [])
        if m["role"] == "user" and isinstance(m["content"], list)
        for block in m["content"]
        if isinstance(block, dict) and block.get("type") == "tool_result"
    ]
    by_id = {b["tool_use_id"]: b for b in results}
    # no memory of the day's conversations is shown, so stage 1 may only create: the call is refused
    assert by_id["t2"]["is_error"] is True and "deprecate_semantic_memory" in str(by_id["t2"]["content"])
    assert not by_id["t1"].get("is_error")
    # the nights table: the night's dollars, and per anima-night
    assert "$/anima-night" in result.stdout
    (row,) = [line for line in result.stdout.splitlines() if line.strip("│ ").startswith(DAY)]
    cells = [c.strip() for c in row.strip("│").split("│")]
    assert float(cells[-3]) > 0 and cells[-2] == cells[-3]  # one anima: its night is the night

    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT content, source_sessions FROM semantic_memory WHERE anima_id = 'aria' AND status = 'active'"
        ).fetchall()
        assert ("Lin Wei的妈妈叫王秀兰，住在乐山。", ["aria:2026-11-17-a"]) in [(c, s) for c, s in rows]
        (cost,) = conn.execute(
            "SELECT sum((stats->>'llm_calls')::int) FROM sleep_state WHERE day = %s AND anima_id = 'aria'",
            (DAY,),
        ).fetchone()
        assert cost and cost >= 1

    # the key is in no file under ANIMA_HOME or DAGSTER_HOME (logs, run storage, event logs)
    scanned = 0
    for home in (anima_home, dagster_home):
        for path in home.rglob("*"):
            if path.is_file():
                scanned += 1
                assert KEY.encode() not in path.read_bytes(), path
    assert scanned > 0
