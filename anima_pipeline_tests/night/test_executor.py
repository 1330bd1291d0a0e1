"""The memory tool contract against a real PostgreSQL: every refusal is an actionable
is_error that writes nothing, every valid call writes exactly what the contract says and
leaves a memory_event, a step is all-or-nothing and one refused call is undone alone."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, date, datetime
from typing import Any

import pytest

from anima_pipeline.core.types import MEMORY_TYPES
from anima_pipeline.llm.contract import ToolCall
from anima_pipeline.llm.offline import OfflineEngine
from anima_pipeline.night.frame import Night, StepFailed, StepOutcome, run_step
from anima_pipeline.store import sleep_state
from anima_pipeline.store.db import Connection, Database
from anima_pipeline.store.events import Audit
from anima_pipeline.store.memories import MemoryRepo, SemanticMemory
from anima_pipeline.tools.executor import ToolExecutor
from anima_pipeline.tools.schemas import MAX_CONTENT_CHARS, TOOLS, tool_specs
from anima_pipeline.tools.scope import Scope

ANIMA = "nova"
OTHER_ANIMA = "orion"
DAY = date(2023, 5, 8)
RUN = "run-exec-test"
STEP = "test/step"
TODAY = ("nova:2023-05-08-a", "nova:2023-05-08-b")
T0 = datetime(2023, 5, 8, 10, 0, tzinfo=UTC)


# ---- helpers ------------------------------------------------------------------------


def _seed(conn: Connection, anima: str = ANIMA, **values: Any) -> SemanticMemory:
    """A memory written before the step (its own run, so the step's events stay countable)."""
    audit = Audit(conn=conn, anima_id=anima, run_id="seed", step="seed", day=DAY)
    row = {"type": "world", "content": "Mia works as a nurse.", "source_sessions": [TODAY[0]], **values}
    return MemoryRepo(conn, audit).create(anima, row)


def _executor(conn: Connection, *, run_id: str = RUN, day: date | None = DAY, **scope: Any) -> ToolExecutor:
    audit = Audit(conn=conn, anima_id=ANIMA, run_id=run_id, step=STEP, day=day)
    kwargs: dict[str, Any] = {"anima_id": ANIMA, "tools": tuple(TOOLS), **scope}
    return ToolExecutor(conn, Scope(**kwargs), audit)


def _events(conn: Connection, run_id: str = RUN) -> list[dict]:
    return conn.execute("SELECT * FROM memory_event WHERE run_id = %s ORDER BY id", (run_id,)).fetchall()


def _count(conn: Connection, table: str) -> int:
    return conn.execute(f"SELECT count(*) AS n FROM {table}").fetchone()["n"]


def _mem(conn: Connection, ref: str) -> SemanticMemory:
    mem = MemoryRepo(conn).get(int(ref.removeprefix("f-")))
    assert mem is not None
    return mem


def _ok(ex: ToolExecutor, name: str, input: dict[str, Any]):
    result = ex.call(name, input)
    assert not result.is_error, result.content
    return result


def _fill(value: Any, ids: dict[str, str]) -> Any:
    """Replace '{name}' placeholders by the refs of the seeded memories."""
    if isinstance(value, str):
        return value.format(**ids)
    if isinstance(value, list):
        return [_fill(v, ids) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, ids) for k, v in value.items()}
    return value


# ---- refusals -------------------------------------------------------------------------


@pytest.fixture
def refusal_world(db: Database) -> Iterator[tuple[Connection, dict[str, str]]]:
    """A light-sleep-like world: `shown` is in message 2, `hidden` comes from an older
    conversation, `retired` was deprecated (superseded by `shown`), `foreign` is another
    anima's, and one narrative of each anima."""
    with db.transaction() as conn:
        shown = _seed(conn, content="Mia works as a nurse at Ruijin Hospital.")
        hidden = _seed(conn, content="Mia grew up in Leshan.", source_sessions=["nova:2023-04-01-a"])
        retired = _seed(conn, content="Mia works as a nurse.")
        audit = Audit(conn=conn, anima_id=ANIMA, run_id="seed", step="seed", day=DAY)
        MemoryRepo(conn, audit).deprecate(retired.id, "superseded", superseded_by=shown.id)
        foreign = _seed(conn, anima=OTHER_ANIMA, content="Sam teaches chemistry.")
        narrative = conn.execute(
            """INSERT INTO autobiographical_memory (anima_id, title, narrative, significance)
               VALUES (%s, 'First marathon', 'Mia ran it.', 'milestone') RETURNING id""",
            (OTHER_ANIMA,),
        ).fetchone()
        ids = {
            "shown": shown.ref,
            "hidden": hidden.ref,
            "retired": retired.ref,
            "foreign": foreign.ref,
            "foreign_narrative": f"a-{narrative['id']}",
        }
        yield conn, ids


LIGHT_TOOLS = (
    "create_semantic_memory",
    "update_semantic_memory",
    "deprecate_semantic_memory",
    "merge_semantic_memories",
    "split_semantic_memory",
    "pin_semantic_memory",
    "create_emotional_anchor",
    "create_autobiographical_memory",
    "deprecate_autobiographical_memory",
    "write_self_block",
    "write_temporal_summary",
)

