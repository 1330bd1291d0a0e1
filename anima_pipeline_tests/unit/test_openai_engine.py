"""The OpenAI-compatible engine against real HTTP: the official openai SDK talks to the scripted
fake chat-completions server (testkit/fake_chat_completions.py), so retries, timeouts, headers
and parsing are exercised for real, in the style of test_llm_engine.py's Claude tests. The tool
runner is a small recorder (the executor is tested elsewhere)."""

from __future__ import annotations

import json
import logging
import time
import traceback
from collections.abc import Generator
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from pydantic import SecretStr

from anima_pipeline.config import Settings
from anima_pipeline.core.prices import PRICES
from anima_pipeline.llm.budget import Budget
from anima_pipeline.llm.contract import StepRequest, TextBlock, ToolCall, ToolResult, ToolSpec
from anima_pipeline.llm.factory import make_engine
from anima_pipeline.llm.failures import (
    BudgetExceeded,
    ContextTooLarge,
    EngineConfigError,
    MalformedToolInput,
    MaxTurnsExceeded,
    ModelAnswerError,
    OutputTruncated,
    Refused,
    RequestRejected,
    RetriesExhausted,
    UnknownModelError,
)
from anima_pipeline.llm.openai.engine import OpenAIEngine
from anima_pipeline.store.session_rows import Turn
from testkit.fake_chat_completions import (
    FakeChatCompletions,
    call,
    cut,
    delay,
    error,
    filtered,
    malformed,
    reply,
    say,
)

KEY = "sk-proj-test-SECRET-456"
MODEL = "gpt-4.1-mini"  # $0.40 in / $1.60 out / $0.10 cached in per MTok
SPEC = {"type": "object", "properties": {"q": {"type": "string"}}}


class Recorder:
    """A ToolRunner that records calls, answers from a table and records what was declined."""

    def __init__(self, results: dict[str, ToolResult] | None = None) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.results = results or {}
        self.said: list[str] = []

    def call(self, name: str, input: dict[str, Any]) -> ToolResult:
        self.calls.append((name, input))
        return self.results.get(name, ToolResult(content=f"ok: {name}"))

    def declined(self, said: str) -> None:
        self.said.append(said)


Plan = Generator[ToolCall, ToolResult, None]


def no_plan() -> Plan:
    raise AssertionError("the OpenAI engine must not run the offline plan")
    yield  # pragma: no cover


def request(step: str = "consolidate", max_turns: int = 8, **kw: Any) -> StepRequest:
    return StepRequest(
        step=step,
        system=[
            TextBlock(text="You consolidate an agent's memories.", cache=True),
            TextBlock(text="Be brief."),
        ],
        user=[TextBlock(text="Today's episodes: ...", cache=True), TextBlock(text="Act now.")],
        tools=[ToolSpec(name=n, description=f"{n} tool", input_schema=SPEC) for n in ("search", "write")],
        max_turns=max_turns,
        **kw,
    )


def engine(fake: FakeChatCompletions, model: str = MODEL, **kw: Any) -> OpenAIEngine:
    kw.setdefault("max_retries", 2)
    kw.setdefault("timeout", 5)
    return OpenAIEngine(model, SecretStr(KEY), base_url=fake.url, **kw)


def tool_messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [m for m in body["messages"] if m["role"] == "tool"]


# --- the conversation ---------------------------------------------------------------------


