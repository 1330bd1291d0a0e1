"""Offline engine decisions for deep sleep, as pure functions over a snapshot of memories.

Each round of deep sleep (DESIGN §5) asks one question of the whole active store; the
offline engine answers it with the deterministic heuristics below, and the step turns the
answers into ordinary tool calls (deprecate / create / merge / update), so validation,
scope and audit are the same as for the LLM engine:

1. `find_contradictions` — which memories an exclusive clash or a newer fact makes false.
2. `split_parts` — which entries pack several independent facts, and the parts.
3. `merge_groups` — which entries say the same thing, and the fuller content to keep.
4. `stale_pins` — which pins are no longer earning their place in the resident set.

Nothing here touches the database or Dagster; inputs are `MemoryView` snapshots. The
heuristics are a deliberately conservative baseline: when unsure, they propose nothing.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from .attributes import (
    ATTRIBUTE_CLASS,
    Fact,
    extract_attribute,
    extract_attributes,
    facts_conflict,
    guess_subject,
    resolve_pronoun,
)
from .sentences import is_long, is_tiny, split_sentences
from .similarity import (
    NORMALIZED_CONTENT_SQL,
    grams,
    has_cjk,
    jaccard,
    normalize_content,
    normalized_content_sql,
    similarity,
)

__all__ = [
    "NORMALIZED_CONTENT_SQL",
    "RESIDENT_CAP",
    "Contradiction",
    "MemoryView",
    "MergeGroup",
    "extract_attribute",
    "extract_attributes",
    "find_contradictions",
    "is_split_candidate",
    "merge_groups",
    "normalize_content",
    "normalized_content_sql",
    "similarity",
    "split_parts",
    "stale_pins",
]

RESIDENT_CAP = 40  # the resident read is capped at 40 pins (seed v2, round 4)


@dataclass(frozen=True)
class MemoryView:
    """The fields of an active `semantic_memory` row the heuristics read."""

    id: int
    type: str
    content: str
    confidence: float
    source_sessions: tuple[str, ...]
    observed_at: datetime | None
    updated_at: datetime
    pinned: bool
    pinned_at: datetime | None
    reference_count: float
    last_referenced_at: datetime | None


def _recency(m: MemoryView) -> tuple[datetime, int]:
    """Which of two memories is newer: when it was observed (falling back to when the row
    last changed, for memories written without observed_at), then the id."""
    return (m.observed_at or m.updated_at, m.id)


# --- round 1: contradiction + expiry ----------------------------------------------------


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
    days = (_recency(newer)[0] - _recency(older)[0]).total_seconds() / 86400
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
        items = sorted(by_key[key], key=lambda item: _recency(item[0]), reverse=True)
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


# --- round 2: split ---------------------------------------------------------------------

# A later sentence that leans on an earlier one cannot stand alone as a memory.
_DEPENDENT_START_EN = re.compile(
    r"^(?:it|its|this|that|these|those|such|which|then|however|but|so|because|therefore|thus|"
    r"hence|they|them|their|afterwards|meanwhile|as\s+a\s+result|in\s+that\s+case)\b",
    re.IGNORECASE,
)
_DEPENDENT_START_CN = re.compile(
    r"^(?:它|这|那|此|该|其|但|不过|然而|所以|因此|因为|于是|然后|而且|并且|他们|她们|后来|同时)"
)
# Anaphora inside a later sentence ("She found it inspiring"): also dependent. Errs on
# the side of not splitting, since a wrong split produces two broken memories.
# "this summer" / 这周 point at the time of the memory, not back at a sentence.
_TIME_WORDS_EN = r"year|month|week|weekend|summer|winter|spring|fall|autumn|morning|evening|time"
_ANAPHORA_EN = re.compile(
    rf"\b(?:it|them|there|the\s+same|these|those|(?:this|that)(?!\s+(?:{_TIME_WORDS_EN})\b))\b",
    re.IGNORECASE,
)
_ANAPHORA_CN = re.compile(r"它|这(?!周|个月|次|学期|段时间|天|年)|那(?!么)|此|其中|该")
_PRONOUN_EN = re.compile(r"^(?P<p>she|he)\b", re.IGNORECASE)
_POSSESSIVE_EN = re.compile(r"^(?P<p>her|his)\s+", re.IGNORECASE)
_PRONOUN_CN = re.compile(r"^(?P<p>[她他])(?![们])")
_NO_SUBJECT_EN = re.compile(r"^also\s+")
_NO_SUBJECT_CN = re.compile(r"^[也还]")
_GENDER = {"she": "f", "her": "f", "he": "m", "his": "m", "她": "f", "他": "m"}


def _with_subject(sentence: str, subject: str | None) -> str | None:
    """The sentence with a leading pronoun (or a missing subject) replaced by the person
    it refers to; None when it needs a subject we do not know."""
    if m := _PRONOUN_EN.match(sentence) or _PRONOUN_CN.match(sentence):
        if subject is None or sentence[m.end() : m.end() + 1] in ("'", "\u2019"):
            return None  # "She's" is "she is" or "she has": not worth guessing
        return resolve_pronoun(_GENDER[m["p"].lower()], subject) + sentence[m.end() :]
    if m := _POSSESSIVE_EN.match(sentence):
        if subject is None:
            return None
        return f"{resolve_pronoun(_GENDER[m['p'].lower()], subject)}'s " + sentence[m.end() :]
    if _NO_SUBJECT_EN.match(sentence):
        return None if subject is None else f"{subject} {sentence}"
    if _NO_SUBJECT_CN.match(sentence):
        return None if subject is None else f"{subject}{sentence}"
    return sentence


def _finish(sentence: str) -> str:
    sentence = sentence.strip()
    if sentence[:1].islower() and sentence[:1].isascii():
        sentence = sentence[0].upper() + sentence[1:]
    cjk_tail = has_cjk(sentence[-1:]) or sentence.endswith(("；", "，"))
    sentence = sentence.rstrip(";；,，")
    if sentence.endswith((".", "!", "?", "。", "！", "？", '"', "”", "」")):
        return sentence
    return sentence + ("。" if cjk_tail else ".")


def split_parts(memory: MemoryView) -> list[str] | None:
    """Self-contained sentences when a memory holds several independent facts, else None.

    Boundaries: . ! ? 。！？； ; and "and also". A part that opens with she/he/her/his
    (她/他), or with no subject ("also …", "也…"), gets the person named at the start of
    the memory ("She also …" → "Caroline also …"). None when there is one sentence only,
    when a later sentence depends on an earlier one (opens with It/This/That/But/它/这/但…,
    or refers back with "it"/"there"/这/那), when a pronoun cannot be resolved, or when a
    part would be a fragment (< 12 characters, < 6 for CJK text).
    """
    sentences = split_sentences(memory.content)
    if len(sentences) < 2:
        return None
    subject = guess_subject(sentences[0])
    parts: list[str] = []
    for i, sentence in enumerate(sentences):
        if is_tiny(sentence):
            return None
        if i > 0:
            if _DEPENDENT_START_EN.match(sentence) or _DEPENDENT_START_CN.match(sentence):
                return None
            if _ANAPHORA_EN.search(sentence) or _ANAPHORA_CN.search(sentence):
                return None
        rewritten = _with_subject(sentence, subject)
        if rewritten is None:
            return None
        parts.append(_finish(rewritten))
    if len({normalize_content(p) for p in parts}) < 2:
        return None  # the same fact twice is a merge, not a split
    return parts


def is_split_candidate(content: str) -> bool:
    """Cheap pre-filter for round 2 (incremental mode splits only candidates): more than
    one sentence, or long enough to probably pack several facts."""
    return is_long(content) or len(split_sentences(content)) > 1


# --- round 3: merge ---------------------------------------------------------------------


@dataclass(frozen=True)
class MergeGroup:
    """Memories that say the same thing: merge `ids` into one memory with `content` (the
    fullest of them; `merge_semantic_memories` stitches sources and observed_at)."""

    ids: tuple[int, ...]
    content: str
    reason: str


_NEGATION = re.compile(
    r"\b(?:not|no|never|nor|without|dislikes?|hates?|\w+n t)\b"
    r"|不(?!错|过|但|仅|久|少|同|断)|没|未(?!来)|别(?!人)|非(?!常)|无(?!论)"
)
_NEGATION_BEFORE = re.compile(r"(?:\b(?:not|no|never|longer|\w+n t)\s*|不再?|没有?|未|别|非)$")


@dataclass(frozen=True)
class _Entry:
    memory: MemoryView
    norm: str
    grams: frozenset[str]
    numbers: frozenset[str]
    negations: int
    facts: tuple[Fact, ...]
    tiny: bool


def _entry(m: MemoryView) -> _Entry:
    norm = normalize_content(m.content)
    return _Entry(
        memory=m,
        norm=norm,
        grams=grams(m.content),
        numbers=frozenset(re.findall(r"\d+", norm)),
        negations=len(_NEGATION.findall(norm)),
        facts=tuple(extract_attributes(m.content)),
        tiny=is_tiny(m.content),
    )


def _contained_at_boundary(short: str, long: str) -> int | None:
    """Where `short` occurs in `long` on word boundaries (CJK has none to respect)."""
    start = long.find(short)
    while start != -1:
        end = start + len(short)
        left_ok = start == 0 or long[start - 1] == " " or has_cjk(long[start - 1] + short[0])
        right_ok = end == len(long) or long[end] == " " or has_cjk(short[-1] + long[end])
        if left_ok and right_ok:
            return start
        start = long.find(short, start + 1)
    return None


def _facts_clash(a: _Entry, b: _Entry) -> bool:
    return any(
        fa.subject == fb.subject
        and fa.attribute == fb.attribute
        and (facts_conflict(fa, fb) or facts_conflict(fb, fa))
        for fa in a.facts
        for fb in b.facts
    )


def _edge(a: _Entry, b: _Entry, threshold: float) -> tuple[float, int, str] | None:
    """(score, rank, description) when a and b duplicate each other, else None.

    Guards keep look-alikes apart: a clash of extracted facts ("is 34" / "is 35"), a
    different set of numbers, or a different count of negations ("likes" / "doesn't like")
    block a near-duplicate; containment only needs no negation right before the span."""
    ida, idb = a.memory.id, b.memory.id
    if a.norm == b.norm and a.norm:
        return (1.0, 0, f"f-{ida} and f-{idb} are identical once normalized")
    short, long = (a, b) if (len(a.norm), ida) < (len(b.norm), idb) else (b, a)
    contained = False
    if not short.tiny and short.norm in long.norm:
        at = _contained_at_boundary(short.norm, long.norm)
        contained = at is not None and not _NEGATION_BEFORE.search(long.norm[:at].rstrip())
    if not contained:
        if a.numbers != b.numbers or a.negations != b.negations:
            return None
        if min(len(a.grams), len(b.grams)) < threshold * max(len(a.grams), len(b.grams)) - 1e-9:
            return None  # J ≤ |smaller| / |larger|: the threshold is out of reach
        score = jaccard(a.grams, b.grams)
        if score < threshold:
            return None
    if (a.facts and b.facts) and _facts_clash(a, b):
        return None
    if contained:
        return (1.0, 1, f"f-{short.memory.id} is contained in f-{long.memory.id}")
    return (score, 2, f"f-{ida} ~ f-{idb} similarity {score:.2f}")


def _candidate_pairs(entries: list[_Entry], threshold: float) -> set[tuple[int, int]]:
    """Index pairs worth an exact check, so a large store is not compared n² times.

    Jaccard: prefix filtering. Order grams rarest first; J(A, B) ≥ t implies
    |A ∩ B| ≥ ceil(t·|X|) for X = A and B, so the first |X| − ceil(t·|X|) + 1 grams of A
    and of B share at least one gram. Only those prefixes are indexed and probed.
    Containment: every multi-character gram of the contained text is a gram of the
    container (whole words, CJK bigrams), so the container is in the postings of each of
    the contained text's rarest such grams. Exact twins: same normalized text.
    """
    df = Counter(g for e in entries for g in e.grams)
    ranked = [sorted(e.grams, key=lambda g: (df[g], g)) for e in entries]
    prefix_postings: dict[str, list[int]] = defaultdict(list)
    full_postings: dict[str, set[int]] = defaultdict(set)
    for i, grams_i in enumerate(ranked):
        size = len(grams_i) - math.ceil(threshold * len(grams_i) - 1e-9) + 1
        for g in grams_i[: max(size, 1)]:
            prefix_postings[g].append(i)
        for g in grams_i:
            full_postings[g].add(i)

    pairs: set[tuple[int, int]] = set()
    for members in prefix_postings.values():
        # Length filter: J(A, B) ≤ |A| / |B| for |A| ≤ |B|, so stop once B is too large.
        members.sort(key=lambda k: len(ranked[k]))
        for x, i in enumerate(members):
            limit = len(ranked[i]) / threshold + 1e-9
            for j in members[x + 1 :]:
                if len(ranked[j]) > limit:
                    break
                pairs.add((min(i, j), max(i, j)))
    for i, e in enumerate(entries):
        if e.tiny:
            continue
        probes = [g for g in ranked[i] if len(g) > 1][:3]
        if not probes:
            continue
        containers = set.intersection(*(full_postings[g] for g in probes))
        pairs.update((min(i, j), max(i, j)) for j in containers if len(entries[j].norm) > len(e.norm))
    by_norm: dict[str, list[int]] = defaultdict(list)
    for i, e in enumerate(entries):
        if e.norm:
            by_norm[e.norm].append(i)
    for same in by_norm.values():
        pairs.update((i, j) for x, i in enumerate(same) for j in same[x + 1 :])
    return pairs


def _newest_longest(group: list[MemoryView]) -> MemoryView:
    return max(group, key=lambda m: (len(m.content.strip()), _recency(m)))


def merge_groups(memories: list[MemoryView], threshold: float = 0.75) -> list[MergeGroup]:
    """Disjoint groups of duplicates among memories of the same type.

    Two memories are linked when their normalized content is identical, one is contained
    in the other, or their similarity is ≥ `threshold` (with the guards of `_edge`).
    Groups grow by complete linkage — strongest links first, and two groups join only if
    every cross pair is linked — so a chain A~B~C never lumps A with a dissimilar C.
    The kept content is the longest (ties: the newest). Sorted by smallest id.
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"merge_groups: threshold must be in (0, 1], got {threshold}")
    by_type: dict[str, list[MemoryView]] = defaultdict(list)
    for m in memories:
        by_type[m.type].append(m)

    groups: list[MergeGroup] = []
    for mtype in sorted(by_type):
        entries = [_entry(m) for m in sorted(by_type[mtype], key=lambda m: m.id)]
        edges: dict[tuple[int, int], tuple[float, int, str]] = {}
        for i, j in _candidate_pairs(entries, threshold):
            edge = _edge(entries[i], entries[j], threshold)
            if edge is not None:
                edges[(i, j)] = edge

        cluster_of = {i: i for i in range(len(entries))}
        members: dict[int, list[int]] = {i: [i] for i in range(len(entries))}
        reasons: dict[int, list[str]] = {i: [] for i in range(len(entries))}
        for (i, j), (_score, _rank, why) in sorted(
            edges.items(), key=lambda kv: (-kv[1][0], kv[1][1], kv[0])
        ):
            ci, cj = cluster_of[i], cluster_of[j]
            if ci == cj:
                continue
            if not all((min(a, b), max(a, b)) in edges for a in members[ci] for b in members[cj]):
                continue
            keep, gone = min(ci, cj), max(ci, cj)
            for k in members[gone]:
                cluster_of[k] = keep
            members[keep] += members.pop(gone)
            reasons[keep] += reasons.pop(gone) + [why]

        for root, idx in members.items():
            if len(idx) < 2:
                continue
            group = [entries[k].memory for k in idx]
            groups.append(
                MergeGroup(
                    ids=tuple(sorted(m.id for m in group)),
                    content=_newest_longest(group).content,
                    reason="; ".join(reasons[root]),
                )
            )
    return sorted(groups, key=lambda g: g.ids)


