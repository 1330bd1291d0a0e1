"""The CLI's one error path (cli/common.py `exit_for`, called by cli/app.py for every command):
an error of the package is one line, `label: message`, and the exit code it carries; a driver
failure is the store's error; anything else is a bug, whose traceback goes to the log while
one line says where."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from anima_pipeline import cli
from anima_pipeline.config import get_settings
from anima_pipeline.core.errors import ConfigError, NotFound


@pytest.fixture
def status(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator:
    """`anima status` in-process, its store opening raising `exc`."""
    monkeypatch.setenv("ANIMA_HOME", str(tmp_path))
    monkeypatch.setenv("ANIMA_DATABASE_URL", "postgresql://nobody@127.0.0.1:1/none")
    get_settings.cache_clear()

    def run(exc: BaseException):
        def open_read_only(settings):
            raise exc

        monkeypatch.setattr("anima_pipeline.store.db.open_read_only", open_read_only)
        return CliRunner().invoke(cli.app, ["status"])

    yield run
    get_settings.cache_clear()


@pytest.mark.parametrize(
    ("exc", "code", "line"),
    [
        (NotFound("memory", "f-12"), 2, "error: memory f-12 does not exist"),
        (
            ConfigError("ANIMA_TIMEZONE='Mars/Base': unknown time zone"),
            2,
            "configuration error: ANIMA_TIMEZONE=",
        ),
        (
            psycopg.OperationalError('connection to server at "127.0.0.1", port 1 failed'),
            1,
            "store error: connection",
        ),
        (
            psycopg.errors.UndefinedTable("relation x does not exist"),
            1,
            "store error: the store refused a statement",
        ),
    ],
    ids=["input", "config", "lost-store", "refused-statement"],
)
def test_an_error_is_one_line_and_its_own_exit_code(status, exc: BaseException, code: int, line: str) -> None:
    result = status(exc)
    assert result.exit_code == code, result.output
    assert result.stderr.splitlines() == [result.stderr.strip()] and result.stderr.startswith(line), (
        result.stderr
    )
    assert isinstance(result.exception, SystemExit)  # no traceback


def test_an_unexpected_error_goes_to_the_log_with_its_traceback(status, tmp_path: Path) -> None:
    result = status(ZeroDivisionError("a bug"))
    assert result.exit_code == 1 and isinstance(result.exception, SystemExit)
    log = tmp_path / "logs" / "cli.log"
    assert result.stderr.strip().splitlines() == [
        f"error: unexpected ZeroDivisionError (a bug): the traceback is in {log}"
    ]
    text = log.read_text()
    assert (
        "unexpected error in `anima status`" in text
        and "Traceback" in text
        and "ZeroDivisionError: a bug" in text
    )