def test_tool_calls_run_through_the_runner_turn_after_turn_in_the_apis_shape() -> None:
    script = [
        reply(call("search", {"q": "cats"}, id="c1"), text="Let me look."),
        reply(call("write", {"q": "a fact"}, id="c2"), call("search", {"q": "f-1"}, id="c3")),
        say("All done."),
    ]
    runner = Recorder()
    with FakeChatCompletions(script) as fake:
        usage = engine(fake).run(request(), runner, no_plan)
        first, second, third = fake.bodies
    assert runner.calls == [("search", {"q": "cats"}), ("write", {"q": "a fact"}), ("search", {"q": "f-1"})]
    assert usage.calls == 3 and runner.said == []  # it wrote: nothing declined
    assert first["model"] == MODEL and first["max_completion_tokens"] == 16000 and "max_tokens" not in first
    assert first["tool_choice"] == "auto"
    assert first["tools"][0] == {
        "type": "function",
        "function": {"name": "search", "description": "search tool", "parameters": SPEC},
    }
    # the step's blocks, joined in order: one system message, one user message
    assert first["messages"] == [
        {"role": "system", "content": "You consolidate an agent's memories.\n\nBe brief."},
        {"role": "user", "content": "Today's episodes: ...\n\nAct now."},
    ]
    assert second["messages"][2] == {
        "role": "assistant",
        "content": "Let me look.",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "search", "arguments": '{"q": "cats"}'}}
        ],
    }
    assert tool_messages(third) == [
        {"role": "tool", "tool_call_id": "c1", "content": "ok: search"},
        {"role": "tool", "tool_call_id": "c2", "content": "ok: write"},
        {"role": "tool", "tool_call_id": "c3", "content": "ok: search"},
    ]
    assert third["messages"][0] == first["messages"][0]  # the same prefix every turn (the server's cache)


def test_a_tool_error_goes_back_as_an_error_text() -> None:
    runner = Recorder({"search": ToolResult(content="no memory with id m-9", is_error=True)})
    with FakeChatCompletions([reply(call("search", {"q": "m-9"}, id="c1"))]) as fake:
        engine(fake).run(request(), runner, no_plan)
        (result,) = tool_messages(fake.bodies[-1])
    assert result == {"role": "tool", "tool_call_id": "c1", "content": "Error: no memory with id m-9"}


def test_malformed_arguments_get_an_error_and_one_retry() -> None:
    runner = Recorder()
    script = [malformed("write", id="bad1"), reply(call("write", {"q": "fixed"}, id="ok1")), say("done")]
    with FakeChatCompletions(script) as fake:
        usage = engine(fake).run(request(), runner, no_plan)
        second = fake.bodies[1]["messages"]
    assert runner.calls == [("write", {"q": "fixed"})] and usage.calls == 3
    assert second[2]["tool_calls"][0]["function"]["arguments"] == "{}"  # echoed as an object
    (result,) = [m for m in second if m["role"] == "tool"]
    assert result["tool_call_id"] == "bad1" and "not valid JSON" in result["content"]
    assert (
        result["content"].startswith("Error:")
        and "Call the tool again with a JSON object" in result["content"]
    )
    # malformed again after the error: the retry is spent, the step declines (a re-run would do the same)
    runner = Recorder()
    with FakeChatCompletions([malformed("write"), malformed("write", raw="[1, 2]")]) as fake:
        with pytest.raises(MalformedToolInput, match=r"not a JSON object \(got list\)") as exc:
            engine(fake).run(request(), runner, no_plan)
        assert len(fake.bodies) == 2
    assert runner.calls == [] and isinstance(exc.value, ModelAnswerError) and exc.value.usage.calls == 2


def test_a_text_only_answer_of_a_step_that_must_write_is_reminded_then_declined() -> None:
    runner = Recorder()
    with FakeChatCompletions([say("Nothing worth recording today.")] * 2) as fake:
        usage = engine(fake).run(request(must_write=True), runner, no_plan)
        bodies = fake.bodies
    assert usage.calls == 2 and runner.calls == []
    assert bodies[1]["messages"][-2] == {"role": "assistant", "content": "Nothing worth recording today."}
    assert "must record its result with a tool call" in bodies[1]["messages"][-1]["content"]
    assert runner.said == ["Nothing worth recording today."]  # restraint: declined, not failed


