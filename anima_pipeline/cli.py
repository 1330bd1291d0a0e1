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
# Piped output gets a wide table instead of rich's 80-column default.
console = Console(emoji=False, width=None if sys.stdout.isatty() else 150)
err_console = Console(stderr=True, emoji=False, soft_wrap=True)


@app.callback()
def _main(
    log_level: str = typer.Option(
        "ERROR",
        "--log-level",
        envvar="ANIMA_LOG_LEVEL",
        help="Python log level of the pipeline's own logger.",
    ),
) -> None:
    """Nightly sleep-style memory consolidation. Configuration: ANIMA_* environment variables (see README)."""
    import logging

    logging.getLogger("anima_pipeline").setLevel(log_level.upper())


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
    console.print(
        f"applied {len(applied)} migration(s)" + (f": {', '.join(applied)}" if applied else " (up to date)")
    )


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
        + (
            f"; {stats.skipped_cleaned} line(s) of conversations the cleanup removed were skipped"
            if stats.skipped_cleaned
            else ""
        )
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
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
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

    table = Table(
        title="anima status",
        caption=" · ".join(f"{h} = {k}" for h, k in zip(_SHORT, STATUS_KEYS, strict=True)),
    )
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
    max_chars: int = typer.Option(
        2000, "--max-chars", help="Character budget of the recalled memories (resident ones not counted)."
    ),
    exclude_session: list[str] = typer.Option(
        None,
        "--exclude-session",
        help="The current conversation's id (repeatable): memories sourced only from it are not recalled.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of the context block."),
) -> None:
    """What the agent would get back at chat time: resident memories, then passive recall."""
    from anima_pipeline.recall.context import recall

    db = _open()
    try:
        with db.transaction() as conn:
            anima_id = anima or _only_anima(conn)
            result = recall(
                conn,
                anima_id,
                query,
                limit=limit,
                max_chars=max_chars,
                exclude_sessions=exclude_session or None,
            )
    finally:
        db.close()
    if as_json:
        print(result.model_dump_json(indent=2))
    else:
        console.print(result.render(), markup=False, highlight=False)


def _only_anima(conn) -> str:
    animas = [
        r["anima_id"]
        for r in conn.execute("SELECT DISTINCT anima_id FROM conversation ORDER BY 1").fetchall()
    ]
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
        _fail(f"export failed: {exc}", 2)
    finally:
        db.close()
    console.print(
        f"exported {counts['animas']} anima(s) to {out}: {counts['memories']} memories, "
        f"{counts['day_files']} day files, {counts['bank_pages']} bank pages"
    )


@app.command("sleep")
def sleep_(
    day: str | None = typer.Option(None, "--day", help="One night: the local day YYYY-MM-DD to consolidate."),
    first: str | None = typer.Option(None, "--from", help="First day of a range (with --to)."),
    last: str | None = typer.Option(None, "--to", help="Last day of a range (with --from)."),
    anima: list[str] = typer.Option(
        None, "--anima", help="Only these animas (repeatable); default: all active."
    ),
    mode: str | None = typer.Option(
        None,
        "--mode",
        help="Deep sleep mode: full | incremental. Default: the schedule's rule (Monday full).",
    ),
    force: bool = typer.Option(False, "--force", help="Re-run steps that already finished for a day."),
    step: list[str] = typer.Option(
        None, "--step", help="Only this step (asset key, e.g. semantic_memory/merged)."
    ),
) -> None:
    """Run nights through Dagster, one day after another, recorded in the run history under
    DAGSTER_HOME (default $ANIMA_HOME/dagster): exactly what the UI and the 02:00 schedule run."""
    days = _days(day, first, last)
    if mode not in (None, "full", "incremental"):
        _fail(f"--mode must be full or incremental, got {mode!r}", 2)
    try:
        rows = run_sleep(days, animas=anima or (), mode=mode or "scheduled", force=force, steps=step or None)
    except ValueError as exc:
        _fail(str(exc), 2)
    console.print(sleep_table(rows))
    failed = [r for r in rows if r["status"] != "done"]
    if failed:
        raise typer.Exit(1)


def _fail(message: str, code: int = 1) -> None:
    err_console.print(f"[red]error:[/red] {escape(message)}")
    raise typer.Exit(code)


def _days(day: str | None, first: str | None, last: str | None) -> list:
    from datetime import date

    from anima_pipeline.sleep.cycle import day_range

    try:
        if day and not (first or last):
            return [date.fromisoformat(day)]
        if first and last and not day:
            return day_range(date.fromisoformat(first), date.fromisoformat(last))
    except ValueError as exc:
        _fail(str(exc), 2)
    _fail("give either --day D, or --from D1 --to D2", 2)
    return []


