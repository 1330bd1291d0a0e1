"""Every error of `anima serve` answers one shape, README's `{"error": {"status", "code",
"message", "field", "errors"}}`, with the error's own status and code: 401, 403, 404 (an id and
a route), 405, 409, 413, 422 (a field and a body that is not JSON), 500 and 503 (a lost store)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import httpx2 as httpx
import psycopg
import pytest

from anima_pipeline.config import Settings
from anima_pipeline.memory.models import ErrorResponse
from anima_pipeline.service.http.app import create_app
from anima_pipeline.store.api_keys import create_key
from anima_pipeline.store.db import Database
from anima_pipeline.store.events import Audit
from testkit.live_server import serving

SHAPE = {"status", "code", "message", "field", "errors"}


def _key(db: Database, anima: str = "aria") -> str:
    with db.transaction() as conn:
        key, _ = create_key(conn, Audit(conn=conn, anima_id="", run_id="t", step="keys/create"), anima)
    return key


def _error(r: httpx.Response, status: int, code: str) -> dict:
    assert r.status_code == status, r.text
    ErrorResponse.model_validate_json(r.content)  # exactly the documented schema, no extra key
    assert set(r.json()) == {"error"} and set(r.json()["error"]) == SHAPE, r.text
    err = r.json()["error"]
    assert (err["status"], err["code"]) == (status, code), err
    return err


@pytest.fixture
def api(db: Database, db_url: str, tmp_path) -> Iterator[tuple[httpx.Client, Database]]:
    settings = Settings(database_url=db_url, home=tmp_path)
    with (
        serving(create_app(db, settings, max_body_bytes=4000)) as base,
        httpx.Client(base_url=base) as client,
    ):
        client.headers["Authorization"] = f"Bearer {_key(db)}"
        yield client, db


def test_every_status_answers_the_one_error_shape(api) -> None:
    client, db = api
    v1 = "/v1/animas/aria"
    err = _error(client.get(f"{v1}/status", headers={"Authorization": ""}), 401, "unauthorized")
    assert err["field"] is None and err["errors"] == []
    assert _error(client.get("/v1/animas/bruno/status"), 403, "forbidden")["errors"] == []
    err = _error(client.get(f"{v1}/memories/f-999"), 404, "not_found")
    assert err["field"] == "id" and "f-999 does not exist" in err["message"]
    _error(client.get(f"{v1}/no_such_route"), 404, "not_found")
    _error(client.get("/v2/nothing"), 404, "not_found")
    r = client.put(f"{v1}/status")
    assert _error(r, 405, "method_not_allowed")["errors"] == []  # the key README lists, on every status
    assert r.headers["Allow"] == "GET"
    err = _error(client.post(f"{v1}/memories", json={"content": "x" * 5000}), 413, "body_too_large")
    err = _error(
        client.post(f"{v1}/working_context", json={"session_id": "s", "message": "hi", "budget": "3000"}),
        422,
        "invalid_request",
    )
    assert err["field"] == "budget" and err["errors"][0]["field"] == "budget"
    broken = client.post(
        f"{v1}/memories",
        content=b'{"content": "x",\n "type": wor}',
        headers={"Content-Type": "application/json"},
    )
    err = _error(broken, 422, "invalid_request")
    assert err["field"] == "body" and err["errors"][0]["field"] == "body", err
    # line and column of the fault, not the decoder's offset as if it were an index ("[25]")
    assert err["message"] == "body: not valid JSON: Expecting value at line 2, column 10", err
    assert "[" not in err["message"]
    first = {"conversation_id": "c1", "message_id": "m1", "role": "user", "content": "hello"}
    first["created_at"] = "2026-11-30T10:00:00+08:00"
    assert client.post(f"{v1}/messages", json={"messages": [first]}).status_code == 200
    err = _error(
        client.post(f"{v1}/messages", json={"messages": [{**first, "content": "edited"}]}), 409, "conflict"
    )
    assert err["field"] == "messages[0].content"


def test_a_refused_statement_is_a_500_and_a_lost_store_a_503(db: Database, db_url: str, tmp_path) -> None:
    """The store refusing a statement (a trigger) is `store_error`; a store that cannot be
    reached, at the key check or inside a route, is `store_unavailable` (503), without the
    server's address in the answer."""
    key = _key(db)
    with db.transaction() as conn:
        conn.execute(
            """CREATE FUNCTION refuse_all() RETURNS trigger LANGUAGE plpgsql AS $$
               BEGIN RAISE EXCEPTION 'refused'; END $$"""
        )
        conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON conversation FOR EACH ROW EXECUTE FUNCTION refuse_all()"
        )
    lost = _LostAfter(db, checks=1)
    settings = Settings(database_url=db_url, home=tmp_path)
    with serving(create_app(db, settings)) as base, serving(create_app(lost, settings)) as lost_base:
        auth = {"Authorization": f"Bearer {key}"}
        refused = httpx.put(f"{base}/v1/animas/aria/conversations/c1", json={}, headers=auth)
        assert "nothing was written" in _error(refused, 500, "store_error")["message"]
        inside = httpx.get(f"{lost_base}/v1/animas/aria/status", headers=auth)  # the key check passes
        err = _error(inside, 503, "store_unavailable")
        assert "retry" in err["message"] and "127.0.0.1" not in err["message"]
        at_the_key = httpx.get(f"{lost_base}/v1/animas/aria/status", headers=auth)  # now it does not
        _error(at_the_key, 503, "store_unavailable")


