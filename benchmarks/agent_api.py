"""The agent API under load, over real HTTP: `anima serve` in its own process, a store of
10,000 memories (and 10,000 past messages), httpx2 clients.

1. appends: messages per second through POST /v1/animas/A/messages in batches of 100 (one
   client, sequential), with p50 / p95 latency per batch, then the same through AnimaMemory
   in-process (what the store itself costs: the message search indexes are most of it);
2. context: GET /v1/animas/A/context calls per second with 8 concurrent clients, p50 / p95;
3. the same context calls made in-process through AnimaMemory (1 client), so the ratio says
   what HTTP, auth and JSON add.

Run:  python -m benchmarks.agent_api [--batches 50] [--calls 400] [--clients 8]
With ANIMA_DATABASE_URL set it uses that server (a fresh database on it, dropped at the end);
otherwise an embedded PostgreSQL under a temporary ANIMA_HOME, stopped at the end.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import httpx2 as httpx
import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from anima_pipeline.config import DEFAULT_TIMEZONE, Settings
from anima_pipeline.memory.facade import AnimaMemory
from anima_pipeline.store.api_keys import create_key
from anima_pipeline.store.db import Database
from anima_pipeline.store.events import Audit
from anima_pipeline.store.migrations import migrate

ANIMA = "bench"
TZ = ZoneInfo(DEFAULT_TIMEZONE)
PEOPLE = ["Lena", "Marco", "Yuki", "Omar", "Priya", "Tomas", "Ines", "Kwame", "Sofia", "Hao", "林薇", "王强"]
PLACES = [
    "Lisbon",
    "Kyoto",
    "the harbour",
    "Nairobi",
    "the old library",
    "Qingdao",
    "the climbing gym",
    "杭州",
]
THINGS = ["tea", "oil painting", "sourdough", "chess", "jazz records", "trail running", "pottery", "火锅"]
FACTS = [
    "{p} moved to {l} in {y}.",
    "{p} loves {t} and practises it every weekend.",
    "{p} met the user at {l} during {y}.",
    "The user and {p} plan to visit {l} together.",
    "{p} dislikes {t} since a bad experience in {y}.",
    "{p}喜欢{t}，经常去{l}。",
]
QUERIES = [
    "Where did {p} move?",
    "What does {p} like to do on weekends?",
    "When did I meet {p}?",
    "Who is going to {l} with me?",
    "{p}喜欢什么？",
    "Tell me about {t}",
]


def fill(template: str, rnd: random.Random) -> str:
    return template.format(
        p=rnd.choice(PEOPLE), l=rnd.choice(PLACES), t=rnd.choice(THINGS), y=rnd.randint(2015, 2026)
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def store() -> Iterator[tuple[str, dict[str, str]]]:
    """(database URL, environment for `anima serve`) of a fresh migrated database."""
    env = {k: v for k, v in os.environ.items() if k != "ANIMA_TEST_DATABASE_URL"}
    home = Path(tempfile.mkdtemp(prefix="anima_bench_"))
    env["ANIMA_HOME"] = str(home)
    server_url = os.environ.get("ANIMA_DATABASE_URL")
    name = f"anima_bench_{uuid.uuid4().hex[:8]}"
    try:
        if server_url:
            with psycopg.connect(server_url, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{name}"')
            url = make_conninfo(**{**conninfo_to_dict(server_url), "dbname": name})
        else:
            from anima_pipeline.store import embedded

            url = embedded.ensure_running(home)
        migrate(url)
        env["ANIMA_DATABASE_URL"] = url
        yield url, env
    finally:
        if server_url:
            with psycopg.connect(server_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        else:
            from anima_pipeline.store import embedded

            embedded.stop(home)
        shutil.rmtree(home, ignore_errors=True)


def seed(db: Database, home: Path, memories: int, messages: int, rnd: random.Random) -> None:
    """Memories and past messages written straight into the store (the setup, not the measure)."""
    start = datetime(2025, 1, 1, tzinfo=TZ)
    with db.transaction() as conn:
        contents = [fill(rnd.choice(FACTS), rnd) + f" (note {i})" for i in range(memories)]
        conn.execute(
            """INSERT INTO semantic_memory (anima_id, type, content, source_sessions, observed_at, reference_count)
               SELECT %s, 'world', c, ARRAY['seed'], o, r
               FROM unnest(%s::text[], %s::timestamptz[], %s::real[]) AS u(c, o, r)""",
            (
                ANIMA,
                contents,
                [start + timedelta(hours=i) for i in range(memories)],
                [rnd.choice([0, 0, 0, 1, 2, 5]) for _ in range(memories)],
            ),
        )
    past = [
        {
            "conversation_id": f"past-{i // 50}",
            "message_id": f"p{i}",
            "role": "user" if i % 2 == 0 else "assistant",
            "content": fill(rnd.choice(FACTS), rnd),
            "created_at": (start + timedelta(minutes=7 * i)).isoformat(),
        }
        for i in range(messages)
    ]
    AnimaMemory(db, ANIMA, settings=Settings(database_url=db.url, home=home)).append(past)


@contextmanager
def serve(env: dict[str, str]):
    port = free_port()
    anima = str(Path(sys.executable).parent / "anima")
    proc = subprocess.Popen(
        [anima, "serve", "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"anima serve did not start: {proc.stderr.read().decode()}")
            time.sleep(0.2)
        yield base
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def pct(values: list[float], q: float) -> float:
    return (
        statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1] if len(values) > 1 else values[0]
    )


def report(name: str, n: int, unit: str, wall: float, latencies: list[float]) -> dict[str, float]:
    rate = n / wall
    p50, p95 = pct(latencies, 50) * 1000, pct(latencies, 95) * 1000
    print(
        f"{name:<34} {rate:>9.1f} {unit}/s   p50 {p50:7.1f} ms   p95 {p95:7.1f} ms   ({n} {unit} in {wall:.1f} s)"
    )
    return {"rate": rate, "p50": p50, "p95": p95}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--past-messages", type=int, default=10_000)
    parser.add_argument("--batches", type=int, default=50, help="append batches of 100 messages")
    parser.add_argument("--calls", type=int, default=400, help="context calls in total over the clients")
    parser.add_argument("--clients", type=int, default=8)
    args = parser.parse_args()
    rnd = random.Random(11)

    with store() as (url, env), Database(url, max_size=4) as db:
        t0 = time.monotonic()
        seed(db, Path(env["ANIMA_HOME"]), args.memories, args.past_messages, rnd)
        with db.transaction() as conn:
            key, _ = create_key(
                conn, Audit(conn=conn, anima_id="", run_id="bench", step="keys/create"), ANIMA
            )
        print(
            f"store: {args.memories} memories, {args.past_messages} past messages (seeded in {time.monotonic() - t0:.1f} s)"
        )
        auth = {"Authorization": f"Bearer {key}"}
        queries = [fill(rnd.choice(QUERIES), rnd) for _ in range(args.calls)]

        now = datetime(2026, 11, 30, 8, 0, tzinfo=TZ)

        def batch_of(b: int, tag: str) -> list[dict]:
            return [
                {
                    "conversation_id": f"{tag}-{b}",
                    "message_id": f"{tag}{b}-{i}",
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": fill(rnd.choice(FACTS), rnd),
                    "created_at": (now + timedelta(seconds=100 * b + i)).isoformat(),
                }
                for i in range(100)
            ]

        memory = AnimaMemory(db, ANIMA, settings=Settings(database_url=url, home=Path(env["ANIMA_HOME"])))
        with serve(env) as base, httpx.Client(base_url=base, headers=auth, timeout=60) as client:
            # 1. appends, batches of 100, one client: through HTTP, then in-process
            lat: list[float] = []
            wall0 = time.monotonic()
            for b in range(args.batches):
                batch = batch_of(b, "http")
                t = time.monotonic()
                r = client.post(f"/v1/animas/{ANIMA}/messages", json={"messages": batch})
                lat.append(time.monotonic() - t)
                assert r.status_code == 200 and r.json()["added"] == 100, r.text
            append = report(
                "append (HTTP, batches of 100)", 100 * args.batches, "msgs", time.monotonic() - wall0, lat
            )
            lat = []
            wall0 = time.monotonic()
            for b in range(args.batches):
                batch = batch_of(b, "direct")
                t = time.monotonic()
                assert memory.append(batch).added == 100
                lat.append(time.monotonic() - t)
            append_direct = report(
                "append (in-process, batches of 100)",
                100 * args.batches,
                "msgs",
                time.monotonic() - wall0,
                lat,
            )

            # 2. context, N concurrent clients
            def call(q: str) -> float:
                t = time.monotonic()
                r = client.get(f"/v1/animas/{ANIMA}/context", params={"query": q})
                assert r.status_code == 200, r.text
                return time.monotonic() - t

            client.get(f"/v1/animas/{ANIMA}/context", params={"query": "warm up"})
            wall0 = time.monotonic()
            with ThreadPoolExecutor(args.clients) as pool:
                lat = list(pool.map(call, queries))
            http = report(
                f"context (HTTP, {args.clients} clients)",
                len(queries),
                "calls",
                time.monotonic() - wall0,
                lat,
            )

        # 3. the same context calls in-process, one client
        sample = queries[: max(20, len(queries) // 4)]
        lat = []
        wall0 = time.monotonic()
        for q in sample:
            t = time.monotonic()
            memory.context(q)
            lat.append(time.monotonic() - t)
        direct = report("context (in-process, 1 client)", len(sample), "calls", time.monotonic() - wall0, lat)

    print(
        f"ratios: context HTTP p50 / in-process p50 = {http['p50'] / direct['p50']:.2f}; "
        f"HTTP throughput with {args.clients} clients / in-process 1 client = {http['rate'] / direct['rate']:.2f}; "
        f"append HTTP p50 / in-process p50 = {append['p50'] / append_direct['p50']:.2f}"
    )


if __name__ == "__main__":
    main()
