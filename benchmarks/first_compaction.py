"""The first working-context call on a long session that was never compacted, and the calls
after it: how long the compaction cycle (flush, then the rolling summary) takes.

Run:  .venv/bin/python -m benchmarks.first_compaction [--url URL] [--turns 2000] [--budget 30000]
      [--kind dense|chatter] [--later 5] [--warm]

A scratch database (default ``anima_compaction_bench`` on the local server, dropped and made
anew each run) holds one anima with six self blocks and one session of ``--turns`` turns,
appended at once (a host that imports a history, or calls ``working_context`` only now).
*dense*: every turn states facts (made-up names, places, dates and amounts), the worst case
for the flush, which writes about 0.7 memories a turn through the executor and the audit;
*chatter*: the working-context tests' mix (greetings, citations, tool output, a fact every
sixth turn). The offline engine (the extractive summary, light sleep's heuristics for the
flush), the ratio token counter, ``ANIMA_EMBEDDER=none``. Printed: the first call's seconds
(it compacts), then each later call's (the stored summary reused), and the memories the
flush wrote. Beside each wall time, the CPU seconds it took in this process and in the
server's backends (read from /proc when the server runs on this machine): on a shared,
loaded machine the wall time swings with the load, the CPU seconds much less.
"""

from __future__ import annotations

import argparse
import os
import time
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import psycopg

from anima_pipeline.config import Settings
from anima_pipeline.memory.facade import AnimaMemory
from anima_pipeline.store.db import Database
from anima_pipeline.store.events import Audit
from anima_pipeline.store.layers import SelfBlockRepo
from anima_pipeline.store.migrations import migrate

PEOPLE = ["Ines", "Tomas", "Priya", "Oskar", "Lucia", "Emeka", "Sanna", "Mateo", "Yuki", "Farid"]
PLACES = ["Porto", "Tromso", "Cusco", "Hobart", "Tbilisi", "Quebec", "Oaxaca", "Bergen", "Kyoto", "Tallinn"]


def turn(i: int, kind: str) -> tuple[str, str]:
    person, place = PEOPLE[i % 10], PLACES[(i // 10) % 10]
    role = "user" if i % 2 == 0 else "assistant"
    if kind == "dense":
        return role, (
            f"On {i % 28 + 1} March 2026 {person} booked {i} tickets to {place} for the {i * 7}th festival. "
            f"{PEOPLE[(i + 3) % 10]} paid {i * 13} euros and met {PEOPLE[(i + 5) % 10]} at gate {i % 40}."
        )
    if role == "assistant":
        if i % 10 == 3:
            return "tool", "search results: " + " ".join(f"row{k}={k * i}" for k in range(120))
        return (
            role,
            f"That sounds good; you mentioned {person} before [[anima:f-{i}]]. " + "Tell me more. " * 6,
        )
    if i % 6 == 0:
        return role, f"My friend {person} moved to {place} in March 2026 and works as a nurse there."
    return role, f"Hi again, just checking in about turn {i}. Nothing much new today, it was quiet."


def backend_cpu(url: str, name: str) -> float | None:
    """CPU seconds (user + system) the server's backends for database `name` have used, or
    None when they are not processes of this machine."""
    with psycopg.connect(url, autocommit=True) as conn:
        pids = [r[0] for r in conn.execute("SELECT pid FROM pg_stat_activity WHERE datname = %s", (name,))]
    tick, total = os.sysconf("SC_CLK_TCK"), 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            return None
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


class Clock:
    """Wall time, this process's CPU and the server backends' CPU of one call."""

    def __init__(self, url: str, name: str) -> None:
        self.url, self.name = url, name

    def __enter__(self) -> Clock:
        self.server = backend_cpu(self.url, self.name)
        self.cpu, self.wall = time.process_time(), time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu
        after = backend_cpu(self.url, self.name)
        self.server = None if after is None or self.server is None else after - self.server

    def cpu_text(self) -> str:
        server = "n/a" if self.server is None else f"{self.server:.2f}"
        return f"cpu {self.cpu:.2f} s here + {server} s server"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/anima_compaction_bench")
    ap.add_argument("--turns", type=int, default=2000)
    ap.add_argument("--budget", type=int, default=30_000)
    ap.add_argument("--kind", choices=["dense", "chatter"], default="dense")
    ap.add_argument("--later", type=int, default=5)
    ap.add_argument(
        "--warm",
        action="store_true",
        help="compact a short session of another conversation first, as a service that has served one"
        " before (the light-sleep rules compiled once per process, the statements prepared)",
    )
    args = ap.parse_args()
    admin, name = args.url.rsplit("/", 1)
    with psycopg.connect(f"{admin}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    migrate(args.url)
    settings = Settings(database_url=args.url, embedder={"kind": "none"}, engine="offline")
    db = Database(args.url, max_size=2)
    with db.transaction() as conn:
        repo = SelfBlockRepo(conn, Audit(conn=conn, anima_id="wren", run_id="bench", step="bench"))
        for block in ("identity", "persona", "values", "relationships"):
            repo.write("wren", block, f"The {block} of Wren, a patient companion. " * 12, "bench")
    start = datetime(2026, 11, 20, 9, 0, tzinfo=ZoneInfo("UTC"))

    def session(conversation: str, turns: int, kind: str) -> list[dict]:
        return [
            {
                "conversation_id": conversation,
                "message_id": f"{conversation}-m{i}",
                "role": role,
                "content": content,
                "created_at": (start + timedelta(seconds=30 * i)).isoformat(),
            }
            for i, (role, content) in enumerate(turn(i, kind) for i in range(turns))
        ]

    memory = AnimaMemory(db, "wren", settings=settings)
    memory.append(session("s1", args.turns, args.kind))
    memory.working_context("s0", "warm-up", budget=args.budget)  # pool connections, imports
    if args.warm:
        memory.append(session("s0", 200, "dense"))
        warm = memory.working_context("s0", "warm-up", budget=2_000)
        print(f"warm: a 200-turn session compacted first (flush wrote {len(warm.flushed)} memories)")
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    with Clock(f"{admin}/postgres", name) as clock:
        first = memory.working_context("s1", "Where does Ines live now?", budget=args.budget)
    print(
        f"{args.kind}, {args.turns} turns, budget {args.budget:,}: first call {clock.wall:.2f} s,"
        f" {clock.cpu_text()} (compacted {first.compacted}, flush wrote {len(first.flushed)} memories)"
    )
    for n in range(args.later):
        with Clock(f"{admin}/postgres", name) as clock:
            later = memory.working_context("s1", f"And then, {n}?", budget=args.budget)
        print(f"  later call {n + 1}: {clock.wall:.3f} s, {clock.cpu_text()} (compacted {later.compacted})")
    db.close()


if __name__ == "__main__":
    main()
