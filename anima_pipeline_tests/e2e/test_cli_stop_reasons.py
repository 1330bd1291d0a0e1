"""What the real Messages API does, through `anima sleep` with the Anthropic engine: the
real SDK (the CLI in this process: `invoke_cli`) against the fake server (stop reasons,
thinking, the minimum cacheable prefix, the prompt cache of the day's transcript across tool
turns)."""

from __future__ import annotations

import subprocess
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
import psycopg
import pytest
from psycopg.rows import dict_row

from anima_pipeline.defs.night.checks import CheckScope, model_declined
from anima_pipeline.store.archive import ImportStats, import_records, parse_lines
from anima_pipeline.store.db import Database
from anima_pipeline.store.events import Audit
from anima_pipeline.store.memories import MemoryRepo
from anima_pipeline_tests.conftest import cli_env, invoke_cli
from testkit.fake_messages_api import (
    FakeMessagesAPI,
    cut_tool_use,
    refusal,
    reply,
    sleep_autopilot,
    text,
    thinking,
    tool_use,
)

KEY = "sk-ant-test-STOP-7777"
DAY = "2026-11-17"
CONV = "aria:2026-11-17-a"
SAMPLE = Path(__file__).resolve().parents[2] / "anima_pipeline" / "sample" / "week.archive.jsonl"
SEMANTIC = "semantic_memory/extracted"
FACT = {
    "type": "world",
    "content": "Lin Wei's mother Wang Xiulan lives in Leshan.",
    "source_sessions": [CONV],
}


@pytest.fixture
def env(db_url: str, tmp_path: Path) -> dict[str, str]:
    db = Database(db_url, max_size=2)
    try:
        with db.transaction() as conn:
            audit = Audit(conn=conn, anima_id="", run_id="import-test", step="import")
            import_records(
                conn, parse_lines(SAMPLE.read_text().splitlines(), str(SAMPLE)), audit, ImportStats()
            )
    finally:
        db.close()
    return cli_env(
        tmp_path,
        db_url,
        ANIMA_ENGINE="anthropic",
        ANTHROPIC_API_KEY=KEY,
        ANIMA_LLM_MAX_TOKENS="8000",
        ANIMA_START_DATE="2026-11-01",  # imported in-process, not through `anima import`
    )


def sleep(env: dict[str, str], fake: FakeMessagesAPI, *steps: str) -> subprocess.CompletedProcess:
    args = ["sleep", "--day", DAY, "--anima", "aria"] + [a for s in steps for a in ("--step", s)]
    return invoke_cli(args, {**env, "ANTHROPIC_BASE_URL": fake.url})


def rows(db_url: str, sql: str, *params: Any) -> list[tuple]:
    with psycopg.connect(db_url) as conn:
        return conn.execute(sql, params).fetchall()


def facts(db_url: str) -> list[str]:
    return [r[0] for r in rows(db_url, "SELECT content FROM semantic_memory WHERE anima_id = 'aria'")]


def state(db_url: str, step: str) -> tuple[str, str | None, dict]:
    (row,) = rows(
        db_url,
        "SELECT status, error, stats FROM sleep_state WHERE anima_id = 'aria' AND day = %s AND step = %s",
        DAY,
        step,
    )
    return row


def test_max_tokens_mid_tool_call_declines_the_step_with_the_cause_and_executes_nothing(
    db_url: str, env: dict[str, str]
) -> None:
    script = [
        cut_tool_use("create_semantic_memory", {"type": "world"}, tool_use("create_semantic_memory", FACT)),
        cut_tool_use("create_semantic_memory", {"type": "world", "content": "Lin"}),
    ]
    with FakeMessagesAPI(script, min_cache_tokens=None) as fake:
        result = sleep(env, fake, SEMANTIC)
        bodies = fake.messages
    out = result.stdout + result.stderr
    # the same answer would come again on a re-run: the step is declined, the night goes on
    assert result.returncode == 0, out
    assert [b["max_tokens"] for b in bodies] == [8000, 16000]  # retried once, larger
    status, _, stats = state(db_url, SEMANTIC)
    assert status == "done" and stats["declined_cause"] == "OutputTruncated"
    assert "max_tokens=16000" in stats["declined_text"]
    assert "cut create_semantic_memory call was not executed" in stats["declined_text"]
    assert facts(db_url) == []  # not even the complete call before the cut one
    assert KEY not in out
    # named where people look: under the nights table, and in `anima status`
    assert f"declined: {DAY} aria {SEMANTIC} (OutputTruncated): " in result.stdout, result.stdout
    said = invoke_cli(["status"], env)
    assert f"declined: {DAY} aria {SEMANTIC} (OutputTruncated): " in said.stdout, said.stdout