# (case id, tool, input, phrases the message must contain so the model can act on it)
REFUSALS: list[tuple[str, str, dict[str, Any], tuple[str, ...]]] = [
    (
        "unknown tool",
        "forget_everything",
        {"id": "{shown}"},
        ("unknown tool 'forget_everything'", "create_semantic_memory"),
    ),
    (
        "not whitelisted",
        "write_dream_entry",
        {},
        ("not available in this step", "use one of", "update_semantic_memory"),
    ),
    (
        "unknown id",
        "update_semantic_memory",
        {"id": "f-999999", "content": "x y z"},
        ("f-999999 does not exist", "use an id you were shown"),
    ),
    (
        "bare number id",
        "update_semantic_memory",
        {"id": "12", "content": "x y z"},
        ("'12' is not a memory id", "'f-12'"),
    ),
    (
        "wrong prefix id",
        "deprecate_semantic_memory",
        {"id": "x-3", "reason": "wrong"},
        ("'x-3' is not a memory id", "'f-12'"),
    ),
    (
        "another anima's id",
        "update_semantic_memory",
        {"id": "{foreign}", "content": "x y z"},
        ("does not exist",),
    ),
    (
        "outside scope",
        "update_semantic_memory",
        {"id": "{hidden}", "content": "Mia grew up in Chengdu."},
        ("outside this step's scope", "{shown}"),
    ),
    ("outside scope (pin)", "pin_semantic_memory", {"id": "{hidden}"}, ("outside this step's scope",)),
    (
        "deprecated id",
        "update_semantic_memory",
        {"id": "{retired}", "content": "x y z"},
        ("{retired} is deprecated", "superseded by {shown}", "active"),
    ),
    (
        "deprecated successor",
        "deprecate_semantic_memory",
        {"id": "{shown}", "reason": "r", "superseded_by": "{retired}"},
        ("{retired} is deprecated",),
    ),
    (
        "bad enum",
        "create_semantic_memory",
        {"type": "fact", "content": "Mia likes tea."},
        ("field 'type'", "'world'", "'imprint'"),
    ),
    ("empty content", "create_semantic_memory", {"type": "world", "content": ""}, ("field 'content'",)),
    (
        "whitespace content",
        "create_semantic_memory",
        {"type": "world", "content": " \n\t "},
        ("field 'content'",),
    ),
    (
        "whitespace update",
        "update_semantic_memory",
        {"id": "{shown}", "content": "   "},
        ("field 'content'",),
    ),
    (
        "oversized content",
        "create_semantic_memory",
        {"type": "world", "content": "x" * (MAX_CONTENT_CHARS + 1)},
        ("field 'content'", str(MAX_CONTENT_CHARS)),
    ),
    (
        "unknown field",
        "create_semantic_memory",
        {"type": "world", "content": "Mia likes tea.", "colour": "red"},
        ("field 'colour': unknown field",),
    ),
    (
        "typo of a field",
        "update_semantic_memory",
        {"id": "{shown}", "contents": "Mia likes tea."},
        ("field 'contents': unknown field",),
    ),
    (
        "confidence range",
        "create_semantic_memory",
        {"type": "world", "content": "Mia likes tea.", "confidence": 1.5},
        ("field 'confidence'",),
    ),
    ("not an object", "create_semantic_memory", ["world", "Mia likes tea."], ("must be a JSON object",)),  # type: ignore[list-item]
    (
        "foreign sources",
        "create_semantic_memory",
        {"type": "world", "content": "Mia likes tea.", "source_sessions": ["nova:2023-04-01-a"]},
        ("not among this input's conversations", TODAY[0], "cite only conversations you were shown"),
    ),
    (
        "blank source",
        "create_semantic_memory",
        {"type": "world", "content": "Mia likes tea.", "source_sessions": [" "]},
        ("source_sessions",),
    ),
    (
        "foreign sources (update)",
        "update_semantic_memory",
        {"id": "{shown}", "source_sessions": ["elsewhere"]},
        ("not among this input's conversations",),
    ),
    (
        "merge one id",
        "merge_semantic_memories",
        {"source_ids": ["{shown}"], "content": "Mia is a nurse."},
        ("at least two", "update_semantic_memory"),
    ),
    (
        "merge repeated ids",
        "merge_semantic_memories",
        {"source_ids": ["{shown}", "{shown}"], "content": "Mia is a nurse."},
        ("repeat",),
    ),
    (
        "split identical parts",
        "split_semantic_memory",
        {"id": "{shown}", "parts": ["Mia is a nurse.", "Mia  is a   nurse."]},
        ("two parts are the same",),
    ),
    (
        "split one part",
        "split_semantic_memory",
        {"id": "{shown}", "parts": ["Mia is a nurse."]},
        ("field 'parts'",),
    ),
    (
        "self block identity",
        "write_self_block",
        {"name": "identity", "content": "I am someone else."},
        ("field 'name'", "'persona'"),
    ),
    (
        "self block not this step",
        "write_self_block",
        {"name": "persona", "content": "Warm and curious."},
        ("'persona' is not written by this step", "autobiography_summary"),
    ),
    (
        "summary level",
        "write_temporal_summary",
        {"level": "week", "period_start": "2023-05-08", "period_end": "2023-05-14", "content": "A week."},
        ("level 'week' is not written by this step",),
    ),
    (
        "summary bad level",
        "write_temporal_summary",
        {"level": "decade", "period_start": "2023-05-08", "period_end": "2023-05-14", "content": "A week."},
        ("field 'level'",),
    ),
    (
        "summary backwards",
        "write_temporal_summary",
        {"level": "day", "period_start": "2023-05-08", "period_end": "2023-05-07", "content": "A day."},
        ("period_end is before period_start",),
    ),
    (
        "anchor foreign conversation",
        "create_emotional_anchor",
        {
            "conversation_id": "elsewhere",
            "occurred_at": "2023-05-08T10:00:00+08:00",
            "emotion": "joy",
            "valence": 0.8,
            "arousal": 0.6,
        },
        ("not among this input's conversations",),
    ),
    (
        "anchor valence range",
        "create_emotional_anchor",
        {
            "conversation_id": TODAY[0],
            "occurred_at": "2023-05-08T10:00:00+08:00",
            "emotion": "joy",
            "valence": 2,
            "arousal": 0.6,
        },
        ("field 'valence'",),
    ),
    (
        "narrative hidden memory",
        "create_autobiographical_memory",
        {
            "title": "Roots",
            "narrative": "Mia grew up in Leshan.",
            "significance": "notable",
            "source_memory_ids": ["{hidden}"],
        },
        ("outside this step's scope",),
    ),
    (
        "narrative significance",
        "create_autobiographical_memory",
        {"title": "Roots", "narrative": "Mia grew up.", "significance": "huge"},
        ("field 'significance'",),
    ),
    (
        "narrative id malformed",
        "deprecate_autobiographical_memory",
        {"id": "{shown}", "reason": "wrong"},
        ("not a narrative id", "'a-3'"),
    ),
    (
        "narrative of another anima",
        "deprecate_autobiographical_memory",
        {"id": "{foreign_narrative}", "reason": "wrong"},
        ("does not exist",),
    ),
]


