"""A scripted fake of the Anthropic Messages API, served over real HTTP on 127.0.0.1.

Tests point the official SDK at it (`base_url=fake.url`), so retries, timeouts, headers
and response parsing are the SDK's own, not a mock's. The fake answers `POST /v1/messages`
from a script of actions consumed in order (a response, an error status, a delay); when
the script runs out it answers `end_turn` with a short text. It records every request
for assertions and accounts prompt caching the way the real API does, so cache and cost
accounting can be tested end to end.

It also checks what the real API would reject (missing `x-api-key`, a `tool_use` without
its `tool_result`, a non-object tool input echoed back, more than 4 cache breakpoints, a
thinking block sent back without its signature): those get a 400/401 and do not consume
the script, so an engine bug shows as a failure instead of passing against a lenient fake.

What the real API does and the script can ask for: thinking blocks (`thinking`), stops on
`max_tokens` with or without a cut tool call (`cut_tool_use`, or `reply(..., needs=N)`,
which is cut while the request's max_tokens is below N and served whole once it is not),
`refusal`, `pause_turn`, text-only answers; the minimum cacheable prefix of the model (a
prefix shorter than it is billed as plain input); and the Message Batches API
(`/v1/messages/batches`: create, retrieve, results as JSONL) answering each batched request
from the same script with the same accounting. `responder` answers when the script is
empty (`sleep_autopilot` writes what the must-write steps of a night need).

Standalone: `python -m testkit.fake_messages_api --port 8765 --script s.json`
prints its URL; point the CLI at it with ANTHROPIC_BASE_URL.

Token counting (`POST /v1/messages/count_tokens`) answers the prompt's size the way the
cache accounting measures it (a quarter of its JSON characters), consuming no script.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from testkit.scripted_server import RecordedRequest, ScriptedServer

Action = dict[str, Any]

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
MAX_CACHE_BREAKPOINTS = 4


# --- script actions (plain dicts, so a script can also be a JSON file) -----------------


def text(s: str) -> dict[str, Any]:
    return {"type": "text", "text": s}


def tool_use(name: str, input: Any, id: str | None = None) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "tool_use", "name": name, "input": input}
    if id is not None:
        block["id"] = id
    return block


def thinking(s: str, signature: str = "sig-fake") -> dict[str, Any]:
    return {"type": "thinking", "thinking": s, "signature": signature}


def reply(*blocks: dict[str, Any], stop_reason: str | None = None, needs: int | None = None) -> Action:
    """A 200 response. `stop_reason` defaults to tool_use if any block is a tool_use.
    `needs`: the output this answer takes; a request with a lower max_tokens gets it cut
    (stop max_tokens, the last tool call's input cut) and the action stays in the script."""
    action: Action = {"type": "response", "content": list(blocks), "stop_reason": stop_reason}
    if needs is not None:
        action["needs"] = needs
    return action


def cut_tool_use(name: str, partial: dict[str, Any], *before: dict[str, Any]) -> Action:
    """An answer cut by max_tokens in the middle of a tool call (its input incomplete)."""
    return reply(*before, tool_use(name, partial), stop_reason="max_tokens")


def refusal(s: str = "I can't help with that.") -> Action:
    return reply(text(s), stop_reason="refusal")


def malformed_tool_use(name: str, raw: Any = '{"text": "unterminated', id: str | None = None) -> Action:
    """A response whose tool_use input is not a JSON object (the model emitted bad JSON)."""
    return reply(tool_use(name, raw, id))


def error(status: int, message: str | None = None, retry_after: str | None = "0") -> Action:
    """An error status with the real API's error body (529 → overloaded_error, ...)."""
    return {"type": "error", "status": status, "message": message, "retry_after": retry_after}


def delay(seconds: float, then: Action | None = None) -> Action:
    """Sleep (longer than the client's timeout, typically), then answer `then`."""
    return {"type": "delay", "seconds": seconds, "then": then}


def _check_action(action: Any) -> None:
    kind = action.get("type") if isinstance(action, dict) else None
    if kind == "response":
        if not isinstance(action.get("content"), list):
            raise ValueError(f"response action needs a content list: {action!r}")
    elif kind == "error":
        if not isinstance(action.get("status"), int):
            raise ValueError(f"error action needs an int status: {action!r}")
    elif kind == "delay":
        if action.get("then") is not None:
            _check_action(action["then"])
    else:
        raise ValueError(f"unknown action (type must be response, error or delay): {action!r}")


_PERIOD = re.compile(r"Period: level (\w+), period_start (\S+), period_end ([^\s.]+)")


def _all_text(body: dict[str, Any]) -> str:
    parts = [b.get("text", "") for b in _blocks(body.get("system")) if isinstance(b, dict)]
    for msg in body.get("messages") or []:
        parts += [b.get("text", "") for b in _blocks(msg.get("content")) if isinstance(b, dict)]
    return "\n".join(p for p in parts if isinstance(p, str))


def is_stage_one(body: dict[str, Any]) -> bool:
    """Whether `body` is light sleep's stage 1 (the facts of the day), by its task: its tools
    alone do not say it (with no existing memory shown it offers only create_semantic_memory)."""
    tools = {t.get("name") for t in body.get("tools") or []}
    return "create_semantic_memory" in tools and "Record the durable facts" in _all_text(body)


def sleep_autopilot(body: dict[str, Any]) -> Action | None:
    """What a model would do in the steps of a night that must write, so a scripted test
    can leave them out: the first turn of a temporal summary, the dream or the autobiography
    summary gets one valid write; everything else (and every later turn) ends the turn."""
    messages = body.get("messages") or []
    last = _blocks(messages[-1].get("content")) if messages else []
    if any(isinstance(b, dict) and b.get("type") == "tool_result" for b in last):
        return None
    tools = {t.get("name") for t in body.get("tools") or []}
    prompt = _all_text(body)
    if "write_temporal_summary" in tools and (m := _PERIOD.search(prompt)):
        level, start, end = m.groups()
        return reply(
            tool_use(
                "write_temporal_summary",
                {
                    "level": level,
                    "period_start": start,
                    "period_end": end,
                    "content": f"The {level} in brief.",
                },
            )
        )
    if "write_dream_entry" in tools and "Message 3 — the dream" in prompt:  # deep sleep's tools, shared
        return reply(tool_use("write_dream_entry", {"next_session_actions": ["Ask how the week went."]}))
    if tools == {"write_self_block"} and "autobiography_summary" in prompt and "phase B" in prompt:
        return reply(
            tool_use("write_self_block", {"name": "autobiography_summary", "content": "- (outline)"})
        )
    return None


# --- request checks and cache accounting --------------------------------------------


def _blocks(content: Any) -> list[Any]:
    return [{"type": "text", "text": content}] if isinstance(content, str) else list(content or [])


def _invalid(body: Any) -> str | None:
    """What the real API would answer 400 for (the subset an engine can get wrong)."""
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    for field in ("model", "max_tokens", "messages"):
        if field not in body:
            return f"{field}: Field required"
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    breakpoints = sum(1 for _, b in _segments(body) if isinstance(b, dict) and "cache_control" in b)
    if breakpoints > MAX_CACHE_BREAKPOINTS:
        return f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. Found {breakpoints}."
    prev_ids: list[str] = []
    for i, msg in enumerate(messages):
        if not isinstance(msg, dict) or msg.get("role") not in ("user", "assistant"):
            return f"messages.{i}: must be an object with role user or assistant"
        blocks = _blocks(msg.get("content"))
        if msg.get("role") == "user":
            results = [b.get("tool_use_id") for b in blocks if b.get("type") == "tool_result"]
            if missing := [t for t in prev_ids if t not in results]:
                return f"messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {', '.join(missing)}"
            if unexpected := [r for r in results if r not in prev_ids]:
                return f"messages.{i}.content: unexpected `tool_use_id` found in `tool_result` blocks: {', '.join(map(str, unexpected))}"
            prev_ids = []
        else:
            prev_ids = [b.get("id") for b in blocks if b.get("type") == "tool_use"]
            for j, b in enumerate(blocks):
                if b.get("type") == "thinking" and not b.get("signature"):
                    return f"messages.{i}.content.{j}.thinking.signature: Field required"
                if b.get("type") == "tool_use" and not isinstance(b.get("input"), dict):
                    return f"messages.{i}.content.{j}.tool_use.input: Input should be a valid dictionary"
    if prev_ids:
        return f"messages.{len(messages)}: `tool_use` ids were found without `tool_result` blocks immediately after: {', '.join(prev_ids)}"
    return None


def _segments(body: dict[str, Any]) -> list[tuple[str, Any]]:
    """The prompt in cache order: tools, then system, then messages, one entry per block."""
    segs: list[tuple[str, Any]] = [("tools", t) for t in body.get("tools") or []]
    segs += [("system", b) for b in _blocks(body.get("system"))]
    for msg in body.get("messages") or []:
        segs += [(str(msg.get("role")), b) for b in _blocks(msg.get("content"))]
    return segs


def _strip(seg: tuple[str, Any]) -> tuple[str, Any]:
    # Where a breakpoint sits is not part of the cached content.
    role, block = seg
    if isinstance(block, dict):
        block = {k: v for k, v in block.items() if k != "cache_control"}
    return role, block


def _tokens(segs: list[tuple[str, Any]]) -> int:
    return len(json.dumps(segs, sort_keys=True, ensure_ascii=False)) // 4 if segs else 0


class PromptCache:
    """Remembers cached prefixes by hash, like the API's cache: an entry lives `ttl` seconds
    (5 minutes, or 1 hour for a breakpoint with `"ttl": "1h"`) from its last use, and a read
    refreshes it. The clock is real time plus `advance()` (a batch's turnaround, a test).

    Each breakpoint caches the prefix ending at it (if at least `min_tokens` long); a
    request reads the longest breakpoint prefix already cached and writes the rest up to
    its last breakpoint. Everything after the last breakpoint is plain input.
    """

    TTL_S = {"5m": 300.0, "1h": 3600.0}

    def __init__(self, min_tokens: int | None = None) -> None:
        self.fixed_min = min_tokens  # None: the model's own minimum (llm.pricing table)
        self._seen: dict[str, float] = {}  # prefix hash -> when it expires
        self._lock = threading.Lock()
        self.offset_s = 0.0

    def advance(self, seconds: float) -> None:
        """Let `seconds` pass for the cache (what a batch's turnaround would)."""
        with self._lock:
            self.offset_s += seconds

    def _now(self) -> float:
        return time.monotonic() + self.offset_s

    def min_for(self, model: Any) -> int:
        if self.fixed_min is not None:
            return self.fixed_min
        from anima_pipeline.llm.pricing import min_cache_tokens

        return min_cache_tokens(str(model))

    def account(self, body: dict[str, Any]) -> dict[str, int]:
        min_tokens = self.min_for(body.get("model"))
        raw = _segments(body)
        segs = [_strip(s) for s in raw]
        total = _tokens(segs)
        points = [i for i, (_, b) in enumerate(raw) if isinstance(b, dict) and "cache_control" in b]
        usage = {"input_tokens": total, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        if not points:
            return usage

        def key(i: int) -> str:
            blob = json.dumps([body.get("model"), segs[: i + 1]], sort_keys=True, ensure_ascii=False)
            return hashlib.sha256(blob.encode()).hexdigest()

        last = _tokens(segs[: points[-1] + 1])
        if last < min_tokens:
            return usage

        def ttl(i: int) -> float:
            control = raw[i][1].get("cache_control") or {}
            return self.TTL_S.get(str(control.get("ttl", "5m")), self.TTL_S["5m"])

        with self._lock:
            now = self._now()
            live = [i for i in points if self._seen.get(key(i), -1.0) > now]
            read = _tokens(segs[: live[-1] + 1]) if live else 0
            for i in points:  # written, or refreshed by this read
                if _tokens(segs[: i + 1]) >= min_tokens:
                    self._seen[key(i)] = max(self._seen.get(key(i), 0.0), now + ttl(i))
        usage["cache_read_input_tokens"] = read
        usage["cache_creation_input_tokens"] = last - read
        usage["input_tokens"] = max(total - last, 0)
        return usage


# --- the server -----------------------------------------------------------------------


class FakeMessagesAPI(ScriptedServer):
    """`with FakeMessagesAPI([reply(...), error(529), ...]) as fake: fake.url`.

    `api_key`, if given, must match the request's `x-api-key` (else 401, like a revoked
    key). `retry_after_ms` is sent with every error so SDK retries are fast; the SDK
    ignores `retry-after: 0` and backs off 0.5 s or more, so tests would crawl without it.
    """

    thread_name = "fake-messages-api"

    def __init__(
        self,
        script: list[Action] | None = None,
        *,
        min_cache_tokens: int | None = 1024,
        api_key: str | None = None,
        retry_after_ms: int | None = 1,
        host: str = "127.0.0.1",
        port: int = 0,
        responder: Callable[[dict[str, Any]], Action | None] | None = None,
        latency_s: float = 0.0,
        batch_latency_s: float = 0.0,
        batch_turnaround_s: float = 0.0,
    ) -> None:
        for action in script or []:
            _check_action(action)
        self.responder = responder
        self.latency_s = latency_s  # every Messages request (and every batch) takes this long
        self.batch_latency_s = batch_latency_s
        # how long the cache ages between two batches (a real batch takes minutes to hours;
        # the fake answers at once): each batch is answered that much later for the cache
        self.batch_turnaround_s = batch_turnaround_s
        self.batches: dict[str, dict[str, Any]] = {}
        self.batched: list[dict[str, Any]] = []  # params of every batched request, in order
        self.responses: list[dict[str, Any]] = []  # every message answered (sync or batched)
        self.cache = PromptCache(min_cache_tokens)
        self.api_key = api_key
        self.retry_after_ms = retry_after_ms
        self._serve(script or [], host, port, _handler_for(self))

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    # -- called from handler threads --

    @property
    def counted(self) -> int:
        """How many token-counting requests (`/v1/messages/count_tokens`) arrived."""
        with self._lock:
            return sum(1 for r in self._requests if r.path == "/v1/messages/count_tokens")

    @property
    def messages(self) -> list[dict[str, Any]]:
        """Every Messages request body, synchronous or batched, in arrival order."""
        with self._lock:
            sync = [r.body for r in self._requests if r.path == "/v1/messages" and isinstance(r.body, dict)]
            return sync + list(self.batched)

    def _next_action(self, body: dict[str, Any] | None = None) -> Action:
        with self._lock:
            if self._script:
                action = self._script[0]
                if not self._cut(action, body):
                    self._script.pop(0)
                return action
        if self.responder is not None and body is not None:
            action = self.responder(body)
            if action is not None:
                return action
        return reply(text("Done."), stop_reason="end_turn")

    @staticmethod
    def _cut(action: Action, body: dict[str, Any] | None) -> bool:
        needs = action.get("needs")
        return bool(needs and body and int(body.get("max_tokens") or 0) < needs)

    def _message(self, action: Action, body: dict[str, Any]) -> dict[str, Any]:
        blocks = action["content"]
        forced_stop = action.get("stop_reason")
        if self._cut(action, body):
            # cut by the output limit: the last tool call loses its input's end
            blocks = [dict(b) for b in blocks]
            for b in reversed(blocks):
                if b.get("type") == "tool_use":
                    b["input"] = {}
                    break
            forced_stop = "max_tokens"
        content = []
        for block in blocks:
            block = dict(block)
            if block.get("type") == "tool_use" and "id" not in block:
                block["id"] = f"toolu_fake_{next(self._ids):04d}"
            content.append(block)
        stop = forced_stop or (
            "tool_use" if any(b.get("type") == "tool_use" for b in content) else "end_turn"
        )
        usage = self.cache.account(body)
        usage["output_tokens"] = max(1, len(json.dumps(content)) // 4)
        message = {
            "id": f"msg_fake_{next(self._ids):04d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        with self._lock:
            self.responses.append(message)
        return message

    # -- Message Batches API --

    def _batch_view(self, batch: dict[str, Any]) -> dict[str, Any]:
        ended = time.monotonic() >= batch["ready_at"]
        n = len(batch["results"])
        errored = sum(1 for r in batch["results"] if r["result"]["type"] == "errored")
        return {
            "id": batch["id"],
            "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": {
                "processing": 0 if ended else n,
                "succeeded": n - errored if ended else 0,
                "errored": errored if ended else 0,
                "canceled": 0,
                "expired": 0,
            },
            "created_at": batch["created_at"],
            "expires_at": batch["expires_at"],
            "ended_at": batch["created_at"] if ended else None,
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": f"{self.url}/v1/messages/batches/{batch['id']}/results" if ended else None,
        }

    def _create_batch(self, body: Any) -> tuple[int, dict[str, Any]]:
        requests = body.get("requests") if isinstance(body, dict) else None
        if not isinstance(requests, list) or not requests:
            return 400, _error_body(400, "requests: at least one request is required")
        ids = [r.get("custom_id") for r in requests if isinstance(r, dict)]
        if len(ids) != len(requests) or len(set(ids)) != len(ids) or not all(isinstance(i, str) for i in ids):
            return 400, _error_body(400, "requests: every request needs a unique custom_id")
        results = []
        self.cache.advance(self.batch_turnaround_s)
        for r in requests:  # answered in the order sent, from the same script
            params = r.get("params")
            with self._lock:
                self.batched.append(params)
            problem = _invalid(params)
            if problem:
                results.append({"custom_id": r["custom_id"], "result": _errored(400, problem)})
                continue
            action = self._next_action(params)
            while action["type"] == "delay":
                action = action.get("then") or reply(text("Done (late)."), stop_reason="end_turn")
            if action["type"] == "error":
                results.append(
                    {"custom_id": r["custom_id"], "result": _errored(action["status"], action.get("message"))}
                )
                continue
            message = self._message(action, params)
            results.append({"custom_id": r["custom_id"], "result": {"type": "succeeded", "message": message}})
        now = datetime.now(UTC)
        batch = {
            "id": f"msgbatch_fake_{next(self._ids):04d}",
            "results": results,
            "created_at": now.isoformat(),
            "expires_at": (now + timedelta(hours=24)).isoformat(),
            "ready_at": time.monotonic() + self.batch_latency_s,
        }
        with self._lock:
            self.batches[batch["id"]] = batch
        return 200, self._batch_view(batch)


def _errored(status: int, message: str | None) -> dict[str, Any]:
    return {"type": "errored", "error": _error_body(status, message)}


def _error_body(status: int, message: str | None) -> dict[str, Any]:
    kind = ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message or kind.replace("_", " ")}}


def _handler_for(fake: FakeMessagesAPI) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output clean; requests are recorded instead

        def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.send_header("request-id", f"req_fake_{next(fake._ids):04d}")
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout); nothing to answer

        def _send_error(
            self, status: int, message: str | None = None, retry_after: str | None = None
        ) -> None:
            headers = {}
            if retry_after is not None:
                headers["retry-after"] = retry_after
            if fake.retry_after_ms is not None:
                headers["retry-after-ms"] = str(fake.retry_after_ms)
            self._send(status, _error_body(status, message), headers)

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0)).decode("utf-8", "replace")
            try:
                body: Any = json.loads(raw)
            except json.JSONDecodeError:
                body = raw
            path = self.path.split("?", 1)[0]
            headers = {k.lower(): v for k, v in self.headers.items()}
            fake._record(RecordedRequest("POST", path, headers, body))
            if path not in ("/v1/messages", "/v1/messages/batches", "/v1/messages/count_tokens"):
                return self._send_error(404, f"no route for POST {path}")
            if not self._authorized(headers):
                return None
            if path == "/v1/messages/count_tokens":
                if not isinstance(body, dict) or not body.get("model") or not body.get("messages"):
                    return self._send_error(400, "model and messages are required")
                # counted like the prompt of a request (the script is not consumed)
                return self._send(200, {"input_tokens": max(1, _tokens(_segments(body)))})
            if path == "/v1/messages/batches":
                status, payload = fake._create_batch(body)
                return self._send(status, payload)
            if problem := _invalid(body):
                return self._send_error(400, problem)
            if fake.latency_s and fake._stopping.wait(fake.latency_s):
                return None
            self._answer(fake._next_action(body), body)
            return None

        def _authorized(self, headers: dict[str, str]) -> bool:
            key = headers.get("x-api-key")
            if not key:
                self._send_error(401, "x-api-key header is required")
                return False
            if fake.api_key is not None and key != fake.api_key:
                self._send_error(401, "invalid x-api-key")
                return False
            return True

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            headers = {k.lower(): v for k, v in self.headers.items()}
            fake._record(RecordedRequest("GET", path, headers, None))
            m = re.fullmatch(r"/v1/messages/batches/([\w-]+)(/results)?", path)
            if not m:
                return self._send_error(404, f"no route for GET {path}")
            if not self._authorized(headers):
                return None
            with fake._lock:
                batch = fake.batches.get(m.group(1))
            if batch is None:
                return self._send_error(404, f"no batch {m.group(1)}")
            view = fake._batch_view(batch)
            if not m.group(2):
                return self._send(200, view)
            if view["processing_status"] != "ended":
                return self._send_error(400, "batch is still in progress")
            data = "".join(json.dumps(r) + "\n" for r in batch["results"]).encode()
            try:
                self.send_response(200)
                self.send_header("content-type", "application/binary")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass

        def _answer(self, action: Action, body: dict[str, Any]) -> None:
            if action["type"] == "delay":
                if fake._stopping.wait(action["seconds"]):
                    return None
                return self._answer(
                    action.get("then") or reply(text("Done (late)."), stop_reason="end_turn"), body
                )
            if action["type"] == "error":
                return self._send_error(action["status"], action.get("message"), action.get("retry_after"))
            self._send(200, fake._message(action, body))
            return None

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Serve a scripted fake Anthropic Messages API.")
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--script", type=Path, help="JSON list of actions (response/error/delay dicts)")
    parser.add_argument("--min-cache-tokens", type=int, default=1024)
    args = parser.parse_args(argv)
    script = json.loads(args.script.read_text()) if args.script else []
    if not isinstance(script, list):
        parser.error("--script must hold a JSON list of actions")
    fake = FakeMessagesAPI(script, min_cache_tokens=args.min_cache_tokens, host=args.host, port=args.port)
    with fake:
        print(fake.url, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
