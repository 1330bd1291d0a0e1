"""Deep sleep on a real PostgreSQL: the four rounds (contradiction + expiry, split, merge,
pin review) alone and in order, the snapshot-based message 1 that stays byte-identical (and
cached) across rounds, the size thresholds, incremental and full modes keyed to the
partition day, the breaker, the per-round operation logs and idempotence.

Memories are planted straight into the store (audited, like any step's writes) and the
rounds run with the offline engine, except the prompt-cache test, which runs the real
Anthropic SDK against the scripted fake Messages API."""

from __future__ import annotations

import json
import logging
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from pydantic import SecretStr

from anima_pipeline import config
from anima_pipeline.core.steps import DEEP_SLEEP
from anima_pipeline.llm.anthropic.engine import AnthropicEngine
from anima_pipeline.llm.offline import OfflineEngine
from anima_pipeline.night.frame import Night, StepFailed
from anima_pipeline.night.guards import LossGuardTripped, LossLimits
from anima_pipeline.night.steps.deep.prompt import (
    BATCH_CHARS,
    DEEP_ROUND_TASK,
    REFUSE_CHARS,
    WARN_CHARS,
    DeepSleepTooLarge,
    message_one,
    message_one_five,
    size_band,
    slices,
)
from anima_pipeline.night.steps.deep.step import (
    deconflict,
    merge,
    prefilter,
    read_log,
    review_pins,
    split,
)
from anima_pipeline.store import sleep_state
from anima_pipeline.store.db import Database
from anima_pipeline.store.events import Audit
from anima_pipeline.store.memories import MemoryRepo, SemanticMemory
from anima_pipeline_tests.conftest import memory_row
from testkit.fake_messages_api import FakeMessagesAPI, reply, text, tool_use

CST = ZoneInfo("Asia/Shanghai")
A = "mira"
DAY = date(2024, 3, 5)  # the night under test (a Tuesday; every test sets the mode explicitly)
PLANTED = date(2024, 2, 1)  # the partition day of the light sleep that wrote the planted memories
LIGHT = "semantic_memory/extracted"
STEP_DECONFLICT, STEP_SPLIT, STEP_MERGE, STEP_PINS = DEEP_SLEEP
ROUNDS = (deconflict, split, merge, review_pins)
END = datetime(2024, 3, 6, tzinfo=CST)  # Night(DAY).end


# ---- helpers ------------------------------------------------------------------------


def at(month: int, day: int, hour: int = 10) -> datetime:
    return datetime(2024, month, day, hour, tzinfo=CST)


