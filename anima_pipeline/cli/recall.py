"""`anima recall`: what the agent would get back at chat time."""

from __future__ import annotations

import typer

from anima_pipeline.cli.app import app
from anima_pipeline.cli.common import console, only_anima, open_store


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

    db = open_store()
    try:
        with db.transaction() as conn:
            anima_id = only_anima(conn, anima)
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
