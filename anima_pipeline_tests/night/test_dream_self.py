"""Dream and self-layer refresh on a real database: the dream entry written once per day with
its confidence updates applied and audited, nothing on a day without new memories; the
self refresh writes four blocks, no new versions on a second run, identity untouched."""

from __future__ import annotations

from datetime import date, datetime, timedelta

import pytest

from anima_pipeline.llm.offline import OfflineEngine
from anima_pipeline.night.frame import Night
from anima_pipeline.night.steps.dream.step import dream
from anima_pipeline.night.steps.self_refresh.step import refresh_self
from anima_pipeline.store.db import Connection
from anima_pipeline.store.events import Audit
from anima_pipeline.store.layers import SelfBlockRepo
from anima_pipeline.store.memories import MemoryRepo
from anima_pipeline.text.entities import entity_index, entity_kind, plan_of_memory
from anima_pipeline.tools.executor import ToolExecutor
from anima_pipeline.tools.scope import Scope

DAY = date(2026, 11, 18)
EARLIER = DAY - timedelta(days=2)


def _night(day: date = DAY, **kw) -> Night:
    return Night(day=day, engine=OfflineEngine(), **kw)


def _audit(conn: Connection, day: date, step: str = "semantic_memory/extracted") -> Audit:
    return Audit(conn=conn, anima_id="a", run_id=f"setup-{day}", step=step, day=day)


def _at(day: date, hour: int = 20) -> datetime:
    return datetime.fromisoformat(f"{day.isoformat()}T{hour:02d}:00:00+08:00")


OLDER = [
    ("world", "Lin Wei has an orange tabby cat named Mochi.", 0.9),
    ("experience", "Mochi chewed through Lin Wei's headphone cable.", 0.8),
    ("world", "Lin Wei's sister Mei is a nurse in Chengdu.", 0.8),
    ("preference", "Lin Wei loves spicy hotpot with Sichuan pepper.", 0.9),
    ("preference", "Lin Wei listens to jazz; Bill Evans is a favourite.", 0.7),
    ("opinion", "Lin Wei thinks a bank job is safe but boring.", 0.9),
    ("world", "Lin Wei is from Leshan in Sichuan.", 0.95),
    ("world", "Lin Wei runs along the Huangpu riverside.", 0.8),
    ("world", "Lin Wei's longest run so far was 18 km.", 0.8),
]


@pytest.fixture
def store(db):
    """Older memories (two days before), then the day's light and deep sleep writes."""
    ids: dict[str, int] = {}
    with db.transaction() as conn:
        old = MemoryRepo(conn, _audit(conn, EARLIER))
        for i, (kind, content, conf) in enumerate(OLDER):
            m = old.create(
                "a", {"type": kind, "content": content, "confidence": conf, "observed_at": _at(EARLIER)}
            )
            ids[f"old{i}"] = m.id
        today = MemoryRepo(conn, _audit(conn, DAY))
        ids["knock"] = today.create(
            "a",
            {
                "type": "experience",
                "content": "Mochi knocked Lin Wei's tea off the desk.",
                "observed_at": _at(DAY),
            },
        ).id
        ids["race"] = today.create(
            "a",
            {
                "type": "experience",
                "content": "Lin Wei is planning to run the Shanghai Half Marathon on 2026-11-22.",
                "observed_at": _at(DAY, 21),
            },
        ).id
        today.update(ids["old2"], {"content": "Lin Wei's sister Mei is a nurse in Chengdu with two kids."})
        merge_audit = _audit(conn, DAY, "semantic_memory/merged")
        executor = ToolExecutor(conn, Scope(anima_id="a", tools=("merge_semantic_memories",)), merge_audit)
        result = executor.call(
            "merge_semantic_memories",
            {
                "source_ids": [f"f-{ids['old7']}", f"f-{ids['old8']}"],
                "content": "Lin Wei runs along the Huangpu riverside; the longest run so far was 18 km.",
            },
        )
        assert not result.is_error, result.content
        ids["merged"] = int(result.data["id"][2:])
    return db, ids


