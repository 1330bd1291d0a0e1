"""`anima serve` (the HTTP service) and `anima mcp` (the MCP server): an agent's ways in."""

from __future__ import annotations

import typer

from anima_pipeline.cli.app import app
from anima_pipeline.cli.common import (
    NEW_ANIMA_HELP,
    err_console,
    fail,
    open_store,
    require_anima_or_new,
    settings,
)


@app.command("serve")
def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to bind (default: this machine only)."),
    port: int = typer.Option(8765, "--port", help="TCP port."),
) -> None:
    """The HTTP API (OpenAPI docs at /docs): append messages, context, search, remember, status
    under /v1/animas/{anima}/…, each request with `Authorization: Bearer KEY` (anima keys create)."""
    import uvicorn

    from anima_pipeline.embed.provider import warm_up
    from anima_pipeline.service.http.app import create_app

    db = open_store()
    try:
        err_console.print(f"anima serve: {warm_up(settings())}")  # the model loads before the first request
        err_console.print(f"anima serve: http://{host}:{port}/docs")
        uvicorn.run(create_app(db, settings()), host=host, port=port, log_level="warning")
    finally:
        db.close()


@app.command("mcp")
def mcp(
    anima: str = typer.Option(..., "--anima", help="The one anima this server serves."),
    transport: str = typer.Option(
        "stdio", "--transport", help="stdio (Claude Desktop / Claude Code launch it) or streamable-http."
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="streamable-http: interface to bind."),
    port: int = typer.Option(8766, "--port", help="streamable-http: TCP port (endpoint /mcp)."),
    allow_remember: bool = typer.Option(
        False,
        "--allow-remember",
        help="Add the tools that write: remember and working_context; read-only without it.",
    ),
    new: bool = typer.Option(False, "--new", help=NEW_ANIMA_HELP),
    allow_corrections: bool = typer.Option(
        False, "--allow-corrections", help="Add deprecate, correct, pin and unpin (writes to memories)."
    ),
    allow_delete: bool = typer.Option(
        False, "--allow-delete", help="Add delete: erase a memory for good (a tombstone stays)."
    ),
) -> None:
    """The MCP server over one anima. Tools: context, search, search_messages and
    read_message (read-only; search results as compact lines, format=json for every field);
    with --allow-remember also remember and working_context; with --allow-corrections
    deprecate, correct, pin and unpin; with --allow-delete delete. Resources: anima://self and
    anima://resident."""
    from anima_pipeline.memory.facade import AnimaMemory
    from anima_pipeline.service.mcp import run

    if transport not in ("stdio", "streamable-http"):
        fail(f"--transport must be stdio or streamable-http, got {transport!r}", 2)
    require_anima_or_new(anima, new)  # exit 2 naming the known ones: a typo must not serve an empty memory
    db = open_store()
    try:
        if transport != "stdio":
            err_console.print(f"anima mcp: http://{host}:{port}/mcp (anima {anima!r})")
        from anima_pipeline.embed.provider import warm_up

        err_console.print(f"anima mcp: {warm_up(settings())}")  # stderr: stdout is the protocol
        memory = AnimaMemory(db, anima, settings=settings())
        run(
            memory,
            transport,  # type: ignore[arg-type]
            host=host,
            port=port,
            allow_remember=allow_remember,
            allow_corrections=allow_corrections,
            allow_delete=allow_delete,
        )
    finally:
        db.close()