def test_a_step_whose_every_tool_call_was_refused_is_declined_with_the_first_refusal(
    db_url: str, env: dict[str, str]
) -> None:
    """The executor refused every call (a source that is not one of the day's conversations):
    nothing was written, so the step is not reported as an ordinary done step."""
    wrong = {**FACT, "source_sessions": ["aria:not-a-conversation-of-this-day"]}
    script = [
        reply(tool_use("create_semantic_memory", wrong), tool_use("create_semantic_memory", wrong)),
        reply(text("Recorded.")),
    ]
    with FakeMessagesAPI(script, min_cache_tokens=None) as fake:
        result = sleep(env, fake, SEMANTIC)
    assert result.returncode == 0, result.stdout + result.stderr
    status, _, stats = state(db_url, SEMANTIC)
    assert status == "done" and stats["declined_cause"] == "refused" and stats["errors"] == 2, stats
    first = "source_sessions ['aria:not-a-conversation-of-this-day'] are not among this input's conversations"
    assert f"every tool call (2) refused; the first: {first}" in stats["declined_text"]
    assert facts(db_url) == []
    assert f"declined: {DAY} aria {SEMANTIC} (refused): " in result.stdout, result.stdout


def test_max_tokens_once_is_retried_with_a_larger_limit(db_url: str, env: dict[str, str]) -> None:
    script = [reply(tool_use("create_semantic_memory", FACT), needs=12_000)]
    with FakeMessagesAPI(script, min_cache_tokens=None) as fake:
        result = sleep(env, fake, SEMANTIC)
        bodies = fake.messages
    assert result.returncode == 0, result.stdout + result.stderr
    assert [b["max_tokens"] for b in bodies] == [8000, 16000]  # the whole answer ends the step
    assert facts(db_url) == [FACT["content"]]


def test_refusal_declines_the_step_and_executes_nothing(db_url: str, env: dict[str, str]) -> None:
    script = [reply(tool_use("create_semantic_memory", FACT), stop_reason="refusal")]
    with FakeMessagesAPI(script, min_cache_tokens=None) as fake:
        result = sleep(env, fake, SEMANTIC)
    assert result.returncode == 0, result.stdout + result.stderr
    status, _, stats = state(db_url, SEMANTIC)
    assert status == "done" and stats["declined_cause"] == "Refused" and "refusal" in stats["declined_text"]
    assert facts(db_url) == []
    assert f"declined: {DAY} aria {SEMANTIC} (Refused): " in result.stdout, result.stdout
    # a refusal is not transient: nothing retried it; forced again, one request, declined again
    with FakeMessagesAPI([refusal("No.")], min_cache_tokens=None) as fake:
        result = invoke_cli(
            ["sleep", "--day", DAY, "--anima", "aria", "--step", SEMANTIC, "--force"],
            {**env, "ANTHROPIC_BASE_URL": fake.url},
        )
        assert len(fake.messages) == 1
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No." in state(db_url, SEMANTIC)[2]["declined_text"]


