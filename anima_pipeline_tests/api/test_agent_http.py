"""The HTTP service over real HTTP (uvicorn on a free local port, httpx2 as the client) and a
real PostgreSQL: keys, append, context, search, remember, errors and limits."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import httpx2 as httpx
import pytest

from anima_pipeline.config import Settings
from anima_pipeline.service.http.app import create_app
from anima_pipeline.store.api_keys import create_key
from anima_pipeline.store.db import Database
from anima_pipeline.store.events import Audit
from testkit.live_server import serving

TZ = ZoneInfo("Asia/Shanghai")


def _key(db: Database, anima: str) -> str:
    with db.transaction() as conn:
        key, _ = create_key(conn, Audit(conn=conn, anima_id="", run_id="t", step="keys/create"), anima)
    return key


def msg(i: int, conv: str = "c1", content: str | None = None, **extra) -> dict:
    when = datetime(2026, 11, 30, 9, 0, tzinfo=TZ) + timedelta(seconds=i)
    return {
        "conversation_id": conv,
        "message_id": f"m{i}",
        "role": "user" if i % 2 == 0 else "assistant",
        "content": content or f"message number {i}",
        "created_at": when.isoformat(),
        **extra,
    }


@pytest.fixture
def api(db: Database, db_url: str, tmp_path) -> Iterator[tuple[str, Database]]:
    with serving(create_app(db, Settings(database_url=db_url, home=tmp_path))) as base:
        yield base, db


def section(ctx: dict, name: str) -> list[dict]:
    return next(s["items"] for s in ctx["sections"] if s["name"] == name)


def _count(db: Database, table: str, anima: str) -> int:
    with db.transaction() as conn:
        return conn.execute(f"SELECT count(*) AS n FROM {table} WHERE anima_id = %s", (anima,)).fetchone()[
            "n"
        ]


def test_docs_and_openapi_are_served(api) -> None:
    base, _ = api
    assert httpx.get(f"{base}/docs").status_code == 200
    paths = httpx.get(f"{base}/openapi.json").json()["paths"]
    assert "/v1/animas/{anima_id}/messages" in paths and "/v1/animas/{anima_id}/context" in paths


def test_append_is_idempotent_and_context_answers(api) -> None:
    base, db = api
    auth = {"Authorization": f"Bearer {_key(db, 'aria')}"}
    body = {
        "messages": [
            msg(0, content="My sister Lena moved to Lisbon last spring."),
            msg(1, content="Lisbon is lovely; does Lena like it there?"),
        ]
    }
    r = httpx.post(f"{base}/v1/animas/aria/messages", json=body, headers=auth)
    assert r.status_code == 200, r.text
    assert r.json()["added"] == 2 and r.json()["conversations_added"] == 1
    assert r.json()["days"] == ["2026-11-30"]
    again = httpx.post(f"{base}/v1/animas/aria/messages", json=body, headers=auth).json()
    assert again["added"] == 0 and _count(db, "message", "aria") == 2
    ctx = httpx.get(f"{base}/v1/animas/aria/context", params={"query": "Where did Lena move?"}, headers=auth)
    assert ctx.status_code == 200, ctx.text
    assert [s["name"] for s in ctx.json()["sections"]] == ["resident", "summaries", "memories", "episodic"]
    episodic = section(ctx.json(), "episodic")
    # a relative time phrase is shown as said, with what it meant the day it was said
    assert [m["text"] for m in episodic][:1] == ["My sister Lena moved to Lisbon last spring (spring 2026)."]
    assert "My sister Lena moved to Lisbon last spring (spring 2026)." in ctx.json()["rendered"]
    # the current conversation is already in the window: not recalled again
    same = httpx.get(
        f"{base}/v1/animas/aria/context",
        params={"query": "Where did Lena move?", "session_id": "c1"},
        headers=auth,
    )
    assert section(same.json(), "episodic") == []


def test_a_key_opens_its_own_anima_only(api) -> None:
    base, db = api
    key_a = _key(db, "aria")
    _key(db, "bruno")
    auth_a = {"Authorization": f"Bearer {key_a}"}
    with db.transaction() as conn:
        conn.execute(
            "INSERT INTO semantic_memory (anima_id, type, content) VALUES ('bruno', 'world', 'Bruno hides the spare key under the blue pot')"
        )
    other = httpx.get(f"{base}/v1/animas/bruno/context", params={"query": "spare key"}, headers=auth_a)
    nobody = httpx.get(f"{base}/v1/animas/nobody/context", params={"query": "spare key"}, headers=auth_a)
    assert other.status_code == 403 and nobody.status_code == 403
    assert "blue pot" not in other.text
    assert other.json() == nobody.json()  # the same words whether the anima exists or not
    for path, kwargs in [
        ("messages", {"json": {"messages": [msg(0)]}}),
        ("memories", {"json": {"content": "planted fact"}}),
    ]:
        assert httpx.post(f"{base}/v1/animas/bruno/{path}", headers=auth_a, **kwargs).status_code == 403
    assert (
        httpx.get(f"{base}/v1/animas/bruno/search", params={"query": "key"}, headers=auth_a).status_code
        == 403
    )
    assert httpx.get(f"{base}/v1/animas/bruno/status", headers=auth_a).status_code == 403
    # a message naming another anima inside the body of one's own anima is refused too
    r = httpx.post(
        f"{base}/v1/animas/aria/messages", json={"messages": [msg(0, anima_id="bruno")]}, headers=auth_a
    )
    assert r.status_code == 403 and r.json()["error"]["field"] == "anima_id"
    assert _count(db, "message", "bruno") == 0 and _count(db, "message", "aria") == 0
    assert _count(db, "semantic_memory", "bruno") == 1


def test_missing_unknown_and_revoked_keys_get_401(api) -> None:
    base, db = api
    url = f"{base}/v1/animas/aria/status"
    assert httpx.get(url).status_code == 401
    assert httpx.get(url, headers={"Authorization": "Bearer anima_nope"}).status_code == 401
    key = _key(db, "aria")
    assert httpx.get(url, headers={"Authorization": f"Bearer {key}"}).status_code == 200
    with db.transaction() as conn:
        from anima_pipeline.store.api_keys import revoke_key

        kid = conn.execute("SELECT id FROM api_key WHERE anima_id = 'aria'").fetchone()["id"]
        revoke_key(conn, Audit(conn=conn, anima_id="", run_id="t", step="keys/revoke"), kid)
    r = httpx.get(url, headers={"Authorization": f"Bearer {key}"})
    assert r.status_code == 401 and r.json()["error"]["code"] == "unauthorized"
    with db.transaction() as conn:
        stored = conn.execute("SELECT key_hash FROM api_key").fetchone()["key_hash"]
    assert key not in stored  # only the hash is stored


@pytest.mark.parametrize(
    "message, field",
    [
        ({"created_at": None}, "messages[1].created_at"),
        ({"created_at": "2026-11-30T09:00:00"}, "messages[1].created_at"),  # no UTC offset
        ({"role": "robot"}, "messages[1].role"),
        ({"content": "   "}, "messages[1].content"),
        ({"conversation_id": "a\u0000b"}, "messages[1].conversation_id"),
    ],
)
def test_bad_messages_get_422_naming_the_field_and_write_nothing(api, message: dict, field: str) -> None:
    base, db = api
    auth = {"Authorization": f"Bearer {_key(db, 'aria')}"}
    bad = {**msg(1), **message}
    r = httpx.post(f"{base}/v1/animas/aria/messages", json={"messages": [msg(0), bad]}, headers=auth)
    assert r.status_code == 422, r.text
    err = r.json()["error"]
    assert err["field"] == field and err["code"] == "invalid_request" and field in err["message"]
    assert _count(db, "message", "aria") == 0 and _count(db, "conversation", "aria") == 0


def test_other_bad_requests_name_their_field(api) -> None:
    base, db = api
    auth = {"Authorization": f"Bearer {_key(db, 'aria')}"}
    v1 = f"{base}/v1/animas/aria"
    cases = [
        (httpx.post(f"{v1}/messages", json={"messages": []}, headers=auth), "messages"),
        (httpx.post(f"{v1}/messages", json={"msgs": [msg(0)]}, headers=auth), "messages"),
        (httpx.post(f"{v1}/memories", json={"content": "x", "type": "gossip"}, headers=auth), "type"),
        (httpx.post(f"{v1}/memories", json={"content": ""}, headers=auth), "content"),
        (httpx.get(f"{v1}/search", params={"query": "x", "limit": 0}, headers=auth), "limit"),
        (httpx.get(f"{v1}/context", headers=auth), "query"),
    ]
    for r, field in cases:
        assert r.status_code == 422, r.text
        assert r.json()["error"]["field"] == field, r.text
    broken = httpx.post(
        f"{v1}/messages", content=b"{not json", headers={**auth, "Content-Type": "application/json"}
    )
    assert broken.status_code == 422 and broken.json()["error"]["code"] == "invalid_request"


def test_a_10000_message_batch_is_all_or_nothing(api) -> None:
    base, db = api
    auth = {"Authorization": f"Bearer {_key(db, 'aria')}"}
    batch = [msg(i, conv=f"c{i // 500}") for i in range(10_000)]
    bad = [*batch[:-1], {**batch[-1], "created_at": "yesterday"}]
    r = httpx.post(f"{base}/v1/animas/aria/messages", json={"messages": bad}, headers=auth, timeout=120)
    assert r.status_code == 422 and r.json()["error"]["field"] == "messages[9999].created_at"
    assert _count(db, "message", "aria") == 0 and _count(db, "conversation", "aria") == 0
    too_many = [*batch, msg(10_000)]
    r = httpx.post(f"{base}/v1/animas/aria/messages", json={"messages": too_many}, headers=auth, timeout=120)
    assert r.status_code == 422 and r.json()["error"]["field"] == "messages"
    r = httpx.post(f"{base}/v1/animas/aria/messages", json={"messages": batch}, headers=auth, timeout=120)
    assert r.status_code == 200, r.text
    assert r.json()["added"] == 10_000 and r.json()["conversations_added"] == 20
    assert _count(db, "message", "aria") == 10_000


def test_a_batch_the_database_refuses_halfway_leaves_nothing(api) -> None:
    """All or nothing beyond validation: the store refuses the last message (a trigger stands in
    for any failure inside the transaction) after the batch's conversations were written, and
    everything is rolled back; the client gets a JSON 500."""
    base, db = api
    auth = {"Authorization": f"Bearer {_key(db, 'aria')}"}
    batch = [msg(i, conv=f"c{i // 1000}") for i in range(3000)]
    with db.transaction() as conn:
        conn.execute(
            """CREATE FUNCTION refuse_m2999() RETURNS trigger LANGUAGE plpgsql AS $$
               BEGIN IF NEW.external_id = 'm2999' THEN RAISE EXCEPTION 'refused'; END IF; RETURN NEW; END $$"""
        )
        conn.execute(
            "CREATE TRIGGER refuse BEFORE INSERT ON message FOR EACH ROW EXECUTE FUNCTION refuse_m2999()"
        )
    r = httpx.post(f"{base}/v1/animas/aria/messages", json={"messages": batch}, headers=auth, timeout=60)
    assert r.status_code == 500 and r.json()["error"]["code"] == "store_error"
    assert _count(db, "message", "aria") == 0 and _count(db, "conversation", "aria") == 0
    with db.transaction() as conn:
        assert (
            conn.execute("SELECT count(*) AS n FROM memory_event WHERE table_name <> 'api_key'").fetchone()[
                "n"
            ]
            == 0
        )


def test_remember_shows_up_in_the_next_context_and_in_the_audit_log(api) -> None:
    base, db = api
    auth = {"Authorization": f"Bearer {_key(db, 'aria')}"}
    r = httpx.post(
        f"{base}/v1/animas/aria/memories",
        json={"content": "Lena is allergic to peanuts", "type": "world", "session_id": "c1"},
        headers=auth,
    )
    assert r.status_code == 201, r.text
    ref = r.json()["id"]
    assert r.json()["source_sessions"] == ["c1"]
    ctx = httpx.get(
        f"{base}/v1/animas/aria/context", params={"query": "Is Lena allergic to anything?"}, headers=auth
    )
    assert [m["ref"] for m in section(ctx.json(), "memories")] == [ref]
    assert f"[[anima:{ref}]]" in ctx.json()["rendered"]
    with db.transaction() as conn:
        events = conn.execute(
            "SELECT op, step, day, after FROM memory_event WHERE table_name = 'semantic_memory' AND memory_id = %s",
            (ref.removeprefix("f-"),),
        ).fetchall()
    assert [(e["op"], e["step"]) for e in events] == [("create", "agent/remember")]
    assert events[0]["day"] == datetime.now(TZ).date()  # tonight's deep sleep reviews it
    assert events[0]["after"]["content"] == "Lena is allergic to peanuts"
    # the same session excluded: already in the window, not recalled again
    same = httpx.get(
        f"{base}/v1/animas/aria/context", params={"query": "Lena allergic", "session_id": "c1"}, headers=auth
    )
    assert section(same.json(), "memories") == []


def test_search_pages_and_filters(api) -> None:
    base, db = api
    auth = {"Authorization": f"Bearer {_key(db, 'aria')}"}
    for i in range(25):
        kind = "preference" if i % 5 == 0 else "world"
        r = httpx.post(
            f"{base}/v1/animas/aria/memories",
            json={"content": f"garden note {i}: tulips", "type": kind},
            headers=auth,
        )
        assert r.status_code == 201
    url = f"{base}/v1/animas/aria/search"
    first = httpx.get(url, params={"query": "garden tulips", "limit": 10}, headers=auth).json()
    second = httpx.get(url, params={"query": "garden tulips", "limit": 10, "offset": 10}, headers=auth).json()
    third = httpx.get(url, params={"query": "garden tulips", "limit": 10, "offset": 20}, headers=auth).json()
    ids = [m["ref"] for page in (first, second, third) for m in page["items"]]
    assert len(ids) == 25 == len(set(ids))  # more than passive recall's 8, no page overlaps
    assert first["has_more"] and second["has_more"] and not third["has_more"]
    prefs = httpx.get(url, params={"query": "garden tulips", "type": "preference"}, headers=auth).json()
    assert len(prefs["items"]) == 5 and {m["type"] for m in prefs["items"]} == {"preference"}
    future = httpx.get(
        url, params={"query": "tulips", "since": "2999-01-01T00:00:00+00:00"}, headers=auth
    ).json()
    assert future["items"] == []


def test_message_search_pages_and_keeps_to_a_conversation(api) -> None:
    base, db = api
    auth = {"Authorization": f"Bearer {_key(db, 'aria')}"}
    messages = [msg(i, conv=f"c{i % 3}", content=f"the lighthouse keeper story, part {i}") for i in range(12)]
    assert (
        httpx.post(f"{base}/v1/animas/aria/messages", json={"messages": messages}, headers=auth).status_code
        == 200
    )
    url = f"{base}/v1/animas/aria/messages/search"
    pages = [
        httpx.get(url, params={"query": "lighthouse keeper", "limit": 5, "offset": o}, headers=auth).json()
        for o in (0, 5, 10)
    ]
    refs = [m["ref"] for p in pages for m in p["items"]]
    assert len(refs) == 12 == len(set(refs)) and all(r.startswith("m-") for r in refs)
    assert [p["has_more"] for p in pages] == [True, True, False]
    one = httpx.get(url, params={"query": "lighthouse", "conversation_id": "c1"}, headers=auth).json()
    assert len(one["items"]) == 4 and {m["conversation_id"] for m in one["items"]} == {"c1"}
    bad = httpx.get(url, params={"query": "lighthouse", "limit": 101}, headers=auth)
    assert bad.status_code == 422 and bad.json()["error"]["field"] == "limit"


def test_open_and_close_a_conversation(api) -> None:
    base, db = api
    auth = {"Authorization": f"Bearer {_key(db, 'aria')}"}
    conv = f"{base}/v1/animas/aria/conversations/c9"
    r = httpx.put(
        conv, json={"title": "Planning the trip", "platform": "telegram", "debug": False}, headers=auth
    )
    assert r.status_code == 200 and r.json()["title"] == "Planning the trip" and r.json()["closed_at"] is None
    closed = httpx.post(f"{conv}/close", headers=auth)
    assert closed.status_code == 200 and closed.json()["closed_at"] is not None
    assert httpx.post(f"{base}/v1/animas/aria/conversations/nope/close", headers=auth).status_code == 404
    with db.transaction() as conn:
        ops = [
            r["op"] for r in conn.execute("SELECT op FROM memory_event WHERE memory_id = 'c9' ORDER BY id")
        ]
    assert ops == ["open", "close"]


def test_a_body_over_the_limit_gets_413(db: Database, db_url: str, tmp_path) -> None:
    with serving(create_app(db, Settings(database_url=db_url, home=tmp_path), max_body_bytes=2000)) as base:
        auth = {"Authorization": f"Bearer {_key(db, 'aria')}"}
        big = {"messages": [msg(i, content="x" * 500) for i in range(10)]}
        r = httpx.post(f"{base}/v1/animas/aria/messages", json=big, headers=auth)
        assert r.status_code == 413 and r.json()["error"]["code"] == "body_too_large"

        def chunks():  # no Content-Length: counted while read
            yield b'{"messages": ['
            for _ in range(10):
                yield b'"' + b"x" * 500 + b'",'
            yield b"]}"

        r = httpx.post(
            f"{base}/v1/animas/aria/messages",
            content=chunks(),
            headers={**auth, "Content-Type": "application/json"},
        )
        assert r.status_code == 413
        assert _count(db, "message", "aria") == 0
