"""Offline light-sleep heuristics on small synthetic sentences (English and Chinese).

Every sentence here is written for these tests; no evaluation data is used.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone
from itertools import count

import pytest

from anima_pipeline.night.steps.light.anchors import detect_anchors
from anima_pipeline.night.steps.light.dedup import dedup_against
from anima_pipeline.night.steps.light.facts import extract_facts
from anima_pipeline.night.steps.light.records import FactCandidate, Utterance
from anima_pipeline.night.steps.light.significance import narrative_significance
from anima_pipeline.night.steps.light.small_talk import is_small_talk
from anima_pipeline.text.dates import resolve_relative_dates
from anima_pipeline.text.words import normalize_key

LOCAL = timezone(timedelta(hours=8))
MONDAY = datetime(2023, 5, 8, 20, 0, tzinfo=LOCAL)  # 2023-05-08 is a Monday
_ids = count()


def say(
    role: str, speaker: str | None, text: str, conversation: str = "c1", at: datetime = MONDAY
) -> Utterance:
    n = next(_ids)
    return Utterance(conversation, f"m{n}", role, speaker, text, at + timedelta(seconds=30 * n))


def contents(utterances: list[Utterance]) -> list[str]:
    return [f.content for f in extract_facts(utterances)]


def candidate(content: str, ftype: str = "experience") -> FactCandidate:
    return FactCandidate(ftype, content, MONDAY, "c1", 0.7, normalize_key(content))


# --- relative dates -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I went hiking yesterday.", "I went hiking on 2023-05-07."),
        ("We moved here last year.", "We moved here in 2022."),
        ("She starts school next month.", "She starts school in 2023-06."),
        ("I joined a choir last week.", "I joined a choir in the week before 2023-05-08 (May 2023)."),
        ("I visited my aunt two days ago.", "I visited my aunt on 2023-05-06."),
        ("I finished the race last Friday.", "I finished the race on 2023-05-05."),
        ("We are going camping this weekend.", "We are going camping on the weekend of 2023-05-08."),
        ("I bought it on 3 March 2021.", "I bought it on 3 March 2021."),
    ],
)
def test_english_relative_dates_become_absolute(text: str, expected: str) -> None:
    assert resolve_relative_dates(text, date(2023, 5, 8)) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I graduated last May.", "I graduated in 2022-05."),  # said in May: the May before
        ("I graduated last April.", "I graduated in 2023-04."),
        ("This past March was hard.", "2023-03 was hard."),
        ("Back in April I ran a race.", "Back in 2023-04 I ran a race."),
        ("I moved in early March.", "I moved in early 2023-03."),
        ("I have lived here since January.", "I have lived here since 2023-01."),
        ("We went camping in August.", "We went camping in 2022-08."),  # a past August: last year's
        ("We will go camping in August.", "We will go camping in 2023-08."),
        ("We will go back in April.", "We will go back in 2024-04."),
        ("We always go camping in August.", "We always go camping in August."),  # every August
        ("She was born in March.", "She was born in March."),  # a birthday: no year to guess
        ("At the end of last month I quit.", "At the end of 2023-04 I quit."),
        ("Most of last year I was away.", "Most of 2022 I was away."),
        ("May I ask where you went in May 2021?", "May I ask where you went in May 2021?"),
        ("We met on 5 May and again on May 7.", "We met on 5 May and again on May 7."),
        ("April said she liked June best.", "April said she liked June best."),
        ("I got a gift from June after April left.", "I got a gift from June after April left."),  # names
        ("We met on the 5th of May.", "We met on the 5th of May."),
        ("Until March I worked there.", "Until 2023-03 I worked there."),
    ],
)
def test_a_month_named_without_its_year_gets_one(text: str, expected: str) -> None:
    assert resolve_relative_dates(text, date(2023, 5, 8)) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("我昨天去了超市。", "我2023-05-07去了超市。"),
        ("去年我换了工作。", "2022年我换了工作。"),
        ("我前天感冒了。", "我2023-05-06感冒了。"),
        ("我明天要考试。", "我2023-05-09要考试。"),
        ("上个月我搬家了。", "2023-04我搬家了。"),
        ("我上周五看了电影。", "我2023-05-05看了电影。"),
        ("以前年轻的时候我很瘦。", "以前年轻的时候我很瘦。"),
    ],
)
def test_chinese_relative_dates_become_absolute(text: str, expected: str) -> None:
    assert resolve_relative_dates(text, date(2023, 5, 8)) == expected


# --- fact extraction ------------------------------------------------------------------------


def test_preference_is_rewritten_into_the_speakers_name() -> None:
    facts = extract_facts([say("user", "Priya", "Honestly, I really love salsa dancing and spicy ramen.")])
    assert [(f.type, f.content) for f in facts] == [
        ("preference", "Priya loves salsa dancing and spicy ramen.")
    ]
    assert facts[0].key == "priya loves salsa dancing and spicy ramen"


def test_plan_keeps_its_resolved_date() -> None:
    [fact] = extract_facts([say("user", "Tomas", "I'm planning to visit Lisbon next month with my brother.")])
    assert fact.type == "experience"
    assert fact.content == "Tomas is planning to visit Lisbon in 2023-06 with their brother."


def test_event_gets_its_date() -> None:
    [fact] = extract_facts([say("user", "Ines", "Wow, I ran my first half marathon yesterday!")])
    assert "Ines ran" in fact.content and "on 2023-05-07" in fact.content
    assert fact.observed_at.date() == date(2023, 5, 8)


def test_pet_name_is_a_world_fact() -> None:
    texts = contents([say("user", "Omar", "I adopted a kitten last week. Her name is Pickle.")])
    assert "Omar adopted a kitten in the week before 2023-05-08 (May 2023)." in texts
    assert "Omar's kitten is named Pickle." in texts


def test_statements_by_the_assistant_about_the_user_count() -> None:
    day = [
        say("user", "Lena", "Hi there!"),
        say("assistant", "Kai", "You mentioned you love growing tomatoes on your balcony."),
    ]
    assert "Lena loves growing tomatoes on Lena's balcony." in contents(day)


def test_chinese_facts_stay_chinese() -> None:
    day = [
        say("user", "林夏", "你好，我叫林夏，很高兴认识你。"),
        say("assistant", "AI", "你好林夏，有什么可以帮你的吗？"),
        say("user", "林夏", "我很喜欢画水彩画。我昨天去了植物园。我养了一只猫叫豆豆。"),
    ]
    facts = {f.content: f.type for f in extract_facts(day)}
    assert facts["用户的名字是林夏。"] == "world"
    assert facts["林夏很喜欢画水彩画。"] == "preference"
    assert facts["林夏养了一只猫叫豆豆。"] == "world"
    assert any(c.startswith("林夏2023-05-07去了植物园") for c in facts)


def test_questions_greetings_and_service_talk_are_not_facts() -> None:
    day = [
        say("user", "Ana", "Do you like jazz?"),
        say("assistant", "AI", "I can recommend some albums if you want. Thanks for asking!"),
        say("user", "Ana", "I adopted a rescue greyhound on Saturday."),
    ]
    assert contents(day) == ["Ana adopted a rescue greyhound on 2023-05-06."]


def test_small_talk_day_writes_nothing() -> None:
    day = [
        say("user", "Ana", "Hi! How are you?"),
        say("assistant", "AI", "Good, thanks! Nice to meet you."),
        say("user", "Ana", "Bye, talk later!"),
        say("user", "Ana", "你好！晚安。"),
    ]
    assert is_small_talk(day)
    assert extract_facts(day) == []
    assert not is_small_talk([say("user", "Ana", "I started a new job at the bakery.")])


def test_twins_within_a_day_are_kept_once() -> None:
    day = [
        say("user", "Bo", "I love hiking in the mountains."),
        say("user", "Bo", "I love hiking in the mountains!"),
    ]
    assert contents(day) == ["Bo loves hiking in the mountains."]


# --- dedup against existing memories ---------------------------------------------------------


def test_twin_of_an_existing_memory_is_skipped() -> None:
    [decision] = dedup_against(
        [candidate("Bo loves hiking in the mountains.")], [(7, "Bo loves hiking in the mountains")]
    )
    assert (decision.action, decision.memory_id) == ("skip", 7)


def test_fuller_version_updates_the_existing_memory() -> None:
    fuller = candidate("Bo loves hiking in the Alps with their sister every summer.")
    [decision] = dedup_against([fuller], [(7, "Bo loves hiking in the Alps.")])
    assert (decision.action, decision.memory_id, decision.content) == ("update", 7, fuller.content)


def test_unrelated_candidate_is_created_and_near_duplicates_are_not() -> None:
    new = candidate("Bo adopted a parrot named Kiwi.")
    echo = candidate("Bo adopted a parrot named Kiwi!")
    decisions = dedup_against([new, echo], [(7, "Bo loves hiking in the Alps.")])
    assert [d.action for d in decisions] == ["create", "skip"]


def _full_scan_dedup(candidates: list[FactCandidate], existing: list[tuple[int, str]]) -> list[tuple]:
    """The rule of `dedup_against` without its filters: each candidate against every entry
    known so far, in order, the highest relation winning (the first of equals)."""
    from anima_pipeline.night.steps.light.dedup import _Known, _relation, _tokens

    known = [_Known(mid, content, _tokens(content), None) for mid, content in existing]
    out: list[tuple] = []
    for cand in candidates:
        tokens = _tokens(cand.content)
        best, rank, kind = None, 0, ""
        for entry in known:
            r, k = _relation(cand.key, tokens, entry)
            if r > rank:
                best, rank, kind = entry, r, k
        if best is None:
            known.append(_Known(None, cand.content, tokens, len(out)))
            out.append(("create", cand.content, None))
        elif kind != "fuller":
            out.append(("skip", cand.content, best.memory_id))
        else:
            if best.decision is not None:
                out[best.decision] = ("skip", out[best.decision][1], best.memory_id)
            action = "update" if best.memory_id is not None else "create"
            best.content, best.tokens, best.decision = cand.content, tokens, len(out)
            best.key = normalize_key(cand.content)
            out.append((action, cand.content, best.memory_id))
    return out


@pytest.mark.parametrize("seed", range(16))
def test_dedup_decides_as_a_full_scan_would(seed: int) -> None:
    """The prefix index and the quick share check only skip pairs that cannot be related:
    random batches over a small vocabulary (many near twins, fuller and contained versions)
    get the decisions of the plain scan; every other batch draws from a larger vocabulary with
    a few common words, where the positions of shared words decide which pairs are compared."""
    import random

    rng = random.Random(seed)
    vocab = "Bo Mia Lisbon garden parrot sister hiking Alps summer coffee bakery train 2023 May".split()
    if seed % 2:
        vocab += [f"word{k}" for k in range(30)]
    texts = [
        " ".join(rng.sample(vocab[: rng.randint(9, len(vocab))], rng.randint(2, 9))) + "." for _ in range(120)
    ]
    existing = [(i, t) for i, t in enumerate(texts[:30])]
    batch = [candidate(t) for t in texts[30:]]
    got = [(d.action, d.candidate.content, d.memory_id) for d in dedup_against(batch, existing)]
    assert got == _full_scan_dedup(batch, existing)
    assert {a for a, _, _ in got} >= {"create", "skip"}


# --- anchors and significance ------------------------------------------------------------------


def test_emotional_turning_point_gives_anchors() -> None:
    day = [
        say("user", "Mia", "I'm so sad and lonely since my grandmother passed away."),
        say("assistant", "AI", "That sounds really hard."),
        say("user", "Mia", "But today my sister visited and I'm so happy and grateful!"),
    ]
    anchors = detect_anchors(day)
    assert 1 <= len(anchors) <= 3
    turning = [a for a in anchors if "Turning point" in a.note]
    assert turning and turning[0].valence > 0 and turning[0].emotion in ("joy", "gratitude")
    assert all(-1 <= a.valence <= 1 and 0 <= a.arousal <= 1 and 0 <= a.intensity <= 1 for a in anchors)


def test_neutral_chat_gives_no_anchor() -> None:
    day = [
        say("user", "Mia", "I bought a new desk lamp for the study."),
        say("assistant", "AI", "Which model did you pick?"),
        say("user", "Mia", "A small black one with a clamp."),
    ]
    assert detect_anchors(day) == []


def test_chinese_anchor() -> None:
    day = [
        say("user", "林夏", "我最近特别焦虑，工作压力很大。"),
        say("user", "林夏", "不过今天考试通过了，我非常开心！"),
    ]
    assert {a.emotion for a in detect_anchors(day)} & {"joy", "anxiety"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("I graduated from nursing school!", "milestone"),
        ("We got married in June.", "milestone"),
        ("我第一次坐飞机。", "milestone"),
        ("I quit my job and decided to travel.", "turning_point"),
        ("她上个月和男朋友分手了。", "turning_point"),
        ("We went to a jazz concert.", "notable"),
        ("I had toast for breakfast.", None),
        ("Did you graduate?", None),
        ("I haven't graduated yet.", None),
    ],
)
def test_narrative_significance(text: str, expected: str | None) -> None:
    assert narrative_significance(text) == expected


# --- regressions: assistant remarks, fragments, openers, small talk, dates, Chinese, types -------------

THURSDAY = datetime(2026, 11, 19, 21, 0, tzinfo=LOCAL)  # 2026-11-19 is a Thursday


def test_assistant_opinions_forecasts_and_pleasantries_are_not_memories() -> None:
    day = [
        say("user", "Ravi", "I teach chemistry at a high school in Pune."),
        say("assistant", "Nova", "Chemistry never sounds dull when experiments go wrong!"),
        say("assistant", "Nova", "Tomorrow looks like drizzle around 7am at 11°C, clearing by noon."),
        say("assistant", "Nova", "Your nephews are lucky to have a volcano-building uncle."),
        say("assistant", "Nova", "Good night Ravi, and give Biscuit a scratch for me."),
        say("assistant", "Nova", "You mentioned your sister lives in Goa."),
    ]
    texts = contents(day)
    assert not any(t.startswith("Nova") for t in texts), texts
    assert any("Ravi's sister lives in Goa" in t for t in texts), texts


def test_reported_fragments_and_meta_remarks_are_dropped_and_casing_is_natural() -> None:
    day = [
        say("user", "Ravi", "Mostly alone along the canal path."),
        say("user", "Ravi", "Oh wait, it's past midnight, so it's tomorrow now."),
        say("user", "Ravi", "Like the weekend is too short to waste indoors."),
        say("user", "Ravi", "Grandpa's scan results are clear."),
    ]
    texts = contents(day)
    assert texts == ["Ravi's grandpa's scan results are clear."], texts


def test_leading_discourse_markers_and_subjectless_heads_are_stripped() -> None:
    day = [
        say("user", "Ravi", "No, I'm from Kochi, a port city in Kerala."),
        say("user", "Ravi", "Confession: I quit the orchestra last month."),
        say("user", "Ravi", "Then I will cycle to the lab at 8 tomorrow."),
        say("user", "Ravi", "About six years; the pay is decent but I'm getting restless at the bank."),
    ]
    texts = contents(day)
    assert "Ravi is from Kochi, a port city in Kerala." in texts
    assert any(t.startswith("Ravi quit the orchestra in 2023-04") for t in texts), texts
    assert any(t.startswith("Ravi will cycle to the lab") for t in texts), texts
    assert any(t.startswith("The pay is decent but Ravi is getting restless") for t in texts), texts
    assert not any(t.startswith(("No,", "Confession", "Then", "About six")) for t in texts)


def test_greetings_apologies_and_assistant_views_are_small_talk() -> None:
    day = [
        say("user", "Ravi", "I adopted a beagle called Pepper."),
        say("assistant", "Nova", "Oh no, Ravi, I'm so sorry."),
        say("assistant", "Nova", "Wow, Ravi; that's a bold step, and I think a wise one."),
        say("assistant", "Nova", "Sleep well tonight, Ravi."),
    ]
    assert contents(day) == ["Ravi adopted a beagle called Pepper (2023-05-08)."]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Yes, it's officially Thursday the 19th.", "Yes, it's officially 2026-11-19."),
        ("It's Thursday now.", "It's 2026-11-19 now."),
        ("I'll be back Friday night.", "I'll be back on 2026-11-20 night."),
        ("Tomorrow looks rainy.", "2026-11-20 looks rainy."),
        ("I'm skipping tonight's dinner.", "I'm skipping 2026-11-19's dinner."),
        ("We met on Monday the 16th.", "We met on 2026-11-16."),
    ],
)
def test_weekday_with_day_of_month_and_present_weekday(text: str, expected: str) -> None:
    assert resolve_relative_dates(text, THURSDAY.date()) == expected


def test_chinese_titles_dates_and_requests() -> None:
    day = [
        say("user", "Lin Wei", "我昨天去了杭州西湖。"),
        say("user", "Lin Wei", "我前天买了一本《我与地坛》，很喜欢。"),
        say("user", "Lin Wei", "跟你说说我的工作吧。"),
        say("user", "Lin Wei", "你给我推荐几部好看的电影。"),
    ]
    texts = contents(day)
    assert "Lin Wei2023-05-07去了杭州西湖。" in texts or "Lin Wei 2023-05-07去了杭州西湖。" in texts, texts
    assert all(t.count("2023-05-07") <= 1 for t in texts)
    assert any("《我与地坛》" in t for t in texts), texts
    assert not any("推荐" in t or "说说" in t for t in texts), texts
    glued = contents([say("user", "Lin Wei", "昨天我去了一家新开的书店，买了两本小说。")])
    assert glued and glued[0].startswith("2023-05-07，Lin Wei去了"), glued


@pytest.mark.parametrize(
    ("text", "ftype"),
    [
        ("My manager is Dana Kim, she used to work at a bank.", "world"),
        ("I'm from Kochi, a port city in Kerala.", "world"),
        ("I really love steamed dumplings with vinegar.", "preference"),
        ("I think remote work makes teams lazier.", "opinion"),
        ("I ran a 10k race along the river on Saturday.", "experience"),
        ("我爸爸叫林大山，在老家开了一家小面馆。", "world"),
        ("我养了一只橘猫叫团子。", "world"),
        ("我特别喜欢吃麻辣火锅。", "preference"),
        ("我觉得远程办公效率更高。", "opinion"),
        ("我上周六去爬了泰山。", "experience"),
    ],
)
def test_fact_types_in_both_languages(text: str, ftype: str) -> None:
    facts = extract_facts([say("user", "Ravi", text)])
    assert [f.type for f in facts] == [ftype], [(f.type, f.content) for f in facts]


def test_the_user_is_named_not_they() -> None:
    [fact] = extract_facts([say("user", "Ravi", "I work at a lab in Pune and I'm a data engineer there.")])
    assert "they" not in fact.content.split()
    assert fact.content.count("Ravi") == 2


# --- regressions: dates, clauses, short events, praise --------------------------------


@pytest.mark.parametrize(
    ("text", "said_on", "expected"),
    [
        (
            "I joined a choir last week.",
            date(2021, 3, 4),
            "in the week before 2021-03-04 (late February or early March 2021)",
        ),
        ("We fly next week.", date(2023, 5, 8), "in the week after 2023-05-08 (May 2023)"),
        ("I've had it for 4 years now.", date(2021, 11, 15), "for 4 years now (since 2017)"),
        ("Nine years now, and I still knit.", date(2020, 6, 2), "Nine years now (since 2011)"),
        ("We've lived here six months now.", date(2023, 5, 8), "six months now (since 2022-11)"),
    ],
)
def test_weeks_carry_their_month_and_durations_their_start(text: str, said_on: date, expected: str) -> None:
    assert expected in resolve_relative_dates(text, said_on)


def test_pet_name_keeps_the_rest_of_the_sentence_and_drops_the_answer_fragment() -> None:
    texts = contents(
        [say("user", "Ana", "With my dog! His name is Biscuit, he's a grey whippet, five years old.")]
    )
    assert texts == ["Ana's dog is named Biscuit; he is a grey whippet, five years old."]


def test_a_second_i_in_one_clause_reads_they() -> None:
    texts = contents([say("user", "Ana", "I decided I'm not moving to Berlin after all.")])
    assert texts == ["Ana decided they are not moving to Berlin after all (2023-05-08)."]


def test_adverb_before_a_past_verb_is_not_conjugated() -> None:
    texts = contents([say("user", "Ana", "Mile nine was brutal, I almost walked home from the park.")])
    assert any("Ana almost walked home" in t for t in texts)


def test_assistant_job_title_is_not_an_ai_disclaimer() -> None:
    texts = contents([say("user", "Ana", "Since March I'm an assistant manager at the bakery.")])
    assert any("assistant manager" in t for t in texts)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("We baked pizza!", "Ana and others baked pizza (2023-05-08)."),
        (
            "I swim laps at the city pool twice a week.",
            "Ana swims laps at the city pool twice a week (2023-05-08).",
        ),
    ],
)
def test_short_concrete_events_and_habits_are_kept(text: str, expected: str) -> None:
    assert expected in contents([say("user", "Ana", text)])


@pytest.mark.parametrize(
    "text",
    [
        "I won't quit, no matter what.",
        "I got it, that makes sense now.",
        "Because I was scared it was a mistake.",
        "Let's make some great memories at the lake.",
    ],
)
def test_vague_short_sentences_and_proposals_stay_out(text: str) -> None:
    assert contents([say("user", "Ana", text)]) == []


@pytest.mark.parametrize(
    "text",
    [
        "You're gonna kill it at the piano recital in Vienna.",
        "You've come a long way since your first race in Lyon.",
        "You really showed your resilience during the Tokyo move.",
    ],
)
def test_praise_of_the_listener_is_no_fact(text: str) -> None:
    assert contents([say("user", "Ana", "I went to Lisbon in March."), say("assistant", "Ben", text)]) == [
        "Ana went to Lisbon in 2023-03."
    ]


def test_announcement_head_is_dropped_and_the_news_kept() -> None:
    texts = contents(
        [say("user", "Ana", "I wanted to let you know that I signed up for a woodworking class.")]
    )
    assert texts == ["Ana signed up for a woodworking class (2023-05-08)."]


def test_one_sentence_splitter_for_messages_and_memories() -> None:
    """text/sentences.py splits both: a typed message at line breaks and before a
    lower-case word, with its ';' clauses whole; a written memory only before a capital, and
    at ';' (deep sleep splits compound facts there). Abbreviations and initials hold in both."""
    from anima_pipeline.text.sentences import split_sentences

    text = "Nah, I haven't. i went out; it rained\nAnd then Dr. Lee came."
    assert split_sentences(text, message=True) == [
        "Nah, I haven't.",
        "i went out; it rained",
        "And then Dr. Lee came.",
    ]
    assert split_sentences(text) == ["Nah, I haven't. i went out;", "it rained\nAnd then Dr. Lee came."]
    # "haven't." is no initial "t.", "J." and "R." are
    assert split_sentences("I haven't. You did. J. R. Smith came.") == [
        "I haven't.",
        "You did.",
        "J. R. Smith came.",
    ]
    assert split_sentences("好的!我们走吧。」然后呢", message=True) == ["好的!", "我们走吧。」", "然后呢"]


def test_a_shouted_message_is_remembered_in_the_case_it_would_be_written_in() -> None:
    day = [
        say("assistant", "Quill", "Good luck tomorrow, Ravi!"),
        say("user", "Ravi", "QUILL I DID IT!!! First half marathon, finished in 2:04:37!"),
        say("user", "Ravi", "The medal came from NASA and the BBC filmed it."),
    ]
    texts = contents(day)
    assert "Quill, Ravi did it (2023-05-08)." in texts, texts  # was "QUILL Ravi DID IT (2023-05-08)."
    assert not any(w.isupper() and len(w) > 1 for t in texts for w in t.split() if w not in ("NASA", "BBC"))
    assert any("NASA" in t and "BBC" in t for t in texts), texts  # a few capitals are not shouting


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (
            "Lin决定不喝咖啡了，从2026-11-19开始改喝乌龙茶。",
            "Lin决定不喝咖啡了…",
        ),  # the clause, not "从2026-11-"
        ("Lin从2026-11-19开始改喝乌龙茶牙医也这么建议而且我发现", "Lin从2026-11-19开始改喝乌龙茶牙医也…"),
        (
            "我们一起去了很远的地方看了很多东西然后在2026-11-19回家",
            "我们一起去了很远的地方看了很多东西然后在…",
        ),
        (
            "今天我们去了很远的地方看了很多东西然后在2026-11-19回家了",
            "今天我们去了很远的地方看了很多东西然后在…",
        ),
        ("我决定辞职了。", "我决定辞职了"),
        (
            "Ravi is running his first half marathon on 2023-05-08 in Leeds.",
            "Ravi is running his first half marathon on 2023-05-08…",
        ),
    ],
)
def test_a_narrative_title_is_cut_at_a_word_or_clause_never_inside_a_date(
    content: str, expected: str
) -> None:
    from anima_pipeline.night.steps.light.plan import title

    assert title(content) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "The day before yesterday and yesterday.",
            "The day before yesterday (2023-05-06) and yesterday (2023-05-07).",
        ),
        ("Since last year I paint.", "Since last year (2022) I paint."),
        ("Last night was fun.", "Last night (the night of 2023-05-07) was fun."),
        (
            "Last week I ran a race.",
            "Last week (the week before 2023-05-08, May 2023) I ran a race.",
        ),
        ("Friends for seven years now.", "Friends for seven years now (since 2016)."),
        ("I got it 10 years ago!", "I got it 10 years ago (2013)!"),
        ("上个月我去了北京，昨天回来。", "上个月（2023-04）我去了北京，昨天（2023-05-07）回来。"),
        ("Nothing timely here.", "Nothing timely here."),
        ("I ran yesterday", "I ran yesterday (2023-05-07)"),  # at the end of the text
        # dated already: the same text again (a quoted line, a message pasted back)
        ("I ran yesterday (2023-05-07), friends for 3 years now (since 2020).", None),
        # the day it was said is on the line already
        (
            "Today I ran, tonight I rest; yesterday I swam.",
            "Today I ran, tonight I rest; yesterday (2023-05-07) I swam.",
        ),
        ("今天我去了公园。", "今天我去了公园。"),
        (
            "我在玩《明日方舟》，明天再玩。",
            "我在玩《明日方舟》，明天（2023-05-09）再玩。",
        ),  # a title is a name
    ],
)
def test_annotated_dates_keep_each_phrase_once_and_say_its_date(text: str, expected: str | None) -> None:
    """`annotate` keeps the words as said and adds the date the rewrite would write, each
    phrase once (the day before yesterday is not yesterday again)."""
    assert resolve_relative_dates(text, date(2023, 5, 8), annotate=True) == (expected or text)


def test_annotating_searches_a_sentence_only_with_the_rules_its_words_allow(monkeypatch) -> None:
    """The annotation skips a rule whose words a sentence lacks (`text/dates.py::Rule.needs`);
    over every message of the package's sample week and the test dialogues it writes what
    searching every rule writes, and it dates some of them."""
    import json
    from importlib import resources
    from pathlib import Path

    from anima_pipeline.text import dates

    class Every:  # holds every word: no rule is skipped
        def isdisjoint(self, other: object) -> bool:
            return False

    lines = resources.files("anima_pipeline.sample").joinpath("week.archive.jsonl").read_text().splitlines()
    lines += (Path(__file__).parents[1] / "data" / "unseen.archive.jsonl").read_text().splitlines()
    texts = [r["content"] for r in map(json.loads, lines) if r.get("content")]
    texts += [  # a phrase for every rule
        "We met the day before yesterday; I leave the day after tomorrow.",
        "Last night was long. Yesterday morning I ran, tomorrow I rest, tonight I read.",
        "The other day I saw it. I bought it 3 weeks ago. We have been friends for two years now.",
        "I finish in two days' time. Last summer we hiked, and next month we move.",
        "Over the weekend I painted. On Friday I called. We met last Thurs, back this past May.",
    ]
    day = date(2026, 11, 25)
    skipping = [resolve_relative_dates(t, day, annotate=True) for t in texts]
    monkeypatch.setattr(dates, "_words", lambda text: Every())
    assert skipping == [resolve_relative_dates(t, day, annotate=True) for t in texts]
    assert sum(a != t for a, t in zip(skipping, texts, strict=True)) >= 10
