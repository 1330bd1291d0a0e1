"""`anima export`: the store as a human-readable Markdown workspace."""

from __future__ import annotations

from pathlib import Path

import typer

from anima_pipeline.cli.app import app
from anima_pipeline.cli.common import anima_ids, console, fail, open_store


@app.command("export")
def export_(
    out: Path = typer.Option(..., "--markdown", help="Folder to write MEMORY.md, memory/ and bank/ into."),
    anima: list[str] = typer.Option(
        None, "--anima", callback=anima_ids, help="Only these animas (repeatable)."
    ),
) -> None:
    """Export the store as a human-readable Markdown workspace (MEMORY.md, memory/YYYY-MM-DD.md, bank/)."""
    from anima_pipeline.memory.workspace import export_markdown

    _writable_folder(out)
    db = open_store(read_only=True)
    try:
        with db.transaction() as conn:
            counts = export_markdown(conn, out, anima or None)
    except OSError as exc:  # a file in the way, a full disk: one line naming the path, no traceback
        fail(f"--markdown {out}: cannot write {exc.filename or out} ({exc.strerror or exc}); {_FIX}", 2)
    finally:
        db.close()
    console.print(
        f"exported {counts['animas']} anima(s) to {out}: {counts['memories']} memories, "
        f"{counts['day_files']} day files, {counts['bank_pages']} bank pages"
    )


_FIX = "give a folder you can write to (it is created when missing)"


def _writable_folder(out: Path) -> None:
    """Exit 2 naming `out` before the store is read: a file where the folder should be, or a
    folder that cannot be made (README, "anima export --markdown")."""
    if out.exists() and not out.is_dir():
        fail(f"--markdown {out}: is a file, not a folder; {_FIX}", 2)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"--markdown {out}: cannot create the folder ({exc.strerror or exc}); {_FIX}", 2)
