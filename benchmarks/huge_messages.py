"""Recall over huge past messages: a context's time when many messages matching the question are
as long as the doors allow, read in part (the default: recall/episodic.py ``READ_CHARS``
around the first word asked about) against read whole, taking turns in one run.

Run:  .venv/bin/python -m benchmarks.huge_messages [--url URL] [--messages 50] [--chars 256000]
        [--runs 10] [--drop]

The store is a scratch database (default
``postgresql://postgres@127.0.0.1:5432/anima_huge_messages``, created and migrated when
missing; ``--drop`` drops it at the end). One anima per size (``huge-N-CHARS``, its lines the
same on every run, so a later run's import adds nothing) holds
``--messages`` conversations, each a message of ``--chars`` characters of made-up words with
the question's word at a random place (every other one asking something at its end), answered
by a short turn. The archive lines go through the store's own import (``store.archive``).

Printed: per mode the median and fastest of ``--runs`` lexical ``assemble_context`` calls
(default budgets), the ratio in part / whole, and whether both modes gave the same context
byte for byte (they must: the part read holds the window a context line is cut from). Then
active search (``search_messages``, one page of every matching message, at most 100): per
mode its median time and the size of the page as JSON (what the HTTP route answers).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import time
from datetime import UTC, datetime, timedelta

from anima_pipeline.config import Settings
from anima_pipeline.recall import assemble
from anima_pipeline.recall.assemble import assemble_context, search_messages
from anima_pipeline.store.archive import ImportStats, import_records, parse_lines
from anima_pipeline.store.db import Database
from anima_pipeline.store.events import Audit
from anima_pipeline.store.planner_stats import keep_fresh
from benchmarks.recall_scale import drop_database, ensure_database

DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/anima_huge_messages"
QUESTION = "When did the telescope arrive?"
WORDS = "river stone garden window paper lantern orchard meadow harbor violin candle pepper cobalt".split()
WHOLE = 1_000_000_000  # READ_CHARS for "read whole": no message is longer


def archive_lines(anima: str, messages: int, chars: int, rng: random.Random) -> list[str]:
    lines = []
    start = datetime(2024, 1, 1, 10, tzinfo=UTC)
    for i in range(messages):
        words: list[str] = []
        size = 0
        while size < chars - 80:
            words.append(rng.choice(WORDS))
            size += len(words[-1]) + 1
        words.insert(rng.randrange(len(words)), "the telescope arrived today.")
        text = " ".join(words)[: chars - 40] + (" Which lens next?" if i % 2 else " That is all.")
        at = start + timedelta(days=i)
        conv = f"{anima}:c{i}"
        for j, (role, speaker, content) in enumerate(
            [("user", "Ann", text), ("assistant", "Bo", "The wide one, I think.")]
        ):
            lines.append(
                json.dumps(
                    {
                        "anima_id": anima,
                        "conversation_id": conv,
                        "message_id": f"{conv}:{j}",
                        "role": role,
                        "speaker": speaker,
                        "content": content,
                        "created_at": (at + timedelta(minutes=j)).isoformat(),
                    }
                )
            )
    return lines


def build(db: Database, lines: list[str]) -> None:
    stats = ImportStats()
    with db.transaction() as conn:
        audit = Audit(conn=conn, anima_id="", run_id="bench-huge-messages", step="import")
        import_records(conn, parse_lines(lines, "huge_messages"), audit, stats)
    with db.transaction() as conn:
        keep_fresh(conn, stats.written())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=DEFAULT_URL, help="scratch database (created when missing)")
    parser.add_argument("--messages", type=int, default=50, help="huge messages matching the question")
    parser.add_argument("--chars", type=int, default=256_000, help="characters of each")
    parser.add_argument("--runs", type=int, default=10, help="calls per mode, taking turns")
    parser.add_argument("--drop", action="store_true", help="drop the scratch database at the end")
    args = parser.parse_args(argv)
    ensure_database(args.url)
    db = Database(args.url)
    try:
        anima = f"huge-{args.messages}-{args.chars}"
        build(db, archive_lines(anima, args.messages, args.chars, random.Random(7)))
        settings = Settings(embedder={"kind": "none"})
        read_chars = assemble.READ_CHARS
        seconds: dict[str, list[float]] = {"in part": [], "whole": []}
        digests: dict[str, set[str]] = {"in part": set(), "whole": set()}
        searched: dict[str, list[float]] = {"in part": [], "whole": []}
        page_bytes: dict[str, int] = {}
        page = min(args.messages, 100)
        with db.transaction() as conn:
            for run in range(args.runs + 1):  # the first round warms the cache, not counted
                for mode in ("in part", "whole") if run % 2 else ("whole", "in part"):
                    assemble.READ_CHARS = read_chars if mode == "in part" else WHOLE
                    started = time.perf_counter()
                    ctx = assemble_context(conn, anima, QUESTION, settings=settings)
                    if run:
                        seconds[mode].append(time.perf_counter() - started)
                    digests[mode].add(hashlib.sha256(ctx.rendered.encode()).hexdigest())
                    started = time.perf_counter()
                    found = search_messages(conn, anima, "telescope", settings=settings, limit=page)
                    if run:
                        searched[mode].append(time.perf_counter() - started)
                    page_bytes[mode] = len(found.model_dump_json())
        assemble.READ_CHARS = read_chars
    finally:
        db.close()
        if args.drop:
            drop_database(args.url)
    print(
        f"{args.messages} messages of {args.chars:,} characters matching {QUESTION!r}, {args.runs} calls a mode"
    )
    for mode, values in seconds.items():
        print(
            f"  read {mode:8} median {statistics.median(values) * 1000:7.1f} ms, fastest {min(values) * 1000:7.1f} ms"
        )
    ratio = statistics.median(seconds["in part"]) / statistics.median(seconds["whole"])
    same = len(digests["in part"]) == 1 and digests["in part"] == digests["whole"]
    print(f"  in part / whole: {ratio:.2f}x; same context: {'yes' if same else 'NO'}")
    print(f"active search, a page of {page} (search_messages 'telescope'):")
    for mode, values in searched.items():
        print(
            f"  read {mode:8} median {statistics.median(values) * 1000:7.1f} ms, page {page_bytes[mode]:>12,} bytes of JSON"
        )
    size = page_bytes["in part"] / page_bytes["whole"]
    took = statistics.median(searched["in part"]) / statistics.median(searched["whole"])
    print(f"  in part / whole: {took:.2f}x the time, {size:.3f}x the bytes")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
