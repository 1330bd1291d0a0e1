"""A scripted fake of an OpenAI-compatible chat-completions server, served over real HTTP on
127.0.0.1 (the counterpart of testkit/fake_messages_api.py for ANIMA_ENGINE=openai).

Tests point the official openai SDK at it (`base_url=fake.url`, or OPENAI_BASE_URL for the
CLI), so retries, timeouts, headers and response parsing are the SDK's own, not a mock's. The
fake answers `POST /v1/chat/completions` from a script of actions consumed in order (an answer,
an error status, a delay); when the script runs out it answers a short text (`finish_reason`
stop), unless `responder` has an answer for the request (`night_autopilot` writes what the
must-write steps of a night need). It records every request for assertions.

What the script can ask for: tool calls (`call`), text-only answers (`say`), an answer cut by
the output limit (`cut`, or `reply(..., needs=N)`, cut while the request's limit is below N and
served whole once it is not), `content_filter` (`filtered`), a `refusal`, tool arguments that
are not JSON (`malformed`), error statuses with the real API's error body and `retry-after`
(`error(429)`, `error(500)`), and delays longer than a client's timeout (`delay`).

It checks what a real server would reject (a missing or wrong bearer key, a `tool` message that
answers no call, an assistant's `tool_calls` left without their `tool` messages, arguments that
are not a string, an assistant message with neither content nor calls): those get a 400/401 and
do not consume the script, so an engine bug shows as a failure. Usage is reported the way
OpenAI reports it: `prompt_tokens` (a quarter of the prompt's JSON characters), its automatic
prefix cache as `prompt_tokens_details.cached_tokens` (the longest earlier prompt this one
starts with, message by message, if at least `min_cache_tokens`), `completion_tokens`; a server
that reports no cache (`report_cached=False`) or no usage at all (`report_usage=False`) too.

Standalone: `python -m testkit.fake_chat_completions --port 8766 --script s.json` prints its
URL (…/v1); point the CLI at it with OPENAI_BASE_URL.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from testkit.fake_messages_api import sleep_autopilot
from testkit.scripted_server import RecordedRequest, ScriptedServer

Action = dict[str, Any]

ERROR_TYPES = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("server_error", None),
}
ROLES = ("system", "developer", "user", "assistant", "tool")


# --- script actions (plain dicts, so a script can also be a JSON file) -----------------


def call(name: str, arguments: dict[str, Any] | str, id: str | None = None) -> dict[str, Any]:
    """One tool call; `arguments` a dict (sent as its JSON) or the raw string the model wrote."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
    part: dict[str, Any] = {"type": "function", "function": {"name": name, "arguments": raw}}
    if id is not None:
        part["id"] = id
    return part


def reply(
    *calls: dict[str, Any],
    text: str | None = None,
    finish_reason: str | None = None,
    needs: int | None = None,
    refusal: str | None = None,
) -> Action:
    """A 200 answer. `finish_reason` defaults to tool_calls if there are calls, else stop.
    `needs`: the output this answer takes; a request with a lower limit gets it cut (finish
    length, the last call's arguments cut in half) and the action stays in the script."""
    action: Action = {
        "type": "response",
        "text": text,
        "tool_calls": list(calls),
        "finish_reason": finish_reason,
        "refusal": refusal,
    }
    if needs is not None:
        action["needs"] = needs
    return action


def say(text: str) -> Action:
    """A text-only answer (finish_reason stop)."""
    return reply(text=text)


def cut(*calls: dict[str, Any], text: str | None = None) -> Action:
    """An answer stopped by the output limit (finish_reason length), its calls as given."""
    return reply(*calls, text=text, finish_reason="length")


def filtered(text: str = "") -> Action:
    """An answer withheld by the content filter (finish_reason content_filter)."""
    return reply(text=text or None, finish_reason="content_filter")


def malformed(name: str, raw: str = '{"content": "unterminated', id: str | None = None) -> Action:
    """A tool call whose arguments are not JSON (the model emitted bad JSON)."""
    return reply(call(name, raw, id))