def test_length_is_asked_again_once_larger_then_declined_and_a_cut_call_is_never_run() -> None:
    runner = Recorder()
    script = [reply(call("write", {"q": "a long answer"}), needs=20_000), say("done")]
    with FakeChatCompletions(script) as fake:
        engine(fake).run(request(), runner, no_plan)
        assert [b["max_completion_tokens"] for b in fake.bodies] == [16000, 32000, 32000]
    assert runner.calls == [("write", {"q": "a long answer"})]
    runner = Recorder()
    with FakeChatCompletions([cut(call("write", {"q": "x"})), cut(call("write", {"q": "x"}))]) as fake:
        with pytest.raises(OutputTruncated, match=r"max_tokens=32000 \(a cut write call was not executed\)"):
            engine(fake).run(request(), runner, no_plan)
    assert runner.calls == []


def test_content_filter_and_a_refusal_are_refused_and_nothing_runs() -> None:
    for answer in (filtered("withheld"), reply(call("write", {"q": "x"}), refusal="I can't help with that.")):
        runner = Recorder()
        with FakeChatCompletions([answer]) as fake:
            with pytest.raises(Refused) as exc:
                engine(fake).run(request(step="light"), runner, no_plan)
        assert runner.calls == [] and "'light'" in str(exc.value) and "finish_reason=" in str(exc.value)
    assert "I can't help with that." in str(exc.value)


def test_max_turns_bound_raises() -> None:
    script = [reply(call("search", {"q": str(i)})) for i in range(5)]
    runner = Recorder()
    with FakeChatCompletions(script) as fake:
        with pytest.raises(MaxTurnsExceeded, match="max_turns=2"):
            engine(fake).run(request(step="dedupe", max_turns=2), runner, no_plan)
    assert runner.calls == [("search", {"q": "0"})]


# --- retries, timeouts, errors ------------------------------------------------------------


def test_429_and_5xx_are_retried_and_a_long_retry_after_is_capped() -> None:
    script = [error(429, retry_after="10"), error(500), error(503), say("ok")]
    with FakeChatCompletions(script, retry_after_ms=None) as fake:
        eng = engine(fake, max_retries=3, max_retry_wait=0.05)
        started = time.monotonic()
        usage = eng.run(request(), Recorder(), no_plan)
        assert len(fake.bodies) == 4
    assert time.monotonic() - started < 3 and usage.calls == 1  # a failed attempt is not billed
    assert eng.limiter._paused_until > 0  # the 429 paused every request of the process


def test_retries_are_bounded_and_a_bad_request_fails_at_once() -> None:
    with FakeChatCompletions([error(500)] * 10) as fake:
        with pytest.raises(RetriesExhausted) as exc:
            engine(fake, max_retries=3).run(request(step="summarize"), Recorder(), no_plan)
        assert len(fake.bodies) == 4
    assert exc.value.status == 500 and "OpenAI-compatible API still failing after 4 attempt" in str(exc.value)
    with FakeChatCompletions([error(400, "Invalid 'tools[0]'")]) as fake:
        with pytest.raises(RequestRejected, match=r"HTTP 400 invalid_request_error: Invalid 'tools\[0\]'"):
            engine(fake).run(request(), Recorder(), no_plan)
        assert len(fake.bodies) == 1


def test_timeouts_are_retried_then_exhausted() -> None:
    with FakeChatCompletions([delay(2.0), say("ok")]) as fake:
        assert engine(fake, timeout=0.3, max_retries=1).run(request(), Recorder(), no_plan).calls == 1
    with FakeChatCompletions([delay(2.0), delay(2.0)]) as fake:
        with pytest.raises(RetriesExhausted, match=r"timed out \(0\.3s per attempt\) on all 2 attempt"):
            engine(fake, timeout=0.3, max_retries=1).run(request(), Recorder(), no_plan)


