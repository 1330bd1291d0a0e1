"""The typer applications every command module registers on."""

from __future__ import annotations

import typer

app = typer.Typer(
    help="anima: nightly sleep-style memory consolidation for long-lived LLM agents.",
    no_args_is_help=True,
    add_completion=False,
)
db_app = typer.Typer(help="The memory database: migrate, stop the embedded server.", no_args_is_help=True)
app.add_typer(db_app, name="db")


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
