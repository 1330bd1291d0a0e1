"""Engines against real HTTP: the official SDK talks to the scripted fake Messages API,
so retries, timeouts, headers and parsing are exercised for real. The tool runner here
is a small recorder (the executor itself is tested elsewhere)."""

from __future__ import annotations

import logging
import time
import traceback
from collections.abc import Generator
from typing import Any

import pytest
from pydantic import SecretStr

from anima_pipeline.config import Settings
from anima_pipeline.core.prices import PRICES
from anima_pipeline.llm.anthropic.engine import AnthropicEngine
from anima_pipeline.llm.budget import Budget
from anima_pipeline.llm.contract import StepRequest, TextBlock, ToolCall, ToolResult, ToolSpec, Usage
from anima_pipeline.llm.factory import make_engine
from anima_pipeline.llm.failures import (
    BudgetExceeded,
    EngineConfigError,
    EngineError,
    MaxTurnsExceeded,
    RequestRejected,
    RetriesExhausted,
    UnknownModelError,
)
from anima_pipeline.llm.offline import OfflineEngine
from anima_pipeline.llm.pricing import cost_usd, price_for
from testkit.fake_messages_api import (
    FakeMessagesAPI,
    delay,
    error,
    malformed_tool_use,
    reply,
    text,
    tool_use,
)

KEY = "sk-ant-test-SECRET-123"
MODEL = "claude-haiku-4-5"  # $1 in / $5 out / $1.25 cache write / $0.10 cache read per MTok
SPEC = {"type": "object", "properties": {"q": {"type": "string"}}}


class Recorder:
    """A ToolRunner that records calls and answers from a table."""

    def __init__(self, results: dict[str, ToolResult] | None = None) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.results = results or {}

    def call(self, name: str, input: dict[str, Any]) -> ToolResult:
        self.calls.append((name, input))
        return self.results.get(name, ToolResult(content=f"ok: {name}"))


Plan = Generator[ToolCall, ToolResult, None]


def no_plan() -> Plan:
    raise AssertionError("the Anthropic engine must not run the offline plan")
    yield  # pragma: no cover


def empty_plan() -> Plan:
    return
    yield  # pragma: no cover


def request(
    step: str = "consolidate", max_turns: int = 8, cache_system: bool = False, **kw: Any
) -> StepRequest:
    return StepRequest(
        step=step,
        system=[TextBlock(text="You consolidate an agent's memories. " * 30, cache=cache_system)],
        user=[TextBlock(text="Today's episodes: ...", cache=False), TextBlock(text="Act now.")],
        tools=[
            ToolSpec(name=n, description=f"{n} tool", input_schema=SPEC) for n in ("search", "write", "link")
        ],
        max_turns=max_turns,
        **kw,
    )


def engine(fake: FakeMessagesAPI, **kw: Any) -> AnthropicEngine:
    kw.setdefault("max_retries", 2)
    kw.setdefault("timeout", 5)
    return AnthropicEngine(MODEL, SecretStr(KEY), base_url=fake.url, **kw)


def last_user_turn(fake: FakeMessagesAPI, i: int = -1) -> list[dict[str, Any]]:
    """The last user turn without the engine's cache breakpoints (tested on their own)."""
    content = fake.requests[i].body["messages"][-1]["content"]
    return [{k: v for k, v in b.items() if k != "cache_control"} for b in content]


# --- the conversation loop ------------------------------------------------------------


