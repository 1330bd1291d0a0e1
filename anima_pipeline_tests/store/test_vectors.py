"""Vectors in pgvector (README, "Recall by meaning"): keyed by model id, pending/backlog, delete; and the same
migrations on a server without pgvector, where every vector function is a no-op.

CI's server at 5432 (PostgreSQL 15) has no pgvector: the tests needing it run on one embedded
PostgreSQL 18 for the session (`vector_db_url`, conftest)."""

from __future__ import annotations

import numpy as np
import psycopg
from psycopg.rows import dict_row

from anima_pipeline.config import Settings
from anima_pipeline.embed.remote import HttpEmbedder
from anima_pipeline.memory.facade import AnimaMemory
from anima_pipeline.store import vectors
from testkit.fake_embeddings_api import DIM, fake_embeddings


def _msg(i: int, text: str, conv: str = "c1") -> dict:
    return {
        "conversation_id": conv,
        "message_id": f"m{i}",
        "role": "user",
        "speaker": "Ines",
        "content": text,
        "created_at": f"2026-11-2{i % 9}T10:00:00+00:00",
    }


def _seed(url: str, tmp_path) -> AnimaMemory:
    mem = AnimaMemory(
        url, "aria", settings=Settings(database_url=url, home=tmp_path, embedder={"kind": "none"})
    )
    mem.append(
        [_msg(i, t) for i, t in enumerate(["the red kite flew high", "soup for dinner", "a kite again"])]
    )
    mem.remember("Ines flies kites on Sundays")
    return mem


def test_without_pgvector_every_vector_function_is_a_noop(db_url, tmp_path) -> None:
    with psycopg.connect(db_url, row_factory=dict_row) as conn:
        if vectors.available(conn):  # the test server has pgvector after all: nothing to show here
            return
        assert "no pgvector" in (vectors.unavailable_reason(conn) or "")
        assert vectors.delete_vectors(conn, "aria", "message", [1, 2]) == 0
        assert vectors.backlog(conn, "any-model") == {}


def test_vectors_keyed_by_model_pending_and_deleted(vector_db_url, tmp_path) -> None:
    mem = _seed(vector_db_url, tmp_path)
    with fake_embeddings() as server, psycopg.connect(vector_db_url, row_factory=dict_row) as conn:
        assert vectors.available(conn) and vectors.unavailable_reason(conn) is None
        one = HttpEmbedder(server.url, "bag-a", batch=2)
        assert vectors.backlog(conn, one.model_id) == {"memory": 1, "message": 3}
        report = vectors.embed_pending(conn, one, batch=2)
        assert report.embedded == {"memory": 1, "message": 3} and report.left == {"memory": 0, "message": 0}
        assert [len(r) for r in server.requests] == [1, 1, 2, 1]  # the dimension probe, then batches
        again = vectors.embed_pending(conn, one)  # nothing left: no request at all
        assert again.total == 0 and len(server.requests) == 4
        # another model: embedded beside the first, not over it
        two = HttpEmbedder(server.url, "bag-b")
        assert vectors.backlog(conn, two.model_id) == {"memory": 1, "message": 3}
        assert vectors.embed_pending(conn, two, kinds=["message"]).embedded == {"message": 3}
        rows = conn.execute("SELECT model_id, count(*) AS n FROM embedding GROUP BY 1 ORDER BY 1").fetchall()
        assert [(r["model_id"], r["n"]) for r in rows] == [("http:bag-a", 4), ("http:bag-b", 3)]
        # one HNSW index per (model, kind), partial on both
        idx = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = %s",
            (vectors.index_name(one.model_id, "message"),),
        ).fetchone()
        assert (
            "hnsw" in idx["indexdef"]
            and f"vector({DIM})" in idx["indexdef"]
            and "'http:bag-a'" in idx["indexdef"]
        )
        # a purge erases the item's vectors under every model
        ids = [
            r["id"] for r in conn.execute("SELECT id FROM message WHERE content LIKE '%%kite%%'").fetchall()
        ]
        assert vectors.delete_vectors(conn, "aria", "message", ids) == 4
        assert vectors.backlog(conn, one.model_id) == {"memory": 0, "message": 2}
        # a failing embedder reports and leaves the rest pending
        server.fail_next = 99
        failing = HttpEmbedder(server.url, "bag-a", retries=0)
        report = vectors.embed_pending(conn, failing)
        assert report.error and "503" in report.error and report.left == {"memory": 0, "message": 2}
    mem.close()


