"""What an embedder answers is checked before it is stored or queried: NaN, infinity, zeros,
another dimension, a vector too few or ragged rows are an embedder failure like a dead server.
Recall falls back to lexical and `lexical_reason` says why, over the facade and over HTTP
(never psycopg's "NaN not allowed in vector" as a 500), and `embed_pending` stores nothing and
counts the backlog. The broken answers come from the fake OpenAI-compatible server over real
HTTP (testkit/fake_embeddings_api.py); the vectors live on a server with pgvector
(`vector_db_url`, conftest)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx2 as httpx
import numpy as np
import psycopg
import pytest
from psycopg.rows import dict_row

from anima_pipeline.config import Settings
from anima_pipeline.embed.embedder import EmbedderError, checked
from anima_pipeline.embed.remote import HttpEmbedder
from anima_pipeline.memory.facade import AnimaMemory
from anima_pipeline.service.http.app import create_app
from anima_pipeline.store import vectors
from anima_pipeline.store.api_keys import create_key
from anima_pipeline.store.db import Database
from anima_pipeline.store.events import Audit
from testkit.fake_embeddings_api import DIM, FakeEmbeddings, fake_embeddings
from testkit.live_server import serving

# each broken answer and the words of its failure
BROKEN = {
    "nan": "NaN or infinity",
    "inf": "NaN or infinity",
    "zero": "all zeros",
    "short": f"{DIM - 1} dimensions where {DIM} were expected",
    "ragged": f"{DIM + 1} dimensions where {DIM} were expected",
    "fewer": "0 embeddings for 1 inputs",
}
MODEL = "bag"


@contextmanager
def broken(answer: str) -> Iterator[FakeEmbeddings]:
    with fake_embeddings() as server:
        server.answer = answer
        yield server


def _settings(url: str, tmp_path, server: FakeEmbeddings) -> Settings:
    return Settings(
        database_url=url,
        home=tmp_path,
        timezone="UTC",
        embedder={"kind": "http", "url": server.url, "model": MODEL},
    )


def _msg(i: int, text: str) -> dict:
    return {
        "conversation_id": "c1",
        "message_id": f"m{i}",
        "role": "user",
        "speaker": "Ines",
        "content": text,
        "created_at": f"2026-11-20T1{i}:00:00+00:00",
    }


@pytest.fixture
def embedded_store(vector_db_url, tmp_path) -> str:
    """A store whose messages and memory have vectors of the `bag` model (16 dimensions)."""
    with fake_embeddings() as good:
        with AnimaMemory(
            vector_db_url, "aria", settings=_settings(vector_db_url, tmp_path / "a", good)
        ) as mem:
            mem.append([_msg(i, t) for i, t in enumerate(["the red kite flew high", "soup for dinner"])])
            mem.remember("Ines flies kites on Sundays")
        with psycopg.connect(vector_db_url, row_factory=dict_row) as conn:
            report = vectors.embed_pending(conn, HttpEmbedder(good.url, MODEL), commit=conn.commit)
            assert report.error is None and vectors.backlog(conn, f"http:{MODEL}") == {
                "memory": 0,
                "message": 0,
            }
    return vector_db_url


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        ("nan", "embedding 0 holds NaN or infinity"),
        ("inf", "embedding 0 holds NaN or infinity"),
        ("zero", "embedding 0 is all zeros"),
        ("ragged", "not one list of numbers per text"),
        ("fewer", "1 embeddings for 2 inputs"),
    ],
)
def test_a_broken_answer_is_an_embedder_error(answer: str, words: str) -> None:
    with broken(answer) as server, pytest.raises(EmbedderError, match=words):
        HttpEmbedder(server.url, MODEL, retries=0).embed(["a kite", "a dog"])


def test_a_dimension_other_than_the_first_answers_is_an_embedder_error() -> None:
    with fake_embeddings() as server:
        emb = HttpEmbedder(server.url, MODEL, retries=0)
        assert emb.dimension == DIM
        server.answer = "short"
        with pytest.raises(EmbedderError, match=f"{DIM - 1} dimensions where {DIM} were expected"):
            emb.embed(["a kite"])


def test_checked_normalises_and_keeps_huge_finite_numbers() -> None:
    out = checked([[3.0, 4.0], [1e300, 1e300]], 2, 2, "test")
    assert out.dtype == np.float32 and np.allclose(out, [[0.6, 0.8], [0.70710677, 0.70710677]])
    assert checked([], 0, 2, "test").shape == (0, 2)
    for rows, words in [([[1.0, "x"]], "not one list of numbers"), ([[1.0]], "1 dimensions where 2")]:
        with pytest.raises(EmbedderError, match=words):
            checked(rows, 1, 2, "test")


@pytest.mark.parametrize("answer", list(BROKEN))
def test_recall_falls_back_to_lexical_over_the_facade(embedded_store: str, tmp_path, answer: str) -> None:
    with broken(answer) as server:
        with AnimaMemory(embedded_store, "aria", settings=_settings(embedded_store, tmp_path, server)) as mem:
            ctx = mem.context("kite")
            page = mem.search("kite")
            turn = mem.working_context("c1", message="tell me about the kite")
    for out in (ctx, page, turn):
        assert out.recall_mode == "lexical", answer
        assert out.lexical_reason and "embedder failed" in out.lexical_reason
        assert BROKEN[answer] in out.lexical_reason
    assert any("kite" in i.text for i in ctx.items())  # the lexical ranking answered
    assert any("kite" in i.text for i in page.items)


def test_recall_falls_back_to_lexical_over_http(embedded_store: str, tmp_path) -> None:
    db = Database(embedded_store, max_size=4)
    with db.transaction() as conn:
        key, _ = create_key(conn, Audit(conn=conn, anima_id="", run_id="t", step="keys/create"), "aria")
    auth = {"Authorization": f"Bearer {key}"}
    try:
        with (
            broken("nan") as server,
            serving(create_app(db, _settings(embedded_store, tmp_path, server))) as base,
        ):
            v1 = f"{base}/v1/animas/aria"
            answers = [
                httpx.get(f"{v1}/context", params={"query": "kite"}, headers=auth),
                httpx.get(f"{v1}/search", params={"query": "kite"}, headers=auth),
                httpx.post(
                    f"{v1}/working_context", json={"session_id": "c1", "message": "the kite?"}, headers=auth
                ),
            ]
    finally:
        db.close()
    for r in answers:
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["recall_mode"] == "lexical" and "NaN or infinity" in body["lexical_reason"]


@pytest.mark.parametrize("answer", ["nan", "short", "fewer"])
def test_embedding_stores_nothing_broken_and_counts_the_backlog(vector_db_url, tmp_path, answer: str) -> None:
    with fake_embeddings() as good:
        with AnimaMemory(vector_db_url, "aria", settings=_settings(vector_db_url, tmp_path, good)) as mem:
            mem.remember("Ines flies kites on Sundays")
        with psycopg.connect(vector_db_url, row_factory=dict_row) as conn:
            vectors.embed_pending(conn, HttpEmbedder(good.url, MODEL), commit=conn.commit)
            with AnimaMemory(vector_db_url, "aria", settings=_settings(vector_db_url, tmp_path, good)) as mem:
                mem.append([_msg(i, t) for i, t in enumerate(["one kite", "two kites", "three"])])
                mem.remember("Ines has a blue kite")
            conn.execute("DELETE FROM embedding WHERE kind = 'message'")  # the append's background pass
            conn.commit()
            before = conn.execute("SELECT count(*) AS n FROM embedding").fetchone()["n"]
            with broken(answer) as server:
                report = vectors.embed_pending(
                    conn, HttpEmbedder(server.url, MODEL, retries=0), commit=conn.commit
                )
            assert report.error and report.total == 0, report
            assert report.left == {"memory": 1, "message": 3}
            assert conn.execute("SELECT count(*) AS n FROM embedding").fetchone()["n"] == before
