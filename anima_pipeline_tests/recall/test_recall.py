"""Chat-time recall on a real store: sections within their budgets, exclusions, typos, Chinese,
dates, active search, the indexes actually used, and nothing written."""

from __future__ import annotations

import logging
from datetime import UTC, date, datetime, timedelta

import pytest

from anima_pipeline.config import Settings
from anima_pipeline.recall.assemble import assemble_context, search_memories, search_messages
from anima_pipeline.recall.query import plan_query
from anima_pipeline.recall.ranking import common_lexemes
from anima_pipeline.recall.resident import resident_set
from anima_pipeline.recall.sections import TRUNCATION_MARK, Budgets
from anima_pipeline.store.db import Database

A = "aria"
NOW = datetime(2024, 6, 20, 12, tzinfo=UTC)


def _add(
    conn,
    content: str,
    *,
    anima: str = A,
    sources: tuple[str, ...] = ("aria:s1",),
    pinned: bool = False,
    refs: float = 0,
    status: str = "active",
    observed: datetime | None = None,
) -> int:
    return conn.execute(
        """INSERT INTO semantic_memory
               (anima_id, type, content, source_sessions, pinned, reference_count, status, observed_at)
           VALUES (%s, 'world', %s, %s, %s, %s, %s, %s) RETURNING id""",
        (anima, content, list(sources), pinned, refs, status, observed),
    ).fetchone()["id"]


def _say(
    conn,
    content: str,
    *,
    conv: str = "aria:c1",
    speaker: str = "Lin Wei",
    at: datetime = datetime(2024, 5, 3, 12, tzinfo=UTC),
    anima: str = A,
    title: str | None = "evening chat",
) -> int:
    conn.execute(
        """INSERT INTO conversation (id, anima_id, title, created_at, updated_at) VALUES (%s, %s, %s, %s, %s)
           ON CONFLICT DO NOTHING""",
        (conv, anima, title, at, at),
    )
    n = conn.execute("SELECT count(*) AS n FROM message").fetchone()["n"]
    return conn.execute(
        """INSERT INTO message (anima_id, conversation_id, external_id, role, speaker, content, created_at)
           VALUES (%s, %s, %s, 'user', %s, %s, %s) RETURNING id""",
        (anima, conv, f"x{n}", speaker, content, at),
    ).fetchone()["id"]


def _summary(conn, level: str, start: str, end: str, content: str) -> None:
    conn.execute(
        """INSERT INTO temporal_summary (anima_id, level, period_start, period_end, content)
           VALUES (%s, %s, %s, %s, %s)""",
        (A, level, start, end, content),
    )


def _ids(ctx, section: str) -> list[int]:
    return [i.id for i in ctx.section(section).items]


def _texts(ctx, section: str) -> list[str]:
    return [i.text for i in ctx.section(section).items]


def _ctx(conn, query: str, **kw):
    return assemble_context(conn, A, query, settings=Settings(), now=NOW, **kw)


# --- resident set -----------------------------------------------------------------------


def test_resident_is_pinned_union_top_n_by_reference_count(db: Database) -> None:
    with db.transaction() as conn:
        pins = [_add(conn, f"pinned fact {i}", pinned=True, refs=i) for i in range(3)]
        cited = [_add(conn, f"cited fact {i}", refs=i + 1) for i in range(25)]
        _add(conn, "never cited fact")
        _add(conn, "deprecated pin", pinned=True, refs=99, status="deprecated")
        _add(conn, "another anima's pin", anima="other", pinned=True)
        resident, overflow = resident_set(conn, A)
        ctx = _ctx(conn, "fact")
    ids = [m.id for m in resident]
    assert overflow == 0
    assert ids[:3] == pins[::-1]  # pins first, most cited pin first
    assert ids[3:] == cited[::-1][:20]  # then the top 20 by reference_count
    assert _ids(ctx, "resident") == ids
    assert set(_ids(ctx, "memories")).isdisjoint(ids)  # resident ones are not repeated


def test_pins_beyond_the_cap_are_cut_reported_and_never_unpinned(db: Database, caplog) -> None:
    with db.transaction() as conn:
        for i in range(45):
            _add(conn, f"pin {i}", pinned=True, refs=i)
        _add(conn, "cited", refs=100)
        with caplog.at_level(logging.WARNING, logger="anima_pipeline"):
            resident, overflow = resident_set(conn, A)
        ctx = _ctx(conn, "pin")
        still_pinned = conn.execute("SELECT count(*) AS n FROM semantic_memory WHERE pinned").fetchone()["n"]
    assert overflow == 5 and ctx.resident_overflow == 5
    assert sum(m.pinned for m in resident) == 40 and len(resident) == 41
    assert still_pinned == 45
    assert "over pinned_max" in caplog.text
    # the cut pins are not resident, so passive recall may still bring them back
    assert set(_texts(ctx, "memories")) <= {f"pin {i}" for i in range(5)}