@pytest.mark.parametrize(
    ("tool", "raw_input", "phrases"), [c[1:] for c in REFUSALS], ids=[c[0] for c in REFUSALS]
)
def test_refused_call_is_actionable_and_writes_nothing(refusal_world, tool, raw_input, phrases):
    conn, ids = refusal_world
    ex = _executor(
        conn,
        tools=LIGHT_TOOLS,
        memory_ids=frozenset(int(ids[k][2:]) for k in ("shown", "retired")),
        conversation_ids=frozenset(TODAY),
        default_sources=TODAY[:1],
        self_blocks=frozenset({"autobiography_summary"}),
        summary_levels=frozenset({"day"}),
    )
    tables = ("semantic_memory", "memory_event", "emotional_anchor", "autobiographical_memory", "self_block")
    before = {t: _count(conn, t) for t in tables}
    snapshot = conn.execute("SELECT * FROM semantic_memory ORDER BY id").fetchall()

    result = ex.call(tool, _fill(raw_input, ids))

    assert result.is_error
    for phrase in phrases:
        assert _fill(phrase, ids) in result.content, result.content
    assert {t: _count(conn, t) for t in tables} == before
    assert conn.execute("SELECT * FROM semantic_memory ORDER BY id").fetchall() == snapshot
    assert _events(conn) == []
    assert ex.stats["errors"] == 1 and ex.log[-1]["is_error"]
    # the transaction is still usable: a valid call right after a refusal goes through
    _ok(ex, "create_semantic_memory", {"type": "world", "content": "Mia likes jasmine tea."})


def test_same_id_written_two_ways_is_a_repeat_not_a_self_merge(refusal_world):
    conn, ids = refusal_world
    shown = ids["shown"]
    ex = _executor(conn, memory_ids=frozenset({int(shown[2:])}), conversation_ids=frozenset(TODAY))
    result = ex.call(
        "merge_semantic_memories", {"source_ids": [shown, "f-0" + shown[2:]], "content": "Mia is a nurse."}
    )
    assert result.is_error and "repeat" in result.content
    assert _mem(conn, shown).status == "active"
    assert _events(conn) == []


def test_memory_created_in_the_step_is_updatable_outside_message_2(db: Database):
    with db.transaction() as conn:
        ex = _executor(
            conn, memory_ids=frozenset(), conversation_ids=frozenset(TODAY), default_sources=TODAY[:1]
        )
        ref = _ok(
            ex, "create_semantic_memory", {"type": "preference", "content": "Mia likes green tea."}
        ).data["id"]
        res = _ok(ex, "update_semantic_memory", {"id": ref, "content": "Mia likes green tea, no sugar."})
        assert "content" in res.content
        assert _mem(conn, ref).content == "Mia likes green tea, no sugar."
        # one created in another step (a fresh executor) is not
        other = _executor(conn, memory_ids=frozenset(), conversation_ids=frozenset(TODAY))
        refused = other.call("update_semantic_memory", {"id": ref, "content": "Mia hates tea."})
        assert refused.is_error and "outside this step's scope" in refused.content
        assert "none" in refused.content  # the model is told it was shown no memory at all


# ---- valid calls ------------------------------------------------------------------------


def test_create_defaults_to_the_step_sources_and_time(db: Database):
    observed = datetime(2023, 5, 8, 21, 30, tzinfo=UTC)
    with db.transaction() as conn:
        # with several conversations in the input, omitting source_sessions would cite them all
        several = _executor(conn, conversation_ids=frozenset(TODAY), default_sources=TODAY)
        refused = several.call("create_semantic_memory", {"type": "world", "content": "Mia works at Ruijin."})
        assert refused.is_error and "source_sessions is required" in refused.content
        assert all(c in refused.content for c in TODAY) and _events(conn) == []

        ex = _executor(
            conn, conversation_ids=frozenset(TODAY), default_sources=TODAY[:1], default_observed_at=observed
        )
        res = _ok(
            ex, "create_semantic_memory", {"type": "world", "content": "  Mia works   at Ruijin\nHospital. "}
        )
        assert re.fullmatch(r"f-\d+", res.data["id"]) and res.content == f"created {res.data['id']}"
        mem = _mem(conn, res.data["id"])
        assert mem.anima_id == ANIMA and mem.type == "world" and mem.status == "active"
        assert mem.content == "Mia works at Ruijin Hospital."  # whitespace folded
        assert mem.source_sessions == [TODAY[0]]
        assert mem.observed_at == observed
        assert mem.confidence == pytest.approx(0.8)

        explicit = _ok(
            ex,
            "create_semantic_memory",
            {
                "type": "experience",
                "content": "Mia ran a half marathon on 2023-05-07.",
                "confidence": 0.6,
                "source_sessions": [TODAY[1], TODAY[1]],
                "observed_at": "2023-05-08T09:00:00+08:00",
            },
        )
        mem2 = _mem(conn, explicit.data["id"])
        assert mem2.source_sessions == [TODAY[1]]
        assert mem2.observed_at == datetime(2023, 5, 8, 1, 0, tzinfo=UTC)
        assert mem2.confidence == pytest.approx(0.6)

        events = _events(conn)
        assert [(e["op"], e["memory_id"]) for e in events] == [
            ("create", str(mem.id)),
            ("create", str(mem2.id)),
        ]
        assert events[0]["before"] is None and events[0]["after"]["content"] == mem.content
        assert ex.stats["created"] == 2 and ex.stats["calls"] == 2


