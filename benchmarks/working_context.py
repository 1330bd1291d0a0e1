"""The working context of a turn on LoCoMo dev: how much of each answer the whole context holds
within a token budget, and how long a working-context call takes on a store of 100,000 memories.

Run:  .venv/bin/python -m benchmarks.working_context [--store URL] [--scale-url URL]
      [--budgets 2000 4000] [--queries 200] [--skip-scale | --skip-answers] [--drop]
      (data: $ANIMA_DATA_DIR, by default ../shared/data next to the repository)

*Answers.* The store (a scratch database, default ``anima_working_bench`` on the local server,
built once and reused) holds the four LoCoMo dev dialogues imported (``locomo/dev.archive.jsonl``)
and every session day slept offline except the last session's: each question is asked at the
end of its dialogue, the dialogue's last session being the current conversation (its messages
are the session view, its facts not yet slept). For every question and budget,
``recall.working.working_context`` (offline engine: extractive summary, heuristic flush; the
configured segment budgets) runs at "now" = a minute after the last message; per anima and
budget everything runs in one transaction that is rolled back, so budgets do not see each
other's summaries. Printed per split (tuned conv-26, conv-30; unseen conv-41, conv-42) and
budget: *words*, the mean share of the answer's key words (``light_sleep_coverage.key_words``)
found in the whole working context (system text and messages); *hit*, the share of questions
whose context holds every key word; and beside them the same figures for *tail*, the current
session's latest turns verbatim within the same budget (what a host without memory sends).

*Latency.* A second scratch database (default ``anima_working_scale``): one anima with 100,000
active memories and 200,000 past messages (``recall_scale``'s made-up names and dates, COPY,
VACUUM ANALYZE), six self blocks, day / week / month summaries and a current session of 300
turns. One ``working_context`` call per question (``--queries`` LoCoMo and MemoryBank
questions, names replaced), budget 4,000 tokens, on one connection after 20 warm-up calls; the
first call, which compacts the session (flush and summary), is timed apart. Printed: p50 / p95
/ max, and the same for the recall sections alone (`assemble_context`, timed interleaved) with
the ratio of the two at p50.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections import defaultdict
from datetime import datetime, timedelta
from functools import partial

import psycopg
from psycopg.rows import dict_row

from anima_pipeline.config import get_settings
from anima_pipeline.core.types import SELF_BLOCKS
from anima_pipeline.llm.offline import OfflineEngine
from anima_pipeline.llm.offline_summary import ExtractiveSummarizer
from anima_pipeline.memory.flush import flush_turns
from anima_pipeline.night.runner import run_days
from anima_pipeline.recall.assemble import assemble_context
from anima_pipeline.recall.tokens import RatioCounter
from anima_pipeline.recall.working import working_context
from anima_pipeline.store.archive import ImportStats, import_records, parse_lines
from anima_pipeline.store.db import Database
from anima_pipeline.store.events import Audit
from anima_pipeline.store.layers import SelfBlockRepo, TemporalRepo
from benchmarks import recall_scale
from benchmarks.light_sleep_coverage import CATEGORIES, key_words, memory_tokens
from testkit.data import TZ, data_dir, group_of, read_jsonl

DEFAULT_STORE = "postgresql://postgres@127.0.0.1:5432/anima_working_bench"
DEFAULT_SCALE = "postgresql://postgres@127.0.0.1:5432/anima_working_scale"
SCALE_MEMORIES = 100_000
SCALE_MESSAGES = 200_000
SESSION_TURNS = 300


# --- the LoCoMo store -------------------------------------------------------------------------


def build_store(url: str) -> None:
    """Import the dialogues and sleep every session day but the last one's, once."""
    recall_scale.ensure_database(url)
    settings = get_settings().model_copy(update={"database_url": url})
    with Database(url) as db:
        with db.transaction() as conn:
            if conn.execute("SELECT count(*) AS n FROM sleep_state").fetchone()["n"]:
                print("store: already built, reused", flush=True)
                return
        started = time.perf_counter()
        path = data_dir() / "locomo" / "dev.archive.jsonl"
        with db.transaction() as conn, path.open(encoding="utf-8") as lines:
            audit = Audit(conn=conn, anima_id="", run_id="bench-import", step="import")
            import_records(conn, parse_lines(lines, str(path)), audit, ImportStats())
        for anima, (_, last) in sorted(last_sessions(db).items()):
            with db.transaction() as conn:
                days = [
                    r["d"]
                    for r in conn.execute(
                        """SELECT DISTINCT (created_at AT TIME ZONE %s)::date AS d FROM message
                           WHERE anima_id = %s ORDER BY 1""",
                        (str(TZ), anima),
                    ).fetchall()
                ]
            days = [d for d in days if d < last.astimezone(TZ).date()]
            run_days(db, settings, days, animas=[anima])
            print(f"store: {anima} slept {len(days)} session days", flush=True)
        print(f"store: built in {time.perf_counter() - started:.0f} s", flush=True)


