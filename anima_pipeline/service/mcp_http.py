"""`anima mcp --transport streamable-http`: the SDK's app, with every request answered in
the doors' words.

The SDK's transport parses each POST body with pydantic's JSON parser, which refuses a
string holding a lone surrogate (``"\\ud800"``: valid JSON, not Unicode text) and a byte that
is not UTF-8, and answers 400 with the parser's own report (``Parse error: lone leading
surrogate in hex escape at line 1 column 80``), naming no field. Such a body is read here with
Python's JSON reader instead and answered in the words stdio gives (service/mcp_stdio.py) and
the other doors give (core/validation.py): a ``tools/call`` gets a tool error naming the
argument (``context: query: contains a lone surrogate (\\ud800) at character 1, which is not
Unicode text``), any other request a JSON-RPC error naming the place (``params.name: …``). No
tool runs and nothing is stored. A body that no JSON reader takes goes on to the SDK, which
answers it as before.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pydantic_core
from mcp.types import INVALID_PARAMS
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from anima_pipeline.core.validation import LONE_SURROGATE, field_name, text_problem
from anima_pipeline.service.http.utf8 import first_string_matching, problem, read_body
from anima_pipeline.service.mcp_stdio import StdioServer

# a JSON escape of a surrogate, lone or half of a pair (\ud83d\ude00): only such a body is parsed here too
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def _is_utf8(body: bytes) -> bool:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def refusal(body: bytes) -> dict[str, Any] | None:
    """The JSON-RPC answer to a body the SDK's parser would refuse for a lone surrogate or a
    byte that is not UTF-8, or None when the SDK reads it (or nobody can)."""
    if _is_utf8(body) and not _SURROGATE_ESCAPE.search(body):
        return None  # every ordinary request: the SDK parses it, once
    try:
        pydantic_core.from_json(body)
        return None
    except ValueError:
        pass
    try:
        document = json.loads(body.decode("utf-8", "surrogateescape"))
    except ValueError:
        return None  # not JSON at all: the SDK's parse error says so
    found = first_string_matching(document, LONE_SURROGATE)
    if not isinstance(document, dict) or found is None:
        return None
    loc, text = found
    words = _words(text, body)
    request_id = document.get("id")
    request_id = request_id if isinstance(request_id, (int, str)) and loc[:1] != ("id",) else None
    params = document.get("params")
    if (
        document.get("method") == "tools/call"
        and isinstance(params, dict)
        and loc[:2] == ("params", "arguments")
    ):
        name = params.get("name")
        result = {
            "content": [{"type": "text", "text": f"{name}: {field_name(loc[2:])}: {words}"}],
            "isError": True,
        }
        return {"jsonrpc": "2.0", "id": request_id, "result": result}
    error = {"code": INVALID_PARAMS, "message": f"{field_name(loc)}: {words}"}
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _words(text: str, body: bytes) -> str:
    """Why `text` is refused: a byte that is not UTF-8 in the HTTP service's words
    (service/http/utf8.py), a lone surrogate escape in every door's."""
    if not _is_utf8(body):
        try:
            why = problem(text.encode("utf-8", "surrogateescape"))
        except UnicodeEncodeError:  # an escaped lone surrogate beside the bad bytes
            why = None
        if why is not None:
            return why
    refused = text_problem(text)
    return refused.message() if refused is not None else "is not Unicode text"


class SurrogateAnswers:
    """The ASGI middleware before the SDK's app: answers what `refusal` refuses, passes the rest."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body, replay = await read_body(receive)
        answer = refusal(body)
        if answer is not None:
            # ensure_ascii: an id or a name echoed with a lone surrogate is written as its escape
            content = json.dumps(answer, ensure_ascii=True).encode()
            await Response(content, media_type="application/json")(scope, receive, send)
            return
        await self.app(scope, replay, send)


class AnimaMCPServer(StdioServer):
    """The MCP server whose transports answer every request: stdio re-reads what the SDK's
    parser refuses (service/mcp_stdio.py), streamable HTTP answers it (`SurrogateAnswers`)."""

    def streamable_http_app(self, **options: Any) -> Starlette:
        app = super().streamable_http_app(**options)
        app.add_middleware(SurrogateAnswers)
        return app