def test_text_only_answer_of_a_step_that_must_write_is_reminded_then_declined(
    db_url: str, env: dict[str, str]
) -> None:
    step = "temporal_summaries/day"
    with FakeMessagesAPI([reply(text("A calm day."))] * 2, min_cache_tokens=None) as fake:
        result = sleep(env, fake, step)
        bodies = fake.messages
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(bodies) == 2 and "must record its result with a tool call" in str(bodies[1]["messages"][-1])
    status, _, stats = state(db_url, step)
    assert status == "done" and stats["declined"] == 1 and "A calm day." in stats["declined_text"]
    assert stats["written_offline"] == 1  # the day summary is needed: the offline summarizer wrote it
    ((marks,),) = rows(db_url, "SELECT stats FROM temporal_summary WHERE anima_id = 'aria'")
    assert marks["written_by"] == "offline"

    # after the reminder the model writes: the step succeeds
    period = {"level": "day", "period_start": DAY, "period_end": DAY, "content": "Lin Wei talked about home."}
    script = [reply(text("A calm day.")), reply(tool_use("write_temporal_summary", period))]
    with FakeMessagesAPI(script, min_cache_tokens=None) as fake:
        result = invoke_cli(
            ["sleep", "--day", DAY, "--anima", "aria", "--step", step, "--force"],
            {**env, "ANTHROPIC_BASE_URL": fake.url},
        )
    assert result.returncode == 0, result.stdout + result.stderr
    assert rows(
        db_url, "SELECT content, stats->>'written_by' FROM temporal_summary WHERE anima_id = 'aria'"
    ) == [(period["content"], None)]
    assert "declined" not in state(db_url, step)[2]


def test_thinking_blocks_and_pause_turn_go_back_verbatim(db_url: str, env: dict[str, str]) -> None:
    wrong = {**FACT, "source_sessions": ["aria:not-a-conversation-of-this-day"]}
    script = [
        reply(thinking("The user named his mother."), text("Working…"), stop_reason="pause_turn"),
        # a refused call: its result goes back, with the thinking block before it
        reply(thinking("Record it."), tool_use("create_semantic_memory", wrong)),
        reply(tool_use("create_semantic_memory", FACT)),
    ]
    with FakeMessagesAPI(script, min_cache_tokens=None) as fake:
        result = sleep({**env, "ANIMA_LLM_THINKING": "adaptive", "ANIMA_LLM_EFFORT": "low"}, fake, SEMANTIC)
        bodies = fake.messages
    assert result.returncode == 0, result.stdout + result.stderr
    assert bodies[0]["thinking"] == {"type": "adaptive"} and bodies[0]["output_config"] == {"effort": "low"}
    paused = bodies[1]["messages"][1]["content"]
    assert paused[0] == {
        "type": "thinking",
        "thinking": "The user named his mother.",
        "signature": "sig-fake",
    }
    # the continued turn follows the paused one; its thinking block goes back too
    assert [m["role"] for m in bodies[2]["messages"]] == ["user", "assistant", "assistant", "user"]
    assert bodies[2]["messages"][2]["content"][0]["type"] == "thinking"
    assert bodies[2]["messages"][3]["content"][0]["is_error"] is True
    assert facts(db_url) == [FACT["content"]] and len(bodies) == 3


def test_light_sleep_makes_its_calls_in_one_answer_sent_as_plain_input(
    db_url: str, env: dict[str, str]
) -> None:
    """Stage 1 alone on the main model asks for every call in one answer, and that answer ends
    it: one request, no cache breakpoint (no later request reads its prompt, and a cache write
    costs 1.25 times the input: docs/cost.md, "One answer a step"). A request more (the results
    sent back for a "done") or a breakpoint on the prompt is the cost this guards against."""
    second = {**FACT, "content": "Lin Wei grew up in Leshan."}
    script = [reply(tool_use("create_semantic_memory", FACT), tool_use("create_semantic_memory", second))]
    # the model's own minimum cacheable prefix (claude-sonnet-5-5: 1,024 tokens)
    with FakeMessagesAPI(script, min_cache_tokens=None, responder=sleep_autopilot) as fake:
        result = sleep(env, fake, SEMANTIC)
        bodies, answers = fake.messages, fake.responses
    assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(facts(db_url)) == sorted([FACT["content"], second["content"]])
    (body,) = bodies
    blocks = [*body["system"], *body["messages"][0]["content"]]
    assert CONV in blocks[len(body["system"])]["text"] and not [b for b in blocks if "cache_control" in b]
    assert "make all your calls in this one answer" in " ".join(
        blocks[-1]["text"].split()
    )  # the task says so
    usage = answers[0]["usage"]
    assert usage["cache_creation_input_tokens"] == 0 == usage["cache_read_input_tokens"]
    assert usage["input_tokens"] > 1024  # long enough to cache: left uncached because nothing reads it
    _, _, stats = state(db_url, SEMANTIC)
    assert stats["llm_calls"] == 1 and stats["created"] == 2


