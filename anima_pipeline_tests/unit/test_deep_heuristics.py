"""Offline deep-sleep heuristics: contradiction/expiry, split, merge, pin review and the
normalization shared with SQL. Synthetic English and Chinese sentences only."""

from __future__ import annotations

import os
import random
from datetime import UTC, datetime, timedelta

import pytest

from anima_pipeline.night.steps.deep.contradictions import find_contradictions
from anima_pipeline.night.steps.deep.memory_view import MemoryView
from anima_pipeline.night.steps.deep.merges import merge_groups
from anima_pipeline.night.steps.deep.pins import stale_pins
from anima_pipeline.night.steps.deep.splits import is_split_candidate, split_parts
from anima_pipeline.store.invariants import NORMALIZED_CONTENT_SQL, normalized_content_sql
from anima_pipeline.text.attributes import extract_attribute
from anima_pipeline.text.similarity import (
    normalize_content,
    similarity,
)

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def mem(
    id: int,
    content: str,
    *,
    days: float = 0,
    type: str = "world",
    pinned: bool = False,
    pinned_days: float | None = None,
    referenced_days: float | None = None,
    refs: float = 0.0,
    observed: bool = True,
) -> MemoryView:
    """A memory observed `days` after T0 (pins and references also as offsets from T0)."""
    at = T0 + timedelta(days=days)
    return MemoryView(
        id=id,
        type=type,
        content=content,
        confidence=0.8,
        source_sessions=(f"s-{id}",),
        observed_at=at if observed else None,
        updated_at=at,
        pinned=pinned,
        pinned_at=None if pinned_days is None else T0 + timedelta(days=pinned_days),
        reference_count=refs,
        last_referenced_at=None if referenced_days is None else T0 + timedelta(days=referenced_days),
    )


def flagged(*contents: str) -> list[tuple[int, int | None, str, str]]:
    """Contradictions among memories 1..n, observed one day apart in the given order."""
    found = find_contradictions([mem(i + 1, c, days=i) for i, c in enumerate(contents)])
    return [(c.loser_id, c.winner_id, c.kind, c.attribute) for c in found]


# --- round 1: contradiction + expiry ----------------------------------------------------


