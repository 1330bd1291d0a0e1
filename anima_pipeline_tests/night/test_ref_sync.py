"""Memory-ref-sync on a real database: citations collected once, unknown ids counted,
references re-pointed through merge chains, decayed counts at the decay_days boundary,
and the resident set capped with the overflow warned, never unpinned."""

from __future__ import annotations

from datetime import date, datetime, timedelta

from anima_pipeline.config import RecallSettings
from anima_pipeline.llm.offline import OfflineEngine
from anima_pipeline.night.frame import Night
from anima_pipeline.night.steps.references.step import animas_for, decayed_count, sync_references
from anima_pipeline.store.db import Connection

DAY = date(2026, 11, 16)


def _night(**kw) -> Night:
    return Night(day=DAY, engine=OfflineEngine(), **kw)


def _mem(conn: Connection, anima: str, content: str, **cols) -> int:
    values = {"anima_id": anima, "type": "world", "content": content, **cols}
    sql = f"INSERT INTO semantic_memory ({', '.join(values)}) VALUES ({', '.join(['%s'] * len(values))}) RETURNING id"
    return conn.execute(sql, list(values.values())).fetchone()["id"]


def _msg(conn: Connection, anima: str, conv: str, text: str, at: datetime, role: str = "assistant") -> int:
    conn.execute(
        """INSERT INTO conversation (id, anima_id, created_at, updated_at) VALUES (%s, %s, %s, %s)
           ON CONFLICT DO NOTHING""",
        (conv, anima, at, at),
    )
    n = conn.execute("SELECT count(*) AS n FROM message WHERE conversation_id = %s", (conv,)).fetchone()["n"]
    return conn.execute(
        """INSERT INTO message (anima_id, conversation_id, external_id, role, content, created_at)
           VALUES (%s, %s, %s, %s, %s, %s) RETURNING id""",
        (anima, conv, f"{conv}:{n}", role, text, at),
    ).fetchone()["id"]


def _ref(conn: Connection, anima: str, memory_id: int, message_id: int, at: datetime) -> None:
    conn.execute(
        """INSERT INTO memory_reference (anima_id, memory_id, cited_memory_id, message_id, conversation_id, referenced_at)
           SELECT %s, %s, %s, id, conversation_id, %s FROM message WHERE id = %s""",
        (anima, memory_id, memory_id, at, message_id),
    )


def _count(conn: Connection, sql: str, *params) -> int:
    return conn.execute(sql, params).fetchone()["n"]


def test_citations_collected_once_and_unknown_ids_counted(db):
    night = _night()
    noon = night.start + timedelta(hours=12)
    with db.transaction() as conn:
        m1 = _mem(conn, "a", "Lin Wei has a cat named Mochi.")
        foreign = _mem(conn, "b", "Another anima's memory.")
        _msg(conn, "a", "c1", f"Mochi! [[anima:f-{m1}]] and again [[anima:f-{m1}]]", noon)
        _msg(
            conn,
            "a",
            "c1",
            f"[[anima:f-{foreign}]] [[anima:f-999999]] [[anima:f-{m1}]]",
            noon + timedelta(minutes=1),
        )
        _msg(conn, "a", "c1", f"user text [[anima:f-{m1}]] is not a citation", noon, role="user")
        _msg(conn, "a", "c1", f"tomorrow [[anima:f-{m1}]]", night.end + timedelta(hours=1))
    first = sync_references(db, night, "a")
    assert first.stats["citations_added"] == 2  # one per (message, cited id), day's assistant messages only
    assert first.stats["unknown_citations"] == 2  # another anima's id and a missing id
    with db.transaction() as conn:
        mem = conn.execute("SELECT * FROM semantic_memory WHERE id = %s", (m1,)).fetchone()
        assert mem["reference_count"] == 2.0
        assert mem["last_referenced_at"] == noon + timedelta(minutes=1)
        assert (
            _count(conn, "SELECT count(*) AS n FROM memory_event WHERE table_name = 'memory_reference'") == 2
        )
        assert _count(conn, "SELECT count(*) AS n FROM memory_event WHERE op = 'reference_count'") == 1
    again = sync_references(db, _night(force=True), "a")
    assert again.status == "done"
    assert (again.stats["citations_added"], again.stats["counts_updated"]) == (0, 0)
    with db.transaction() as conn:
        assert _count(conn, "SELECT count(*) AS n FROM memory_reference") == 2
        assert _count(conn, "SELECT count(*) AS n FROM memory_event WHERE op = 'reference_count'") == 1
    skipped = sync_references(db, _night(), "a")
    assert skipped.status == "skipped"


