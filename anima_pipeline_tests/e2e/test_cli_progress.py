"""`anima sleep --from --to` shows its progress while the run goes: on a terminal the bar moves
night by night with an ETA (it used to stay at 0 until the run's one step ended: Dagster's
compute-log capture took stderr away from the terminal, see cli/common.progress_console), and
without a terminal one line per night."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import termios
import time
from pathlib import Path

from anima_pipeline_tests.conftest import CLI, REPO, cli_env, invoke_cli, run_cli

SAMPLE = REPO / "anima_pipeline" / "sample" / "week.archive.jsonl"


def test_a_30_night_range_moves_the_bar_night_by_night(db_url: str, tmp_path: Path) -> None:
    # 30 nights: three weeks of quiet days before the sample's week, then the week
    env = cli_env(tmp_path, db_url, ANIMA_START_DATE="2026-10-24")
    assert invoke_cli(["import", str(SAMPLE)], env).returncode == 0
    master, child = pty.openpty()
    fcntl.ioctl(child, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    proc = subprocess.Popen(
        [*CLI, "sleep", "--from", "2026-10-24", "--to", "2026-11-22"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=child,
    )
    os.close(child)
    chunks: list[tuple[float, bytes]] = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append((time.monotonic(), data))
    out, _ = proc.communicate(timeout=600)
    ended = time.monotonic()
    os.close(master)
    assert proc.returncode == 0, out.decode()[-2000:]

    # counts drawn while the run was still going (half a second or more before it ended). The
    # 21 quiet days run in bulk (docs/ordering.md), so on an idle machine the bar jumps over
    # them and moves night by night through the sample's week: at least three counts between
    # the first and the last, in increasing order, not a bar frozen at 0 that jumps to the end
    early_chunks = [d.decode(errors="replace") for t, d in chunks if t < ended - 0.5]
    drawn = [int(n) for text in early_chunks for n in re.findall(r"(?<!\d)(\d+)/30(?!\d)", text)]
    counts = set(drawn)  # (after colour codes: no \b)
    assert len(counts & set(range(1, 30))) >= 3, sorted(counts)
    assert drawn == sorted(drawn), drawn
    early = "".join(early_chunks)
    assert "night of 2026-1" in early and "eta" in early
    # ... and none of it went into the run's captured stderr (Dagster's compute logs)
    captured = list(Path(env["DAGSTER_HOME"]).glob("storage/*/compute_logs/*.err"))
    assert captured and not any("night of" in p.read_text(errors="replace") for p in captured)


def test_without_a_terminal_each_night_prints_a_line(db_url: str, tmp_path: Path) -> None:
    env = cli_env(tmp_path, db_url, ANIMA_START_DATE="2026-11-13")
    assert invoke_cli(["import", str(SAMPLE)], env).returncode == 0
    slept = run_cli(["sleep", "--from", "2026-11-13", "--to", "2026-11-17"], env)
    assert slept.returncode == 0, slept.stderr[-2000:]
    lines = re.findall(r"night of (\S+): (\d)/5, \d+ s", slept.stderr)
    assert [n for _, n in lines][-1:] == ["5"] and len(lines) >= 2, slept.stderr
    assert "eta" in slept.stderr
