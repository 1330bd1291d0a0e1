"""One limit at every door, by construction: the same over-limit or wrongly typed argument
through the facade, HTTP (the client, and the raw request) and MCP is refused naming the same
field, in the same words (memory/models.py holds the requests all of them validate)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import anyio
import httpx2 as httpx
import pytest
from mcp import Client

from anima_pipeline.config import Settings
from anima_pipeline.core.errors import InputError
from anima_pipeline.memory.facade import AnimaMemory
from anima_pipeline.service.client import AnimaApiError, AnimaClient
from anima_pipeline.service.http.app import create_app
from anima_pipeline.service.mcp import build_server
from anima_pipeline.store.api_keys import create_key
from anima_pipeline.store.db import Database
from anima_pipeline.store.events import Audit
from anima_pipeline.store.layers import SelfBlockRepo
from testkit.live_server import serving

IDENTITY = "I am Ana's companion; I keep what she tells me and I say when I do not know. " * 25

# (operation, arguments, the field refused, words of the refusal)
PROBES = [
    ("working_context", {"session_id": "s1", "message": "x" * 101}, "message", "above the limit of 100"),
    ("working_context", {"session_id": "s1", "message": "hi", "budget": "3000"}, "budget", "valid integer"),
    (
        "working_context",
        {"session_id": "s1", "message": "hi", "budget": 100},
        "budget",
        "greater than or equal to 500",
    ),
    ("working_context", {"session_id": "s\t1", "message": "hi"}, "session_id", "must not contain whitespace"),
    (
        "working_context",
        {"session_id": "s1", "message": "hi", "budget": 10**30},
        "budget",
        "above the model's window of 200,000 (ANIMA_CONTEXT_WINDOW_TOKENS)",
    ),
    (  # the self's identity (IDENTITY, about 480 tokens) and the message do not fit: refused, not cut
        "working_context",
        {"session_id": "s1", "message": "x" * 100, "budget": 500},
        "message",
        "do not fit the budget of 500 tokens: shorten message or raise budget",
    ),
    ("search", {"query": "tea", "limit": 0}, "limit", "greater than or equal to 1"),
    ("search", {"query": "tea", "limit": 101}, "limit", "less than or equal to 100"),
    ("search_messages", {"query": "tea", "offset": -1}, "offset", "greater than or equal to 0"),
    ("search_messages", {"query": "x" * 4001}, "query", "at most 4000 characters"),
    ("remember", {"content": "x" * 2001}, "content", "at most 2000 characters"),
    ("remember", {"content": "Ana likes tea", "type": "gossip"}, "type", "Input should be 'world'"),
]
# an MCP tool of each operation; the HTTP client's method and the facade's are the operation's
TOOL = {"working_context": "working_context", "search": "search", "search_messages": "search_messages"}


@pytest.fixture
def doors(db: Database, db_url: str, tmp_path: Path) -> Iterator[tuple[AnimaMemory, AnimaClient, Any]]:
    settings = Settings(database_url=db_url, home=tmp_path, max_message_chars=100)
    with db.transaction() as conn:
        key, _ = create_key(conn, Audit(conn=conn, anima_id="", run_id="t", step="keys/create"), "ana")
        SelfBlockRepo(conn, Audit(conn=conn, anima_id="ana", run_id="t", step="test")).write(
            "ana", "identity", IDENTITY, "test"
        )
    memory = AnimaMemory(db, "ana", settings=settings)
    with serving(create_app(db, settings)) as base, AnimaClient(base, "ana", key) as client:
        yield memory, client, build_server(memory, allow_remember=True)


def _mcp(server: Any, tool: str, args: dict) -> tuple[bool, str]:
    async def call() -> tuple[bool, str]:
        async with Client(server) as mcp:
            result = await mcp.call_tool(tool, args)
            return result.is_error, "\n".join(b.text for b in result.content)

    return anyio.run(call)


def _names(text: str, field: str) -> bool:
    """An MCP tool error naming `field`: the SDK's validation lists it on a line of its own,
    the facade's refusal starts with `field: `."""
    return f"\n{field}\n" in text or f": {field}: " in text


@pytest.mark.parametrize(
    ("operation", "args", "field", "words"), PROBES, ids=[f"{p[0]}-{p[2]}" for p in PROBES]
)
def test_every_door_refuses_the_same_argument_naming_the_same_field(
    doors, db: Database, operation: str, args: dict, field: str, words: str
) -> None:
    memory, client, server = doors
    with pytest.raises(InputError) as facade:
        getattr(memory, operation)(**args)
    assert facade.value.field == field and words in facade.value.detail, facade.value

    with pytest.raises(AnimaApiError) as http:
        getattr(client, operation)(**args)
    assert (http.value.status, http.value.code, http.value.field) == (422, "invalid_request", field), (
        http.value
    )
    assert words in http.value.message

    is_error, text = _mcp(server, TOOL.get(operation, operation), args)
    assert is_error and _names(text, field) and words in text, text
    with db.transaction() as conn:
        assert conn.execute("SELECT count(*) AS n FROM semantic_memory").fetchone()["n"] == 0