def test_update_overwrites_only_the_fields_passed(db: Database):
    observed = datetime(2023, 5, 1, 8, 0, tzinfo=UTC)
    with db.transaction() as conn:
        mem = _seed(
            conn,
            type="world",
            content="Mia works as a nurse.",
            confidence=0.7,
            source_sessions=["nova:2023-04-01-a", TODAY[0]],
            observed_at=observed,
        )
        ex = _executor(conn, memory_ids=frozenset({mem.id}), conversation_ids=frozenset(TODAY))

        _ok(
            ex,
            "update_semantic_memory",
            {"id": mem.ref, "content": "Mia works as a nurse at Ruijin Hospital."},
        )
        after = _mem(conn, mem.ref)
        assert after.content == "Mia works as a nurse at Ruijin Hospital."
        assert (after.type, after.confidence, after.source_sessions, after.observed_at) == (
            "world",
            pytest.approx(0.7),
            ["nova:2023-04-01-a", TODAY[0]],
            observed,
        )

        # sources accumulate: today's new citation joins the older ones (a union, not a swap)
        _ok(ex, "update_semantic_memory", {"id": mem.ref, "source_sessions": [TODAY[1]]})
        assert _mem(conn, mem.ref).source_sessions == ["nova:2023-04-01-a", *TODAY]

        _ok(ex, "update_semantic_memory", {"id": mem.ref, "source_sessions": []})
        cleared = _mem(conn, mem.ref)
        assert cleared.source_sessions == []
        assert cleared.content == "Mia works as a nurse at Ruijin Hospital."  # omitted: kept

        _ok(ex, "update_semantic_memory", {"id": mem.ref, "type": "experience", "confidence": 0.9})
        typed = _mem(conn, mem.ref)
        assert (typed.type, typed.confidence, typed.source_sessions) == ("experience", pytest.approx(0.9), [])

        same = _ok(
            ex,
            "update_semantic_memory",
            {"id": mem.ref, "content": "Mia works as a nurse at Ruijin Hospital."},
        )
        assert "nothing changed" in same.content

        events = _events(conn)
        assert [e["op"] for e in events] == ["update"] * 4  # the no-op left no event
        assert events[0]["before"]["content"] == "Mia works as a nurse."
        assert events[0]["after"]["content"] == "Mia works as a nurse at Ruijin Hospital."
        assert events[2]["before"]["source_sessions"] == ["nova:2023-04-01-a", *TODAY]
        assert events[2]["after"]["source_sessions"] == []
        assert ex.stats["updated"] == 4 and ex.stats["noop"] == 1


def test_update_naming_fields_null_keeps_them(db: Database):
    """A call listing every field, those it does not change as null (as models write them):
    they keep their values, the others change; it used to fail on a null content."""
    with db.transaction() as conn:
        mem = _seed(conn, type="world", content="Mia works as a nurse.", confidence=0.7)
        ex = _executor(conn, memory_ids=frozenset({mem.id}))
        nulls = {"content": None, "type": None, "observed_at": None, "source_sessions": None}
        _ok(ex, "update_semantic_memory", {"id": mem.ref, **nulls, "confidence": 0.9})
        after = _mem(conn, mem.ref)
        assert (after.content, after.type, after.confidence) == (
            "Mia works as a nurse.",
            "world",
            pytest.approx(0.9),
        )
        same = _ok(ex, "update_semantic_memory", {"id": mem.ref, **nulls})
        assert "nothing changed" in same.content


def test_deprecate_with_successor_and_validity(db: Database):
    until = datetime(2023, 5, 7, 16, 0, tzinfo=UTC)
    with db.transaction() as conn:
        old = _seed(conn, content="Mia drinks three cups of coffee a day.")
        other = _seed(conn, content="Mia lives in Pudong.")
        ex = _executor(conn, memory_ids=frozenset({old.id, other.id}), conversation_ids=frozenset(TODAY))
        new = _ok(
            ex, "create_semantic_memory", {"type": "preference", "content": "Mia switched to oolong tea."}
        )
        _ok(
            ex,
            "deprecate_semantic_memory",
            {
                "id": old.ref,
                "reason": "she switched to tea",
                "superseded_by": new.data["id"],
                "valid_until": until.isoformat(),
            },
        )
        gone = _mem(conn, old.ref)
        assert gone.status == "deprecated" and gone.deprecated_reason == "she switched to tea"
        assert f"f-{gone.superseded_by}" == new.data["id"] and gone.valid_until == until

        self_sup = ex.call(
            "deprecate_semantic_memory", {"id": other.ref, "reason": "x", "superseded_by": other.ref}
        )
        assert self_sup.is_error and "supersede itself" in self_sup.content

        _ok(ex, "deprecate_semantic_memory", {"id": other.ref, "reason": "moved away"})
        moved = _mem(conn, other.ref)
        assert moved.status == "deprecated" and moved.superseded_by is None and moved.valid_until is not None

        again = ex.call("deprecate_semantic_memory", {"id": other.ref, "reason": "twice"})
        assert again.is_error and "deprecated" in again.content

        ops = [(e["op"], e["memory_id"]) for e in _events(conn)]
        assert ops == [
            ("create", new.data["id"][2:]),
            ("deprecate", str(old.id)),
            ("deprecate", str(other.id)),
        ]
        assert _events(conn)[1]["before"]["status"] == "active"
        assert _events(conn)[1]["after"]["superseded_by"] == int(new.data["id"][2:])


def test_merge_stitches_provenance(db: Database):
    early, late = datetime(2023, 5, 1, 8, 0, tzinfo=UTC), datetime(2023, 5, 6, 8, 0, tzinfo=UTC)
    with db.transaction() as conn:
        a = _seed(
            conn,
            type="preference",
            content="Mia loves spicy hotpot.",
            confidence=0.7,
            source_sessions=["c-3", "c-1"],
            observed_at=late,
            reference_count=1.5,
            pinned=True,
            pinned_at=late,
        )
        b = _seed(
            conn,
            type="preference",
            content="Mia's favourite food is hotpot.",
            confidence=0.9,
            source_sessions=["c-2", "c-1"],
            observed_at=early,
            reference_count=2.0,
        )
        c = _seed(conn, type="world", content="Mia's cat is Pepper.", observed_at=None)
        ex = _executor(conn)

        res = _ok(
            ex,
            "merge_semantic_memories",
            {"source_ids": [a.ref, b.ref], "content": "Mia loves spicy hotpot."},
        )
        merged = _mem(conn, res.data["id"])
        assert merged.id not in (a.id, b.id) and merged.status == "active"
        assert merged.source_sessions == ["c-1", "c-2", "c-3"]  # sorted union
        assert merged.observed_at == early
        assert merged.type == "preference" and merged.confidence == pytest.approx(0.9)
        assert merged.pinned and merged.pinned_at == late  # a merge never silently unpins
        assert merged.reference_count == pytest.approx(3.5)
        for src in (a, b):
            gone = _mem(conn, src.ref)
            assert gone.status == "deprecated" and gone.superseded_by == merged.id and not gone.pinned
            assert merged.ref in gone.deprecated_reason

        # an explicit type and confidence win; unpinned sources give an unpinned memory
        d = _seed(conn, type="world", content="Mia has a cat called Pepper.", reference_count=1.0)
        res2 = _ok(
            ex,
            "merge_semantic_memories",
            {
                "source_ids": [c.ref, d.ref],
                "content": "Mia has a cat, Pepper.",
                "type": "experience",
                "confidence": 0.5,
            },
        )
        merged2 = _mem(conn, res2.data["id"])
        assert (merged2.type, merged2.confidence, merged2.pinned) == ("experience", pytest.approx(0.5), False)
        assert merged2.observed_at is None and merged2.reference_count == pytest.approx(1.0)

        # the merged memory itself is now mergeable in the same step; a deprecated source is not
        stale = ex.call("merge_semantic_memories", {"source_ids": [a.ref, merged2.ref], "content": "x y z"})
        assert stale.is_error and f"superseded by {merged.ref}" in stale.content

        ops = [(e["op"], e["memory_id"]) for e in _events(conn)]
        assert ops[:3] == [("create", str(merged.id)), ("merge", str(a.id)), ("merge", str(b.id))]
        assert len(ops) == 6 and ex.stats["merged"] == 4 and ex.stats["created"] == 2


