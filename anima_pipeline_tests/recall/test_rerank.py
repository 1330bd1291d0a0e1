"""The second stage of recall (recall/rerank.py): the packaged weights, a candidate holding the
names asked about above one that does not, a line repeating a placed one left out, and in a
context the room going to the best candidates of any section."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

import pytest

from anima_pipeline.config import Settings
from anima_pipeline.recall import rerank
from anima_pipeline.recall.assemble import assemble_context
from anima_pipeline.recall.query import plan_query
from anima_pipeline.recall.ranking import Signal
from anima_pipeline.recall.render import memory_item, message_item
from anima_pipeline.store.db import Database
from anima_pipeline_tests.recall.test_recall import NOW, A, _add, _say

TZ = ZoneInfo("UTC")
TODAY = date(2024, 6, 1)


def _memory(i: int, text: str, sources: tuple[str, ...] = ("c1",)):
    row = {
        "id": i,
        "content": text,
        "type": "experience",
        "source_sessions": list(sources),
        "observed_at": datetime(2024, 5, 3, tzinfo=UTC),
        "pinned": False,
    }
    return memory_item(row, score=0.0, why="", tz=TZ)


def _message(i: int, text: str, conv: str = "c1", speaker: str = "Dana"):
    row = {
        "id": i,
        "content": text,
        "role": "user",
        "speaker": speaker,
        "conversation_id": conv,
        "created_at": datetime(2024, 5, 3, 12, tzinfo=UTC),
        "title": None,
    }
    return message_item(row, score=0.0, why="", tz=TZ)


def test_the_packaged_weights_load_and_name_the_features_computed() -> None:
    weights = rerank.packaged_weights()
    assert weights.features == rerank.FEATURES
    assert len(weights.weight) == len(weights.mean) == len(weights.scale) == len(rerank.FEATURES)
    assert weights.meta["fit_on"].startswith("LoCoMo dev, tuned dialogues only")
    assert 0.0 < weights.score([0.0] * len(rerank.FEATURES)) < 1.0


def test_weights_for_other_features_are_refused_naming_what_differs() -> None:
    data = rerank.packaged_weights().to_json()
    data["features"] = [*data["features"][:-1], "length_in_emoji"]
    with pytest.raises(ValueError, match="length_in_emoji") as refused:
        rerank.Weights.from_json(json.loads(json.dumps(data)))
    assert rerank.FEATURES[-1] in str(refused.value) and "fit_ranker" in str(refused.value)


def test_a_candidate_holding_the_names_asked_about_outranks_one_without() -> None:
    query = "Where did Ines move to?"
    plan = plan_query(query, TODAY)
    asked = rerank.asked(plan, query, None, TODAY)
    assert asked.names == {"ines"}
    with_name = _memory(1, "Ines moved to Porto last spring with her sister.")
    without = _memory(2, "Tomas moved to Porto last spring with his sister.")
    same = Signal(rank=3, score=0.4)  # the same place in the first stage's list
    cands = [
        rerank.Candidate(item, "memories", rerank.features(item, asked, same, None, 0.0))
        for item in (without, with_name)
    ]
    rerank._relative(cands)
    ranked = rerank.rank(cands)
    assert [c.item.id for c in ranked] == [1, 2]
    assert ranked[0].score > ranked[1].score


def test_a_line_repeating_a_placed_one_is_left_out_and_another_fact_is_not() -> None:
    placed = rerank.Placed([_memory(1, "Dana adopted a greyhound named Pepper in May.", sources=("c7",))])
    # the message the memory came from says the same
    assert placed.repeats(_message(2, "I adopted a greyhound named Pepper in May!", conv="c7"))
    # a message that adds a word of its own says more
    assert not placed.repeats(
        _message(3, "I adopted a greyhound named Pepper in May, at the shelter", conv="c9")
    )
    # the same text nearly, but another number: another fact
    placed.add(_memory(4, "Kayak trip number 01 along the quiet river"))
    assert not placed.repeats(_memory(5, "Kayak trip number 02 along the quiet river"))
    assert placed.repeats(_memory(6, "kayak trip number 01, along the quiet river!"))


@pytest.mark.parametrize("second_stage", [False, True])
def test_a_context_says_nothing_twice_and_the_second_stage_places_the_best_candidate(
    db: Database, second_stage: bool
) -> None:
    settings = Settings(recall={"second_stage": second_stage, "drop_repeats": True})
    with db.transaction() as conn:
        said = _say(conn, "I adopted a greyhound named Pepper from the shelter on Friday.", conv="aria:c7")
        kept = _add(
            conn,
            "Adopted a greyhound named Pepper from the shelter on Friday.",
            sources=("aria:c7",),
            observed=datetime(2024, 5, 3, 12, tzinfo=UTC),  # when it was said, as the night records it
        )
        for i in range(30):  # filler that shares a word with the question
            _add(conn, f"Shelter volunteers met on day {i} to plan the fair.")
        ctx = assemble_context(conn, A, "Which greyhound came from the shelter?", settings=settings, now=NOW)
        kept_both = assemble_context(
            conn,
            A,
            "Which greyhound came from the shelter?",
            settings=Settings(recall={"drop_repeats": False}),
            now=NOW,
        )
    lines = [i for s in ctx.sections for i in s.items]
    pepper = [i for i in lines if "Pepper" in i.text]
    assert len(pepper) == 1 and pepper[0].id in (said, kept)  # the memory or its message, not both
    assert len([i for s in kept_both.sections for i in s.items if "Pepper" in i.text]) == 2
    if second_stage:  # every section's items scored alike: the best of all is the answer
        assert max(i.score for i in lines) == pepper[0].score
    assert [s.name for s in ctx.sections] == ["resident", "summaries", "memories", "episodic"]
    assert sum(s.chars_used for s in ctx.sections if s.name != "resident") <= 2000