def error(
    status: int, message: str | None = None, retry_after: str | None = "0", code: str | None = None
) -> Action:
    """An error status with the real API's error body (`code` overrides the status's own)."""
    return {"type": "error", "status": status, "message": message, "retry_after": retry_after, "code": code}


def delay(seconds: float, then: Action | None = None) -> Action:
    """Sleep (longer than the client's timeout, typically), then answer `then`."""
    return {"type": "delay", "seconds": seconds, "then": then}


def _check_action(action: Any) -> None:
    kind = action.get("type") if isinstance(action, dict) else None
    if kind == "response":
        if not isinstance(action.get("tool_calls"), list):
            raise ValueError(f"response action needs a tool_calls list: {action!r}")
    elif kind == "error":
        if not isinstance(action.get("status"), int):
            raise ValueError(f"error action needs an int status: {action!r}")
    elif kind == "delay":
        if action.get("then") is not None:
            _check_action(action["then"])
    else:
        raise ValueError(f"unknown action (type must be response, error or delay): {action!r}")


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def night_autopilot(body: dict[str, Any]) -> Action | None:
    """testkit/fake_messages_api.py's `sleep_autopilot` for this API: the first turn of a step
    that must write gets one valid write (a temporal summary, the dream, the autobiography
    summary); everything else ends the turn."""
    messages = body.get("messages") or []
    if messages and messages[-1].get("role") == "tool":
        return None
    shaped = {
        "tools": [{"name": (t.get("function") or {}).get("name")} for t in body.get("tools") or []],
        "system": [
            {"type": "text", "text": _text_of(m.get("content"))}
            for m in messages
            if m.get("role") == "system"
        ],
        "messages": [
            {"role": m.get("role"), "content": [{"type": "text", "text": _text_of(m.get("content"))}]}
            for m in messages
            if m.get("role") in ("user", "assistant")
        ],
    }
    action = sleep_autopilot(shaped)
    if action is None:
        return None
    return reply(*(call(b["name"], b["input"]) for b in action["content"] if b.get("type") == "tool_use"))


# --- request checks and the prefix cache ---------------------------------------------


def _invalid(body: Any) -> str | None:
    """What a real server would answer 400 for (the subset an engine can get wrong)."""
    if not isinstance(body, dict):
        return "request body must be a JSON object"
    for field in ("model", "messages"):
        if field not in body:
            return f"Missing required parameter: '{field}'."
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        return "Invalid 'messages': empty array. Expected an array with minimum length 1."
    if body.get("tool_choice") is not None and not body.get("tools"):
        return "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified."
    for i, tool in enumerate(body.get("tools") or []):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if (
            not isinstance(tool, dict)
            or tool.get("type") != "function"
            or not isinstance(fn, dict)
            or not fn.get("name")
        ):
            return f"Invalid 'tools[{i}]': expected a function tool with a name."
    open_ids: list[str] = []
    for i, msg in enumerate(messages):
        role = msg.get("role") if isinstance(msg, dict) else None
        if role not in ROLES:
            return f"Invalid value for 'messages[{i}].role': {role!r}."
        if role == "tool":
            if msg.get("tool_call_id") not in open_ids:
                return (
                    f"Invalid parameter: messages with role 'tool' must be a response to a preceeding "
                    f"message with 'tool_calls' (messages[{i}])."
                )
            if not isinstance(msg.get("content"), str | list):
                return f"Invalid type for 'messages[{i}].content': expected a string."
            open_ids.remove(msg["tool_call_id"])
            continue
        if open_ids:
            return (
                "An assistant message with 'tool_calls' must be followed by tool messages responding to "
                f"each 'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(open_ids)}"
            )
        calls = msg.get("tool_calls") or []
        if role == "assistant":
            if msg.get("content") is None and not calls:
                return f"Invalid value for 'messages[{i}].content': content is required without 'tool_calls'."
            for j, c in enumerate(calls):
                fn = c.get("function") if isinstance(c, dict) else None
                if not isinstance(fn, dict) or not c.get("id") or not isinstance(fn.get("arguments"), str):
                    return (
                        f"Invalid 'messages[{i}].tool_calls[{j}]': an id and string arguments are required."
                    )
            open_ids = [c["id"] for c in calls]
        elif msg.get("content") is None:
            return f"Invalid value for 'messages[{i}].content': expected a string."
    if open_ids:
        return (
            "An assistant message with 'tool_calls' must be followed by tool messages responding to "
            f"each 'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(open_ids)}"
        )
    return None