def test_multi_turn_tool_use_runs_every_call_through_the_runner() -> None:
    script = [
        reply(text("Let me look."), tool_use("search", {"q": "cats"}, id="t1")),
        reply(tool_use("write", {"q": "a fact"}, id="t2"), tool_use("link", {"q": "f-1"}, id="t3")),
        reply(text("All done.")),
    ]
    runner = Recorder()
    with FakeMessagesAPI(script) as fake:
        usage = engine(fake).run(request(), runner, no_plan)
        reqs = fake.requests
    assert runner.calls == [("search", {"q": "cats"}), ("write", {"q": "a fact"}), ("link", {"q": "f-1"})]
    assert len(reqs) == 3 and usage.calls == 3
    first = reqs[0].body
    assert first["model"] == MODEL and first["max_tokens"] == 16000
    assert [t["name"] for t in first["tools"]] == ["search", "write", "link"]
    assert first["tools"][0]["input_schema"] == SPEC
    assert [m["role"] for m in reqs[2].body["messages"]] == ["user", "assistant", "user", "assistant", "user"]
    assert reqs[1].body["messages"][1]["content"][0] == {"type": "text", "text": "Let me look."}
    assert last_user_turn(fake) == [
        {"type": "tool_result", "tool_use_id": "t2", "content": "ok: write", "is_error": False},
        {"type": "tool_result", "tool_use_id": "t3", "content": "ok: link", "is_error": False},
    ]


def test_tool_error_is_passed_back_as_is_error() -> None:
    runner = Recorder({"search": ToolResult(content="no memory with id m-9", is_error=True)})
    with FakeMessagesAPI([reply(tool_use("search", {"q": "m-9"}, id="t1"))]) as fake:
        engine(fake).run(request(), runner, no_plan)
        result = last_user_turn(fake)
    assert result == [
        {"type": "tool_result", "tool_use_id": "t1", "content": "no memory with id m-9", "is_error": True}
    ]


def test_malformed_tool_input_is_answered_with_an_error_without_calling_the_runner() -> None:
    runner = Recorder()
    with FakeMessagesAPI([malformed_tool_use("write", id="bad1")]) as fake:
        usage = engine(fake).run(request(), runner, no_plan)
        second = fake.requests[1].body["messages"]
    assert runner.calls == [] and usage.calls == 2
    (result,) = second[-1]["content"]
    assert (
        result["tool_use_id"] == "bad1" and result["is_error"] is True and "JSON object" in result["content"]
    )
    assert second[1]["content"][0]["input"] == {}  # echoed as an object, which the API requires


def test_max_turns_bound_raises_instead_of_silently_succeeding() -> None:
    script = [reply(tool_use("search", {"q": str(i)})) for i in range(5)]
    runner = Recorder()
    with FakeMessagesAPI(script) as fake:
        with pytest.raises(MaxTurnsExceeded) as exc:
            engine(fake).run(request(step="dedupe", max_turns=2), runner, no_plan)
        assert len(fake.requests) == 2
    assert "'dedupe'" in str(exc.value) and "max_turns=2" in str(exc.value)
    assert "executed before: search x1" in str(exc.value)  # what was done, for the operator
    from anima_pipeline.night.failure_kinds import is_transient

    assert not is_transient(exc.value)  # deterministic: Dagster must not retry it
    assert runner.calls == [("search", {"q": "0"})]  # the last turn's call was not executed
    assert exc.value.usage.calls == 2 and exc.value.step == "dedupe"


# --- retries and timeouts ---------------------------------------------------------------


def test_overloaded_529_once_then_success() -> None:
    with FakeMessagesAPI([error(529), reply(text("ok"))]) as fake:
        usage = engine(fake).run(request(), Recorder(), no_plan)
        assert len(fake.requests) == 2
    assert usage.calls == 1  # a failed attempt is not billed


def test_429_and_500_are_retried() -> None:
    with FakeMessagesAPI([error(429), error(500), reply(text("ok"))]) as fake:
        engine(fake, max_retries=2).run(request(), Recorder(), no_plan)
        assert len(fake.requests) == 3


def test_a_long_retry_after_is_capped() -> None:
    # Without the cap the SDK would sleep the full 10 s (it honours any retry-after).
    with FakeMessagesAPI([error(429, retry_after="10"), reply(text("ok"))], retry_after_ms=None) as fake:
        started = time.monotonic()
        engine(fake, max_retry_wait=0.05).run(request(), Recorder(), no_plan)
        assert len(fake.requests) == 2
    assert time.monotonic() - started < 3