class TestContradictions:
    def test_chinese_zodiac_tiger_vs_goat_is_a_contradiction(self) -> None:
        assert flagged(
            "Rosalind's daughter was born in the Year of the Tiger.",
            "Rosalind's daughter was born in the Year of the Goat.",
        ) == [(1, 2, "contradiction", "chinese_zodiac")]

    def test_chinese_zodiac_in_chinese(self) -> None:
        assert flagged("张三的女儿属虎。", "张三的女儿属羊。") == [(1, 2, "contradiction", "chinese_zodiac")]

    def test_older_loses_by_observed_at_not_by_id(self) -> None:
        found = find_contradictions([mem(1, "张三的女儿属羊。", days=5), mem(2, "张三的女儿属虎。", days=1)])
        assert [(c.loser_id, c.winner_id) for c in found] == [(2, 1)]

    def test_same_day_tie_broken_by_id(self) -> None:
        found = find_contradictions([mem(7, "张三属虎"), mem(3, "张三属羊")])
        assert [(c.loser_id, c.winner_id) for c in found] == [(3, 7)]

    def test_coexisting_preferences_are_never_flagged(self) -> None:
        assert flagged("Rosalind likes apples.", "Rosalind likes cherries.") == []
        assert flagged("张三喜欢苹果", "张三喜欢樱桃") == []

    def test_likes_python_then_now_prefers_typescript_is_not_flagged(self) -> None:
        # deep sleep's prompt: "likes Python" vs "now prefers TypeScript" — both can be true.
        assert flagged("Beatrix likes Python.", "Beatrix now prefers TypeScript.") == []
        assert flagged("张三喜欢Python", "张三现在更喜欢TypeScript") == []

    def test_python_expires_only_when_the_newer_memory_says_now_or_no_longer(self) -> None:
        assert flagged("Beatrix likes Python.", "Beatrix now prefers TypeScript over Python.") == [
            (1, 2, "expiry", "likes")
        ]
        assert flagged("Beatrix likes Python.", "Beatrix no longer likes Python.") == [
            (1, 2, "expiry", "likes")
        ]
        assert flagged("张三喜欢Python", "张三不再喜欢Python了") == [(1, 2, "expiry", "likes")]
        # Without a change marker, preferring A over B says nothing against liking B.
        assert flagged("Beatrix likes Python.", "Beatrix prefers TypeScript over Python.") == []

    def test_likes_vs_does_not_like_english(self) -> None:
        assert flagged("Rosalind likes spicy food.", "Rosalind doesn't like spicy food.") == [
            (1, 2, "contradiction", "likes")
        ]
        assert flagged("Rosalind does not like jazz.", "Rosalind really loves jazz.") == [
            (1, 2, "contradiction", "likes")
        ]

    def test_likes_vs_does_not_like_chinese(self) -> None:
        assert flagged("张三不喜欢吃辣。", "张三喜欢吃辣。") == [(1, 2, "contradiction", "likes")]
        assert flagged("张三很喜欢吃辣", "张三讨厌吃辣") == [(1, 2, "contradiction", "likes")]

    def test_different_objects_of_like_and_dislike_coexist(self) -> None:
        assert flagged("Rosalind likes tea.", "Rosalind doesn't like coffee.") == []
        assert flagged("Rosalind likes tea.", "Rosalind doesn't like tea with milk.") == []

    def test_hometown(self) -> None:
        assert flagged("Rosalind is from Sweden.", "Rosalind is originally from Norway.") == [
            (1, 2, "contradiction", "hometown")
        ]
        assert flagged("张三的老家是湖南。", "张三来自四川成都。") == [(1, 2, "contradiction", "hometown")]
        # A refinement of the same place is not a different value.
        assert flagged("张三来自四川", "张三来自四川成都") == []

    def test_age_contradiction_and_ageing(self) -> None:
        assert flagged("Rosalind is 34 years old.", "Rosalind is 36.") == [(1, 2, "contradiction", "age")]
        assert flagged("张三今年三十岁", "张三三十二岁") == [(1, 2, "contradiction", "age")]
        # 34 then 35 observed a year apart is ageing: the old age expires.
        found = find_contradictions([mem(1, "Rosalind is 34.", days=0), mem(2, "Rosalind is 35.", days=400)])
        assert [(c.loser_id, c.winner_id, c.kind) for c in found] == [(1, 2, "expiry")]

    def test_birthday_compares_month_and_day(self) -> None:
        assert flagged("Rosalind's birthday is May 3.", "Rosalind was born on 3rd May 1990.") == []
        assert flagged("Rosalind's birthday is May 3.", "Rosalind's birthday is June 3.") == [
            (1, 2, "contradiction", "birthday")
        ]
        assert flagged("张三的生日是五月三日", "张三1990年5月4日出生") == [
            (1, 2, "contradiction", "birthday")
        ]

    def test_occupation_contradicts_unless_the_newer_one_marks_a_change(self) -> None:
        assert flagged("Rosalind works as a nurse.", "Rosalind works as a teacher.") == [
            (1, 2, "contradiction", "occupation")
        ]
        assert flagged("Rosalind works as a nurse.", "Rosalind now works as a teacher.") == [
            (1, 2, "expiry", "occupation")
        ]
        assert flagged("张三是一名医生", "张三是一名律师") == [(1, 2, "contradiction", "occupation")]
        assert flagged("张三是一名医生", "张三现在是一名律师") == [(1, 2, "expiry", "occupation")]

    def test_changeable_states_expire(self) -> None:
        assert flagged("Rosalind lives in Paris.", "Rosalind moved to Lyon.") == [
            (1, 2, "expiry", "residence")
        ]
        assert flagged("Rosalind works at Google.", "Rosalind works for Microsoft.") == [
            (1, 2, "expiry", "employer")
        ]
        assert flagged("Rosalind is single.", "Rosalind got married last June.") == [
            (1, 2, "expiry", "relationship")
        ]
        assert flagged("张三住在北京", "张三搬到了上海") == [(1, 2, "expiry", "residence")]
        assert flagged("张三在上海浦东工作", "张三在杭州工作") == [(1, 2, "expiry", "employer")]
        assert flagged("张三单身", "张三结婚了") == [(1, 2, "expiry", "relationship")]

    def test_no_longer_lives_in_expires_the_same_place_only(self) -> None:
        assert flagged("Rosalind lives in Paris.", "Rosalind no longer lives in Paris.") == [
            (1, 2, "expiry", "residence")
        ]
        assert flagged("Rosalind lives in Paris with her husband.", "Rosalind lives in Paris.") == []

    def test_different_subjects_never_collide(self) -> None:
        assert (
            flagged(
                "Rosalind's daughter was born in the Year of the Tiger.",
                "Beatrix's daughter was born in the Year of the Goat.",
            )
            == []
        )
        assert flagged("张三属虎", "李四属羊") == []
        assert flagged("Rosalind's son is 5.", "Rosalind is 34.") == []

    def test_unresolvable_pronoun_subject_is_never_compared(self) -> None:
        assert flagged("She is from Sweden.", "She is from Norway.") == []

    def test_pronoun_resolves_to_the_person_named_in_the_same_memory(self) -> None:
        assert flagged(
            "Rosalind's daughter is 7. She was born in the Year of the Tiger.",
            "Rosalind's daughter was born in the Year of the Goat.",
        ) == [(1, 2, "contradiction", "chinese_zodiac")]

    def test_survivor_rule_tiger_goat_tiger(self) -> None:
        # The old tiger agrees with the current value, so only the goat is deprecated.
        assert flagged("张三属虎", "张三属羊", "张三属虎") == [(2, 3, "contradiction", "chinese_zodiac")]

    def test_missing_observed_at_falls_back_to_updated_at(self) -> None:
        found = find_contradictions(
            [
                mem(1, "Rosalind is from Sweden.", days=3, observed=False),
                mem(2, "Rosalind is from Norway.", days=1),
            ]
        )
        assert [(c.loser_id, c.winner_id) for c in found] == [(2, 1)]

    def test_reason_names_both_memories(self) -> None:
        (c,) = find_contradictions([mem(1, "张三属虎"), mem(2, "张三属羊", days=1)])
        assert "f-1" in c.reason and "f-2" in c.reason and "张三" in c.reason

    def test_extract_attribute(self) -> None:
        assert extract_attribute("Rosalind doesn't like spicy food.") == (
            "rosalind",
            "likes",
            "spicy food",
            -1,
        )
        assert extract_attribute("张三的女儿属虎") == ("张三的女儿", "chinese_zodiac", "tiger", 1)
        assert extract_attribute("The user lives in Berlin.") == ("user", "residence", "berlin", 1)
        assert extract_attribute("Rosalind said that Bea likes tea.") is None  # reported speech
        assert extract_attribute("The weather was nice today.") is None