# --- sections and budgets ---------------------------------------------------------------


def test_sections_fill_their_budgets_and_a_long_item_never_overflows(db: Database) -> None:
    with db.transaction() as conn:
        for i in range(40):
            _add(conn, f"Kayak trip number {i:02d}: " + "paddling along the quiet river " * 3)
            _say(conn, f"The kayak went over a weir on trip {i:02d}, " + "cold water everywhere " * 3)
        huge = _add(conn, "Kayak " + "the longest kayak story ever told, " * 200)
        _say(conn, "kayak " * 2000)
        ctx = _ctx(conn, "kayak trip")
        small = _ctx(conn, "kayak trip", budgets=Budgets(recall=300, memory_share=0.5))
        story = _ctx(conn, "the longest story")
    recall_sections = [ctx.section(n) for n in ("summaries", "memories", "episodic")]
    used = sum(s.chars_used for s in recall_sections)
    assert 1800 < used <= 2000  # packed by characters, up to the budget, never over it
    for s in (s for s in ctx.sections if s.items):
        # the header, the blank line before it and each line's newline count: rendered, it fits
        assert len(s.render()) + 2 <= s.chars_used == sum(i.chars + 1 for i in s.items) + len(s.title) + 4
        assert s.chars_used <= s.budget and all(i.chars == len(i.line) for i in s.items)
    recalled = "\n\n".join(s.render() for s in recall_sections if s.items)
    assert len(recalled) <= 2000
    assert ctx.section("memories").items and ctx.section("episodic").items  # both sections take part
    long_ones = [i for i in ctx.items() if i.truncated]
    assert all(i.chars <= 400 and i.text.endswith(TRUNCATION_MARK) for i in long_ones)
    assert any(i.kind == "message" for i in long_ones)
    (cut,) = story.section("memories").items
    assert cut.id == huge and cut.truncated and cut.chars <= 400 and len(cut.text) < 400
    assert sum(s.chars_used for s in small.sections if s.name != "resident") <= 300
    assert ctx.chars == len(ctx.rendered) and "# Past messages" in ctx.rendered


def test_messages_show_date_speaker_and_title(db: Database) -> None:
    with db.transaction() as conn:
        _say(conn, "I finally adopted a greyhound called Biscuit.", speaker="Odile", title="Sunday walk")
        ctx = _ctx(conn, "What kind of dog did Odile adopt?")
    (item,) = ctx.section("episodic").items
    assert item.line == '- [2024-05-03 Odile, "Sunday walk"] I finally adopted a greyhound called Biscuit.'
    assert (item.speaker, item.title, item.date) == ("Odile", "Sunday walk", date(2024, 5, 3))


def test_a_message_line_dates_its_relative_time_and_the_store_keeps_it_as_said(db: Database) -> None:
    """Read weeks later, "yesterday" says nothing: a message line shows each relative time
    phrase as said with its date seen from the day it was said; the line is judged a repeat
    by what it says (a memory of that day still drops its message), and the store, a search
    page's line and a message read whole keep the text as written."""
    from anima_pipeline.recall.episodic import read_message

    said = "I ran the harbour race yesterday, and we move house next month."
    with db.transaction() as conn:
        m = _say(conn, said, speaker="Odile")
        when = _ctx(conn, "When did Odile run the harbour race?")
        page = search_messages(conn, A, "harbour race", settings=Settings(), now=NOW)
        whole = read_message(conn, A, m, 0, 1000)
        stored = conn.execute("SELECT content FROM message WHERE id = %s", (m,)).fetchone()["content"]
        # a memory that says what the message said, that day
        _add(conn, "Odile: " + said, sources=("aria:c1",), observed=datetime(2024, 5, 3, 12, tzinfo=UTC))
        drop = Settings()
        drop = drop.model_copy(update={"recall": drop.recall.model_copy(update={"drop_repeats": True})})
        repeat = assemble_context(conn, A, "When did Odile run the harbour race?", settings=drop, now=NOW)
    (item,) = when.section("episodic").items
    dated = "I ran the harbour race yesterday (2024-05-02), and we move house next month (2024-06)."
    assert item.text == dated and item.line.endswith(dated) and dated in when.rendered
    assert when.chars == len(when.rendered) and item.chars == len(item.line)
    assert [i.text for i in page.items] == [dated]
    assert stored == said and whole.content == said
    assert _texts(repeat, "memories")[0].startswith("Odile: I ran the harbour race")
    assert repeat.section("episodic").items == []  # its dated line is not another fact