def test_split_parts_inherit_and_original_is_superseded(db: Database):
    observed = datetime(2023, 5, 8, 2, 0, tzinfo=UTC)
    with db.transaction() as conn:
        mem = _seed(
            conn,
            type="world",
            confidence=0.75,
            source_sessions=[TODAY[0], TODAY[1]],
            observed_at=observed,
            content="Mia's sister Mei is a nurse in Chengdu and has two kids.",
        )
        ex = _executor(conn, memory_ids=frozenset({mem.id}), conversation_ids=frozenset(TODAY))
        res = _ok(
            ex,
            "split_semantic_memory",
            {
                "id": mem.ref,
                "parts": ["Mia's sister Mei is a nurse in Chengdu.", "Mia's sister Mei has two kids."],
            },
        )
        parts = [_mem(conn, ref) for ref in res.data["parts"]]
        assert [p.content for p in parts] == [
            "Mia's sister Mei is a nurse in Chengdu.",
            "Mia's sister Mei has two kids.",
        ]
        for p in parts:
            assert (p.type, p.source_sessions, p.observed_at, p.status) == (
                "world",
                [TODAY[0], TODAY[1]],
                observed,
                "active",
            )
            assert p.confidence == pytest.approx(0.75)
        original = _mem(conn, mem.ref)
        assert original.status == "deprecated" and original.superseded_by == parts[0].id
        ops = [(e["op"], e["memory_id"]) for e in _events(conn)]
        assert ops == [("create", str(parts[0].id)), ("create", str(parts[1].id)), ("split", str(mem.id))]
        # the parts were created in this step, so they are in scope for further work
        _ok(
            ex,
            "update_semantic_memory",
            {"id": parts[1].ref, "content": "Mia's sister Mei has two kids, Tangtang and Guoguo."},
        )


def test_pin_and_unpin(db: Database):
    with db.transaction() as conn:
        mem = _seed(conn)
        ex = _executor(conn)
        _ok(ex, "pin_semantic_memory", {"id": mem.ref, "reason": "core fact"})
        pinned = _mem(conn, mem.ref)
        assert pinned.pinned and pinned.pinned_at is not None
        assert "already pinned" in _ok(ex, "pin_semantic_memory", {"id": mem.ref}).content
        missing_reason = ex.call("unpin_semantic_memory", {"id": mem.ref})
        assert missing_reason.is_error and "field 'reason'" in missing_reason.content
        _ok(ex, "unpin_semantic_memory", {"id": mem.ref, "reason": "no longer central"})
        unpinned = _mem(conn, mem.ref)
        assert not unpinned.pinned and unpinned.pinned_at is None and unpinned.status == "active"
        assert "not pinned" in _ok(ex, "unpin_semantic_memory", {"id": mem.ref, "reason": "again"}).content
        events = _events(conn)
        assert [e["op"] for e in events] == ["pin", "unpin"]
        assert events[0]["before"]["pinned"] is False and events[0]["after"]["pinned"] is True


def test_emotional_anchor(db: Database):
    with db.transaction() as conn:
        ex = _executor(conn, conversation_ids=frozenset(TODAY))
        res = _ok(
            ex,
            "create_emotional_anchor",
            {
                "conversation_id": TODAY[0],
                "occurred_at": "2023-05-08T22:15:00+08:00",
                "emotion": "relief",
                "valence": 0.7,
                "arousal": 0.4,
                "trigger": "Dad is out of hospital.",
                "note": "turning point",
            },
        )
        assert re.fullmatch(r"e-\d+", res.data["id"])
        row = conn.execute("SELECT * FROM emotional_anchor").fetchone()
        assert (row["anima_id"], row["conversation_id"], row["emotion"]) == (ANIMA, TODAY[0], "relief")
        assert row["occurred_at"] == datetime(2023, 5, 8, 14, 15, tzinfo=UTC)
        assert row["intensity"] == pytest.approx(0.5)  # default
        [event] = _events(conn)
        assert (event["table_name"], event["op"], event["memory_id"]) == (
            "emotional_anchor",
            "create",
            str(row["id"]),
        )