def last_sessions(db: Database) -> dict[str, tuple[str, datetime]]:
    """Per anima, its last conversation and the time of its last message."""
    with db.transaction() as conn:
        rows = conn.execute(
            """SELECT DISTINCT ON (anima_id) anima_id, conversation_id, created_at FROM message
               ORDER BY anima_id, created_at DESC, id DESC"""
        ).fetchall()
    return {r["anima_id"]: (r["conversation_id"], r["created_at"]) for r in rows}


def tail_text(conn, anima: str, session: str, budget: int, count) -> str:
    """The latest turns of the session verbatim within `budget` tokens."""
    rows = conn.execute(
        "SELECT content FROM message WHERE anima_id = %s AND conversation_id = %s ORDER BY created_at DESC, id DESC",
        (anima, session),
    ).fetchall()
    kept, used = [], 0
    for r in rows:
        used += count(r["content"])
        if used > budget:
            break
        kept.append(r["content"])
    return "\n".join(reversed(kept))


def offline_turn(conn, anima: str, session: str, question: str, budget: int, now: datetime):
    """`working_context` on `conn` with the offline engine's summary and flush (what the facade
    does with ANIMA_ENGINE=offline), at `now`."""
    settings = get_settings()
    ratio = RatioCounter(settings.chars_per_token, settings.tokens_per_cjk_char)
    return working_context(
        conn,
        Audit(conn=conn, anima_id=anima, run_id="bench", step="agent/working_context"),
        session,
        question,
        budget=budget,
        settings=settings,
        count=ratio.count,
        summarizer=ExtractiveSummarizer(TZ),
        flusher=partial(flush_turns, engine=OfflineEngine(), session_id=session, tz=TZ),
        now=now,
    )


def measure_answers(url: str, questions: list[dict], budgets: list[int]) -> dict:
    settings = get_settings()
    ratio = RatioCounter(settings.chars_per_token, settings.tokens_per_cjk_char)
    out: dict = defaultdict(lambda: defaultdict(float))
    with Database(url) as db:
        sessions = last_sessions(db)
    by_anima: dict[str, list[dict]] = defaultdict(list)
    for q in questions:
        by_anima[q["anima_id"]].append(q)
    for anima, qs in sorted(by_anima.items()):
        session, last = sessions[anima]
        now = (last + timedelta(minutes=1)).astimezone(TZ)
        for budget in budgets:
            with psycopg.connect(url, row_factory=dict_row) as conn, conn.transaction(force_rollback=True):
                for q in qs:
                    ctx = offline_turn(conn, anima, session, q["question"], budget, now)
                    assert ctx.tokens + ctx.message_tokens <= budget, (q["qa_id"], ctx.tokens)
                    whole = ctx.system_text() + "\n\n" + "\n".join(m.content for m in ctx.messages)
                    tail = tail_text(conn, anima, session, budget - ctx.message_tokens, ratio.count)
                    words = key_words(str(q["answer"]))
                    for mode, text in (("working", whole), ("tail", tail)):
                        found = words & memory_tokens(text)
                        key = (group_of(anima), budget, q["category"])
                        out[key][f"{mode}:words"] += len(found) / len(words)
                        out[key][f"{mode}:hit"] += found == words
                    out[key]["n"] += 1
                    out[key]["chars"] += ctx.chars
                    for seg in ctx.segments:  # what took the room
                        out[("segments", budget)][seg.name] += seg.chars
                    out[("segments", budget)]["n"] += 1
    return out


