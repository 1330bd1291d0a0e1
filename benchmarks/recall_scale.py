"""Recall latency as one anima's store grows: 1,000 / 10,000 / 100,000 active memories, with
1,000,000 messages throughout.

Run:  .venv/bin/python -m benchmarks.recall_scale [--url URL] [--queries 200] [--drop]
      (data: $ANIMA_DATA_DIR, by default ../shared/data next to the repository)

The store is a scratch database (default ``postgresql://postgres@127.0.0.1:5432/anima_recall_scale``,
created and migrated when missing; ``--drop`` drops it at the end). Its 1,000,000 messages
are built once and reused by later runs; the memories are reloaded on every run, in three
stages, so that at each size the table holds exactly that many (all active):

* Texts are the shared data's lines (LoCoMo dev and MemoryBank archives), each copied with
  its speakers' names replaced by names drawn from 3,000 made-up ones, and dated on a random
  day of five years. Messages: 20,000 conversations of 50 lines. Memories: one line each,
  with a name, a type and a source conversation; 20 pinned, about one in ten cited.
* Everything is bulk-loaded with COPY, then VACUUM ANALYZE, as a store is after its nights.
* Questions: the LoCoMo dev questions and MemoryBank probing questions, names replaced the
  same way, ``--queries`` of them drawn once (seeded) and asked at every size.
* One ``assemble_context`` call per question (resident, summaries, memories, episodic
  messages, the default budgets), on one connection, after 20 warm-up calls; printed:
  p50 / p95 / max per size and the ratio of the 100k p95 to the 1k p95.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row

from anima_pipeline.recall.assemble import assemble_context
from anima_pipeline.store.migrations import migrate
from benchmarks.data import data_dir, read_jsonl

ANIMA = "scale"
MESSAGES = 1_000_000
PER_CONVERSATION = 50
SIZES = (1_000, 10_000, 100_000)
DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/anima_recall_scale"
START = datetime(2021, 1, 1, tzinfo=UTC)
DAYS = 5 * 365
TYPES = ("world", "experience", "preference", "opinion", "imprint")
PINS = 20  # the first memories loaded are pinned; about one in ten is cited


def made_up_names(n: int, rng: random.Random) -> list[str]:
    first = "ka lo mi ra te su ve no di ba fe zo ri an el is or ul ya pe".split()
    mid = "ri la ne so to mi va de lu ke ro sa na".split()
    last = "na ra lo ne ta ck sh th en el ia os us".split()
    names: set[str] = set()
    while len(names) < n:
        names.add((rng.choice(first) + rng.choice(mid) + rng.choice(last)).capitalize())
    return sorted(names)


class Lines:
    """The shared data's lines with their speakers' names, names swapped for made-up ones."""

    def __init__(self, rng: random.Random) -> None:
        archives = [
            data_dir() / "locomo" / "dev.archive.jsonl",
            data_dir() / "memorybank" / "memorybank_en.archive.jsonl",
            data_dir() / "memorybank" / "memorybank_cn.archive.jsonl",
        ]
        missing = [p for p in archives if not p.exists()]
        if missing:
            raise SystemExit(f"shared data not found: {', '.join(map(str, missing))} (set ANIMA_DATA_DIR)")
        rows = [r for p in archives for r in read_jsonl(p) if r["role"] in ("user", "assistant")]
        self.speakers = sorted(
            {r["speaker"].strip() for r in rows if r.get("speaker") and len(r["speaker"]) > 2}
        )
        self.pattern = re.compile(
            "|".join(re.escape(s) for s in sorted(self.speakers, key=len, reverse=True))
        )
        self.texts = [r["content"] for r in rows]
        self.rng = rng
        self.names = made_up_names(3000, rng)

    def vary(self, text: str) -> tuple[str, str]:
        """The text with every speaker name replaced (one made-up name per original), and a name."""
        chosen: dict[str, str] = {}
        out = self.pattern.sub(lambda m: chosen.setdefault(m[0], self.rng.choice(self.names)), text)
        return out, next(iter(chosen.values()), self.rng.choice(self.names))

    def line(self) -> tuple[str, str]:
        return self.vary(self.rng.choice(self.texts))

    def day(self) -> datetime:
        return START + timedelta(days=self.rng.randrange(DAYS), minutes=self.rng.randrange(24 * 60))


def ensure_database(url: str) -> None:
    params = conninfo_to_dict(url)
    name = params["dbname"]
    admin = make_conninfo(**{**params, "dbname": "postgres"})
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    migrate(url)


def drop_database(url: str) -> None:
    params = conninfo_to_dict(url)
    admin = make_conninfo(**{**params, "dbname": "postgres"})
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{params["dbname"]}" WITH (FORCE)')


def load_messages(conn, lines: Lines, total: int = MESSAGES) -> None:
    have = conn.execute("SELECT count(*) AS n FROM message WHERE anima_id = %s", (ANIMA,)).fetchone()["n"]
    if have >= total:
        print(f"messages: {have:,} already loaded, reused", flush=True)
        return
    started = time.perf_counter()
    conn.execute("DELETE FROM conversation WHERE anima_id = %s", (ANIMA,))
    # A bulk load builds the full-text index once afterwards instead of row by row (the same
    # index, from the migration's own definition).
    index_def = conn.execute("SELECT pg_get_indexdef('message_fts_idx'::regclass) AS d").fetchone()["d"]
    conn.execute("DROP INDEX message_fts_idx")
    conversations = total // PER_CONVERSATION
    starts = [lines.day() for _ in range(conversations)]
    with conn.cursor().copy(
        "COPY conversation (id, anima_id, title, created_at, updated_at) FROM STDIN"
    ) as copy:
        for c, at in enumerate(starts):
            copy.write_row((f"{ANIMA}:c{c}", ANIMA, f"chat {c}", at, at + timedelta(hours=1)))
    with conn.cursor().copy(
        "COPY message (anima_id, conversation_id, external_id, role, speaker, content, created_at) FROM STDIN"
    ) as copy:
        for c, at in enumerate(starts):
            user = lines.rng.choice(lines.names)
            for i in range(PER_CONVERSATION):
                text, _ = lines.line()
                role = "user" if i % 2 == 0 else "assistant"
                copy.write_row(
                    (
                        ANIMA,
                        f"{ANIMA}:c{c}",
                        str(i),
                        role,
                        user if role == "user" else "Anima",
                        text,
                        at + timedelta(minutes=i),
                    )
                )
    conn.execute(index_def)
    print(f"messages: {total:,} loaded in {time.perf_counter() - started:.0f} s", flush=True)


def load_memories(conn, lines: Lines, count: int, loaded: int, messages: int = MESSAGES) -> None:
    with conn.cursor().copy(
        """COPY semantic_memory (anima_id, type, content, source_sessions, observed_at, pinned,
                                 reference_count) FROM STDIN"""
    ) as copy:
        for n in range(count):
            text, name = lines.line()
            content = text if name in text else f"{name}: {text}"
            roll = lines.rng.random()
            copy.write_row(
                (
                    ANIMA,
                    lines.rng.choice(TYPES),
                    content[:600],
                    [f"{ANIMA}:c{lines.rng.randrange(messages // PER_CONVERSATION)}"],
                    lines.day(),
                    loaded + n < PINS,
                    round(lines.rng.random() * 5, 2) if roll < 0.1 else 0,
                )
            )


def questions(lines: Lines, n: int) -> list[str]:
    asked = [q["question"] for q in read_jsonl(data_dir() / "locomo" / "dev.qa.jsonl")]
    for lang in ("en", "cn"):
        for line in read_jsonl(data_dir() / "memorybank" / f"probing_questions_{lang}.jsonl"):
            for qs in line.values():
                asked += qs
    return [lines.vary(q)[0] for q in lines.rng.sample(asked, n)]


def vacuum(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE message")
        conn.execute("VACUUM ANALYZE semantic_memory")
        conn.execute("VACUUM ANALYZE recall_word")


def measure(url: str, asked: list[str]) -> list[float]:
    now = START + timedelta(days=DAYS + 1)
    seconds = []
    with psycopg.connect(url, row_factory=dict_row, autocommit=True) as conn:
        conn.execute("SET default_transaction_read_only = on")
        for i, q in enumerate([*asked[:20], *asked]):
            started = time.perf_counter()
            with conn.transaction():
                assemble_context(conn, ANIMA, q, now=now)
            if i >= 20:
                seconds.append(time.perf_counter() - started)
    return sorted(seconds)


def _p(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] * 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=DEFAULT_URL, help="scratch database (created when missing)")
    parser.add_argument("--queries", type=int, default=200, help="questions asked at every size")
    parser.add_argument("--drop", action="store_true", help="drop the scratch database at the end")
    args = parser.parse_args(argv)
    rng = random.Random(9)
    lines = Lines(rng)
    ensure_database(args.url)
    with psycopg.connect(args.url, row_factory=dict_row, autocommit=True) as conn:
        conn.execute("SET maintenance_work_mem = '512MB'")
        conn.execute("SET synchronous_commit = off")
        with conn.transaction():
            load_messages(conn, lines)
        conn.execute("TRUNCATE semantic_memory CASCADE")
    asked = questions(lines, args.queries)
    results: dict[int, list[float]] = {}
    loaded = 0
    for size in SIZES:
        started = time.perf_counter()
        with psycopg.connect(args.url, autocommit=True) as conn, conn.transaction():
            load_memories(conn, lines, size - loaded, loaded)
        loaded = size
        vacuum(args.url)
        print(
            f"memories: {size:,} active (loaded and analyzed in {time.perf_counter() - started:.0f} s)",
            flush=True,
        )
        results[size] = secs = measure(args.url, asked)
        print(
            f"  {size:>7,} memories, {MESSAGES:,} messages: p50 {_p(secs, 0.5):6.1f} ms   p95 {_p(secs, 0.95):6.1f} ms"
            f"   max {secs[-1] * 1e3:6.1f} ms   mean {statistics.mean(secs) * 1e3:6.1f} ms  ({len(secs)} questions,"
            f" load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)",
            flush=True,
        )
    ratio = _p(results[SIZES[-1]], 0.95) / _p(results[SIZES[0]], 0.95)
    print(f"p95 ratio {SIZES[-1]:,} / {SIZES[0]:,} memories: {ratio:.2f}")
    if args.drop:
        drop_database(args.url)
        print(f"dropped {conninfo_to_dict(args.url)['dbname']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
