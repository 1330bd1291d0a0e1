"""Round 3 of deep sleep, offline: `merge_groups`, which entries say the same thing (identical,
contained, near-duplicate, or the same content words or preference in other words) and the
fuller content to keep."""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from dataclasses import dataclass

from anima_pipeline.core.errors import ConfigError
from anima_pipeline.night.steps.deep.memory_view import MemoryView, recency
from anima_pipeline.text.attributes import Fact, extract_attributes, facts_conflict, guess_subject, like_key
from anima_pipeline.text.sentences import is_tiny, split_sentences
from anima_pipeline.text.similarity import grams, has_cjk, jaccard, normalize_content


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


_STOPWORDS_EN = frozenset(
    """a an the and or of to in on at for with by from as is are was were be been being am do does
    did have has had it its this that these those he she they him her his their them i my me we our
    you your s about into very really so too also just still then than""".split()
)
_STOP_CHARS_CN = re.compile(
    r"[的了很也还都是就在着过吧呢啊呀嘛最更太真挺和与及]|非常|特别|一直|已经|仍然|依然"
)
_PREFERENCE_WORDS = frozenset(
    "like love enjoy adore prefer favourite favorite fan fond big huge food dish drink thing one".split()
)
_MIN_SUBSET_WORDS = 3  # "Ruth likes tea" is the smallest statement the subset rule merges
_MIN_SUBSET_OVERLAP = 0.5  # the shorter holds at least half of the longer's content words
_MAX_PREFERENCE_EXTRA = 3  # words of the dropped memory beyond subject, verb and object


def _stem(word: str) -> str:
    word = word.removesuffix("'s")
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def memory_terms(text: str) -> frozenset[str]:
    """What a memory says, as a set to compare with another memory's: stemmed non-stopwords
    for Latin text, character bigrams without function characters (的 了 很 也 …) for CJK
    text. Not light sleep's `content_words` (text/words.py), which counts the informative
    words of a chat sentence, unstemmed and in order."""
    norm = normalize_content(text)
    if has_cjk(norm):
        out: set[str] = set()
        for run in re.findall(r"\S+", _STOP_CHARS_CN.sub(" ", norm)):
            out.update(run[i : i + 2] for i in range(len(run) - 1)) if len(run) > 1 else out.add(run)
        return frozenset(out)
    return frozenset(_stem(w) for w in norm.split() if w not in _STOPWORDS_EN)


@dataclass(frozen=True)
class _Entry:
    memory: MemoryView
    norm: str
    grams: frozenset[str]
    numbers: frozenset[str]
    negations: int
    facts: tuple[Fact, ...]
    tiny: bool
    words: frozenset[str] = frozenset()
    subject: str | None = None
    cjk: bool = False


def _entry(m: MemoryView) -> _Entry:
    norm = normalize_content(m.content)
    sentences = split_sentences(m.content)
    subject = guess_subject(sentences[0]) if sentences else None
    return _Entry(
        memory=m,
        norm=norm,
        grams=grams(m.content),
        numbers=frozenset(re.findall(r"\d+", norm)),
        negations=len(_NEGATION.findall(norm)),
        facts=tuple(extract_attributes(m.content)),
        tiny=is_tiny(m.content),
        words=memory_terms(m.content),
        subject=normalize_content(subject) if subject else None,
        cjk=has_cjk(m.content),
    )


def _object_refines(a: str, b: str) -> bool:
    """The same thing, one said more precisely: hotpot / spicy hotpot, 火锅 / 麻辣火锅
    (the head, the last word, must agree: green tea is not black tea)."""
    a, b = like_key(a), like_key(b)
    if a == b:
        return True
    short, long = sorted((a, b), key=len)
    if has_cjk(short) or has_cjk(long):
        return long.endswith(short) and len(short) >= 2
    ws, wl = short.split(), long.split()
    return ws[-1] == wl[-1] and set(ws) <= set(wl)


_PRONOUN_OBJECT = frozenset(
    "it them this that these those one ones him her something everything stuff".split()
)


def _names_a_thing(*objects: str) -> bool:
    """Whether each object names a thing ("likes holding them" does not): no pronoun head."""
    for obj in objects:
        key = like_key(obj)
        head = key if has_cjk(key) else (key.split() or [""])[-1]
        if not head or head in _PRONOUN_OBJECT or head in _STOPWORDS_EN or re.search(r"[它这那]", head):
            return False
    return True


def _preference_objects(e: _Entry) -> list[tuple[str, str]]:
    """(subject, object) of the asserted likes of a memory."""
    return [(f.subject, f.value) for f in e.facts if f.attribute == "likes" and f.polarity > 0]


