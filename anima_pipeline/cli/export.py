"""`anima export`: the store as a human-readable Markdown workspace."""

from __future__ import annotations

from pathlib import Path

import typer

from anima_pipeline.cli.app import app
from anima_pipeline.cli.common import anima_ids, console, open_store


@app.command("export")
def export_(
    out: Path = typer.Option(..., "--markdown", help="Folder to write MEMORY.md, memory/ and bank/ into."),
    anima: list[str] = typer.Option(
        None, "--anima", callback=anima_ids, help="Only these animas (repeatable)."
    ),
) -> None:
    """Export the store as a human-readable Markdown workspace (MEMORY.md, memory/YYYY-MM-DD.md, bank/)."""
    from anima_pipeline.memory.workspace import export_markdown

    db = open_store(read_only=True)
    try:
        with db.transaction() as conn:
            counts = export_markdown(conn, out, anima or None)
    finally:
        db.close()
    console.print(
        f"exported {counts['animas']} anima(s) to {out}: {counts['memories']} memories, "
        f"{counts['day_files']} day files, {counts['bank_pages']} bank pages"
    )
