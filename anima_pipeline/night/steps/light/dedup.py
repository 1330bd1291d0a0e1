"""Dedup of fact candidates against the active memories of the same sessions ("message 2")."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from anima_pipeline.night.steps.light.records import Decision, FactCandidate
from anima_pipeline.text.vocab import STOPWORDS
from anima_pipeline.text.words import CJK, normalize_key

NEAR_SHARE = 0.75  # the lowest share of shared tokens any relation but a twin by key needs


def _tokens(text: str) -> frozenset[str]:
    """Content words, plus Chinese character bigrams, for overlap measures."""
    return _key_tokens(normalize_key(text))


@lru_cache(maxsize=1 << 16)
def _key_tokens(key: str) -> frozenset[str]:
    """`_tokens` of a text by its key: a night's extraction and its dedup against the store
    ask for the same candidates' tokens several times (light/plan.py)."""
    words = {w for w in key.split() if w not in STOPWORDS and not CJK.search(w)}
    cjk = "".join(CJK.findall(key))
    return frozenset(words | {cjk[i : i + 2] for i in range(len(cjk) - 1)})


@dataclass
class _Known:
    memory_id: int | None  # None: created by an earlier candidate of this batch
    content: str
    tokens: frozenset[str]
    decision: int | None  # index of the decision that currently writes this entry
    key: str = ""  # normalize_key(content), kept with it
    position: int = 0  # index in the known list

    def __post_init__(self) -> None:
        self.key = self.key or normalize_key(self.content)


def _ordered(tokens: frozenset[str], rarity: Counter[str]) -> list[str]:
    """The tokens rarest first: the one order of every set (module `dedup_against`)."""
    return sorted(tokens, key=lambda t: (rarity[t], t))


def _reach(size: int, smaller: int) -> int:
    """How many of a set's rarest tokens must hold a token it shares with a set of `smaller`
    tokens (no larger) for the two to share NEAR_SHARE of that one."""
    return size - math.ceil(NEAR_SHARE * smaller) + 1


def _relation(key: str, tokens: frozenset[str], known: _Known) -> tuple[int, str]:
    """(rank, kind): twin > contained > fuller > near; rank 0 means unrelated."""
    if key == known.key:
        return 4, "twin"
    if not tokens or not known.tokens:
        return 0, ""
    common = len(tokens & known.tokens)
    in_known, in_new = common / len(tokens), common / len(known.tokens)
    if in_known >= 0.9 and in_new >= 0.9:
        return 4, "twin"
    if in_known >= 0.85:
        return 3, "contained"
    if in_new >= 0.85 and len(tokens) > len(known.tokens):
        return 2, "fuller"
    if common / len(tokens | known.tokens) >= 0.75:
        return 1, "near"
    return 0, ""


def dedup_against(candidates: Sequence[FactCandidate], existing: list[tuple[int, str]]) -> list[Decision]:
    """One decision per candidate against active memories of the same sessions.

    A twin or a candidate already contained in a memory is skipped; a fuller
    version of a memory updates that memory; candidates of the same batch are
    compared too, so no near-duplicate is ever created.
    """
    known: list[_Known] = []
    # Only entries with the same key, or sharing at least NEAR_SHARE of the smaller token set,
    # can be related (_relation is 0 otherwise: contained and fuller need 0.85 of one side,
    # near 0.75 of the union), so each candidate is compared with those alone, in list order,
    # as a full scan would. They are found by prefix filtering: with every token set in one
    # order (rarest first), two sets sharing `a` tokens share one among the first `len - a + 1`
    # of each. `prefixed` indexes each entry by its own prefix and size (finds the entries no
    # larger than the candidate, probed with its tokens within reach of that size), `by_token`
    # by every token with its position in that order (finds the larger ones, probed with the
    # candidate's prefix: a larger entry's shared token must also lie within its first
    # `len - a + 1`, which leaves out most entries that only share a common word). Indexing every token alone made common
    # words ("march", a name said every day) relate most entries to most others: the flush of
    # a 2,000-turn session compared 2.4 million pairs (docs/benchmarks.md).
    rarity = Counter(
        t
        for tokens in [_tokens(c) for _, c in existing] + [_key_tokens(c.key) for c in candidates]
        for t in tokens
    )
    by_key: dict[str, list[int]] = {}
    # token -> how many of the entry's tokens, rarest first, start at it -> entries
    by_token: dict[str, dict[int, list[int]]] = {}
    prefixed: dict[str, dict[int, list[int]]] = {}  # prefix token -> entry size -> entries

    def index(i: int) -> None:
        entry = known[i]
        by_key.setdefault(entry.key, []).append(i)
        ordered, size = _ordered(entry.tokens, rarity), len(entry.tokens)
        for position, t in enumerate(ordered):
            by_token.setdefault(t, {}).setdefault(size - position, []).append(i)
        for t in ordered[: _reach(size, size)]:
            prefixed.setdefault(t, {}).setdefault(size, []).append(i)

    for mid, content in existing:
        known.append(_Known(mid, content, _tokens(content), None, position=len(known)))
        index(len(known) - 1)
    decisions: list[Decision] = []
    for cand in candidates:
        tokens = _key_tokens(cand.key)  # the candidate's key is normalize_key(content) (light/facts.py)
        size = len(tokens)
        related = set(by_key.get(cand.key, ()))
        ordered = _ordered(tokens, rarity)
        for position, t in enumerate(ordered):
            for n, entries in prefixed.get(t, {}).items():
                if position < _reach(size, min(n, size)):
                    related.update(entries)
        least = math.ceil(NEAR_SHARE * size)  # position < _reach(entry size, size)
        for t in ordered[: _reach(size, size)]:
            for remaining, entries in by_token.get(t, {}).items():
                if remaining >= least:
                    related.update(entries)
        best, rank, kind = None, 0, ""
        for i in sorted(related):
            entry = known[i]
            # Every relation but a twin by key needs 3/4 of the smaller token set shared
            # (NEAR_SHARE): the pairs the prefixes admit mostly fail that, cheaply told.
            if cand.key != entry.key and len(tokens & entry.tokens) < NEAR_SHARE * min(
                size, len(entry.tokens)
            ):
                continue
            r, k = _relation(cand.key, tokens, entry)
            if r > rank:
                best, rank, kind = entry, r, k
        if best is None:
            known.append(
                _Known(None, cand.content, tokens, len(decisions), key=cand.key, position=len(known))
            )
            index(len(known) - 1)
            decisions.append(Decision("create", cand, None, cand.content, "new"))
            continue
        ref = f"f-{best.memory_id}" if best.memory_id is not None else "an earlier candidate"
        if kind != "fuller":
            decisions.append(Decision("skip", cand, best.memory_id, None, f"{kind} of {ref}"))
            continue
        if best.decision is not None:  # an earlier write of this batch is superseded
            old = decisions[best.decision]
            decisions[best.decision] = Decision(
                "skip", old.candidate, best.memory_id, None, "superseded by a fuller candidate"
            )
        action = "update" if best.memory_id is not None else "create"
        best.content, best.tokens, best.decision = cand.content, tokens, len(decisions)
        best.key = cand.key
        index(best.position)  # stale index entries only widen the candidates; _relation decides
        decisions.append(Decision(action, cand, best.memory_id, cand.content, f"fuller version of {ref}"))
    return decisions
