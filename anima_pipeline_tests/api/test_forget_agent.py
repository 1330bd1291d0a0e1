"""An agent deprecates, corrects, pins, unpins and deletes over real HTTP (uvicorn + httpx2)
and over MCP (the official SDK's client, in-process), scoped to its anima; erased ids get 404
on HTTP and a clear tool error on MCP."""

from __future__ import annotations

from pathlib import Path

import anyio
import httpx2 as httpx
from mcp import Client

from anima_pipeline.config import Settings
from anima_pipeline.memory.facade import AnimaMemory
from anima_pipeline.service.http.app import create_app
from anima_pipeline.service.mcp import build_server
from anima_pipeline.store.api_keys import create_key
from anima_pipeline.store.db import Database
from anima_pipeline.store.events import Audit
from testkit.live_server import serving


def _key(db: Database, anima: str) -> str:
    with db.transaction() as conn:
        key, _ = create_key(conn, Audit(conn=conn, anima_id="", run_id="t", step="keys/create"), anima)
    return key


def _events(db: Database, ref: str) -> list[tuple[str, str]]:
    with db.transaction() as conn:
        rows = conn.execute(
            "SELECT step, op FROM memory_event WHERE table_name = 'semantic_memory' AND memory_id = %s ORDER BY id",
            (ref.removeprefix("f-"),),
        ).fetchall()
    return [(r["step"], r["op"]) for r in rows]


def test_http_corrections_and_delete(db: Database, db_url: str, tmp_path: Path) -> None:
    settings = Settings(database_url=db_url, home=tmp_path)
    key, other = _key(db, "aria"), _key(db, "bruno")
    with serving(create_app(db, settings)) as base:
        h = {"Authorization": f"Bearer {key}"}
        api = f"{base}/v1/animas/aria"
        made = httpx.post(
            f"{api}/memories", json={"content": "Lena lives in Lisbon", "session_id": "c1"}, headers=h
        )
        ref = made.json()["id"]
        fixed = httpx.patch(f"{api}/memories/{ref}", json={"content": "Lena lives in Porto"}, headers=h)
        assert fixed.status_code == 200 and fixed.json()["content"] == "Lena lives in Porto"
        assert fixed.json()["settled_at"] and fixed.json()["source_sessions"] == [
            "c1"
        ]  # only content changed
        assert httpx.post(f"{api}/memories/{ref}/pin", json={}, headers=h).json()["pinned"] is True
        unpinned = httpx.post(f"{api}/memories/{ref}/unpin", json={"reason": "not every turn"}, headers=h)
        assert unpinned.json()["pinned"] is False
        # a field sent as null is left as it is (it was a 500: the executor read a null content)
        kept = httpx.patch(
            f"{api}/memories/{ref}",
            json={"content": None, "type": None},
            headers=h,
        )
        assert kept.status_code == 200 and kept.json()["content"] == "Lena lives in Porto", kept.text
        bad = httpx.patch(f"{api}/memories/{ref}", json={"colour": "red"}, headers=h)
        assert bad.status_code == 422 and bad.json()["error"]["field"] == "colour"
        for successor in ("f-\u0000", "f-999999"):  # a malformed or unknown successor, named
            bad = httpx.post(
                f"{api}/memories/{ref}/deprecate", json={"reason": "r", "superseded_by": successor}, headers=h
            )
            assert bad.status_code == 422 and bad.json()["error"]["field"] == "superseded_by", bad.text
        gone = httpx.post(f"{api}/memories/{ref}/deprecate", json={"reason": "moved away"}, headers=h)
        assert gone.json()["status"] == "deprecated" and gone.json()["deprecated_reason"] == "moved away"
        # another anima's key cannot touch it
        assert (
            httpx.get(f"{api}/memories/{ref}", headers={"Authorization": f"Bearer {other}"}).status_code
            == 403
        )
        second = httpx.post(
            f"{api}/memories", json={"content": "Lena has a dog named Biscuit"}, headers=h
        ).json()
        report = httpx.delete(f"{api}/memories/{second['id']}", headers=h)
        assert report.status_code == 200 and report.json()["memories_erased"] == [second["id"]]
        for call in (
            httpx.get(f"{api}/memories/{second['id']}", headers=h),
            httpx.patch(f"{api}/memories/{second['id']}", json={"content": "x y"}, headers=h),
        ):
            assert call.status_code == 404 and "was erased" in call.json()["error"]["message"]
        # erasing it again changes nothing and says so, as for a message or a conversation
        again = httpx.delete(f"{api}/memories/{second['id']}", headers=h)
        assert again.status_code == 200, again.text
        assert not again.json()["changed"] and again.json()["memories_erased"] == []
        assert again.json()["note"].startswith(f"memory {second['id']} was erased before (")
        assert httpx.get(f"{api}/memories/f-999999", headers=h).status_code == 404
        found = httpx.get(f"{api}/search", params={"query": "Biscuit dog"}, headers=h).json()
        assert found["items"] == []
        # a conversation, soft then purged, through DELETE
        httpx.post(
            f"{api}/messages",
            json={
                "messages": [
                    {
                        "conversation_id": "c9",
                        "message_id": "1",
                        "role": "user",
                        "content": "Quokka",
                        "created_at": "2026-11-17T10:00:00+08:00",
                    }
                ]
            },
            headers=h,
        )
        soft = httpx.delete(f"{api}/conversations/c9", headers=h).json()
        assert soft["tables"]["message"]["hidden"] == 1 and not soft["purge"]
        purged = httpx.delete(f"{api}/conversations/c9", params={"purge": "true"}, headers=h).json()
        assert purged["tables"]["message"]["erased"] == 1
        assert httpx.delete(f"{api}/conversations/nope", headers=h).status_code == 404
        assert _events(db, ref) == [
            ("agent/remember", "create"),
            ("agent/correct", "update"),
            ("agent/correct", "settle"),
            ("agent/correct", "pin"),
            ("agent/correct", "settle"),
            ("agent/correct", "unpin"),
            ("agent/correct", "settle"),
            ("agent/correct", "deprecate"),
            ("agent/correct", "settle"),
        ]
        # the whole anima, purged with its own key: every row goes, the key with it
        whole = httpx.delete(api, params={"purge": "true"}, headers=h)
        assert whole.status_code == 200 and whole.json()["tables"]["semantic_memory"]["erased"] == 1
        assert httpx.get(f"{api}/status", headers=h).status_code == 401
        assert (
            httpx.get(
                f"{base}/v1/animas/bruno/status", headers={"Authorization": f"Bearer {other}"}
            ).status_code
            == 200
        )
    assert _events(db, ref) == []  # purged with the anima: its events went too (the tombstone stays)
    with db.transaction() as conn:
        [tomb] = conn.execute(
            "SELECT * FROM memory_event WHERE anima_id = 'aria' AND table_name = 'forget' AND op = 'purge' AND memory_id = 'anima:aria'"
        ).fetchall()
    assert tomb["after"]["requested_by"] == "agent (HTTP)"