def _tokens(value: Any) -> int:
    return len(json.dumps(value, sort_keys=True, ensure_ascii=False)) // 4 if value else 0


class PrefixCache:
    """OpenAI's automatic prompt cache, by message: a request reads the longest prefix (the tools,
    then whole messages) an earlier request to the same model sent, if at least `min_tokens`."""

    def __init__(self, min_tokens: int = 1024) -> None:
        self.min_tokens = min_tokens
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def account(self, body: dict[str, Any]) -> tuple[int, int]:
        """(prompt_tokens, cached_tokens) of a request."""
        parts = [body.get("tools") or [], *(body.get("messages") or [])]
        total = _tokens(parts)
        keys = [
            hashlib.sha256(
                json.dumps([body.get("model"), parts[: i + 1]], sort_keys=True).encode()
            ).hexdigest()
            for i in range(len(parts))
        ]
        with self._lock:
            hits = [i for i, k in enumerate(keys) if k in self._seen]
            self._seen.update(keys)
        cached = _tokens(parts[: hits[-1] + 1]) if hits else 0
        return total, cached if cached >= self.min_tokens else 0


# --- the server -----------------------------------------------------------------------


class FakeChatCompletions(ScriptedServer):
    """`with FakeChatCompletions([reply(call(...)), error(429), ...]) as fake: fake.url`.

    `api_key`, if given, must match the request's bearer token (else 401). `retry_after_ms` is
    sent with every error so SDK-style retries are fast."""

    thread_name = "fake-chat-completions"

    def __init__(
        self,
        script: list[Action] | None = None,
        *,
        api_key: str | None = None,
        min_cache_tokens: int = 1024,
        report_cached: bool = True,
        report_usage: bool = True,
        retry_after_ms: int | None = 1,
        host: str = "127.0.0.1",
        port: int = 0,
        responder: Callable[[dict[str, Any]], Action | None] | None = None,
    ) -> None:
        for action in script or []:
            _check_action(action)
        self.responder = responder
        self.api_key = api_key
        self.cache = PrefixCache(min_cache_tokens)
        self.report_cached = report_cached
        self.report_usage = report_usage
        self.retry_after_ms = retry_after_ms
        self.responses: list[dict[str, Any]] = []  # every completion answered
        self._serve(script or [], host, port, _handler_for(self))

    @property
    def url(self) -> str:
        """The base URL the SDK takes (`…/v1`)."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def bodies(self) -> list[dict[str, Any]]:
        """Every chat-completions request body, in arrival order."""
        return [
            r.body for r in self.requests if r.path == "/v1/chat/completions" and isinstance(r.body, dict)
        ]

    # -- called from handler threads --

    def _next_action(self, body: dict[str, Any]) -> Action:
        with self._lock:
            if self._script:
                action = self._script[0]
                if not self._cut(action, body):
                    self._script.pop(0)
                return action
        if self.responder is not None:
            action = self.responder(body)
            if action is not None:
                return action
        return say("Done.")

    @staticmethod
    def _limit(body: dict[str, Any]) -> int:
        return int(body.get("max_completion_tokens") or body.get("max_tokens") or 0)

    def _cut(self, action: Action, body: dict[str, Any]) -> bool:
        needs = action.get("needs")
        return bool(needs and self._limit(body) < needs)

    def _completion(self, action: Action, body: dict[str, Any]) -> dict[str, Any]:
        calls = [json.loads(json.dumps(c)) for c in action.get("tool_calls") or []]
        finish = action.get("finish_reason")
        if self._cut(action, body):
            finish = "length"
            if calls:  # the last call loses the end of its arguments
                raw = calls[-1]["function"]["arguments"]
                calls[-1]["function"]["arguments"] = raw[: len(raw) // 2]
        for c in calls:
            c.setdefault("id", f"call_fake_{next(self._ids):04d}")
        finish = finish or ("tool_calls" if calls else "stop")
        message: dict[str, Any] = {
            "role": "assistant",
            "content": action.get("text"),
            "refusal": action.get("refusal"),
        }
        if calls:
            message["tool_calls"] = calls
        completion: dict[str, Any] = {
            "id": f"chatcmpl-fake-{next(self._ids):04d}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
        }
        if self.report_usage:
            prompt, cached = self.cache.account(body)
            out = max(1, _tokens(message) - 10)
            usage: dict[str, Any] = {
                "prompt_tokens": prompt,
                "completion_tokens": out,
                "total_tokens": prompt + out,
            }
            if self.report_cached:
                usage["prompt_tokens_details"] = {"cached_tokens": cached}
            completion["usage"] = usage
        with self._lock:
            self.responses.append(completion)
        return completion


def _error_body(status: int, message: str | None, code: str | None = None) -> dict[str, Any]:
    kind, own_code = ERROR_TYPES.get(status, ("server_error", None))
    return {
        "error": {
            "message": message or kind.replace("_", " "),
            "type": kind,
            "param": None,
            "code": code or own_code,
        }
    }


def _handler_for(fake: FakeChatCompletions) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass  # requests are recorded instead

        def _send(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.send_header("x-request-id", f"req_fake_{next(fake._ids):04d}")
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (timeout); nothing to answer

        def _send_error(
            self,
            status: int,
            message: str | None = None,
            retry_after: str | None = None,
            code: str | None = None,
        ) -> None:
            headers = {}
            if retry_after is not None:
                headers["retry-after"] = retry_after
            if fake.retry_after_ms is not None:
                headers["retry-after-ms"] = str(fake.retry_after_ms)
            self._send(status, _error_body(status, message, code), headers)

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("content-length") or 0)).decode("utf-8", "replace")
            try:
                body: Any = json.loads(raw)
            except json.JSONDecodeError:
                body = raw
            path = self.path.split("?", 1)[0]
            headers = {k.lower(): v for k, v in self.headers.items()}
            fake._record(RecordedRequest("POST", path, headers, body))
            if path != "/v1/chat/completions":
                return self._send_error(404, f"no route for POST {path}", code="unknown_url")
            key = headers.get("authorization", "").removeprefix("Bearer ").strip()
            if not key:
                return self._send_error(401, "You didn't provide an API key.")
            if fake.api_key is not None and key != fake.api_key:
                return self._send_error(401, "Incorrect API key provided.")
            if problem := _invalid(body):
                return self._send_error(400, problem)
            self._answer(fake._next_action(body), body)
            return None

        def _answer(self, action: Action, body: dict[str, Any]) -> None:
            if action["type"] == "delay":
                if fake._stopping.wait(action["seconds"]):
                    return None
                return self._answer(action.get("then") or say("Done (late)."), body)
            if action["type"] == "error":
                return self._send_error(
                    action["status"], action.get("message"), action.get("retry_after"), action.get("code")
                )
            self._send(200, fake._completion(action, body))
            return None

    return Handler


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description="Serve a scripted fake OpenAI-compatible chat-completions API."
    )
    parser.add_argument("--port", type=int, default=8766)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--script", type=Path, help="JSON list of actions (response/error/delay dicts)")
    parser.add_argument("--min-cache-tokens", type=int, default=1024)
    args = parser.parse_args(argv)
    script = json.loads(args.script.read_text()) if args.script else []
    if not isinstance(script, list):
        parser.error("--script must hold a JSON list of actions")
    fake = FakeChatCompletions(script, min_cache_tokens=args.min_cache_tokens, host=args.host, port=args.port)
    with fake:
        print(fake.url, flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
