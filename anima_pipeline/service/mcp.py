"""The MCP server of `anima mcp`: an anima's memory as tools for any MCP client (Claude
Desktop, Claude Code, …), over stdio or streamable HTTP, with the official `mcp` SDK.

One server serves one anima, chosen by configuration (``--anima``), never by the client.
It is read-only (``context``, ``search``, ``search_messages``, ``read_message``) unless started with
``--allow-remember``, which adds the tools that write: ``remember`` and ``working_context``
(which may store the session's summary and flush its facts). ``--allow-corrections`` adds
``deprecate``, ``correct``, ``pin`` and ``unpin``; ``--allow-delete`` adds ``delete`` (erase a
memory for good). The self layer (``anima://self``) and the resident set (``anima://resident``)
are resources.

Each tool is a row of TOOLS: its arguments are the fields of the operation's request model
(memory/models.py), so its input schema and its limits are those of the facade and the HTTP
routes; its function calls the facade. A refusal (an error of the package) is a tool error
with its message, naming the field, never a crash with a traceback; any other exception is a
tool error too (its type only), logged with its traceback. Over stdio every line gets its
answer, a lone surrogate included (service/mcp_stdio.py); over streamable HTTP such a request
is answered in the same words (service/mcp_http.py).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, cast

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools.base import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from anima_pipeline.core.errors import AnimaError
from anima_pipeline.core.types import IDENTITY_UNSET
from anima_pipeline.core.validation import field_name
from anima_pipeline.memory.facade import AnimaMemory
from anima_pipeline.memory.models import (
    ContextRequest,
    DeprecateRequest,
    ForgetReport,
    MemoryInfo,
    MemoryRequest,
    MessageRequest,
    MessageSearchRequest,
    Remembered,
    RememberRequest,
    Request,
    SearchRequest,
    UnpinRequest,
    UpdateRequest,
    WorkingContextRequest,
)
from anima_pipeline.recall.render import context_lines, fenced, message_lines, page_lines
from anima_pipeline.recall.working import WorkingContext
from anima_pipeline.service.mcp_http import AnimaMCPServer

log = logging.getLogger(__name__)

Transport = Literal["stdio", "streamable-http"]
MCP = "agent (MCP)"  # who asked, in the audit log
# what a tool needs the server to be started with
Allowance = Literal["read", "remember", "corrections", "delete"]
# the one argument only the search tools have: how their page is written for the model
Format = Annotated[
    Literal["lines", "json"],
    Field(description="lines: one compact line per result (ref | date | type | text); json: every field"),
]
# how read_message writes the message for the model
TextFormat = Annotated[
    Literal["text", "json"],
    Field(
        description="text: a heading line (ref | time | speaker in conversation | characters), then the text; json: every field"
    ),
]
PAGE = 10  # results per page the search tools default to: a model reads every line it asks for


def tool_result(answer: BaseModel, form: str, lines: Callable[[Any], str]) -> CallToolResult:
    """A read tool's answer: compact text for the model (`lines`; a JSON search item has 17
    fields, costly in tokens), or with format=json the answer as JSON, text and structured."""
    if form == "json":
        return CallToolResult(
            content=[TextContent(type="text", text=answer.model_dump_json(exclude_defaults=True))],
            structured_content=answer.model_dump(mode="json"),
        )
    return CallToolResult(content=[TextContent(type="text", text=lines(answer))])


CONTEXT_DESCRIPTION = """\
Recall what you remember that bears on the current message. Call it before answering when
the user refers to people, events, plans or preferences from earlier conversations.
Returns a text block: resident memories (always relevant), memories matching the query,
past messages matching it, and summaries of the period when the question is about a time.
Each memory is shown as [[anima:f-N]]; when your answer uses one, keep that exact marker
in your reply (e.g. "You said [[anima:f-12]] you prefer tea") so it is counted as used.
A past message shown in part (marked …) is named by its ref (m-N) after the block:
`read_message` reads it whole."""

SEARCH_DESCRIPTION = """\
Search your long-term memory on purpose: more results than `context`, paged with
limit/offset, filtered by memory type and by when the fact was observed. Use it when
`context` was not enough or you need everything about a topic. Returns memories with their
refs (f-N, cite as [[anima:f-N]]), one per line as `ref | date | type | text`, and says when
there is more: call again with offset + limit for the next page. format=json gives every field."""

SEARCH_MESSAGES_DESCRIPTION = """\
Search past conversations for what was actually said: the messages themselves (not the
facts distilled from them), best first, with speaker, conversation and date. Use it for
exact wording or details no memory holds. One per line as `ref | date | speaker in
conversation | text` (format=json: every field). Paged with limit/offset; optionally within
one conversation and a time range. A long message shows the part around what matched,
marked …: `read_message` with its ref reads the rest."""

READ_MESSAGE_DESCRIPTION = """\
Read one past message by its ref (m-N, as `context` or `search_messages` shows it) when the
part shown was not enough: `limit` characters of it from `offset`, with where to read on
(call again with offset=next_offset while there is more). format=json gives every field."""

REMEMBER_DESCRIPTION = """\
Store one durable fact now, instead of waiting for tonight's consolidation: something the
user explicitly asked you to remember, or a correction that must hold from the next turn.
Write it self-contained (name people, use absolute dates); one fact per call. It is audited
and reviewed by tonight's consolidation (merged with duplicates, retired if contradicted)."""


