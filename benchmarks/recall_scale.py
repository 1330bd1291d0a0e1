"""Recall latency as one anima's store grows: 1,000 / 10,000 / 100,000 active memories, with
1,000,000 messages throughout.

Run:  .venv/bin/python -m benchmarks.recall_scale [--url URL] [--queries 200] [--drop]
        [--vectors] [--sizes N ...] [--reuse] [--beside K] [--neighbours]
      (data: $ANIMA_DATA_DIR, by default ../shared/data next to the repository)

The store is a scratch database (default ``postgresql://postgres@127.0.0.1:5432/anima_recall_scale``,
created and migrated when missing; ``--drop`` drops it at the end). Its 1,000,000 messages
are built once and reused by later runs; the memories are reloaded on every run, in three
stages, so that at each size the table holds exactly that many (all active); ``--reuse`` with
a single ``--sizes`` keeps those of a previous run of that size instead (the questions are the
same: they are drawn before the memories):

* Texts are the shared data's lines (LoCoMo dev and MemoryBank archives), each copied with
  its speakers' names replaced by names drawn from 3,000 made-up ones, and dated on a random
  day of five years. Messages: 20,000 conversations of 50 lines. Memories: one line each,
  with a name, a type and a source conversation; 20 pinned, about one in ten cited.
* Everything is bulk-loaded with COPY, then VACUUM ANALYZE, as a store is after its nights.
* Questions: the LoCoMo dev questions and MemoryBank probing questions, names replaced the
  same way, ``--queries`` of them drawn once (seeded) and asked at every size.
* One ``assemble_context`` call per question and mode (resident, summaries, memories, episodic
  messages, the default budgets), on one connection, after 20 warm-up calls. The lexical modes:
  ``lexical`` (each list packed in its share, the defaults), ``no-repeats`` (a line
  repeating a placed one left out), ``second`` (the second stage on, recall/rerank.py) and, with
  ``--neighbours``, ``neighbours`` (the entity neighbours joined, recall/neighbours.py),
  taking turns question by question, each line with its p95 against the first's; with ``--vectors``
  the lexical and the hybrid call of each question run back to back (which goes first
  alternates), so that the machine's load weighs on both alike. Printed: p50 / p95 / max per
  size and mode (hybrid: the question's embedding on its own, and the call without it) and
  the ratio of the 100k p95 to the 1k p95.
* ``--beside K``: K more animas of 2,000 memories and 2,000 messages each (kept by later runs
  while complete), then one of them measured the same way, and the plans of the
  nearest-neighbour statements for it and for the big anima (exact sort or HNSW walk).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row

from anima_pipeline.config import Settings
from anima_pipeline.recall import ranking
from anima_pipeline.recall.assemble import assemble_context
from anima_pipeline.store.migrations import migrate
from testkit.data import data_dir, read_jsonl

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
        self.picked: list[int] = []  # the base text of every line drawn, in order

    def vary(self, text: str) -> tuple[str, str]:
        """The text with every speaker name replaced (one made-up name per original), and a name."""
        chosen: dict[str, str] = {}
        out = self.pattern.sub(lambda m: chosen.setdefault(m[0], self.rng.choice(self.names)), text)
        return out, next(iter(chosen.values()), self.rng.choice(self.names))

    def line(self) -> tuple[str, str]:
        # randrange draws what rng.choice would (same data as before); the index is kept for --vectors
        self.last = self.rng.randrange(len(self.texts))
        self.picked.append(self.last)
        return self.vary(self.texts[self.last])

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


def load_messages(conn, lines: Lines, total: int = MESSAGES, anima: str = ANIMA, bulk: bool = True) -> None:
    have = conn.execute("SELECT count(*) AS n FROM message WHERE anima_id = %s", (anima,)).fetchone()["n"]
    if have >= total:
        if bulk:
            print(f"messages: {have:,} already loaded, reused", flush=True)
        return
    started = time.perf_counter()
    conn.execute("DELETE FROM conversation WHERE anima_id = %s", (anima,))
    # A bulk load builds the full-text index once afterwards instead of row by row (the same
    # index, from the migration's own definition).
    index_def = conn.execute("SELECT pg_get_indexdef('message_fts_idx'::regclass) AS d").fetchone()["d"]
    if bulk:
        conn.execute("DROP INDEX message_fts_idx")
    conversations = total // PER_CONVERSATION
    starts = [lines.day() for _ in range(conversations)]
    with conn.cursor().copy(
        "COPY conversation (id, anima_id, title, created_at, updated_at) FROM STDIN"
    ) as copy:
        for c, at in enumerate(starts):
            copy.write_row((f"{anima}:c{c}", anima, f"chat {c}", at, at + timedelta(hours=1)))
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
                        anima,
                        f"{anima}:c{c}",
                        str(i),
                        role,
                        user if role == "user" else "Anima",
                        text,
                        at + timedelta(minutes=i),
                    )
                )
    if bulk:
        conn.execute(index_def)
        print(f"messages: {total:,} loaded in {time.perf_counter() - started:.0f} s", flush=True)


def memory_rows(lines: Lines, count: int, loaded: int, messages: int = MESSAGES, anima: str = ANIMA):
    """The rows of `count` memories after `loaded` ones (drawn from `lines`, in order)."""
    for n in range(count):
        text, name = lines.line()
        content = text if name in text else f"{name}: {text}"
        roll = lines.rng.random()
        yield (
            anima,
            lines.rng.choice(TYPES),
            content[:600],
            [f"{anima}:c{lines.rng.randrange(messages // PER_CONVERSATION)}"],
            lines.day(),
            loaded + n < PINS,
            round(lines.rng.random() * 5, 2) if roll < 0.1 else 0,
        )


def load_memories(
    conn, lines: Lines, count: int, loaded: int, messages: int = MESSAGES, anima: str = ANIMA
) -> None:
    with conn.cursor().copy(
        """COPY semantic_memory (anima_id, type, content, source_sessions, observed_at, pinned,
                                 reference_count) FROM STDIN"""
    ) as copy:
        for row in memory_rows(lines, count, loaded, messages, anima):
            copy.write_row(row)


# --- --vectors: one vector per message and memory -------------------------------------
# Embedding a million texts here would take days (6-25 texts/s on these 2 shared cores), so
# every text gets the vector of the shared-data line it was made from (its made-up names
# aside), embedded once, plus a little noise (HNSW handles exact duplicates badly); the
# question is embedded for real on every call, and its time is shown on its own.
NOISE = 0.02


def base_vectors(lines: Lines, embedder, source: str | None, url: str):
    """The vector of each base line: read from the scratch store (`url`, kept by an earlier
    run) or from a store that embedded these lines (`source`, e.g. the recall_at_k store) where
    it can, embedded here otherwise (and kept in the scratch store for the next run)."""
    import numpy as np

    from anima_pipeline.store import vectors

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS scale_base_vector (model_id text, content text, v vector)")
        known: dict[str, str] = dict(
            conn.execute(
                "SELECT content, v::text FROM scale_base_vector WHERE model_id = %s", (embedder.model_id,)
            ).fetchall()
        )
    if source and not all(t in known for t in lines.texts):
        with psycopg.connect(source) as conn:
            rows = conn.execute(
                """SELECT m.content, e.v::text FROM embedding e JOIN message m ON m.id = e.item_id
                   WHERE e.kind = 'message' AND e.model_id = %s""",
                (embedder.model_id,),
            ).fetchall()
        known |= dict(rows)
    out = np.zeros((len(lines.texts), embedder.dimension), dtype=np.float32)
    missing = [i for i, t in enumerate(lines.texts) if t not in known]
    for i, t in enumerate(lines.texts):
        if t in known:
            out[i] = np.array(known[t].strip("[]").split(","), dtype=np.float32)
    started = time.perf_counter()
    for k in range(0, len(missing), 256):
        chunk = missing[k : k + 256]
        out[chunk] = embedder.embed([lines.texts[i] for i in chunk])
    if missing:
        with (
            psycopg.connect(url, autocommit=True) as conn,
            conn.cursor().copy("COPY scale_base_vector (model_id, content, v) FROM STDIN") as copy,
        ):
            for i in missing:
                copy.write_row((embedder.model_id, lines.texts[i], vectors.to_text(out[i])))
    print(
        f"base vectors: {len(lines.texts) - len(missing):,} read, {len(missing):,} embedded"
        f" in {time.perf_counter() - started:.0f} s",
        flush=True,
    )
    return out


def load_vectors(
    conn, kind: str, table: str, picked: list[int], base, embedder, anima: str = ANIMA, quiet: bool = False
) -> None:
    """COPY the base vectors of `picked` (in insertion order) for the rows of `table` not yet
    embedded, the noise added server-side; then the model's HNSW index (store.vectors)."""
    from anima_pipeline.store import vectors

    started = time.perf_counter()
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS scale_base (i int PRIMARY KEY, v vector)")
    conn.execute("TRUNCATE scale_base")
    with conn.cursor().copy("COPY scale_base (i, v) FROM STDIN") as copy:
        for i in sorted(set(picked)):
            copy.write_row((i, vectors.to_text(base[i])))
    ids = [
        r["id"]
        for r in conn.execute(
            f"""SELECT x.id FROM {table} x WHERE x.anima_id = %s AND NOT EXISTS (SELECT 1 FROM embedding e
                WHERE e.anima_id = x.anima_id AND e.kind = %s AND e.item_id = x.id) ORDER BY x.id""",
            (anima, kind),
        ).fetchall()
    ]
    picked = picked[len(picked) - len(ids) :]  # the rows not embedded yet are the last ones drawn
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS scale_pick (id bigint, i int)")
    conn.execute("TRUNCATE scale_pick")
    with conn.cursor().copy("COPY scale_pick (id, i) FROM STDIN") as copy:
        for id_, i in zip(ids, picked, strict=True):
            copy.write_row((id_, i))
    d = embedder.dimension
    conn.execute(
        f"""INSERT INTO embedding (anima_id, kind, item_id, model_id, v)
            SELECT %s, %s, p.id, %s, l2_normalize(b.v + n.v)
            FROM scale_pick p JOIN scale_base b ON b.i = p.i
            CROSS JOIN LATERAL (SELECT array_agg((random() - 0.5) * %s)::vector AS v
                                FROM generate_series(1, {d}) WHERE p.id IS NOT NULL) n""",  # p.id: drawn per row
        (anima, kind, embedder.model_id, 2 * NOISE),
    )
    vectors.ensure_model(conn, embedder.model_id, d)
    if quiet:
        return
    print(
        f"{kind} vectors: {len(ids):,} loaded and indexed in {time.perf_counter() - started:.0f} s",
        flush=True,
    )


