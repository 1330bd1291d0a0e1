"""`anima db`, `anima import`, `anima status`: the store itself."""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from anima_pipeline.cli.app import app, db_app
from anima_pipeline.cli.common import (
    advancing,
    anima_ids,
    console,
    declined_line,
    fail,
    only_anima,
    open_store,
    per_anima_night,
    progress_bar,
    settings,
)

app.add_typer(db_app, name="db")


@db_app.command("migrate")
def db_migrate() -> None:
    """Apply pending migrations (store/sql/, each in a transaction); refuse if an applied file changed."""
    from anima_pipeline.store.db import resolve_url
    from anima_pipeline.store.migrations import migrate

    applied = migrate(resolve_url(settings()))
    console.print(
        f"applied {len(applied)} migration(s)" + (f": {', '.join(applied)}" if applied else " (up to date)"),
        soft_wrap=True,  # one line however many migrations: scripts grep it
    )


@db_app.command("stop")
def db_stop() -> None:
    """Stop the embedded PostgreSQL under ANIMA_HOME (nothing to do with ANIMA_DATABASE_URL set)."""
    from anima_pipeline.store import embedded

    s = settings()
    if s.database_url:
        console.print("ANIMA_DATABASE_URL is set: no embedded server to stop")
        return
    foreign = embedded.set_aside_foreign(s.home)
    if foreign is not None:
        pid, served = foreign
        console.print(
            f"the server running (pid {pid}) is that of {served}, not this home's: left running. This "
            f"home's copied postmaster.pid is set aside ({embedded.COPIED_PID}): the next command starts "
            "this home's own server",
            soft_wrap=True,
        )
        return
    stopped = embedded.stop(s.home)
    console.print("embedded PostgreSQL stopped" if stopped else "no embedded PostgreSQL was running")


