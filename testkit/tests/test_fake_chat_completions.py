"""The fake chat-completions server itself: scripting, recording, a real server's checks, its
prefix-cache usage and the night's autopilot. Engine behaviour is tested in
anima_pipeline_tests/unit/test_openai_engine.py."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from testkit.fake_chat_completions import (
    FakeChatCompletions,
    PrefixCache,
    call,
    cut,
    delay,
    error,
    filtered,
    malformed,
    night_autopilot,
    reply,
    say,
)

KEY = "sk-test-fake-openai-key"


def post(url: str, body: Any, key: str | None = KEY, timeout: float = 5) -> tuple[int, dict[str, str], Any]:
    headers = {"content-type": "application/json"}
    if key is not None:
        headers["authorization"] = f"Bearer {key}"
    req = urllib.request.Request(url + "/chat/completions", json.dumps(body).encode(), headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, dict(resp.headers), json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), json.loads(err.read())


def body(*messages: dict[str, Any], model: str = "gpt-4.1-mini", **extra: Any) -> dict[str, Any]:
    return {"model": model, "messages": list(messages), "max_completion_tokens": 100, **extra}


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


TOOLS = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]


def test_script_is_served_in_order_then_stop_and_requests_are_recorded() -> None:
    script = [reply(call("search", {"q": "x"}), text="Let me look."), error(500), filtered()]
    with FakeChatCompletions(script) as fake:
        s1, _, r1 = post(fake.url, body(user("a"), tools=TOOLS))
        s2, h2, r2 = post(fake.url, body(user("b")))
        s3, _, r3 = post(fake.url, body(user("c")))
        s4, _, r4 = post(fake.url, body(user("d")))
        reqs = fake.requests
    (choice,) = r1["choices"]
    assert (
        s1 == 200
        and choice["finish_reason"] == "tool_calls"
        and choice["message"]["content"] == "Let me look."
    )
    (tc,) = choice["message"]["tool_calls"]
    assert tc["id"].startswith("call_") and json.loads(tc["function"]["arguments"]) == {"q": "x"}
    assert r1["usage"]["prompt_tokens"] > 0 and r1["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}
    assert s2 == 500 and r2["error"]["type"] == "server_error" and h2["retry-after"] == "0"
    assert s3 == 200 and r3["choices"][0]["finish_reason"] == "content_filter"
    assert s4 == 200 and r4["choices"][0] == {
        "index": 0,
        "message": {"role": "assistant", "content": "Done.", "refusal": None},
        "finish_reason": "stop",
        "logprobs": None,
    }
    assert [r.body["messages"][0]["content"] for r in reqs] == ["a", "b", "c", "d"]
    assert reqs[0].headers["authorization"] == f"Bearer {KEY}" and reqs[0].path == "/v1/chat/completions"


def test_missing_key_and_invalid_histories_are_rejected_without_consuming_the_script() -> None:
    asked = {"role": "assistant", "content": None, "tool_calls": [call("search", "{}", id="c1")]}
    answered = {"role": "tool", "tool_call_id": "c1", "content": "found"}
    with FakeChatCompletions([say("scripted")], api_key=KEY) as fake:
        assert post(fake.url, body(user("a")), key=None)[0] == 401
        status, _, err = post(fake.url, body(user("a")), key="sk-wrong")
        assert (status, err["error"]["code"]) == (401, "invalid_api_key")
        status, _, err = post(fake.url, body(user("a"), asked, user("no tool message")))
        assert status == 400 and "did not have response messages: c1" in err["error"]["message"]
        status, _, err = post(
            fake.url, body(user("a"), {"role": "tool", "tool_call_id": "c9", "content": "x"})
        )
        assert status == 400 and "must be a response to a preceeding message" in err["error"]["message"]
        bad_args = {
            **asked,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "s", "arguments": {}}}],
        }
        status, _, err = post(fake.url, body(user("a"), bad_args, answered))
        assert status == 400 and "string arguments" in err["error"]["message"]
        status, _, err = post(fake.url, body(user("a"), tool_choice="auto"))
        assert status == 400 and "only allowed when 'tools'" in err["error"]["message"]
        assert fake.remaining == 1
        ok, _, r = post(fake.url, body(user("a"), asked, answered))
        assert ok == 200 and r["choices"][0]["message"]["content"] == "scripted"


def test_the_prefix_cache_reads_the_longest_earlier_prefix_per_model() -> None:
    cache = PrefixCache(min_tokens=10)
    system = {"role": "system", "content": "You consolidate memories. " * 20}
    first = cache.account(body(system, user("night 1")))
    second = cache.account(body(system, user("night 2, a longer message")))
    assert first[1] == 0 and 0 < second[1] < second[0]  # the system message, not the new user turn
    grown = cache.account(
        body(system, user("night 2, a longer message"), {"role": "assistant", "content": "ok"})
    )
    assert grown[1] > second[1]  # the whole earlier prompt
    assert cache.account(body(system, user("night 1"), model="other"))[1] == 0  # caches are per model
    short = PrefixCache(min_tokens=1024)
    for _ in range(2):
        assert short.account(body(user("hi")))[1] == 0  # below the minimum: never cached


def test_an_answer_that_needs_more_is_cut_until_the_limit_allows_it() -> None:
    script = [reply(call("write", {"content": "a long fact " * 10}), needs=500), cut(text="Let me think")]
    with FakeChatCompletions(script) as fake:
        _, _, first = post(fake.url, body(user("a")))
        _, _, second = post(fake.url, {**body(user("a")), "max_completion_tokens": 600})
        _, _, third = post(fake.url, body(user("a")))
    assert first["choices"][0]["finish_reason"] == "length"
    args = first["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"]
    with pytest.raises(json.JSONDecodeError):
        json.loads(args)  # the cut call's arguments end mid-object
    assert second["choices"][0]["finish_reason"] == "tool_calls"
    assert json.loads(second["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"])
    assert (
        third["choices"][0]["finish_reason"] == "length"
        and "tool_calls" not in third["choices"][0]["message"]
    )


def test_malformed_arguments_and_a_server_without_usage_details() -> None:
    with FakeChatCompletions([malformed("write", id="bad")], report_cached=False) as fake:
        _, _, r = post(fake.url, body(user("a")))
    assert r["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] == '{"content": "unterminated'
    assert "prompt_tokens_details" not in r["usage"]
    with FakeChatCompletions(report_usage=False) as fake:
        assert "usage" not in post(fake.url, body(user("a")))[2]


def test_delay_outlasts_a_client_timeout_and_the_next_action_follows() -> None:
    with FakeChatCompletions([delay(2.0), say("after the delay")]) as fake:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            post(fake.url, body(user("a")), timeout=0.3)
        assert time.monotonic() - started < 1.5
        status, _, r = post(fake.url, body(user("a")))
    assert status == 200 and r["choices"][0]["message"]["content"] == "after the delay"


def test_the_autopilot_writes_a_temporal_summary_on_a_periods_first_turn_only() -> None:
    tools = [{"type": "function", "function": {"name": "write_temporal_summary", "parameters": {}}}]
    prompt = user("Period: level day, period_start 2026-11-17, period_end 2026-11-17. Write it.")
    action = night_autopilot(body(prompt, tools=tools))
    assert action is not None
    (part,) = action["tool_calls"]
    assert part["function"]["name"] == "write_temporal_summary"
    assert json.loads(part["function"]["arguments"])["period_start"] == "2026-11-17"
    answered = [
        prompt,
        {"role": "assistant", "content": None, "tool_calls": [{**part, "id": "c1"}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
    ]
    assert night_autopilot(body(*answered, tools=tools)) is None
    assert night_autopilot(body(user("Record the durable facts."), tools=TOOLS)) is None


def test_bad_script_action_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown action"):
        FakeChatCompletions([{"type": "explode"}])


def test_standalone_cli_prints_its_url_and_serves_the_script(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([say("from the script")]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "testkit.fake_chat_completions", "--port", "0", "--script", str(script)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        status, _, r = post(url, body(user("a")))
        assert status == 200 and r["choices"][0]["message"]["content"] == "from the script"
    finally:
        proc.terminate()
        proc.wait(timeout=5)
