"""Round 1 of deep sleep, offline: `find_contradictions`, which memories an exclusive clash
or a newer fact makes false (a contradiction, or an expiry: a change over time)."""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from anima_pipeline.night.steps.deep.memory_view import MemoryView, recency
from anima_pipeline.text.attributes import ATTRIBUTE_CLASS, Fact, extract_attributes, facts_conflict


@dataclass(frozen=True)
class Contradiction:
    """`loser_id` should be deprecated. kind 'contradiction': an exclusive attribute with
    two values that cannot both hold, the older loses; kind 'expiry': a newer fact
    supersedes it (a change over time). `winner_id` is the memory that beats it (None is
    reserved for an expiry with no superseding memory; the current rules always name one)."""

    loser_id: int
    winner_id: int | None
    kind: str
    attribute: str
    reason: str


def _describe(f: Fact) -> str:
    if f.attribute == "likes":
        return f"{'likes' if f.polarity > 0 else 'does not like'} {f.value!r}"
    return f"{f.attribute} {'=' if f.polarity > 0 else '!='} {f.value!r}"


def _ages_explained_by_time(older: MemoryView, old: Fact, newer: MemoryView, new: Fact) -> bool:
    """34 then 35 a year later is ageing, not a contradiction."""
    days = (recency(newer)[0] - recency(older)[0]).total_seconds() / 86400
    grown = int(new.value) - int(old.value)
    return days > 0 and 0 < grown <= math.ceil(days / 365.25)


def _kind(older: MemoryView, old: Fact, newer: MemoryView, new: Fact) -> str:
    cls = ATTRIBUTE_CLASS[old.attribute]
    if cls == "immutable":
        return "contradiction"
    if cls == "changeable" or new.changed:
        return "expiry"
    if old.attribute == "age" and _ages_explained_by_time(older, old, newer, new):
        return "expiry"
    return "contradiction"


def find_contradictions(memories: list[MemoryView]) -> list[Contradiction]:
    """Memories made false by another memory about the same subject and attribute.

    Per (subject, attribute), facts are visited newest first; a fact survives unless it
    clashes with a newer *surviving* fact, and then it loses to the newest such one. So
    tiger (old), goat, tiger (new) deprecates only goat: the old tiger agrees with the
    current value and is left for the merge round. Facts of one memory never clash with
    each other. Each memory is reported at most once (its first loss); ordered by loser id.
    """
    by_key: dict[tuple[str, str], list[tuple[MemoryView, Fact]]] = defaultdict(list)
    for m in memories:
        for fact in extract_attributes(m.content):
            by_key[(fact.subject, fact.attribute)].append((m, fact))

    losses: dict[int, Contradiction] = {}
    for key in sorted(by_key):
        items = sorted(by_key[key], key=lambda item: recency(item[0]), reverse=True)
        survivors: list[tuple[MemoryView, Fact]] = []
        for m, fact in items:
            beaten_by = next(
                ((w, wf) for w, wf in survivors if w.id != m.id and facts_conflict(fact, wf)),
                None,
            )
            if beaten_by is None:
                survivors.append((m, fact))
                continue
            w, wf = beaten_by
            if m.id in losses:
                continue
            kind = _kind(m, fact, w, wf)
            why = (
                "exclusive attribute, both cannot hold; the older one loses"
                if kind == "contradiction"
                else "superseded by a newer fact"
            )
            losses[m.id] = Contradiction(
                loser_id=m.id,
                winner_id=w.id,
                kind=kind,
                attribute=fact.attribute,
                reason=f"{fact.subject}: f-{m.id} {_describe(fact)} vs newer f-{w.id} {_describe(wf)} — {why}",
            )
    return [losses[i] for i in sorted(losses)]