def run_sleep(
    days: list, *, animas=(), mode: str = "scheduled", force: bool = False, steps=None
) -> list[dict]:
    """The whole range as ONE Dagster run (the UI's single-run backfill shape: days strictly
    in order inside it), with a progress bar over days fed from the night markers the run
    writes; returns one summary row per day read back from sleep_state."""
    import threading

    from anima_pipeline.defs.instance import get_instance
    from anima_pipeline.defs.night.launch import materialize_night

    db = _open()  # starts the embedded server and migrates before Dagster opens it
    instance = get_instance()
    first, last = days[0], days[-1]
    with db.transaction() as conn:
        t0 = conn.execute("SELECT now() AS now").fetchone()["now"]
    done = threading.Event()
    outcome: dict = {}
    try:
        with _progress() as progress:
            task = progress.add_task(f"nights {first}..{last}", total=len(days))

            def poll() -> None:
                while not done.wait(0.5):
                    with db.transaction() as conn:
                        row = conn.execute(
                            """SELECT max(day) AS d FROM sleep_state WHERE anima_id = '*' AND step = 'night'
                               AND day BETWEEN %s AND %s AND started_at >= %s""",
                            (first, last, t0),
                        ).fetchone()
                    if row and row["d"]:
                        progress.update(
                            task, completed=(row["d"] - first).days, description=f"night of {row['d']}"
                        )

            poller = threading.Thread(target=poll, daemon=True)
            poller.start()
            try:  # a ValueError (a day not over yet, an unknown step) propagates: nothing ran
                result = materialize_night(
                    first,
                    last,
                    steps=steps,
                    mode=mode,
                    force=force,
                    animas=animas,
                    instance=instance,
                    raise_on_error=False,
                    log_level="ERROR",
                )
                outcome = {
                    "ok": result.success,
                    "run_id": result.run_id,
                    "error": "" if result.success else _run_error(result),
                }
            finally:
                done.set()
                poller.join()
            if outcome["ok"]:
                progress.update(task, completed=len(days))
        rows = [_day_row(db, d, t0, outcome) for d in days]
    finally:
        instance.dispose()
        db.close()
    if not outcome["ok"]:
        err_console.print(f"[red]the run failed:[/red] {escape(outcome['error'])}")
    return rows


def _day_row(db, d, t0, outcome: dict) -> dict:
    with db.transaction() as conn:
        marker = conn.execute(
            "SELECT status, started_at FROM sleep_state WHERE anima_id = '*' AND step = 'night' AND day = %s",
            (d,),
        ).fetchone()
    if outcome["ok"]:
        status = "done"
    elif marker and marker["started_at"] >= t0:
        status = "failed" if marker["status"] in ("failed", "running") else marker["status"]
    else:
        status = "not run"
    return {
        "day": d,
        "run_id": outcome["run_id"],
        "status": status,
        "error": outcome["error"],
        **_day_totals(db, d),
    }


def _run_error(result) -> str:
    for event in result.all_events:
        if event.is_failure and event.event_specific_data is not None:
            err = getattr(event.event_specific_data, "error", None)
            if err is not None:
                return err.message.strip().splitlines()[0]
    return "the run failed (see the Dagster run log)"


_TOTALS = ("created", "updated", "deprecated", "merged", "split", "anchors", "narratives", "summaries")


def _day_totals(db, d) -> dict:
    with db.transaction() as conn:
        rows = conn.execute(
            "SELECT anima_id, step, stats FROM sleep_state WHERE day = %s AND anima_id <> '*'", (d,)
        ).fetchall()
    totals = dict.fromkeys(_TOTALS, 0)
    # animas with talk that day: light sleep runs only for them (cleanup looks at everyone)
    talked = {r["anima_id"] for r in rows if r["step"] == "semantic_memory/extracted"}
    totals.update(animas=len(talked), llm_calls=0, cost_usd=0.0)
    for r in rows:
        for k in (*_TOTALS, "llm_calls", "cost_usd"):
            v = r["stats"].get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                totals[k] += v
    return totals


_TOTALS_SHORT = ("new", "upd", "depr", "merg", "split", "anch", "narr", "summ")


def sleep_table(rows: list[dict]) -> Table:
    table = Table(
        title="nights (new/upd/depr/merg/split = semantic memories; anch = anchors; narr = narratives; "
        "summ = summaries)"
    )
    for col in ("day", "status", "animas", *_TOTALS_SHORT, "llm", "$"):
        table.add_column(col, justify="left" if col in ("day", "status") else "right", no_wrap=True)
    for r in rows:
        if not r["animas"] and r["status"] == "done" and len(rows) > 14 and r is not rows[-1]:
            continue  # a long range lists the days with activity; the count below covers the rest
        table.add_row(
            str(r["day"]),
            r["status"],
            str(r["animas"]),
            *(str(r[k]) for k in _TOTALS),
            str(r["llm_calls"]),
            f"{r['cost_usd']:.2f}",
        )
    quiet = sum(1 for r in rows if not r["animas"])
    run_ids = sorted({r["run_id"] for r in rows if r["run_id"]})
    table.caption = (
        f"{len(rows)} night(s), {len(rows) - quiet} with activity; Dagster run {', '.join(run_ids) or '-'}"
    )
    return table


