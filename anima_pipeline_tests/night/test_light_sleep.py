"""Light sleep on a real PostgreSQL with the offline engine: the CST day window, what enters
message 1 and message 2, chunking, relative dates, restraint, Chinese, provenance,
idempotence, per-stage stats, narratives and the grouped autobiography outline.

Every test imports its own small synthetic archive (English and Chinese) through the real
parser and importer."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from anima_pipeline.core.steps import LIGHT_SLEEP
from anima_pipeline.llm.contract import StepRequest, ToolCall, ToolResult, ToolRunner, Usage
from anima_pipeline.llm.offline import OfflineEngine
from anima_pipeline.night.frame import Night, StepResult
from anima_pipeline.night.steps.light import day_input
from anima_pipeline.night.steps.light import step as light_sleep
from anima_pipeline.night.steps.light.day_input import (
    chunk_conversations,
    load_day,
    render_conversation,
    render_day,
)
from anima_pipeline.night.steps.light.plan import autobiography_outline
from anima_pipeline.night.steps.light.step import (
    STEP_NARRATIVE,
    STEP_SEMANTIC,
    STEP_SUMMARY,
    extract_anchors,
    extract_semantic,
    narrate,
    summarize_autobiography,
)
from anima_pipeline.night.steps.light.tools import SEMANTIC_TOOLS
from anima_pipeline.store import sleep_state
from anima_pipeline.store.archive import DayConversation, DayMessage, ImportStats, import_records, parse_lines
from anima_pipeline.store.db import Database
from anima_pipeline.store.events import Audit
from anima_pipeline.store.memories import MemoryRepo

CST = ZoneInfo("Asia/Shanghai")
A = "mira"
DAY = date(2023, 5, 8)
NEXT = date(2023, 5, 9)
SPEAKERS = {"user": "Lin", "assistant": "Mira"}
STAGES = (extract_semantic, extract_anchors, narrate, summarize_autobiography)
_CJK = re.compile(r"[\u4e00-\u9fff]")


# ---- helpers ------------------------------------------------------------------------


def line(conv: str, n: int, role: str, content: str, at: str, **extra: Any) -> str:
    record = {
        "anima_id": A,
        "conversation_id": conv,
        "message_id": f"{conv}:{n:03d}",
        "role": role,
        "speaker": SPEAKERS.get(role),
        "content": content,
        "created_at": at,
        **extra,
    }
    return json.dumps(record, ensure_ascii=False)


def load(db: Database, lines: list[str]) -> ImportStats:
    stats = ImportStats()
    with db.transaction() as conn:
        audit = Audit(conn=conn, anima_id=A, run_id="import", step="import")
        import_records(conn, parse_lines(lines, "synthetic.jsonl"), audit, stats)
    return stats


def night(day: date = DAY, **kw: Any) -> Night:
    return Night(day=day, engine=OfflineEngine(), tz=CST, **kw)


def run_light(db: Database, n: Night) -> list[StepResult]:
    return [stage(db, n, A) for stage in STAGES]


def count(db: Database, table: str) -> int:
    with db.transaction() as conn:
        return conn.execute(f"SELECT count(*) AS n FROM {table} WHERE anima_id = %s", (A,)).fetchone()["n"]


def memories(db: Database) -> list:
    with db.transaction() as conn:
        return MemoryRepo(conn).active(A)


def created_on(db: Database, day: date) -> list[dict]:
    """The semantic memories a night created, as its audit events record them."""
    with db.transaction() as conn:
        rows = conn.execute(
            """SELECT after FROM memory_event WHERE anima_id = %s AND day = %s AND step = %s
               AND table_name = 'semantic_memory' AND op = 'create' ORDER BY id""",
            (A, day, STEP_SEMANTIC),
        ).fetchall()
    return [r["after"] for r in rows]


def day_ids(db: Database, day: date) -> set[str]:
    n = night(day)
    with db.transaction() as conn:
        return {c.id for c in load_day(conn, A, n.start, n.end)}


class ScriptedEngine(OfflineEngine):
    """An engine that reads the step's request and makes the calls a script derives from it,
    through the step's own runner (the executor), keeping every result (the rest of the engine
    contract is the offline engine's: no models, nothing priced)."""

    name = "scripted"

    def __init__(self, script: Callable[[StepRequest], list[ToolCall]]) -> None:
        self.script = script
        self.requests: list[StepRequest] = []
        self.results: list[tuple[ToolCall, ToolResult]] = []

    def run(self, request: StepRequest, runner: ToolRunner, offline_plan) -> Usage:
        self.requests.append(request)
        for call in self.script(request):
            self.results.append((call, runner.call(call.name, call.input)))
        return Usage(calls=1, input_tokens=sum(len(b.text) for b in request.user) // 4, output_tokens=10)


class RecordingOffline(OfflineEngine):
    """The offline engine, keeping the requests it was given (what an LLM would have read)."""

    def __init__(self) -> None:
        self.requests: list[StepRequest] = []

    def run(self, request: StepRequest, runner: ToolRunner, offline_plan) -> Usage:
        self.requests.append(request)
        return super().run(request, runner, offline_plan)


# A day with a bit of everything: English and Chinese, tool calls, a cron job, a milestone,
# and a conversation that runs past midnight into 2023-05-09.
RICH = [
    line(
        "mira:c1",
        1,
        "user",
        "Yesterday I adopted a cat named Pepper from the shelter.",
        "2023-05-08T10:00:00+08:00",
        title="Pepper",
    ),
    line(
        "mira:c1",
        2,
        "assistant",
        'That is lovely! <tool_call>{"name": "search", "q": "cat food"}</tool_call> Pepper is a great name.',
        "2023-05-08T10:01:00+08:00",
    ),
    line(
        "mira:c1", 3, "tool", "search results: I work as a pilot for Emirates.", "2023-05-08T10:01:10+08:00"
    ),
    line(
        "mira:c1", 4, "user", "I work as a nurse at Ruijin Hospital in Shanghai.", "2023-05-08T10:02:00+08:00"
    ),
    line(
        "mira:c1",
        5,
        "assistant",
        '<tool_call>{"name": "remember", "fact": "I own a yacht in Monaco"}</tool_call>',
        "2023-05-08T10:02:30+08:00",
    ),
    line(
        "mira:c1", 6, "user", "I got engaged to Alex last night, I am so happy!", "2023-05-08T10:03:00+08:00"
    ),
    line(
        "mira:c1",
        7,
        "assistant",
        "Congratulations to you both, that is wonderful news!",
        "2023-05-08T10:03:40+08:00",
    ),
    line(
        "mira:c2", 1, "user", "我昨天去了杭州西湖，拍了很多照片。", "2023-05-08T20:00:00+08:00", title="西湖"
    ),
    line("mira:c2", 2, "assistant", "听起来很棒！", "2023-05-08T20:01:00+08:00"),
    line("mira:c2", 3, "user", "我不吃辣，也不爱甜食。", "2023-05-08T20:02:00+08:00"),
    line(
        "mira:cron",
        1,
        "system",
        "Daily check-in: summarise the weather.",
        "2023-05-08T09:00:00+08:00",
        platform="cron",
    ),
    line(
        "mira:cron",
        2,
        "assistant",
        "I work as a pilot in Dubai and I love flying.",
        "2023-05-08T09:00:05+08:00",
        platform="cron",
    ),
    line(
        "mira:late",
        1,
        "user",
        "I bought a red bicycle for my commute this evening.",
        "2023-05-08T23:50:00+08:00",
    ),
    line("mira:late", 2, "assistant", "Nice, ride safe!", "2023-05-08T23:59:59+08:00"),
    line(
        "mira:late",
        3,
        "user",
        "I signed up for a swimming class at the Jing'an pool.",
        "2023-05-09T00:00:00+08:00",
    ),
    line("mira:late", 4, "assistant", "Good luck with the swimming class!", "2023-05-09T00:01:00+08:00"),
]


@pytest.fixture
def rich(db: Database) -> Database:
    load(db, RICH)
    return db


# ---- message 1: the day window, cron, tools ---------------------------------------------


def test_day_window_is_the_cst_day(db: Database):
    load(
        db,
        [
            line(
                "mira:w",
                1,
                "user",
                "before the day (23:59:59 CST on 05-07, written in UTC)",
                "2023-05-07T15:59:59Z",
            ),
            line("mira:w", 2, "user", "first instant (00:00 CST, written in UTC)", "2023-05-07T16:00:00Z"),
            line("mira:w", 3, "user", "last second of the day", "2023-05-08T23:59:59+08:00"),
            line("mira:w", 4, "user", "first second of the next day", "2023-05-09T00:00:00+08:00"),
            line(
                "mira:w", 5, "user", "Toronto evening, already 05-09 in Shanghai", "2023-05-08T12:30:00-04:00"
            ),
        ],
    )
    with db.transaction() as conn:
        for day, expected in (
            (date(2023, 5, 7), ["mira:w:001"]),
            (DAY, ["mira:w:002", "mira:w:003"]),
            (NEXT, ["mira:w:004", "mira:w:005"]),
        ):
            n = night(day)
            assert n.start == datetime(day.year, day.month, day.day, tzinfo=CST)
            [conv] = load_day(conn, A, n.start, n.end)
            assert [m.external_id for m in conv.messages] == expected, day


def test_a_conversation_across_midnight_gives_each_day_its_part(rich: Database):
    with rich.transaction() as conn:
        n1, n2 = night(DAY), night(NEXT)
        late1 = next(c for c in load_day(conn, A, n1.start, n1.end) if c.id == "mira:late")
        [late2] = load_day(conn, A, n2.start, n2.end)
        assert [m.external_id for m in late1.messages] == ["mira:late:001", "mira:late:002"]
        assert [m.external_id for m in late2.messages] == ["mira:late:003", "mira:late:004"]
        assert "## Conversation mira:late (2023-05-09 00:00–00:01)" in render_day([late2], CST, "2023-05-09")

    extract_semantic(rich, night(DAY), A)
    recorder = RecordingOffline()
    second = extract_semantic(rich, Night(day=NEXT, engine=recorder, tz=CST), A)
    assert second.stats["conversations"] == 1 and second.stats["errors"] == 0

    day1 = [m for m in created_on(rich, DAY) if "mira:late" in m["source_sessions"]]
    day2 = created_on(rich, NEXT)
    assert any("bicycle" in m["content"] for m in day1)
    assert not any("swimming" in m["content"] for m in day1)
    assert day2 and all(m["source_sessions"] == ["mira:late"] for m in day2)
    assert any("swimming" in m["content"] for m in day2)
    assert not any("bicycle" in m["content"] for m in day2)
    # the next night's message 2 showed the first night's memories of the same conversation
    [request] = recorder.requests
    msg1, msg2 = request.user[0].text, request.user[1].text
    assert "swimming" in msg1 and "bicycle" not in msg1
    assert all(f"f-{m['id']}" in msg2 for m in day1)


def test_cron_and_tools_never_reach_message_1(rich: Database):
    n = night(DAY)
    with rich.transaction() as conn:
        convs = load_day(conn, A, n.start, n.end)
    assert [c.id for c in convs] == ["mira:c1", "mira:c2", "mira:late"]  # by first message; cron excluded
    c1 = convs[0]
    assert [m.external_id for m in c1.messages] == [
        "mira:c1:001",
        "mira:c1:002",
        "mira:c1:004",
        "mira:c1:006",
        "mira:c1:007",
    ]  # the tool message and the assistant turn that was only a tool call are gone
    assert {m.role for c in convs for m in c.messages} == {"user", "assistant"}
    assert " ".join(c1.messages[1].content.split()) == "That is lovely! Pepper is a great name."

    text = render_day(convs, CST, "2023-05-08")
    assert text.startswith(
        '<conversations day="2023-05-08">\n# Conversations of 2023-05-08, Monday (Asia/Shanghai, UTC+08:00)'
    )
    assert text.endswith("</conversations>")
    assert '## Conversation mira:c1 — "Pepper" (2023-05-08 10:00–10:03)' in text
    assert "[10:00] user (Lin): Yesterday I adopted a cat named Pepper" in text
    assert "[20:00] user (Lin): 我昨天去了杭州西湖" in text
    for absent in ("tool_call", "search", "pilot", "Emirates", "yacht", "Monaco", "check-in", "mira:cron"):
        assert absent not in text, absent

    result = extract_semantic(rich, n, A)
    assert result.details["chunk_conversations"] == [["mira:c1", "mira:c2", "mira:late"]]
    contents = " ".join(m.content for m in memories(rich))
    for absent in ("pilot", "Dubai", "yacht", "Emirates"):
        assert absent not in contents


def test_strip_tool_blocks_keeps_the_words_around_them():
    raw = (
        "Let me check.\n<tool_use id='1'>{\"q\": 1}</tool_use>\n\n\n\nDone: "
        "<function_calls><invoke>x</invoke></function_calls>it rains.\n```tool_call\n{}\n```"
    )
    assert day_input.strip_tool_blocks(raw) == "Let me check.\n\nDone: it rains."
    assert day_input.strip_tool_blocks("<tool_result>ok</tool_result>") == ""
    assert day_input.strip_tool_blocks("I use <b>bold</b> text") == "I use <b>bold</b> text"


# ---- message 2: scope ----------------------------------------------------------------------


def test_message_2_scope_and_refused_update_outside_it(db: Database):
    load(
        db,
        [
            line("mira:old", 1, "user", "I grew up in Leshan.", "2023-04-01T10:00:00+08:00"),
            line(
                "mira:c1", 1, "user", "I work as a nurse at Ruijin Hospital now.", "2023-05-08T10:00:00+08:00"
            ),
        ],
    )
    with db.transaction() as conn:
        audit = Audit(conn=conn, anima_id=A, run_id="seed", step="seed", day=date(2023, 4, 1))
        repo = MemoryRepo(conn, audit)
        shown = repo.create(
            A, {"type": "world", "content": "Lin is a nurse.", "source_sessions": ["mira:c1", "mira:old"]}
        )
        hidden = repo.create(
            A, {"type": "world", "content": "Lin grew up in Leshan.", "source_sessions": ["mira:old"]}
        )
        retired = repo.create(
            A, {"type": "world", "content": "Lin is a student.", "source_sessions": ["mira:c1"]}
        )
        repo.deprecate(retired.id, "outdated", superseded_by=shown.id)

    def script(request: StepRequest) -> list[ToolCall]:
        return [
            ToolCall(
                name="update_semantic_memory",
                input={"id": shown.ref, "content": "Lin is a nurse at Ruijin Hospital."},
            ),
            ToolCall(
                name="update_semantic_memory", input={"id": hidden.ref, "content": "Lin grew up in Chengdu."}
            ),
            ToolCall(name="deprecate_semantic_memory", input={"id": hidden.ref, "reason": "not today"}),
            ToolCall(
                name="create_semantic_memory",
                input={"type": "world", "content": "Lin lives in Leshan.", "source_sessions": ["mira:old"]},
            ),
            ToolCall(
                name="create_semantic_memory",
                input={"type": "world", "content": "Lin works at Ruijin Hospital in 2023."},
            ),
        ]

    engine = ScriptedEngine(script)
    result = extract_semantic(db, Night(day=DAY, engine=engine, tz=CST), A)

    [request] = engine.requests
    assert request.step == STEP_SEMANTIC and [t.name for t in request.tools] == list(SEMANTIC_TOOLS)
    # no breakpoint: its one answer ends it, and no other step of its model reads its prefix
    assert not request.system[-1].cache and "# Self of anima mira" in request.system[-1].text
    assert "Today (the day being consolidated) is" in request.system[0].text
    msg1, msg2, msg3 = (b.text for b in request.user)
    assert "mira:c1" in msg1 and "Leshan" not in msg1
    assert shown.ref in msg2 and hidden.ref not in msg2 and retired.ref not in msg2
    assert "update_semantic_memory" in msg3

    outcomes = [(c.name, r.is_error) for c, r in engine.results]
    assert outcomes == [
        ("update_semantic_memory", False),
        ("update_semantic_memory", True),
        ("deprecate_semantic_memory", True),
        ("create_semantic_memory", True),
        ("create_semantic_memory", False),
    ]
    assert (
        "outside this step's scope" in engine.results[1][1].content
        and shown.ref in engine.results[1][1].content
    )
    assert "not among this input's conversations" in engine.results[3][1].content
    with db.transaction() as conn:
        repo = MemoryRepo(conn)
        assert (
            repo.get(hidden.id).content == "Lin grew up in Leshan." and repo.get(hidden.id).status == "active"
        )
        assert repo.get(shown.id).content == "Lin is a nurse at Ruijin Hospital."
        created = repo.get(int(engine.results[4][1].data["id"][2:]))
        assert created.source_sessions == ["mira:c1"]  # omitted sources default to the day's conversations
        assert created.observed_at == datetime(2023, 5, 8, 2, 0, tzinfo=UTC)
    assert (result.stats["errors"], result.stats["updated"], result.stats["created"]) == (3, 1, 1)
    assert (
        result.stats["llm_calls"] == 1 and result.stats["tokens_out"] == 10
    )  # the engine's usage is recorded


def test_stage_one_says_each_rule_once_and_sends_no_empty_message_2(rich: Database) -> None:
    """What stage 1 sends on a usual night (no memory of the day's conversations yet): the tool
    it can use, the day, the task, and every rule once (docs/cost.md, "Said once"): the memory
    types, the confidence scale and the dates beside the schema's fields, what qualifies in the
    task. A rule said again (the framing repeating the schema, the tool repeating the task) or
    an empty message 2 is tokens on the main model for nothing."""
    engine = RecordingOffline()
    extract_semantic(rich, Night(day=DAY, engine=engine, tz=CST), A)
    [request] = engine.requests
    assert [t.name for t in request.tools] == ["create_semantic_memory"]
    msg1, task = (b.text for b in request.user)  # no "(none)" message 2
    assert msg1.startswith("<conversations") and "Record the durable facts" in task
    sent = json.dumps(
        [[t.model_dump() for t in request.tools], [b.text for b in [*request.system, *request.user]]],
        ensure_ascii=False,
    )
    flat = " ".join(sent.replace("\\n", " ").split())
    for once in (
        "a first meeting, a loss",  # the types
        "below 0.6 do not record it",  # the confidence scale
        "when it was said",  # observed_at
        "pasted document",  # what qualifies
        "the fact was said in",  # source_sessions
        "make all your calls in this one answer",  # the night's one-answer protocol
    ):
        assert flat.count(once) == 1, (once, flat.count(once))
    assert "Message 2" not in task


# ---- chunking -------------------------------------------------------------------------------


def _conv(cid: str, start: datetime, texts: list[str]) -> DayConversation:
    msgs = tuple(
        DayMessage(
            i, cid, f"{cid}:{i:03d}", "user" if i % 2 else "assistant", None, t, start + timedelta(minutes=i)
        )
        for i, t in enumerate(texts, start=1)
    )
    return DayConversation(id=cid, title=None, platform="chat", messages=msgs)


def test_chunking_newest_first_nothing_dropped_oversized_cut():
    base = datetime(2023, 5, 8, 8, 0, tzinfo=CST)
    small = [
        _conv(f"s{i}", base + timedelta(hours=i), [f"message {i}-{k} " + "x" * 40 for k in range(3)])
        for i in range(4)
    ]
    big = _conv("big", base + timedelta(hours=2, minutes=30), [f"long {k} " + "y" * 80 for k in range(12)])
    convs = [*small, big]
    limit = 600

    assert chunk_conversations(convs, CST) == [
        sorted(convs, key=lambda c: c.ended_at, reverse=True)
    ]  # under the default
    chunks = chunk_conversations(convs, CST, limit=limit)
    assert len(chunks) > 2
    for chunk in chunks:
        assert len(render_day(chunk, CST, "x")) - len(render_day([], CST, "x")) <= limit
        assert all(len(render_conversation(p, CST)) <= limit for p in chunk)

    pieces = [p for chunk in chunks for p in chunk]
    # newest first: pieces are ordered by the end of their whole conversation
    order = [p.id for p in pieces]
    assert list(dict.fromkeys(order)) == ["s3", "big", "s2", "s1", "s0"]
    # nothing dropped or duplicated, every message exactly once
    assert sorted(m.external_id for p in pieces for m in p.messages) == sorted(
        m.external_id for c in convs for m in c.messages
    )
    # the oversized conversation is cut into consecutive parts, in order
    parts = [p for p in pieces if p.id == "big"]
    assert len(parts) >= 2
    assert [m.external_id for p in parts for m in p.messages] == [m.external_id for m in big.messages]
    assert len(render_conversation(big, CST)) > limit
    assert chunk_conversations([], CST, limit=limit) == []


def test_extract_semantic_records_its_chunks(db: Database, monkeypatch: pytest.MonkeyPatch):
    facts = [
        "I work as a nurse at Ruijin Hospital in Shanghai.",
        "I adopted a cat named Pepper from the shelter.",
        "I like jasmine tea more than coffee.",
        "我的老家在四川乐山，我很想念那里的美食。",
    ]
    load(
        db,
        [
            line(f"mira:k{i}", 1, "user", text, f"2023-05-08T{10 + i:02d}:00:00+08:00")
            for i, text in enumerate(facts)
        ],
    )
    monkeypatch.setattr(
        light_sleep,
        "chunk_conversations",
        lambda convs, tz: day_input.chunk_conversations(convs, tz, limit=150),
    )
    result = extract_semantic(db, night(), A)

    chunks = result.details["chunk_conversations"]
    assert result.stats["chunks"] == len(chunks) >= 2
    assert [cid for chunk in chunks for cid in chunk] == ["mira:k3", "mira:k2", "mira:k1", "mira:k0"]
    assert result.stats["conversations"] == 4 and result.stats["messages"] == 4
    assert result.stats["created"] >= 3
    # each chunk cites only its own conversations
    allowed = {cid for chunk in chunks for cid in chunk}
    for m in created_on(db, DAY):
        assert len(m["source_sessions"]) == 1 and m["source_sessions"][0] in allowed
    with db.transaction() as conn:
        state = sleep_state.get(conn, A, DAY, STEP_SEMANTIC)
    assert state["stats"]["chunks"] == len(chunks)


# ---- content: dates, restraint, Chinese, provenance ----------------------------------------


def test_relative_dates_become_absolute(db: Database):
    load(
        db,
        [
            line(
                "mira:d",
                1,
                "user",
                "Yesterday I adopted a cat named Pepper from the shelter.",
                "2023-05-08T21:00:00+08:00",
            ),
            line("mira:d", 2, "user", "我昨天去了杭州西湖，拍了很多照片。", "2023-05-08T21:01:00+08:00"),
            # 00:30 CST on 05-08 is still 05-07 in UTC: "yesterday" is the local day before
            line(
                "mira:e", 1, "user", "Yesterday I ran ten kilometres along the Bund.", "2023-05-07T16:30:00Z"
            ),
        ],
    )
    extract_semantic(db, night(), A)
    contents = [m.content for m in memories(db)]
    pepper = next(c for c in contents if "Pepper" in c)
    west_lake = next(c for c in contents if "西湖" in c)
    bund = next(c for c in contents if "Bund" in c)
    for content in (pepper, west_lake, bund):
        assert "2023-05-07" in content, content
        assert "yesterday" not in content.lower() and "昨天" not in content, content


def test_a_day_of_small_talk_writes_nothing_and_the_night_goes_on(db: Database):
    load(
        db,
        [
            line("mira:s", 1, "user", "Hi Mira!", "2023-05-08T10:00:00+08:00"),
            line("mira:s", 2, "assistant", "Hello Lin! How are you today?", "2023-05-08T10:00:10+08:00"),
            line("mira:s", 3, "user", "Good, thanks. You?", "2023-05-08T10:00:20+08:00"),
            line("mira:s", 4, "assistant", "Doing well, thanks for asking!", "2023-05-08T10:00:30+08:00"),
            line("mira:s", 5, "user", "Ok, talk later. Bye!", "2023-05-08T10:00:40+08:00"),
            line("mira:t", 1, "user", "晚上好！", "2023-05-08T21:00:00+08:00"),
            line("mira:t", 2, "assistant", "晚上好呀，今天怎么样？", "2023-05-08T21:00:10+08:00"),
            line("mira:t", 3, "user", "还行吧，哈哈。晚安！", "2023-05-08T21:00:20+08:00"),
        ],
    )
    results = run_light(db, night())
    assert [r.status for r in results] == ["done"] * 4
    assert results[0].stats["conversations"] == 2 and results[0].stats["created"] == 0
    assert results[1].stats["anchors"] == 0
    assert results[2].stats["narratives"] == 0 and results[3].stats["self_blocks"] == 0
    for table in (
        "semantic_memory",
        "emotional_anchor",
        "autobiographical_memory",
        "self_block",
        "memory_event",
    ):
        if table == "memory_event":
            with db.transaction() as conn:
                n = conn.execute("SELECT count(*) AS n FROM memory_event WHERE step <> 'import'").fetchone()[
                    "n"
                ]
            assert n == 0
        else:
            assert count(db, table) == 0, table
    with db.transaction() as conn:
        states = conn.execute(
            "SELECT step, status FROM sleep_state WHERE anima_id = %s AND day = %s", (A, DAY)
        ).fetchall()
    assert {(s["step"], s["status"]) for s in states} == {(step, "done") for step in LIGHT_SLEEP}


def test_a_day_without_conversations_is_a_normal_night(db: Database):
    results = run_light(db, night())
    assert [r.status for r in results] == ["done"] * 4
    assert results[0].stats["conversations"] == 0 and results[0].stats["chunks"] == 0
    assert count(db, "semantic_memory") == 0


def test_chinese_stays_chinese(db: Database):
    load(
        db,
        [
            line(
                "mira:zh",
                1,
                "user",
                "我在一家游戏公司做UI设计师，住在杭州西湖区。",
                "2023-05-08T19:00:00+08:00",
            ),
            line("mira:zh", 2, "assistant", "设计师呀，好厉害！", "2023-05-08T19:01:00+08:00"),
            line("mira:zh", 3, "user", "我不吃辣，也不爱甜食。", "2023-05-08T19:02:00+08:00"),
        ],
    )
    result = extract_semantic(db, night(), A)
    mems = memories(db)
    assert result.stats["created"] == len(mems) >= 2
    for m in mems:
        cjk = len(_CJK.findall(m.content))
        latin = len(re.findall(r"[A-Za-z]", m.content.replace("UI", "").replace("Lin", "")))
        assert cjk > 4 and cjk > latin, m.content
    assert any("不吃辣" in m.content for m in mems)


def test_memories_cite_only_their_days_conversations(rich: Database):
    for day in (DAY, NEXT):
        run_light(rich, night(day))
        allowed = day_ids(rich, day)
        created = created_on(rich, day)
        assert created, day
        for m in created:
            assert m["source_sessions"] and set(m["source_sessions"]) <= allowed, (day, m)
    with rich.transaction() as conn:
        for a in conn.execute("SELECT conversation_id, occurred_at FROM emotional_anchor").fetchall():
            local_day = a["occurred_at"].astimezone(CST).date()
            assert a["conversation_id"] in day_ids(rich, local_day)
        for n in conn.execute("SELECT source_sessions FROM autobiographical_memory").fetchall():
            assert set(n["source_sessions"]) <= day_ids(rich, DAY) | day_ids(rich, NEXT)


# ---- idempotence and stats ------------------------------------------------------------------


def _snapshot(db: Database) -> dict[str, Any]:
    with db.transaction() as conn:
        return {
            "semantic": conn.execute(
                "SELECT id, content, status FROM semantic_memory ORDER BY id"
            ).fetchall(),
            "anchors": conn.execute("SELECT id FROM emotional_anchor ORDER BY id").fetchall(),
            "narratives": conn.execute(
                "SELECT id, status FROM autobiographical_memory ORDER BY id"
            ).fetchall(),
            "blocks": conn.execute("SELECT name, version, content FROM self_block ORDER BY name").fetchall(),
        }


def test_rerunning_a_night_changes_nothing(rich: Database):
    first = run_light(rich, night())
    assert [r.status for r in first] == ["done"] * 4
    before = _snapshot(rich)
    assert before["semantic"] and before["anchors"] and before["narratives"] and before["blocks"]

    forced = night(force=True)
    again = run_light(rich, forced)
    assert [r.status for r in again] == ["done"] * 4
    assert _snapshot(rich) == before
    with rich.transaction() as conn:
        assert (
            conn.execute(
                "SELECT count(*) AS n FROM memory_event WHERE run_id = %s", (forced.run_id,)
            ).fetchone()["n"]
            == 0
        )
    assert (
        again[0].stats["created"] == 0
        and again[1].stats["anchors"] == 0
        and again[2].stats["narratives"] == 0
    )

    skipped = run_light(rich, night())
    assert [r.status for r in skipped] == ["skipped"] * 4
    assert all(r.stats["already_done"] == 1 for r in skipped)
    assert skipped[0].stats["conversations"] == first[0].stats["conversations"]
    assert _snapshot(rich) == before


def test_each_stage_reports_counts_and_input_size(rich: Database):
    results = {r.step: r for r in run_light(rich, night())}
    expected = {
        "semantic_memory/extracted": (
            "conversations",
            "messages",
            "created",
            "updated",
            "deprecated",
            "chunks",
        ),
        "emotional_anchors/marked": ("conversations", "anchors"),
        "autobiographical_memory/narrated": ("candidates", "narratives"),
        "self_blocks/autobiography_summary": ("narratives_read", "self_blocks", "summary_chars"),
    }
    assert list(results) == list(LIGHT_SLEEP)
    for step, keys in expected.items():
        stats = results[step].stats
        for key in (*keys, "input_chars", "llm_calls", "tokens_in", "tokens_out", "cost_usd"):
            assert isinstance(stats.get(key), int | float), (step, key, stats)
        assert stats["input_chars"] > 0 and stats["llm_calls"] == 0 and stats["cost_usd"] == 0
        assert results[step].duration_s >= 0
    sem = results["semantic_memory/extracted"].stats
    assert (sem["conversations"], sem["messages"], sem["chunks"]) == (3, 10, 1)
    assert sem["created"] == count(rich, "semantic_memory") and sem["created"] >= 6
    assert results["emotional_anchors/marked"].stats["anchors"] == count(rich, "emotional_anchor") >= 1
    assert results["autobiographical_memory/narrated"].stats["narratives"] == count(
        rich, "autobiographical_memory"
    )
    summary = results["self_blocks/autobiography_summary"].stats
    assert summary["self_blocks"] == 1 and summary["summary_chars"] > 0
    with rich.transaction() as conn:
        stored = {
            s["step"]: s["stats"]
            for s in conn.execute("SELECT step, stats FROM sleep_state WHERE day = %s", (DAY,))
        }
    assert stored == {step: r.stats for step, r in results.items()}


# ---- narratives and the autobiography summary ------------------------------------------------


def test_narratives_only_for_milestones(db: Database):
    load(
        db,
        [
            line("mira:o", 1, "user", "I work as a nurse at Ruijin Hospital.", "2023-05-08T10:00:00+08:00"),
            line("mira:o", 2, "user", "I like jasmine tea more than coffee.", "2023-05-08T10:01:00+08:00"),
            line(
                "mira:o",
                3,
                "user",
                "Yesterday I bought groceries at the market near my flat.",
                "2023-05-08T10:02:00+08:00",
            ),
        ],
    )
    ordinary = run_light(db, night())
    assert count(db, "semantic_memory") >= 2
    assert ordinary[2].status == "done" and ordinary[2].stats["narratives"] == 0
    assert ordinary[2].stats["candidates"] >= 1  # there were experiences to consider; none was worth telling
    assert count(db, "autobiographical_memory") == 0
    assert ordinary[3].stats["self_blocks"] == 0 and count(db, "self_block") == 0

    load(
        db,
        [
            line("mira:m", 1, "user", "I got engaged to Alex yesterday!", "2023-05-09T09:00:00+08:00"),
            line("mira:m", 2, "user", "我昨天第一次跑完了全程马拉松！", "2023-05-09T09:05:00+08:00"),
        ],
    )
    milestone = run_light(db, night(NEXT))
    assert milestone[2].stats["narratives"] == 2
    with db.transaction() as conn:
        rows = conn.execute("SELECT * FROM autobiographical_memory ORDER BY id").fetchall()
        repo = MemoryRepo(conn)
        for row in rows:
            assert row["significance"] in ("milestone", "turning_point")
            [source] = repo.get_many(row["source_memory_ids"])
            assert source.type in ("experience", "imprint") and row["source_sessions"] == ["mira:m"]
            assert row["occurred_from"] is not None and row["title"]
        assert any("Alex" in r["title"] for r in rows) and any(_CJK.search(r["title"]) for r in rows)
    assert milestone[3].stats["self_blocks"] == 1


def test_autobiography_summary_is_a_grouped_outline(rich: Database):
    run_light(rich, night())
    with rich.transaction() as conn:
        block = conn.execute("SELECT * FROM self_block WHERE anima_id = %s", (A,)).fetchone()
        narratives = conn.execute("SELECT * FROM autobiographical_memory WHERE status = 'active'").fetchall()
    assert block["name"] == "autobiography_summary" and block["updated_by"] == STEP_SUMMARY
    lines = block["content"].splitlines()
    assert lines[0] == "## Recent (last 30 days)"
    assert re.fullmatch(r"- (Turning points|Milestones)", lines[1])
    for n in narratives:
        assert f"  - {n['occurred_from'].astimezone(CST):%Y-%m-%d} {n['title']}" in lines
    assert narratives and all(n["significance"] in ("milestone", "turning_point") for n in narratives)
    with rich.transaction() as conn:
        events = conn.execute(
            "SELECT op, table_name FROM memory_event WHERE step IN (%s, %s)", (STEP_NARRATIVE, STEP_SUMMARY)
        ).fetchall()
    assert {(e["table_name"], e["op"]) for e in events} == {
        ("autobiographical_memory", "create"),
        ("self_block", "write"),
    }


def test_outline_fades_with_distance():
    now = datetime(2023, 5, 9, tzinfo=CST)

    def n(i: int, days_ago: int, significance: str, title: str) -> dict:
        when = now - timedelta(days=days_ago)
        return {
            "id": i,
            "occurred_from": when,
            "created_at": when,
            "significance": significance,
            "title": title,
        }

    narratives = [
        n(1, 2, "routine", "Morning run"),
        n(2, 3, "milestone", "Engaged to Alex"),
        n(3, 10, "turning_point", "Quit the bank"),
        n(4, 90, "routine", "Bought groceries"),
        n(5, 100, "notable", "Moved to Jing'an"),
        n(6, 400, "notable", "Visited Leshan"),
        n(7, 500, "milestone", "Graduated"),
        n(8, 900, "turning_point", "Left Chengdu"),
    ]
    outline = autobiography_outline(narratives, now, CST)
    assert outline.splitlines() == [
        "## Recent (last 30 days)",
        "- Turning points",
        "  - 2023-04-29 Quit the bank",
        "- Milestones",
        "  - 2023-05-06 Engaged to Alex",
        "- Everyday",
        "  - 2023-05-07 Morning run",
        "## This year",
        "- Notable",
        "  - 2023-01-29 Moved to Jing'an",
        "## Earlier years",
        "- 2021",
        "  - Graduated",
        "- 2020",
        "  - Left Chengdu",
    ]
    assert autobiography_outline([], now, CST) == ""