def mem(
    content: str,
    type: str = "world",
    observed: datetime | None = None,
    sources: list[str] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    return {
        "type": type,
        "content": content,
        "observed_at": observed,
        "source_sessions": sources or ["s-plant"],
        **extra,
    }


def plant(
    db: Database,
    *specs: dict[str, Any],
    day: date | None = PLANTED,
    step: str = LIGHT,
    now: datetime | None = None,
) -> list[int]:
    """Write memories the way a step does (audited with its day and step); ids in order."""
    with db.transaction() as conn:
        repo = MemoryRepo(conn, Audit(conn=conn, anima_id=A, run_id="plant", step=step, day=day))
        return [repo.create(A, spec, now=now).id for spec in specs]


def night(tmp_path: Path, day: date = DAY, **kw: Any) -> Night:
    return Night(day=day, engine=kw.pop("engine", OfflineEngine()), tz=CST, log_dir=tmp_path, **kw)


def get(db: Database, mid: int) -> SemanticMemory:
    with db.transaction() as conn:
        found = MemoryRepo(conn).get(mid)
    assert found is not None, f"f-{mid} missing"
    return found


def active(db: Database) -> list[SemanticMemory]:
    with db.transaction() as conn:
        return MemoryRepo(conn).active(A)


def contents(db: Database) -> set[str]:
    return {m.content for m in active(db)}


def events(db: Database, step: str | None = None) -> list[dict]:
    with db.transaction() as conn:
        rows = conn.execute(
            "SELECT * FROM memory_event WHERE anima_id = %s AND table_name = 'semantic_memory' ORDER BY id",
            (A,),
        ).fetchall()
    return [r for r in rows if step is None or r["step"] == step]


def ops(db: Database, step: str) -> list[tuple[str, int]]:
    return [(e["op"], int(e["memory_id"])) for e in events(db, step)]


def state(db: Database, step: str, day: date = DAY) -> dict | None:
    with db.transaction() as conn:
        return sleep_state.get(conn, A, day, step)


def op_log(tmp_path: Path, index: int, name: str, day: date = DAY) -> dict:
    return read_log(tmp_path, day, index, name)


def big_store(db: Database, n: int, chars: int, types: tuple[str, ...] = ("world", "preference")) -> None:
    """n memories of about `chars` characters each, cheaply in SQL (unaudited, like an import)."""
    with db.transaction() as conn:
        conn.execute(
            """INSERT INTO semantic_memory (anima_id, type, content, source_sessions, created_at, updated_at)
               SELECT %s, (%s::text[])[1 + g %% cardinality(%s::text[])],
                      'Archive note ' || g || ': ' || repeat('lorem ipsum dolor ', %s / 18),
                      ARRAY['s-big'], %s, %s
               FROM generate_series(1, %s) AS g""",
            (A, list(types), list(types), chars, at(1, 1), at(1, 1), n),
        )


# ---- round 1: contradiction + expiry ----------------------------------------------------


def test_round_1_deprecates_the_older_of_an_exclusive_contradiction_only(
    db: Database, tmp_path: Path
) -> None:
    tiger, goat, mild, spicy, python, ts, apples, cherries = plant(
        db,
        mem("Lin's daughter was born in the Year of the Tiger.", observed=at(1, 1)),
        mem("Lin's daughter was born in the Year of the Goat.", observed=at(2, 1)),
        mem("张伟不喜欢吃辣。", "preference", observed=at(1, 2)),
        mem("张伟喜欢吃辣。", "preference", observed=at(2, 2)),
        mem("Sam likes Python.", "preference", observed=at(1, 3)),
        mem("Sam now prefers TypeScript.", "preference", observed=at(2, 3)),
        mem("Ana likes apples.", "preference", observed=at(1, 4)),
        mem("Ana likes cherries.", "preference", observed=at(2, 4)),
    )
    result = deconflict(db, night(tmp_path), A)

    assert result.status == "done"
    for loser, winner in ((tiger, goat), (mild, spicy)):
        lost, won = get(db, loser), get(db, winner)
        assert lost.status == "deprecated" and won.status == "active"
        assert lost.superseded_by == winner
        assert lost.deprecated_reason and lost.deprecated_reason.startswith("contradiction")
        assert f"f-{winner}" in lost.deprecated_reason
        assert lost.valid_until == won.observed_at  # the old fact held until the new one was observed
    # a change over time ("now prefers") and coexisting preferences are not contradictions
    assert {get(db, i).status for i in (python, ts, apples, cherries)} == {"active"}
    assert sorted(ops(db, STEP_DECONFLICT)) == [("deprecate", tiger), ("deprecate", mild)]
    assert result.stats["deprecated"] == result.stats["deprecated_total"] == 2
    assert result.stats["active_count"] == 8 and result.stats["earlier_changes"] == 0


# ---- round 2: split ---------------------------------------------------------------------------


def test_round_2_splits_a_multi_fact_entry_into_parts_that_inherit_provenance(
    db: Database, tmp_path: Path
) -> None:
    multi, single, dependent = plant(
        db,
        mem(
            "Rosalind went hiking in Yosemite last summer. She adopted a cat named Miso.",
            "experience",
            observed=at(1, 20),
            sources=["s-2", "s-1"],
            confidence=0.9,
        ),
        mem("Bob works at a bakery in Lisbon."),
        mem("Dan bought a red bike. It cost him 300 euros."),  # the second sentence leans on the first
    )
    result = split(db, night(tmp_path), A)

    original = get(db, multi)
    assert original.status == "deprecated"
    created = [e for e in events(db, STEP_SPLIT) if e["op"] == "create"]
    parts = [get(db, int(e["memory_id"])) for e in created]
    assert [p.content for p in parts] == [
        "Rosalind went hiking in Yosemite last summer.",
        "Rosalind adopted a cat named Miso.",  # the pronoun gets the subject back
    ]
    for p in parts:
        assert p.status == "active" and p.type == "experience"
        assert p.source_sessions == original.source_sessions == ["s-2", "s-1"]
        assert p.observed_at == original.observed_at == at(1, 20)
        assert p.confidence == pytest.approx(0.9)
    assert original.superseded_by == parts[0].id
    assert ("split", multi) in ops(db, STEP_SPLIT)
    assert get(db, single).status == "active" and get(db, dependent).status == "active"
    assert result.stats["split"] == 1 and result.stats["created"] == 2


# ---- round 3: merge ---------------------------------------------------------------------------


def test_round_3_merges_twins_and_near_duplicates_stitching_their_fields(
    db: Database, tmp_path: Path
) -> None:
    bob1, bob2, vio1, vio2, other = plant(
        db,
        mem("Bob works at a bakery in Lisbon.", observed=at(1, 5), sources=["s-5"]),
        mem("Bob works at a bakery in Lisbon.", observed=at(1, 3), sources=["s-3", "s-4"], confidence=0.95),
        mem(
            "Beatrix plays the violin in a community orchestra.",
            "experience",
            observed=at(2, 9),
            sources=["s-9"],
        ),
        mem(
            "Beatrix plays the violin in a local community orchestra.",
            "experience",
            observed=at(2, 7),
            sources=["s-7"],
            reference_count=2.0,
        ),
        mem("Beatrix plays chess on Sundays.", "experience"),
    )
    result = merge(db, night(tmp_path), A)

    merged_ids = [int(e["memory_id"]) for e in events(db, STEP_MERGE) if e["op"] == "create"]
    assert len(merged_ids) == 2
    bob, violin = (get(db, i) for i in merged_ids)
    assert bob.content == "Bob works at a bakery in Lisbon."
    assert bob.source_sessions == ["s-3", "s-4", "s-5"]  # union
    assert bob.observed_at == at(1, 3)  # earliest
    assert bob.confidence == pytest.approx(0.95)
    assert violin.content == "Beatrix plays the violin in a local community orchestra."  # the fuller text
    assert violin.type == "experience" and violin.source_sessions == ["s-7", "s-9"]
    assert violin.observed_at == at(2, 7) and violin.reference_count == pytest.approx(2.0)
    for sources, new in (((bob1, bob2), bob), ((vio1, vio2), violin)):
        for s in sources:
            old = get(db, s)
            assert old.status == "deprecated" and old.superseded_by == new.id
            assert ("merge", s) in ops(db, STEP_MERGE)
    assert get(db, other).status == "active"
    assert contents(db) == {bob.content, violin.content, "Beatrix plays chess on Sundays."}
    assert result.stats["merged"] == 4 and result.stats["created"] == 2


# ---- round 4: pin review ----------------------------------------------------------------------


def test_round_4_unpins_a_stale_pin_and_keeps_a_recently_cited_one(db: Database, tmp_path: Path) -> None:
    # Ages are measured from the night's cutoff (2024-03-06), not from the wall clock: by the
    # wall clock both pins are years old.
    stale, cited = plant(
        db,
        mem(
            "Lin is allergic to peanuts.",
            pinned=True,
            pinned_at=END - timedelta(days=60),
            last_referenced_at=END - timedelta(days=45),
        ),
        mem(
            "Lin's partner is called Jo.",
            pinned=True,
            pinned_at=END - timedelta(days=200),
            last_referenced_at=END - timedelta(days=3),
            reference_count=3.0,
        ),
    )
    lenient = review_pins(db, night(tmp_path, deep=config.DeepSettings(stale_pin_days=90)), A)
    assert lenient.stats.get("unpinned", 0) == 0 and get(db, stale).pinned

    result = review_pins(db, night(tmp_path, force=True), A)  # default stale_pin_days = 30
    after = get(db, stale)
    assert not after.pinned and after.pinned_at is None and after.status == "active"
    assert get(db, cited).pinned
    assert ops(db, STEP_PINS) == [("unpin", stale)]
    assert result.stats["unpinned"] == 1 and result.stats["pinned_after"] == 1
    assert "not referenced for 45 days" in result.details["tool_calls"][0]["input"]["reason"]


# ---- all four in order ---------------------------------------------------------------------


def test_four_rounds_in_order_record_every_change_and_leave_the_expected_store(
    db: Database, tmp_path: Path
) -> None:
    tiger, goat, multi, cat, bob1, bob2, pin, keep = plant(
        db,
        mem("Lin's daughter was born in the Year of the Tiger.", observed=at(1, 1)),
        mem("Lin's daughter was born in the Year of the Goat.", observed=at(2, 1)),
        mem(
            "Rosalind went hiking in Yosemite last summer. Rosalind adopted a cat named Miso.",
            "experience",
            observed=at(1, 20),
            sources=["s-20"],
        ),
        mem("Rosalind adopted a cat named Miso.", "experience", observed=at(1, 10), sources=["s-10"]),
        mem("Bob works at a bakery in Lisbon.", sources=["s-5"]),
        mem("Bob works at a bakery in Lisbon.", sources=["s-6"]),
        mem("Lin used to live in Porto.", pinned=True, pinned_at=END - timedelta(days=90)),
        mem("Ana likes apples.", "preference"),
    )
    n = night(tmp_path)
    results = [r(db, n, A) for r in ROUNDS]
    assert [r.status for r in results] == ["done"] * 4
    assert [r.step for r in results] == list(DEEP_SLEEP)

    assert ops(db, STEP_DECONFLICT) == [("deprecate", tiger)]
    split_ops = ops(db, STEP_SPLIT)
    assert [o for o, _ in split_ops] == ["create", "create", "split"] and split_ops[-1][1] == multi
    hiking_id, cat_part = split_ops[0][1], split_ops[1][1]
    # round 3 sees round 2's output: the split-off part is a twin of an existing memory
    merge_ops = ops(db, STEP_MERGE)
    assert sorted(o for o, _ in merge_ops) == ["create", "create", "merge", "merge", "merge", "merge"]
    assert {i for o, i in merge_ops if o == "merge"} == {cat, cat_part, bob1, bob2}
    assert ops(db, STEP_PINS) == [("unpin", pin)]

    final = {m.content: m for m in active(db)}
    assert set(final) == {
        "Lin's daughter was born in the Year of the Goat.",
        "Rosalind went hiking in Yosemite last summer.",
        "Rosalind adopted a cat named Miso.",
        "Bob works at a bakery in Lisbon.",
        "Lin used to live in Porto.",
        "Ana likes apples.",
    }
    assert final["Rosalind adopted a cat named Miso."].source_sessions == ["s-10", "s-20"]
    assert final["Rosalind adopted a cat named Miso."].observed_at == at(1, 10)
    assert final["Bob works at a bakery in Lisbon."].source_sessions == ["s-5", "s-6"]
    assert {final[c].id for c in final} >= {goat, hiking_id, keep}
    assert not final["Lin used to live in Porto."].pinned

    # every row is what its last audited event says it is: no change escaped memory_event
    last: dict[int, dict] = {}
    for e in events(db):
        last[int(e["memory_id"])] = e["after"]
    with db.transaction() as conn:
        rows = conn.execute(
            "SELECT id, content, status, superseded_by, pinned FROM semantic_memory"
        ).fetchall()
    assert len(rows) == len(last) == 8 + 2 + 2
    for r in rows:
        assert {k: last[r["id"]][k] for k in ("content", "status", "superseded_by", "pinned")} == {
            k: r[k] for k in ("content", "status", "superseded_by", "pinned")
        }
    # the rounds saw each other's changes
    assert [r.stats["earlier_changes"] for r in results] == [0, 1, 4, 10]


# ---- message 1 is a byte-identical, cached prefix ------------------------------------------


def test_message_one_is_byte_identical_and_read_from_the_cache_in_every_round(
    db: Database, tmp_path: Path
) -> None:
    tiger, goat, _bob = plant(
        db,
        mem("Lin's daughter was born in the Year of the Tiger.", observed=at(1, 1)),
        mem("Lin's daughter was born in the Year of the Goat.", observed=at(2, 1)),
        mem("Bob works at a bakery in Lisbon.", pinned=True, pinned_at=END - timedelta(days=2)),
    )
    script = [
        reply(
            text("f-1 is contradicted by the newer f-2."),
            tool_use(
                "deprecate_semantic_memory",
                {"id": f"f-{tiger}", "reason": "contradicted by a newer fact", "superseded_by": f"f-{goat}"},
            ),
        ),
    ]  # rounds 2-4 get the fake's default end_turn reply: the model changes nothing more
    one_model = config.Settings(
        llm={"step_models": dict.fromkeys(DEEP_SLEEP, "main")}
    )  # caches are per model
    with FakeMessagesAPI(script, min_cache_tokens=1) as fake:
        engine = AnthropicEngine(
            "claude-haiku-4-5",
            SecretStr("sk-ant-test"),
            base_url=fake.url,
            max_retries=0,
            timeout=10,
            settings=one_model,
        )
        try:
            n = night(tmp_path, engine=engine)
            results = [r(db, n, A) for r in ROUNDS]
        finally:
            engine.close()
        requests = [r.body for r in fake.requests]
        assert fake.remaining == 0

    assert get(db, tiger).status == "deprecated" and get(db, tiger).superseded_by == goat
    assert ops(db, STEP_DECONFLICT) == [("deprecate", tiger)]
    firsts = [b for b in requests if len(b["messages"]) == 1]
    assert len(requests) == 4 == len(firsts)  # round 1's one answer, its call done, ended it

    msg1 = [b["messages"][0]["content"][0] for b in firsts]
    assert all(m == msg1[0] for m in msg1)  # same text, same cache_control: byte-identical JSON
    assert msg1[0]["cache_control"] == {"type": "ephemeral"}
    assert json.dumps(msg1[0]["text"]).count("Year of the Tiger") == 1  # the snapshot, not the live store
    assert all(b["system"] == firsts[0]["system"] for b in firsts)
    assert all(b["tools"] == firsts[0]["tools"] for b in firsts)  # tools precede message 1 in the cache key

    msg15 = [b["messages"][0]["content"][1]["text"] for b in firsts]
    assert "(none yet)" in msg15[0]
    for later in msg15[1:]:
        assert f"f-{tiger} — deprecated: contradicted by a newer fact (superseded by f-{goat})" in later
    assert [b["messages"][0]["content"][3]["text"] for b in firsts] == [
        DEEP_ROUND_TASK[name] for name in ("contradiction", "split", "merge", "pin_review")
    ]

    assert results[0].usage.cache_write_tokens > 0
    for r in results[1:]:
        assert r.usage.cache_read_tokens > 0 and r.usage.cache_write_tokens == 0
        assert r.stats["cache_read"] == r.usage.cache_read_tokens
        assert r.stats["llm_calls"] == 1
    assert results[0].stats["llm_calls"] == 1


# ---- size thresholds ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chars", "band"),
    [
        (0, "normal"),
        (WARN_CHARS, "normal"),
        (WARN_CHARS + 1, "warn"),
        (BATCH_CHARS, "warn"),
        (BATCH_CHARS + 1, "batched"),
        (REFUSE_CHARS, "batched"),
        (REFUSE_CHARS + 1, "sliced"),
    ],
)
def test_size_band_boundaries(chars: int, band: str) -> None:
    assert (WARN_CHARS, BATCH_CHARS, REFUSE_CHARS) == (10_000, 100_000, 300_000)
    assert size_band(chars) == band