def report_segments(out: dict, budgets: list[int]) -> None:
    for b in budgets:
        row = out[("segments", b)]
        shown = ", ".join(f"{k} {v / row['n']:,.0f}" for k, v in row.items() if k != "n" and v)
        print(f"  budget {b}, mean characters per segment: {shown}")


def report_answers(out: dict, budgets: list[int]) -> None:
    print(
        "LoCoMo dev, at the end of each dialogue (the last session current): answer key words in the context"
    )
    head = f"{'':12}" + "".join(
        f"{split + ' ' + str(b):>34}" for b in budgets for split in ("tuned", "unseen")
    )
    print(head)
    sub = f"{'category':12}" + "".join(
        f"{'words':>8}{'hit':>8}{'tail w':>9}{'tail hit':>9}" for _ in budgets for _ in range(2)
    )
    print(sub)
    for label, cats in [*((CATEGORIES[c], (c,)) for c in CATEGORIES), ("all", tuple(CATEGORIES))]:
        line = f"{label:12}"
        for b in budgets:
            for split in ("tuned", "unseen"):
                rows = [out[(split, b, c)] for c in cats]
                n = sum(r["n"] for r in rows)
                if not n:
                    line += f"{'-':>34}"
                    continue
                line += "".join(
                    f"{sum(r[k] for r in rows) / n:{w}.3f}"
                    for k, w in (("working:words", 8), ("working:hit", 8), ("tail:words", 9), ("tail:hit", 9))
                )
        print(line)
    for b in budgets:
        for split in ("tuned", "unseen"):
            rows = [out[(split, b, c)] for c in CATEGORIES]
            n = sum(r["n"] for r in rows)
            print(
                f"  {split:6} budget {b}: {n} questions, mean context {sum(r['chars'] for r in rows) / n:,.0f} chars"
            )


# --- latency on 100,000 memories ------------------------------------------------------------------


def build_scale(url: str, lines: recall_scale.Lines) -> tuple[str, datetime]:
    recall_scale.ensure_database(url)
    anima = recall_scale.ANIMA
    session = f"{anima}:current"
    now = (recall_scale.START + timedelta(days=recall_scale.DAYS + 1)).astimezone(TZ)
    with psycopg.connect(url, row_factory=dict_row, autocommit=True) as conn:
        conn.execute("SET maintenance_work_mem = '512MB'")
        conn.execute("SET synchronous_commit = off")
        with conn.transaction():
            recall_scale.load_messages(conn, lines, SCALE_MESSAGES)
        have = conn.execute("SELECT count(*) AS n FROM semantic_memory").fetchone()["n"]
        if have != SCALE_MEMORIES:
            conn.execute("TRUNCATE semantic_memory CASCADE")
            with conn.transaction():
                recall_scale.load_memories(conn, lines, SCALE_MEMORIES, 0, SCALE_MESSAGES)
        with conn.transaction():
            conn.execute("DELETE FROM conversation WHERE anima_id = %s AND id = %s", (anima, session))
            conn.execute(
                "INSERT INTO conversation (id, anima_id, created_at) VALUES (%s, %s, %s)",
                (session, anima, now),
            )
            with conn.cursor().copy(
                "COPY message (anima_id, conversation_id, external_id, role, speaker, content, created_at) FROM STDIN"
            ) as copy:
                for i in range(SESSION_TURNS):
                    role = "user" if i % 2 == 0 else "assistant"
                    text, _ = lines.line()
                    at = now - timedelta(minutes=SESSION_TURNS - i)
                    copy.write_row((anima, session, f"t{i}", role, role, text, at))
            audit = Audit(conn=conn, anima_id=anima, run_id="bench", step="bench")
            repo = SelfBlockRepo(conn, audit)
            for name in SELF_BLOCKS:
                repo.write(anima, name, " ".join(lines.line()[0] for _ in range(6)), "bench")
            temporal = TemporalRepo(conn, audit)
            today = now.astimezone(TZ).date()
            for level, start, end in (
                ("day", today - timedelta(days=1), today - timedelta(days=1)),
                (
                    "week",
                    today - timedelta(days=today.weekday() + 7),
                    today - timedelta(days=today.weekday() + 1),
                ),
                ("month", today.replace(day=1), today),
            ):
                temporal.upsert(anima, level, start, end, " ".join(lines.line()[0] for _ in range(8)), {})
    recall_scale.vacuum(url)
    return session, now