def test_narrative_create_and_deprecate(db: Database):
    with db.transaction() as conn:
        mem = _seed(
            conn,
            type="experience",
            content="Mia ran her first marathon on 2023-05-07.",
            source_sessions=[TODAY[1]],
        )
        ex = _executor(conn, memory_ids=frozenset({mem.id}), narrative_ids=None)
        res = _ok(
            ex,
            "create_autobiographical_memory",
            {
                "title": "  First   marathon ",
                "narrative": "Mia finished her first marathon.",
                "significance": "milestone",
                "occurred_from": "2023-05-07T07:00:00+08:00",
                "source_memory_ids": [mem.ref],
            },
        )
        ref = res.data["id"]
        assert re.fullmatch(r"a-\d+", ref)
        row = conn.execute("SELECT * FROM autobiographical_memory WHERE id = %s", (int(ref[2:]),)).fetchone()
        assert row["title"] == "First marathon" and row["significance"] == "milestone"
        assert row["source_memory_ids"] == [mem.id]
        assert row["source_sessions"] == [TODAY[1]]  # derived from the memories when omitted

        _ok(ex, "deprecate_autobiographical_memory", {"id": ref, "reason": "retold better"})
        row = conn.execute("SELECT * FROM autobiographical_memory WHERE id = %s", (int(ref[2:]),)).fetchone()
        assert row["status"] == "deprecated" and row["deprecated_reason"] == "retold better"
        again = ex.call("deprecate_autobiographical_memory", {"id": ref, "reason": "twice"})
        assert again.is_error and "already deprecated" in again.content
        unknown = ex.call("deprecate_autobiographical_memory", {"id": "a-999999", "reason": "x"})
        assert unknown.is_error and "does not exist" in unknown.content

        # a narrative outside the step's narrative scope is refused
        scoped = _executor(conn, narrative_ids=frozenset())
        other = _ok(
            ex, "create_autobiographical_memory", {"title": "T", "narrative": "N.", "significance": "notable"}
        )
        outside = scoped.call("deprecate_autobiographical_memory", {"id": other.data["id"], "reason": "x"})
        assert outside.is_error and "outside this step's scope" in outside.content

        assert [(e["table_name"], e["op"]) for e in _events(conn)] == [
            ("autobiographical_memory", "create"),
            ("autobiographical_memory", "deprecate"),
            ("autobiographical_memory", "create"),
        ]


def test_self_block_versioning(db: Database):
    with db.transaction() as conn:
        ex = _executor(conn, self_blocks=frozenset({"autobiography_summary"}))
        block = {"name": "autobiography_summary"}
        assert _ok(
            ex, "write_self_block", {**block, "content": "## Recent\n- first chat"}
        ).content.startswith("wrote")
        _ok(ex, "write_self_block", {**block, "content": "## Recent\n- first marathon"})
        unchanged = _ok(ex, "write_self_block", {**block, "content": "## Recent\n- first marathon"})
        assert "unchanged" in unchanged.content

        current = conn.execute("SELECT * FROM self_block WHERE anima_id = %s", (ANIMA,)).fetchall()
        assert len(current) == 1
        assert (current[0]["version"], current[0]["content"], current[0]["updated_by"]) == (
            2,
            "## Recent\n- first marathon",
            STEP,
        )
        history = conn.execute("SELECT * FROM self_block_history WHERE anima_id = %s", (ANIMA,)).fetchall()
        assert [(h["version"], h["content"]) for h in history] == [(1, "## Recent\n- first chat")]
        events = _events(conn)
        assert [(e["table_name"], e["op"], e["memory_id"]) for e in events] == [
            ("self_block", "write", "autobiography_summary")
        ] * 2
        assert events[1]["before"]["content"] == "## Recent\n- first chat"


def test_temporal_summary_upsert(db: Database):
    with db.transaction() as conn:
        ex = _executor(conn, summary_levels=frozenset({"day"}))
        period = {"level": "day", "period_start": "2023-05-08", "period_end": "2023-05-08"}
        _ok(ex, "write_temporal_summary", {**period, "content": "Mia adopted Pepper."})
        _ok(ex, "write_temporal_summary", {**period, "content": "Mia adopted Pepper and ran."})
        _ok(ex, "write_temporal_summary", {**period, "content": "Mia adopted Pepper and ran."})
        rows = conn.execute("SELECT * FROM temporal_summary").fetchall()
        assert len(rows) == 1 and rows[0]["content"] == "Mia adopted Pepper and ran."
        assert rows[0]["period_start"] == date(2023, 5, 8) and rows[0]["stats"] == {"writer": STEP}
        assert [e["op"] for e in _events(conn)] == ["upsert", "upsert"]  # identical re-write: no event


def test_dream_entry_applies_confidence_updates(db: Database):
    with db.transaction() as conn:
        mem = _seed(conn, confidence=0.8)
        steady = _seed(conn, content="Mia's cat is Pepper.", confidence=0.6)
        ex = _executor(conn, tools=("write_dream_entry",))
        entry = {
            "aha_moments": ["Mia's running and her night shifts compete for sleep."],
            "creative_connections": [{"link": f"{mem.ref} ↔ {steady.ref}", "why": "both shape her evenings"}],
            "confidence_updates": [
                {"id": mem.ref, "new_confidence": 0.4, "reason": "she hinted at quitting"},
                {"id": steady.ref, "new_confidence": 0.6, "reason": "unchanged"},
            ],
            "next_session_actions": ["Ask how the night shifts go."],
            "bank_suggestions": [{"slug": "mia-running", "kind": "concept", "seed_content": "Mia runs."}],
        }
        _ok(ex, "write_dream_entry", entry)
        assert _mem(conn, mem.ref).confidence == pytest.approx(0.4)
        row = conn.execute("SELECT * FROM dream_journal WHERE anima_id = %s", (ANIMA,)).fetchone()
        assert row["day"] == DAY and row["confidence_updates"][0]["id"] == mem.ref
        assert row["bank_suggestions"][0]["slug"] == "mia-running"
        assert [(e["table_name"], e["op"]) for e in _events(conn)] == [
            ("semantic_memory", "confidence"),  # the update equal to the current value wrote nothing
            ("dream_journal", "upsert"),
        ]
        bad_slug = ex.call(
            "write_dream_entry",
            {"bank_suggestions": [{"slug": "Mia Running", "kind": "concept", "seed_content": "x"}]},
        )
        assert bad_slug.is_error and "slug" in bad_slug.content

        no_day = _executor(conn, run_id="run-no-day", day=None, tools=("write_dream_entry",))
        refused = no_day.call("write_dream_entry", {"aha_moments": ["x"]})
        assert refused.is_error and "needs a night" in refused.content