class TestAnnouncedChanges:
    """A newer memory that announces a change expires older ones, even unnamed places."""

    def test_unnamed_employer_expires_on_an_announced_change(self) -> None:
        assert flagged("Lin Wei works at a bank in Lujiazui.", "Lin Wei started at a robotics startup.") == [
            (1, 2, "expiry", "employer")
        ]
        assert flagged("Lin Wei works at a bank.", "Lin Wei now works at Qiyuan Robotics.") == [
            (1, 2, "expiry", "employer")
        ]
        assert flagged("张三在一家银行工作。", "张三入职了一家机器人公司。") == [(1, 2, "expiry", "employer")]
        assert flagged("张三在一家银行工作。", "张三开始在腾讯上班。") == [(1, 2, "expiry", "employer")]

    def test_quitting_expires_whatever_the_employer_was(self) -> None:
        assert flagged("Lin Wei works at a bank.", "Lin Wei quit his job.") == [(1, 2, "expiry", "employer")]
        assert flagged("Lin Wei works at Citibank.", "Lin Wei resigned in October.") == [
            (1, 2, "expiry", "employer")
        ]
        assert flagged("张三在一家银行工作。", "张三辞职了。") == [(1, 2, "expiry", "employer")]
        # A job taken after quitting is not contradicted by the quitting.
        assert flagged("张三辞职了。", "张三入职了一家机器人公司。") == []

    def test_unnamed_places_never_clash_without_an_announced_change(self) -> None:
        assert flagged("Lin Wei works at a bank.", "Lin Wei works at a hospital.") == []
        assert flagged("张三在一家银行工作。", "张三在一家医院工作。") == []
        assert flagged("Rosalind lives in an apartment.", "Rosalind lives in a house.") == []
        # A newer change that only describes the same place more precisely.
        assert flagged("Lin Wei works at a bank in Pudong.", "Lin Wei now works at a bank.") == []
        assert flagged("张三在一家银行工作。", "张三入职了一家大银行。") == []

    def test_change_words_that_do_not_name_an_employer(self) -> None:
        assert flagged("Lin Wei works at a bank.", "Lin Wei started at 7:30 on Monday.") == []
        assert flagged("Lucia works at a bank.", "Lucia joined a gym.") == []
        assert flagged("Lucia works at a bank.", "Lucia joined a new book club.") == []
        assert flagged("张三在一家银行工作。", "张三想辞职。") == []
        assert flagged("周立在一家公司工作。", "周立最近在想要不要换个工作。") == []

    def test_quitting_a_drink_expires_liking_it(self) -> None:
        assert flagged("张三喜欢喝咖啡。", "张三决定不喝咖啡了，改喝乌龙茶。") == [(1, 2, "expiry", "likes")]
        assert flagged("Rosalind likes coffee.", "Rosalind stopped drinking coffee.") == [
            (1, 2, "expiry", "likes")
        ]
        assert flagged("Rosalind likes coffee.", "Rosalind switched from coffee to tea.") == [
            (1, 2, "expiry", "likes")
        ]
        # Habits of a time of day, or plain preferences for another drink, say nothing.
        assert flagged("张三喜欢喝咖啡。", "张三晚上不喝咖啡。") == []
        assert flagged("张三喜欢喝咖啡。", "张三现在更喜欢喝茶了。") == []
        assert flagged("Rosalind likes coffee.", "Rosalind switched to tea.") == []


