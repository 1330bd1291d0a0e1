"""A scripted fake of the Anthropic Messages API, served over real HTTP on 127.0.0.1.

Tests point the official SDK at it (`base_url=fake.url`), so retries, timeouts, headers
and response parsing are the SDK's own, not a mock's. The fake answers `POST /v1/messages`
from a script of actions consumed in order (a response, an error status, a delay); when
the script runs out it answers `end_turn` with a short text. It records every request
for assertions and accounts prompt caching the way the real API does, so cache and cost
accounting can be tested end to end.

It also checks what the real API would reject (missing `x-api-key`, a `tool_use` without
its `tool_result`, a non-object tool input echoed back, more than 4 cache breakpoints):
those get a 400/401 and do not consume the script, so an engine bug shows as a failure
instead of passing against a lenient fake.

Standalone: `python -m anima_pipeline_tests.fake_messages_api --port 8765 --script s.json`
prints its URL; point the CLI at it with ANTHROPIC_BASE_URL.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

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


def reply(*blocks: dict[str, Any], stop_reason: str | None = None) -> Action:
    """A 200 response. `stop_reason` defaults to tool_use if any block is a tool_use."""
    return {"type": "response", "content": list(blocks), "stop_reason": stop_reason}


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
    """Remembers cached prefixes by hash, like the API's 5-minute cache (without expiry).

    Each breakpoint caches the prefix ending at it (if at least `min_tokens` long); a
    request reads the longest breakpoint prefix already cached and writes the rest up to
    its last breakpoint. Everything after the last breakpoint is plain input.
    """

    def __init__(self, min_tokens: int = 1024) -> None:
        self.min_tokens = min_tokens
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def account(self, body: dict[str, Any]) -> dict[str, int]:
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
        if last < self.min_tokens:
            return usage
        with self._lock:
            read = next((_tokens(segs[: i + 1]) for i in reversed(points) if key(i) in self._seen), 0)
            for i in points:
                if _tokens(segs[: i + 1]) >= self.min_tokens:
                    self._seen.add(key(i))
        usage["cache_read_input_tokens"] = read
        usage["cache_creation_input_tokens"] = last - read
        usage["input_tokens"] = max(total - last, 0)
        return usage


# --- the server -----------------------------------------------------------------------


@dataclass(frozen=True)
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # names lowercased
    body: Any  # parsed JSON, or the raw text if it was not JSON


class FakeMessagesAPI:
    """`with FakeMessagesAPI([reply(...), error(529), ...]) as fake: fake.url`.

    `api_key`, if given, must match the request's `x-api-key` (else 401, like a revoked
    key). `retry_after_ms` is sent with every error so SDK retries are fast; the SDK
    ignores `retry-after: 0` and backs off 0.5 s or more, so tests would crawl without it.
    """

    def __init__(
        self,
        script: list[Action] | None = None,
        *,
        min_cache_tokens: int = 1024,
        api_key: str | None = None,
        retry_after_ms: int | None = 1,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        for action in script or []:
            _check_action(action)
        self._script = list(script or [])
        self.cache = PromptCache(min_cache_tokens)
        self.api_key = api_key
        self.retry_after_ms = retry_after_ms
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._ids = itertools.count(1)
        self._server = ThreadingHTTPServer((host, port), _handler_for(self))
        self._server.daemon_threads = True
        self._server.block_on_close = False  # a delayed handler must not hold up close()
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._lock:
            return list(self._requests)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self._script)

    def start(self) -> FakeMessagesAPI:
        # A short poll keeps close() (which waits for the loop to notice) quick in tests.
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="fake-messages-api",
            daemon=True,
        )
        self._thread.start()
        return self

    def close(self) -> None:
        self._stopping.set()
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeMessagesAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- called from handler threads --

    def _record(self, req: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(req)

    def _next_action(self) -> Action:
        with self._lock:
            if self._script:
                return self._script.pop(0)
        return reply(text("Done."), stop_reason="end_turn")

    def _message(self, action: Action, body: dict[str, Any]) -> dict[str, Any]:
        content = []
        for block in action["content"]:
            block = dict(block)
            if block.get("type") == "tool_use" and "id" not in block:
                block["id"] = f"toolu_fake_{next(self._ids):04d}"
            content.append(block)
        stop = action.get("stop_reason") or (
            "tool_use" if any(b.get("type") == "tool_use" for b in content) else "end_turn"
        )
        usage = self.cache.account(body)
        usage["output_tokens"] = max(1, len(json.dumps(content)) // 4)
        return {
            "id": f"msg_fake_{next(self._ids):04d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }


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
            if path != "/v1/messages":
                return self._send_error(404, f"no route for POST {path}")
            key = headers.get("x-api-key")
            if not key:
                return self._send_error(401, "x-api-key header is required")
            if fake.api_key is not None and key != fake.api_key:
                return self._send_error(401, "invalid x-api-key")
            if problem := _invalid(body):
                return self._send_error(400, problem)
            self._answer(fake._next_action(), body)

        def _answer(self, action: Action, body: dict[str, Any]) -> None:
            if action["type"] == "delay":
                if fake._stopping.wait(action["seconds"]):
                    return
                return self._answer(
                    action.get("then") or reply(text("Done (late)."), stop_reason="end_turn"), body
                )
            if action["type"] == "error":
                return self._send_error(action["status"], action.get("message"), action.get("retry_after"))
            self._send(200, fake._message(action, body))

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