@app.command("import")
def import_(
    files: list[str] = typer.Argument(..., help="Archive JSONL files; '-' reads standard input."),
    update: bool = typer.Option(
        False,
        "--update",
        help="Apply lines that change a stored message (content, role, speaker, created_at) or a "
        "conversation's title or debug flag, as audited updates, instead of refusing them as conflicts.",
    ),
) -> None:
    """Import conversation archives (JSONL, one message a line). All files in one transaction:
    a bad line aborts everything and names file and line. Re-importing changes nothing; a line
    that contradicts what is stored is a conflict (see --update)."""
    from anima_pipeline.embed.provider import provider_name
    from anima_pipeline.store.archive import ImportStats, import_records, parse_lines
    from anima_pipeline.store.events import Audit
    from anima_pipeline.store.planner_stats import keep_fresh

    limits = settings()
    db = open_store()
    stats = ImportStats()
    try:
        with db.transaction() as conn, progress_bar() as progress:
            audit = Audit(conn=conn, anima_id="", run_id=f"import-{uuid.uuid4().hex[:12]}", step="import")
            for name in files:
                lines, source = _archive_lines(name)
                task = progress.add_task(f"import {Path(source).name}", total=len(lines))
                records = advancing(parse_lines(lines, source, limits, stats.ignored), progress, task)
                import_records(conn, records, audit, stats, update=update)
                stats.files += 1
        with db.transaction() as conn:
            # (the store's first day moved with the messages, in import_records: store/calendar.py)
            keep_fresh(conn, stats.written())  # recall's plans need statistics (store/planner_stats.py)
    finally:
        db.close()
    console.print(
        f"imported {stats.files} file(s), {stats.lines} line(s): {stats.messages_added} new message(s), "
        f"{stats.conversations_added} new conversation(s), {len(stats.animas)} anima(s)"
        + (
            f"; updated {stats.messages_updated} message(s), {stats.conversations_updated} conversation field(s)"
            if stats.messages_updated or stats.conversations_updated
            else ""
        )
        + (
            f"; {stats.skipped_cleaned} line(s) of conversations the cleanup removed were skipped"
            if stats.skipped_cleaned
            else ""
        )
        + (
            "; not in the archive format, so not stored: "
            + ", ".join(f"{k!r} ({n:,} line(s), first {at})" for k, (n, at) in sorted(stats.ignored.items()))
            if stats.ignored
            else ""
        )
    )
    if stats.messages_added and limits.embedder.night_messages == 0 and provider_name(limits) != "none":
        # a night embeds memories only (docs/benchmarks.md, "Encoder"): searching these messages
        # by meaning (search_messages) waits for their vectors
        console.print(
            f"{stats.messages_added} new message(s) have no vectors yet: `anima embed --kind message` "
            "makes them (searching messages by meaning needs them; nights embed memories only)"
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


@app.command("status")
def status_(as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table.")) -> None:
    """Counts per anima and in total: conversations, messages, memories, anchors, narratives, summaries."""
    db = open_store(read_only=True)
    try:
        with db.transaction() as conn:
            data = status_data(conn)
    finally:
        db.close()
    if as_json:
        print(json.dumps(data, indent=2))
        return
    print_status(data)


IDENTITY_MAX_CHARS = 4_000  # every prompt carries it whole (never cut): README, "The whole turn"


@app.command("identity")
def identity_(
    text: str | None = typer.Argument(
        None, help="Who the anima is, in its own words; left out: print the block as it is."
    ),
    anima: str | None = typer.Option(
        None, "--anima", callback=anima_ids, help="The anima (needed only when the store has several)."
    ),
    file: Path | None = typer.Option(None, "--file", help="Read the text from this file ('-' = stdin)."),
) -> None:
    """Show or set the identity self block: who the anima is. The nights never write it (they
    refresh the other five self blocks from the memories); its owner sets it here, audited
    (`anima revert --run RUN` gives the old text back), and every prompt carries it whole."""
    from anima_pipeline.core.types import IDENTITY_UNSET
    from anima_pipeline.core.validation import text_problem
    from anima_pipeline.store.events import Audit
    from anima_pipeline.store.layers import SelfBlockRepo

    if text is not None and file is not None:
        fail("give the text or --file, not both", 2)
    if file is not None:
        text = _read_text(file)
    db = open_store()
    try:
        with db.transaction() as conn:
            who = only_anima(conn, anima)
            if text is None:
                current = SelfBlockRepo(conn).all(who)["identity"].strip()
                console.print(escape(current) if current else f"(identity of {who} not set) {IDENTITY_UNSET}")
                return
            text = text.strip()
            if not text:
                fail("identity: the text is blank; give who the anima is, in its own words", 2)
            if len(text) > IDENTITY_MAX_CHARS:
                fail(
                    f"identity: {len(text):,} characters, over {IDENTITY_MAX_CHARS:,} (every prompt carries it whole)",
                    2,
                )
            if (problem := text_problem(text)) is not None:
                fail(f"identity: {problem.message()}", 2)
            run = f"identity-{uuid.uuid4().hex[:12]}"
            changed = SelfBlockRepo(
                conn, Audit(conn=conn, anima_id=who, run_id=run, step="operator/identity")
            ).write(who, "identity", text, "operator")
    finally:
        db.close()
    console.print(
        f"identity of {who} set (run {run}; `anima revert --run {run}` undoes it)"
        if changed
        else f"identity of {who} unchanged"
    )


def _read_text(file: Path) -> str:
    if str(file) == "-":
        return sys.stdin.read()
    try:
        return file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"--file {file}: {exc.strerror if isinstance(exc, OSError) else 'not UTF-8 text'}", 2)


def status_data(conn) -> dict:
    """What `anima status` shows (and the demo's last table): the counts, how recall runs, the
    latest declined steps, and what is not counted (cleaned by a night, hidden by a forget)."""
    from anima_pipeline.recall.dense import recall_status
    from anima_pipeline.store.sleep_state import latest_declined
    from anima_pipeline.store.status import cleaned_by_night, hidden_by_forget, night_costs, status

    data = status(conn)
    data["recall"] = recall_status(conn, settings())
    data["cleaned_by_night"] = cleaned_by_night(conn)
    data["hidden_by_forget"] = hidden_by_forget(conn)
    data["declined"] = [{**r, "day": r["day"].isoformat()} for r in latest_declined(conn)]
    data["nights"] = [{**r, "day": r["day"].isoformat()} for r in night_costs(conn)]
    return data


def print_status(data: dict) -> None:
    console.print(status_table(data))
    if data.get("nights"):
        console.print(nights_cost_table(data["nights"]))
    console.print(recall_line(data["recall"]), soft_wrap=True)  # a command to copy, unwrapped
    for d in data["declined"]:  # the latest nights' steps whose model wrote nothing, and why
        console.print(
            declined_line(d["day"], d["anima_id"], d["step"], d["cause"], d["said"]), soft_wrap=True
        )
    if cleaned := data["cleaned_by_night"]:  # why an import's counts and these differ
        console.print(
            f"{sum(cleaned.values())} conversation(s) deleted by the night's cleanup are not counted "
            "(stale, with 0 or 1 message or no assistant reply; in the audit log, `anima revert --run "
            "RUN` restores them): " + ", ".join(f"{a} {n}" for a, n in sorted(cleaned.items()))
        )
    if hidden := data["hidden_by_forget"]:
        console.print(
            f"{sum(hidden.values())} message(s) hidden by `anima forget` are not counted (out of recall "
            "and the nights; `anima revert --run RUN` of the forget shows them again, `--purge` erases "
            "them): " + ", ".join(f"{a} {n}" for a, n in sorted(hidden.items()))
        )


def nights_cost_table(nights: list[dict]) -> Table:
    """The latest nights: animas that talked, model calls, dollars, dollars per anima-night."""
    table = Table(title="latest nights")
    for col in ("day", "animas", "llm", "$", "$/anima-night"):
        table.add_column(col, justify="left" if col == "day" else "right", no_wrap=True)
    for n in nights:
        table.add_row(
            n["day"],
            str(n["animas"]),
            str(n["llm_calls"]),
            f"{n['cost_usd']:.4f}",
            per_anima_night(n["cost_usd"], n["llm_calls"], n["animas"]),
        )
    return table


def recall_line(r: dict) -> str:
    """One line on how recall runs: hybrid with its model and backlog, or lexical and why."""
    if r["mode"] == "lexical" and not r["model"]:
        line = f"recall: lexical only ({escape(r['lexical_reason'] or '')})"
        if r["lexical_reason"] == "no embedder installed":  # the way to recall by meaning
            from anima_pipeline.embed.embedder import INSTALL_HINT

            line += f"; for recall by meaning: {escape(INSTALL_HINT)}"
        return line
    waiting = ", ".join(f"{n} {kind}(s)" for kind, n in (r["backlog"] or {}).items())
    head = f"recall: {r['mode']} · {r['provider']} {r['model']} · {r['dimension']} dimensions"
    tail = f" ({escape(r['lexical_reason'])})" if r["lexical_reason"] else ""
    return f"{head} · waiting for a vector: {waiting or 'none'}{tail}"


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