class _LostAfter(Database):
    """A store whose server goes away after `checks` transactions (as a restarted server would)."""

    def __init__(self, db: Database, checks: int) -> None:  # no pool of its own: `db`'s
        self.db, self.left, self.url = db, checks, db.url

    def close(self) -> None:
        pass

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection]:
        if self.left <= 0:
            raise psycopg.OperationalError(
                'connection to server at "127.0.0.1", port 5432 failed: server closed'
            )
        self.left -= 1
        with self.db.transaction() as conn:
            yield conn


@pytest.mark.parametrize(
    ("method", "path", "body", "field", "words"),
    [
        ("PUT", "/conversations/a%FF%FE", b"{}", "conversation_id", "byte 0xFF at character 1"),
        ("GET", "/memories/f-1%FF", None, "id", "byte 0xFF at character 3"),
        ("GET", "/context?query=a%FFb", None, "query", "byte 0xFF at character 1"),
        ("POST", "/memories", b'{"content": "ab\xff"}', "content", "byte 0xFF at character 2"),
        ("POST", "/memories", b'{"content": "a\xed\xa0b"}', "content", "byte 0xED at character 1"),
        (
            "POST",
            "/messages",
            (
                b'{"messages": [{"conversation_id": "c1", "message_id": "m1", "role": "user",'
                b' "content": "\xc3\x28", "created_at": "2026-11-30T09:00:00+08:00"}]}'
            ),
            "messages[0].content",
            "byte 0xC3 at character 0",
        ),
        ("POST", "/working_context", b'{"session_id": "c1", "message": "\xff"}', "message", "byte 0xFF"),
        ("POST", "/memories", b'\xff{"content": "a"}', "body", "byte 0xFF at character 0"),
    ],
)
def test_invalid_utf8_in_a_path_a_query_or_a_body_is_a_422_naming_the_field(
    api, method: str, path: str, body: bytes | None, field: str, words: str
) -> None:
    """Starlette would decode it to U+FFFD (stored so: a conversation `a\\ufffd\\ufffd\\ufffd`),
    FastAPI answer 400 naming nothing; the guard answers first (service/http/utf8.py)."""
    client, db = api
    headers = {"Content-Type": "application/json"}
    r = client.request(method, f"/v1/animas/aria{path}", content=body, headers=headers)
    err = _error(r, 422, "invalid_request")
    assert err["field"] == field and "is not valid UTF-8" in err["message"] and words in err["message"], err
    with db.transaction() as conn:  # nothing stored
        for table in ("conversation", "message", "semantic_memory"):
            assert conn.execute(f"SELECT count(*) AS n FROM {table}").fetchone()["n"] == 0


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("PUT", "/conversations/a%ED%A0%80", b"{}", "conversation_id"),
        ("GET", "/context?query=a%ED%A0%80", None, "query"),
        ("POST", "/memories", b'{"content": "a\xed\xa0\x80"}', "content"),
    ],
)
def test_a_surrogate_sent_as_utf8_bytes_is_refused_as_a_lone_surrogate(
    api, method: str, path: str, body: bytes | None, field: str
) -> None:
    """`%ED%A0%80` is what `\ud800` becomes on the wire: refused in the words a JSON escape
    gets at every door, not as a byte (Starlette had stored it as `a\ufffd\ufffd\ufffd`)."""
    client, db = api
    r = client.request(
        method, f"/v1/animas/aria{path}", content=body, headers={"Content-Type": "application/json"}
    )
    err = _error(r, 422, "invalid_request")
    assert err["field"] == field and err["message"] == (
        f"{field}: contains a lone surrogate (\\ud800) at character 1, which is not Unicode text"
    ), err
    with db.transaction() as conn:
        assert conn.execute("SELECT count(*) AS n FROM conversation").fetchone()["n"] == 0


def test_a_json_escaped_lone_surrogate_is_refused_by_the_request_model(api) -> None:
    client, _ = api
    r = client.post(
        "/v1/animas/aria/memories",
        content=b'{"content": "a\\ud800b"}',
        headers={"Content-Type": "application/json"},
    )
    err = _error(r, 422, "invalid_request")
    assert err["field"] == "content" and "lone surrogate (\\ud800) at character 1" in err["message"]
    # valid UTF-8 beyond ASCII passes the guard untouched
    ok = client.put("/v1/animas/aria/conversations/%E4%BC%9A%E8%AF%9D", json={"title": "会话 ✓"})
    assert ok.status_code == 200 and ok.json()["id"] == "会话" and ok.json()["title"] == "会话 ✓"
