"""Invalid UTF-8 refused where it enters: a path, a query string or a body whose bytes are not
UTF-8 gets 422 naming the field, before any route decodes it.

Starlette decodes a percent-encoded path and query string with replacement characters
(``/conversations/a%ED%A0%80`` arrives as ``a\\ufffd\\ufffd\\ufffd`` and was stored so), and a
body that is not UTF-8 ends in FastAPI's 400 "There was an error parsing the body", naming
nothing. The field is named as everywhere else (core/validation.py `field_name`): a path
parameter by the route's own name (``conversation_id``), a query parameter by its key, a
body's string by its place (``messages[0].content``); ``path``, ``query`` or ``body`` when the
place cannot be told. A lone surrogate written as a JSON escape (``"\\ud800"``) is valid UTF-8
and is refused by the request models themselves, in their words.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import unquote_to_bytes

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from anima_pipeline.core.errors import InputError
from anima_pipeline.core.validation import field_name, text_problem
from anima_pipeline.service.http.error_handlers import error_response

_ESCAPED = re.compile("[\udc80-\udcff]")  # what surrogateescape makes of a byte that is not UTF-8


def problem(raw: bytes) -> str | None:
    """Why `raw` is not UTF-8 text, in the doors' words, or None when it is. A surrogate
    encoded as UTF-8 bytes (``%ED%A0%80``: what a lone ``\ud800`` becomes on the wire) is
    refused in the words a JSON ``"\ud800"`` gets at every door (core/validation.py)."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        try:
            surrogate = text_problem(raw.decode("utf-8", "surrogatepass"))
        except UnicodeDecodeError:
            surrogate = None
        if surrogate is not None:
            return surrogate.message()
        at = len(raw[: exc.start].decode("utf-8", "replace"))
        return f"is not valid UTF-8 (byte 0x{raw[exc.start]:02X} at character {at})"
    return None


def first_string_matching(
    value: Any, pattern: re.Pattern[str] = _ESCAPED, loc: tuple[int | str, ...] = ()
) -> tuple[tuple[int | str, ...], str] | None:
    """The first string (key or value) of a JSON document that `pattern` finds something in (by
    default a byte that is not UTF-8, as surrogateescape reads it): its place and the string."""
    if isinstance(value, str):
        return (loc, value) if pattern.search(value) else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if isinstance(key, str) and pattern.search(key):
            return (*loc, _shown(key)), key
        found = first_string_matching(item, pattern, (*loc, key))
        if found:
            return found
    return None


def _shown(key: str) -> str:
    """A key as an error names it: a byte that is not UTF-8 as U+FFFD; a lone surrogate escape
    stays (the answer is written with it escaped)."""
    try:
        return key.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:
        return key


async def read_body(receive: Receive) -> tuple[bytes, Receive]:
    """The request's whole body, and a `receive` that gives the app the same messages again
    (a middleware that must read the body before the app does)."""
    body, more, messages = b"", True, []
    while more:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":  # the client went away
            break
        body += message.get("body", b"")
        more = message.get("more_body", False)
    replayed = iter(messages)

    async def replay() -> Message:
        return next(replayed, None) or await receive()

    return body, replay


class Utf8Guard:
    """The ASGI middleware: 422 for a path segment, a query parameter or a body that is not UTF-8."""

    def __init__(self, app: ASGIApp, paths: Callable[[], Iterable[str]]) -> None:
        self.app, self.paths = app, paths  # the routes' templates, asked when a path is refused

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self._path(scope) or self._query(scope)
        if refusal:
            await error_response(refusal)(scope, receive, send)
            return
        body, replay = await read_body(receive)
        refusal = self._body(body)
        if refusal:
            await error_response(refusal)(scope, receive, send)
            return
        await self.app(scope, replay, send)

    def _path(self, scope: Scope) -> InputError | None:
        raw = scope.get("raw_path") or scope["path"].encode()
        segments = [unquote_to_bytes(s) for s in raw.split(b"?", 1)[0].split(b"/")]
        for i, segment in enumerate(segments):
            why = problem(segment)
            if why:
                field = self._parameter(scope["path"], i) or "path"
                return InputError(why, field=field)
        return None

    def _parameter(self, path: str, index: int) -> str | None:
        """The name of the route parameter at segment `index` of `path`, by the route whose
        other segments match."""
        parts = path.split("/")
        for route in self.paths():
            template = route.split("/")
            if len(template) != len(parts) or not template[index].startswith("{"):
                continue
            if all(t.startswith("{") or t == p for t, p in zip(template, parts, strict=True)):
                return template[index].strip("{}").split(":")[0]
        return None

    @staticmethod
    def _query(scope: Scope) -> InputError | None:
        for pair in scope.get("query_string", b"").split(b"&"):
            key, _, value = pair.partition(b"=")
            key, value = (
                unquote_to_bytes(key.replace(b"+", b" ")),
                unquote_to_bytes(value.replace(b"+", b" ")),
            )
            why = problem(key) or problem(value)
            if why:
                return InputError(why, field=key.decode("utf-8", "replace") or "query")
        return None

    @staticmethod
    def _body(body: bytes) -> InputError | None:
        why = problem(body)
        if why is None:
            return None
        try:
            document = json.loads(body.decode("utf-8", "surrogateescape"))
        except ValueError:
            return InputError(why, field="body")
        found = first_string_matching(document)
        if not found or not found[0]:
            return InputError(why, field="body")
        loc, text = found
        raw = text.encode("utf-8", "surrogateescape")
        return InputError(problem(raw) or why, field=field_name(loc))
