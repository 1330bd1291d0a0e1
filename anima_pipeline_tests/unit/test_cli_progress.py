"""The CLI's progress (cli/common.py): the bar keeps its counts and clocks whole at any width
(the description gives way), and where no terminal is drawn on a long command prints a line at
least every ALIVE_EVERY_S."""

from __future__ import annotations

import io
import re
import time

import pytest
from rich.console import Console

from anima_pipeline.cli import common

DESCRIPTION = "embedding (local:all-MiniLM-L6-v2@53aa51172d14)"


def _drawn(monkeypatch: pytest.MonkeyPatch, width: int, total: int) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=True, color_system=None)
    monkeypatch.setattr(common, "progress_console", lambda: console)
    bar = common.progress_bar()
    task = bar.add_task(DESCRIPTION, total=total)
    bar.update(task, completed=187)
    console.print(bar.make_tasks_table(bar.tasks))
    return out.getvalue().rstrip("\n")


@pytest.mark.parametrize("width", [50, 60, 80, 100, 160])
@pytest.mark.parametrize("total", [1234, 1_234_567])
def test_the_bar_keeps_its_counts_and_clock_whole(
    monkeypatch: pytest.MonkeyPatch, width: int, total: int
) -> None:
    line = _drawn(monkeypatch, width, total)
    assert "\n" not in line and len(line) <= width, line
    assert f"187/{total} 0:00:00" in line, line  # was "187/1… 0:00:…" in 80 columns
    assert ("eta" in line) == (width >= 70), line  # narrow: the ETA is the column dropped
    assert line.startswith("embedding"), line


def test_without_a_terminal_a_line_comes_at_least_every_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.StringIO()
    console = Console(file=out, width=100, force_terminal=False)
    monkeypatch.setattr(common, "progress_console", lambda: console)
    monkeypatch.setattr(common, "ALIVE_EVERY_S", 0.05)
    with common.progress_bar() as bar, common.alive_lines(bar):
        task = bar.add_task("sleeping their days", total=3)
        bar.update(task, completed=1)
        time.sleep(0.4)  # one slow night: no advance, yet lines come
        bar.update(task, completed=3)
        time.sleep(0.15)  # finished: no more lines for it
    lines = [line for line in out.getvalue().splitlines() if line]
    assert len(lines) >= 3, lines
    assert all(re.fullmatch(r"sleeping their days: 1/3, \d+ s(, eta \d+ s)?", line) for line in lines), lines