def _memory(mid: int, type: str, content: str) -> SemanticMemory:
    return memory_row(mid, content, anima_id=A, type=type, source_sessions=["s-1"])


def _store_of(total: int) -> list[SemanticMemory]:
    """Three memories (world, preference, world) whose message 1 is exactly `total` characters."""
    ms = [_memory(1, "world", "a"), _memory(2, "preference", "b"), _memory(3, "world", "c")]
    pad = total - len(message_one(ms))
    ms[1] = _memory(2, "preference", "b" * (1 + pad))
    assert len(message_one(ms)) == total
    return ms


def test_slices_one_under_the_batch_threshold_by_type_above_and_refused_only_when_uncuttable() -> None:
    for total in (500, WARN_CHARS + 1, BATCH_CHARS):
        ms = _store_of(total)
        assert slices(ms) == [("all", ms)]
    for total in (BATCH_CHARS + 1, REFUSE_CHARS):
        ms = _store_of(total)
        assert [(label, [m.id for m in group]) for label, group in slices(ms)] == [
            ("world", [1, 3]),
            ("preference", [2]),
        ]
    assert len(slices(_store_of(REFUSE_CHARS + 1))) == 2  # over the limit: still two slices by type
    with pytest.raises(DeepSleepTooLarge) as exc:  # one memory alone over the limit
        slices([_memory(1, "world", "a"), _memory(2, "world", "b" * REFUSE_CHARS)])
    assert "f-2 alone is 300,0" in str(exc.value) and "cannot be cut" in str(exc.value)


