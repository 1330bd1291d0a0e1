"""Batch mode against the fake Messages API's /v1/messages/batches: the turns of several
animas go out as one batch per turn, and a night in batch mode writes the same memories as
the synchronous mode at half the computed cost."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from anima_pipeline.config import Settings
from anima_pipeline.llm.anthropic.batches import BatchCollector
from anima_pipeline.llm.anthropic.engine import AnthropicEngine
from anima_pipeline.llm.budget import Budget
from anima_pipeline.llm.contract import StepRequest, TextBlock, ToolResult, ToolSpec, Usage
from anima_pipeline.llm.failures import RequestRejected, RetriesExhausted
from anima_pipeline.night.runner import run_days
from anima_pipeline.store.archive import ImportStats, import_records, parse_lines
from anima_pipeline.store.db import Database
from anima_pipeline.store.events import Audit
from anima_pipeline_tests.conftest import cloned_database
from testkit.data import conversation_lines
from testkit.fake_messages_api import (
    FakeMessagesAPI,
    error,
    is_stage_one,
    reply,
    sleep_autopilot,
    text,
    tool_use,
)

MODEL = "claude-sonnet-5-5"
DAY = date(2026, 11, 17)
ANIMAS = ("ava", "bo", "cy")
SPEC = {"type": "object", "properties": {"q": {"type": "string"}}}


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def call(self, name: str, input: dict[str, Any]) -> ToolResult:
        self.calls.append((name, input))
        return ToolResult(content=f"ok {name}")


def no_plan():
    raise AssertionError("not offline")
    yield  # pragma: no cover


def engine(fake: FakeMessagesAPI, collector: BatchCollector | None, **kw: Any) -> AnthropicEngine:
    return AnthropicEngine(
        MODEL,
        SecretStr("sk-ant-test"),
        base_url=fake.url,
        max_retries=0,
        timeout=10,
        collector=collector,
        **kw,
    )


def request(who: str) -> StepRequest:
    return StepRequest(
        step="s",
        system=[TextBlock(text=f"You help {who}.")],
        user=[TextBlock(text=f"Today {who} talked.")],
        tools=[ToolSpec(name="note", description="note a fact", input_schema=SPEC)],
    )


def test_turns_of_concurrent_conversations_go_out_as_one_batch_per_turn() -> None:
    def answer(body: dict[str, Any]) -> dict[str, Any]:
        who = body["system"][0]["text"].split()[-1].rstrip(".")
        if len(body["messages"]) == 1:
            return reply(tool_use("note", {"q": who}))
        return reply(text("done"))

    collector = BatchCollector(window_s=5.0, poll_s=0.05)  # members, not the window, release it
    runners = {w: Recorder() for w in ANIMAS}
    usages: dict[str, Usage] = {}
    with FakeMessagesAPI(responder=answer, batch_latency_s=0.1) as fake:
        eng = engine(fake, collector)

        def run(who: str) -> None:
            with collector.member():
                usages[who] = eng.run(request(who), runners[who], no_plan)

        threads = [threading.Thread(target=run, args=(w,)) for w in ANIMAS]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        creates = [r for r in fake.requests if r.path == "/v1/messages/batches"]
        sync = [r for r in fake.requests if r.path == "/v1/messages"]
        eng.close()
    assert not sync and len(creates) == 2  # turn 1 of all three, then turn 2 of all three
    assert [len(r.body["requests"]) for r in creates] == [3, 3]
    assert all(runners[w].calls == [("note", {"q": w})] for w in ANIMAS)
    assert all(u.calls == 2 and u.batched_calls == 2 for u in usages.values())


def test_an_errored_batch_entry_fails_only_its_own_step() -> None:
    with FakeMessagesAPI([error(400, "messages: bad")]) as fake:
        eng = engine(fake, BatchCollector(window_s=0.05, poll_s=0.02))
        with pytest.raises(RequestRejected, match="invalid_request_error"):
            eng.run(request("ava"), Recorder(), no_plan)
        eng.close()


def test_an_entry_that_failed_server_side_is_sent_again_in_the_next_batch() -> None:
    script = [
        error(529, "overloaded"),
        error(500),
        reply(tool_use("note", {"q": "ava"})),
        reply(text("done")),
    ]
    collector = BatchCollector(window_s=0.05, poll_s=0.02, max_attempts=3)
    recorder = Recorder()
    with FakeMessagesAPI(script) as fake:
        eng = engine(fake, collector)
        usage = eng.run(request("ava"), recorder, no_plan)
        creates = [r for r in fake.requests if r.path == "/v1/messages/batches"]
        eng.close()
    assert len(creates) == 4  # overloaded, server error, then the tool turn, then the last turn
    assert creates[0].body["requests"][0]["params"] == creates[2].body["requests"][0]["params"]
    assert recorder.calls == [("note", {"q": "ava"})]  # the step went on as if nothing had happened
    assert usage.calls == 2 and collector.requests_resent == 2


def test_an_entry_failing_in_every_batch_fails_its_step_naming_the_attempts() -> None:
    with FakeMessagesAPI([error(529, "overloaded")] * 3) as fake:
        eng = engine(fake, BatchCollector(window_s=0.05, poll_s=0.02, max_attempts=3))
        with pytest.raises(RetriesExhausted, match=r"failed in 3 batch\(es\); last: overloaded_error"):
            eng.run(request("ava"), Recorder(), no_plan)
        assert len([r for r in fake.requests if r.path == "/v1/messages/batches"]) == 3
        eng.close()


# ---- a whole night, batch vs synchronous ------------------------------------------------


@pytest.fixture
def second_db_url(pg_admin_url: str, template_db: str) -> Iterator[str]:
    with cloned_database(pg_admin_url, template_db) as url:
        yield url


def archive() -> list[str]:
    lines = []
    for a in ANIMAS:
        conv = f"{a}:{DAY}-a"
        t = datetime(DAY.year, DAY.month, DAY.day, 19, 0)
        talk = [("user", f"My name is {a.title()} and I moved to Porto last spring."), ("assistant", "Nice!")]
        lines += conversation_lines(a, conv, t, talk, speakers=(a, a))
    return lines


def model(body: dict[str, Any]) -> dict[str, Any] | None:
    """A deterministic model: stage 1 records where the user moved, once per conversation."""
    if is_stage_one(body) and len(body["messages"]) == 1:
        conv = re.search(r"## Conversation (\S+)", json.dumps(body["messages"][0], ensure_ascii=False)).group(
            1
        )
        who = conv.split(":")[0].title()
        fact = {
            "type": "world",
            "content": f"{who} moved to Porto in spring 2026.",
            "source_sessions": [conv],
        }
        return reply(tool_use("create_semantic_memory", fact))
    return sleep_autopilot(body)


def night(url: str, tmp: Path, batch: bool) -> tuple[dict[str, list[str]], Usage, int]:
    db = Database(url, max_size=8)
    settings = Settings(
        home=tmp, engine="anthropic", workers=len(ANIMAS), llm={"mode": "batch" if batch else "sync"}
    )
    try:
        with db.transaction() as conn:
            audit = Audit(conn=conn, anima_id="", run_id="import", step="import")
            import_records(conn, parse_lines(archive(), "test"), audit, ImportStats())
        with FakeMessagesAPI(min_cache_tokens=None, responder=model) as fake:
            collector = BatchCollector(window_s=0.5, poll_s=0.02) if batch else None
            eng = engine(fake, collector, budget=Budget(), settings=settings)
            try:
                results = run_days(db, settings, [DAY], mode="full", engine=eng)
            finally:
                eng.close()
            batches = sum(1 for r in fake.requests if r.path == "/v1/messages/batches")
        usage = sum((r.usage for r in results), Usage())
        with db.transaction() as conn:
            rows = conn.execute(
                "SELECT anima_id, content FROM semantic_memory WHERE status = 'active' ORDER BY anima_id, content"
            ).fetchall()
    finally:
        db.close()
    memories: dict[str, list[str]] = {}
    for r in rows:
        memories.setdefault(r["anima_id"], []).append(r["content"])
    return memories, usage, batches


def test_a_night_in_batch_mode_writes_the_same_memories_at_half_the_cost(
    db_url: str, second_db_url: str, tmp_path: Path
) -> None:
    sync_memories, sync_usage, sync_batches = night(db_url, tmp_path / "sync", batch=False)
    batch_memories, batch_usage, batches = night(second_db_url, tmp_path / "batch", batch=True)
    assert sync_batches == 0 and batches >= 2
    assert set(sync_memories) == set(ANIMAS) and batch_memories == sync_memories
    assert batch_usage.batched_calls == batch_usage.calls == sync_usage.calls
    tokens = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_write_tokens")
    assert [getattr(batch_usage, t) for t in tokens] == [getattr(sync_usage, t) for t in tokens]
    assert batch_usage.cost_usd == pytest.approx(sync_usage.cost_usd / 2, rel=0.01)
