"""Chat-time recall on a real store: the resident set, then passive recall by full text,
CJK bigrams and trigram similarity, within the character budget."""

from __future__ import annotations

import logging

import pytest

from anima_pipeline.recall.context import plan_query, recall, resident_set
from anima_pipeline.store.db import Database

A = "aria"


def _add(
    conn,
    content: str,
    *,
    anima: str = A,
    sources: tuple[str, ...] = ("aria:s1",),
    pinned: bool = False,
    refs: float = 0,
    status: str = "active",
) -> int:
    return conn.execute(
        """INSERT INTO semantic_memory (anima_id, type, content, source_sessions, pinned, reference_count, status)
           VALUES (%s, 'world', %s, %s, %s, %s, %s) RETURNING id""",
        (anima, content, list(sources), pinned, refs, status),
    ).fetchone()["id"]


def _recalled(res) -> list[str]:
    return [r.memory.content for r in res.recalled]


def test_resident_is_pinned_union_top_n_by_reference_count(db: Database) -> None:
    with db.transaction() as conn:
        pins = [_add(conn, f"pinned fact {i}", pinned=True, refs=i) for i in range(3)]
        cited = [_add(conn, f"cited fact {i}", refs=i + 1) for i in range(25)]
        _add(conn, "never cited fact")
        _add(conn, "deprecated pin", pinned=True, refs=99, status="deprecated")
        _add(conn, "another anima's pin", anima="other", pinned=True)
        resident, overflow = resident_set(conn, A)
    ids = [m.id for m in resident]
    assert overflow == 0
    assert ids[:3] == pins[::-1]  # pins first, most cited pin first
    assert ids[3:] == cited[::-1][:20]  # then the top 20 by reference_count
    assert len(ids) == 23


def test_pins_beyond_the_cap_are_cut_reported_and_never_unpinned(db: Database, caplog) -> None:
    with db.transaction() as conn:
        for i in range(45):
            _add(conn, f"pin {i}", pinned=True, refs=i)
        _add(conn, "cited", refs=100)
        with caplog.at_level(logging.WARNING, logger="anima_pipeline"):
            resident, overflow = resident_set(conn, A)
        res = recall(conn, A, "pin")
        still_pinned = conn.execute("SELECT count(*) AS n FROM semantic_memory WHERE pinned").fetchone()["n"]
    assert overflow == 5 and res.resident_overflow == 5
    assert sum(m.pinned for m in resident) == 40 and len(resident) == 41
    assert {m.content for m in resident if m.pinned} == {f"pin {i}" for i in range(5, 45)}
    assert still_pinned == 45
    assert "over pinned_max" in caplog.text
    # the cut pins are not resident, so passive recall may still bring them back
    assert set(_recalled(res)) <= {f"pin {i}" for i in range(5)}


def test_recall_by_content_word_ignores_question_words(db: Database) -> None:
    with db.transaction() as conn:
        _add(conn, "Lin Wei's cat is called Mochi and sleeps on the piano.")
        _add(conn, "What a day: when it rains, they go where it is dry, and that is how it was.")
        _add(conn, "Lin Wei started learning the guitar in 2024.")
        found = recall(conn, A, "What is the name of the cat?")
        nothing = recall(conn, A, "When did you go there, what was it and how?")
    assert _recalled(found) == ["Lin Wei's cat is called Mochi and sleeps on the piano."]
    assert "cat" in found.recalled[0].why
    assert plan_query("When did you go there, what was it and how?").terms == []
    assert nothing.recalled == []
    assert "(nothing matched)" in nothing.render()


def test_question_words_are_stripped_from_the_query() -> None:
    plan = plan_query("When did Caroline go to the LGBTQ support group?")
    assert [t.label for t in plan.terms] == ["caroline", "lgbtq", "support", "group"]
    assert plan.date_intent
    assert [t.substring for t in plan_query("What happened on 7 May 2023?").terms] == ["2023-05-07"]


def test_recall_by_a_chinese_query(db: Database) -> None:
    with db.transaction() as conn:
        hotpot = _add(conn, "林薇最喜欢吃火锅，尤其是麻辣锅底。")
        _add(conn, "林薇在杭州工作了三年。")
        _add(conn, "The weather in Hangzhou was rainy all week.")
        res = recall(conn, A, "林薇喜欢吃什么？")
        hangzhou = recall(conn, A, "她在杭州做什么")
    assert res.recalled[0].memory.id == hotpot
    assert "喜欢" in res.recalled[0].why
    assert _recalled(hangzhou)[0] == "林薇在杭州工作了三年。"
    assert "The weather in Hangzhou was rainy all week." not in _recalled(hangzhou)