def measure_latency(url: str, session: str, now: datetime, asked: list[str], budget: int = 4000) -> dict:
    seconds: list[float] = []
    recall: list[float] = []
    first = 0.0
    with psycopg.connect(url, row_factory=dict_row, autocommit=True) as conn:
        with conn.transaction(force_rollback=True):  # the scale store stays as built
            for i, q in enumerate([asked[0], *asked[:20], *asked]):
                started = time.perf_counter()
                with conn.transaction():
                    ctx = offline_turn(conn, recall_scale.ANIMA, session, q, budget, now)
                took = time.perf_counter() - started
                if i == 0:
                    first = took
                    assert ctx.compacted, "the first call should compact the 300-turn session"
                    continue
                started = time.perf_counter()  # the recall sections alone, interleaved
                with conn.transaction():
                    assemble_context(
                        conn, recall_scale.ANIMA, q, settings=get_settings(), session_id=session, now=now
                    )
                alone = time.perf_counter() - started
                if i > 20:
                    seconds.append(took)
                    recall.append(alone)
    return {"first": first, "seconds": sorted(seconds), "recall": sorted(recall)}


def _p(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] * 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", default=DEFAULT_STORE, help="scratch database of the slept dialogues")
    parser.add_argument("--scale-url", default=DEFAULT_SCALE, help="scratch database of 100,000 memories")
    parser.add_argument("--budgets", type=int, nargs="+", default=[2000, 4000], help="total budgets, tokens")
    parser.add_argument("--queries", type=int, default=200, help="questions timed on the large store")
    parser.add_argument("--skip-scale", action="store_true", help="answers only, no latency run")
    parser.add_argument("--skip-answers", action="store_true", help="latency only")
    parser.add_argument("--drop", action="store_true", help="drop both scratch databases at the end")
    args = parser.parse_args(argv)
    qa = data_dir() / "locomo" / "dev.qa.jsonl"
    if not qa.exists():
        print(f"LoCoMo dev data not found under {data_dir()}; nothing to measure.", file=sys.stderr)
        return 2
    if not args.skip_answers:
        build_store(args.store)
        questions = [q for q in read_jsonl(qa) if q["category"] in CATEGORIES and key_words(str(q["answer"]))]
        started = time.perf_counter()
        out = measure_answers(args.store, questions, args.budgets)
        report_answers(out, args.budgets)
        report_segments(out, args.budgets)
        took = time.perf_counter() - started
        print(f"({len(questions)} questions x {len(args.budgets)} budgets in {took:.0f} s)")
    if not args.skip_scale:
        rng = random.Random(9)
        lines = recall_scale.Lines(rng)
        session, now = build_scale(args.scale_url, lines)
        asked = recall_scale.questions(lines, args.queries)
        result = measure_latency(args.scale_url, session, now, asked)
        secs = result["seconds"]
        print(
            f"latency, {SCALE_MEMORIES:,} memories, {SCALE_MESSAGES:,} messages, a {SESSION_TURNS}-turn session, "
            f"budget 4000: p50 {_p(secs, 0.5):.1f} ms  p95 {_p(secs, 0.95):.1f} ms  max {secs[-1] * 1e3:.1f} ms"
            f"  mean {statistics.mean(secs) * 1e3:.1f} ms ({len(secs)} calls); the first call (compaction: flush"
            f" + summary) {result['first'] * 1e3:.0f} ms; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
        )
        alone = result["recall"]
        print(
            f"  the recall sections alone (assemble_context, interleaved): p50 {_p(alone, 0.5):.1f} ms"
            f"  p95 {_p(alone, 0.95):.1f} ms; working context / recall at p50: {_p(secs, 0.5) / _p(alone, 0.5):.2f}"
        )
    if args.drop:
        recall_scale.drop_database(args.store)
        recall_scale.drop_database(args.scale_url)
    return 0


if __name__ == "__main__":
    sys.exit(main())