WORKING_CONTEXT_DESCRIPTION = """\
Build the whole context of the turn you are about to answer, for a host that lets memory
manage its window: `system` (your self blocks, resident memories, yesterday / this week /
this month, what is recalled for the message), `messages` (this conversation so far as a
summary of older turns, slimmed middle turns and the latest turns verbatim) and `segments`
(characters and tokens of each). Call it once per turn with the conversation id and the
user's message. When the conversation outgrows the budget it writes its rolling summary and
first stores the durable facts of the turns it summarizes (once per compaction)."""


CORRECTION_DESCRIPTIONS = {
    "deprecate": """\
Retire a memory that is wrong or no longer true (the user said so): it leaves recall but stays
in the store. Give the reason in the user's terms. Use `correct` instead when the user gave
the right version of the same fact.""",
    "correct": """\
Correct a memory the user said is wrong: pass only the fields that change (usually content,
one self-contained sentence). The correction is settled: tonight's consolidation neither merges
it back nor learns the old version again from the same messages.""",
    "pin": "Keep a memory resident: shown in every context from the next turn on.",
    "unpin": "Stop keeping a memory resident (it stays active and searchable). Give the reason.",
    "delete": """\
Erase a memory for good, when the user asks you to forget it entirely (not merely that it
changed: then use `correct` or `deprecate`). Nothing of its text stays; it cannot be undone.""",
}


READ_ONLY = ToolAnnotations(
    readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False
)
WRITES = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=False)
ADDS = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False)
CORRECTS = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False)


# --- the tools' functions: each one facade call ---------------------------------------------


def context(memory: AnimaMemory, query: str, session_id: str | None) -> str:
    return context_lines(memory.context(query, session_id))


def search(memory: AnimaMemory, format: str, **request: Any) -> CallToolResult:
    return tool_result(memory.search(**request), format, page_lines)


def search_messages(memory: AnimaMemory, format: str, **request: Any) -> CallToolResult:
    return tool_result(memory.search_messages(**request), format, page_lines)


def read_message(memory: AnimaMemory, format: str, id: str, **request: Any) -> CallToolResult:
    return tool_result(memory.message(id, **request), format, message_lines)


def working_context(memory: AnimaMemory, **request: Any) -> WorkingContext:
    return memory.working_context(**request)


def remember(memory: AnimaMemory, **request: Any) -> Remembered:
    return memory.remember(**request)


def deprecate(memory: AnimaMemory, id: str, reason: str) -> MemoryInfo:
    return memory.deprecate(id, reason)


def correct(memory: AnimaMemory, id: str, **fields: Any) -> MemoryInfo:
    return memory.update(id, **{k: v for k, v in fields.items() if v is not None})


def pin(memory: AnimaMemory, id: str) -> MemoryInfo:
    return memory.pin(id)


