"""`anima keys` and `anima serve` as a user runs them: real processes, real HTTP, the embedded
default store (no ANIMA_DATABASE_URL) or the test server."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import pytest

from anima_pipeline.store import embedded
from anima_pipeline_tests.conftest import invoke_cli
from testkit.live_server import anima_serve, free_port

pytestmark = pytest.mark.filterwarnings("ignore:.*XDG_RUNTIME_DIR")
ANIMA = str(Path(sys.executable).parent / "anima")


@pytest.fixture
def home() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="anima_agent_home_"))
    try:
        yield path
    finally:
        embedded.stop(path)
        shutil.rmtree(path, ignore_errors=True)


def _env(home: Path, db_url: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANIMA_DATABASE_URL", "ANIMA_TEST_DATABASE_URL")}
    env["ANIMA_HOME"] = str(home)
    if db_url:
        env["ANIMA_DATABASE_URL"] = db_url
    return env


def _anima(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([ANIMA, *args], env=env, capture_output=True, text=True, timeout=180)


def _serve(env: dict[str, str], port: int) -> subprocess.Popen:
    return anima_serve(env, port)


def test_serve_on_the_embedded_default_answers_docs_and_a_cli_key_reads_back_its_messages(home: Path) -> None:
    env = _env(home)
    created = _anima(env, "keys", "create", "--anima", "aria", "--name", "laptop", "--new")
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip().splitlines()[-1]
    assert key.startswith("anima_") and created.stdout.strip() == key  # the key alone on stdout
    port = free_port()
    proc = _serve(env, port)
    try:
        base = f"http://127.0.0.1:{port}"
        docs = httpx.get(f"{base}/docs")
        assert docs.status_code == 200 and "swagger" in docs.text.lower()
        auth = {"Authorization": f"Bearer {key}"}
        messages = [
            {
                "conversation_id": "c1",
                "message_id": "u1",
                "role": "user",
                "content": "I finally adopted the greyhound, her name is Pepper.",
                "created_at": "2026-11-30T10:00:00+08:00",
            },
            {
                "conversation_id": "c1",
                "message_id": "a1",
                "role": "assistant",
                "content": "Congratulations on adopting Pepper!",
                "created_at": "2026-11-30T10:00:05+08:00",
            },
        ]
        r = httpx.post(f"{base}/v1/animas/aria/messages", json={"messages": messages}, headers=auth)
        assert r.status_code == 200 and r.json()["added"] == 2, r.text
        ctx = httpx.get(
            f"{base}/v1/animas/aria/context", params={"query": "What is my dog called?"}, headers=auth
        )
        assert ctx.status_code == 200, ctx.text
        assert (
            httpx.get(f"{base}/v1/animas/bruno/context", params={"query": "x"}, headers=auth).status_code
            == 403
        )
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    listed = _anima(env, "keys", "list", "--anima", "aria")
    assert listed.returncode == 0 and "laptop" in listed.stdout and key not in listed.stdout


def test_keys_revoke_locks_the_key_out(home: Path, db_url: str) -> None:
    env = _env(home, db_url)
    key = _anima(env, "keys", "create", "--anima", "aria", "--new").stdout.strip()
    port = free_port()
    proc = _serve(env, port)
    try:
        url = f"http://127.0.0.1:{port}/v1/animas/aria/status"
        assert httpx.get(url, headers={"Authorization": f"Bearer {key}"}).status_code == 200
        revoked = _anima(env, "keys", "revoke", "1")
        assert revoked.returncode == 0, revoked.stderr
        assert httpx.get(url, headers={"Authorization": f"Bearer {key}"}).status_code == 401
        assert _anima(env, "keys", "revoke", "999").returncode == 2  # an unknown id, as every door's
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_keys_and_mcp_refuse_an_unknown_anima_naming_the_known_ones(home: Path, db_url: str, db) -> None:
    from anima_pipeline.config import Settings
    from anima_pipeline.memory.facade import AnimaMemory

    AnimaMemory(db, "aria", settings=Settings(database_url=db_url, home=home)).remember(
        "Lena lives in Lisbon"
    )
    env = _env(home, db_url)
    for args in (["keys", "create", "--anima", "nobody"], ["mcp", "--anima", "ghost"]):
        refused = invoke_cli(args, env)  # an answer on stderr: no process needed
        assert refused.returncode == 2, (args, refused.stdout, refused.stderr)
        [line] = refused.stderr.strip().splitlines()
        assert "unknown" in line and "aria" in line, line  # the known ones
        assert "add --new" in line, line  # and the way out for a new agent
    with db.transaction() as conn:
        assert conn.execute("SELECT count(*) AS n FROM api_key").fetchone()["n"] == 0
    # a known anima gets its key; --new opens one for an anima with nothing stored yet
    assert _anima(env, "keys", "create", "--anima", "aria").returncode == 0
    assert _anima(env, "keys", "create", "--anima", "newcomer", "--new").returncode == 0
    assert _anima(env, "keys", "create", "--anima", "bad id", "--new").returncode == 2
    assert "--new" in _anima(env, "mcp", "--help").stdout