def test_a_prefix_below_the_models_minimum_is_billed_as_plain_input(db_url: str, env: dict[str, str]) -> None:
    # claude-opus-4-6 caches only from 4,096 tokens: the short sample day is not cached
    with FakeMessagesAPI(
        [reply(tool_use("create_semantic_memory", FACT)), reply(text("ok"))], min_cache_tokens=None
    ) as fake:
        result = sleep({**env, "ANIMA_MODEL": "claude-opus-4-6"}, fake, SEMANTIC)
        answers = fake.responses
    assert result.returncode == 0, result.stdout + result.stderr
    assert all(a["usage"]["cache_creation_input_tokens"] == 0 for a in answers[:1])
    assert answers[0]["usage"]["input_tokens"] < 4096


def test_max_tokens_without_a_tool_call_declines_after_one_larger_try(
    db_url: str, env: dict[str, str]
) -> None:
    cut = reply(text("Let me go through the day's conversations one by one"), stop_reason="max_tokens")
    with FakeMessagesAPI([cut, cut], min_cache_tokens=None) as fake:
        result = sleep({**env, "ANIMA_LLM_MAX_TOKENS_CEILING": "12000"}, fake, SEMANTIC)
        bodies = fake.messages
    assert result.returncode == 0, result.stdout + result.stderr
    assert [b["max_tokens"] for b in bodies] == [8000, 12000]  # doubled, capped at the ceiling
    status, _, stats = state(db_url, SEMANTIC)
    said = stats["declined_text"]
    assert status == "done" and "OutputTruncated" in said and "cut" not in said.split("max_tokens=")[1][:20]


def test_a_night_in_batch_mode_through_anima_sleep(db_url: str, env: dict[str, str]) -> None:
    script = [reply(tool_use("create_semantic_memory", FACT))]
    batch_env = {
        **env,
        "ANIMA_LLM_MODE": "batch",
        "ANIMA_LLM_BATCH_WINDOW_S": "0.2",
        "ANIMA_LLM_BATCH_POLL_S": "0.05",
    }
    with FakeMessagesAPI(script, min_cache_tokens=None) as fake:
        result = sleep(batch_env, fake, SEMANTIC)
        paths = [r.path for r in fake.requests]
    assert result.returncode == 0, result.stdout + result.stderr
    assert "/v1/messages" not in paths and paths.count("/v1/messages/batches") == 1
    assert facts(db_url) == [FACT["content"]]
    _, _, stats = state(db_url, SEMANTIC)
    assert stats["batched_calls"] == stats["llm_calls"] == 1


def test_a_night_against_a_model_that_answers_text_only_everywhere_succeeds_as_declined(
    db_url: str, env: dict[str, str]
) -> None:
    """Restraint: "nothing worth recording" is a recorded outcome, never a failed night."""
    with FakeMessagesAPI([], min_cache_tokens=None) as fake:  # no script: text only, every turn
        result = sleep(env, fake)
        said = fake.responses[0]["content"][0]["text"]
    assert result.returncode == 0, result.stdout + result.stderr
    night, _, _ = state(db_url, "night")
    assert night == "done"
    for step in (SEMANTIC, "emotional_anchors/marked", "temporal_summaries/day"):
        status, _, stats = state(db_url, step)
        assert status == "done" and stats["declined"] == 1 and said in stats["declined_text"], (step, stats)
    # the day summary is a row the product needs: written without the model, and marked so
    ((content, summary_stats),) = rows(
        db_url, "SELECT content, stats FROM temporal_summary WHERE anima_id = 'aria' AND level = 'day'"
    )
    assert content and summary_stats["written_by"] == "offline" and said in summary_stats["declined_text"]
    # the night's warning check names them (a warning: restraint is not an error)
    with psycopg.connect(db_url, row_factory=dict_row) as conn:
        check = model_declined(conn, CheckScope([date.fromisoformat(DAY)], ["aria"], "Asia/Shanghai"))
    assert not check.passed and check.severity == dg.AssetCheckSeverity.WARN
    assert check.metadata["declined"].value >= 3