def test_repointing_follows_the_merge_chain_and_survives_a_cycle(db):
    night = _night()
    noon = night.start + timedelta(hours=12)
    with db.transaction() as conn:
        end = _mem(conn, "a", "Lin Wei ran a half marathon in 1:58.")
        middle = _mem(conn, "a", "Lin Wei ran a half marathon.", status="deprecated", superseded_by=end)
        first = _mem(conn, "a", "Lin Wei runs.", status="deprecated", superseded_by=middle)
        loop_a = _mem(conn, "a", "Loop A.", status="deprecated")
        loop_b = _mem(conn, "a", "Loop B.", status="deprecated", superseded_by=loop_a)
        conn.execute("UPDATE semantic_memory SET superseded_by = %s WHERE id = %s", (loop_b, loop_a))
        old_msg = _msg(conn, "a", "old", "earlier", night.start - timedelta(days=3))
        _ref(conn, "a", first, old_msg, night.start - timedelta(days=3))  # cited before the merges
        _ref(conn, "a", loop_a, old_msg, night.start - timedelta(days=3))
        _msg(conn, "a", "c1", f"As you told me [[anima:f-{middle}]]", noon)  # cites a merged-away memory
        before = conn.execute("SELECT updated_at FROM semantic_memory WHERE id = %s", (end,)).fetchone()
    result = sync_references(db, night, "a")
    assert result.stats["repointed"] == 1 and result.stats["citations_added"] == 1
    assert any("cycle" in w for w in result.details["warnings"])
    with db.transaction() as conn:
        refs = conn.execute("SELECT memory_id, cited_memory_id FROM memory_reference ORDER BY id").fetchall()
        assert [(r["memory_id"], r["cited_memory_id"]) for r in refs] == [
            (end, first),
            (loop_a, loop_a),
            (end, middle),
        ]
        row = conn.execute("SELECT * FROM semantic_memory WHERE id = %s", (end,)).fetchone()
        assert row["reference_count"] == 2.0
        assert row["updated_at"] == before["updated_at"]  # bookkeeping does not mark the memory changed
        ev = conn.execute("SELECT * FROM memory_event WHERE op = 'repoint'").fetchone()
        assert (ev["before"]["memory_id"], ev["after"]["memory_id"]) == (first, end)


def test_decay_weights_at_the_decay_days_boundary(db):
    night = _night()
    boundary = night.end - timedelta(days=30)
    with db.transaction() as conn:
        m = _mem(conn, "a", "Lin Wei is from Leshan.")
        quiet = _mem(conn, "a", "Never cited.", reference_count=3.0)
        for at in (boundary, boundary - timedelta(seconds=1), night.end - timedelta(hours=1), night.end):
            _ref(conn, "a", m, _msg(conn, "a", "old", "x", at), at)
    result = sync_references(db, night, "a")
    assert result.stats["counts_updated"] == 2
    with db.transaction() as conn:
        row = conn.execute("SELECT * FROM semantic_memory WHERE id = %s", (m,)).fetchone()
        # inside (boundary and the last hour) 1.0 each, just outside 0.25, at the cutoff: not yet
        assert row["reference_count"] == 2.25
        assert row["last_referenced_at"] == night.end - timedelta(hours=1)
        assert (
            conn.execute("SELECT reference_count FROM semantic_memory WHERE id = %s", (quiet,)).fetchone()[
                "reference_count"
            ]
            == 0.0
        )
    recall = RecallSettings(reference_decay_days=1, reference_recent_weight=2, reference_stale_weight=0.5)
    custom = sync_references(db, _night(force=True, recall=recall), "a")
    assert custom.stats["counts_updated"] == 1
    with db.transaction() as conn:
        assert (
            conn.execute("SELECT reference_count FROM semantic_memory WHERE id = %s", (m,)).fetchone()[
                "reference_count"
            ]
            == 3.0
        )  # 2 (last hour) + 0.5 + 0.5


def test_decayed_count_is_a_pure_function_of_the_cutoff():
    cutoff = datetime.fromisoformat("2026-11-17T00:00:00+08:00")
    times = [cutoff - timedelta(days=30), cutoff - timedelta(days=30, seconds=1), cutoff]
    assert decayed_count(times, cutoff, 30, 1.0, 0.25) == 1.25


def test_resident_capped_overflow_warned_never_unpinned(db):
    night = _night()
    with db.transaction() as conn:
        pins = [_mem(conn, "a", f"Pinned fact {i}.", pinned=True, pinned_at=night.start) for i in range(3)]
        cited = _mem(conn, "a", "Cited fact.")
        other = _mem(conn, "a", "Less cited fact.")
        noon = night.start + timedelta(hours=12)
        _msg(conn, "a", "c1", f"[[anima:f-{cited}]] [[anima:f-{pins[0]}]]", noon)
        _msg(conn, "a", "c1", f"[[anima:f-{cited}]] [[anima:f-{other}]]", noon + timedelta(minutes=1))
    result = sync_references(db, _night(recall=RecallSettings(pinned_max=2, resident_top_n=1)), "a")
    s = result.stats
    assert (s["pinned"], s["resident_overflow"], s["resident"]) == (3, 1, 3)
    assert result.details["resident"] == [f"f-{pins[0]}", f"f-{pins[1]}", f"f-{cited}"]
    assert any("none unpinned" in w for w in result.details["warnings"])
    with db.transaction() as conn:
        assert _count(conn, "SELECT count(*) AS n FROM semantic_memory WHERE pinned") == 3
        assert _count(conn, "SELECT count(*) AS n FROM memory_event WHERE op = 'unpin'") == 0
    default = sync_references(db, _night(force=True), "a")
    assert (default.stats["resident_overflow"], default.stats["resident"]) == (0, 5)


def test_animas_for_includes_quiet_animas_whose_citations_cross_the_boundary(db):
    night = _night()
    with db.transaction() as conn:
        m = _mem(conn, "quiet", "Fact.")
        crossing = night.end - timedelta(days=30, hours=3)
        _ref(conn, "quiet", m, _msg(conn, "quiet", "old", "x", crossing), crossing)
        _msg(conn, "busy", "c1", "hello", night.start + timedelta(hours=9), role="user")
        assert animas_for(conn, night) == ["busy", "quiet"]
        assert animas_for(conn, Night(day=DAY + timedelta(days=2), engine=OfflineEngine())) == []