@app.command("revert")
def revert_(
    run: str = typer.Option(..., "--run", help="The run id to undo (Dagster run id, shown by anima sleep)."),
) -> None:
    """Undo what one run wrote, replaying its audit log backwards: created memories are
    deprecated, changed ones get their previous state, cleaned conversations come back.
    The revert is itself audited, and its nights can be run again."""
    from anima_pipeline.sleep.revert import RevertError, revert_run

    db = _open()
    revert_id = f"revert-{uuid.uuid4().hex[:12]}"
    try:
        with db.transaction() as conn:
            stats = revert_run(conn, run, revert_id)
    except RevertError as exc:
        _fail(str(exc), 2)
    finally:
        db.close()
    console.print(
        f"reverted run {run} as {revert_id}: " + ", ".join(f"{k} {v}" for k, v in sorted(stats.items()))
    )


SAMPLE = Path(__file__).parent / "sample" / "week.archive.jsonl"


@app.command("demo")
def demo() -> None:
    """The whole cycle on the bundled synthetic week: import it into the embedded default (or
    ANIMA_DATABASE_URL), sleep its nights through Dagster with the offline engine, and show
    what was learned."""
    import os
    from datetime import date

    from anima_pipeline.sleep.cycle import day_range
    from anima_pipeline.store.status import status

    if _settings().engine != "offline":
        console.print("note: the demo uses the engine in ANIMA_ENGINE; unset it for the offline engine")
    import_([str(SAMPLE)])
    days = day_range(date(2026, 11, 16), date(2026, 11, 23))
    rows = run_sleep(days)
    console.print(sleep_table(rows))
    db = _open()
    try:
        with db.transaction() as conn:
            show_learned(conn, "aria")
            data = status(conn)
    finally:
        db.close()
    console.print(status_table(data))
    home = os.environ.get("DAGSTER_HOME") or str(_settings().home / "dagster")
    console.print(
        "\nOpen the Dagster UI on the same run history:\n"
        f"  DAGSTER_HOME={home} .venv/bin/dagster dev -w workspace.yaml\n"
        "Export the store as Markdown:  .venv/bin/anima export --markdown ./anima-export\n"
        'Ask it something:             .venv/bin/anima recall "what does Lin Wei like to eat?"'
    )


def show_learned(conn, anima_id: str) -> None:
    from anima_pipeline.recall.context import resident_set
    from anima_pipeline.store.layers import AutobiographyRepo, SelfBlockRepo
    from anima_pipeline.store.memories import MemoryRepo

    mems = MemoryRepo(conn).active(anima_id)
    t = Table(title=f"semantic memories of {anima_id} ({len(mems)} active; the newest 15)")
    for col in ("id", "type", "content", "sources"):
        t.add_column(col, overflow="fold")
    for m in sorted(mems, key=lambda m: m.id)[-15:]:
        t.add_row(m.ref, m.type, escape(m.content), ", ".join(s.split(":")[-1] for s in m.source_sessions))
    console.print(t)
    anchors = conn.execute(
        "SELECT occurred_at, emotion, valence, trigger FROM emotional_anchor WHERE anima_id = %s ORDER BY occurred_at",
        (anima_id,),
    ).fetchall()
    t = Table(title=f"emotional anchors ({len(anchors)})")
    for col in ("when", "emotion", "valence", "trigger"):
        t.add_column(col, overflow="fold")
    for a in anchors:
        t.add_row(
            f"{a['occurred_at']:%m-%d %H:%M}",
            a["emotion"],
            f"{a['valence']:+.1f}",
            escape(a["trigger"] or ""),
        )
    console.print(t)
    t = Table(title="autobiographical narratives")
    for col in ("id", "significance", "title"):
        t.add_column(col, overflow="fold")
    for n in AutobiographyRepo(conn).active(anima_id):
        t.add_row(f"a-{n['id']}", n["significance"], escape(n["title"]))
    console.print(t)
    summaries = conn.execute(
        "SELECT level, period_start, content FROM temporal_summary WHERE anima_id = %s ORDER BY level, period_start",
        (anima_id,),
    ).fetchall()
    t = Table(title=f"temporal summaries ({len(summaries)})")
    for col in ("level", "period", "summary (start)"):
        t.add_column(col, overflow="fold")
    for srow in summaries:
        t.add_row(srow["level"], str(srow["period_start"]), escape(srow["content"][:160].replace("\n", " ")))
    console.print(t)
    resident, overflow = resident_set(conn, anima_id)
    console.print(f"[bold]resident set[/bold] ({len(resident)} memories, pinned ∪ most cited):")
    for m in resident:
        console.print(f"  {m.ref} {'📌 ' if m.pinned else ''}{escape(m.content)}", highlight=False)
    summary = SelfBlockRepo(conn).all(anima_id)["autobiography_summary"]
    if summary:
        console.print("[bold]self block autobiography_summary:[/bold]")
        console.print(escape(summary), highlight=False)


if __name__ == "__main__":
    app()