def test_a_type_over_the_limit_is_cut_into_time_windows_each_under_it() -> None:
    ms = [
        memory_row(i, f"Note {i}: " + "lorem ipsum " * 80, anima_id=A, observed_at=at(1 + i % 12, 1 + i % 28))
        for i in range(1, 400)
    ] + [memory_row(900, "Lin likes tea.", anima_id=A, type="preference")]
    assert len(message_one([m for m in ms if m.type == "world"])) > REFUSE_CHARS
    cut = slices(ms)
    sizes = [len(message_one(group)) for _, group in cut]
    assert len(cut) >= 2 and max(sizes) <= REFUSE_CHARS
    assert sorted(m.id for _, g in cut for m in g) == sorted(m.id for m in ms)  # each once
    worlds = [g for label, g in cut if label.startswith("world, ")]
    assert all(
        max(m.observed_at for m in a) <= min(m.observed_at for m in b)
        for a, b in zip(worlds, worlds[1:], strict=False)
    )
    assert cut == slices(list(reversed(ms)))  # a function of the memories: byte-stable per round


def test_a_store_over_the_limit_goes_on_in_slices(db: Database, tmp_path: Path) -> None:
    big_store(db, 31, 10_000)  # ~310k characters, world and preference
    assert len(message_one(active(db))) > REFUSE_CHARS
    result = deconflict(db, night(tmp_path), A)
    assert result.status == "done" and result.stats["size_band"] == "sliced"
    assert result.stats["slices"] == 2 and result.stats["slice_max_chars"] <= REFUSE_CHARS