# --- exclusions --------------------------------------------------------------------------


def test_the_current_session_and_its_only_sourced_memories_are_excluded(db: Database) -> None:
    with db.transaction() as conn:
        own = _add(conn, "Lin Wei is baking a lemon cake right now.", sources=("aria:now",))
        mixed = _add(conn, "Lin Wei bakes a lemon cake every spring.", sources=("aria:old", "aria:now"))
        old = _add(conn, "Lin Wei's lemon cake recipe came from her grandmother.", sources=("aria:old",))
        said_now = _say(conn, "The lemon cake is in the oven.", conv="aria:now")
        said_before = _say(conn, "Grandmother's lemon cake needs two lemons.", conv="aria:old")
        everything = _ctx(conn, "lemon cake")
        ctx = _ctx(conn, "lemon cake", session_id="aria:now")
    assert set(_ids(everything, "memories")) == {own, mixed, old}
    assert set(_ids(everything, "episodic")) == {said_now, said_before}
    assert set(_ids(ctx, "memories")) == {mixed, old}
    assert _ids(ctx, "episodic") == [said_before]


def test_deprecated_memories_and_debug_conversations_are_never_recalled(db: Database) -> None:
    with db.transaction() as conn:
        _add(conn, "Lin Wei lives in Shanghai.", status="deprecated", pinned=True, refs=5)
        live = _add(conn, "Lin Wei moved to Hangzhou.")
        _say(conn, "test harness: Shanghai Hangzhou", conv="aria:debug")
        conn.execute("UPDATE conversation SET debug = true WHERE id = 'aria:debug'")
        ctx = _ctx(conn, "Where does Lin Wei live, Shanghai or Hangzhou?")
    assert _ids(ctx, "resident") == [] and _ids(ctx, "memories") == [live]
    assert _ids(ctx, "episodic") == []


def test_a_message_asking_something_brings_the_turn_that_answers_it(db: Database) -> None:
    t = datetime(2024, 5, 3, 12, tzinfo=UTC)
    with db.transaction() as conn:
        asked = _say(conn, "Any plans for the long weekend?", speaker="Odile", at=t)
        _say(conn, "(typing)", speaker="Lin Wei", at=t + timedelta(seconds=30))
        conn.execute("UPDATE message SET forgotten_at = now() WHERE content = '(typing)'")
        answer = _say(
            conn, "Hiking the ridge trail with my brother.", speaker="Lin Wei", at=t + timedelta(minutes=1)
        )
        _say(conn, "Sounds lovely.", speaker="Odile", at=t + timedelta(minutes=2))
        told = _say(conn, "The weekend market had plums.", speaker="Odile", at=t + timedelta(days=1))
        _say(conn, "Plums again!", speaker="Lin Wei", at=t + timedelta(days=1, minutes=1))
        ctx = _ctx(conn, "What are Lin Wei's plans for the weekend?")
        off = assemble_context(
            conn,
            A,
            "What are Lin Wei's plans for the weekend?",
            settings=Settings(recall={"replies": False}),
            now=NOW,
        )
        page = search_messages(conn, A, "plans for the weekend", settings=Settings())
    # the reply shares no word with the question; a statement ("market had plums") brings nothing
    assert _ids(ctx, "episodic") == [asked, answer, told]
    assert ctx.section("episodic").items[1].why == f"the reply to m-{asked}"
    assert _ids(off, "episodic") == [asked, told]
    assert [i.id for i in page.items] == [asked, told]  # active search pages what matched, no more


def test_a_reply_that_ranks_itself_is_placed_once(db: Database) -> None:
    t = datetime(2024, 5, 3, 12, tzinfo=UTC)
    with db.transaction() as conn:
        asked = _say(conn, "Which trail for the weekend?", speaker="Odile", at=t)
        answer = _say(conn, "The ridge trail this weekend.", speaker="Lin Wei", at=t + timedelta(minutes=1))
        ctx = _ctx(conn, "Which trail did Lin Wei pick for the weekend?")
    refs = [i.ref for i in ctx.section("episodic").items]
    assert sorted(refs) == sorted({f"m-{asked}", f"m-{answer}"}) and len(refs) == 2