def questions(lines: Lines, n: int) -> list[str]:
    asked = [q["question"] for q in read_jsonl(data_dir() / "locomo" / "dev.qa.jsonl")]
    for lang in ("en", "cn"):
        for line in read_jsonl(data_dir() / "memorybank" / f"probing_questions_{lang}.jsonl"):
            for qs in line.values():
                asked += qs
    return [lines.vary(q)[0] for q in lines.rng.sample(asked, n)]


def reusable(url: str, sizes: list[int], with_vectors: bool) -> bool:
    """Whether the store holds what one run of `sizes` (a single size) left: that many memories,
    and their vectors when asked (only then can --reuse skip the reload)."""
    if len(sizes) != 1:
        raise SystemExit("--reuse needs a single --sizes")
    with psycopg.connect(url, row_factory=dict_row) as conn:
        n = conn.execute("SELECT count(*) AS n FROM semantic_memory WHERE anima_id = %s", (ANIMA,)).fetchone()
        if n["n"] != sizes[0]:
            return False
        if with_vectors:
            v = conn.execute(
                "SELECT count(*) AS n FROM embedding WHERE anima_id = %s AND kind = 'memory'", (ANIMA,)
            ).fetchone()
            return v["n"] == sizes[0]
    return True


def vacuum(url: str, with_vectors: bool = False) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE message")
        conn.execute("VACUUM ANALYZE semantic_memory")
        conn.execute("VACUUM ANALYZE recall_word")
        if with_vectors:
            conn.execute("VACUUM ANALYZE embedding")


