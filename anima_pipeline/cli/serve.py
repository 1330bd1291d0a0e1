"""`anima serve` (the HTTP service) and `anima mcp` (the MCP server): an agent's ways in."""

from __future__ import annotations

import typer

from anima_pipeline.cli.app import app
from anima_pipeline.cli.common import err_console, open_store, settings


@app.command("serve")
def serve(
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to bind (default: this machine only)."),
    port: int = typer.Option(8765, "--port", help="TCP port."),
) -> None:
    """The HTTP API (OpenAPI docs at /docs): append messages, context, search, remember, status
    under /v1/animas/{anima}/…, each request with `Authorization: Bearer KEY` (anima keys create)."""
    import uvicorn

    from anima_pipeline.service.http import create_app

    db = open_store()
    try:
        err_console.print(f"anima serve: http://{host}:{port}/docs")
        uvicorn.run(create_app(db, settings()), host=host, port=port, log_level="warning")
    finally:
        db.close()
