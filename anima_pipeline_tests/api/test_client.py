"""anima_pipeline.service.client against a real `anima serve` process: every facade method over HTTP,
typed answers, and errors as the server's {"error": ...} (which the OpenAPI document names)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx2 as httpx
import pytest

from anima_pipeline.core.errors import InputError
from anima_pipeline.memory.models import ErrorResponse
from anima_pipeline.recall.sections import AssembledContext, SearchPage
from anima_pipeline.service.client import AnimaApiError, AnimaClient
from testkit.live_server import ANIMA, anima_serve, free_port


@pytest.fixture
def served(db_url: str, tmp_path: Path) -> Iterator[tuple[str, str]]:
    env = {k: v for k, v in os.environ.items() if k != "ANIMA_TEST_DATABASE_URL"}
    env.update(ANIMA_DATABASE_URL=db_url, ANIMA_HOME=str(tmp_path))
    made = subprocess.run(
        [ANIMA, "keys", "create", "--anima", "aria", "--new"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    port = free_port()
    proc = anima_serve(env, port)
    try:
        yield f"http://127.0.0.1:{port}", made.stdout.strip()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _msg(i: int, role: str, content: str, conversation: str = "c1") -> dict:
    return {
        "conversation_id": conversation,
        "message_id": f"m{i}",
        "role": role,
        "content": content,
        "created_at": f"2026-11-30T10:00:{i:02d}+08:00",
    }


def test_the_client_speaks_every_route_of_anima_serve(served: tuple[str, str]) -> None:
    base, key = served
    with AnimaClient(base, "aria", key) as memory:
        opened = memory.open_conversation("c1", title="Pets", platform="telegram")
        assert (opened.id, opened.title, opened.platform) == ("c1", "Pets", "telegram")
        added = memory.append(
            [
                _msg(1, "user", "I finally adopted the greyhound, her name is Pepper."),
                _msg(2, "assistant", "Congratulations on adopting Pepper!"),
            ]
        )
        assert (added.received, added.added) == (2, 2)
        assert (
            memory.append(_msg(1, "user", "I finally adopted the greyhound, her name is Pepper.")).added == 0
        )
        made = memory.remember("The user's greyhound is called Pepper", "world", session_id="c1")
        assert made.id.startswith("f-") and made.source_sessions == ["c1"]

        [checked] = memory.validate_messages([_msg(5, "user", "not stored")])
        assert (checked.anima_id, checked.message_id) == ("aria", "m5")
        with pytest.raises(AnimaApiError) as invalid:
            memory.validate_messages([{**_msg(6, "user", "x"), "role": "robot"}])
        assert (invalid.value.status, invalid.value.field) == (422, "messages[0].role")
        assert set(memory.self_blocks()) >= {"identity", "persona"} and memory.resident() == []
        memory.pin(made.id)
        assert [i.ref for i in memory.resident()] == [made.id]
        memory.unpin(made.id, "only for this check")
        ctx = memory.context("What is my dog called?", session_id="c9")
        assert isinstance(ctx, AssembledContext) and f"[[anima:{made.id}]]" in ctx.rendered
        turn = memory.working_context("c1", "Remind me of my dog's name")
        assert (turn.session_id, turn.anima_id) == ("c1", "aria") and turn.tokens <= turn.budget_tokens
        assert "Pepper" in " ".join(m.content for m in turn.messages)  # the session itself
        page = memory.search("Pepper", types=["world"], limit=5)
        assert isinstance(page, SearchPage) and [i.ref for i in page.items] == [made.id]
        said = memory.search_messages("greyhound", conversation_id="c1")
        assert [i.text for i in said.items][:1] == ["I finally adopted the greyhound, her name is Pepper."]
        fixed = memory.update(made.id, content="The user's greyhound is called Pepper Pot")
        assert fixed.settled_at is not None and memory.memory(made.id).content.endswith("Pepper Pot")
        assert memory.pin(made.id).pinned and not memory.unpin(made.id, "not every turn").pinned
        assert memory.deprecate(made.id, "the dog was renamed").status == "deprecated"
        other_fact = memory.remember("The user's cat is called Miso", "world", session_id="c1")
        erased_by = memory.delete(other_fact.id, requested_by="the user, in chat")
        assert erased_by.memories_erased == [other_fact.id] and erased_by.requested_by == "the user, in chat"
        soft = memory.remember("The user's parrot is called Kiwi", "world", session_id="c1")
        forgotten = memory.forget("memory", soft.id)  # soft: deprecated, not erased
        assert forgotten.memories_deprecated == [soft.id] and forgotten.requested_by == "agent (HTTP)"
        assert memory.memory(soft.id).status == "deprecated"
        with pytest.raises(AnimaApiError) as erased:
            memory.memory(other_fact.id)
        assert erased.value.status == 404 and "was erased" in erased.value.message
        with pytest.raises(AnimaApiError) as unknown_conversation:
            memory.forget("conversation", "c9")
        assert unknown_conversation.value.status == 404
        with pytest.raises(InputError) as other_anima:  # never applied to this client's own
            memory.forget("anima", "someone-else", purge=True)
        assert other_anima.value.field == "anima_id"
        with pytest.raises(InputError) as bogus:  # the accepted kinds, before anything is sent
            memory.forget("bogus", "x")  # type: ignore[arg-type]
        assert bogus.value.field == "kind"
        assert "'message', 'conversation', 'memory' or 'anima'" in str(bogus.value), str(bogus.value)
        assert memory.close_conversation("c1").closed_at is not None
        assert memory.status()["semantic_active"] == 0 and memory.status()["messages"] == 2

        with pytest.raises(AnimaApiError) as bad:
            memory.append([{**_msg(3, "user", "x"), "created_at": "yesterday"}])
        assert (bad.value.status, bad.value.code, bad.value.field) == (
            422,
            "invalid_request",
            "messages[0].created_at",
        )
        with pytest.raises(AnimaApiError) as missing:
            memory.close_conversation("nope")
        assert missing.value.status == 404
    with AnimaClient(base, "bruno", key) as other, pytest.raises(AnimaApiError) as forbidden:
        other.status()
    assert (forbidden.value.status, forbidden.value.code) == (403, "forbidden")
    with AnimaClient(base, "aria", "anima_wrong") as locked_out, pytest.raises(AnimaApiError) as unknown:
        locked_out.context("x")
    assert unknown.value.status == 401


def test_the_openapi_error_schema_is_what_the_server_answers(served: tuple[str, str]) -> None:
    base, key = served
    doc = httpx.get(f"{base}/openapi.json").json()
    assert "HTTPValidationError" not in doc["components"]["schemas"]  # FastAPI's {"detail": [...]}
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            if path.startswith("/v1/"):
                schema = op["responses"]["422"]["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/ErrorResponse"}, (method, path)
    auth = {"Authorization": f"Bearer {key}"}
    answers = [
        httpx.post(f"{base}/v1/animas/aria/messages", json={"messages": [{"role": "user"}]}, headers=auth),
        httpx.get(f"{base}/v1/animas/aria/search", params={"query": "x", "limit": 0}, headers=auth),
        httpx.get(f"{base}/v1/animas/aria/status"),
        httpx.get(f"{base}/v1/animas/bruno/status", headers=auth),
    ]
    assert [a.status_code for a in answers] == [422, 422, 401, 403]
    for answer in answers:  # every answer validates against the documented schema (no extra keys)
        ErrorResponse.model_validate_json(answer.content, strict=False)
        assert set(answer.json()) == {"error"}