def test_a_huge_reply_is_read_as_its_head_and_marked_cut(db: Database) -> None:
    from anima_pipeline.recall.assemble import first_stage
    from anima_pipeline.recall.episodic import READ_CHARS

    t = datetime(2024, 5, 3, 12, tzinfo=UTC)
    with db.transaction() as conn:
        asked = _say(conn, "Any plans for the weekend?", speaker="Odile", at=t)
        _say(
            conn,
            "Hiking. " + "We walk the ridge trail again. " * 100_000,
            speaker="Lin Wei",
            at=t + timedelta(minutes=1),
        )
        found = first_stage(conn, A, "plans for the weekend?", settings=Settings(), session_id=None, now=NOW)
        ctx = _ctx(conn, "plans for the weekend?")
    reply = found.messages[1]
    assert reply.why == f"the reply to m-{asked}"
    assert len(reply.text) == READ_CHARS + len(TRUNCATION_MARK) and reply.text.endswith(TRUNCATION_MARK)
    assert reply.truncated
    placed = ctx.section("episodic").items[1]
    assert placed.truncated and placed.text.startswith("Hiking.") and placed.chars <= Budgets().item_max


def test_a_huge_message_is_read_in_part_and_cut_as_if_read_whole(db: Database, monkeypatch) -> None:
    from anima_pipeline.recall import assemble
    from anima_pipeline.recall.assemble import first_stage
    from anima_pipeline.recall.episodic import READ_CHARS

    filler = "We walked the ridge trail again.\n"  # line breaks: the text as read is fenced after
    t = datetime(2024, 5, 3, 12, tzinfo=UTC)
    with db.transaction() as conn:
        texts = {
            "middle": filler * 3_000 + "The greyhound Biscuit slept all day. " + filler * 3_000,
            "end": filler * 6_000 + "Then the GREYHOUND ate.",
            "start": "Greyhounds nap. " + filler * 6_000,
            "short": "A greyhound show next week?",
        }
        ids = {k: _say(conn, v, at=t + timedelta(minutes=i)) for i, (k, v) in enumerate(texts.items())}
        question = "greyhound sleeping"  # no word of it in the filler
        found = first_stage(conn, A, question, settings=Settings(), session_id=None, now=NOW)
        ctx = _ctx(conn, question)
        monkeypatch.setattr(assemble, "READ_CHARS", 10_000_000)  # every message read whole
        whole = _ctx(conn, question)
    by_id = {i.id: i for i in found.messages}
    for name in ("middle", "end", "start"):
        read = by_id[ids[name]]  # at most READ_CHARS of it, and its marks
        assert len(read.text) <= READ_CHARS + 2 * len(TRUNCATION_MARK) and "reyhound" in read.text.lower()
        assert read.truncated
    assert by_id[ids["short"]].text == texts["short"] and not by_id[ids["short"]].truncated
    assert by_id[ids["end"]].text.endswith("GREYHOUND ate.") and by_id[ids["start"]].text.startswith("Greyh")
    # the lines placed are those of the messages read whole: the part read holds the cut's window
    assert ctx.rendered == whole.rendered
    assert {i.id for i in ctx.section("episodic").items} == set(ids.values())


# --- matching ----------------------------------------------------------------------------


def test_question_words_are_dropped_and_stems_come_from_postgres(db: Database) -> None:
    with db.transaction() as conn:
        cat = _add(conn, "Lin Wei's cat is called Mochi and sleeps on the piano.")
        _add(conn, "What a day: when it rains, they go where it is dry, and that is how it was.")
        painted = _add(conn, "Lin Wei painted a sunrise over the lake.")
        found = _ctx(conn, "What is the name of the cat?")
        nothing = _ctx(conn, "When did you go there, what was it and how?")
        stem = _ctx(conn, "Does Lin Wei paint?")
    assert _ids(found, "memories") == [cat] and "cat" in found.section("memories").items[0].why
    assert "go" not in plan_query("When did you go there, what was it and how?").words
    assert _ids(nothing, "memories") == [] and _ids(nothing, "episodic") == []
    assert _ids(stem, "memories")[0] == painted  # 'english' stems painted and paint alike


def test_a_misspelt_word_is_found_by_trigrams(db: Database) -> None:
    with db.transaction() as conn:
        mem = _add(conn, "Lin Wei booked a table at the new ramen restaurant downtown.")
        _add(conn, "Lin Wei repaired the bicycle on Sunday.")
        msg = _say(conn, "That restaurant had the best noodles in town.")
        ctx = _ctx(conn, "which resturant?")
    assert _ids(ctx, "memories") == [mem] and "resturant~" in ctx.section("memories").items[0].why
    assert _ids(ctx, "episodic") == [msg]


