"""`anima mcp` over stdio: the SDK's stdio transport, with every line answered.

The SDK reads each line with pydantic's JSON parser, which refuses a string holding a lone
surrogate (``"\\ud800"``: valid JSON, not Unicode text) and passes the parse error on to the
server, which drops it: the client waits for an answer that never comes. Python's own JSON
reader takes such a line, so a line the SDK refused is read again with it and, when it is a
JSON-RPC message, handed to the server as any other. The tool's arguments are then validated
as usual and the lone surrogate is refused as a tool error naming the field, in the words
of core/validation.py (the same words as the HTTP service and the facade). A line that is
not JSON at all is logged and dropped, as the SDK drops it.

Bytes that are not UTF-8 meet the same check: the SDK would read them as U+FFFD (and the
tool would store that), so stdin is read with ``surrogateescape``, which makes each such byte a
lone surrogate, refused as above, naming the field.

The way out has the opposite trap: an answer that echoes a lone surrogate (an unknown tool
named ``"\ud800"``, a request id holding one) cannot be written as UTF-8, and the SDK's
writer dies on it, taking the server with it. Such an answer is written with each lone
surrogate as its escape text (``\ud800``, six ASCII characters).
"""

from __future__ import annotations

import json
import logging
import sys
from io import TextIOWrapper
from typing import Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import jsonrpc_message_adapter
from pydantic import ValidationError

from anima_pipeline.core.validation import LONE_SURROGATE

log = logging.getLogger(__name__)


def reread(item: SessionMessage | Exception) -> SessionMessage | Exception:
    """A line the SDK's parser refused, read again with Python's JSON reader; the SDK's
    error when that fails too (logged: a client sending garbage should be visible)."""
    if not isinstance(item, ValidationError):
        return item
    errors = item.errors()
    # json_invalid: an escaped lone surrogate; string_unicode: one in the text (a byte not UTF-8)
    unread = errors and errors[0]["type"] in ("json_invalid", "string_unicode") and not errors[0]["loc"]
    line = errors[0].get("input") if unread else None
    if isinstance(line, str):
        try:
            message = jsonrpc_message_adapter.validate_python(json.loads(line), by_name=False)
        except (ValueError, ValidationError):
            pass
        else:
            return SessionMessage(message)
    log.warning(
        "MCP: a line that is not a JSON-RPC message was dropped: %s", errors[0]["msg"] if errors else item
    )
    return item


def _escaped(value: Any) -> Any:
    if isinstance(value, str):
        return LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", value)
    if isinstance(value, dict):
        return {_escaped(k): _escaped(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_escaped(v) for v in value]
    return value


def writable(item: SessionMessage) -> SessionMessage:
    """`item` as the SDK's writer can encode it: unchanged, or its lone surrogates escaped."""
    try:
        item.message.model_dump_json(by_alias=True, exclude_unset=True)
    except ValueError:  # pydantic's serialization error: "surrogates not allowed"
        data = _escaped(item.message.model_dump(by_alias=True, exclude_unset=True))
        log.warning("MCP: an answer echoing a lone surrogate is written with it escaped")
        return SessionMessage(jsonrpc_message_adapter.validate_python(data, by_name=False), item.metadata)
    return item


class _Stdin(TextIOWrapper):
    """stdin's bytes as text, a byte that is not UTF-8 as a lone surrogate; closing it leaves
    the process's stdin open (as the SDK's own wrapper does)."""

    def close(self) -> None:
        try:
            self.detach()
        except ValueError:
            pass


class StdioServer(MCPServer):
    """The MCP server whose stdio transport re-reads what the SDK's parser refuses."""

    async def run_stdio_async(self) -> None:
        stdin = anyio.wrap_file(_Stdin(sys.stdin.buffer, encoding="utf-8", errors="surrogateescape"))
        async with stdio_server(stdin=stdin) as (read_stream, write_stream):
            inbound, inbound_out = anyio.create_memory_object_stream[Any](0)
            outbound, outbound_out = anyio.create_memory_object_stream[Any](0)

            async def relay_in() -> None:
                async with inbound:
                    async for item in read_stream:
                        await inbound.send(reread(item))

            async def relay_out() -> None:
                # closing the SDK's stream ends its writer, as the server's run does in the SDK's own
                async with outbound_out, write_stream:
                    async for item in outbound_out:
                        await write_stream.send(writable(item))

            async with anyio.create_task_group() as tg:
                tg.start_soon(relay_in)
                tg.start_soon(relay_out)
                # the SDK's own run_stdio_async, between the two relays
                server = self._lowlevel_server
                async with outbound:
                    await server.run(inbound_out, outbound, server.create_initialization_options())
                tg.cancel_scope.cancel()
