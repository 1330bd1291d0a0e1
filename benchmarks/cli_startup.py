"""Start-up of the `anima` command: --help, recall (lexical and with the encoder) and status, against `python -c pass`.

Run:  ANIMA_DATABASE_URL=... .venv/bin/python -m benchmarks.cli_startup [--runs 10]
          [--baseline DIR] [--query TEXT] [--anima ID]

Each command is a new process, timed from spawn to exit (wall clock), N times, the commands
taking turns so that the machine's load falls on all of them alike; prints the median and
the fastest run of each, and the median's ratio to `python -c pass` (the interpreter alone).
The store is ANIMA_DATABASE_URL (else the embedded one under ANIMA_HOME) and must hold an
anima: `anima demo` makes one. `--baseline DIR` runs the same commands from another checkout
of the package (e.g. `git worktree add /tmp/before <commit>`) in the same rounds, for a
before/after in one run. Every command runs with ANIMA_EMBEDDER=none (lexical), and `recall`
once more with the encoder ("recall, encoder": ANIMA_EMBEDDER as set, else the default, the
local all-MiniLM-L6-v2; the store must hold vectors, as the demo's does, and its first run, a
warm-up, unpacks the model into ANIMA_HOME's cache); the ratio of the two recalls is printed.
The commands run with bytecode caches, as an installed package has them (pip compiles them;
a checkout writes __pycache__ on its first run): in a temporary PYTHONPYCACHEPREFIX, filled
by the warm-up, so no checkout is written to. An environment with PYTHONDONTWRITEBYTECODE=1
(this machine's) would otherwise compile every module of the package from source on every
run, about 60 ms of recall's start; `--no-bytecode-cache` times it so.
One run, no assertion: the figures depend on the machine's load (printed)."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# `anima ARGS` from the package in SRC rather than the installed one (the editable install's
# finder comes first on sys.meta_path, so it is taken out): for --baseline
_FROM_SOURCE = """
import runpy, sys
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f)]
sys.path.insert(0, sys.argv[1])
sys.argv = ["anima", *sys.argv[2:]]
runpy.run_module("anima_pipeline.cli", run_name="__main__")
"""


def _anima(src: Path | None) -> list[str]:
    if src is None:
        return [sys.executable, "-m", "anima_pipeline.cli"]
    return [sys.executable, "-c", _FROM_SOURCE, str(src)]


def _time(cmd: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[-4:])} failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10, help="runs of each command (median)")
    parser.add_argument("--baseline", type=Path, help="another checkout's root, timed in the same rounds")
    parser.add_argument("--query", default="what does Lin Wei like to eat?")
    parser.add_argument("--anima", default=None, help="the anima to recall for (default: the only one)")
    parser.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="keep the environment's PYTHONDONTWRITEBYTECODE (compile from source when it is set)",
    )
    args = parser.parse_args(argv)
    env = {**os.environ, "ANIMA_EMBEDDER": "none"}
    with tempfile.TemporaryDirectory(prefix="cli_startup_pyc_") as pycache:
        if not args.no_bytecode_cache:
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            env["PYTHONPYCACHEPREFIX"] = pycache
        return _run(args, env)


def _run(args: argparse.Namespace, env: dict[str, str]) -> int:
    recall = ["recall", args.query, *(["--anima", args.anima] if args.anima else [])]
    # "recall, encoder": the embedder as configured (ANIMA_EMBEDDER as set, else the default)
    encoder = {k: v for k, v in env.items() if k != "ANIMA_EMBEDDER"}
    if os.environ.get("ANIMA_EMBEDDER"):
        encoder["ANIMA_EMBEDDER"] = os.environ["ANIMA_EMBEDDER"]
    cases = {
        "--help": (["--help"], env),
        "recall --help": (["recall", "--help"], env),
        "recall": (recall, env),
        "recall, encoder": (recall, encoder),
        "status": (["status"], env),
    }
    sources: dict[str, Path | None] = {"now": None}
    if args.baseline is not None:
        sources = {"before": args.baseline.resolve(), **sources}
    commands: dict[tuple[str, str], tuple[list[str], dict[str, str]]] = {
        ("", "python -c pass"): ([sys.executable, "-c", "pass"], env)
    }
    for label, src in sources.items():
        for case, (cli_args, case_env) in cases.items():
            commands[(label, case)] = ([*_anima(src), *cli_args], case_env)
    for cmd, cmd_env in commands.values():  # warm-up: the store's caches, the .pyc files, and a failure now
        _time(cmd, cmd_env)
    times: dict[tuple[str, str], list[float]] = {key: [] for key in commands}
    for _ in range(args.runs):
        for key, (cmd, cmd_env) in commands.items():
            times[key].append(_time(cmd, cmd_env))
    bare = statistics.median(times[("", "python -c pass")])
    print(f"{'command':28} {'median':>9} {'fastest':>9} {'x pass':>7}")
    for (label, case), values in times.items():
        median = statistics.median(values)
        name = f"{label} anima {case}".strip() if label else case
        print(f"{name:28} {median * 1000:7.0f} ms {min(values) * 1000:6.0f} ms {median / bare:6.1f}x")
    if args.baseline is not None:
        for case in cases:
            before, now = (statistics.median(times[(s, case)]) for s in ("before", "now"))
            print(f"anima {case}: {now / before:.2f} of before")
    for label in sources:
        lexical, encoder = (statistics.median(times[(label, c)]) for c in ("recall", "recall, encoder"))
        print(f"{label} anima recall with the encoder / lexical: {encoder / lexical:.2f}x")
    caches = "none (compiled from source)" if "PYTHONDONTWRITEBYTECODE" in env else "cached"
    print(
        f"{args.runs} runs each; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; bytecode {caches}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