def test_a_word_the_anima_uses_is_never_corrected(db: Database) -> None:
    # "regards" is in no memory, but the anima wrote it: the memories are not searched as "rewards"
    with db.transaction() as conn:
        _add(conn, "Lin Wei collects loyalty rewards at the bakery.")
        said = _say(conn, "Kind regards from the whole team, see you Monday.")
        ctx = _ctx(conn, "regards")
    assert _ids(ctx, "memories") == [] and _ids(ctx, "episodic") == [said]
    assert not any("~" in i.why for i in ctx.items())


def test_the_vocabulary_follows_inserts_and_updates_per_anima(db: Database) -> None:
    with db.transaction() as conn:
        mem = _add(conn, "Lin Wei restores antique clocks.")
        _say(conn, "The harpsichord needs tuning.")
        _add(conn, "Bruno likes zucchini.", anima="bruno")
        conn.execute(
            "UPDATE semantic_memory SET content = 'Lin Wei restores antique barometers.' WHERE id = %s",
            (mem,),
        )
        words = {
            (r["anima_id"], r["word"])
            for r in conn.execute("SELECT anima_id, word FROM recall_word").fetchall()
        }
    assert {(A, "clocks"), (A, "barometers"), (A, "harpsichord"), ("bruno", "zucchini")} <= words
    assert (A, "zucchini") not in words and (A, "the") not in words  # per anima; short words left out


def test_a_chinese_question(db: Database) -> None:
    with db.transaction() as conn:
        hotpot = _add(conn, "林薇最喜欢吃火锅，尤其是麻辣锅底。")
        hangzhou = _add(conn, "林薇在杭州工作了三年。")
        _add(conn, "The weather in Hangzhou was rainy all week.")
        said = _say(conn, "周末我们去吃了一家新开的火锅店。")
        food = _ctx(conn, "林薇喜欢吃什么？")
        work = _ctx(conn, "她在杭州做什么")
        hot = _ctx(conn, "火锅店在哪里")
    assert _ids(food, "memories")[0] == hotpot and "喜欢" in food.section("memories").items[0].why
    assert _ids(work, "memories") == [hangzhou]
    assert _ids(hot, "episodic") == [said]


def test_a_date_question_prefers_dated_memories_and_summaries(db: Database) -> None:
    with db.transaction() as conn:
        _add(conn, "Odile loves the chess club she goes to.")
        dated = _add(conn, "Odile went to a chess club on 2023-05-07.")
        may = _add(conn, "Odile joined a pottery class.", observed=datetime(2023, 5, 20, tzinfo=UTC))
        _add(conn, "Odile joined a choir.", observed=datetime(2023, 9, 2, tzinfo=UTC))
        _summary(
            conn,
            "month",
            "2023-05-01",
            "2023-05-31",
            "May: Odile started pottery and kept going to her group.",
        )
        _summary(conn, "month", "2023-09-01", "2023-09-30", "September: choir practice every week.")
        when = _ctx(conn, "When did Odile go to the chess club?")
        in_may = _ctx(conn, "What did Odile join in May 2023?")
        plain = _ctx(conn, "What did Odile join?")
    assert _ids(when, "memories")[0] == dated and "(dated)" in when.section("memories").items[0].why
    assert _ids(in_may, "memories")[0] == may and in_may.periods == ["2023-05-01/2023-06-01"]
    assert _texts(in_may, "summaries")[0].startswith("May: Odile started pottery")
    assert in_may.section("summaries").chars_used <= Settings().recall.summary_chars
    assert plain.section("summaries").items == [] and not plain.asks_time


def test_a_question_of_a_time_alone_reads_that_time(db: Database) -> None:
    """Stop words and a time, no word to look for ("what did we do yesterday?"): the messages of
    that day, in a context and in active search (the probe of periods alone used to fail)."""
    yesterday = NOW - timedelta(days=1)
    with db.transaction() as conn:
        then = _say(conn, "We fixed the bike's chain together.", at=yesterday)
        _say(conn, "The harbour was foggy.", at=NOW - timedelta(days=9))
        for question in ("What did we do yesterday?", "yesterday", "2024-06-19"):
            ctx = _ctx(conn, question)
            assert ctx.periods == ["2024-06-19/2024-06-20"] and _ids(ctx, "episodic") == [then], question
            page = search_messages(conn, A, question, settings=Settings(), now=NOW)
            assert [i.id for i in page.items] == [then], question


def test_a_day_summary_quoting_a_message_dates_it_and_a_week_summary_does_not(db: Database) -> None:
    """A day's summary quotes what was said that day: its "yesterday" is dated from that day;
    a week's summary quotes several days, so it is shown as written."""
    with db.transaction() as conn:
        _summary(conn, "day", "2024-06-12", "2024-06-12", "- Odile: I sold the kayak yesterday.")
        _summary(conn, "week", "2024-06-10", "2024-06-16", "Odile sold the kayak yesterday, she said.")
        ctx = _ctx(conn, "When did Odile sell the kayak in June 2024?")
    texts = _texts(ctx, "summaries")
    assert "- Odile: I sold the kayak yesterday (2024-06-11)." in texts
    assert "Odile sold the kayak yesterday, she said." in texts


