"""`dg dev` (webserver and daemon) on a given ANIMA_HOME / DAGSTER_HOME, for the benchmarks
and the browser check: started in its own process group, stopped by that group's id.

    with dagster_dev(env, log_path) as url:
        graphql(url, QUERY, variables)
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import requests

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dev_env(anima_home: Path, dagster_home: Path, **extra: str) -> dict[str, str]:
    """The environment of a `dg dev` on these homes: the project's venv active (dg checks it),
    this checkout first on the path, a runtime dir for libraries that want one."""
    from anima_pipeline.defs.instance import DAGSTER_YAML_PATH

    env = {
        **os.environ,
        "ANIMA_HOME": str(anima_home),
        "DAGSTER_HOME": str(dagster_home),
        "PYTHONPATH": str(REPO),
        "VIRTUAL_ENV": str(REPO / ".venv"),
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        **extra,
    }
    runtime = anima_home / "run"
    runtime.mkdir(parents=True, exist_ok=True, mode=0o700)
    env.setdefault("XDG_RUNTIME_DIR", str(runtime))
    # With DAGSTER_HOME set, Dagster reads $DAGSTER_HOME/dagster.yaml only: a link to the
    # project's one template (a user leaves DAGSTER_HOME unset and `dg dev` reads ./dagster.yaml)
    dagster_home.mkdir(parents=True, exist_ok=True)
    if not (dagster_home / "dagster.yaml").exists():
        (dagster_home / "dagster.yaml").symlink_to(DAGSTER_YAML_PATH)
    return env


# The daemon's loops wait DEFAULT_DAEMON_INTERVAL_SECONDS (30 s) between ticks, the backfill
# loop included, and no instance setting changes it (checked with Dagster 1.13.27: the
# `backfills:` settings are threads only). A sitecustomize on the daemon's path sets it.
_FAST_DAEMON = """\
from pathlib import Path as _Path

if b"dagster._daemon" in _Path("/proc/self/cmdline").read_bytes():
    import dagster._daemon.controller as _controller

    _controller.DEFAULT_DAEMON_INTERVAL_SECONDS = {seconds}
"""


def fast_daemon(env: dict[str, str], hook_dir: Path, seconds: int = 1) -> dict[str, str]:
    """`env` with the `dg dev` daemon (`python -m dagster._daemon run`) ticking every `seconds`
    instead of every 30: a test's backfill is picked up and finished within seconds. Tests
    only; the benchmarks measure what a user waits."""
    hook_dir.mkdir(parents=True, exist_ok=True)
    (hook_dir / "sitecustomize.py").write_text(_FAST_DAEMON.format(seconds=seconds))
    path = env.get("PYTHONPATH")
    return {**env, "PYTHONPATH": f"{hook_dir}{os.pathsep}{path}" if path else str(hook_dir)}


@contextmanager
def dagster_dev(env: dict[str, str], log_path: Path, timeout: float = 240) -> Iterator[str]:
    port = free_port()
    log = log_path.open("w")
    proc = subprocess.Popen(
        [str(BIN / "dg"), "dev", "-p", str(port), "-h", "127.0.0.1"],
        cwd=REPO,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own group (set -m): webserver, daemon, code servers
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"dg dev exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
            try:
                if requests.get(f"{url}/server_info", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"dg dev did not answer in {timeout:.0f} s:\n{log_path.read_text()[-3000:]}"
                )
            time.sleep(0.25)
        yield url
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C does: a clean shutdown
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        log.close()


def graphql(url: str, query: str, variables: dict | None = None) -> dict:
    response = requests.post(
        f"{url}/graphql", json={"query": query, "variables": variables or {}}, timeout=120
    )
    response.raise_for_status()
    body = response.json()
    if body.get("errors"):
        raise RuntimeError(f"GraphQL errors: {body['errors']}")
    return body["data"]


# The UI's GraphQL for a partition backfill, and for its state.
LAUNCH = """
mutation($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message }
    ... on InvalidSubsetError { message }
    ... on UnauthorizedError { message }
  }
}"""

BACKFILL = """
query($id: String!) {
  partitionBackfillOrError(backfillId: $id) {
    ... on PartitionBackfill { status runs(limit: 20) { runId status } }
  }
}"""
