"""Forgetting a big anima: 100,000 memories and 1,000,000 messages (docs/forget.md, "Speed").

Run:  .venv/bin/python -m benchmarks.forget_scale [--url URL] [--memories 100000]
          [--messages 1000000] [--no-index-sample 1000] [--drop]

A scratch database (default ``postgresql://postgres@127.0.0.1:5432/anima_forget_scale``) is
built once and kept as a template (``--drop`` drops it at the end): one anima with
``--messages`` messages (conversations of 50 synthetic lines) and ``--memories`` memories
(one to three source conversations each, one in five deprecated and superseded by another,
one in ten cited by a message, one create event each in the audit log), and a bystander
anima of 1,000 messages and 100 memories that no forget may touch. Text is made up (random
words and names), loaded with COPY, then VACUUM ANALYZE.

Each measurement runs on a fresh copy of the template (CREATE DATABASE ... TEMPLATE) through
the same function `anima forget` calls (anima_pipeline.memory.forget.forget):

1. purge of one conversation (its 50 messages and the memories citing only it);
2. purge of the whole anima (every row of it, the audit log, one tombstone);
3. the cost of a missing foreign-key index: deleting ``--no-index-sample`` memories with
   and without ``semantic_memory_superseded_idx`` and ``memory_reference_memory_fk_idx``
   (each deleted row otherwise scans both tables for rows pointing at it), printed as a
   ratio and extrapolated to the whole anima.
"""

from __future__ import annotations

import argparse
import random
import time
from datetime import UTC, datetime, timedelta

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from anima_pipeline.config import Settings
from anima_pipeline.memory.forget import forget
from anima_pipeline.store.db import Database
from anima_pipeline.store.migrations import migrate

ANIMA, BYSTANDER = "big", "bystander"
DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/anima_forget_scale"
PER_CONVERSATION = 50
START = datetime(2021, 1, 1, tzinfo=UTC)
WORDS = (
    "river garden morning coffee train city winter music letter doctor market bicycle school "
    "mountain kitchen friday birthday concert library harbour sister brother office holiday "
    "painting recipe weekend project meeting airport beach forest dinner breakfast novel"
).split()


def _db(url: str, name: str) -> str:
    params = conninfo_to_dict(url)
    params["dbname"] = name
    return make_conninfo(**params)


def _names(rng: random.Random, n: int) -> list[str]:
    syl = "ka lo mi ra te su ve no di ba fe zo ri an el is or ul ya pe".split()
    return sorted({(rng.choice(syl) + rng.choice(syl) + rng.choice(syl)).capitalize() for _ in range(n)})


def _sentence(rng: random.Random, names: list[str]) -> str:
    words = rng.sample(WORDS, 7)
    return f"{rng.choice(names)} talked about the {' '.join(words)} with {rng.choice(names)}."


def _copy(conn: psycopg.Connection, table: str, cols: list[str], rows) -> None:
    with conn.cursor().copy(f"COPY {table} ({', '.join(cols)}) FROM STDIN") as cp:
        for row in rows:
            cp.write_row(row)


