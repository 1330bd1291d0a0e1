"""The fake Messages API itself: scripting, recording, the real API's checks and its
prompt-cache accounting. Engine behaviour is tested in test_llm_engine.py."""

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

from testkit.fake_messages_api import (
    FakeMessagesAPI,
    PromptCache,
    delay,
    error,
    reply,
    text,
    tool_use,
)

KEY = "sk-ant-test-fake-key"


def post(url: str, body: Any, key: str | None = KEY, timeout: float = 5) -> tuple[int, dict[str, str], Any]:
    headers = {"content-type": "application/json"}
    if key is not None:
        headers["x-api-key"] = key
    req = urllib.request.Request(url + "/v1/messages", json.dumps(body).encode(), headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            return resp.status, dict(resp.headers), json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), json.loads(err.read())


def body(*messages: dict[str, Any], system: Any = None, tools: Any = None) -> dict[str, Any]:
    b: dict[str, Any] = {"model": "claude-haiku-4-5", "max_tokens": 100, "messages": list(messages)}
    if system is not None:
        b["system"] = system
    if tools is not None:
        b["tools"] = tools
    return b


def user(*blocks: Any) -> dict[str, Any]:
    return {"role": "user", "content": list(blocks)}


def cached(s: str) -> dict[str, Any]:
    return {"type": "text", "text": s, "cache_control": {"type": "ephemeral"}}


def test_script_is_served_in_order_then_end_turn_and_requests_are_recorded() -> None:
    script = [reply(text("hi"), tool_use("search", {"q": "x"})), error(529)]
    with FakeMessagesAPI(script) as fake:
        s1, _, r1 = post(fake.url, body(user(text("a"))))
        s2, h2, r2 = post(fake.url, body(user(text("b"))))
        s3, _, r3 = post(fake.url, body(user(text("c"))))
        reqs = fake.requests
    assert s1 == 200 and r1["stop_reason"] == "tool_use"
    assert r1["content"][1]["id"].startswith("toolu_") and r1["content"][1]["input"] == {"q": "x"}
    assert s2 == 529 and r2 == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "overloaded error"},
    }
    assert h2["retry-after"] == "0"
    assert s3 == 200 and r3["stop_reason"] == "end_turn" and r3["content"][0]["type"] == "text"
    assert [r.body["messages"][0]["content"][0]["text"] for r in reqs] == ["a", "b", "c"]
    assert reqs[0].headers["x-api-key"] == KEY and reqs[0].path == "/v1/messages"
    assert all(k == k.lower() for k in reqs[0].headers)


def test_missing_key_and_invalid_requests_are_rejected_without_consuming_the_script() -> None:
    tool_turn = {"role": "assistant", "content": [tool_use("search", {"q": 1}, id="t1")]}
    with FakeMessagesAPI([reply(text("scripted"))], api_key=KEY) as fake:
        assert post(fake.url, body(user(text("a"))), key=None)[0] == 401
        status, _, err = post(fake.url, body(user(text("a"))), key="sk-ant-wrong")
        assert (status, err["error"]["message"]) == (401, "invalid x-api-key")
        status, _, err = post(fake.url, body(user(text("a")), tool_turn, user(text("no result"))))
        assert status == 400 and "without `tool_result`" in err["error"]["message"]
        bad_echo = {"role": "assistant", "content": [tool_use("search", "not an object", id="t1")]}
        result = user({"type": "tool_result", "tool_use_id": "t1", "content": "x"})
        status, _, err = post(fake.url, body(user(text("a")), bad_echo, result))
        assert status == 400 and "valid dictionary" in err["error"]["message"]
        status, _, err = post(fake.url, body(user(*[cached(str(i)) for i in range(5)])))
        assert status == 400 and "maximum of 4" in err["error"]["message"]
        assert fake.remaining == 1
        ok, _, r = post(fake.url, body(user(text("a")), tool_turn, result))
        assert ok == 200 and r["content"][0]["text"] == "scripted"


def test_cache_write_then_read_for_the_same_prefix() -> None:
    cache = PromptCache(min_tokens=10)
    system = [cached("You consolidate memories. " * 20)]
    first = cache.account(body(user(text("night 1")), system=system))
    second = cache.account(body(user(text("night 2, a longer message")), system=system))
    assert first["cache_creation_input_tokens"] > 0 and first["cache_read_input_tokens"] == 0
    assert second["cache_read_input_tokens"] == first["cache_creation_input_tokens"]
    assert second["cache_creation_input_tokens"] == 0
    assert second["input_tokens"] > first["input_tokens"] > 0  # the uncached tail differs


def test_cache_reads_the_longest_cached_breakpoint_and_writes_the_rest() -> None:
    cache = PromptCache(min_tokens=10)
    tools = [{"name": "search", "description": "find memories", "input_schema": {"type": "object"}}]
    system = [cached("Shared instructions. " * 20)]
    a = cache.account(body(user(cached("step A facts " * 20)), system=system, tools=tools))
    b = cache.account(body(user(cached("step B facts " * 20)), system=system, tools=tools))
    assert a["cache_read_input_tokens"] == 0
    assert 0 < b["cache_read_input_tokens"] < a["cache_creation_input_tokens"]  # system prefix only
    assert b["cache_creation_input_tokens"] > 0  # step B's own block
    other_model = cache.account({**body(user(cached("step A facts " * 20)), system=system), "model": "x"})
    assert other_model["cache_read_input_tokens"] == 0  # caches are per model


def test_prefix_below_the_minimum_is_not_cached() -> None:
    cache = PromptCache(min_tokens=1024)
    b = body(user(text("hi")), system=[cached("short")])
    for _ in range(2):  # nor remembered: the second request reads nothing either
        usage = cache.account(b)
        assert usage["cache_creation_input_tokens"] == usage["cache_read_input_tokens"] == 0
        assert usage["input_tokens"] > 0


def test_delay_outlasts_a_client_timeout_and_the_next_action_follows() -> None:
    with FakeMessagesAPI([delay(2.0), reply(text("after the delay"))]) as fake:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            post(fake.url, body(user(text("a"))), timeout=0.3)
        assert time.monotonic() - started < 1.5
        status, _, r = post(fake.url, body(user(text("a"))))
    assert status == 200 and r["content"][0]["text"] == "after the delay"


def test_bad_script_action_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown action"):
        FakeMessagesAPI([{"type": "explode"}])


def test_standalone_cli_prints_its_url_and_serves_the_script(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([reply(text("from the script"))]))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "testkit.fake_messages_api",
            "--port",
            "0",
            "--script",
            str(script),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:")
        status, _, r = post(url, body(user(text("a"))))
        assert status == 200 and r["content"][0]["text"] == "from the script"
    finally:
        proc.terminate()
        proc.wait(timeout=5)
