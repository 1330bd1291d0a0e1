"""The typer applications every command module registers on."""

from __future__ import annotations

from typing import Any

import typer

# Click's own help (rich_markup_mode=None) on every app: a flag shows as a flag (`--force`,
# not `--force <bool>`), a value by its kind (`--day TEXT`), and docstrings are re-wrapped to
# the terminal instead of keeping their source line breaks.
HELP: dict[str, Any] = {
    "rich_markup_mode": None,
    "no_args_is_help": True,
    "context_settings": {"max_content_width": 110},
}
app = typer.Typer(
    help="anima: nightly sleep-style memory consolidation for long-lived LLM agents.",
    add_completion=False,
    **HELP,
)
db_app = typer.Typer(help="The memory database: migrate, stop the embedded server.", **HELP)
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
    # the pool's reconnect attempts after a lost server are one warning a second: the night's
    # own failure line says what happened
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
