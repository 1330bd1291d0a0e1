"""The MCP server through the official SDK's own client: `anima mcp` launched over stdio (as
Claude Desktop / Claude Code launch it) and over streamable HTTP, on a real store."""

from __future__ import annotations

import json
import logging
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx2 as httpx
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.server.mcpserver.exceptions import ToolError

from anima_pipeline.config import Settings
from anima_pipeline.memory.facade import AnimaMemory
from anima_pipeline.memory.models import ContextRequest
from anima_pipeline.service.mcp import READ_ONLY, TOOLS, ToolRow, build_server, tool
from anima_pipeline.store.db import Database
from testkit.live_server import free_port

ANIMA = str(Path(sys.executable).parent / "anima")


def _env(db_url: str, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ANIMA_TEST_DATABASE_URL"}
    return {**env, "ANIMA_DATABASE_URL": db_url, "ANIMA_HOME": str(home)}


def _seed(db: Database, db_url: str, tmp_path: Path) -> str:
    memory = AnimaMemory(db, "aria", settings=Settings(database_url=db_url, home=tmp_path))
    ref = memory.remember("Lena moved to Lisbon in April 2026", "world", session_id="c1").id
    AnimaMemory(db, "bruno", settings=Settings(database_url=db_url, home=tmp_path)).remember(
        "Bruno keeps bees in Lisbon"
    )
    return ref


def _stdio(db_url: str, home: Path, *extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=ANIMA, args=["mcp", "--anima", "aria", *extra], env=_env(db_url, home)
    )


def _text(result) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "text", None))


def test_stdio_lists_read_only_tools_and_returns_a_context(db: Database, db_url: str, tmp_path: Path) -> None:
    ref = _seed(db, db_url, tmp_path)

    async def main() -> None:
        async with Client(_stdio(db_url, tmp_path)) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == {
                "context",
                "search",
                "search_messages",
                "read_message",
            }  # read-only without --allow-remember
            assert "query" in tools["context"].input_schema["properties"]
            assert tools["context"].input_schema["required"] == ["query"]
            assert "[[anima:f-N]]" in tools["context"].description
            assert tools["search"].annotations.read_only_hint is True
            ctx = await client.call_tool("context", {"query": "Where does Lena live now?"})
            assert not ctx.is_error
            assert f"[[anima:{ref}]] Lena moved to Lisbon in April 2026" in _text(ctx)
            assert "bees" not in _text(ctx)  # scoped to one anima by configuration
            found = await client.call_tool("search", {"query": "Lisbon", "limit": 5})
            lines = _text(found).splitlines()  # compact: a head line, then ref | date | type | text
            assert (
                lines[1] == f"{ref} | {lines[1].split(' | ')[1]} | world | Lena moved to Lisbon in April 2026"
            )
            assert len(lines) == 2 and found.structured_content is None
            as_json = await client.call_tool("search", {"query": "Lisbon", "limit": 5, "format": "json"})
            assert [m["ref"] for m in as_json.structured_content["items"]] == [ref]
            assert "format" in tools["search"].input_schema["properties"]
            said = await client.call_tool("search_messages", {"query": "Lisbon"})
            assert not said.is_error and _text(said).startswith("0 result(s)")
            refused = await client.call_tool("remember", {"content": "x"})
            assert refused.is_error
            bad = await client.call_tool("search", {"query": "Lisbon", "limit": 0})
            assert bad.is_error and "limit" in _text(bad)

    anyio.run(main)
    with db.transaction() as conn:
        assert conn.execute("SELECT count(*) AS n FROM semantic_memory").fetchone()["n"] == 2


def test_stdio_remember_when_enabled_is_audited_and_recalled(
    db: Database, db_url: str, tmp_path: Path
) -> None:
    async def main() -> str:
        async with Client(_stdio(db_url, tmp_path, "--allow-remember", "--new")) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == {
                "context",
                "search",
                "search_messages",
                "read_message",
                "remember",
                "working_context",
            }
            made = await client.call_tool(
                "remember",
                {"content": "Aria's user is vegetarian since 2024", "type": "preference", "session_id": "c7"},
            )
            assert not made.is_error, _text(made)
            ref = made.structured_content["id"]
            ctx = await client.call_tool("context", {"query": "is the user vegetarian?"})
            assert f"[[anima:{ref}]]" in _text(ctx)
            return ref

    ref = anyio.run(main)
    with db.transaction() as conn:
        event = conn.execute(
            "SELECT step, anima_id FROM memory_event WHERE table_name = 'semantic_memory' AND memory_id = %s",
            (ref.removeprefix("f-"),),
        ).fetchone()
    assert event == {"step": "agent/remember", "anima_id": "aria"}