def unpin(memory: AnimaMemory, id: str, reason: str) -> MemoryInfo:
    return memory.unpin(id, reason)


def delete(memory: AnimaMemory, id: str) -> ForgetReport:
    return memory.delete(id, requested_by=MCP)


@dataclass(frozen=True)
class ToolRow:
    """One tool: its arguments are `request`'s fields (`only` some of them), with the tool's
    own `defaults`, and `extra` arguments the facade does not take; `run` calls the facade."""

    name: str
    title: str
    description: str
    request: type[Request]
    run: Callable[..., Any]
    returns: Any
    annotations: ToolAnnotations
    allowed_by: Allowance = "read"
    only: tuple[str, ...] | None = None
    defaults: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, tuple[Any, Any]] = field(default_factory=dict)


TOOLS: tuple[ToolRow, ...] = (
    ToolRow("context", "Recall context", CONTEXT_DESCRIPTION, ContextRequest, context, str, READ_ONLY),
    ToolRow(
        "search",
        "Search memory",
        SEARCH_DESCRIPTION,
        SearchRequest,
        search,
        CallToolResult,
        READ_ONLY,
        defaults={"limit": PAGE},
        extra={"format": (Format, "lines")},
    ),
    ToolRow(
        "search_messages",
        "Search past messages",
        SEARCH_MESSAGES_DESCRIPTION,
        MessageSearchRequest,
        search_messages,
        CallToolResult,
        READ_ONLY,
        defaults={"limit": PAGE},
        extra={"format": (Format, "lines")},
    ),
    ToolRow(
        "read_message",
        "Read a past message",
        READ_MESSAGE_DESCRIPTION,
        MessageRequest,
        read_message,
        CallToolResult,
        READ_ONLY,
        extra={"format": (TextFormat, "text")},
    ),
    ToolRow(
        "working_context",
        "Working context of a turn",
        WORKING_CONTEXT_DESCRIPTION,
        WorkingContextRequest,
        working_context,
        WorkingContext,
        WRITES,
        "remember",
    ),
    ToolRow(
        "remember",
        "Remember a fact",
        REMEMBER_DESCRIPTION,
        RememberRequest,
        remember,
        Remembered,
        ADDS,
        "remember",
    ),
    ToolRow(
        "deprecate",
        "Deprecate a memory",
        CORRECTION_DESCRIPTIONS["deprecate"],
        DeprecateRequest,
        deprecate,
        MemoryInfo,
        CORRECTS,
        "corrections",
        only=("id", "reason"),
    ),
    ToolRow(
        "correct",
        "Correct a memory",
        CORRECTION_DESCRIPTIONS["correct"],
        UpdateRequest,
        correct,
        MemoryInfo,
        CORRECTS,
        "corrections",
        only=("id", "content", "type", "valid_until"),
    ),
    ToolRow(
        "pin",
        "Pin a memory",
        CORRECTION_DESCRIPTIONS["pin"],
        MemoryRequest,
        pin,
        MemoryInfo,
        CORRECTS,
        "corrections",
    ),
    ToolRow(
        "unpin",
        "Unpin a memory",
        CORRECTION_DESCRIPTIONS["unpin"],
        UnpinRequest,
        unpin,
        MemoryInfo,
        CORRECTS,
        "corrections",
    ),
    ToolRow(
        "delete",
        "Delete a memory",
        CORRECTION_DESCRIPTIONS["delete"],
        MemoryRequest,
        delete,
        ForgetReport,
        CORRECTS,
        "delete",
    ),
)


def arguments(row: ToolRow) -> list[inspect.Parameter]:
    """The tool's parameters: its request model's fields, with their types, limits,
    descriptions and defaults (the tool's own default where it has one), then its extras."""
    params = []
    for name, info in row.request.model_fields.items():
        if row.only is not None and name not in row.only:
            continue
        default = row.defaults.get(name, inspect.Parameter.empty if info.is_required() else info.default)
        described = Field(description=info.description, json_schema_extra=info.json_schema_extra)
        annotation = cast(Any, Annotated)[(info.annotation, *info.metadata, described)]
        params.append(
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
        )
    for name, (annotation, default) in row.extra.items():
        params.append(
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
        )
    return params


