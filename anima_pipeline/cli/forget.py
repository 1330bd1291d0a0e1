"""`anima forget`: forget a message, a conversation, a memory or a whole anima (soft, or
--purge), print what changed per table, and recompute the summaries and self blocks that drew
on it through Dagster (anima_pipeline/memory/forget.py has the rules)."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.table import Table

from anima_pipeline.cli.app import app
from anima_pipeline.cli.common import anima_ids, console, err_console, fail, open_store, settings
from anima_pipeline.core.errors import InputError

_COLUMNS = ("erased", "deprecated", "hidden", "rewritten", "repointed", "events_scrubbed")


@app.command("forget")
def forget_(
    message: str | None = typer.Option(
        None, "--message", help="A message id (m-123 as search shows it, or 123)."
    ),
    conversation: str | None = typer.Option(None, "--conversation", help="A conversation id."),
    memory: str | None = typer.Option(None, "--memory", help="A memory id, f-N."),
    anima: str | None = typer.Option(
        None, "--anima", callback=anima_ids, help="A whole anima: every row it has."
    ),
    purge: bool = typer.Option(
        False,
        "--purge",
        help="Erase for good: rows deleted, earlier audit events scrubbed, one tombstone (ids, op, time, "
        "who) left. Without it the forget is soft: messages hidden, what derives only from them deprecated.",
    ),
    of: str | None = typer.Option(
        None,
        "--of",
        callback=anima_ids,
        help="The anima the conversation belongs to (needed when several have that id).",
    ),
    yes: bool = typer.Option(False, "--yes", help="Confirm --anima ID --purge (there is no undo)."),
    recompute: bool = typer.Option(
        True,
        "--recompute/--no-recompute",
        help="Re-run the affected days' summaries, dreams and the self blocks through Dagster now "
        "(default), or leave them marked stale for `anima sleep --force` (the report names the command).",
    ),
    export: Path | None = typer.Option(
        None,
        "--export",
        help="An earlier `anima export --markdown` folder to rewrite without what was forgotten.",
    ),
    vacuum: bool = typer.Option(
        False,
        "--vacuum",
        help="With --purge: VACUUM FULL ANALYZE the tables it touched, so the erased rows leave "
        "PostgreSQL's data files too (locks each table while it is rewritten).",
    ),
    requested_by: str = typer.Option("operator", "--by", help="Who asked (kept in the tombstone)."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
) -> None:
    """Forget one thing and everything that derives only from it. Exactly one of --message,
    --conversation, --memory, --anima. Memories whose sources are all forgotten are deprecated
    (or erased with --purge); memories with other sources keep those; anchors, narratives and
    dream entries of those conversations go; summaries and self blocks are recomputed. The
    same forget run twice changes nothing the second time."""
    from anima_pipeline.memory import forget as forgetting
    from anima_pipeline.store import erasure as q

    given = {
        k: v
        for k, v in (
            ("message", message),
            ("conversation", conversation),
            ("memory", memory),
            ("anima", anima),
        )
        if v
    }
    if len(given) != 1:
        fail("give exactly one of --message, --conversation, --memory, --anima", 2)
    [(kind, target)] = given.items()
    if kind == "anima" and purge and not yes:
        fail(f"--anima {target} --purge erases every row of the anima for good; add --yes to confirm", 2)
    forgetting.check_target(kind, target)  # type: ignore[arg-type]  # before q.owners' SQL
    s = settings()
    db = open_store()
    try:
        if kind == "anima":
            owner = target
        else:
            with db.transaction() as conn:
                found = q.owners(conn, kind, target)
            if of is not None:
                found = [a for a in found if a == of]
            if not found:
                fail(
                    f"no anima has {kind} {target}"
                    + (f" (--of {of})" if of else "")
                    + _near(db, kind, target),
                    2,
                )
            if len(found) > 1:
                fail(
                    f"{kind} {target} belongs to several animas ({', '.join(found)}): choose one with --of", 2
                )
            owner = found[0]
        report = forgetting.forget(db, s, owner, kind, target, purge=purge, requested_by=requested_by)  # type: ignore[arg-type]
        if vacuum and purge and report.changed:
            vacuumed = q.vacuum_full(db.url, [*report.tables, "memory_event"])
            err_console.print(f"vacuumed (full): {', '.join(vacuumed)}")
    finally:
        db.close()
    ran: list[str] = []
    if report.recompute and recompute:
        from anima_pipeline.cli.sleep import run_sleep

        for first, last, steps in forgetting.recompute_ranges(report):
            days = [first] if first == last else _days(first, last)
            try:
                rows = run_sleep(days, animas=[owner], force=True, steps=steps)
            except InputError as exc:  # the days cannot be slept now (not over yet, before the first)
                err_console.print(
                    f"[yellow]not recomputed ({exc}); later: {report.recompute_command}[/yellow]"
                )
                break
            ran += [f"{r['day']} {r['status']}" for r in rows]
    if export is not None:
        _rewrite_export(export, owner, emptied=kind == "anima" and purge)
    if as_json:
        print(json.dumps({**report.model_dump(mode="json"), "recomputed": ran}, indent=2))
        return
    console.print(report_table(report))
    if report.note:
        console.print(report.note)
    if report.memories_erased:
        console.print(f"memories erased: {_ids(report.memories_erased)}")
    if report.memories_deprecated:
        console.print(f"memories deprecated: {_ids(report.memories_deprecated)}")
    if report.memories_rewritten:
        console.print(f"memories rewritten (other sources kept): {_ids(report.memories_rewritten)}")
    if report.recompute:
        console.print(
            "recomputed through Dagster: " + ", ".join(ran)
            if ran
            else f"marked stale, recompute with: {report.recompute_command}"
        )


def _days(first, last):
    from anima_pipeline.night.registry import day_range

    return day_range(first, last)


def _ids(ids: list[str]) -> str:
    return ", ".join(ids[:20]) + (f" … ({len(ids)})" if len(ids) > 20 else "")


def _rewrite_export(folder: Path, anima: str, *, emptied: bool) -> None:
    """Write the anima's earlier export again (its own subfolder of a several-anima export);
    the export removes the day and bank pages it no longer has. An anima purged whole leaves
    no page at all."""
    from anima_pipeline.memory.workspace import anima_folder, export_markdown, remove_pages

    target = folder / anima_folder(anima) if (folder / anima_folder(anima)).is_dir() else folder
    if emptied:
        remove_pages(target, keep=set())
        return
    db = open_store()
    try:
        with db.transaction() as conn:
            export_markdown(conn, target, [anima])
    finally:
        db.close()


def report_table(report) -> Table:
    mode = "purge" if report.purge else "soft forget"
    title = f"{mode} of {report.target} (anima {report.anima_id}, run {report.run_id})"
    if not report.changed:
        title += ": nothing left to forget"
    table = Table(title=title)
    table.add_column("table", no_wrap=True)
    for col in _COLUMNS:
        table.add_column(col.replace("_", " "), justify="right")
    for name, changes in sorted(report.tables.items()):
        table.add_row(name, *(str(getattr(changes, c)) for c in _COLUMNS))
    return table


def _near(db, kind: str, target: str) -> str:
    """The full conversation ids ending with what was given (tables may show an id without its
    anima's prefix), as a hint after the refusal; else nothing."""
    from anima_pipeline.store import erasure as q

    if kind != "conversation":
        return ""
    with db.transaction() as conn:
        near = q.conversations_ending(conn, target)
    return f"; did you mean --conversation {' or '.join(near)}?" if near else ""