DIGESTS: dict[str, str] = {}  # per mode, of the last measure(): the contexts' text, in question order
BASELINE: Path | None = None  # --baseline: another checkout, timed in the same rounds ("mode@before")
_ARGS: dict[int, dict] = {}  # the keyword arguments of each mode's Settings, for the baseline's process


def mode(**kw: dict) -> Settings:
    settings = Settings(**kw)
    _ARGS[id(settings)] = kw
    return settings


# The baseline's side of --baseline: the package of another checkout (the editable install's
# finder taken out, as in benchmarks/cli_startup.py), one context per line of stdin (JSON:
# question and mode's Settings arguments), its seconds and text back per line.
_SERVE = """
import json, sys, time
sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f)]
sys.path.insert(0, sys.argv[1])
from datetime import datetime
import psycopg
from psycopg.rows import dict_row
from anima_pipeline.config import Settings
from anima_pipeline.recall.assemble import assemble_context
settings = {}
with psycopg.connect(sys.argv[2], row_factory=dict_row, autocommit=True) as conn:
    conn.execute("SET default_transaction_read_only = on")
    for line in sys.stdin:
        ask = json.loads(line)
        key = json.dumps(ask["settings"], sort_keys=True)
        if key not in settings:
            settings[key] = Settings(**ask["settings"])
        started = time.perf_counter()
        with conn.transaction():
            ctx = assemble_context(conn, sys.argv[3], ask["q"], now=datetime.fromisoformat(ask["now"]),
                                   settings=settings[key])
        took = time.perf_counter() - started
        print(json.dumps({"s": took, "e": (ctx.embed_ms or 0.0) / 1e3, "r": ctx.rendered}), flush=True)
"""


