"""The typer applications every command module registers on, and the lazy registry that
imports a command's module only when that command runs.

`anima recall` should not pay for Dagster, the sleep engine, FastAPI or the encoder: each
command module imports what it needs, and this file names which module holds which command
(COMMANDS), with the one-line help `anima --help` lists, so that listing imports none of them.
It is click's "lazily loading subcommands" pattern (a group whose `get_command` imports on
demand), on typer's group class. test_cli_startup.py checks the table against the modules.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any, NamedTuple

import typer
from typer.core import TyperGroup
from typer.main import get_command_from_info, get_group_from_info

from anima_pipeline.core.errors import InternalError


class Lazy(NamedTuple):
    module: str  # under anima_pipeline.cli
    help: str  # the first sentence of the command's help, as `anima --help` lists it


# In the order a user meets them (`anima --help` lists them so); command groups follow.
COMMANDS: dict[str, Lazy] = {
    "demo": Lazy("demo", "The whole cycle on the bundled synthetic week: import it into the embedded default (or ANIMA_DATABASE_URL), sleep its nights through Dagster with the offline engine, and show what was learned."),
    "import": Lazy("store", "Import conversation archives (JSONL, one message a line)."),
    "sleep": Lazy("sleep", "Run nights through Dagster, one day after another, recorded in the run history under DAGSTER_HOME (default $ANIMA_HOME/dagster): exactly what the UI and the 02:00 schedule run."),
    "status": Lazy("store", "Counts per anima and in total: conversations, messages, memories, anchors, narratives, summaries."),
    "recall": Lazy("recall", "Resident memories, then summaries (for a question about a time), recalled memories and past messages, each within its character budget."),
    "message": Lazy("recall", "One past message by its id, whole or in parts: what a context or a search shows in part (marked …)."),
    "export": Lazy("export", "Export the store as a human-readable Markdown workspace (MEMORY.md, memory/YYYY-MM-DD.md, bank/)."),
    "revert": Lazy("sleep", "Undo what one run wrote, replaying its audit log backwards: created memories are deprecated, changed ones get their previous state, cleaned conversations come back."),
    "identity": Lazy("store", "Show or set the identity self block: who the anima is."),
    "forget": Lazy("forget", "Forget one thing and everything that derives only from it."),
    "embed": Lazy("embed", "Embed every active memory and past message that has no vector under the configured model (ANIMA_EMBEDDER, ANIMA_EMBEDDER_MODEL), batch by batch, committing each batch: an interrupted backfill keeps what it did and the same command carries on."),
    "snapshot": Lazy("replay", "A new database holding every table as it stood when the night of --as-of was over, rebuilt from the audit log; prints its connection string (a libpq conninfo: pass it to psql, or as ANIMA_DATABASE_URL); the live store is only read."),
    "replay": Lazy("replay", "Sleep past days again into a shadow store (as of the day before --from, same archive) through Dagster, then print the diff; the live store is never written."),
    "diff": Lazy("replay", "What a replayed shadow holds that the live store does not: memories added, removed and changed (by type and night, with examples), the other layers' counts and the cost."),
    "serve": Lazy("serve", "The HTTP API (OpenAPI docs at /docs): append messages, context, search, remember, status under /v1/animas/{anima}/…, each request with `Authorization: Bearer KEY` (anima keys create)."),
    "mcp": Lazy("serve", "The MCP server over one anima."),
    "db": Lazy("store", "The memory database: migrate, stop the embedded server."),
    "eval": Lazy("eval", "Measure the memory system on public benchmarks."),
    "keys": Lazy("keys", "API keys for `anima serve`: one anima per key, stored hashed."),
    "review": Lazy("review", "Review mode (ANIMA_REVIEW_MODE=true): list a night's proposed deprecations, merges, splits and unpins, and approve or reject them; only an approval changes the store."),
}  # fmt: skip


class _Commands(MutableMapping[str, Any]):
    """A group's commands that imports a COMMANDS entry's module on first lookup: what click
    and typer read through `group.commands` (resolution, completion, "did you mean")."""

    def __init__(self, built: Mapping[str, Any]) -> None:
        self._built = dict(built)

    def __getitem__(self, name: str) -> Any:
        if name not in self._built:
            if name not in COMMANDS:
                raise KeyError(name)
            self._built[name] = _load(name)
        return self._built[name]

    def __setitem__(self, name: str, cmd: Any) -> None:
        self._built[name] = cmd

    def __delitem__(self, name: str) -> None:
        del self._built[name]

    def __iter__(self) -> Iterator[str]:
        yield from COMMANDS
        yield from (n for n in self._built if n not in COMMANDS)

    def __len__(self) -> int:
        return len(COMMANDS) + sum(n not in COMMANDS for n in self._built)

    def loaded(self, name: str) -> Any | None:
        return self._built.get(name)


class LazyGroup(TyperGroup):
    """The top-level group: commands from COMMANDS, each built when first looked up, and the
    one error handler of every command (cli/common.py `exit_for`): no command catches an
    error of the package itself."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.commands = _Commands(self.commands)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (typer.Exit, typer.Abort, typer.TyperException):  # click's own ends and usage errors
            raise
        except Exception as exc:
            # cli/common.py loads the settings: `anima --help` never gets here, nor imports them
            from anima_pipeline.cli.common import exit_for

            raise typer.Exit(exit_for(exc, ctx.invoked_subcommand or "")) from None

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        # the listing from the table (or a command already built): --help imports no command
        from typer._click.utils import make_default_short_help

        commands = self.commands
        assert isinstance(commands, _Commands)
        names = list(commands)
        if not names:
            return
        limit = formatter.width - 6 - max(map(len, names))
        rows = []
        for name in names:
            cmd = commands.loaded(name)
            if cmd is not None and cmd.hidden:
                continue
            text = (
                cmd.get_short_help_str(limit)
                if cmd is not None
                else make_default_short_help(COMMANDS[name].help, limit)
            )
            rows.append((name, text))
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _load(name: str) -> Any:
    """The click command (or group) `name`, its module imported now: modules register their
    commands on `app` (or a sub-app they add with `app.add_typer`) when imported."""
    importlib.import_module(f"anima_pipeline.cli.{COMMANDS[name].module}")
    short, markup = app.pretty_exceptions_short, app.rich_markup_mode
    for info in app.registered_commands:
        if info.name == name:
            return get_command_from_info(info, pretty_exceptions_short=short, rich_markup_mode=markup)
    for group in app.registered_groups:
        if group.name == name:
            return get_group_from_info(
                group,
                pretty_exceptions_short=short,
                rich_markup_mode=markup,
                suggest_commands=app.suggest_commands,
            )
    raise InternalError(f"anima_pipeline.cli.{COMMANDS[name].module} registers no command {name!r}")


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
    cls=LazyGroup,
    **HELP,
)
# registered on `app` by cli/store.py, which holds its commands (a group built at start-up
# would be empty: its module is not imported yet)
db_app = typer.Typer(help="The memory database: migrate, stop the embedded server.", **HELP)


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
