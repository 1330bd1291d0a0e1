"""The MCP server of `anima mcp`: an anima's memory as tools for any MCP client (Claude
Desktop, Claude Code, …), over stdio or streamable HTTP, with the official `mcp` SDK.

One server serves one anima, chosen by configuration (``--anima``), never by the client.
It is read-only (``context``, ``search``, ``search_messages``) unless started with ``--allow-remember``, which
adds the tools that write: ``remember`` and ``working_context`` (which may store the session's
summary and flush its facts). The self layer (``anima://self``) and the resident set
(``anima://resident``) are resources. The tools are thin over AnimaMemory. Arguments follow the
rules of every door (anima_pipeline.core.validation); a refusal is a tool error naming the field,
never a crash with a traceback.
``--allow-corrections`` adds ``deprecate``, ``correct``, ``pin`` and ``unpin``;
``--allow-delete`` adds ``delete`` (erase a memory for good); an unknown or erased memory id
is a tool error naming it.
"""

# no `from __future__ import annotations`: the SDK reads the tool signatures at runtime

import functools
import logging
from collections.abc import Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field

from anima_pipeline.core.types import MemoryType
from anima_pipeline.core.validation import MEMORY_MAX, ExternalId, Instant, MemoryText, QueryText, Text
from anima_pipeline.memory.facade import (
    MAX_SEARCH_LIMIT,
    MIN_BUDGET,
    AnimaInputError,
    AnimaMemory,
    Remembered,
)
from anima_pipeline.memory.forget import ForgetReport, MemoryInfo, NotFound
from anima_pipeline.recall.render import page_lines
from anima_pipeline.recall.sections import SearchPage
from anima_pipeline.recall.working import WorkingContext

log = logging.getLogger(__name__)

Transport = Literal["stdio", "streamable-http"]
# the paging both search tools take
Limit = Annotated[int, Field(ge=1, le=MAX_SEARCH_LIMIT, description="results per page")]
Offset = Annotated[int, Field(ge=0, description="skip this many results (the previous offset + limit)")]
Format = Annotated[
    Literal["lines", "json"],
    Field(description="lines: one compact line per result (ref | date | type | text); json: every field"),
]


def page_result(page: SearchPage, form: str) -> CallToolResult:
    """A search page as the tool answers it: compact lines for the model (a JSON item has 17
    fields, costly in tokens), or with format=json the page as JSON, text and structured."""
    if form == "json":
        return CallToolResult(
            content=[TextContent(type="text", text=page.model_dump_json(exclude_defaults=True))],
            structured_content=page.model_dump(mode="json"),
        )
    return CallToolResult(content=[TextContent(type="text", text=page_lines(page))])