def test_relative_periods_are_read_against_now() -> None:
    today = date(2024, 6, 20)  # a Thursday
    (week,) = plan_query("what did we talk about last week", today).periods
    assert (week.start, week.end) == (date(2024, 6, 10), date(2024, 6, 17))
    (month,) = plan_query("上个月我们聊了什么", today).periods
    assert (month.start, month.end) == (date(2024, 5, 1), date(2024, 6, 1))
    (day,) = plan_query("What happened on 7 May 2023?", today).periods
    assert (day.start, day.end) == (date(2023, 5, 7), date(2023, 5, 8))
    words = plan_query("When did Odile go to the chess club?").words
    assert {"odile", "chess", "club"} <= set(words) and "go" not in words


@pytest.mark.parametrize(
    "written", ["2023-02-31", "31 February 2023", "9999-12-31", "December 9999", "9999-12"]
)
def test_a_date_that_is_no_period_is_left_out_of_the_plan(written: str) -> None:
    """Not a day ("31 February"), or a day whose period would end past year 9999 (it raised
    OverflowError out of every context and search naming it)."""
    plan = plan_query(f"what did Odile do on {written}?", date(2024, 6, 20))
    assert plan.periods == [] and "odile" in plan.words


# --- active search -----------------------------------------------------------------------


def test_active_search_pages_and_filters(db: Database) -> None:
    with db.transaction() as conn:
        ids = [
            _add(conn, f"Garden note {i}: tomatoes", observed=datetime(2024, 1, 1, tzinfo=UTC) + timedelta(i))
            for i in range(30)
        ]
        conn.execute("UPDATE semantic_memory SET type = 'preference' WHERE id = %s", (ids[3],))
        first = search_memories(conn, A, "tomatoes", settings=Settings(), limit=20)
        second = search_memories(conn, A, "tomatoes", settings=Settings(), limit=20, offset=20)
        prefs = search_memories(conn, A, "tomatoes", settings=Settings(), types=["preference"])
        early = search_memories(
            conn, A, "tomatoes", settings=Settings(), until=datetime(2024, 1, 3, tzinfo=UTC)
        )
        for i in range(5):
            _say(conn, f"tomatoes again {i}", speaker="Ana" if i % 2 else "Lin Wei")
        ana = search_messages(conn, A, "tomatoes", settings=Settings(), speaker="Ana")
    assert len(first.items) == 20 and first.has_more and len(second.items) == 10 and not second.has_more
    assert {i.id for i in first.items} | {i.id for i in second.items} == set(ids)
    assert [i.id for i in prefs.items] == [ids[3]]
    assert {i.id for i in early.items} == set(ids[:2])
    assert len(ana.items) == 2 and {i.speaker for i in ana.items} == {"Ana"}
    with pytest.raises(ValueError, match="limit"):
        search_memories(conn, A, "x", settings=Settings(), limit=0)


# --- indexes and read-only ---------------------------------------------------------------


class _Recording:
    """The real connection, noting every statement so the test can EXPLAIN it afterwards."""

    def __init__(self, conn) -> None:
        self.conn, self.statements = conn, []

    def execute(self, sql, params=None):
        self.statements.append((sql, params))
        return self.conn.execute(sql, params)

    def pipeline(self):
        return self.conn.pipeline()

    @property
    def info(self):
        return self.conn.info