def test_retries_are_bounded() -> None:
    with FakeMessagesAPI([error(500)] * 10) as fake:
        with pytest.raises(RetriesExhausted) as exc:
            engine(fake, max_retries=3).run(request(step="summarize"), Recorder(), no_plan)
        assert len(fake.requests) == 4  # max_retries + 1
    assert exc.value.status == 500 and exc.value.step == "summarize"
    assert "'summarize'" in str(exc.value) and "500" in str(exc.value) and "4 attempt" in str(exc.value)


def test_non_retryable_status_fails_at_once() -> None:
    with FakeMessagesAPI([error(400, "messages: bad")]) as fake:
        with pytest.raises(RequestRejected) as exc:
            engine(fake).run(request(), Recorder(), no_plan)
        assert len(fake.requests) == 1
    assert exc.value.status == 400 and "invalid_request_error" in str(exc.value)


def test_timeout_is_retried() -> None:
    with FakeMessagesAPI([delay(2.0), reply(text("ok"))]) as fake:
        usage = engine(fake, timeout=0.3, max_retries=1).run(request(), Recorder(), no_plan)
        assert len(fake.requests) == 2
    assert usage.calls == 1


def test_timeouts_exhaust_retries() -> None:
    with FakeMessagesAPI([delay(2.0), delay(2.0)]) as fake:
        with pytest.raises(RetriesExhausted, match=r"timed out \(0\.3s per attempt\) on all 2 attempt"):
            engine(fake, timeout=0.3, max_retries=1).run(request(), Recorder(), no_plan)
        assert len(fake.requests) == 2


# --- budget, cache and cost -------------------------------------------------------------


def test_budget_stops_the_step_before_the_next_call() -> None:
    budget = Budget(max_tokens=1)
    script = [reply(tool_use("search", {"q": "x"})), reply(text("never sent"))]
    with FakeMessagesAPI(script) as fake:
        eng = engine(fake, budget=budget)
        with pytest.raises(BudgetExceeded) as exc:
            eng.run(request(step="link"), Recorder(), no_plan)
        assert len(fake.requests) == 1
        with pytest.raises(BudgetExceeded):  # the next step of the run starts over budget
            eng.run(request(step="prune"), Recorder(), no_plan)
        assert len(fake.requests) == 1
    msg = str(exc.value)
    assert "'link'" in msg and "token limit" in msg and "of a 1 token limit" in msg
    assert exc.value.usage.calls == 1 and budget.spent.calls == 1


def test_cached_prefix_is_read_on_the_second_call_and_cost_follows() -> None:
    script = [reply(tool_use("search", {"q": "x"}, id="t1")), reply(text("done"))]
    with FakeMessagesAPI(script, min_cache_tokens=50) as fake:
        usage = engine(fake).run(request(cache_system=True, cache_turns=False), Recorder(), no_plan)
        first, second = (r.body for r in fake.requests)
    assert first["system"][0]["cache_control"] == {"type": "ephemeral"}
    assert all("cache_control" not in b for b in first["messages"][0]["content"])
    assert usage.cache_write_tokens > 0 and usage.cache_read_tokens == usage.cache_write_tokens
    expected = (
        usage.input_tokens * 1.0
        + usage.output_tokens * 5.0
        + usage.cache_write_tokens * 1.25
        + usage.cache_read_tokens * 0.10
    ) / 1e6
    assert usage.cost_usd == pytest.approx(expected, abs=2e-6) and usage.cost_usd > 0


def test_no_cache_flag_means_no_cache_tokens() -> None:
    with FakeMessagesAPI(
        [reply(tool_use("search", {"q": "x"})), reply(text("done"))], min_cache_tokens=1
    ) as fake:
        usage = engine(fake).run(request(cache_system=False, cache_turns=False), Recorder(), no_plan)
    assert usage.cache_read_tokens == usage.cache_write_tokens == 0 and usage.input_tokens > 0