def test_a_prompt_over_the_window_is_too_large_not_a_failure() -> None:
    script = [
        error(400, "This model's maximum context length is 8192 tokens.", code="context_length_exceeded")
    ]
    with FakeChatCompletions(script) as fake:
        with pytest.raises(ContextTooLarge, match="maximum context length"):
            engine(fake).run(request(), Recorder(), no_plan)


# --- cost, budget, unpriced ---------------------------------------------------------------


def test_cost_from_usage_with_the_cached_prefix_at_its_price() -> None:
    script = [reply(call("search", {"q": "x"})), say("done")]
    with FakeChatCompletions(script, min_cache_tokens=10) as fake:
        usage = engine(fake).run(request(), Recorder(), no_plan)
        answers = [a["usage"] for a in fake.responses]
    assert answers[0]["prompt_tokens_details"]["cached_tokens"] == 0
    cached = answers[1]["prompt_tokens_details"]["cached_tokens"]
    assert cached > 0 and usage.cache_read_tokens == cached and usage.cache_write_tokens == 0
    assert usage.input_tokens == sum(a["prompt_tokens"] for a in answers) - cached
    assert usage.one_pass_tokens == answers[0]["prompt_tokens"]
    p = PRICES[MODEL]
    expected = (usage.input_tokens * p.input + usage.output_tokens * p.output + cached * p.cache_read) / 1e6
    assert usage.cost_usd == pytest.approx(expected, abs=2e-6) and usage.cost_usd > 0


def test_a_local_model_named_unpriced_costs_nothing_and_its_tokens_count() -> None:
    settings = Settings(llm={"unpriced": ["llama3.1"]})
    with FakeChatCompletions([say("ok")], report_cached=False) as fake:
        eng = OpenAIEngine("llama3.1:8b", None, base_url=fake.url, settings=settings, timeout=5)
        usage = eng.run(request(), Recorder(), no_plan)
        headers = fake.requests[0].headers
    assert usage.cost_usd == 0 and usage.input_tokens > 0 and usage.output_tokens > 0
    assert headers["authorization"] == "Bearer unused"  # a local server needs no key; the SDK wants one
    with pytest.raises(UnknownModelError, match="ANIMA_LLM_UNPRICED"):
        OpenAIEngine("llama3.1:8b", None, base_url="http://127.0.0.1:9/v1")
    with FakeChatCompletions([say("ok")], report_usage=False) as fake:  # a server that reports no usage
        assert engine(fake).run(request(), Recorder(), no_plan).calls == 1


def test_the_budget_stops_the_step_before_the_next_call() -> None:
    budget = Budget(max_tokens=1)
    with FakeChatCompletions([reply(call("search", {"q": "x"})), say("never sent")]) as fake:
        with pytest.raises(BudgetExceeded, match="'link'.*token limit"):
            engine(fake, budget=budget).run(request(step="link"), Recorder(), no_plan)
        assert len(fake.bodies) == 1


# --- settings, the factory, the summary ---------------------------------------------------


def test_settings_choose_the_model_the_limits_field_and_the_effort() -> None:
    settings = Settings(
        llm={"max_tokens_field": "max_tokens", "effort": "max", "step_models": {"dreams/journal": "gpt-4.1"}},
        model=MODEL,
    )
    with FakeChatCompletions([say("a"), say("b"), say("c")]) as fake:
        eng = OpenAIEngine(MODEL, SecretStr(KEY), base_url=fake.url, settings=settings, timeout=5)
        eng.run(request(step="emotional_anchors/marked"), Recorder(), no_plan)  # a small-model step
        eng.run(request(step="dreams/journal"), Recorder(), no_plan)
        text, usage = eng.complete("agent/answer", "Answer briefly.", [TextBlock(text="Q?")], max_tokens=300)
        first, second, third = fake.bodies
    assert first["model"] == MODEL  # no small model of its own: the main one
    assert (
        second["model"] == "gpt-4.1" and first["max_tokens"] == 16000 and "max_completion_tokens" not in first
    )
    assert first["reasoning_effort"] == "xhigh"
    assert (text, usage.calls) == ("c", 1) and "tools" not in third and third["max_tokens"] == 300
    assert third["messages"] == [
        {"role": "system", "content": "Answer briefly."},
        {"role": "user", "content": "Q?"},
    ]