def test_recall_by_a_misspelled_word(db: Database) -> None:
    with db.transaction() as conn:
        _add(conn, "Lin Wei booked a table at the new ramen restaurant downtown.")
        _add(conn, "Lin Wei repaired the bicycle on Sunday.")
        res = recall(conn, A, "which resturant?")
    assert _recalled(res) == ["Lin Wei booked a table at the new ramen restaurant downtown."]
    assert "resturant~" in res.recalled[0].why


def test_when_questions_prefer_a_dated_memory(db: Database) -> None:
    with db.transaction() as conn:
        _add(conn, "Caroline loves the support group she goes to.")
        _add(conn, "Caroline went to a support group on 2023-05-07.")
        res = recall(conn, A, "When did Caroline go to the support group?")
    assert _recalled(res)[0] == "Caroline went to a support group on 2023-05-07."
    assert "(dated)" in res.recalled[0].why


def test_deprecated_memories_are_never_returned(db: Database) -> None:
    with db.transaction() as conn:
        _add(conn, "Lin Wei lives in Shanghai.", status="deprecated", pinned=True, refs=5)
        live = _add(conn, "Lin Wei moved to Hangzhou.")
        res = recall(conn, A, "Where does Lin Wei live, Shanghai or Hangzhou?")
    assert res.resident == []
    assert [r.memory.id for r in res.recalled] == [live]


def test_the_character_budget_is_respected(db: Database) -> None:
    with db.transaction() as conn:
        for i in range(30):
            _add(conn, f"Kayak trip number {i:02d}: " + "paddling along the quiet river " * 4)
        res = recall(conn, A, "kayak", limit=50)
        small = recall(conn, A, "kayak", limit=50, max_chars=300)
        long_top = _add(conn, "Kayak kayak kayak: " + "x" * 400)
        short = _add(conn, "kayak.")
        fit = recall(conn, A, "kayak", limit=3, max_chars=150)
    assert sum(len(c) for c in _recalled(res)) <= 2000 and len(res.recalled) == 2000 // 143
    assert sum(len(c) for c in _recalled(small)) <= 300 and len(small.recalled) == 2
    # a memory too long for what is left is skipped, a shorter one below it still fits
    ids = [r.memory.id for r in fit.recalled]
    assert long_top not in ids and short in ids and sum(len(c) for c in _recalled(fit)) <= 150


def test_exclude_sessions_drops_the_current_conversations_own_memories(db: Database) -> None:
    with db.transaction() as conn:
        own = _add(conn, "Lin Wei is baking a lemon cake right now.", sources=("aria:now",))
        mixed = _add(conn, "Lin Wei bakes a lemon cake every spring.", sources=("aria:old", "aria:now"))
        old = _add(conn, "Lin Wei's lemon cake recipe came from her grandmother.", sources=("aria:old",))
        everything = recall(conn, A, "lemon cake")
        res = recall(conn, A, "lemon cake", exclude_sessions=["aria:now"])
    assert {r.memory.id for r in everything.recalled} == {own, mixed, old}
    assert {r.memory.id for r in res.recalled} == {mixed, old}


def test_resident_memories_are_not_repeated_in_recalled(db: Database) -> None:
    with db.transaction() as conn:
        pin = _add(conn, "Lin Wei is allergic to peanuts.", pinned=True)
        cited = _add(conn, "Lin Wei avoids peanuts at restaurants.", refs=3)
        other = _add(conn, "Peanuts were in the satay Lin Wei sent back.")
        res = recall(conn, A, "peanuts")
    assert {m.id for m in res.resident} == {pin, cited}
    assert [r.memory.id for r in res.recalled] == [other]
    rendered = res.render()
    assert rendered.count("[[anima:") == 3 and all(
        rendered.count(f"[[anima:f-{i}]]") == 1 for i in (pin, cited, other)
    )


@pytest.mark.parametrize("limit", [0, 1])
def test_limit_is_honoured(db: Database, limit: int) -> None:
    with db.transaction() as conn:
        for i in range(3):
            _add(conn, f"tea note {i}")
        assert len(recall(conn, A, "tea", limit=limit).recalled) == limit