# --- the key never leaks ------------------------------------------------------------------


def test_api_key_is_sent_as_x_api_key_and_never_leaks(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    errors: list[BaseException] = []
    script = [error(529), reply(tool_use("search", {"q": "x"})), reply(text("ok")), *[error(500)] * 3]
    with FakeMessagesAPI(script) as fake:
        eng = engine(fake, timeout=0.3)
        eng.run(request(), Recorder(), no_plan)
        with pytest.raises(RetriesExhausted) as exc:
            eng.run(request(), Recorder(), no_plan)
        errors.append(exc.value)
        reqs = fake.requests
    with FakeMessagesAPI(api_key="sk-ant-some-other-key") as strict:  # a revoked/wrong key: 401
        with pytest.raises(RequestRejected) as exc:
            engine(strict).run(request(), Recorder(), no_plan)
        errors.append(exc.value)
    with FakeMessagesAPI([error(400, f"bad header x-api-key: {KEY}")]) as echoing:  # a proxy echoing it
        with pytest.raises(RequestRejected) as exc:
            engine(echoing).run(request(), Recorder(), no_plan)
        assert "[redacted]" in str(exc.value)
        errors.append(exc.value)
    with FakeMessagesAPI([delay(2.0)] * 3) as slow:
        with pytest.raises(RetriesExhausted) as exc:
            engine(slow, timeout=0.2, max_retries=1).run(request(), Recorder(), no_plan)
        errors.append(exc.value)
    with pytest.raises(RetriesExhausted) as exc:  # nothing listening
        AnthropicEngine(MODEL, SecretStr(KEY), base_url="http://127.0.0.1:9", max_retries=0).run(
            request(), Recorder(), no_plan
        )
    errors.append(exc.value)

    assert all(r.headers.get("x-api-key") == KEY for r in reqs) and len(reqs) == 6
    assert all("authorization" not in r.headers for r in reqs)
    for err in errors:
        assert KEY not in "".join(traceback.format_exception(err))
    assert KEY not in repr(eng) and KEY not in str(vars(eng).get("_api_key"))
    assert any(r.name.startswith("anthropic") for r in caplog.records)  # the SDK's DEBUG logs are in
    assert KEY not in caplog.text
    assert all(KEY not in str(r.args) for r in caplog.records)


# --- construction, factory, pricing, budget, offline ---------------------------------------


def test_unknown_model_is_refused_naming_the_model_and_the_known_ones() -> None:
    with pytest.raises(UnknownModelError) as exc:
        AnthropicEngine("mistral-large", SecretStr(KEY))
    assert "'mistral-large'" in str(exc.value) and "claude-sonnet-4-5" in str(exc.value)
    assert "ANIMA_LLM_UNPRICED" in str(exc.value)
    assert isinstance(exc.value, ValueError) and isinstance(exc.value, EngineError)


def test_price_table_resolves_dated_ids_by_longest_prefix() -> None:
    assert price_for("claude-sonnet-4-5-20250929") == price_for("claude-sonnet-4-5")
    assert price_for("claude-opus-4-5-20251101").input == 5.0
    assert price_for("claude-opus-4-20250514").input == 15.0 and price_for("claude-opus-4-1").input == 15.0
    assert price_for("claude-haiku-4-5-20251001").output == 5.0
    with pytest.raises(UnknownModelError):
        price_for("claude-sonnet-40")  # not a "-" boundary
    for name, p in PRICES.items():
        if name.startswith("claude-") and "-4" in name:  # the 4.x family: the 1.25x / 0.1x cache rule
            assert p.cache_write == pytest.approx(1.25 * p.input) and p.cache_read == pytest.approx(
                0.1 * p.input
            )
    assert cost_usd("claude-sonnet-4-5", 1_000_000, 1_000_000, 1_000_000, 1_000_000) == pytest.approx(
        3 + 15 + 0.30 + 3.75
    )


def test_budget_check_names_step_spend_and_limit() -> None:
    budget = Budget(max_usd=0.01)
    budget.check("first")  # nothing spent yet
    budget.charge(Usage(calls=1, input_tokens=10, cost_usd=0.004))
    budget.charge(Usage(calls=1, output_tokens=10, cost_usd=0.007))
    assert budget.spent.calls == 2 and budget.spent.cost_usd == pytest.approx(0.011)
    with pytest.raises(BudgetExceeded, match=r"'merge'.*\$0\.0110 spent of a \$0\.0100 limit"):
        budget.check("merge")
    Budget().check("unlimited")


def test_budget_limit_is_reached_at_equality() -> None:
    budget = Budget(max_tokens=100)
    budget.charge(Usage(calls=1, input_tokens=60, output_tokens=39))
    budget.check("almost")  # 99 of 100
    budget.charge(Usage(calls=1, cache_read_tokens=1))  # cache reads count too
    with pytest.raises(BudgetExceeded, match="100 tokens spent of a 100 token limit"):
        budget.check("exactly")
    with pytest.raises(BudgetExceeded):
        Budget(max_usd=0).check("no money at all")


def test_factory_defaults_to_offline_and_requires_the_key_for_anthropic() -> None:
    assert isinstance(make_engine(Settings()), OfflineEngine)
    with pytest.raises(EngineConfigError, match="ANTHROPIC_API_KEY"):
        make_engine(Settings(engine="anthropic"))
    with pytest.raises(EngineConfigError, match="ANTHROPIC_API_KEY"):
        make_engine(Settings(engine="anthropic", anthropic_api_key=SecretStr("  ")))
    settings = Settings(
        engine="anthropic", model=MODEL, anthropic_api_key=SecretStr(KEY), budget_usd=2.5, budget_tokens=1000
    )
    eng = make_engine(settings)
    assert isinstance(eng, AnthropicEngine) and eng.name == "anthropic"
    assert eng.budget is not None and (eng.budget.max_usd, eng.budget.max_tokens) == (2.5, 1000)
    shared = Budget(max_usd=1.0)
    assert make_engine(settings, shared).budget is shared  # type: ignore[attr-defined]
    assert KEY not in repr(eng)


def test_offline_engine_feeds_each_result_back_into_the_plan() -> None:
    runner = Recorder({"create_fact": ToolResult(content="created", data={"id": "f-12"})})
    seen: list[ToolResult] = []

    def plan() -> Plan:
        created = yield ToolCall(name="create_fact", input={"text": "likes tea"})
        seen.append(created)
        yield ToolCall(name="link", input={"fact_id": created.data["id"], "episode_id": "e-3"})

    usage = OfflineEngine().run(request(), runner, plan)
    assert runner.calls == [
        ("create_fact", {"text": "likes tea"}),
        ("link", {"fact_id": "f-12", "episode_id": "e-3"}),
    ]
    assert seen[0].data == {"id": "f-12"} and usage == Usage()


def test_offline_engine_closes_the_plan_when_the_runner_fails() -> None:
    closed: list[bool] = []

    class Failing:
        def call(self, name: str, input: dict[str, Any]) -> ToolResult:
            raise RuntimeError("db down")

    def plan() -> Plan:
        try:
            yield ToolCall(name="search")
        finally:
            closed.append(True)

    try:
        OfflineEngine().run(request(), Failing(), plan)
    except RuntimeError:
        # Checked while the traceback still holds the plan, so garbage collection cannot
        # have closed it for us: the engine must have.
        assert closed == [True]
    else:
        pytest.fail("the runner's error must propagate")
    assert OfflineEngine().run(request(), Recorder(), empty_plan) == Usage()