class AnimaTool(Tool):
    """The SDK's tool, whose refused arguments read as every door words a field: `query: String
    should have at least 1 character`, not pydantic's report with its class name and its URL."""

    async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False) -> Any:
        try:
            return await super().run(arguments, context, convert_result=convert_result)
        except ToolError as exc:
            cause = exc.__cause__
            if not isinstance(cause, ValidationError):
                raise
            # the cause kept: the SDK logs the refused fields' names from it
            raise ToolError(f"{self.name}: {refused_arguments(cause)}") from cause


def refused_arguments(exc: ValidationError) -> str:
    """Each argument at fault in plain words: ``query: String should have at least 1 character``."""
    return "; ".join(
        f"{field_name(e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors(include_url=False)
    )


def tool(memory: AnimaMemory, row: ToolRow) -> Tool:
    """`row` as an SDK tool over `memory`: the SDK validates the arguments against the
    request's fields; an error of the package is the tool's error, in its own words."""

    def call(**kwargs: Any) -> Any:
        try:
            return row.run(memory, **kwargs)
        except AnimaError as exc:  # a refusal, an unknown or erased id: the model can correct it
            log.info("tool %s refused: %s", row.name, exc.remote_message or exc)
            raise ToolError(exc.remote_message or str(exc)) from None
        except Exception as exc:  # a bug or a failure of ours: the log has it whole, the model a line
            log.exception("tool %s failed", row.name)
            raise ToolError(
                f"{row.name} failed ({type(exc).__name__}); the server's log has the details"
            ) from None

    call.__name__ = row.name
    call.__signature__ = inspect.Signature(arguments(row), return_annotation=row.returns)  # type: ignore[attr-defined]
    return AnimaTool.from_function(
        call, name=row.name, title=row.title, description=row.description, annotations=row.annotations
    )


def add_resources(server: MCPServer, memory: AnimaMemory) -> None:
    """The self layer and the resident set, as Markdown the client may attach."""

    @server.resource(
        "anima://self",
        name="self",
        title="Self layer",
        description="The six self blocks (identity, persona, values, relationships, current_state, "
        "autobiography_summary) as the last night wrote them.",
        mime_type="text/markdown",
    )
    def self_layer() -> str:
        blocks = memory.self_blocks()  # fenced as in every prompt: the client attaches it to one
        empty = {"identity": f"(not set: {IDENTITY_UNSET})"}  # why, where it is read
        return "\n\n".join(
            f"## {name}\n{fenced(content.strip(), lines=True) or empty.get(name, '(empty)')}"
            for name, content in blocks.items()
        )

    @server.resource(
        "anima://resident",
        name="resident",
        title="Resident memories",
        description="The memories every turn carries: pinned ones, then the most cited, as [[anima:f-N]] lines.",
        mime_type="text/markdown",
    )
    def resident() -> str:
        return "\n".join(i.line for i in memory.resident()) or "(none yet)"


def build_server(
    memory: AnimaMemory,
    *,
    allow_remember: bool = False,
    allow_corrections: bool = False,
    allow_delete: bool = False,
) -> MCPServer:
    """The MCP server over one anima's memory; the writing tools only when allowed."""
    allowed = {
        "read": True,
        "remember": allow_remember,
        "corrections": allow_corrections,
        "delete": allow_delete,
    }
    server = AnimaMCPServer(
        name="anima-memory",
        instructions=(
            f"Long-term memory of the anima {memory.anima_id!r}. Call `context` with the user's message "
            "before answering; keep [[anima:f-N]] markers of memories you use."
        ),
        tools=[tool(memory, row) for row in TOOLS if allowed[row.allowed_by]],
    )
    add_resources(server, memory)
    return server


def run(
    memory: AnimaMemory,
    transport: Transport,
    *,
    host: str,
    port: int,
    allow_remember: bool,
    allow_corrections: bool = False,
    allow_delete: bool = False,
) -> None:
    server = build_server(
        memory, allow_remember=allow_remember, allow_corrections=allow_corrections, allow_delete=allow_delete
    )
    if transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=host, port=port)