def test_recall_reads_indexes_not_the_table(db: Database) -> None:
    words = "river mountain garden piano kitchen market harbour library station museum".split()
    with db.transaction() as conn:
        conn.execute(
            """INSERT INTO semantic_memory (anima_id, type, content, source_sessions)
               SELECT CASE WHEN g %% 10 = 0 THEN 'other' ELSE %s END, 'world',
                      'Note ' || g || ' about the ' || (%s::text[])[1 + g %% 10] || ' and ' ||
                      (%s::text[])[1 + (g / 10) %% 10] || ' ' || md5(g::text), ARRAY['aria:s' || g %% 50]
               FROM generate_series(1, 30000) g""",
            (A, words, words),
        )
        rare = _add(conn, "Lin Wei keeps a pet axolotl named Pip.")
        conn.execute(
            """INSERT INTO conversation (id, anima_id, created_at, updated_at) VALUES ('aria:big', %s, now(), now())""",
            (A,),
        )
        conn.execute(
            """INSERT INTO message (anima_id, conversation_id, external_id, role, speaker, content, created_at)
               SELECT %s, 'aria:big', 'm' || g, 'user', 'Lin Wei', 'We talked about the ' ||
                      (%s::text[])[1 + g %% 10] || ' ' || md5(g::text), now() - g * interval '1 minute'
               FROM generate_series(1, 30000) g""",
            (A, words),
        )
    with db.transaction() as conn:
        conn.execute("ANALYZE semantic_memory")
        conn.execute("ANALYZE message")
    with db.transaction() as conn:
        rec = _Recording(conn)
        ctx = assemble_context(rec, A, "What is the name of Lin Wei's axolotl?", settings=Settings(), now=NOW)
        plans = [
            "\n".join(r["QUERY PLAN"] for r in conn.execute("EXPLAIN " + sql, params).fetchall())
            for sql, params in rec.statements
        ]
    assert _ids(ctx, "memories")[0] == rare
    touching = [p for p in plans if "semantic_memory" in p or "on message" in p]
    assert len(touching) >= 4, plans
    for plan in touching:
        assert "Seq Scan on semantic_memory" not in plan and "Seq Scan on message" not in plan, plan
    assert any("semantic_memory_fts_idx" in p for p in plans) and any("message_fts_idx" in p for p in plans)
    # term statistics are ANALYZE's: a word in 3,000 of the rows brings no candidates of its own
    with db.transaction() as conn:
        assert "'river'" in common_lexemes(conn, "semantic_memory")
        assert "'axolotl'" not in common_lexemes(conn, "semantic_memory")
        both = assemble_context(conn, A, "the axolotl by the river", settings=Settings(), now=NOW)
    assert _ids(both, "memories")[0] == rare


def test_the_common_stems_go_as_one_literal_that_reads_back_as_the_list(db: Database) -> None:
    from anima_pipeline.store.recall_queries import text_array

    stems = ["'it''s'", 'a"b', "c\\d", "'x'", "two words", "{brace}", "", "'日本'"]
    with db.transaction() as conn:
        for items in (stems, []):
            read = conn.execute("SELECT %s::text[] AS a", (text_array(items),)).fetchone()["a"]
            assert read == items


def test_a_probe_names_only_the_filters_given_and_reads_the_same_rows(db: Database) -> None:
    from itertools import product

    from anima_pipeline.store.recall_queries import SOURCES

    t = datetime(2024, 5, 3, 12, tzinfo=UTC)
    with db.transaction() as conn:
        for i, (conv, speaker) in enumerate(product(("aria:c1", "aria:c2", "aria:c3"), ("Lin Wei", "Ana"))):
            _say(conn, f"tea note {i}", conv=conv, speaker=speaker, at=t + timedelta(days=i))
            _add(conn, f"tea fact {i}", sources=(conv,), observed=t + timedelta(days=i))
        conn.execute(
            "UPDATE semantic_memory SET type = 'preference' WHERE content LIKE '%%1' OR content LIKE '%%4'"
        )
        conn.execute(
            "INSERT INTO semantic_memory (anima_id, type, content, source_sessions) VALUES (%s, 'world', 'tea', '{}')",
            (A,),
        )
        filters = {
            "message": {
                "exclude_sessions": [[], ["aria:c2"]],
                "conversation": [None, "aria:c1"],
                "speaker": [None, "Ana"],
                "since": [None, t + timedelta(days=2)],
                "until": [None, t + timedelta(days=4)],
            },
            "semantic_memory": {
                "exclude_sessions": [[], ["aria:c2"]],
                "types": [None, ["preference"]],
                "since": [None, t + timedelta(days=2)],
                "until": [None, t + timedelta(days=4)],
            },
        }
        for table, options in filters.items():
            source = SOURCES[table]
            for values in product(*options.values()):
                params = dict(zip(options, values, strict=True), anima=A)
                given = source.filter.given(params)
                full, short = (
                    {r["id"] for r in conn.execute(f"SELECT x.id FROM {table} x WHERE {where}", params)}
                    for where in (source.filter.full, given)
                )
                assert short == full, (table, params)
                named = [c.param for c in source.filter.clauses if f"%({c.param})s" in given]
                assert named == [k for k, v in params.items() if k != "anima" and v], (table, params)