def measure(
    url: str, asked: list[str], modes: dict[str, Settings], anima: str = ANIMA
) -> dict[str, tuple[list[float], list[float], list[float]]]:
    """Per mode: seconds per call, the question's embedding in each, and each call without it;
    each sorted. The modes take turns question by question (the first one alternating), so a
    change in the machine's load weighs on all of them alike. With --baseline each mode also
    runs from that checkout ("mode@before", its own process and connection), right before or
    after this one's call (alternating)."""
    now = START + timedelta(days=DAYS + 1)
    # the fts statistics as of this size's ANALYZE (a run of several sizes would otherwise
    # reuse the smaller store's common stems for STATS_TTL_S): as a fresh process reads them
    ranking._stats.clear()
    names = list(modes)
    every = [n for name in names for n in ([name, f"{name}@before"] if BASELINE else [name])]
    seconds: dict[str, list[float]] = {m: [] for m in every}
    digests = {m: hashlib.sha256() for m in every}
    embedding: dict[str, list[float]] = {m: [] for m in every}
    server = None
    if BASELINE:
        server = subprocess.Popen(
            [sys.executable, "-c", _SERVE, str(BASELINE.resolve()), url, anima],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def before(q: str, name: str) -> tuple[float, float, str]:
        assert server is not None and server.stdin is not None and server.stdout is not None
        ask = {"q": q, "now": now.isoformat(), "settings": _ARGS[id(modes[name])]}
        server.stdin.write(json.dumps(ask) + "\n")
        server.stdin.flush()
        got = json.loads(server.stdout.readline())
        return got["s"], got["e"], got["r"]

    with psycopg.connect(url, row_factory=dict_row, autocommit=True) as conn:
        conn.execute("SET default_transaction_read_only = on")
        for i, q in enumerate([*asked[:20], *asked]):
            for name in names[i % len(names) :] + names[: i % len(names)]:
                settings = modes[name]
                runs = [name, f"{name}@before"] if BASELINE else [name]
                for run in runs if i % 2 == 0 else runs[::-1]:
                    if run == name:
                        started = time.perf_counter()
                        with conn.transaction():
                            ctx = assemble_context(conn, anima, q, now=now, settings=settings)
                        took, embed_s, text = (
                            time.perf_counter() - started,
                            (ctx.embed_ms or 0.0) / 1e3,
                            ctx.rendered,
                        )
                        if settings.embedder.kind != "none" and ctx.recall_mode != "hybrid":
                            raise SystemExit(f"recall is lexical: {ctx.lexical_reason}")
                    else:
                        took, embed_s, text = before(q, name)
                    if i >= 20:
                        seconds[run].append(took)
                        digests[run].update(text.encode() + b"\0")
                        embedding[run].append(embed_s)
    if server is not None:
        assert server.stdin is not None
        server.stdin.close()
        server.wait()
    out = {}
    for name in every:
        rest = [a - b for a, b in zip(seconds[name], embedding[name], strict=True)]
        out[name] = (sorted(seconds[name]), sorted(embedding[name]), sorted(rest))
        DIGESTS[name] = digests[name].hexdigest()[:16]
    return out


def report(label: str, measured: dict[str, tuple[list[float], list[float], list[float]]]) -> list[float]:
    """Print one line per mode (and each mode's p95 against the first's); returns the seconds
    of the first mode."""
    first = next(iter(measured.values()))[0]
    for name, (secs, embedding, rest) in measured.items():
        line = (
            f"  {label}, {name:10}: p50 {_p(secs, 0.5):6.1f} ms"
            f"   p95 {_p(secs, 0.95):6.1f} ms   max {secs[-1] * 1e3:6.1f} ms   mean {statistics.mean(secs) * 1e3:6.1f} ms"
        )
        if name.split("@")[0] == "hybrid":
            line += (
                f"   | query embedding p50 {_p(embedding, 0.5):5.1f} ms p95 {_p(embedding, 0.95):5.1f} ms"
                f" | without it p50 {_p(rest, 0.5):6.1f} p95 {_p(rest, 0.95):6.1f} ms"
            )
        print(
            line
            + f"   p95 / {next(iter(measured))} {_p(secs, 0.95) / _p(first, 0.95):.2f}"
            + f"  ({len(secs)} questions, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
            + f"  contexts {DIGESTS.get(name, '-')}"
            + _against_before(name, measured),
            flush=True,
        )
    return first


def _against_before(name: str, measured: dict[str, tuple[list[float], list[float], list[float]]]) -> str:
    """For a mode timed beside --baseline's: its p50 and p95 against the baseline's, and
    whether the contexts were the same text."""
    if f"{name}@before" not in measured:
        return ""
    now, then = measured[name][0], measured[f"{name}@before"][0]
    same = "same contexts" if DIGESTS[name] == DIGESTS[f"{name}@before"] else "CONTEXTS DIFFER"
    return f"  | / before: p50 {_p(now, 0.5) / _p(then, 0.5):.2f} p95 {_p(now, 0.95) / _p(then, 0.95):.2f}, {same}"


# --- --beside: other animas in the same store ------------------------------------------
BESIDE_MEMORIES = 2_000
BESIDE_MESSAGES = 2_000


def load_beside(url: str, lines: Lines, k: int, base, embedder) -> None:
    """Animas beside0 .. beside{k-1}, each with its memories and messages (and vectors when
    `base`); an anima already complete is kept, one that is not is loaded again."""
    started, loaded = time.perf_counter(), 0
    for j in range(k):
        anima = f"beside{j}"
        with psycopg.connect(url, row_factory=dict_row, autocommit=True) as conn:
            have = conn.execute(
                """SELECT (SELECT count(*) FROM semantic_memory WHERE anima_id = %(a)s) AS memories,
                          (SELECT count(*) FROM message WHERE anima_id = %(a)s) AS messages,
                          (SELECT count(*) FROM embedding WHERE anima_id = %(a)s) AS vectors""",
                {"a": anima},
            ).fetchone()
            want_vectors = (BESIDE_MEMORIES + BESIDE_MESSAGES) if base is not None else have["vectors"]
            if (have["memories"], have["messages"], have["vectors"]) == (
                BESIDE_MEMORIES,
                BESIDE_MESSAGES,
                want_vectors,
            ):
                continue
            with conn.transaction():
                conn.execute("DELETE FROM embedding WHERE anima_id = %s", (anima,))
                conn.execute("DELETE FROM semantic_memory WHERE anima_id = %s", (anima,))
                conn.execute("DELETE FROM conversation WHERE anima_id = %s", (anima,))
                drawn = len(lines.picked)
                load_messages(conn, lines, BESIDE_MESSAGES, anima, bulk=False)
                mid = len(lines.picked)
                load_memories(conn, lines, BESIDE_MEMORIES, 0, BESIDE_MESSAGES, anima)
                if base is not None:
                    load_vectors(
                        conn, "message", "message", lines.picked[drawn:mid], base, embedder, anima, True
                    )
                    load_vectors(
                        conn, "memory", "semantic_memory", lines.picked[mid:], base, embedder, anima, True
                    )
            loaded += 1
    if loaded:
        vacuum(url, base is not None)
    print(f"beside: {k} animas, {loaded} loaded now ({time.perf_counter() - started:.0f} s)", flush=True)


def dense_plans(url: str, anima: str, question: str, settings: Settings) -> str:
    """How the planner reads each section's nearest neighbours for `anima`: the index scans of
    the plans of the statements recall runs (store/recall_queries.py), the other nodes left out."""
    from anima_pipeline.recall import ranking
    from anima_pipeline.recall.dense import query_vector
    from anima_pipeline.store.recall_queries import SOURCES

    out = []
    with psycopg.connect(url, row_factory=dict_row, autocommit=True) as conn:
        qv, _ = query_vector(conn, settings, question)
        assert qv is not None
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        args = {"anima": anima, "qv": qv.text, "model": qv.model_id, "k": ranking.DENSE_K, "exclude_ids": []}
        args |= {"exclude_sessions": [], "since": None, "until": None, "types": None}
        args |= {"conversation": None, "speaker": None}
        for kind, sql in (
            ("memories", SOURCES["semantic_memory"].dense),
            ("messages", SOURCES["message"].dense),
        ):
            rows = conn.execute(
                "EXPLAIN (ANALYZE, FORMAT JSON) " + sql.format(d=qv.dimension), args
            ).fetchone()
            plan = rows["QUERY PLAN"][0]

            def scans(node: dict) -> list[str]:
                own = (
                    [f"{node['Node Type']} {node.get('Index Name', '')}".strip()]
                    if "Scan" in node["Node Type"] and node.get("Relation Name") == "embedding"
                    else []
                )
                if node["Node Type"] == "Sort":
                    own.append("exact sort")
                return own + [s for c in node.get("Plans", []) for s in scans(c)]

            rows_out = plan["Plan"].get("Actual Rows")
            out.append(
                f"{kind}: {' + '.join(scans(plan['Plan']))}, {rows_out:.0f} rows, {plan['Execution Time']:.1f} ms"
            )
    return "; ".join(out)


def _p(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] * 1e3


def main(argv: list[str] | None = None) -> int:
    global MESSAGES
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=DEFAULT_URL, help="scratch database (created when missing)")
    parser.add_argument("--queries", type=int, default=200, help="questions asked at every size")
    parser.add_argument("--drop", action="store_true", help="drop the scratch database at the end")
    parser.add_argument("--messages", type=int, default=MESSAGES, help="messages of the anima")
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES), help="memory counts measured")
    parser.add_argument(
        "--vectors",
        action="store_true",
        help="every message and memory with a vector (needs pgvector at --url)",
    )
    parser.add_argument(
        "--vectors-from", metavar="URL", help="a store whose message vectors of the base lines to reuse"
    )
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="keep the memories (and vectors) of a previous run of the same single --sizes: no reload",
    )
    parser.add_argument(
        "--neighbours",
        action="store_true",
        help="also the lexical mode with entity neighbours (recall/neighbours.py), taking turns with it",
    )
    parser.add_argument(
        "--beside",
        type=int,
        default=0,
        metavar="K",
        help=f"K other animas of {BESIDE_MEMORIES:,} memories and {BESIDE_MESSAGES:,} messages each (with"
        " --vectors, theirs too): one of them is measured after the big one, with its plans",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="DIR",
        help="another checkout's root (e.g. git worktree add /tmp/before main): each call also from it,"
        " taking turns, its contexts' digest printed beside this one's",
    )
    args = parser.parse_args(argv)
    MESSAGES = args.messages
    rng = random.Random(9)
    lines = Lines(rng)
    ensure_database(args.url)
    reuse = args.reuse and reusable(args.url, args.sizes, args.vectors)
    # "lexical": packed by shares (the defaults); "no-repeats": a line repeating a placed one
    # left out; "second": the second stage on (recall/rerank.py); "hybrid": with vectors
    lexical = mode(embedder={"kind": "none"}, recall={"drop_repeats": False, "second_stage": False})
    lexical_modes = {
        "lexical": lexical,
        "no-repeats": mode(embedder={"kind": "none"}, recall={"drop_repeats": True}),
        "second": mode(embedder={"kind": "none"}, recall={"second_stage": True}),
    }
    if args.neighbours:  # "neighbours": lexical with the entity neighbours joined (one more round trip)
        lexical_modes["neighbours"] = mode(
            embedder={"kind": "none"},
            recall={"drop_repeats": False, "second_stage": False, "neighbours": True},
        )
    dense = mode(embedder={"kind": os.environ.get("ANIMA_EMBEDDER", "local")})
    global BASELINE
    BASELINE = args.baseline
    embedder = base = None
    if args.vectors and not reuse:
        from anima_pipeline.embed.provider import make_embedder

        embedder = make_embedder(dense)
        base = base_vectors(lines, embedder, args.vectors_from, args.url)
    with psycopg.connect(args.url, row_factory=dict_row, autocommit=True) as conn:
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute("SET synchronous_commit = off")
        with conn.transaction():
            drawn = len(lines.picked)
            load_messages(conn, lines, MESSAGES)
        if args.vectors:
            have = conn.execute("SELECT count(*) AS n FROM embedding WHERE kind = 'message'").fetchone()["n"]
            if have < MESSAGES:
                if len(lines.picked) == drawn:
                    raise SystemExit(
                        "--vectors needs the messages loaded in this run: use a new --url or --drop"
                    )
                load_vectors(conn, "message", "message", lines.picked[drawn:], base, embedder)
            if not reuse:
                conn.execute("DELETE FROM embedding WHERE kind = 'memory'")
        if not reuse:
            conn.execute("TRUNCATE semantic_memory CASCADE")
    asked = questions(lines, args.queries)
    results: dict[int, list[float]] = {}
    loaded = 0
    for size in args.sizes:
        started = time.perf_counter()
        drawn = len(lines.picked)
        if reuse:  # the same draws as the run that loaded them, so that the questions are the same
            for _ in memory_rows(lines, size - loaded, loaded, MESSAGES):
                pass
            print(f"memories: {size:,} active, reused", flush=True)
        else:
            with psycopg.connect(args.url, row_factory=dict_row, autocommit=True) as conn:
                conn.execute("SET maintenance_work_mem = '1GB'")
                with conn.transaction():
                    load_memories(conn, lines, size - loaded, loaded, MESSAGES)
                if args.vectors:
                    load_vectors(conn, "memory", "semantic_memory", lines.picked[drawn:], base, embedder)
            vacuum(args.url, args.vectors)
            print(
                f"memories: {size:,} active (loaded and analyzed in {time.perf_counter() - started:.0f} s)",
                flush=True,
            )
        loaded = size
        modes = {**lexical_modes, **({"hybrid": dense} if args.vectors else {})}
        results[size] = report(f"{size:>7,} memories, {MESSAGES:,} messages", measure(args.url, asked, modes))
    if args.beside:
        if args.vectors and base is None:
            from anima_pipeline.embed.provider import make_embedder

            embedder = make_embedder(dense)
            base = base_vectors(lines, embedder, args.vectors_from, args.url)
        load_beside(args.url, lines, args.beside, base if args.vectors else None, embedder)
        modes = {"lexical": lexical, **({"hybrid": dense} if args.vectors else {})}
        label = (
            f"beside0 ({BESIDE_MEMORIES:,} memories, {BESIDE_MESSAGES:,} messages; {args.beside} such animas"
        )
        report(
            label + f" and one of {args.sizes[-1]:,} / {MESSAGES:,})",
            measure(args.url, asked, modes, "beside0"),
        )
        if args.vectors:
            for anima in ("beside0", ANIMA):
                print(
                    f"  nearest-neighbour plans for {anima}: {dense_plans(args.url, anima, asked[0], dense)}"
                )
    if len(args.sizes) > 1:
        ratio = _p(results[args.sizes[-1]], 0.95) / _p(results[args.sizes[0]], 0.95)
        print(f"p95 ratio {args.sizes[-1]:,} / {args.sizes[0]:,} memories: {ratio:.2f}")
    if args.drop:
        drop_database(args.url)
        print(f"dropped {conninfo_to_dict(args.url)['dbname']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