# --- round 2: split ---------------------------------------------------------------------


class TestSplit:
    def test_multi_fact_entry_with_pronoun_rewrite(self) -> None:
        m = mem(1, "Rosalind is from Sweden. She also plays the violin every weekend.")
        assert split_parts(m) == ["Rosalind is from Sweden.", "Rosalind also plays the violin every weekend."]

    def test_pronoun_follows_the_gender_of_the_relation(self) -> None:
        assert split_parts(mem(1, "Rosalind's daughter loves horses. She also plays the violin.")) == [
            "Rosalind's daughter loves horses.",
            "Rosalind's daughter also plays the violin.",
        ]
        assert split_parts(mem(2, "Rosalind's son is 5 years old. She lives in Paris now.")) == [
            "Rosalind's son is 5 years old.",
            "Rosalind lives in Paris now.",
        ]

    def test_and_also_boundary_gets_the_subject(self) -> None:
        assert split_parts(mem(1, "Rosalind likes green tea and also plays the violin.")) == [
            "Rosalind likes green tea.",
            "Rosalind also plays the violin.",
        ]

    def test_chinese_split_with_pronoun_rewrite(self) -> None:
        assert split_parts(mem(1, "张三喜欢吃辣；她也喜欢喝绿茶。")) == [
            "张三喜欢吃辣。",
            "张三也喜欢喝绿茶。",
        ]
        assert split_parts(mem(2, "张三的儿子在北京上大学。他也喜欢踢足球。")) == [
            "张三的儿子在北京上大学。",
            "张三的儿子也喜欢踢足球。",
        ]

    def test_dependent_sentences_are_not_split(self) -> None:
        assert split_parts(mem(1, "Rosalind adopted a dog last spring. It is a beagle named Max.")) is None
        assert (
            split_parts(mem(2, "Rosalind went to a support group on May 7. She found it inspiring.")) is None
        )
        assert split_parts(mem(3, "张三上周去了杭州出差。这次出差让他很累。")) is None
        assert split_parts(mem(4, "Rosalind failed her driving test. But she will try again.")) is None

    def test_one_fact_is_not_split(self) -> None:
        assert split_parts(mem(1, "Rosalind likes green tea.")) is None
        assert split_parts(mem(2, "张三喜欢吃辣。")) is None

    def test_tiny_parts_are_not_split(self) -> None:
        assert split_parts(mem(1, "Rosalind likes green tea. She paints.")) is None
        assert split_parts(mem(2, "张三喜欢吃辣。也喝茶。")) is None

    def test_unknown_antecedent_is_not_split(self) -> None:
        assert split_parts(mem(1, "She likes green tea. She also plays the violin.")) is None
        assert (
            split_parts(mem(2, "Bea and Rosalind went hiking together. She also plays the violin.")) is None
        )

    def test_abbreviations_and_decimals_are_not_boundaries(self) -> None:
        assert split_parts(mem(1, "Rosalind sees Dr. Smith every month about her knee.")) is None
        assert split_parts(mem(2, "Rosalind ran 5.5 km on Sunday morning.")) is None

    def test_is_split_candidate(self) -> None:
        assert is_split_candidate("Rosalind is from Sweden. She also plays the violin.")
        assert is_split_candidate("张三喜欢吃辣；她也喜欢喝绿茶。")
        assert is_split_candidate("Rosalind likes tea and also plays the violin.")
        assert is_split_candidate("x" * 200)
        assert not is_split_candidate("Rosalind likes green tea.")
        assert not is_split_candidate("张三喜欢吃辣。")