def test_a_slice_that_cannot_be_cut_skips_deep_sleep_and_changes_nothing(
    db: Database, tmp_path: Path
) -> None:
    plant(
        db,
        mem("Lin's daughter was born in the Year of the Tiger.", observed=at(1, 1)),
        mem("Lin's daughter was born in the Year of the Goat.", observed=at(2, 1)),
    )
    big_store(db, 1, 310_000)  # one memory alone over the limit
    before = [(m.id, m.status, m.updated_at) for m in active(db)]
    for round_ in ROUNDS:
        result = round_(db, night(tmp_path), A)  # no StepFailed: the night goes on
        assert (
            result.status == "done" and result.stats["refused"] == 1 and result.stats["skipped_rounds"] == 1
        )
        assert "cannot be cut" in result.stats["summary"]
    assert [(m.id, m.status, m.updated_at) for m in active(db)] == before
    assert events(db, STEP_DECONFLICT) == []
    assert state(db, STEP_DECONFLICT)["status"] == "done"


def test_a_store_between_100k_and_300k_is_sent_in_batches_by_type(
    db: Database, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    big_store(db, 14, 10_000)  # ~140k characters, world and preference
    with FakeMessagesAPI([], min_cache_tokens=1) as fake:
        engine = AnthropicEngine(
            "claude-haiku-4-5", SecretStr("sk-ant-test"), base_url=fake.url, max_retries=0
        )
        try:
            with caplog.at_level(logging.WARNING, logger="anima_pipeline.night.steps.deep.step"):
                result = review_pins(db, night(tmp_path, engine=engine), A)
        finally:
            engine.close()
        requests = [r.body for r in fake.requests]
    assert result.stats["size_band"] == "batched"
    assert [b["messages"][0]["content"][0]["text"].split("\n")[1] for b in requests] == [
        "# Message 1: active semantic memories (world)",
        "# Message 1: active semantic memories (preference)",
    ]
    for b, t in zip(requests, ("world", "preference"), strict=True):
        listed = b["messages"][0]["content"][0]["text"].split("\n")[2:-1]  # one memory a line
        assert len(listed) == 7 and {line.split()[1] for line in listed} == {t}
    assert any("batched" in r.getMessage() and "2 slices" in r.getMessage() for r in caplog.records)


def test_a_store_between_10k_and_100k_warns_and_runs_normally(
    db: Database, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    big_store(db, 3, 5_000)
    with caplog.at_level(logging.WARNING, logger="anima_pipeline.night.steps.deep.step"):
        result = review_pins(db, night(tmp_path), A)
    assert result.status == "done" and result.stats["size_band"] == "warn"
    assert WARN_CHARS < result.stats["message1_chars"] <= BATCH_CHARS
    assert any(
        "round 4 (pin_review)" in r.getMessage() and "(warn)" in r.getMessage() for r in caplog.records
    )


# ---- modes: incremental is keyed to the partition day -----------------------------------


QUIET_STORE = (
    mem("Lin's daughter was born in the Year of the Tiger.", observed=at(1, 1)),
    mem("Lin's daughter was born in the Year of the Goat.", observed=at(2, 1)),
    mem("Bob works at a bakery in Lisbon.", sources=["s-5"]),
    mem("Bob works at a bakery in Lisbon.", sources=["s-6"]),
)


def test_incremental_skips_rounds_1_and_3_when_the_partition_day_is_quiet(
    db: Database, tmp_path: Path
) -> None:
    # Written just now by the wall clock, but by a light sleep of another partition day; and the
    # night under test is today's: a wall-clock test ("updated in the last 24 h") would not skip.
    today = datetime.now(CST).date()
    ids = plant(
        db,
        *QUIET_STORE,
        mem("Lin is allergic to peanuts.", pinned=True, pinned_at=datetime.now(CST) - timedelta(days=100)),
        day=today - timedelta(days=3),
    )
    n = night(tmp_path, day=today, mode="incremental")
    results = [r(db, n, A) for r in ROUNDS]

    assert [r.status for r in results] == ["done"] * 4
    assert [r.stats["skipped_rounds"] for r in results] == [1, 0, 1, 0]
    assert {get(db, i).status for i in ids[:4]} == {"active"}  # no deprecation, no merge
    assert ops(db, STEP_PINS) == [("unpin", ids[4])]  # round 4 always runs
    skipped = op_log(tmp_path, 1, "contradiction", day=today)["animas"][A]
    assert skipped["summary"].startswith("skipped") and skipped["tool_calls"] == 0
    assert skipped["stats"]["skipped_rounds"] == 1


def test_incremental_runs_rounds_1_and_3_on_what_changed_that_day_and_its_neighbours(
    db: Database, tmp_path: Path
) -> None:
    old_twins = (
        mem("Ann keeps bees in Porto.", sources=["s-7"]),
        mem("Ann keeps bees in Porto.", sources=["s-8"]),
    )
    tiger, bob1, ann1, ann2 = plant(db, QUIET_STORE[0], QUIET_STORE[2], *old_twins, now=at(2, 1))
    # today's light sleep learnt the newer fact and Bob's job again
    goat, bob2 = plant(db, QUIET_STORE[1], QUIET_STORE[3], day=DAY)
    n = night(tmp_path, mode="incremental")
    results = [r(db, n, A) for r in ROUNDS]

    assert [r.stats["skipped_rounds"] for r in results] == [0, 0, 0, 0]
    assert get(db, tiger).superseded_by == goat  # the older fact is the new one's neighbour
    assert {get(db, bob1).status, get(db, bob2).status} == {"deprecated"}
    # twins that were both there before are no neighbour of what changed: the weekly full night's
    assert {get(db, ann1).status, get(db, ann2).status} == {"active"}
    assert results[0].stats["message1_memories"] == 4  # tiger, goat, both Bobs: not Ann's twins
    merge(db, night(tmp_path, day=DAY + timedelta(days=1), mode="full"), A)
    assert {get(db, ann1).status, get(db, ann2).status} == {"deprecated"}


def test_incremental_counts_a_backfilled_days_events_not_the_wall_clock(db: Database, tmp_path: Path) -> None:
    backfilled = date(2023, 11, 20)
    ids = plant(db, *QUIET_STORE, day=backfilled)  # written now, by the light sleep of that old day

    later = deconflict(db, night(tmp_path, day=backfilled + timedelta(days=1), mode="incremental"), A)
    today = deconflict(db, night(tmp_path, day=datetime.now(CST).date(), mode="incremental"), A)
    assert later.stats["skipped_rounds"] == today.stats["skipped_rounds"] == 1
    assert get(db, ids[0]).status == "active"

    own = deconflict(db, night(tmp_path, day=backfilled, mode="incremental"), A)
    assert own.stats["skipped_rounds"] == 0 and own.stats["deprecated"] == 1
    assert get(db, ids[0]).superseded_by == ids[1]


def test_incremental_counts_an_unaudited_write_inside_the_day(db: Database, tmp_path: Path) -> None:
    plant(db, *QUIET_STORE, now=at(2, 1))
    with db.transaction() as conn:  # a write that bypassed the audit, timestamped inside DAY
        conn.execute(
            "INSERT INTO semantic_memory (anima_id, type, content, created_at, updated_at) VALUES (%s, %s, %s, %s, %s)",
            (A, "world", "Ana moved to Kyoto.", at(3, 5, 15), at(3, 5, 15)),
        )
    assert (
        deconflict(db, night(tmp_path, day=DAY - timedelta(days=1), mode="incremental"), A).stats[
            "skipped_rounds"
        ]
        == 1
    )
    assert deconflict(db, night(tmp_path, mode="incremental"), A).stats["skipped_rounds"] == 0


def test_full_mode_never_skips(db: Database, tmp_path: Path) -> None:
    tiger, goat, bob1, bob2 = plant(db, *QUIET_STORE, now=at(2, 1))
    results = [r(db, night(tmp_path, mode="full"), A) for r in ROUNDS]
    assert [r.stats["skipped_rounds"] for r in results] == [0, 0, 0, 0]
    assert get(db, tiger).superseded_by == goat
    assert get(db, bob1).status == get(db, bob2).status == "deprecated"


def test_incremental_split_looks_only_at_candidates_changed_that_day_full_at_all(
    db: Database, tmp_path: Path
) -> None:
    (old,) = plant(db, mem("Dan plays the cello every week. Dan collects vintage maps."), now=at(2, 1))
    (new,) = plant(db, mem("Eve runs marathons in Boston. Eve teaches chemistry at a high school."), day=DAY)

    inc = split(db, night(tmp_path, mode="incremental"), A)
    assert inc.stats["candidates"] == 1 and inc.stats["split"] == 1
    assert get(db, new).status == "deprecated" and get(db, old).status == "active"

    full = split(db, night(tmp_path, mode="full", force=True), A)
    assert full.stats["split"] == 1 and get(db, old).status == "deprecated"
    assert {
        "Dan plays the cello every week.",
        "Dan collects vintage maps.",
        "Eve runs marathons in Boston.",
        "Eve teaches chemistry at a high school.",
    } == contents(db)


# ---- the loss guard (night/guards.py; the frame checks it for every step) ----------------------


def test_a_round_deprecating_more_than_the_step_share_is_rolled_back(db: Database, tmp_path: Path) -> None:
    pairs = []
    for i, name in enumerate(("Lin", "Ana", "Bea", "Cai", "Dov", "Eli")):
        pairs.append(mem(f"{name}'s daughter was born in the Year of the Tiger.", observed=at(1, 1 + i)))
        pairs.append(mem(f"{name}'s daughter was born in the Year of the Goat.", observed=at(2, 1 + i)))
    fillers = [
        mem(f"Filler fact number {w} about the {w} garden.")
        for w in ("north", "south", "east", "west", "upper", "lower", "inner", "outer")
    ]
    ids = plant(db, *pairs, *fillers)
    before = {m.id: (m.status, m.updated_at) for m in active(db)}

    with pytest.raises(StepFailed) as exc:
        deconflict(db, night(tmp_path), A)
    msg = str(exc.value)
    assert isinstance(exc.value.__cause__, LossGuardTripped) and exc.value.__cause__.kind == "step"
    assert STEP_DECONFLICT in msg and "would deprecate or rewrite 6 of the 20" in msg
    assert "loss guard per step" in msg and "allowed 5" in msg and "rolled back" in msg
    assert {m.id: (m.status, m.updated_at) for m in active(db)} == before
    assert events(db, STEP_DECONFLICT) == []
    assert state(db, STEP_DECONFLICT)["status"] == "failed"
    assert not list(tmp_path.glob("deep_sleep_*"))

    passed = deconflict(db, night(tmp_path, limits=LossLimits(step_share=0.5)), A)
    assert passed.status == "done" and passed.stats["deprecated_total"] == 6
    assert {get(db, i).status for i in ids[0:12:2]} == {"deprecated"}


def test_the_guard_minimum_spares_a_small_store_and_is_configurable(db: Database, tmp_path: Path) -> None:
    plant(
        db,
        *QUIET_STORE[:2],
        mem("Ana's son was born in the Year of the Dog.", observed=at(1, 2)),
        mem("Ana's son was born in the Year of the Rat.", observed=at(2, 2)),
    )
    with pytest.raises(StepFailed, match=r"would deprecate or rewrite 2 of the 4"):
        deconflict(db, night(tmp_path, limits=LossLimits(minimum=1)), A)
    assert LossLimits().minimum == 3
    ok = deconflict(db, night(tmp_path), A)  # 50 %, but no more than the minimum of 3
    assert ok.stats["deprecated_total"] == 2 and len(active(db)) == 2


# ---- operation logs -------------------------------------------------------------------------


def test_each_round_writes_its_operation_log_with_the_figures_of_its_stats(
    db: Database, tmp_path: Path
) -> None:
    tiger, _goat, *_ = plant(db, *QUIET_STORE)
    n = night(tmp_path)
    first, second, third = deconflict(db, n, A), split(db, n, A), merge(db, n, A)

    for index, name, result in ((1, "contradiction", first), (2, "split", second), (3, "merge", third)):
        log = op_log(tmp_path, index, name)
        assert (log["day"], log["round"], log["round_index"]) == (str(DAY), name, index)
        entry = log["animas"][A]
        assert entry["run_id"] == n.run_id
        for key in ("active_count", "earlier_changes", "summary"):
            assert entry[key] == result.stats[key]
        assert (
            entry["tool_calls"] == result.stats.get("calls", 0) == len(result.details.get("tool_calls", []))
        )
    assert op_log(tmp_path, 1, "contradiction")["animas"][A]["summary"] == "deprecated 1"
    assert first.stats["active_count"] == 4 and first.stats["earlier_changes"] == 0
    assert second.stats["active_count"] == 3 and second.stats["earlier_changes"] == 1
    log2 = op_log(tmp_path, 2, "split")["animas"][A]
    assert f"f-{tiger} — deprecated" in log2["change_log"] and log2["change_log"] == message_one_five(
        events(db, STEP_DECONFLICT)
    )
    log3 = op_log(tmp_path, 3, "merge")["animas"][A]
    assert log3["summary"] == "created 1, merged 2" and log3["calls"][0]["tool"] == "merge_semantic_memories"


# ---- idempotence ---------------------------------------------------------------------------


DISTINCT_FACTS = (
    "Ana grows tomatoes on her balcony.",
    "Bea swims before work on Mondays.",
    "Cai repairs old radios.",
    "Dov studied law in Haifa.",
    "Eli keeps bees in the countryside.",
    "Fay translates Polish novels.",
    "Gus coaches a youth football team.",
    "Hana paints watercolour birds.",
    "Ivo drives a green tram.",
    "Jun learned to sail in Busan.",
    "Kai bakes sourdough every Sunday.",
    "Lea volunteers at the library.",
    "Max writes firmware for drones.",
    "Nia climbed Kilimanjaro in 2019.",
    "Oto restores antique clocks.",
    "Pia sings in a jazz quartet.",
    "Quin breeds koi fish.",
    "Rui commutes by ferry.",
)


def test_a_done_round_is_skipped_and_a_forced_rerun_finds_nothing_new(db: Database, tmp_path: Path) -> None:
    specs = [
        mem(f"{name} works at a bakery in {city}.", sources=[f"s-{name}"])
        for name, city in (("Bob", "Lisbon"), ("Kim", "Seoul"), ("Raj", "Pune"))
    ]
    fillers = [mem(c) for c in DISTINCT_FACTS]
    plant(db, *specs, *specs, *fillers)  # 24 memories, three twin pairs
    n = night(tmp_path)
    first = merge(db, n, A)
    assert first.stats["merged"] == 6 and first.stats["deprecated_total"] == 6 and len(active(db)) == 21
    n_events = len(events(db))

    again = merge(db, n, A)
    assert again.status == "skipped" and again.stats["already_done"] == 1
    assert len(events(db)) == n_events

    # Same run (a retry of a forced run): the loss guard must count only this execution's
    # deprecations, not the 6 the first one committed (6 of 21 would trip it).
    forced = merge(db, Night(**{**n.__dict__, "force": True}), A)
    assert forced.status == "done"
    assert forced.stats["deprecated_total"] == 0 and forced.stats.get("calls", 0) == 0
    assert len(events(db)) == n_events and len(active(db)) == 21


# ---- pre-filter (message 2) -------------------------------------------------------------------


def test_prefilter_lists_each_rounds_candidates(db: Database, tmp_path: Path) -> None:
    tiger, goat, bob1, bob2 = plant(db, *QUIET_STORE)
    (multi,) = plant(db, mem("Eve runs marathons in Boston. Eve teaches chemistry at a high school."))
    (pinned,) = plant(db, mem("Lin is allergic to peanuts.", pinned=True, pinned_at=at(1, 1)))
    cfg = config.DeepSettings()
    with db.transaction() as conn:
        ms = MemoryRepo(conn).active(A)
        contra = prefilter(conn, "contradiction", ms, cfg, None)
        assert f"- f-{tiger} vs f-{goat}: same subject and attribute" in contra.text
        assert {tiger, goat} <= contra.ids
        merged = prefilter(conn, "merge", ms, cfg, None)
        assert f"- f-{bob1} + f-{bob2}: exact twins" in merged.text and {bob1, bob2} <= merged.ids
        splits = prefilter(conn, "split", ms, cfg, None)
        assert splits.ids == {multi}
        assert prefilter(conn, "split", ms, cfg, set()).ids == set()
        assert "(no candidates)" in prefilter(conn, "split", ms, cfg, set()).text
        pins = prefilter(conn, "pin_review", ms, cfg, None)
        assert pins.ids == {pinned} and f"f-{pinned}: pinned since 2024-01-01" in pins.text
        assert "capped at 40" in pins.text


def test_the_contradiction_prefilter_lists_a_pair_once(db: Database) -> None:
    """Two facts of one memory about the same attribute pair it with another memory twice (and
    with itself): message 2 shows the pair once and no memory against itself."""
    both, one = plant(db, mem("Bob loves tea, but Bob also enjoys coffee."), mem("Bob loves juice."))
    with db.transaction() as conn:
        contra = prefilter(conn, "contradiction", MemoryRepo(conn).active(A), config.DeepSettings(), None)
    lines = contra.text.splitlines()[1:]
    assert lines.count(f"- f-{both} vs f-{one}: same subject and attribute (bob: likes)") == 1
    assert not [x for x in lines if f"f-{both} vs f-{both}:" in x] and len(lines) == len(set(lines))
    assert contra.ids == {both, one}


def varied_store(db: Database, chars: int) -> None:
    """About `chars` characters of distinct memories (no two alike: nothing to merge), 60 %
    world, 25 % experience, 15 % preference, one a minute from 2024-01-01: cheaply in SQL."""
    per = 101  # characters of each content
    with db.transaction() as conn:
        conn.execute(
            """INSERT INTO semantic_memory (anima_id, type, content, source_sessions, created_at, updated_at)
               SELECT %s, CASE WHEN g %% 20 < 12 THEN 'world' WHEN g %% 20 < 17 THEN 'experience'
                               ELSE 'preference' END,
                      'Lin noted item ' || lpad(g::text, 5, '0') || ': ' || md5(g::text) || ' '
                          || md5((g * 7)::text) || ' ' || substr(md5((g * 13)::text), 1, 12) || '.',
                      ARRAY['s-big'], %s + g * interval '1 minute', %s + g * interval '1 minute'
               FROM generate_series(1, %s) AS g""",
            (A, at(1, 1), at(1, 1), chars // per),
        )
        total = conn.execute(
            "SELECT sum(length(content)) AS n FROM semantic_memory WHERE anima_id = %s", (A,)
        ).fetchone()["n"]
    assert abs(total - chars) < per


def test_a_store_of_600k_characters_sleeps_with_deep_sleep_in_slices(db: Database, tmp_path: Path) -> None:
    from anima_pipeline.config import Settings as AppSettings
    from anima_pipeline.night.runner import run_days
    from anima_pipeline.store.archive import ImportStats, import_records, parse_lines

    varied_store(db, 600_000)
    lines = [
        json.dumps(
            {
                "anima_id": A,
                "conversation_id": f"mira:{d}",
                "message_id": f"m{n}",
                "role": role,
                "content": said,
                "created_at": f"{d}T20:0{n}:00+08:00",
            }
        )
        for d in (DAY, DAY + timedelta(days=1))
        for n, (role, said) in enumerate(
            [("user", "I moved the piano to the studio."), ("assistant", "Nice!")]
        )
    ]
    with db.transaction() as conn:
        audit = Audit(conn=conn, anima_id="", run_id="i", step="i")
        import_records(conn, parse_lines(lines, "day"), audit, ImportStats())
    settings = AppSettings(database_url=db.url, home=tmp_path, workers=1, timezone="Asia/Shanghai")
    results = run_days(db, settings, [DAY], mode="full")  # no NightFailed
    rounds = [r for r in results if r.step in DEEP_SLEEP and r.day == DAY]
    assert len(rounds) == 4
    for r in rounds:
        assert r.stats["size_band"] == "sliced" and r.stats["message1_chars"] > 2 * REFUSE_CHARS
        assert r.stats["slices"] >= 4 and r.stats["slice_max_chars"] <= REFUSE_CHARS, r.stats
    print("600k store:", {k: rounds[0].stats[k] for k in ("message1_chars", "slices", "slice_max_chars")})
    # and the next day is not held back (its light sleep runs; the order guard lets it go)
    run_days(db, settings, [DAY + timedelta(days=1)], steps=[LIGHT])
    with db.transaction() as conn:
        assert sleep_state.get(conn, A, DAY, sleep_state.NIGHT)["status"] == "done"
        assert sleep_state.get(conn, A, DAY + timedelta(days=1), LIGHT)["status"] == "done"