# --- round 4: pin review ----------------------------------------------------------------


def _last_activity(m: MemoryView) -> datetime:
    return m.last_referenced_at or m.pinned_at or m.updated_at


def stale_pins(
    memories: list[MemoryView],
    now: datetime,
    stale_days: int = 30,
    resident_cap: int = RESIDENT_CAP,
) -> list[tuple[int, str]]:
    """Pins to suggest unpinning, as (id, reason).

    Stale: pinned and not referenced within `stale_days` (last_referenced_at, else
    pinned_at, else updated_at). Over cap: if the pins that remain still exceed
    `resident_cap`, the least referenced beyond the cap (lowest reference_count, then
    longest unused, then lowest id) — the resident read is capped anyway, so these pins
    do nothing but crowd it. Stale first (oldest activity first), then over-cap.
    Datetimes must be all timezone-aware (or all naive)."""
    cutoff = now - timedelta(days=stale_days)
    pinned = [m for m in memories if m.pinned]
    stale = sorted((m for m in pinned if _last_activity(m) < cutoff), key=lambda m: (_last_activity(m), m.id))
    out = [
        (
            m.id,
            f"stale pin: not referenced for {(now - _last_activity(m)).days} days "
            f"(since {_last_activity(m).date().isoformat()}; threshold {stale_days} days)",
        )
        for m in stale
    ]
    stale_ids = {m.id for m in stale}
    remaining = [m for m in pinned if m.id not in stale_ids]
    if len(remaining) > resident_cap:
        ranked = sorted(remaining, key=lambda m: (-m.reference_count, -_last_activity(m).timestamp(), m.id))
        for m in sorted(ranked[resident_cap:], key=lambda m: (m.reference_count, _last_activity(m), m.id)):
            out.append(
                (
                    m.id,
                    f"over the resident cap: {len(remaining)} pins for {resident_cap} resident slots, "
                    f"and this one is among the least referenced (reference_count {m.reference_count:g})",
                )
            )
    return out