class TestClauseSplit:
    def test_clause_list_with_appositive_name(self) -> None:
        m = mem(1, "Lin Wei's sister Mei is a nurse in Chengdu, she has two kids, and she loves hiking.")
        assert split_parts(m) == [
            "Lin Wei's sister Mei is a nurse in Chengdu.",
            "Mei has two kids.",
            "Mei loves hiking.",
        ]

    def test_clause_with_its_own_named_subject(self) -> None:
        m = mem(1, "Lin Wei works at a bank in Lujiazui, Lin Wei is a credit risk analyst.")
        assert split_parts(m) == ["Lin Wei works at a bank in Lujiazui.", "Lin Wei is a credit risk analyst."]

    def test_chinese_clause_list(self) -> None:
        assert split_parts(mem(1, "张三是一名护士，她有两个孩子，她喜欢爬山。")) == [
            "张三是一名护士。",
            "张三有两个孩子。",
            "张三喜欢爬山。",
        ]
        assert split_parts(mem(2, "张三的妹妹是一名护士，她有两个孩子。")) == [
            "张三的妹妹是一名护士。",
            "张三的妹妹有两个孩子。",
        ]

    def test_clauses_that_do_not_stand_alone_are_kept_whole(self) -> None:
        # The pronoun may mean the other person of the first clause.
        assert split_parts(mem(1, "Rosalind has a daughter, she loves horses.")) is None
        assert split_parts(mem(2, "张三有一个妹妹，她是一名护士。")) is None
        assert split_parts(mem(3, "Lin Wei's sister Mei is a nurse in Chengdu, he has two kids.")) is None
        # Reported speech, subordinate clauses, introductions, back references.
        assert split_parts(mem(4, "Lin Wei said she drove down, and she found the cause.")) is None
        assert split_parts(mem(5, "Ivo is tired, but because of the rain, Ivo stays at home.")) is None
        assert split_parts(mem(6, "Hannah has to say, Hannah likes the coconut cake.")) is None
        assert split_parts(mem(7, "Ivy started learning to cook, and Ivy finds the process fun.")) is None
        assert split_parts(mem(8, "Rosalind went to the park, she loved it.")) is None
        # No verb of its own: an apposition or a list, not a clause.
        assert split_parts(mem(9, "Rosalind has a dog, a beagle named Max.")) is None

    def test_sentence_split_needs_an_unambiguous_antecedent(self) -> None:
        assert split_parts(mem(1, "Beatrix said it was Matt, he is talented; his voice was amazing.")) is None
        assert split_parts(mem(2, "Biscuit's hilarious; he hid a sock under the sofa once.")) is None


# --- round 3: merge ---------------------------------------------------------------------


