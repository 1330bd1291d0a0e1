"""Fault points for the kill tests (anima_pipeline_tests/test_faults.py): a night can be made
to hang, or fail, at a named point so a test can kill -9 the process there deterministically.

Off unless the environment variable ANIMA_FAULT is set (a test sets it on the subprocess it
kills). Its value is comma-separated `key=value` pairs; a key left out matches anything:

    action=hang|fail|pause:N   hang: write ANIMA_FAULT_READY (a file path) then sleep until
                       killed; fail: raise FaultInjected (a step failure like any other);
                       pause:N: write ANIMA_FAULT_READY, wait N seconds, then go on
    at=before_step     a step of the night is about to open its transaction
    at=in_step         a step wrote everything, inside its transaction, before the commit
    at=night_end       every step of an anima's night is over, the night not yet marked done
    step=<step key>, day=<YYYY-MM-DD>, anima=<anima id>   (a|b: either)

e.g. ANIMA_FAULT="action=hang,at=in_step,step=semantic_memory/merged,day=2026-12-05,anima=kai".
"""

from __future__ import annotations

import os
import time
from datetime import date
from pathlib import Path

from anima_pipeline.core.errors import NightError

ENV = "ANIMA_FAULT"
READY_ENV = "ANIMA_FAULT_READY"
POINTS = ("before_step", "in_step", "night_end")


class FaultInjected(NightError):
    """Raised at a fault point with action=fail."""


def point(at: str, *, day: date, anima_id: str, step: str = "") -> None:
    spec = os.environ.get(ENV)
    if not spec:
        return
    want = dict(part.split("=", 1) for part in spec.split(",") if "=" in part)
    here = {"at": at, "step": step, "day": day.isoformat(), "anima": anima_id}
    if any(v not in want.get(k, v).split("|") for k, v in here.items()):
        return
    if want.get("action") == "fail":
        raise FaultInjected(f"fault injected at {at} of {step or 'the night'} for {anima_id} on {day}")
    ready = os.environ.get(READY_ENV)
    if ready:
        Path(ready).write_text(f"{at} {step} {day} {anima_id} pid {os.getpid()}\n")
    if want.get("action", "").startswith("pause"):  # pause:N — wait N seconds, then go on
        time.sleep(float(want["action"].partition(":")[2] or 5))
        return
    while True:  # hang until killed
        time.sleep(3600)
