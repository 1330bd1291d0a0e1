"""A long message through active search and `message` (read by its ref): every door shows the
part around what matched, never the whole text, and reads the whole in parts, with the same
answers and the same refusals (facade, the HTTP client, the raw route, MCP)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2 as httpx
import pytest
from mcp import Client

from anima_pipeline.config import Settings
from anima_pipeline.core.errors import InputError, NotFound
from anima_pipeline.memory.facade import AnimaMemory
from anima_pipeline.memory.models import READ_DEFAULT, READ_MAX
from anima_pipeline.recall.episodic import READ_CHARS
from anima_pipeline.service.client import AnimaApiError, AnimaClient
from anima_pipeline.service.http.app import create_app
from anima_pipeline.service.mcp import build_server
from anima_pipeline.store.api_keys import create_key
from anima_pipeline.store.db import Database
from anima_pipeline.store.events import Audit
from testkit.live_server import serving

# a pasted document: numbered lines (every part is told apart), characters outside the BMP and
# CJK (offsets count characters at every door, as PostgreSQL and Python do), one rare word in
# its middle
DOCUMENT = "".join(f"line {n:05d} of the lease 🙂 租约, nothing of note here.\n" for n in range(1, 1201))
MIDDLE = len(DOCUMENT) // 2
DOCUMENT = DOCUMENT[:MIDDLE] + "The deposit is kept in a quokka-shaped jar. " + DOCUMENT[MIDDLE:]


def _msg(n: int, content: str, conversation: str = "c1") -> dict[str, Any]:
    return {
        "conversation_id": conversation,
        "message_id": f"u{n}",
        "role": "user",
        "speaker": "Ana",
        "content": content,
        "created_at": f"2026-11-30T10:00:{n:02d}+08:00",
    }


@pytest.fixture
def doors(db: Database, db_url: str, tmp_path: Path) -> Iterator[tuple[AnimaMemory, AnimaClient, Any, str]]:
    settings = Settings(database_url=db_url, home=tmp_path)
    with db.transaction() as conn:
        key, _ = create_key(conn, Audit(conn=conn, anima_id="", run_id="t", step="keys/create"), "ana")
    memory = AnimaMemory(db, "ana", settings=settings)
    memory.open_conversation("c1", title="The flat")
    memory.append([_msg(1, DOCUMENT), _msg(2, "Where is the deposit kept, again? The quokka jar?")])
    with serving(create_app(db, settings)) as base, AnimaClient(base, "ana", key) as client:
        yield memory, client, build_server(memory), base


def _mcp(server: Any, tool: str, args: dict) -> Any:
    async def call() -> Any:
        async with Client(server) as mcp:
            return await mcp.call_tool(tool, args)

    return anyio.run(call)


def _text(result: Any) -> str:
    return "\n".join(b.text for b in result.content)


def test_a_long_message_is_shown_in_part_and_read_whole_in_parts_at_every_door(doors) -> None:
    memory, client, server, base = doors
    page = memory.search_messages("quokka")
    long = next(i for i in page.items if i.truncated)
    assert "quokka-shaped jar" in long.text and len(long.text) <= READ_CHARS + 4  # two marks
    assert len(page.model_dump_json()) < 3 * READ_CHARS < len(DOCUMENT)  # not the whole, twice
    assert client.search_messages("quokka") == page
    lines = _text(_mcp(server, "search_messages", {"query": "quokka"}))
    assert "read_message with its ref reads the rest" in lines and len(lines) < 2 * READ_CHARS

    first = memory.message(long.ref)
    assert (first.id, first.offset, first.total_chars) == (long.ref, 0, len(DOCUMENT))
    assert first.content == DOCUMENT[:READ_DEFAULT] and first.has_more and first.next_offset == READ_DEFAULT
    assert (first.title, first.speaker, first.role, first.conversation_id) == (
        "The flat",
        "Ana",
        "user",
        "c1",
    )
    assert client.message(long.ref) == first

    parts, offset = [], 0  # the whole, in parts of 10,000 characters, by next_offset
    while offset is not None:
        part = client.message(long.ref, offset=offset, limit=10_000)
        parts.append(part.content)
        offset = part.next_offset
    assert "".join(parts) == DOCUMENT and len(parts) == -(-len(DOCUMENT) // 10_000)
    assert memory.message(long.ref.removeprefix("m-"), limit=READ_MAX).content == DOCUMENT

    tail = httpx.get(
        f"{base}/v1/animas/ana/messages/{long.ref}",
        params={"offset": len(DOCUMENT) - 10, "limit": 100},
        headers=client._headers,
    )
    assert tail.status_code == 200, tail.text
    assert tail.json() | {"created_at": None} == {
        **first.model_dump(mode="json"),
        "created_at": None,
        "content": DOCUMENT[-10:],
        "offset": len(DOCUMENT) - 10,
        "has_more": False,
        "next_offset": None,
    }

    shown = _mcp(server, "read_message", {"id": long.ref, "offset": 8_000, "limit": 4_000})
    head, body = _text(shown).split("\n", 1)
    assert head.startswith(f"{long.ref} | ") and head.endswith(
        f'| Ana in "The flat" | characters 8,000-12,000 of {len(DOCUMENT):,}'
    )
    assert body == DOCUMENT[8_000:12_000] + "\n(more: call again with offset=12000)"
    as_json = _mcp(server, "read_message", {"id": long.ref, "format": "json"})
    assert as_json.structured_content == first.model_dump(mode="json")


def test_a_message_not_there_is_not_found_naming_why_at_every_door(doors, db: Database, db_url: str) -> None:
    memory, client, server, _ = doors
    other = AnimaMemory(db, "bo", settings=Settings(database_url=db_url, home=memory.settings.home))
    other.append([_msg(3, "Bo's own secret", conversation="b1")])
    [theirs] = other.search_messages("secret").items
    [short] = [i for i in memory.search_messages("deposit kept again").items if not i.truncated]
    [long] = [i for i in memory.search_messages("quokka").items if i.truncated]
    memory.forget("message", long.ref, purge=True)
    memory.forget("message", short.ref)
    cases = [
        ("m-999999999", "message m-999999999 does not exist"),
        (theirs.ref, f"message {theirs.ref} does not exist"),  # another anima's
        (short.ref, f"message {short.ref} was forgotten at "),
        (long.ref, f"message {long.ref} was erased (forget --purge) at "),
    ]
    for ref, words in cases:
        with pytest.raises(NotFound) as facade:
            memory.message(ref)
        assert facade.value.field == "id" and words in str(facade.value), facade.value
        with pytest.raises(AnimaApiError) as http:
            client.message(ref)
        assert (http.value.status, http.value.code, http.value.field) == (404, "not_found", "id")
        assert words in http.value.message
        answer = _mcp(server, "read_message", {"id": ref})
        assert answer.is_error and words in _text(answer), _text(answer)


@pytest.mark.parametrize(
    ("args", "field", "words"),
    [
        ({"ref": "f-12"}, "id", "is not a message id; ids look like 'm-123' or '123'"),
        ({"ref": "m-1", "limit": 0}, "limit", "greater than or equal to 1"),
        ({"ref": "m-1", "limit": READ_MAX + 1}, "limit", f"less than or equal to {READ_MAX}"),
        ({"ref": "m-1", "offset": -1}, "offset", "greater than or equal to 0"),
        ({"ref": "m-1", "offset": 10**12}, "offset", "less than or equal to"),
        ({"ref": "m-1\x00"}, "id", "contains a NUL character"),
        ({"ref": "m-\ud800"}, "id", "lone surrogate"),
    ],
    ids=["id", "limit-0", "limit-max", "offset-negative", "offset-huge", "nul", "surrogate"],
)
def test_a_bad_read_is_refused_at_every_door_naming_the_field(
    doors, args: dict, field: str, words: str
) -> None:
    memory, client, server, _ = doors
    with pytest.raises(InputError) as facade:
        memory.message(**args)
    assert facade.value.field == field and words in facade.value.detail, facade.value
    with pytest.raises(AnimaApiError) as http:
        client.message(**args)
    assert (http.value.status, http.value.field) == (422, field) and words in http.value.message, http.value
    mcp_args = {("id" if k == "ref" else k): v for k, v in args.items()}
    answer = _mcp(server, "read_message", mcp_args)
    said = _text(answer)  # the SDK lists a refused field on a line of its own; the facade starts with it
    assert answer.is_error and (f"\n{field}\n" in said or f": {field}: " in said) and words in said, said


def test_an_offset_past_the_end_is_refused_naming_the_length(doors) -> None:
    memory, client, _, _ = doors
    [short] = [i for i in memory.search_messages("deposit kept again").items if not i.truncated]
    size = memory.message(short.ref).total_chars
    for door in (memory, client):
        with pytest.raises((InputError, AnimaApiError)) as refused:
            door.message(short.ref, offset=size)
        assert refused.value.field == "offset", refused.value
        assert f"past the end of message {short.ref} ({size} characters)" in str(refused.value)


def test_mcp_context_names_a_message_it_shows_in_part_and_read_message_reads_it_whole(doors) -> None:
    memory, _, server, _ = doors
    ctx = memory.context("Where is the quokka-shaped jar?")
    cut = [i for s in ctx.sections for i in s.items if i.kind == "message" and i.truncated]
    assert len(cut) == 1  # the document, shown around its rare word
    long = cut[0]
    assert long.ref not in ctx.rendered  # the block itself is every door's, its budget unchanged
    shown = _text(_mcp(server, "context", {"query": "Where is the quokka-shaped jar?"}))
    block, note = shown.rsplit("\n\n", 1)
    assert block == ctx.rendered
    assert note.startswith(
        "(… marks a past message shown in part; read_message with its ref reads it whole: "
    )
    assert f"{long.ref} [2026-11-30 Ana]" in note
    whole = memory.message(note.split(": ", 1)[1].split(" ", 1)[0], limit=READ_MAX)
    assert whole.content == DOCUMENT
    # an anima whose past messages all fit their lines: the block alone, no note
    other = AnimaMemory(memory.db, "bo", settings=memory.settings)
    other.open_conversation("c2", title="Tea")
    other.append([_msg(1, "The kettle is on; green tea at four.", "c2")])
    whole_lines = other.context("When is green tea?")
    assert whole_lines.section("episodic").items
    assert (
        _text(_mcp(build_server(other), "context", {"query": "When is green tea?"})) == whole_lines.rendered
    )
