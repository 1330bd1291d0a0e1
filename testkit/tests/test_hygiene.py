"""The process-hygiene check (testkit/hygiene.py) fails the test that leaves the process changed,
names what it changed, and puts it back, so the next test starts clean."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = 'pytest_plugins = ["testkit.hygiene"]\n'


def _run(pytester: pytest.Pytester, body: str, *, subprocess: bool = False) -> pytest.RunResult:
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_inner=body)
    args = ("-p", "no:randomly", "-p", "no:xdist", "-p", "no:cacheprovider")
    # what the inner tests leave open must die with their own process, not linger in this one
    return pytester.runpytest_subprocess(*args) if subprocess else pytester.runpytest_inprocess(*args)


def test_a_test_that_leaves_sigterm_ignored_fails_and_sigterm_is_put_back(pytester: pytest.Pytester) -> None:
    before = signal.getsignal(signal.SIGTERM)
    result = _run(
        pytester,
        "import signal\n"
        "def test_ignores_sigterm():\n"
        "    signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "def test_after_it():\n"
        "    assert signal.getsignal(signal.SIGTERM) != signal.SIG_IGN\n",
    )
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*the test left the process changed*", "*signal SIGTERM: * became ignored*"])
    assert signal.getsignal(signal.SIGTERM) == before


def test_an_environment_variable_and_the_working_directory_left_changed_fail(
    pytester: pytest.Pytester,
) -> None:
    result = _run(
        pytester,
        "import os\n"
        "def test_sets_a_variable():\n"
        "    os.environ['ANIMA_LEFT_BEHIND'] = '1'\n"
        "def test_moves(tmp_path):\n"
        "    os.chdir(tmp_path)\n"
        "def test_clean():\n"
        "    assert 'ANIMA_LEFT_BEHIND' not in os.environ\n",
    )
    result.assert_outcomes(passed=3, errors=2)
    result.stdout.fnmatch_lines(["*environment ANIMA_LEFT_BEHIND: None became '1'*"])
    result.stdout.fnmatch_lines(["*working directory: * became *"])


def test_a_child_process_and_a_listening_socket_left_behind_fail(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[2]))  # testkit, for the inner run
    result = _run(
        pytester,
        "import socket, subprocess, sys\n"
        "KEPT = []\n"
        "def test_starts_a_child():\n"
        "    KEPT.append(subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']))\n"
        "def test_opens_a_server():\n"
        "    s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(); KEPT.append(s)\n",
        subprocess=True,
    )
    result.assert_outcomes(passed=2, errors=2)
    result.stdout.fnmatch_lines(["*child process * still running*", "*a server still listening on port *"])


def test_a_clean_test_passes(pytester: pytest.Pytester) -> None:
    result = _run(
        pytester, "import os\ndef test_reads(monkeypatch):\n    monkeypatch.setenv('X_ANIMA', '1')\n"
    )
    result.assert_outcomes(passed=1)