def test_every_write_is_audited_with_run_day_step(db: Database):
    with db.transaction() as conn:
        seeded = _seed(conn)
        ex = _executor(
            conn,
            conversation_ids=frozenset(TODAY),
            default_sources=TODAY[:1],
            self_blocks=frozenset({"persona"}),
            summary_levels=frozenset({"day"}),
        )
        ref = _ok(ex, "create_semantic_memory", {"type": "world", "content": "Mia lives in Jing'an."}).data[
            "id"
        ]
        _ok(ex, "update_semantic_memory", {"id": ref, "confidence": 0.95})
        _ok(ex, "pin_semantic_memory", {"id": ref})
        part = _ok(
            ex, "split_semantic_memory", {"id": seeded.ref, "parts": ["Mia is a nurse.", "Mia works nights."]}
        )
        _ok(
            ex,
            "merge_semantic_memories",
            {"source_ids": part.data["parts"], "content": "Mia is a nurse who works nights."},
        )
        _ok(
            ex,
            "create_emotional_anchor",
            {
                "conversation_id": TODAY[0],
                "occurred_at": "2023-05-08T10:00:00+08:00",
                "emotion": "calm",
                "valence": 0.2,
                "arousal": 0.1,
            },
        )
        _ok(
            ex, "create_autobiographical_memory", {"title": "T", "narrative": "N.", "significance": "notable"}
        )
        _ok(ex, "write_self_block", {"name": "persona", "content": "Warm."})
        _ok(
            ex,
            "write_temporal_summary",
            {"level": "day", "period_start": "2023-05-08", "period_end": "2023-05-08", "content": "A day."},
        )
        _ok(
            ex,
            "write_dream_entry",
            {"confidence_updates": [{"id": ref, "new_confidence": 0.5, "reason": "r"}]},
        )
        _ok(ex, "deprecate_semantic_memory", {"id": ref, "reason": "moved"})

        events = _events(conn)
        assert {(e["run_id"], e["day"], e["step"], e["anima_id"]) for e in events} == {
            (RUN, DAY, STEP, ANIMA)
        }
        assert {e["op"] for e in events} == {
            "create",
            "update",
            "pin",
            "split",
            "merge",
            "write",
            "upsert",
            "confidence",
            "deprecate",
        }
        for e in events:
            assert e["after"] is not None
            if e["op"] not in ("create",) and e["table_name"] == "semantic_memory":
                assert e["before"] is not None and e["before"] != e["after"]
        assert "search" not in events[0]["after"]  # the generated tsvector is not audited
        # no write without an event: every semantic_memory row of this step has one
        written = {
            str(r["id"]) for r in conn.execute("SELECT id FROM semantic_memory WHERE id <> %s", (seeded.id,))
        }
        assert written <= {e["memory_id"] for e in events if e["table_name"] == "semantic_memory"}


# ---- atomicity ---------------------------------------------------------------------------


def test_a_failing_step_leaves_nothing_and_is_recorded_failed(db: Database):
    night = Night(day=DAY, engine=OfflineEngine(), run_id="run-fails")
    with db.transaction() as conn:
        seeded = _seed(conn)
    calls: list[bool] = []

    def body(conn: Connection, audit: Audit) -> StepOutcome:
        ex = ToolExecutor(
            conn, Scope(anima_id=ANIMA, tools=tuple(TOOLS), self_blocks=frozenset({"persona"})), audit
        )
        for call in (
            ("create_semantic_memory", {"type": "world", "content": "Mia lives in Jing'an."}),
            ("update_semantic_memory", {"id": seeded.ref, "content": "Mia is a night-shift nurse."}),
            ("pin_semantic_memory", {"id": seeded.ref}),
            ("write_self_block", {"name": "persona", "content": "Warm."}),
        ):
            calls.append(ex.call(*call).is_error)
        raise RuntimeError("the engine lost its connection half-way")

    with pytest.raises(StepFailed, match="nothing written.*half-way"):
        run_step(db, night, ANIMA, STEP, body)
    assert calls == [False, False, False, False]

    with db.transaction() as conn:
        assert _count(conn, "semantic_memory") == 1
        assert _mem(conn, seeded.ref).content == "Mia works as a nurse." and not _mem(conn, seeded.ref).pinned
        assert _events(conn, "run-fails") == [] and _count(conn, "self_block") == 0
        state = sleep_state.get(conn, ANIMA, DAY, STEP)
        assert state["status"] == "failed" and "half-way" in state["error"] and state["run_id"] == "run-fails"

    # the same step succeeding afterwards commits its calls and records done
    def good(conn: Connection, audit: Audit) -> StepOutcome:
        ex = ToolExecutor(conn, Scope(anima_id=ANIMA, tools=tuple(TOOLS)), audit)
        ex.call("create_semantic_memory", {"type": "world", "content": "Mia lives in Jing'an."})
        return StepOutcome(stats=dict(ex.stats))

    result = run_step(db, Night(day=DAY, engine=OfflineEngine(), run_id="run-ok"), ANIMA, STEP, good)
    assert result.status == "done" and result.stats["created"] == 1
    with db.transaction() as conn:
        assert _count(conn, "semantic_memory") == 2 and len(_events(conn, "run-ok")) == 1
        assert sleep_state.get(conn, ANIMA, DAY, STEP)["status"] == "done"


def test_a_refusal_by_the_database_undoes_only_that_call(db: Database):
    """write_dream_entry applies its confidence update, then PostgreSQL refuses the entry
    (jsonb cannot hold \\u0000): the savepoint undoes the update too, the earlier and later
    calls of the step stay and commit."""
    with db.transaction() as conn:
        ex = _executor(conn, tools=("create_semantic_memory", "write_dream_entry"))
        ref = _ok(ex, "create_semantic_memory", {"type": "world", "content": "Mia works nights."}).data["id"]
        refused = ex.call(
            "write_dream_entry",
            {
                "aha_moments": ["a\x00b"],
                "confidence_updates": [{"id": ref, "new_confidence": 0.2, "reason": "r"}],
            },
        )
        assert refused.is_error
        assert refused.content.startswith("write_dream_entry: the store refused the write: ")
        assert "Unicode" in refused.content  # PostgreSQL's own reason, not just an exception class
        assert _mem(conn, ref).confidence == pytest.approx(0.8)
        assert _count(conn, "dream_journal") == 0

        nul = ex.call("create_semantic_memory", {"type": "world", "content": "Mia\x00 likes tea."})
        assert nul.is_error and "NUL" in nul.content  # refused before reaching the server, still explained

        _ok(ex, "create_semantic_memory", {"type": "world", "content": "Mia likes tea."})
        assert ex.stats["errors"] == 2
    with db.transaction() as conn:
        assert [e["op"] for e in _events(conn)] == ["create", "create"]
        assert _count(conn, "semantic_memory") == 2


