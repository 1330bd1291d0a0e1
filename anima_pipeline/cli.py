"""The `anima` command line: import, status, sleep, recall, export, demo, db.

Every command opens the store the same way (ANIMA_DATABASE_URL, else the embedded server
under ANIMA_HOME) so what works in the demo works against a real server.
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from anima_pipeline.config import Settings, get_settings

app = typer.Typer(
    help="anima: nightly sleep-style memory consolidation for long-lived LLM agents.",
    no_args_is_help=True,
    add_completion=False,
)
db_app = typer.Typer(help="The memory database: migrate, stop the embedded server.", no_args_is_help=True)
app.add_typer(db_app, name="db")
# emoji=False: rich would turn "archive.jsonl:100: ..." into "archive.jsonl💯 ..."; errors are
# not wrapped, so a long file:line stays on one line for copying.
console = Console(emoji=False)
err_console = Console(stderr=True, emoji=False, soft_wrap=True)


def _settings() -> Settings:
    try:
        return get_settings()
    except ValueError as exc:
        err_console.print(f"[red]configuration error:[/red] {escape(str(exc))}")
        raise typer.Exit(2) from None


def _open():
    import psycopg

    from anima_pipeline.store.db import open_database
    from anima_pipeline.store.embedded import EmbeddedError
    from anima_pipeline.store.migrations import MigrationError

    try:
        return open_database(_settings())
    except (EmbeddedError, MigrationError, psycopg.OperationalError) as exc:
        err_console.print(f"[red]store error:[/red] {escape(str(exc))}")
        raise typer.Exit(1) from None


@db_app.command("migrate")
def db_migrate() -> None:
    """Apply pending migrations from sql/ (each in a transaction); refuse if an applied file changed."""
    import psycopg

    from anima_pipeline.store.db import resolve_url
    from anima_pipeline.store.embedded import EmbeddedError
    from anima_pipeline.store.migrations import MigrationError, migrate

    try:
        applied = migrate(resolve_url(_settings()))
    except (EmbeddedError, MigrationError, psycopg.OperationalError) as exc:
        err_console.print(f"[red]migration refused:[/red] {escape(str(exc))}")
        raise typer.Exit(1) from None
    console.print(f"applied {len(applied)} migration(s)" + (f": {', '.join(applied)}" if applied else " (up to date)"))


@db_app.command("stop")
def db_stop() -> None:
    """Stop the embedded PostgreSQL under ANIMA_HOME (nothing to do with ANIMA_DATABASE_URL set)."""
    from anima_pipeline.store import embedded

    s = _settings()
    if s.database_url:
        console.print("ANIMA_DATABASE_URL is set: no embedded server to stop")
        return
    stopped = embedded.stop(s.home)
    console.print("embedded PostgreSQL stopped" if stopped else "no embedded PostgreSQL was running")


@app.command("import")
def import_(
    files: list[str] = typer.Argument(..., help="Archive JSONL files; '-' reads standard input."),
) -> None:
    """Import conversation archives (JSONL, one message a line). All files in one transaction:
    a bad line aborts everything and names file and line. Re-importing changes nothing."""
    from anima_pipeline.store.archive import ArchiveError, ImportStats, import_records, parse_lines
    from anima_pipeline.store.events import Audit

    db = _open()
    stats = ImportStats()
    try:
        with db.transaction() as conn, _progress() as progress:
            audit = Audit(conn=conn, anima_id="", run_id=f"import-{uuid.uuid4().hex[:12]}", step="import")
            for name in files:
                lines, source = _archive_lines(name)
                task = progress.add_task(f"import {Path(source).name}", total=len(lines))
                import_records(conn, _advancing(parse_lines(lines, source), progress, task), audit, stats)
                stats.files += 1
    except ArchiveError as exc:
        err_console.print(f"[red]import aborted, nothing written:[/red] {escape(str(exc))}")
        raise typer.Exit(1) from None
    finally:
        db.close()
    console.print(
        f"imported {stats.files} file(s), {stats.lines} line(s): {stats.messages_added} new message(s), "
        f"{stats.conversations_added} new conversation(s), {len(stats.animas)} anima(s)"
    )


def _archive_lines(name: str) -> tuple[list[str], str]:
    """The lines of one archive ('-' = standard input) and its name for messages. Split on "\\n"
    only: str.splitlines would also split inside a JSON string at U+2028 or U+0085, which JSON
    allows unescaped. Text that is not UTF-8 is a bad line too, named like the others."""
    from anima_pipeline.store.archive import ArchiveError

    if name == "-":
        source = "<stdin>"
        data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
    else:
        path = Path(name)
        if not path.is_file():
            raise ArchiveError(f"{name}: no such file")
        source, data = str(path), path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise ArchiveError(f"{source}:{line}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    return (text.removesuffix("\n").split("\n") if text else []), source


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=err_console, transient=True,
    )


def _advancing(records, progress: Progress, task):
    for rec in records:
        progress.advance(task)
        yield rec


@app.command("status")
def status_(as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table.")) -> None:
    """Counts per anima and in total: conversations, messages, memories, anchors, narratives, summaries."""
    from anima_pipeline.store.status import status

    db = _open()
    try:
        with db.transaction() as conn:
            data = status(conn)
    finally:
        db.close()
    if as_json:
        print(json.dumps(data, indent=2))
        return
    console.print(status_table(data))


_SHORT = ("conv", "msgs", "facts", "deprec", "anchors", "narr", "summ", "refs", "dreams")


def status_table(data: dict) -> Table:
    from anima_pipeline.store.status import STATUS_KEYS

    table = Table(title="anima status", caption=" · ".join(f"{h} = {k}" for h, k in zip(_SHORT, STATUS_KEYS, strict=True)))
    table.add_column("anima", no_wrap=True)
    for short in _SHORT:
        table.add_column(short, justify="right")
    for row in data["animas"]:
        table.add_row(row["anima_id"], *(str(row[k]) for k in STATUS_KEYS))
    table.add_row("[bold]total[/bold]", *(f"[bold]{data['totals'][k]}[/bold]" for k in STATUS_KEYS))
    return table


@app.command("recall")
def recall_(
    query: str = typer.Argument(..., help="What the agent is asking its memory."),
    anima: str | None = typer.Option(None, "--anima", help="Which anima (default: the only one)."),
    limit: int = typer.Option(8, help="At most this many recalled memories (besides the resident set)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of the context block."),
) -> None:
    """What the agent would get back at chat time: resident memories, then passive recall."""
    from anima_pipeline.recall.context import recall

    db = _open()
    try:
        with db.transaction() as conn:
            anima_id = anima or _only_anima(conn)
            result = recall(conn, anima_id, query, limit=limit)
    finally:
        db.close()
    if as_json:
        print(result.model_dump_json(indent=2))
    else:
        console.print(result.render(), markup=False, highlight=False)


def _only_anima(conn) -> str:
    animas = [r["anima_id"] for r in conn.execute("SELECT DISTINCT anima_id FROM conversation ORDER BY 1").fetchall()]
    if len(animas) != 1:
        err_console.print(f"[red]choose an anima with --anima[/red] (known: {', '.join(animas) or 'none'})")
        raise typer.Exit(2)
    return animas[0]


@app.command("export")
def export_(
    out: Path = typer.Option(..., "--markdown", help="Folder to write MEMORY.md, memory/ and bank/ into."),
    anima: list[str] = typer.Option(None, "--anima", help="Only these animas (repeatable)."),
) -> None:
    """Export the store as a human-readable Markdown workspace (MEMORY.md, memory/YYYY-MM-DD.md, bank/)."""
    from anima_pipeline.export import export_markdown

    db = _open()
    try:
        with db.transaction() as conn:
            counts = export_markdown(conn, out, anima or None)
    except ValueError as exc:
        err_console.print(f"[red]export failed:[/red] {exc}")
        raise typer.Exit(2) from None
    finally:
        db.close()
    console.print(
        f"exported {counts['animas']} anima(s) to {out}: {counts['memories']} memories, "
        f"{counts['day_files']} day files, {counts['bank_pages']} bank pages"
    )


SAMPLE = Path(__file__).parent / "sample" / "week.archive.jsonl"


@app.command("demo")
def demo() -> None:
    """Import the bundled synthetic week of chats into the embedded default and show the store."""
    import_([str(SAMPLE)])
    status_(as_json=False)


if __name__ == "__main__":
    app()
