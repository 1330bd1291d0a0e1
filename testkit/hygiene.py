"""What a test must leave as it found it: the process's signal dispositions, its environment,
its working directory, its child processes and its listening sockets (docs/testing.md).

A signal disposition left changed is inherited by every process started afterwards (an ignored
SIGTERM makes `terminate()` of a later test's child do nothing), and an environment variable or
a working directory left changed makes a later test depend on the order the suite runs in. The
root conftest captures this state around every test, puts it back, and fails the test that
changed it, naming what it changed. Logging's configuration is put back without failing: third
parties (Dagster, uvicorn, the CLI's --log-level) change logger levels as a matter of course.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

# pytest itself sets this one per phase
_PYTEST_VARIABLES = frozenset({"PYTEST_CURRENT_TEST"})
_SIGNALS = tuple(s for s in signal.Signals if s not in (signal.SIGKILL, signal.SIGSTOP))
# helpers multiprocessing starts once and keeps for the life of the process, by design
_PROCESS_SINGLETONS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")


@contextmanager
def signals_kept() -> Iterator[None]:
    """Dagster's in-process APIs (`dg.materialize`, a schedule's `evaluate_tick`) leave SIGTERM
    set to SIGINT's disposition when they end; a test that calls them wraps the call in this, which
    puts SIGINT and SIGTERM back as they were (the `anima` commands do the same, see
    defs/night/launch.py `cancel_on_signals`)."""
    kept = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in kept.items():
            if handler is not None:
                signal.signal(s, handler)


@pytest.fixture(autouse=True)
def process_left_as_found(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail the test that leaves a signal disposition, an environment variable, the working
    directory, a child process or a listening socket changed, after putting it back."""
    before = capture()
    yield
    after = capture()
    changed = differences(before, after)
    restore(before, after)
    if changed:
        pytest.fail("the test left the process changed:\n  " + "\n  ".join(changed), pytrace=False)


@dataclass(frozen=True)
class LoggerState:
    level: int
    propagate: bool
    disabled: bool
    handlers: tuple[logging.Handler, ...]


@dataclass(frozen=True)
class ProcessState:
    signals: dict[signal.Signals, object]
    environ: dict[str, str]
    cwd: str
    children: frozenset[int]
    listening: frozenset[int]
    loggers: dict[str, LoggerState]


def capture() -> ProcessState:
    """This process's state as a test may change it."""
    return ProcessState(
        signals={s: signal.getsignal(s) for s in _SIGNALS},
        environ={k: v for k, v in os.environ.items() if k not in _PYTEST_VARIABLES},
        cwd=os.getcwd(),
        children=live_children(),
        listening=frozenset(listening_sockets()),
        loggers=_loggers(),
    )


def differences(before: ProcessState, after: ProcessState) -> list[str]:
    """What changed between two captures, one line each (logging excluded, see the module)."""
    found = [
        f"signal {s.name}: {_disposition(before.signals[s])} became {_disposition(after.signals[s])}"
        for s in _SIGNALS
        if after.signals[s] != before.signals[s]
    ]
    for name in sorted(before.environ.keys() | after.environ.keys()):
        if before.environ.get(name) != after.environ.get(name):
            was, now = before.environ.get(name), after.environ.get(name)
            found.append(f"environment {name}: {was!r} became {now!r}")
    if after.cwd != before.cwd:
        found.append(f"working directory: {before.cwd} became {after.cwd}")
    found.extend(
        f"child process {pid} ({_command(pid)}) still running"
        for pid in sorted(after.children - before.children)
    )
    ports = listening_sockets()
    found.extend(
        f"a server still listening on port {ports.get(inode, '?')}"
        for inode in sorted(after.listening - before.listening)
    )
    return found


def restore(before: ProcessState, after: ProcessState) -> None:
    """Put back what a test changed: signals, environment, working directory and logging; stop
    the children it left running (sockets cannot be closed from outside their owner)."""
    for s in _SIGNALS:
        if after.signals[s] != before.signals[s] and before.signals[s] is not None:
            signal.signal(s, before.signals[s])  # type: ignore[arg-type]
    for name in after.environ.keys() - before.environ.keys():
        os.environ.pop(name, None)
    for name, value in before.environ.items():
        if os.environ.get(name) != value:
            os.environ[name] = value
    if os.getcwd() != before.cwd:
        os.chdir(before.cwd)
    for pid in after.children - before.children:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
    for name, state in before.loggers.items():
        logger = logging.getLogger(name) if name else logging.getLogger()
        logger.setLevel(state.level)
        logger.propagate = state.propagate
        logger.disabled = state.disabled
        logger.handlers[:] = state.handlers
    for name in _loggers().keys() - before.loggers.keys():
        logging.getLogger(name).setLevel(logging.NOTSET)


def live_children() -> frozenset[int]:
    """The pids of this process's children that have not exited (zombies left out)."""
    pids: set[int] = set()
    for task in Path(f"/proc/{os.getpid()}/task").glob("*/children"):
        try:
            pids.update(int(p) for p in task.read_text().split())
        except OSError:
            continue
    return frozenset(
        p
        for p in pids
        if _state(p) not in ("Z", "X", None) and not any(n in _command(p) for n in _PROCESS_SINGLETONS)
    )


def listening_sockets() -> dict[int, int]:
    """The inodes of TCP sockets in LISTEN that this process holds open, with their ports."""
    held: set[int] = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            held.add(int(target[8:-1]))
    ports: dict[int, int] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 9 and fields[3] == "0A" and int(fields[9]) in held:
                ports[int(fields[9])] = int(fields[1].rsplit(":", 1)[1], 16)
    return ports


def _loggers() -> dict[str, LoggerState]:
    names = ["", *(n for n, v in logging.root.manager.loggerDict.items() if isinstance(v, logging.Logger))]
    states = {}
    for name in names:
        logger = logging.getLogger(name) if name else logging.getLogger()
        states[name] = LoggerState(logger.level, logger.propagate, logger.disabled, tuple(logger.handlers))
    return states


def _state(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def _command(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline")
            .read_bytes()
            .replace(b"\0", b" ")
            .decode(errors="replace")
            .strip()[:120]
        )
    except OSError:
        return "?"


def _disposition(handler: object) -> str:
    if handler == signal.SIG_IGN:
        return "ignored"
    if handler == signal.SIG_DFL:
        return "default"
    if handler is None:
        return "not set from Python"
    return getattr(handler, "__qualname__", repr(handler))