def test_a_stop_word_and_a_common_stem_are_learnt_and_sent_no_more(db: Database, monkeypatch) -> None:
    from anima_pipeline.recall import ranking
    from anima_pipeline.store import recall_queries

    sent: list[str] = []
    real = recall_queries.send_probe

    def spy(conn, table, params, words, periods, tz, idle=None):
        sent.extend(w for w in words if w not in (idle or {}))
        return real(conn, table, params, words, periods, tz, idle)

    monkeypatch.setattr(recall_queries, "send_probe", spy)
    monkeypatch.setattr(ranking, "_stems", {})
    common = ranking.CommonLexemes(0.0, frozenset({"'green'"}), "{'green'}")
    monkeypatch.setattr(ranking, "read_common", lambda conn, table: common)
    with db.transaction() as conn:
        _add(conn, "Lin Wei drinks green tea at four.")
        _say(conn, "Green tea again, and the kettle is on.")
        first = _ctx(conn, "What did the green tea taste like?")
        learnt = ranking.word_stems(conn)
        stop = {w for w, q in learnt.items() if q == ""}
        sent.clear()
        again = _ctx(conn, "What did the green tea taste like?")
    assert {"what", "did", "the"} <= stop and not stop & {"tea", "taste", "like", "green"}
    assert learnt["green"] == "'green'" and learnt["tea"] == "'tea'"
    # the stop words and the common stem are not sent again; the rarer words are
    assert not set(sent) & (stop | {"green"}) and "tea" in sent
    assert again.rendered == first.rendered and _ids(again, "memories") and _ids(again, "episodic")


def test_recall_writes_nothing(db: Database) -> None:
    with db.transaction() as conn:
        _add(conn, "Lin Wei likes green tea.", pinned=True)
        _add(conn, "Lin Wei drinks tea at four.")
        _say(conn, "Tea time!")
    with db.transaction() as conn:
        conn.execute("SET TRANSACTION READ ONLY")  # any write would raise here
        before = conn.execute("SELECT pg_current_snapshot()::text AS s").fetchone()
        ctx = _ctx(conn, "When do you drink tea, last week?")
        search_memories(conn, A, "tea", settings=Settings())
        search_messages(conn, A, "tea", settings=Settings())
        wrote = conn.execute("SELECT pg_current_xact_id_if_assigned() AS x").fetchone()["x"]
    assert before and wrote is None  # no transaction id was ever needed: nothing was written
    assert ctx.section("memories").items and ctx.section("episodic").items


def test_a_cut_ends_on_a_sentence_and_a_date_shows_once() -> None:
    from anima_pipeline.recall.render import cut, memory_item, message_item

    at = datetime(2026, 11, 16, 12, tzinfo=UTC)
    row = {"id": 1, "type": "experience", "source_sessions": [], "pinned": False, "observed_at": at}
    dated = memory_item(
        {**row, "content": "Lin slept badly and felt restless (2026-11-16)."}, score=0, why="", tz=UTC
    )
    assert dated.line.count("2026-11-16") == 1
    plain = memory_item({**row, "content": "Lin slept badly."}, score=0, why="", tz=UTC)
    assert plain.line.endswith("(2026-11-16)")
    text = (
        "The ferry left at dawn and the sea was calm. " * 3 + "Then the wind rose and " + "waves grew " * 20
    )
    msg = {
        "id": 2,
        "content": text,
        "created_at": at,
        "speaker": "Lin",
        "role": "user",
        "conversation_id": "c",
    }
    fitted = cut(message_item(msg, score=0, why="", tz=UTC), 160, ["ferry"])
    assert fitted is not None and fitted.chars <= 160 and fitted.text.removesuffix(" …").endswith("calm.")


def test_the_candidates_ranked_follow_the_recall_budget(db: Database) -> None:
    from anima_pipeline.recall.assemble import CHARS_PER_CANDIDATE, MIN_RANKED, ranked_for

    t = datetime(2024, 5, 3, 12, tzinfo=UTC)
    with db.transaction() as conn:
        for i in range(80):  # more than a fixed list of 60 would rank
            _say(conn, f"Tea note {i}.", at=t + timedelta(minutes=i))
        small, large = (
            assemble_context(conn, A, "tea", settings=Settings(), now=NOW, budgets=Budgets(recall=recall))
            for recall in (2000, 8000)
        )
    assert len(_ids(small, "episodic")) <= ranked_for(Budgets())  # a list no longer than it ranks
    assert len(_ids(large, "episodic")) == 80  # a larger budget ranks (and places) them all

    assert ranked_for(Budgets()) == 32  # the default 2,000 characters
    assert ranked_for(Budgets(recall=8000)) == 125
    assert ranked_for(Budgets(recall=100)) == MIN_RANKED
    # one section could take the whole budget in lines of the shortest kind placed
    assert ranked_for(Budgets()) * CHARS_PER_CANDIDATE >= Budgets().recall