class TestMerge:
    def test_exact_twins(self) -> None:
        groups = merge_groups(
            [mem(1, "Rosalind has a dog named Max."), mem(2, "rosalind has a dog named max")]
        )
        assert [(g.ids, g.content) for g in groups] == [((1, 2), "Rosalind has a dog named Max.")]

    def test_near_duplicates(self) -> None:
        groups = merge_groups(
            [
                mem(1, "Rosalind adopted a beagle named Max in 2021."),
                mem(2, "Rosalind adopted a beagle called Max in 2021.", days=1),
            ]
        )
        assert [g.ids for g in groups] == [(1, 2)]
        assert "similarity" in groups[0].reason

    def test_containment_keeps_the_fuller_content(self) -> None:
        groups = merge_groups([mem(1, "张三住在北京"), mem(2, "张三住在北京朝阳区", days=1)])
        assert [(g.ids, g.content) for g in groups] == [((1, 2), "张三住在北京朝阳区")]
        assert "contained" in groups[0].reason
        groups = merge_groups([mem(3, "Rosalind likes tea and coffee."), mem(4, "Rosalind likes tea.")])
        assert [(g.ids, g.content) for g in groups] == [((3, 4), "Rosalind likes tea and coffee.")]

    def test_equal_length_tie_goes_to_the_newest(self) -> None:
        groups = merge_groups(
            [mem(1, "Rosalind has a dog named Max!", days=2), mem(2, "Rosalind has a dog named Max.")]
        )
        assert groups[0].content == "Rosalind has a dog named Max!"

    def test_dissimilar_not_merged(self) -> None:
        assert merge_groups([mem(1, "Rosalind likes green tea."), mem(2, "Beatrix plays the violin.")]) == []
        assert merge_groups([mem(1, "张三喜欢吃辣"), mem(2, "李四住在上海")]) == []

    def test_lookalikes_that_disagree_are_not_merged(self) -> None:
        assert (
            merge_groups([mem(1, "Rosalind likes spicy food."), mem(2, "Rosalind doesn't like spicy food.")])
            == []
        )
        assert merge_groups([mem(1, "Rosalind is 34 years old."), mem(2, "Rosalind is 35 years old.")]) == []
        assert merge_groups([mem(1, "喜欢吃辣的人很多"), mem(2, "不喜欢吃辣的人很多")]) == []

    def test_different_types_are_not_merged(self) -> None:
        assert (
            merge_groups(
                [mem(1, "Rosalind likes green tea."), mem(2, "Rosalind likes green tea.", type="preference")]
            )
            == []
        )

    def test_threshold_boundary_is_inclusive(self) -> None:
        # Neither pair's content words nest (that would merge by the subset rule at any
        # threshold, as "Rosalind paints at home." / "… usually paints at home." now do).
        a, b = "Rosalind daily paints at the lake.", "Rosalind happily paints at the lake."
        assert similarity(a, b) == 0.75
        pair = [mem(1, a), mem(2, b)]
        assert [g.ids for g in merge_groups(pair, threshold=0.75)] == [(1, 2)]
        assert merge_groups(pair, threshold=0.76) == []
        a, b = "张三周末去公园跑步锻炼", "张三周末常去公园跑步锻炼"
        assert similarity(a, b) == 0.75
        assert [g.ids for g in merge_groups([mem(1, a), mem(2, b)], threshold=0.75)] == [(1, 2)]
        assert merge_groups([mem(1, a), mem(2, b)], threshold=0.76) == []

    def test_groups_are_disjoint_and_deterministic(self) -> None:
        memories = [
            mem(5, "Rosalind adopted a beagle named Max in 2021."),
            mem(2, "Rosalind adopted a beagle called Max in 2021."),
            mem(9, "rosalind adopted a beagle named max in 2021"),
            mem(4, "张三住在北京"),
            mem(7, "张三住在北京朝阳区"),
            mem(3, "Beatrix plays the violin."),
        ]
        groups = merge_groups(memories)
        assert [g.ids for g in groups] == [(2, 5, 9), (4, 7)]
        ids = [i for g in groups for i in g.ids]
        assert len(ids) == len(set(ids))
        assert merge_groups(list(reversed(memories))) == groups

    def test_complete_linkage_does_not_chain_dissimilar_memories(self) -> None:
        # 1 and 3 are both contained in 2, but 1 and 3 share nothing: one group may take 2,
        # the other stays alone.
        memories = [
            mem(1, "Rosalind likes green tea."),
            mem(2, "Rosalind likes green tea. Beatrix plays the violin."),
            mem(3, "Beatrix plays the violin."),
        ]
        groups = merge_groups(memories)
        assert len(groups) == 1 and len(groups[0].ids) == 2 and 2 in groups[0].ids

    def test_candidate_filter_matches_brute_force(self) -> None:
        rng = random.Random(7)
        words = [
            "rosalind",
            "beatrix",
            "likes",
            "tea",
            "green",
            "plays",
            "violin",
            "often",
            "the",
            "at",
            "home",
        ]
        zh = "张三李四喜欢吃辣住在北京上海公园跑步"
        memories = []
        for i in range(1, 121):
            if i % 2:
                text = " ".join(rng.choice(words) for _ in range(rng.randint(3, 6)))
            else:
                text = "".join(rng.choice(zh) for _ in range(rng.randint(6, 10)))
            memories.append(mem(i, text))
        groups = merge_groups(memories, threshold=0.6)
        # Every pair in a group must really be linked; reproducible without the index.
        for g in groups:
            for a in g.ids:
                for b in g.ids:
                    if a < b:
                        ca, cb = memories[a - 1].content, memories[b - 1].content
                        na, nb = normalize_content(ca), normalize_content(cb)
                        assert na == nb or na in nb or nb in na or similarity(ca, cb) >= 0.6
        from anima_pipeline.night.steps.deep import merges as deep

        entries = [deep._entry(m) for m in memories]
        brute = {
            (i, j)
            for i in range(len(entries))
            for j in range(i + 1, len(entries))
            if deep._edge(entries[i], entries[j], 0.6) is not None
        }
        assert brute <= deep._candidate_pairs(entries, 0.6)

    def test_same_preference_in_other_words_keeps_the_fuller(self) -> None:
        groups = merge_groups(
            [
                mem(1, "Lin Wei loves spicy hotpot.", type="preference"),
                mem(
                    2,
                    "Lin Wei's favourite food is still hotpot, the spicier the better.",
                    days=3,
                    type="preference",
                ),
            ]
        )
        assert [(g.ids, g.content) for g in groups] == [
            ((1, 2), "Lin Wei's favourite food is still hotpot, the spicier the better.")
        ]
        assert "same preference" in groups[0].reason
        groups = merge_groups(
            [mem(3, "张三喜欢吃火锅。"), mem(4, "张三最喜欢的还是火锅，越辣越好。", days=2)]
        )
        assert [(g.ids, g.content) for g in groups] == [((3, 4), "张三最喜欢的还是火锅，越辣越好。")]

    def test_different_preferences_are_not_merged(self) -> None:
        assert merge_groups([mem(1, "Rosalind likes green tea."), mem(2, "Rosalind loves black tea.")]) == []
        assert (
            merge_groups([mem(1, "Rosalind likes hotpot."), mem(2, "Beatrix's favourite food is hotpot.")])
            == []
        )
        assert merge_groups([mem(1, "张三喜欢绿茶。"), mem(2, "张三最喜欢的是红茶。")]) == []
        # Pronoun objects name nothing; one language at a time; the dropped one says more.
        assert (
            merge_groups([mem(1, "Omar also likes holding them."), mem(2, "Omar is a big fan of them.")])
            == []
        )
        assert (
            merge_groups([mem(1, "Lin Wei loves spicy hotpot."), mem(2, "Lin Wei最喜欢的还是火锅。")]) == []
        )
        assert (
            merge_groups(
                [
                    mem(1, "Rosalind loves hotpot and went to Chengdu with Mei last May."),
                    mem(
                        2,
                        "Rosalind's favourite food is still hotpot, the spicier and numbing the better, always.",
                    ),
                ]
            )
            == []
        )

    def test_subset_of_content_words_merges(self) -> None:
        groups = merge_groups(
            [mem(1, "Rosalind paints at home."), mem(2, "Rosalind usually paints at home.", days=1)]
        )
        assert [(g.ids, g.content) for g in groups] == [((1, 2), "Rosalind usually paints at home.")]
        groups = merge_groups([mem(3, "张三周末在家画画。"), mem(4, "张三周末经常在家画画。", days=1)])
        assert [(g.ids, g.content) for g in groups] == [((3, 4), "张三周末经常在家画画。")]
        # Same words, another subject as written: not compared by the subset rule.
        assert (
            merge_groups([mem(5, "Rosalind visited Bea."), mem(6, "Bea visited Rosalind in hospital.")]) == []
        )

    def test_additions_are_not_duplicates(self) -> None:
        assert (
            merge_groups(
                [
                    mem(1, "Lin Wei's cat is named Mochi."),
                    mem(2, "Lin Wei's orange cat Mochi is three years old."),
                ]
            )
            == []
        )
        assert merge_groups([mem(1, "Rosalind ran 5 km."), mem(2, "Rosalind ran 10 km in the park.")]) == []
        assert (
            merge_groups(
                [mem(1, "Rosalind likes the park."), mem(2, "Rosalind doesn't like the park at all.")]
            )
            == []
        )

    def test_invalid_threshold(self) -> None:
        with pytest.raises(ValueError, match="threshold"):
            merge_groups([], threshold=0)