def _confidence(conn: Connection, memory_id: int) -> float:
    return round(
        conn.execute("SELECT confidence FROM semantic_memory WHERE id = %s", (memory_id,)).fetchone()[
            "confidence"
        ],
        4,
    )


def test_dream_entry_written_with_confidence_updates_applied_and_audited(store):
    db, ids = store
    result = dream(db, _night(), "a")
    assert result.stats["dreams"] == 1 and result.stats["today_memories"] == 4
    assert result.stats["confidence_updates"] == 2
    with db.transaction() as conn:
        [entry] = conn.execute("SELECT * FROM dream_journal WHERE anima_id = 'a'").fetchall()
        assert entry["day"] == DAY
        links = " | ".join(c["link"] + " / " + c["why"] for c in entry["creative_connections"])
        assert f"f-{ids['knock']}" in links and "Mochi" in links and len(entry["creative_connections"]) <= 5
        assert any("Mochi" in a for a in entry["aha_moments"])  # Mochi is in 3 memories, one of them today's
        assert any(
            "Shanghai Half Marathon" in a and a.startswith("After 2026-11-22")
            for a in entry["next_session_actions"]
        )
        pages = {p["slug"]: p for p in entry["bank_suggestions"]}
        assert pages["mochi"]["kind"] == "entity"
        assert pages["mochi"]["seed_content"].count("\n- ") == 2  # a bullet list of its three memories
        updates = {u["id"]: u for u in entry["confidence_updates"]}
        assert set(updates) == {f"f-{ids['old2']}", f"f-{ids['merged']}"}
        assert "merged from" in updates[f"f-{ids['merged']}"]["reason"]
        assert _confidence(conn, ids["old2"]) == 0.85  # 0.8 re-confirmed by today's update
        assert _confidence(conn, ids["merged"]) == 0.85  # max of its sources (0.8) + 0.05
        assert _confidence(conn, ids["knock"]) == 0.8  # new today: not a re-confirmation
        events = conn.execute(
            "SELECT * FROM memory_event WHERE op = 'confidence' AND step = 'dreams/journal' ORDER BY memory_id"
        ).fetchall()
        assert len(events) == 2 and all(e["day"] == DAY for e in events)
        assert (
            conn.execute(
                "SELECT count(*) AS n FROM memory_event WHERE table_name = 'dream_journal'"
            ).fetchone()["n"]
            == 1
        )


def test_forced_rerun_keeps_one_entry_and_does_not_raise_confidence_twice(store):
    db, ids = store
    dream(db, _night(), "a")
    again = dream(db, _night(force=True), "a")
    assert again.status == "done" and again.stats["confidence_updates"] == 0
    with db.transaction() as conn:
        assert conn.execute("SELECT count(*) AS n FROM dream_journal").fetchone()["n"] == 1
        assert _confidence(conn, ids["old2"]) == 0.85
        assert (
            conn.execute("SELECT count(*) AS n FROM memory_event WHERE op = 'confidence'").fetchone()["n"]
            == 2
        )


def test_confidence_is_capped_at_one(db):
    with db.transaction() as conn:
        m = MemoryRepo(conn, _audit(conn, EARLIER)).create(
            "a", {"type": "world", "content": "Lin Wei is from Leshan.", "confidence": 0.98}
        )
        MemoryRepo(conn, _audit(conn, DAY)).update(m.id, {"content": "Lin Wei is from Leshan in Sichuan."})
    dream(db, _night(), "a")
    with db.transaction() as conn:
        assert _confidence(conn, m.id) == 1.0


def test_no_dream_on_a_day_without_new_memories(store):
    db, _ = store
    quiet = dream(db, _night(DAY + timedelta(days=1)), "a")
    assert quiet.stats["dreams"] == 0 and quiet.stats["today_memories"] == 0
    with db.transaction() as conn:
        assert conn.execute("SELECT count(*) AS n FROM dream_journal").fetchone()["n"] == 0


