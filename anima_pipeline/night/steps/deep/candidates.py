"""What rounds 1 and 3 of deep sleep (contradiction and expiry, merge) see on an incremental
night: the memories that changed since the last deep sleep and their nearest neighbours in the
store, not the whole store (docs/cost.md, "Deep sleep sends what changed"). The weekly full
night keeps the whole-store pass, which catches what a neighbourhood missed.

A neighbour is a memory the program's own pre-filter would pair with a changed one: a fact
that clashes with one of its facts (what round 1's contradictions and expiries are made of),
similar content (the trigram and rare-term pairs of message 2), or the most rare words in
common (what round 3's duplicates and paraphrases share). `benchmarks/deep_candidates.py` measures how many of the
whole-store pass's contradictions and merges the neighbourhood keeps.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from typing import TYPE_CHECKING

from anima_pipeline.night.steps.deep.merges import memory_terms
from anima_pipeline.store.memories import similar_memory_pairs
from anima_pipeline.text.attributes import Fact, extract_attributes, facts_conflict

if TYPE_CHECKING:
    from anima_pipeline.store.db import Connection
    from anima_pipeline.store.memories import SemanticMemory

EVERY_PAIR_IDS = 250  # past this many memories the trigram pairs come from content-order neighbours
SORTED_NEIGHBOURS = 8
WORD_NEIGHBOURS = 4  # per changed memory: the ones sharing the most rare words with it
RARE_SHARE = 0.05  # a word in more than this share of the store (the speakers' names) pairs nothing


def similar_pairs(
    conn: Connection, ids: list[int], threshold: float, focus: set[int] | None = None
) -> list[tuple[int, int, float]]:
    """Pairs of memories with similar content: pg_trgm similarity (the % operator, served by
    the trigram index) or at least two shared rare full-text terms (a term is rare when it
    occurs in at most 5 % of these memories, so names that are everywhere do not pair all).
    With `focus` (incremental mode: the memories that changed that day) only pairs touching
    them are compared: an unchanged pair was already looked at on an earlier night. Trigram
    similarity of every pair is quadratic (84 s for the 1,822 memories of one 300k slice on
    the 2-core CI machine), so over EVERY_PAIR_IDS memories each is compared with its
    SORTED_NEIGHBOURS next ones in content order (near-duplicates mostly start alike; the
    rare-term pairs catch the rest): linear after the sort."""
    return similar_memory_pairs(
        conn, ids, threshold, focus, every_pair_ids=EVERY_PAIR_IDS, neighbours=SORTED_NEIGHBOURS
    )


def word_neighbours(memories: list[SemanticMemory], focus: set[int], k: int = WORD_NEIGHBOURS) -> set[int]:
    """Per memory of `focus`, the `k` others sharing the most rare words with it (each word
    weighted by its rarity, a word in more than RARE_SHARE of the memories not at all)."""
    terms = {m.id: memory_terms(m.content) for m in memories}
    df = Counter(t for ts in terms.values() for t in ts)
    cap = max(2, int(len(memories) * RARE_SHARE))
    holders: dict[str, list[int]] = defaultdict(list)
    for mid, ts in terms.items():
        for t in ts:
            if 2 <= df[t] <= cap:
                holders[t].append(mid)
    out: set[int] = set()
    for f in focus:
        score: dict[int, float] = defaultdict(float)
        for t in terms.get(f, ()):
            for other in holders.get(t, ()):
                if other != f:
                    score[other] += math.log(len(memories) / df[t])
        out |= {mid for mid, _ in sorted(score.items(), key=lambda x: (-x[1], x[0]))[:k]}
    return out


def clashing(memories: list[SemanticMemory], focus: set[int]) -> set[int]:
    """The memories with a fact that clashes with a fact of a `focus` memory, either way (same
    subject and attribute, `facts_conflict`: what round 1's contradictions and expiries are
    made of). Not every fact on the same attribute: "likes tea" and "likes hiking" coexist,
    and the speakers' many likes would bring half the store."""
    by_key: dict[tuple[str, str], list[tuple[int, Fact]]] = defaultdict(list)
    for m in memories:
        for fact in extract_attributes(m.content):
            by_key[(fact.subject, fact.attribute)].append((m.id, fact))
    out: set[int] = set()
    for items in by_key.values():
        for mid, fact in items:
            if mid not in focus:
                continue
            for other, of in items:
                if other != mid and (facts_conflict(fact, of) or facts_conflict(of, fact)):
                    out.add(other)
    return out


def candidate_ids(
    conn: Connection, memories: list[SemanticMemory], changed: set[int], threshold: float
) -> set[int]:
    """The ids rounds 1 and 3 see on an incremental night: `changed` (those of `memories`) and
    their neighbours (a clashing fact, similar content above `threshold` as message 2 pairs
    them, the most rare words in common)."""
    ids = [m.id for m in memories]
    focus = changed & set(ids)
    if not focus:
        return set()
    picked = set(focus)
    picked |= clashing(memories, focus)
    for a, b, _ in similar_pairs(conn, ids, threshold, focus):
        picked |= {a, b}
    return picked | word_neighbours(memories, focus)