def build(url: str, messages: int, memories: int) -> None:
    """The template database: one big anima and a bystander, as described above."""
    rng = random.Random(21)
    names = _names(rng, 3000)
    migrate(url)
    with psycopg.connect(url) as conn:
        for anima, n_msg, n_mem in ((ANIMA, messages, memories), (BYSTANDER, 1000, 100)):
            convs = max(1, n_msg // PER_CONVERSATION)
            t = time.monotonic()
            _copy(
                conn,
                "conversation",
                ["anima_id", "id", "created_at", "updated_at"],
                ((anima, f"c{i}", START, START) for i in range(convs)),
            )
            _copy(
                conn,
                "message",
                ["anima_id", "conversation_id", "external_id", "role", "content", "created_at"],
                (
                    (
                        anima,
                        f"c{i // PER_CONVERSATION}",
                        str(i % PER_CONVERSATION),
                        "user" if i % 2 == 0 else "assistant",
                        _sentence(rng, names),
                        START + timedelta(minutes=i),
                    )
                    for i in range(n_msg)
                ),
            )
            first = conn.execute("SELECT coalesce(max(id), 0) AS n FROM semantic_memory").fetchone()[0] + 1
            _copy(
                conn,
                "semantic_memory",
                ["anima_id", "type", "content", "source_sessions", "status", "observed_at"],
                (
                    (
                        anima,
                        "world",
                        _sentence(rng, names),
                        "{"
                        + ",".join(f"c{rng.randrange(convs)}" for _ in range(1 + (i % 3 == 0) + (i % 7 == 0)))
                        + "}",
                        "deprecated" if i % 5 == 4 else "active",
                        START + timedelta(hours=i),
                    )
                    for i in range(n_mem)
                ),
            )
            # one in five deprecated, superseded by the memory after it; one in ten cited
            conn.execute(
                """UPDATE semantic_memory SET superseded_by = id + 1
                   WHERE anima_id = %s AND status = 'deprecated' AND id + 1 < %s + %s""",
                (anima, first, n_mem),
            )
            conn.execute(
                """INSERT INTO memory_reference (anima_id, memory_id, cited_memory_id, message_id, conversation_id, referenced_at)
                   SELECT s.anima_id, s.id, s.id, m.id, m.conversation_id, m.created_at
                   FROM semantic_memory s
                   JOIN LATERAL (SELECT id, conversation_id, created_at FROM message
                                 WHERE anima_id = s.anima_id AND conversation_id = s.source_sessions[1]
                                 ORDER BY id LIMIT 1) m ON true
                   WHERE s.anima_id = %s AND s.id %% 10 = 0""",
                (anima,),
            )
            conn.execute(
                """INSERT INTO memory_event (anima_id, table_name, memory_id, op, after, run_id, day, step)
                   SELECT anima_id, 'semantic_memory', id::text, 'create', jsonb_build_object('content', content),
                          'bench-load', observed_at::date, 'semantic_memory/extracted'
                   FROM semantic_memory WHERE anima_id = %s""",
                (anima,),
            )
            conn.commit()
            print(
                f"loaded {anima}: {n_msg:,} messages, {n_mem:,} memories in {time.monotonic() - t:.1f}s",
                flush=True,
            )
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def counts(url: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        return {
            t: conn.execute(f"SELECT count(*) FROM {t} WHERE anima_id = %s", (ANIMA,)).fetchone()[0]
            for t in ("message", "semantic_memory", "memory_reference", "memory_event")
        }


def clone(admin: str, template: str, name: str) -> str:
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    return _db(admin, name)


def drop(admin: str, name: str) -> None:
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def timed_forget(url: str, kind: str, target: str) -> tuple[float, dict]:
    db = Database(url, max_size=2)
    try:
        settings = Settings(database_url=url)
        t = time.monotonic()
        report = forget(db, settings, ANIMA, kind, target, purge=True, requested_by="benchmark")  # type: ignore[arg-type]
        took = time.monotonic() - t
        with db.transaction() as conn:
            bystander = conn.execute(
                "SELECT count(*) AS n FROM message WHERE anima_id = %s", (BYSTANDER,)
            ).fetchone()
        assert bystander["n"] == 1000, "a forget touched another anima"
        return took, {t: c.erased for t, c in report.tables.items() if c.erased}
    finally:
        db.close()


def delete_sample(url: str, n: int, with_index: bool) -> float:
    """Delete `n` memories cited by nothing but superseding others (the FK checks that cost)."""
    with psycopg.connect(url) as conn:
        if not with_index:
            conn.execute("DROP INDEX semantic_memory_superseded_idx")
            conn.execute("DROP INDEX memory_reference_memory_fk_idx")
        ids = [
            r[0]
            for r in conn.execute(
                """SELECT id FROM semantic_memory s WHERE anima_id = %s
                   AND NOT EXISTS (SELECT 1 FROM semantic_memory o WHERE o.superseded_by = s.id)
                   AND NOT EXISTS (SELECT 1 FROM memory_reference r WHERE r.memory_id = s.id)
                   ORDER BY id LIMIT %s""",
                (ANIMA, n),
            ).fetchall()
        ]
        conn.commit()
        t = time.monotonic()
        for i in ids:  # one statement per row: what a cascade over lineage does row by row
            conn.execute("DELETE FROM semantic_memory WHERE id = %s", (i,))
        took = time.monotonic() - t
        conn.rollback()
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default=DEFAULT_URL)
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--no-index-sample", type=int, default=1000)
    ap.add_argument("--drop", action="store_true")
    args = ap.parse_args()
    template = conninfo_to_dict(args.url)["dbname"]
    admin = _db(args.url, "postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (template,)).fetchone()
        if not exists:
            conn.execute(f'CREATE DATABASE "{template}"')
    if not exists or counts(args.url)["semantic_memory"] != args.memories:
        if exists:
            drop(admin, template)
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{template}"')
        build(args.url, args.messages, args.memories)
    else:
        migrate(args.url)
    sizes = counts(args.url)
    print(f"anima {ANIMA!r}: " + ", ".join(f"{v:,} {k}" for k, v in sizes.items()), flush=True)

    work = clone(admin, template, f"{template}_run")
    try:
        took, erased = timed_forget(work, "conversation", "c7")
        print(f"purge of one conversation: {took:.2f}s, erased {erased}", flush=True)
        took_anima, erased = timed_forget(work, "anima", ANIMA)
        print(f"purge of the whole anima: {took_anima:.1f}s, erased {erased}", flush=True)
    finally:
        drop(admin, f"{template}_run")

    n = args.no_index_sample
    work = clone(admin, template, f"{template}_run")
    try:
        indexed = delete_sample(work, n, with_index=True)
        bare = delete_sample(work, n, with_index=False)
    finally:
        drop(admin, f"{template}_run")
    per_bare = bare / n
    print(
        f"deleting {n:,} memories one by one: {indexed:.2f}s with the foreign-key indexes, {bare:.2f}s without "
        f"(ratio {bare / max(indexed, 1e-9):.1f}); without them {sizes['semantic_memory']:,} memories would take "
        f"about {per_bare * sizes['semantic_memory'] / 60:.0f} min"
    )
    if args.drop:
        drop(admin, template)


if __name__ == "__main__":
    main()