CONTEXT_DESCRIPTION = """\
Recall what you remember that bears on the current message. Call it before answering when
the user refers to people, events, plans or preferences from earlier conversations.
Returns a text block: resident memories (always relevant), memories matching the query,
past messages matching it, and summaries of the period when the question is about a time.
Each memory is shown as [[anima:f-N]]; when your answer uses one, keep that exact marker
in your reply (e.g. "You said [[anima:f-12]] you prefer tea") so it is counted as used."""

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
one conversation and a time range."""

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


def _refusals_named(tool: Callable[..., Any]) -> Callable[..., Any]:
    """The facade's refusal as the tool's error, naming the field (`field: reason`)."""

    @functools.wraps(tool)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return tool(*args, **kwargs)
        except (AnimaInputError, NotFound) as exc:  # an unknown or erased id too
            raise ToolError(str(exc)) from None

    return call


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


def build_server(
    memory: AnimaMemory,
    *,
    allow_remember: bool = False,
    allow_corrections: bool = False,
    allow_delete: bool = False,
) -> MCPServer:
    """The MCP server over one anima's memory; the writing tools only when allowed."""
    server = MCPServer(
        name="anima-memory",
        instructions=(
            f"Long-term memory of the anima {memory.anima_id!r}. Call `context` with the user's message "
            "before answering; keep [[anima:f-N]] markers of memories you use."
        ),
    )

    @_refusals_named
    def context(
        query: Annotated[QueryText, Field(description="the user's message or topic")],
        session_id: Annotated[
            ExternalId | None, Field(description="the current conversation's id, if the host has one")
        ] = None,
    ) -> str:
        return memory.context(query, session_id).rendered

    @_refusals_named
    def search(
        query: Annotated[QueryText, Field(description="what to look for")],
        types: Annotated[list[MemoryType] | None, Field(description="only these memory types")] = None,
        since: Annotated[Instant | None, Field(description="observed at or after (ISO-8601)")] = None,
        until: Annotated[Instant | None, Field(description="observed before (ISO-8601)")] = None,
        limit: Limit = 10,
        offset: Offset = 0,
        format: Format = "lines",
    ) -> CallToolResult:
        page = memory.search(query, types=types, since=since, until=until, limit=limit, offset=offset)
        return page_result(page, format)

    @_refusals_named
    def search_messages(
        query: Annotated[QueryText, Field(description="what was said")],
        conversation_id: Annotated[ExternalId | None, Field(description="only this conversation")] = None,
        since: Annotated[Instant | None, Field(description="sent at or after (ISO-8601)")] = None,
        until: Annotated[Instant | None, Field(description="sent before (ISO-8601)")] = None,
        limit: Limit = 10,
        offset: Offset = 0,
        format: Format = "lines",
    ) -> CallToolResult:
        page = memory.search_messages(
            query, conversation_id=conversation_id, since=since, until=until, limit=limit, offset=offset
        )
        return page_result(page, format)

    @_refusals_named
    def remember(
        content: Annotated[MemoryText, Field(description="one self-contained fact")],
        type: Annotated[
            MemoryType,
            Field(
                description="world (facts about people and things), experience, preference, opinion, imprint"
            ),
        ] = "world",
        session_id: Annotated[
            ExternalId | None, Field(description="the conversation the fact comes from")
        ] = None,
    ) -> Remembered:
        return memory.remember(content, type, session_id)

    @_refusals_named
    def working_context(
        session_id: Annotated[ExternalId, Field(description="the current conversation's id")],
        message: Annotated[Text, Field(max_length=MEMORY_MAX * 4, description="the user's message")],
        budget: Annotated[
            int | None,
            Field(
                ge=MIN_BUDGET,
                description="tokens for the whole context (default: the window less the reserve)",
            ),
        ] = None,
    ) -> WorkingContext:
        return memory.working_context(session_id, message, budget=budget)

    @server.resource(
        "anima://self",
        name="self",
        title="Self layer",
        description="The six self blocks (identity, persona, values, relationships, current_state, "
        "autobiography_summary) as the last night wrote them.",
        mime_type="text/markdown",
    )
    def self_layer() -> str:
        blocks = memory.self_blocks()
        return "\n\n".join(f"## {name}\n{content.strip() or '(empty)'}" for name, content in blocks.items())

    @server.resource(
        "anima://resident",
        name="resident",
        title="Resident memories",
        description="The memories every turn carries: pinned ones, then the most cited, as [[anima:f-N]] lines.",
        mime_type="text/markdown",
    )
    def resident() -> str:
        return "\n".join(i.line for i in memory.resident()) or "(none yet)"

    Ref = Annotated[str, Field(pattern=r"^f-\d+$", description="the memory's id as shown, e.g. f-12")]
    Reason = Annotated[Text, Field(min_length=1, max_length=500, description="why, in the user's terms")]

    def deprecate(id: Ref, reason: Reason) -> MemoryInfo:
        return memory.deprecate(id, reason)

    def correct(
        id: Ref,
        content: Annotated[MemoryText | None, Field(description="the corrected fact")] = None,
        type: Annotated[MemoryType | None, Field(description="a new type, if it changes")] = None,
        valid_until: Annotated[
            Instant | None, Field(description="when it stopped being true (ISO-8601)")
        ] = None,
    ) -> MemoryInfo:
        fields = {"content": content, "type": type, "valid_until": valid_until}
        return memory.update(id, **{k: v for k, v in fields.items() if v is not None})

    def pin(id: Ref) -> MemoryInfo:
        return memory.pin(id)

    def unpin(id: Ref, reason: Reason) -> MemoryInfo:
        return memory.unpin(id, reason)

    def delete(id: Ref) -> ForgetReport:
        return memory.delete(id, requested_by="agent (MCP)")

    read_only = ToolAnnotations(
        readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False
    )
    server.add_tool(
        context,
        name="context",
        title="Recall context",
        description=CONTEXT_DESCRIPTION,
        annotations=read_only,
    )
    server.add_tool(
        search, name="search", title="Search memory", description=SEARCH_DESCRIPTION, annotations=read_only
    )
    server.add_tool(
        search_messages,
        name="search_messages",
        title="Search past messages",
        description=SEARCH_MESSAGES_DESCRIPTION,
        annotations=read_only,
    )
    if allow_remember:
        server.add_tool(
            working_context,
            name="working_context",
            title="Working context of a turn",
            description=WORKING_CONTEXT_DESCRIPTION,
            annotations=ToolAnnotations(
                readOnlyHint=False, destructiveHint=False, idempotentHint=True, openWorldHint=False
            ),
        )
        server.add_tool(
            remember,
            name="remember",
            title="Remember a fact",
            description=REMEMBER_DESCRIPTION,
            annotations=ToolAnnotations(
                readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False
            ),
        )
    writes = ToolAnnotations(
        readOnlyHint=False, destructiveHint=True, idempotentHint=True, openWorldHint=False
    )
    allowed = {"deprecate": allow_corrections, "correct": allow_corrections, "pin": allow_corrections}
    allowed |= {"unpin": allow_corrections, "delete": allow_delete}
    tools: dict[str, Callable[..., Any]] = {
        "deprecate": deprecate,
        "correct": correct,
        "pin": pin,
        "unpin": unpin,
        "delete": delete,
    }
    for name, fn in tools.items():
        if allowed[name]:
            server.add_tool(
                _refusals_named(fn),
                name=name,
                title=f"{name.capitalize()} a memory",
                description=CORRECTION_DESCRIPTIONS[name],
                annotations=writes,
            )
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
