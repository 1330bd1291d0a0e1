"""The package ships no failpoint (docs/ordering.md, "Fault points"): night/failpoints.py
finds no hook in a normal process, and finds testkit's in a process started with
`faults.env`; the hook fires only where its spec matches."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from anima_pipeline.night import failpoints
from testkit import faults

PACKAGE = Path(failpoints.__file__).resolve().parents[1]
PROBE = "from anima_pipeline.night import failpoints; print(type(failpoints.hook()).__name__)"


def test_no_hook_is_installed_and_the_package_reads_no_fault_variable() -> None:
    failpoints.hook.cache_clear()
    assert failpoints.hook() is None
    failpoints.reached("before_step", day=date(2026, 12, 2), anima_id="kai", step="dreams/journal")
    mentions = [p.name for p in PACKAGE.rglob("*.py") if faults.ENV in p.read_text(encoding="utf-8")]
    assert mentions == []


@pytest.mark.processes  # a fresh interpreter is the point
def test_a_process_started_with_faults_env_has_testkits_hook() -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    plain = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=faults.REPO, env=env
    )
    assert plain.stdout.strip() == "NoneType", plain.stderr
    env |= faults.env("action=fail,at=in_step")
    hooked = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, cwd=faults.REPO, env=env
    )
    assert hooked.stdout.strip() == "Faults", hooked.stderr


def test_the_hook_fires_where_its_spec_matches(monkeypatch: pytest.MonkeyPatch) -> None:
    day = date(2026, 12, 2)
    faults.install(monkeypatch, "action=fail,at=in_step,step=semantic_memory/merged|dreams/journal,anima=kai")
    failpoints.reached("in_step", day=day, anima_id="yue", step="dreams/journal")  # another anima
    failpoints.reached("before_step", day=day, anima_id="kai", step="dreams/journal")  # another point
    with pytest.raises(faults.FaultInjected, match="in_step of dreams/journal for kai"):
        failpoints.reached("in_step", day=day, anima_id="kai", step="dreams/journal")
    faults.install(monkeypatch, "")
    failpoints.reached("in_step", day=day, anima_id="kai", step="dreams/journal")