def test_numbers_given_as_strings_are_refused_but_a_query_string_is_text(doors, db: Database) -> None:
    """`"limit": "10"` is refused by the facade and MCP as `"budget": "3000"` is by every door;
    in a URL's query string every value is text, so `?limit=10` reads the digits (and only them)."""
    memory, client, server = doors
    with pytest.raises(InputError) as facade:
        memory.search("tea", limit="10")  # type: ignore[arg-type]
    assert facade.value.field == "limit"
    is_error, text = _mcp(server, "search", {"query": "tea", "limit": "10"})
    assert is_error and _names(text, "limit"), text
    base = str(client._base)
    headers = client._headers
    assert (
        httpx.get(f"{base}/search", params={"query": "tea", "limit": "10"}, headers=headers).status_code
        == 200
    )
    bad = httpx.get(f"{base}/search", params={"query": "tea", "limit": "10.0"}, headers=headers)
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "limit"
    flag = httpx.put(f"{base}/conversations/c1", json={"debug": "true"}, headers=headers)
    assert flag.status_code == 422 and flag.json()["error"]["field"] == "debug"
    with pytest.raises(InputError) as debug:
        memory.open_conversation("c1", debug="true")  # type: ignore[arg-type]
    assert debug.value.field == "debug"
    purge = httpx.delete(f"{base}/conversations/c1", params={"purge": "yes"}, headers=headers)
    assert purge.status_code == 422 and purge.json()["error"]["field"] == "purge"


# Hostile text: what JSON can carry and PostgreSQL cannot store, through every door of the
# agent API. Import's door has the same table for message fields (store/test_input_edge.py) and
# the stdio transport its own (test_agent_mcp.py: a raw line, which the SDK's client cannot send).
SURROGATE = "contains a lone surrogate (\\ud800) at character 3, which is not Unicode text"
NUL = "contains a NUL character (\\u0000), which PostgreSQL cannot store"
HOSTILE = [
    ("remember", {"content": "Ana\ud800 tea"}, "content", SURROGATE),
    ("remember", {"content": "Ana\x00 tea"}, "content", NUL),
    ("context", {"query": "tea\ud800"}, "query", SURROGATE),
    ("context", {"query": "tea", "session_id": "c1\x00"}, "session_id", "contains a NUL character"),
    ("search", {"query": "tea\ud800"}, "query", SURROGATE),
    ("search_messages", {"query": "tea", "conversation_id": "c1\ud800"}, "conversation_id", "lone surrogate"),
    ("working_context", {"session_id": "s1", "message": "hi!\ud800"}, "message", SURROGATE),
    ("working_context", {"session_id": "s1", "message": "hi\x00"}, "message", NUL),
]
# the raw request of each operation: a body as JSON (a lone surrogate as its escape), a query
# string as UTF-8 bytes (a lone surrogate as the bytes it would encode to: ED A0 80)
ROUTE = {
    "remember": ("POST", "/memories"),
    "context": ("GET", "/context"),
    "search": ("GET", "/search"),
    "search_messages": ("GET", "/messages/search"),
    "working_context": ("POST", "/working_context"),
}


def _query(args: dict) -> str:
    return "&".join(f"{k}={quote(v.encode('utf-8', 'surrogatepass'), safe='')}" for k, v in args.items())


@pytest.mark.parametrize(
    ("operation", "args", "field", "words"), HOSTILE, ids=[f"{p[0]}-{p[2]}" for p in HOSTILE]
)
def test_hostile_text_is_refused_at_every_door_naming_the_field_in_the_same_words(
    doors, db: Database, operation: str, args: dict, field: str, words: str
) -> None:
    memory, client, server = doors
    with pytest.raises(InputError) as facade:
        getattr(memory, operation)(**args)
    assert facade.value.field == field and words in facade.value.detail, facade.value

    with pytest.raises(AnimaApiError) as http:  # the client: a lone surrogate cannot even be sent
        getattr(client, operation)(**args)
    assert (http.value.status, http.value.code, http.value.field) == (422, "invalid_request", field)
    assert words in http.value.message, http.value.message

    method, path = ROUTE[operation]
    base, headers = str(client._base), {**client._headers, "Content-Type": "application/json"}
    if method == "GET":
        raw = httpx.get(f"{base}{path}?{_query(args)}", headers=headers)
    else:
        raw = httpx.post(f"{base}{path}", content=json.dumps(args).encode(), headers=headers)
    assert raw.status_code == 422, raw.text
    err = raw.json()["error"]
    assert err["field"] == field and words in err["message"], err

    is_error, text = _mcp(server, TOOL.get(operation, operation), args)
    assert is_error and _names(text, field) and words in text, text
    with db.transaction() as conn:
        assert conn.execute("SELECT count(*) AS n FROM semantic_memory").fetchone()["n"] == 0