# --- round 4: pin review ----------------------------------------------------------------


class TestStalePins:
    NOW = T0 + timedelta(days=100)

    def test_stale_by_last_reference_then_pinned_at(self) -> None:
        memories = [
            mem(1, "a", pinned=True, pinned_days=0, referenced_days=95),  # referenced 5 days ago
            mem(2, "b", pinned=True, pinned_days=0, referenced_days=60),  # 40 days ago: stale
            mem(3, "c", pinned=True, pinned_days=80),  # pinned 20 days ago, never referenced
            mem(4, "d", pinned=True, pinned_days=10),  # pinned 90 days ago, never referenced
            mem(5, "e", pinned=False, referenced_days=0),  # not pinned: not reviewed
        ]
        result = stale_pins(memories, self.NOW)
        assert [i for i, _ in result] == [4, 2]
        assert all("stale pin" in why for _, why in result)
        assert "90 days" in result[0][1]

    def test_exactly_at_the_threshold_is_not_stale(self) -> None:
        assert stale_pins([mem(1, "a", pinned=True, pinned_days=70)], self.NOW, stale_days=30) == []
        assert [i for i, _ in stale_pins([mem(1, "a", pinned=True, pinned_days=69)], self.NOW)] == [1]

    def test_cap_suggests_the_least_referenced_beyond_it(self) -> None:
        memories = [mem(i, f"pin {i}", pinned=True, pinned_days=99, refs=float(i)) for i in range(1, 46)]
        result = stale_pins(memories, self.NOW)
        assert [i for i, _ in result] == [1, 2, 3, 4, 5]
        assert all("resident cap" in why for _, why in result)

    def test_stale_pins_count_against_the_cap_first(self) -> None:
        fresh = [mem(i, f"pin {i}", pinned=True, pinned_days=99, refs=10.0) for i in range(1, 41)]
        old = [mem(i, f"pin {i}", pinned=True, pinned_days=1, refs=50.0) for i in range(41, 44)]
        result = stale_pins(fresh + old, self.NOW)
        assert sorted(i for i, _ in result) == [41, 42, 43]
        assert all("stale pin" in why for _, why in result)


# --- normalization shared with SQL ------------------------------------------------------