def test_the_session_summary_is_written_by_the_engines_model() -> None:
    turn = Turn(
        id=1,
        external_id="m-1",
        role="user",
        speaker="Lin",
        content="My mother lives in Leshan.",
        created_at=datetime(2026, 11, 17, 9, 0, tzinfo=UTC),
    )
    with FakeChatCompletions([say("- [11-17 17:00] Lin: mother lives in Leshan")]) as fake:
        eng = engine(fake)
        summarizer = eng.summarizer(lambda: "Identity: Aria.", ZoneInfo("Asia/Shanghai"))
        text = summarizer.extend("", [turn], lambda t: len(t) < 4000)
        (sent,) = fake.bodies
    assert summarizer.name == "openai" and text == "- [11-17 17:00] Lin: mother lives in Leshan"
    assert "Identity: Aria." in sent["messages"][0]["content"] and "Leshan" in sent["messages"][1]["content"]
    assert eng.token_counter() is None  # no counting endpoint: the ratio estimate counts


def test_the_factory_refuses_what_a_night_could_not_run_with(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(EngineConfigError, match="ANIMA_MODEL"):
        make_engine(Settings(engine="openai", openai_api_key=SecretStr(KEY)))
    with pytest.raises(EngineConfigError, match="OPENAI_API_KEY"):
        make_engine(Settings(engine="openai", model=MODEL))
    with pytest.raises(EngineConfigError, match="ANIMA_LLM_MODE=batch"):
        make_engine(
            Settings(engine="openai", model=MODEL, openai_api_key=SecretStr(KEY), llm={"mode": "batch"})
        )
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1")
    monkeypatch.setenv("ANIMA_MODEL", MODEL)
    eng = make_engine(Settings(engine="openai", budget_usd=2.5))
    assert isinstance(eng, OpenAIEngine) and eng.base_url == "http://127.0.0.1:11434/v1"
    assert eng.budget is not None and eng.budget.max_usd == 2.5 and eng.pool == "openai" and eng.priced


def test_the_key_is_sent_as_a_bearer_token_and_never_leaks(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    errors: list[BaseException] = []
    with FakeChatCompletions([error(500), say("ok"), *[error(500)] * 3]) as fake:
        eng = engine(fake)
        eng.run(request(), Recorder(), no_plan)
        with pytest.raises(RetriesExhausted) as exc:
            eng.run(request(), Recorder(), no_plan)
        errors.append(exc.value)
        reqs = fake.requests
    with FakeChatCompletions(api_key="sk-proj-other") as strict:  # a wrong key: 401, not retried
        with pytest.raises(RequestRejected) as exc:
            engine(strict).run(request(), Recorder(), no_plan)
        assert len(strict.bodies) == 1
        errors.append(exc.value)
    with FakeChatCompletions([error(400, f"bad header: Bearer {KEY}")]) as echoing:  # a proxy echoing it
        with pytest.raises(RequestRejected) as exc:
            engine(echoing).run(request(), Recorder(), no_plan)
        assert "[redacted]" in str(exc.value)
        errors.append(exc.value)
    with pytest.raises(RetriesExhausted) as exc:  # nothing listening
        OpenAIEngine(MODEL, SecretStr(KEY), base_url="http://127.0.0.1:9/v1", max_retries=0).run(
            request(), Recorder(), no_plan
        )
    errors.append(exc.value)
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in reqs) and len(reqs) == 5
    for err in errors:
        assert KEY not in "".join(traceback.format_exception(err))
    assert KEY not in repr(eng) and KEY not in caplog.text
    assert json.dumps([str(r.args) for r in caplog.records]).count(KEY) == 0
