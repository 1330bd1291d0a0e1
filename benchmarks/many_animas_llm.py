"""One night of many animas on the Claude path, with the fake Messages API answering every
request after a fixed delay (as a real model would take time): sequential (one worker),
concurrent (a pool of workers sharing one engine, ANIMA_LLM_CONCURRENCY requests in
flight) and batch (every anima's current turn in one Message Batch, the batch taking the
same delay). Prints wall time, requests, batches and computed cost of each mode, and their
ratios, measured in this one run.

    .venv/bin/python -m benchmarks.many_animas_llm [--animas 100] [--delay 0.5]
        [--sequential-animas 20] [--workers 16] [--batch-workers 40] [--database-url URL]

Sequential mode runs --sequential-animas animas (it is the slow one) and its time is also
shown scaled to --animas, labelled as such. Without --database-url the store is an embedded
PostgreSQL under a temporary ANIMA_HOME (a URL must name a scratch database: it is emptied).
Each worker holds a database connection while its anima waits on the model, so the workers
stay below the server's max_connections.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from datetime import date, datetime
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from anima_pipeline.config import Settings
from anima_pipeline.llm.anthropic.batches import BatchCollector
from anima_pipeline.llm.anthropic.engine import AnthropicEngine
from anima_pipeline.llm.budget import Budget
from anima_pipeline.llm.contract import Usage
from anima_pipeline.night.runner import run_days
from anima_pipeline.store.archive import ImportStats, import_records, parse_lines
from anima_pipeline.store.db import Database, open_database
from anima_pipeline.store.events import Audit
from benchmarks.claude_cache import _clear
from testkit.data import conversation_lines
from testkit.fake_messages_api import FakeMessagesAPI, is_stage_one, reply, sleep_autopilot, tool_use

DAY = date(2026, 11, 16)


def archive(animas: list[str]) -> list[str]:
    lines = []
    for n, a in enumerate(animas):
        conv = f"{a}:{DAY}-a"
        t = datetime(DAY.year, DAY.month, DAY.day, 19, 0)
        talk = [
            ("user", f"I adopted a cat called Miso {n % 7 + 1} days ago and she already rules the flat."),
            ("assistant", "Congratulations! How is Miso settling in?"),
            ("user", "Fine, though she hates the vacuum cleaner. I work from home on Fridays now."),
            ("assistant", "Then Fridays will be Miso days."),
        ]
        lines += conversation_lines(a, conv, t, talk, speakers=("user", "echo"))
    return lines


def model(body: dict[str, Any]) -> dict[str, Any] | None:
    if is_stage_one(body) and len(body["messages"]) == 1:
        conv = re.search(r"## Conversation (\S+)", json.dumps(body["messages"][0], ensure_ascii=False)).group(
            1
        )
        fact = {
            "type": "experience",
            "content": "The user adopted a cat called Miso.",
            "source_sessions": [conv],
        }
        return reply(tool_use("create_semantic_memory", fact))
    return sleep_autopilot(body)


def one_mode(
    db: Database, home: Path, animas: list[str], mode: str, workers: int, delay: float
) -> tuple[float, Usage, int, int]:
    _clear(db)
    with db.transaction() as conn:
        audit = Audit(conn=conn, anima_id="", run_id="bench-import", step="import")
        import_records(conn, parse_lines(archive(animas), "bench"), audit, ImportStats())
    settings = Settings(
        home=home, engine="anthropic", workers=workers, llm={"concurrency": max(workers, 1), "mode": mode}
    )
    with FakeMessagesAPI(
        min_cache_tokens=None, responder=model, latency_s=delay, batch_latency_s=delay
    ) as fake:
        collector = BatchCollector(window_s=2.0, poll_s=0.2) if mode == "batch" else None
        engine = AnthropicEngine(
            settings.model,
            SecretStr("sk-ant-bench"),
            base_url=fake.url,
            budget=Budget(),
            settings=settings,
            timeout=60,
            collector=collector,
        )
        t0 = time.monotonic()
        try:
            results = run_days(db, settings, [DAY], mode="full", engine=engine)
        finally:
            engine.close()
        wall = time.monotonic() - t0
        batches = sum(1 for r in fake.requests if r.path == "/v1/messages/batches")
        requests = len(fake.messages)
    usage = sum((r.usage for r in results), Usage())
    return wall, usage, requests, batches


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--animas", type=int, default=100)
    parser.add_argument("--sequential-animas", type=int, default=20)
    parser.add_argument("--delay", type=float, default=0.5, help="seconds per request (and per batch)")
    parser.add_argument(
        "--workers", type=int, default=16, help="concurrent mode: animas (and requests) at once"
    )
    parser.add_argument("--batch-workers", type=int, default=40, help="batch mode: animas per batch")
    parser.add_argument("--database-url", default=None, help="a scratch database (default: embedded)")
    args = parser.parse_args(argv)
    animas = [f"a{i:04d}" for i in range(args.animas)]
    rows = []
    with tempfile.TemporaryDirectory() as home:
        db = open_database(Settings(home=Path(home), database_url=args.database_url))
        db.pool.resize(db.pool.min_size, max(db.pool.max_size, max(args.workers, args.batch_workers) + 4))
        try:
            for label, mode, who, workers in (
                ("sequential", "sync", animas[: args.sequential_animas], 1),
                ("concurrent", "sync", animas, args.workers),
                ("batch", "batch", animas, args.batch_workers),
            ):
                wall, usage, requests, batches = one_mode(db, Path(home), who, mode, workers, args.delay)
                rows.append((label, len(who), workers, wall, requests, batches, usage))
                print(f"{label:10} {len(who):4d} animas, {workers:3d} workers: {wall:7.1f} s", flush=True)
        finally:
            db.close()
    print(f"\none night, fake model answering after {args.delay} s per request (and per batch)")
    print(
        f"{'mode':10} {'animas':>6} {'workers':>7} {'wall s':>8} {'s/anima':>8} {'requests':>8} {'batches':>7} {'cost $':>9}"
    )
    for label, n, workers, wall, requests, batches, usage in rows:
        print(
            f"{label:10} {n:6d} {workers:7d} {wall:8.1f} {wall / n:8.3f} {requests:8d} {batches:7d} "
            f"{usage.cost_usd:9.4f}"
        )
    seq, conc, bat = rows
    per_anima = seq[3] / seq[1]
    scaled = per_anima * args.animas
    print(f"\nsequential scaled to {args.animas} animas (measured per anima x {args.animas}): {scaled:.0f} s")
    print(f"concurrent vs sequential (scaled): {scaled / conc[3]:.1f}x faster")
    print(
        f"batch vs sequential (scaled): {scaled / bat[3]:.1f}x faster; batch vs concurrent: {conc[3] / bat[3]:.2f}x"
    )
    cost_ratio = bat[6].cost_usd / conc[6].cost_usd if conc[6].cost_usd else 0.0
    print(f"cost of the night, batch / concurrent (same {args.animas} animas): {cost_ratio:.3f}")


if __name__ == "__main__":
    main()
