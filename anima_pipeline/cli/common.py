"""What every command shares: the consoles, settings and store opening, errors and progress bars.

Every command opens the store the same way (ANIMA_DATABASE_URL, else the embedded server
under ANIMA_HOME) so what works in the demo works against a real server.

Errors have one path (`exit_for`, called by cli/app.py for every command): an error of the
package prints one line, ``label: message`` (its message names the place and the fix), and
the command exits with the error's `exit_code`; a driver failure is the store's error first
(store/driver_errors.py); anything else is a bug, whose traceback goes to ANIMA_HOME/logs/cli.log
while one line says so. A command refuses its own arguments with `fail`.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal, NoReturn, overload

import typer

from anima_pipeline.config import Settings, get_settings
from anima_pipeline.core.errors import AnimaError

if TYPE_CHECKING:  # rich only when something is drawn: recall's text and --json print without it
    from rich.console import Console
    from rich.progress import Progress

    from anima_pipeline.store.db import Database, OneConnection


@cache
def _stdout_console() -> Console:
    from rich.console import Console

    # emoji=False: rich would turn "archive.jsonl:100: ..." into "archive.jsonl💯 ..."; piped
    # output gets a wide table instead of rich's 80-column default.
    return Console(emoji=False, width=None if sys.stdout.isatty() else 150)


@cache
def _stderr_console() -> Console:
    from rich.console import Console

    # errors are not wrapped, so a long file:line stays on one line for copying
    return Console(stderr=True, emoji=False, soft_wrap=True)


def __getattr__(name: str) -> Console:
    """`console` and `err_console`, made on first use (PEP 562): importing rich costs a command
    that prints without it (recall) about 15 ms of its start."""
    if name == "console":
        return _stdout_console()
    if name == "err_console":
        return _stderr_console()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def escape(text: str) -> str:
    """rich's markup escape, imported when a message is printed."""
    from rich.markup import escape

    return escape(text)


DECLINED_WORDS = 160  # characters of the model's words (or the cause) on a declined line


def declined_line(day: object, anima_id: str, step: str, cause: str, said: str) -> str:
    """One declined step as `anima sleep` and `anima status` print it: a declined step is done
    (it never fails a night) but wrote nothing, which the counts alone cannot tell from a quiet
    one (docs/ordering.md, "Restraint")."""
    said = said if len(said) <= DECLINED_WORDS else said[: DECLINED_WORDS - 1] + "…"
    return f"declined: {day} {escape(anima_id)} {step} ({escape(cause)})" + (
        f": {escape(said)}" if said else ""
    )


def settings() -> Settings:
    """The process's settings; a bad value is a ConfigError (exit 2, naming the variable)."""
    return get_settings()


@overload
def open_store(*, read_only: Literal[True]) -> OneConnection: ...
@overload
def open_store(*, read_only: Literal[False] = False) -> Database: ...
def open_store(*, read_only: bool = False) -> Database | OneConnection:
    """The store; `read_only` commands (status, recall, export) never migrate it and exit 1
    naming the pending migrations instead. They run once and go: one plain connection
    (store.db.OneConnection) rather than a pool. A store that cannot be opened is a store
    error (exit 1)."""
    from anima_pipeline.store.db import open_database, open_read_only

    return open_read_only(settings()) if read_only else open_database(settings())


def require_animas(animas) -> None:
    """UnknownAnima (exit 2) naming the unknown ones when any of `animas` has nothing in the store."""
    from anima_pipeline.store.animas import require_animas as check

    if not animas:
        return
    db = open_store()
    try:
        with db.transaction() as conn:
            check(conn, animas)
    finally:
        db.close()


def anima_ids(value: str | list[str] | None) -> str | list[str] | None:
    """The typer callback of every --anima option: an id the other doors would refuse
    (validation.AnimaId) is a usage error naming it (exit 2), before the store sees it."""
    from anima_pipeline.core.validation import anima_id_problem

    for v in [value] if isinstance(value, str) else value or []:
        if problem := anima_id_problem(v):
            raise typer.BadParameter(f"{v[:80]!r}: an anima id {problem}")
    return value


def require_anima_or_new(anima: str, new: bool) -> None:
    """`anima keys create` / `anima mcp`: an unknown anima exits 2 naming the known ones (a
    typo would hand an agent an empty memory), unless --new says it has nothing stored yet."""
    from anima_pipeline.core.validation import anima_id_problem

    if not new:
        from anima_pipeline.store.animas import UnknownAnima

        try:
            require_animas([anima])
        except UnknownAnima as exc:  # the way out for an agent that has nothing stored yet
            fail(f"{exc}; a new agent: add --new", 2)
    elif problem := anima_id_problem(anima):
        fail(f"--anima {anima[:80]!r}: an anima id {problem}", 2)


NEW_ANIMA_HELP = "The anima has nothing in the store yet (a new agent): skip the unknown-anima refusal."


@cache
def progress_console() -> Console:
    """A console on a duplicate of the terminal's stderr, taken before any Dagster run: while a
    step executes, Dagster's compute-log capture points fd 2 at a file (and `tail`s it back),
    so a console on sys.stderr sees no terminal there and Rich draws nothing until the step
    ends: a range run is one step, hence the bar frozen at 0 (clock included) and then a jump
    to the end. The duplicate keeps pointing at the terminal (and keeps the bar out of the
    run's captured logs)."""
    try:
        stream = os.fdopen(os.dup(sys.stderr.fileno()), "w", buffering=1, encoding="utf-8")
    except (AttributeError, OSError, ValueError):  # no real stderr (embedded, tests in-process)
        return _stderr_console()
    from rich.console import Console

    return Console(file=stream, emoji=False, soft_wrap=True)