def _same_preference(short: _Entry, long: _Entry) -> str | None:
    """The object both memories like, when they state one preference of one person and
    the shorter (the one dropped) says little else."""
    if short.cjk != long.cjk or short.negations or long.negations:
        return None
    for subject, obj in _preference_objects(short):
        for subject2, obj2 in _preference_objects(long):
            if subject != subject2 or not _object_refines(obj, obj2) or not _names_a_thing(obj, obj2):
                continue
            known = memory_terms(subject) | memory_terms(obj) | memory_terms(obj2)
            extra = {
                w
                for w in short.words - known
                if not (_stem(w) in _PREFERENCE_WORDS or w in _PREFERENCE_WORDS)
            }
            if short.cjk:
                extra = {g for g in extra if not re.search("喜|欢|爱|好", g)}
                if len(extra) > 2 * _MAX_PREFERENCE_EXTRA:
                    continue
            elif len(extra) > _MAX_PREFERENCE_EXTRA:
                continue
            return obj2 if len(obj2) >= len(obj) else obj
    return None


def _subset(short: _Entry, long: _Entry) -> bool:
    """The shorter's content words are all in the longer (contained in meaning)."""
    return (
        short.subject is not None
        and short.subject == long.subject
        and short.cjk == long.cjk
        and len(short.words) >= _MIN_SUBSET_WORDS
        and short.words <= long.words
        and len(short.words) >= _MIN_SUBSET_OVERLAP * len(long.words)
        and short.numbers <= long.numbers
        and short.negations == long.negations
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
    similar = False
    if not contained and a.numbers == b.numbers and a.negations == b.negations:
        if min(len(a.grams), len(b.grams)) >= threshold * max(len(a.grams), len(b.grams)) - 1e-9:
            score = jaccard(a.grams, b.grams)  # (else J ≤ |smaller| / |larger| is out of reach)
            similar = score >= threshold
    described = None
    if not contained and not similar:
        # In other words: same content words, or the same preference of the same person.
        wshort, wlong = sorted((a, b), key=lambda e: (len(e.words), len(e.norm), e.memory.id))
        if _subset(wshort, wlong):
            described = f"f-{wshort.memory.id}'s content words are all in f-{wlong.memory.id}"
        elif obj := _same_preference(short, long):
            described = f"f-{ida} and f-{idb} state the same preference ({obj!r})"
        else:
            return None
    if (a.facts and b.facts) and _facts_clash(a, b):
        return None
    if contained:
        return (1.0, 1, f"f-{short.memory.id} is contained in f-{long.memory.id}")
    if similar:
        return (score, 2, f"f-{ida} ~ f-{idb} similarity {score:.2f}")
    return (jaccard(a.grams, b.grams), 3, described or "")


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
    # Subset: the longer holds every content word of the shorter, so it is in the
    # postings of the shorter's rarest words. Preference: same subject and object head.
    wdf = Counter(w for e in entries for w in e.words)
    word_postings: dict[str, set[int]] = defaultdict(set)
    for i, e in enumerate(entries):
        for w in e.words:
            word_postings[w].add(i)
    for i, e in enumerate(entries):
        if e.subject is None or len(e.words) < _MIN_SUBSET_WORDS:
            continue
        probes = sorted(e.words, key=lambda w: (wdf[w], w))[:2]
        containers = set.intersection(*(word_postings[w] for w in probes))
        pairs.update((min(i, j), max(i, j)) for j in containers if j != i)
    by_preference: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, e in enumerate(entries):
        for subject, obj in _preference_objects(e):
            key = like_key(obj)
            head = key[-2:] if has_cjk(key) else key.split()[-1] if key.split() else key
            by_preference[(subject, head)].append(i)
    for same in by_preference.values():
        pairs.update((min(i, j), max(i, j)) for x, i in enumerate(same) for j in same[x + 1 :] if i != j)
    by_norm: dict[str, list[int]] = defaultdict(list)
    for i, e in enumerate(entries):
        if e.norm:
            by_norm[e.norm].append(i)
    for same in by_norm.values():
        pairs.update((i, j) for x, i in enumerate(same) for j in same[x + 1 :])
    return pairs


def _newest_longest(group: list[MemoryView]) -> MemoryView:
    return max(group, key=lambda m: (len(m.content.strip()), recency(m)))


def merge_groups(memories: list[MemoryView], threshold: float = 0.75) -> list[MergeGroup]:
    """Disjoint groups of duplicates among memories of the same type.

    Two memories are linked when their normalized content is identical, one is contained
    in the other, or their similarity is ≥ `threshold` (with the guards of `_edge`).
    Groups grow by complete linkage — strongest links first, and two groups join only if
    every cross pair is linked — so a chain A~B~C never lumps A with a dissimilar C.
    The kept content is the longest (ties: the newest). Sorted by smallest id.
    """
    if not 0.0 < threshold <= 1.0:
        raise ConfigError(f"merge_groups: threshold must be in (0, 1], got {threshold}")
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