SAMPLES = [
    "Rosalind likes green tea.",
    "  ROSALIND   likes\tgreen\ntea!!! ",
    "Rosalind's daughter — born in the Year of the Tiger…",
    "“Quoted” (parenthetical) [bracket] {brace} a/b a_b a-b a:b a;b",
    "C++ and C# cost $5 & 50% @home <3 x=y",
    "张三，喜欢 吃辣。",
    "张三喜欢吃辣",
    "张三 喜欢 吃辣！",
    "《三体》是张三最喜欢的书；他读了三遍。",
    "ＡＢＣ　ｄｅｆ，１２３",
    "「引号」『书名』【标题】〔注〕",
    "私は寿司が好きです。",
    "𠮷野家の牛丼",
    "Mixed 中文 and English 文本",
    "zero\u200bwidth\u00a0nbsp\u3000ideographic",
    "",
    "!!!",
]


def _random_samples(n: int) -> list[str]:
    rng = random.Random(20260301)
    pool = "abcXYZ019 ,.!?;:'\"-_/()[]{}#$%&+<=>@~`|^*\\\t\n张三李四喜欢吃辣。，！？；：、“”‘’《》「」ＡＢＣ１２３　\u00a0\u200b…—"
    return ["".join(rng.choice(pool) for _ in range(rng.randint(0, 30))) for _ in range(n)]


class TestNormalize:
    def test_folds_case_width_punctuation_and_cjk_spacing(self) -> None:
        assert normalize_content("  ROSALIND   likes\tgreen\ntea!!! ") == "rosalind likes green tea"
        assert normalize_content("张三，喜欢 吃辣。") == normalize_content("张三喜欢吃辣") == "张三喜欢吃辣"
        assert normalize_content("ＡＢＣ　ｄｅｆ") == "abc def"
        assert normalize_content("likes C++") != normalize_content("likes C")

    def test_sql_constant_targets_content_column(self) -> None:
        assert "normalize(content, NFKC)" in NORMALIZED_CONTENT_SQL
        assert "%" not in NORMALIZED_CONTENT_SQL
        assert "m.content" in normalized_content_sql("m.content")
        with pytest.raises(ValueError):
            normalized_content_sql("content); DROP TABLE x; --")

    def test_python_and_sql_agree(self) -> None:
        psycopg = pytest.importorskip("psycopg")
        url = os.environ.get("ANIMA_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
        try:
            conn = psycopg.connect(url, connect_timeout=3)
        except psycopg.OperationalError as exc:
            pytest.skip(
                f"PostgreSQL at {url.rsplit('@', 1)[-1]} not reachable ({type(exc).__name__}); SQL agreement not checked"
            )
        samples = SAMPLES + _random_samples(300)
        with conn:
            rows = conn.execute(
                f"SELECT {NORMALIZED_CONTENT_SQL} FROM unnest(%s::text[]) WITH ORDINALITY AS v(content, i) ORDER BY i",
                (samples,),
            ).fetchall()
            single = conn.execute(
                f"SELECT {NORMALIZED_CONTENT_SQL} FROM (VALUES (%s)) v(content)", ("张三，喜欢 吃辣。",)
            ).fetchone()
        assert single == ("张三喜欢吃辣",)
        mismatches = [
            (s, sql, normalize_content(s))
            for s, (sql,) in zip(samples, rows, strict=True)
            if sql != normalize_content(s)
        ]
        assert mismatches == []

    def test_similarity_matches_pg_trgm_on_ascii(self) -> None:
        psycopg = pytest.importorskip("psycopg")
        url = os.environ.get("ANIMA_TEST_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/test")
        try:
            conn = psycopg.connect(url, connect_timeout=3)
        except psycopg.OperationalError as exc:
            pytest.skip(f"PostgreSQL at {url.rsplit('@', 1)[-1]} not reachable ({type(exc).__name__})")
        pairs = [
            ("Rosalind paints at home", "Rosalind usually paints at home"),
            ("Rosalind likes spicy food", "Rosalind doesn't like spicy food"),
            ("Rosalind adopted a beagle named Max", "rosalind adopted a beagle called max!"),
            ("tea", "coffee"),
        ]
        with conn, conn.transaction(force_rollback=True):
            # Created inside a rolled-back transaction: the shared database is left as it was.
            try:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm")
            except psycopg.Error as exc:
                pytest.skip(f"pg_trgm not available: {exc}")
            for a, b in pairs:
                (expected,) = conn.execute("SELECT similarity(%s, %s)", (a, b)).fetchone()
                assert similarity(a, b) == pytest.approx(expected, abs=1e-6), (a, b)

    def test_similarity_basics(self) -> None:
        assert similarity("Rosalind likes tea", "rosalind likes tea!") == 1.0
        assert similarity("", "anything") == 0.0
        assert similarity("张三喜欢吃辣", "李四住在上海") == 0.0
        assert 0.0 < similarity("张三喜欢吃辣", "张三喜欢喝茶") < 1.0