def progress_bar() -> Progress:
    """Description, bar, n/N, elapsed and ETA, drawn on the terminal (see progress_console).
    The counts and clocks never give way: the description is cut (with an ellipsis) to what
    the console leaves it, the bar shortens, and under 70 columns the ETA is dropped."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        ProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )
    from rich.table import Column

    console = progress_console()
    width = console.width
    bar = 40 if width >= 120 else 20 if width >= 90 else 10
    with_eta = width >= 70
    # n/N up to 7 digits each, elapsed h:mm:ss, "eta h:mm:ss", the bar, one space between columns
    fixed = 15 + 7 + (12 if with_eta else 0) + bar + (5 if with_eta else 3)
    columns: list[ProgressColumn | str] = [
        TextColumn(
            "{task.description}",
            table_column=Column(no_wrap=True, overflow="ellipsis", max_width=max(8, width - fixed)),
        ),
        BarColumn(bar_width=bar),
        MofNCompleteColumn(table_column=Column(no_wrap=True, min_width=3)),
        TimeElapsedColumn(table_column=Column(no_wrap=True, min_width=7)),
    ]
    if with_eta:
        columns += [
            TextColumn("eta", table_column=Column(no_wrap=True)),
            TimeRemainingColumn(table_column=Column(no_wrap=True, min_width=7)),
        ]
    return Progress(*columns, console=console, transient=True)


def progress_line(progress: Progress, task) -> None:
    """Where no terminal is drawn on (a pipe, a CI log), one line per step forward instead."""
    if progress.console.is_terminal:
        return
    t = progress.tasks[task]
    left = t.time_remaining
    eta = f", eta {left:.0f} s" if left is not None else ""
    progress.console.print(f"{t.description}: {t.completed:.0f}/{t.total:.0f}, {t.elapsed or 0:.0f} s{eta}")


# where no terminal is drawn on, a long command prints a line at least this often (seconds)
ALIVE_EVERY_S = 60.0


@contextmanager
def alive_lines(progress: Progress) -> Iterator[None]:
    """Where no terminal is drawn on (output to a file, a CI log): each unfinished task's
    line (progress_line) at least every ALIVE_EVERY_S, from a thread, so a phase that runs
    for minutes (a night with a model, thousands of questions) shows it is alive. On a
    terminal the bar does that."""
    if progress.console.is_terminal:
        yield
        return
    import threading

    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(ALIVE_EVERY_S):
            for t in list(progress.tasks):
                if not t.finished:
                    progress_line(progress, t.id)

    thread = threading.Thread(target=beat, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def advancing(records, progress: Progress, task):
    for rec in records:
        progress.advance(task)
        yield rec


def only_anima(conn, anima: str | None = None) -> str:
    """`anima` when it is known (exit 2 otherwise), else the only anima of the store."""
    from anima_pipeline.store.sleep_state import animas_with_conversations

    if anima is not None:
        from anima_pipeline.store.animas import require_animas as check

        check(conn, [anima])
        return anima
    animas = animas_with_conversations(conn)
    if len(animas) != 1:
        fail(f"choose an anima with --anima (known: {', '.join(animas) or 'none'})", 2)
    return animas[0]


def parse_day(option: str, value: str):
    """The local day an option names (core/validation.py's day: YYYY-MM-DD only, as the HTTP
    routes read it), or exit 2 naming the option and the format."""
    from anima_pipeline.core.validation import parse_day as day_of

    try:
        return day_of(value)
    except ValueError:
        fail(f"{option}: expected a day as YYYY-MM-DD (e.g. 2026-11-28), got {value!r}", 2)


class CommandRefused(AnimaError):
    """A command's refusal of its own arguments or outcome (`fail`), with the exit code it chose."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def fail(message: str, code: int = 1) -> NoReturn:
    raise CommandRefused(message, code)


def exit_for(exc: Exception, command: str) -> int:
    """One line on stderr for what stopped `command`, and the code it exits with."""
    if not isinstance(exc, AnimaError):
        from anima_pipeline.store.driver_errors import store_failure

        exc = store_failure(exc) or exc
    if isinstance(exc, AnimaError):
        _stderr_console().print(f"[red]{exc.label}:[/red] {escape(str(exc))}")
        return exc.exit_code
    where = crash_log(exc, command)
    _stderr_console().print(
        f"[red]error:[/red] unexpected {type(exc).__name__} (a bug): "
        + (f"the traceback is in {where}" if where else escape(str(exc)))
    )
    return 1


def crash_log(exc: BaseException, command: str) -> Path | None:
    """Append `exc` with its traceback to ANIMA_HOME/logs/cli.log; the file, or None when there
    is none to write (no usable settings, a read-only home)."""
    try:
        folder = get_settings().log_dir
        folder.mkdir(parents=True, exist_ok=True)
        handler = logging.FileHandler(folder / "cli.log", encoding="utf-8")
    except (AnimaError, OSError):
        return None
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    log = logging.getLogger(f"{__name__}.crash")
    log.propagate = False  # the traceback goes to the file only, not to the terminal
    log.addHandler(handler)
    try:
        log.error("unexpected error in `anima %s`", command, exc_info=exc)
    finally:
        log.removeHandler(handler)
        handler.close()
    return Path(handler.baseFilename)


def per_anima_night(cost_usd: float, llm_calls: int, animas: int) -> str:
    """The dollars of one anima-night in a nights table: "—" when no model was called (the
    offline engine) or no anima talked (docs/cost.md)."""
    if not llm_calls or not animas:
        return "—"
    return f"{cost_usd / animas:.4f}"