def _text(result) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "text", None))


def test_mcp_corrections_only_when_allowed(db: Database, db_url: str, tmp_path: Path) -> None:
    memory = AnimaMemory(db, "aria", settings=Settings(database_url=db_url, home=tmp_path))
    ref = memory.remember("Lena moved to Lisbon in April 2026", session_id="c1").id
    doomed = memory.remember("Lena's ex is called Rupert Vanderwhile", session_id="c1").id

    async def main() -> None:
        async with Client(build_server(memory)) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert names == {"context", "search", "search_messages", "read_message"}
        async with Client(build_server(memory, allow_corrections=True)) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"deprecate", "correct", "pin", "unpin"} <= names and "delete" not in names
            fixed = await client.call_tool(
                "correct", {"id": ref, "content": "Lena moved to Porto in April 2026"}
            )
            assert (
                not fixed.is_error
                and fixed.structured_content["content"] == "Lena moved to Porto in April 2026"
            )
            pinned = await client.call_tool("pin", {"id": ref})
            assert pinned.structured_content["pinned"] is True
            unpinned = await client.call_tool("unpin", {"id": ref, "reason": "the user asked"})
            assert unpinned.structured_content["pinned"] is False
            bad = await client.call_tool("correct", {"id": "12"})
            assert bad.is_error
        async with Client(build_server(memory, allow_corrections=True, allow_delete=True)) as client:
            erased = await client.call_tool("delete", {"id": doomed})
            assert not erased.is_error and erased.structured_content["memories_erased"] == [doomed]
            again = await client.call_tool("deprecate", {"id": doomed, "reason": "x"})
            assert again.is_error and f"memory {doomed} was erased" in _text(again)
            twice = await client.call_tool("delete", {"id": doomed})  # changes nothing, says so
            assert not twice.is_error and not twice.structured_content["changed"]
            assert f"memory {doomed} was erased before" in twice.structured_content["note"]
            found = await client.call_tool("search", {"query": "Rupert Vanderwhile", "format": "json"})
            assert not found.is_error, _text(found)
            assert found.structured_content["items"] == []
            ctx = await client.call_tool("context", {"query": "Who is Rupert Vanderwhile?"})
            assert "Vanderwhile" not in _text(ctx) and "Porto" in _text(
                await client.call_tool("context", {"query": "Where did Lena move?"})
            )
            retired = await client.call_tool("deprecate", {"id": ref, "reason": "she moved again"})
            assert retired.structured_content["status"] == "deprecated"

    anyio.run(main)
    assert memory.memory(ref).settled_at is not None