def _batch_outcome(conn: Connection, calls: list[ToolCall], together: bool) -> tuple:
    """What a step sees and what it leaves, refs numbered in order of creation."""
    ex = _executor(conn, tools=("create_semantic_memory", "update_semantic_memory"), conversation_ids=TODAY)
    results = ex.call_many(calls) if together else [ex.call(c.name, c.input) for c in calls]
    numbered = {ref: f"#{k}" for k, ref in enumerate(f"f-{i}" for i in ex.created_ids)}

    def plain(text: str) -> str:
        return re.sub(r"f-\d+", lambda m: numbered.get(m.group(), m.group()), text)

    rows = [
        (m.content, m.source_sessions, m.confidence, m.observed_at)
        for m in MemoryRepo(conn).get_many(ex.created_ids)
    ]
    events = [(e["op"], e["after"]["content"]) for e in _events(conn)]
    return (
        [(plain(r.content), r.is_error, plain(str(r.data))) for r in results],
        dict(ex.stats),
        [(e["tool"], e["is_error"], plain(e["result"])) for e in ex.log],
        (ex.audit.tools.calls, ex.audit.tools.refused, ex.audit.tools.retryable),
        rows,
        events,
    )


def test_a_batch_of_creations_ends_as_one_call_at_a_time_would(db: Database):
    """`call_many` writes a run of creations together; what each call gets back, the stats,
    the log, the refusals and the rows and events left are those of calling them one by one,
    with refusals before the write (schema, sources), by the store (NUL) and another tool
    (an update, which ends the run) among them."""
    seeded = {}
    with db.transaction() as conn:
        seeded["id"] = _seed(conn).ref
    calls = [
        ToolCall(name="create_semantic_memory", input={"type": "world", "content": f"Mia keeps {n} hives."})
        for n in range(5)
    ]
    calls[1] = ToolCall(name="create_semantic_memory", input={"type": "nonsense", "content": "x"})
    calls[3] = ToolCall(
        name="create_semantic_memory",
        input={"type": "world", "content": "Bo rows.", "source_sessions": ["elsewhere"]},
    )
    calls += [
        ToolCall(name="update_semantic_memory", input={"id": seeded["id"], "confidence": 0.5}),
        ToolCall(
            name="create_semantic_memory",
            input={"type": "world", "content": "Bo sails.", "source_sessions": [TODAY[1]]},
        ),
        ToolCall(name="create_semantic_memory", input={"type": "world", "content": "Mia\x00 bakes."}),
        ToolCall(
            name="create_semantic_memory",
            input={"type": "preference", "content": "Bo likes rowing.", "confidence": 0.6},
        ),
    ]
    outcomes = []
    for together in (False, True):
        with db.transaction() as conn, conn.transaction(force_rollback=True):
            outcomes.append(_batch_outcome(conn, calls, together))
    one_by_one, batched = outcomes
    assert batched == one_by_one
    results, stats = batched[0], batched[1]
    assert [error for _, error, _ in results] == [False, True, False, True, False, False, False, True, False]
    assert stats["created"] == 5 and stats["errors"] == 3 and stats["calls"] == len(calls)
    # no refusal at all: the whole run in one write, the same rows and events
    clean = [c for c, (_, error, _) in zip(calls, results, strict=True) if not error]
    outcomes = []
    for together in (False, True):
        with db.transaction() as conn, conn.transaction(force_rollback=True):
            outcomes.append(_batch_outcome(conn, clean, together))
    assert outcomes[0] == outcomes[1] and len(outcomes[1][5]) == 6


# ---- JSON schemas ------------------------------------------------------------------------


def _objects(spec_schema: dict) -> Iterator[dict]:
    """The schema itself and every nested model under $defs."""
    yield spec_schema
    yield from spec_schema.get("$defs", {}).values()


def test_tool_specs_give_every_tool_a_strict_schema():
    specs = tool_specs(tuple(TOOLS))
    assert [s.name for s in specs] == list(TOOLS)
    for spec in specs:
        assert spec.description and "\n" not in spec.description and len(spec.description) > 20
        schema = spec.input_schema
        assert schema["type"] == "object" and schema["properties"]
        assert "title" not in schema and "description" not in schema  # carried by the tool, not repeated
        for obj in _objects(schema):
            assert obj["additionalProperties"] is False, (spec.name, obj.get("title"))
        required = set(schema.get("required", []))
        model_required = {n for n, f in TOOLS[spec.name].model_fields.items() if f.is_required()}
        assert required == model_required, spec.name
    by_name = {s.name: s.input_schema for s in specs}
    assert by_name["create_semantic_memory"]["properties"]["type"]["enum"] == list(MEMORY_TYPES)
    assert by_name["create_semantic_memory"]["properties"]["content"]["maxLength"] == MAX_CONTENT_CHARS
    assert "identity" not in by_name["write_self_block"]["properties"]["name"]["enum"]
    assert "source_sessions: []" in tool_specs(["update_semantic_memory"])[0].description
    assert "update_semantic_memory" not in {s.name for s in tool_specs(["create_semantic_memory"])}


_ID_FIELDS = {
    "update_semantic_memory": ["id"],
    "merge_semantic_memories": ["source_ids"],
    "create_autobiographical_memory": ["source_memory_ids"],
    "deprecate_autobiographical_memory": ["id"],
    "write_dream_entry": ["$defs.ConfidenceUpdate.id"],
    "deprecate_semantic_memory": ["id", "superseded_by"],
    "split_semantic_memory": ["id"],
    "pin_semantic_memory": ["id"],
    "unpin_semantic_memory": ["id"],
}


@pytest.mark.parametrize("tool", list(_ID_FIELDS))
def test_id_fields_document_their_format(tool):
    schema = tool_specs([tool])[0].input_schema
    for path in _ID_FIELDS[tool]:
        if path.startswith("$defs."):
            _, model, field = path.split(".")
            prop = schema["$defs"][model]["properties"][field]
        else:
            prop = schema["properties"][path]
        example = "a-3" if tool.endswith("autobiographical_memory") and path == "id" else "f-"
        assert example in prop.get("description", ""), (tool, path, prop)


def test_every_tool_has_a_handler(db: Database):
    with db.transaction() as conn:
        assert set(_executor(conn)._handlers) == set(TOOLS)
