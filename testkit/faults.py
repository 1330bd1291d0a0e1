"""Failpoints for the kill tests (anima_pipeline_tests/e2e/test_faults.py and others): a night
can be made to hang, pause or fail at a named point, so a test can kill -9 the process there
deterministically. The package's one seam is anima_pipeline/night/failpoints.py; this is the
hook it calls, installed as an entry point only in the processes a test starts with `env`
(their path holds testkit/failpoints/, a dist-info naming FROM_ENVIRONMENT), or in the test's
own process (and the worker processes it spawns) with `install`.

A spec is comma-separated `key=value` pairs; a key left out matches anything:

    action=hang|fail|pause:N   hang: write the ready file then sleep until killed; fail: raise
                       FaultInjected (a step failure like any other); pause:N: write the
                       ready file, wait N seconds, then go on
    at=before_step     a step of the night is about to open its transaction
    at=in_step         a step wrote everything, inside its transaction, before the commit
    at=night_end       every step of an anima's night is over, the night not yet marked done
    step=<step key>, day=<YYYY-MM-DD>, anima=<anima id>   (a|b: either)

e.g. "action=hang,at=in_step,step=semantic_memory/merged,day=2026-12-05,anima=kai".
"""

from __future__ import annotations

import os
import time
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from anima_pipeline.core.errors import NightError
from anima_pipeline.night import failpoints

if TYPE_CHECKING:  # only `install` takes it; the hook runs in `anima` processes without pytest
    import pytest

ENV = "ANIMA_FAULT"  # the spec, in a process started with `env`
READY_ENV = "ANIMA_FAULT_READY"  # the file written when a hang or pause point is reached
POINTS = ("before_step", "in_step", "night_end")
REPO = Path(__file__).resolve().parents[1]
HOOK_DIR = Path(__file__).resolve().parent / "failpoints"  # the entry point's dist-info


class FaultInjected(NightError):
    """Raised at a failpoint with action=fail."""


class Faults:
    """The hook of one spec (see the module docstring)."""

    def __init__(self, spec: str, ready: str | None = None) -> None:
        self.want = dict(part.split("=", 1) for part in spec.split(",") if "=" in part) if spec else {}
        self.ready = ready

    def __call__(self, at: str, *, day: date, anima_id: str, step: str) -> None:
        if not self.want:
            return
        here = {"at": at, "step": step, "day": day.isoformat(), "anima": anima_id}
        if any(v not in self.want.get(k, v).split("|") for k, v in here.items()):
            return
        action = self.want.get("action", "")
        if action == "fail":
            raise FaultInjected(f"fault injected at {at} of {step or 'the night'} for {anima_id} on {day}")
        if self.ready:
            Path(self.ready).write_text(f"{at} {step} {day} {anima_id} pid {os.getpid()}\n")
        if action.startswith("pause"):  # pause:N — wait N seconds, then go on
            time.sleep(float(action.partition(":")[2] or 5))
            return
        while True:  # hang until killed
            time.sleep(3600)


# The entry point's hook: the spec of the process's environment, read once, when the night
# first reaches a point (night/failpoints.py loads this module then).
FROM_ENVIRONMENT = Faults(os.environ.get(ENV, ""), os.environ.get(READY_ENV))


def env(spec: str, ready: Path | None = None) -> dict[str, str]:
    """The variables that put `spec` into an `anima` process under test (and the worker
    processes it spawns): the spec, the ready file, and the hook's entry point on the path."""
    found = {ENV: spec, "PYTHONPATH": f"{REPO}{os.pathsep}{HOOK_DIR}"}
    return found | ({READY_ENV: str(ready)} if ready else {})


def install(monkeypatch: pytest.MonkeyPatch, spec: str) -> None:
    """`spec` for the nights this process runs and the worker processes it spawns (they inherit
    its environment and its sys.path, which then holds the entry point), until the test ends or
    the next install."""
    monkeypatch.setenv(ENV, spec)
    monkeypatch.delenv(READY_ENV, raising=False)
    monkeypatch.syspath_prepend(str(HOOK_DIR))
    hook = Faults(spec)
    monkeypatch.setattr(failpoints, "hook", lambda: hook)