def test_a_declined_night_does_not_hold_the_next_day(db_url: str, env: dict[str, str]) -> None:
    """A night whose steps were all declined is over (done): the order guard lets the next day
    sleep, which it would refuse after a failed night."""
    following = "2026-11-18"
    with FakeMessagesAPI([], min_cache_tokens=None) as fake:  # text only, every turn, both days
        first = sleep(env, fake)
        second = invoke_cli(
            ["sleep", "--day", following, "--anima", "aria"],
            {**env, "ANTHROPIC_BASE_URL": fake.url},
        )
    assert first.returncode == 0, first.stdout + first.stderr
    assert second.returncode == 0, second.stdout + second.stderr
    assert state(db_url, SEMANTIC)[2]["declined"] == 1
    nights = rows(
        db_url,
        "SELECT day::text, status FROM sleep_state WHERE anima_id = 'aria' AND step = 'night' ORDER BY day",
    )
    assert nights == [(DAY, "done"), (following, "done")]


def test_a_declined_incremental_night_with_candidate_rounds_does_not_hold_the_next_day(
    db_url: str, env: dict[str, str]
) -> None:
    """The same on incremental nights (Tuesday, Wednesday) whose rounds 1 and 3 have candidates
    (a memory written that day, night/steps/deep/candidates.py): they ask the model over the
    candidates alone, it answers text only, and both nights are done."""
    following = date.fromisoformat(DAY) + timedelta(days=1)
    db = Database(db_url, max_size=2)
    try:
        with db.transaction() as conn:
            older = Audit(conn=conn, anima_id="aria", run_id="plant", step=SEMANTIC, day=date(2026, 11, 10))
            MemoryRepo(conn, older).create(
                "aria", {"type": "world", "content": "Aria's cat is called Mochi."}
            )
            for day, content in (
                (date.fromisoformat(DAY), FACT["content"]),
                (following, "Lin Wei plays go."),
            ):
                audit = Audit(conn=conn, anima_id="aria", run_id="plant", step=SEMANTIC, day=day)
                MemoryRepo(conn, audit).create("aria", {"type": "world", "content": content})
    finally:
        db.close()
    with FakeMessagesAPI([], min_cache_tokens=None) as fake:  # text only, every turn, both days
        first = sleep(env, fake)
        second = invoke_cli(
            ["sleep", "--day", following.isoformat(), "--anima", "aria"],
            {**env, "ANTHROPIC_BASE_URL": fake.url},
        )
        bodies = fake.messages
    assert first.returncode == 0, first.stdout + first.stderr
    assert second.returncode == 0, second.stdout + second.stderr
    rounds = [
        b
        for b in bodies
        if any(f"this is round {n}:" in b["messages"][0]["content"][-1]["text"] for n in (1, 3))
    ]
    assert len(rounds) == 4  # rounds 1 and 3, each night, asked the model
    for body in rounds:
        assert "changed active memories and their neighbours" in body["messages"][0]["content"][0]["text"]
        assert "Mochi" not in body["messages"][0]["content"][0]["text"]  # no neighbour of what changed
    for step in ("semantic_memory/deconflicted", "semantic_memory/merged"):
        status, _, stats = state(db_url, step)
        # what changed and its neighbour (Lin Wei's other memory), not the whole store of three
        assert status == "done" and stats["skipped_rounds"] == 0 and stats["message1_memories"] == 2, stats
    nights = rows(
        db_url,
        "SELECT day::text, status FROM sleep_state WHERE anima_id = 'aria' AND step = 'night' ORDER BY day",
    )
    assert nights == [(DAY, "done"), (following.isoformat(), "done")]