def test_entity_cues():
    from anima_pipeline_tests.conftest import memory_row

    now = datetime.fromisoformat("2026-11-18T20:00:00+08:00")

    def mem(i: int, content: str):
        return memory_row(i, content, at=now)

    mems = [
        mem(1, "Lin Wei has a cat named Mochi."),
        mem(2, "Because Lin Wei was scared, Aria helped."),
        mem(3, "Running is fun. Lin Wei moved to Shanghai."),
        mem(4, "Lin Wei妈妈叫王秀兰，住在乐山。"),
    ]
    index = entity_index(mems, frozenset({"aria"}))
    assert set(index) == {"Lin Wei", "Mochi", "Shanghai", "王秀兰"}
    assert index["Lin Wei"] == {1, 2, 3, 4}
    assert entity_kind("Mochi", mems) == "pet" and entity_kind("Lin Wei", mems) == "person"
    assert entity_kind("Shanghai", mems) == "place"
    assert plan_of_memory("Lin Wei went to Leshan on 2026-11-10.", DAY) is None
    assert plan_of_memory("Aria will check the weather.", DAY, frozenset({"aria"})) is None
    assert plan_of_memory("Then Lin Wei will visit Leshan at Spring Festival.", DAY) == (
        "Ask Lin Wei how the plan to visit Leshan at Spring Festival went"
    )


def test_self_refresh_writes_four_blocks_then_no_new_versions_identity_untouched(store):
    db, ids = store
    with db.transaction() as conn:
        SelfBlockRepo(conn, _audit(conn, EARLIER, "seed")).write(
            "a", "identity", "I am Aria, a companion.", "seed"
        )
    first = refresh_self(db, _night(), "a")
    assert first.stats["self_blocks"] == 4
    with db.transaction() as conn:
        blocks = {
            r["name"]: r for r in conn.execute("SELECT * FROM self_block WHERE anima_id = 'a'").fetchall()
        }
        assert (
            blocks["identity"]["content"] == "I am Aria, a companion." and blocks["identity"]["version"] == 1
        )
        rel = blocks["relationships"]["content"]
        assert "People:" in rel and "- Mei: " in rel and "Pets:" in rel and "- Mochi: " in rel
        state = blocks["current_state"]["content"]
        assert "Mochi knocked" in state and "Plans ahead:" in state and "Shanghai Half Marathon" in state
        assert "bank job is safe but boring" in blocks["values"]["content"]
        persona = blocks["persona"]["content"]
        assert persona.index("spicy hotpot") < persona.index("jazz")  # confidence 0.9 before 0.7
        versions = {n: b["version"] for n, b in blocks.items()}
        history = conn.execute("SELECT count(*) AS n FROM self_block_history").fetchone()["n"]
    second = refresh_self(db, _night(force=True), "a")
    assert second.status == "done" and second.stats["self_blocks"] == 0
    with db.transaction() as conn:
        again = {
            r["name"]: r["version"]
            for r in conn.execute("SELECT * FROM self_block WHERE anima_id = 'a'").fetchall()
        }
        assert again == versions
        assert conn.execute("SELECT count(*) AS n FROM self_block_history").fetchone()["n"] == history
        assert (
            conn.execute(
                "SELECT count(*) AS n FROM memory_event WHERE table_name = 'self_block' AND step = 'self_blocks/refreshed'"
            ).fetchone()["n"]
            == 4
        )


def test_self_refresh_does_nothing_without_memories(db):
    result = refresh_self(db, _night(), "empty")
    assert result.stats["memories"] == 0 and result.stats["self_blocks"] == 0
    with db.transaction() as conn:
        assert conn.execute("SELECT count(*) AS n FROM self_block").fetchone()["n"] == 0