def test_text_form_round_trips(vector_db_url) -> None:
    v = np.array([0.25, -1.5, 3e-8], dtype=np.float32)
    with psycopg.connect(vector_db_url) as conn:
        back = conn.execute("SELECT %s::vector::text", (vectors.to_text(v),)).fetchone()[0]
    assert np.allclose(np.array(back.strip("[]").split(","), dtype=float), v)


def test_anima_embed_backfills_and_status_shows_the_backlog(vector_db_url, tmp_path, monkeypatch) -> None:
    import json

    from typer.testing import CliRunner

    from anima_pipeline import cli
    from anima_pipeline.config import get_settings

    _seed(vector_db_url, tmp_path).close()
    with fake_embeddings() as server:
        for name, value in {
            "ANIMA_HOME": str(tmp_path / "home"),
            "ANIMA_DATABASE_URL": vector_db_url,
            "ANIMA_EMBEDDER": "http",
            "ANIMA_EMBEDDER_URL": server.url,
            "ANIMA_EMBEDDER_MODEL": "bag",
        }.items():
            monkeypatch.setenv(name, value)
        get_settings.cache_clear()
        runner = CliRunner()
        before = json.loads(runner.invoke(cli.app, ["status", "--json"]).stdout)["recall"]
        assert before["backlog"] == {"memory": 1, "message": 3} and before["mode"] == "lexical"
        assert "no vectors stored yet" in before["lexical_reason"]
        result = runner.invoke(cli.app, ["embed", "--kind", "message"])
        assert result.exit_code == 0, result.output
        assert "embedded 3 message(s)" in result.stdout and "waiting: 0 message(s)" in result.stdout
        after = json.loads(runner.invoke(cli.app, ["status", "--json"]).stdout)["recall"]
        assert after["mode"] == "hybrid" and after["model"] == "http:bag" and after["dimension"] == DIM
        assert after["backlog"] == {"memory": 1, "message": 0}
        assert runner.invoke(cli.app, ["embed", "--kind", "nothing"]).exit_code == 2
    get_settings.cache_clear()


def test_a_model_known_on_a_connection_is_not_asked_again_and_a_no_is_never_kept(
    vector_db_url, monkeypatch
) -> None:
    """What each context call asks before embedding (the tables, the model's dimension) is kept
    per connection once it is a committed "yes": a second call asks nothing (a row deleted
    behind its back is not seen until KNOWN_TTL_S), a model written by the asking transaction
    itself is not kept (its transaction may roll back), and a "no" is asked again every time."""
    model = "test:cache-probe"
    with psycopg.connect(vector_db_url, row_factory=dict_row) as conn:
        assert vectors.model_dimension(conn, model) is None
        vectors.ensure_model(conn, model, 5)
        assert vectors.model_dimension(conn, model) == 5  # written by this transaction: not kept
        conn.rollback()
        assert vectors.model_dimension(conn, model) is None  # a "no": asked again next time
        vectors.ensure_model(conn, model, 5)
        conn.commit()
        assert vectors.available(conn) and vectors.model_dimension(conn, model) == 5  # kept now
        with psycopg.connect(vector_db_url, autocommit=True) as other:
            other.execute("DELETE FROM embedding_model WHERE model_id = %s", (model,))
        assert vectors.model_dimension(conn, model) == 5  # the kept answer: no statement
        monkeypatch.setattr(vectors, "KNOWN_TTL_S", 0.0)
        assert vectors.model_dimension(conn, model) is None  # expired: read again
    with psycopg.connect(vector_db_url, row_factory=dict_row) as fresh:  # another connection asks itself
        assert vectors.model_dimension(fresh, model) is None
