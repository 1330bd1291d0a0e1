"""`anima snapshot`, `anima replay`, `anima diff`: the store as of a day, past days replayed into
a shadow store, and what that changed (docs/replay.md). The live store is only read, except by
`anima replay --promote`, one audited run that `anima revert` undoes."""

from __future__ import annotations

import json
from datetime import date
from typing import get_args

import typer
from rich.markup import escape
from rich.table import Table

from anima_pipeline.cli.app import app
from anima_pipeline.cli.common import console, err_console, fail, open_store, parse_day, settings
from anima_pipeline.config import EngineName

_NAME = typer.Option("replay", "--name", help="The shadow store's name (a-z, 0-9, _).")


def _date(option: str, value: str) -> date:
    return parse_day(option, value)


def _live_url() -> str:
    db = open_store()  # starts the embedded server and migrates, like every command
    url = db.url
    db.close()
    return url


@app.command("snapshot")
def snapshot_(
    as_of: str = typer.Option(..., "--as-of", help="The day (YYYY-MM-DD) whose night's end the copy shows."),
    name: str = _NAME,
    replace: bool = typer.Option(False, "--replace", help="Drop a shadow of the same name first."),
) -> None:
    """A new database holding every table as it stood when the night of --as-of was over,
    rebuilt from the audit log; prints its connection string (a libpq conninfo: pass it to
    psql, or as ANIMA_DATABASE_URL); the live store is only read."""
    from anima_pipeline.store.shadows import create

    url, undone = create(_live_url(), name, _date("--as-of", as_of), replace=replace)
    err_console.print(
        f"shadow {name!r} as of {as_of}: undid " + ", ".join(f"{t} {n}" for t, n in undone.items())
    )
    print(url)


@app.command("replay")
def replay_(
    first: str | None = typer.Option(None, "--from", help="First day to replay."),
    last: str | None = typer.Option(None, "--to", help="Last day to replay."),
    engine: str | None = typer.Option(
        None, "--engine", help=f"{' | '.join(get_args(EngineName))} (default: ANIMA_ENGINE)."
    ),
    model: str | None = typer.Option(
        None, "--model", help="The main model id for the replay (default: ANIMA_MODEL)."
    ),
    mode: str = typer.Option("scheduled", "--mode", help="Deep sleep mode: scheduled | full | incremental."),
    name: str = _NAME,
    replace: bool = typer.Option(False, "--replace", help="Drop a shadow of the same name first."),
    promote: str | None = typer.Option(
        None, "--promote", help="Apply shadow NAME to the live store (audited, revertible)."
    ),
    drop: str | None = typer.Option(None, "--drop", help="Drop shadow NAME."),
    list_: bool = typer.Option(False, "--list", help="List the shadow stores."),
) -> None:
    """Sleep past days again into a shadow store (as of the day before --from, same archive)
    through Dagster, then print the diff; the live store is never written. --promote swaps
    a replayed shadow in as one audited run; --drop removes a shadow."""
    if list_:
        _list()
    elif drop:
        from anima_pipeline.store.shadows import drop as drop_shadow

        drop_shadow(_live_url(), drop)
        console.print(f"dropped shadow {drop!r}")
    elif promote:
        _promote(promote)
    elif first and last:
        _replay(_date("--from", first), _date("--to", last), engine, model, mode, name, replace)
    else:
        fail("give --from D1 --to D2, or --promote NAME, --drop NAME, --list", 2)


def _replay(first: date, last: date, engine, model, mode: str, name: str, replace: bool) -> None:
    from anima_pipeline.defs.instance import get_instance
    from anima_pipeline.replay.run import replay

    if mode not in ("scheduled", "full", "incremental"):
        fail(f"--mode must be scheduled, full or incremental, got {mode!r}", 2)
    instance = get_instance()
    try:
        with console.status(f"replaying {first}..{last} into shadow {name!r}"):
            out = replay(
                _live_url(),
                settings(),
                first,
                last,
                name=name,
                instance=instance,
                engine=engine,
                model=model,
                mode=mode,
                replace=replace,
            )
    finally:
        instance.dispose()
    if not out.ok:
        fail(f"the replay run {out.run_id} failed: {out.error}", 1)
    console.print(f"replay run {out.run_id} (tag anima/replay={name}); shadow store: {out.url}")
    assert out.diff is not None
    print(out.diff.markdown())


@app.command("diff")
def diff_(
    name: str = typer.Argument("replay", help="The shadow store's name."),
    as_json: bool = typer.Option(False, "--json", help="The whole diff as JSON."),
    questions: str | None = typer.Option(
        None,
        "--questions",
        help='A JSONL file of {"anima_id", "question", "answer"}: recall measured on both stores.',
    ),
) -> None:
    """What a replayed shadow holds that the live store does not: memories added, removed and
    changed (by type and night, with examples), the other layers' counts and the cost."""
    from anima_pipeline.replay.diff import diff
    from anima_pipeline.store.shadows import info, shadow_url

    live = _live_url()
    meta = info(live, name)
    if "from" not in meta:
        fail(f"shadow {name!r} is a snapshot that was never replayed: nothing to compare over", 2)
    d = diff(live, shadow_url(live, name), name, _date("from", meta["from"]), _date("to", meta["to"]))
    if questions:
        from anima_pipeline.replay.diff import load_questions, recall_share
        from anima_pipeline.store.db import Database

        asked = load_questions(questions)
        with (
            Database(live, max_size=1) as on_live,
            Database(shadow_url(live, name), max_size=1) as on_shadow,
        ):
            d.recall = {
                "questions": len(asked),
                "live": recall_share(on_live, asked),
                "shadow": recall_share(on_shadow, asked),
            }
    print(d.model_dump_json(indent=1) if as_json else d.markdown())


def _list() -> None:
    from anima_pipeline.store.shadows import list_shadows

    table = Table(title="shadow stores")
    for col in ("name", "status", "as of", "replayed", "engine", "model", "run"):
        table.add_column(col)
    for s in list_shadows(_live_url()):
        span = f"{s.get('from', '')}..{s.get('to', '')}" if s.get("from") else ""
        table.add_row(
            s["name"],
            s.get("status", ""),
            s.get("as_of", ""),
            span,
            s.get("engine", ""),
            s.get("model", ""),  # an offline replay records none
            s.get("promoted_run") or s.get("run_id", ""),
        )
    console.print(table)


def _promote(name: str) -> None:
    from anima_pipeline.replay.promote import promote

    db = open_store()
    try:
        run_id, stats = promote(db, name)
    finally:
        db.close()
    console.print(f"promoted shadow {name!r} as run {run_id}: " + escape(json.dumps(dict(stats))))
    console.print(f"undo with: anima revert --run {run_id}")
