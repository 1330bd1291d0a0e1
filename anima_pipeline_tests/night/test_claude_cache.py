"""Deep sleep's shared prompt prefix survives the writes of the night between its rounds: the
dream and the self refresh may change self blocks and confidences while the rounds run, and
every round still sends byte-identical tools, system prompt and message 1, read from the
cache of the fake Messages API (which bills it the way the API does)."""

from __future__ import annotations

from pathlib import Path

from pydantic import SecretStr

from anima_pipeline.config import Settings
from anima_pipeline.core.steps import DEEP_SLEEP
from anima_pipeline.llm.anthropic.engine import AnthropicEngine
from anima_pipeline.night.steps.deep.step import read_log
from anima_pipeline.store.db import Database
from anima_pipeline.store.events import Audit
from anima_pipeline.store.layers import SelfBlockRepo
from anima_pipeline.store.memories import MemoryRepo
from anima_pipeline_tests.night.test_deep_sleep import DAY, A, big_store, deconflict, night, split
from testkit.fake_messages_api import FakeMessagesAPI


def test_rounds_share_one_cached_prefix_while_dream_and_self_refresh_write(
    db: Database, tmp_path: Path
) -> None:
    big_store(db, 60, 300)
    with FakeMessagesAPI(min_cache_tokens=None) as fake:
        engine = AnthropicEngine(
            "claude-sonnet-5-5",
            SecretStr("sk-ant-test"),
            base_url=fake.url,
            max_retries=0,
            settings=Settings(llm={"step_models": dict.fromkeys(DEEP_SLEEP, "main")}),  # caches are per model
        )
        try:
            n = night(tmp_path, engine=engine, mode="full")
            deconflict(db, n, A)
            with db.transaction() as conn:  # what the dream and the self refresh write meanwhile
                SelfBlockRepo(
                    conn, Audit(conn=conn, anima_id=A, run_id="r", step="self_blocks/refreshed", day=DAY)
                ).write(A, "current_state", "Busy with a move to Lisbon.", "self_refresh")
                first = MemoryRepo(conn).active(A)[0]
                MemoryRepo(
                    conn, Audit(conn=conn, anima_id=A, run_id="r", step="dreams/journal", day=DAY)
                ).update(first.id, {"confidence": 0.4})
            split(db, n, A)
        finally:
            engine.close()
        one, two = fake.messages
        u1, u2 = (r["usage"] for r in fake.responses)
    assert one["system"] == two["system"] and one["tools"] == two["tools"]
    assert one["messages"][0]["content"][0] == two["messages"][0]["content"][0]  # message 1
    assert "Busy with a move" not in str(two["system"])  # the snapshot taken when deep sleep began
    assert u1["cache_creation_input_tokens"] > 0
    assert u2["cache_read_input_tokens"] == u1["cache_creation_input_tokens"]


def test_the_round_log_keeps_every_anima_when_animas_write_at_once(tmp_path: Path) -> None:
    import threading

    from anima_pipeline.llm.offline import OfflineEngine
    from anima_pipeline.night.frame import Night
    from anima_pipeline.night.steps.deep.step import _write_log

    n = Night(day=DAY, engine=OfflineEngine(), log_dir=tmp_path)
    names = [f"a{i}" for i in range(12)]
    threads = [
        threading.Thread(target=_write_log, args=(n, a, 1, "contradiction", {"summary": a}, [], []))
        for a in names
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    data = read_log(tmp_path, DAY, 1, "contradiction")
    assert sorted(data["animas"]) == sorted(names)