@contextmanager
def _http_server(db_url: str, home: Path, *extra: str) -> Iterator[int]:
    """`anima mcp --transport streamable-http` as a real process; yields its port once it answers."""
    port = free_port()
    proc = subprocess.Popen(
        [ANIMA, "mcp", "--anima", "aria", "--transport", "streamable-http", "--port", str(port), *extra],
        env=_env(db_url, home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/mcp", timeout=1)
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read().decode()
                time.sleep(0.2)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_streamable_http_lists_tools_and_answers(db: Database, db_url: str, tmp_path: Path) -> None:
    ref = _seed(db, db_url, tmp_path)
    with _http_server(db_url, tmp_path) as port:

        async def main() -> None:
            async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                assert {t.name for t in (await client.list_tools()).tools} == {
                    "context",
                    "search",
                    "search_messages",
                    "read_message",
                }
                ctx = await client.call_tool("context", {"query": "Lena Lisbon"})
                assert f"[[anima:{ref}]]" in _text(ctx)

        anyio.run(main)


def test_streamable_http_answers_a_lone_surrogate_naming_the_argument(
    db: Database, db_url: str, tmp_path: Path
) -> None:
    """The SDK's transport answers such a body with its JSON parser's report (400, no field);
    here it gets the tool error stdio gives, within a second, and nothing is stored."""
    _seed(db, db_url, tmp_path)
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    with _http_server(db_url, tmp_path, "--allow-remember") as port:
        url = f"http://127.0.0.1:{port}/mcp"
        for n, (name, field, args, words) in enumerate(
            [
                (
                    "context",
                    "query",
                    b'{"query": "a\\ud800b"}',
                    "contains a lone surrogate (\\ud800) at character 1",
                ),
                ("remember", "content", b'{"content": "a\\udfffb"}', "contains a lone surrogate (\\udfff)"),
                (
                    "working_context",
                    "message",
                    b'{"session_id": "c1", "message": "hi\\ud800"}',
                    "lone surrogate",
                ),
                (
                    "remember",
                    "content",
                    b'{"content": "a\xffb"}',
                    "is not valid UTF-8 (byte 0xFF at character 1)",
                ),
            ],
            start=1,
        ):
            head = f'{{"jsonrpc":"2.0","id":{n},"method":"tools/call","params":{{"name":"{name}","arguments":'
            started = time.monotonic()
            answer = httpx.post(url, content=head.encode() + args + b"}}", headers=headers, timeout=5)
            assert time.monotonic() - started < 1.0
            assert answer.status_code == 200, answer.text
            body = answer.json()
            text = body["result"]["content"][0]["text"]
            assert body["id"] == n and body["result"]["isError"] is True
            assert text.startswith(f"{name}: {field}: ") and words in text, text
        # outside a tool's arguments: a JSON-RPC error naming the place; an echoed id stays ASCII
        listed = httpx.post(
            url, content=b'{"jsonrpc":"2.0","id":"\\ud800","method":"tools/list"}', headers=headers
        )
        assert listed.status_code == 200 and listed.content.isascii()
        assert listed.json()["error"]["message"].startswith("id: contains a lone surrogate")

        # the server lives on and answers the SDK's own client
        async def main() -> None:
            async with Client(url) as client:
                assert "Lisbon" in _text(await client.call_tool("context", {"query": "Lena"}))

        anyio.run(main)
    with db.transaction() as conn:
        stored = conn.execute(
            "SELECT count(*) AS n FROM semantic_memory WHERE anima_id = 'aria' AND content LIKE 'a%b'"
        ).fetchone()
    assert stored["n"] == 0


class _Raw:
    """`anima mcp` over stdio spoken to in raw JSON-RPC lines: what the SDK's client cannot
    send (a lone surrogate: it encodes every request as UTF-8 first)."""

    def __init__(self, db_url: str, home: Path, *extra: str) -> None:
        self.log = home / "mcp.log"
        with self.log.open("wb") as log:  # a file: a full pipe would block the server
            self.proc = subprocess.Popen(
                [ANIMA, "mcp", "--anima", "aria", *extra],
                env=_env(db_url, home),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
            )
        self.ask(
            '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
            '"capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}',
            60,
        )
        self.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')

    def send(self, line: str | bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write((line if isinstance(line, bytes) else line.encode()) + b"\n")
        self.proc.stdin.flush()

    def ask(self, line: str | bytes, timeout: float) -> dict:
        self.send(line)
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, f"no answer within {timeout} s to {line}"
        return json.loads(self.proc.stdout.readline())

    def close(self) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)  # stdin closed: the server ends
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)
            raise
        return self.log.read_text()


@pytest.mark.processes  # the stdio transport of a real `anima mcp` is the point
def test_stdio_answers_a_lone_surrogate_with_a_tool_error_within_a_second(
    db: Database, db_url: str, tmp_path: Path
) -> None:
    _seed(db, db_url, tmp_path)
    raw = _Raw(db_url, tmp_path, "--allow-remember")
    try:
        for n, (name, field, args) in enumerate(
            [
                ("context", "query", '{"query": "a\\ud800b"}'),
                ("remember", "content", '{"content": "a\\ud800b"}'),
                ("search_messages", "query", '{"query": "a\\ud800b"}'),
                ("working_context", "message", '{"session_id": "c1", "message": "a\\ud800b"}'),
                ("search", "query", '{"query": "\\udfff"}'),
                (
                    "remember",
                    "content",
                    b'{"content": "a\xffb"}',
                ),  # not UTF-8: each such byte a lone surrogate
            ],
            start=1,
        ):
            started = time.monotonic()
            head = f'{{"jsonrpc":"2.0","id":{n},"method":"tools/call","params":{{"name":"{name}","arguments":'
            line = head.encode() + (args if isinstance(args, bytes) else args.encode()) + b"}}"
            answer = raw.ask(line, timeout=5)
            assert time.monotonic() - started < 1.0
            result = answer["result"]
            text = result["content"][0]["text"]
            assert answer["id"] == n and result["isError"] is True
            assert text.startswith(f"{name}: {field}: contains a lone surrogate"), text
        # an answer echoing one (an unknown tool of that name) is written escaped, and the server lives on
        unknown = raw.ask(
            '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"\\ud800","arguments":{}}}', 5
        )
        assert unknown["result"]["isError"] and "\\ud800" in unknown["result"]["content"][0]["text"]
        fine = raw.ask(
            '{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"context","arguments":{"query":"Lena"}}}',
            30,
        )
        assert not fine["result"]["isError"] and "Lisbon" in fine["result"]["content"][0]["text"]
        with db.transaction() as conn:  # nothing of it stored
            assert (
                conn.execute("SELECT count(*) AS n FROM semantic_memory WHERE anima_id = 'aria'").fetchone()[
                    "n"
                ]
                == 1
            )
    finally:
        log = raw.close()
    assert "rejected arguments" in log  # each refusal is logged


def test_any_exception_inside_a_tool_is_a_logged_tool_error(
    db: Database, db_url: str, tmp_path: Path, caplog
) -> None:
    memory = AnimaMemory(db, "aria", settings=Settings(database_url=db_url, home=tmp_path))

    def broken(memory: AnimaMemory, query: str, session_id: str | None) -> str:
        raise KeyError("a bug of ours")

    row = ToolRow("context", "Recall context", "d", ContextRequest, broken, str, READ_ONLY)
    with caplog.at_level(logging.INFO, logger="anima_pipeline.service.mcp"):
        with pytest.raises(ToolError, match=r"context failed \(KeyError\); the server's log has the details"):
            tool(memory, row).fn(query="Lena", session_id=None)
        with pytest.raises(
            ToolError, match="memory f-999 does not exist"
        ):  # a refusal of ours keeps its words
            tool(memory, TOOLS[-1]).fn(id="f-999")
    failed = next(r for r in caplog.records if r.getMessage() == "tool context failed")
    assert failed.exc_info and "a bug of ours" in str(failed.exc_info[1])
    assert any("tool delete refused" in r.getMessage() for r in caplog.records)


def test_refused_arguments_are_a_tool_error_naming_the_field_in_plain_words(
    db: Database, db_url: str, tmp_path: Path
) -> None:
    _seed(db, db_url, tmp_path)
    server = build_server(AnimaMemory(db, "aria", settings=Settings(database_url=db_url, home=tmp_path)))

    async def main() -> None:
        async with Client(server) as client:  # in memory: the words are the point, not the pipe
            empty = await client.call_tool("search", {"query": ""})
            assert empty.is_error
            assert _text(empty) == "search: query: String should have at least 1 character", _text(empty)
            both = await client.call_tool("search", {"query": "", "limit": 0})
            assert "query: " in _text(both) and "limit: " in _text(both), _text(both)
            for said in (_text(empty), _text(both)):
                assert "pydantic" not in said and "validation error" not in said and "http" not in said

    anyio.run(main)
