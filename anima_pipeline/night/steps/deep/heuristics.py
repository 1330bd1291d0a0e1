"""Offline engine decisions for deep sleep, as pure functions over a snapshot of memories.

Each round of deep sleep (night/steps/deep/step.py) asks one question of the whole active store; the
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

from anima_pipeline.text.attributes import (
    ATTRIBUTE_CLASS,
    Fact,
    extract_attribute,
    extract_attributes,
    facts_conflict,
    guess_subject,
    like_key,
    resolve_pronoun,
)
from anima_pipeline.text.sentences import is_long, is_tiny, split_sentences
from anima_pipeline.text.similarity import (
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
_GENDER.update(
    dict.fromkeys(("sister", "daughter", "mother", "mom", "mum", "wife", "girlfriend", "aunt", "niece"), "f")
)
_GENDER.update(
    dict.fromkeys(("brother", "son", "father", "dad", "husband", "boyfriend", "uncle", "nephew"), "m")
)


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


# Clause-level splits: "X is a nurse in Chengdu, she has two kids, and she loves hiking".
_VERB_EN = (
    r"(?:(?:also|still|now|really|actually|just|recently|often|usually|always|never|even)\s+)*"
    r"(?:is|was|are|were|has|had|does|did|can|could|will|would|may|might|must|"
    r"went|got|made|took|came|saw|met|left|found|felt|bought|taught|won|ran|gave|began|became|"
    r"built|wrote|drove|flew|kept|lost|paid|sold|spent|[a-z]{2,}(?:s|ed))\b"
)
_CLAUSE_CUT_EN = re.compile(r",\s+(?:and\s+)?(?=(?:she|he)\s|[A-Z])")
_CLAUSE_CUT_CN = re.compile(r"[，,]\s*(?:而且|并且)?(?=[她他](?!们))")
# Reported speech or another person in the first clause: a later "she" may not be the subject.
_REPORTED = re.compile(
    r"\b(?:said|says|told|tells|thinks?|thought|mentioned|believes?|according|asked|hopes?|wants?)\b|说|觉得|认为|表示|希望|告诉"
)
_PEOPLE_EN = re.compile(
    r"\b(?:son|daughter|brother|sister|mother|mom|mum|father|dad|husband|wife|boyfriend|girlfriend|"
    r"partner|friend|friends|kid|kids|child|children|boss|colleague|coworker|manager|teacher|"
    r"grandma|grandpa|grandmother|grandfather|aunt|uncle|cousin|niece|nephew|baby|neighbou?r|"
    r"him|her|his|she|he|they|them|their|who)\b"
)
_PEOPLE_CN = re.compile(
    r"儿子|女儿|哥哥|弟弟|姐姐|妹妹|爸|妈|父亲|母亲|丈夫|妻子|老公|老婆|男朋友|女朋友|朋友|孩子|同事|"
    r"老板|领导|经理|老师|爷爷|奶奶|外公|外婆|叔叔|阿姨|舅舅|姑姑|表|堂|邻居|他|她|谁"
)
_PLACE_PREP = re.compile(r"\b(?:in|at|from|to|near|of|on)\s+$")
# A piece that itself holds a subordinate clause, or a first piece that only introduces
# the next one, does not stand alone.
_INNER_CLAUSE = re.compile(
    r"[,，;；]|^(?:if|when|while|because|since|although|though|as|after|before|through|once|unless)\b|"
    r"\b(?:but|because|although|though|so|whereas|unless)\b|但|因为|所以|如果|虽然|不过"
)
_INTRODUCTORY = re.compile(r"\b(?:say|said|think|know|guess|admit|believe|bet|hope|feel|mean|agree|tell)$")
# Definite descriptions that point back at the previous clause ("the process").
_BACK_REFERENCE = re.compile(r"\bthe\s+(?:process|experience|idea|thing|whole\s+thing|result|same)\b")


def _appositive(sentence: str, subject: str) -> str | None:
    """The name right after a relation subject: Mei in "Lin Wei's sister Mei is …"."""
    if "'s " not in subject:
        return None
    m = re.match(rf"\s*{re.escape(subject)}\s+(?P<name>[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?)\b", sentence)
    return m["name"] if m else None


def _first_clause_unambiguous(clause: str, subject: str, name: str | None) -> bool:
    """No other person a later pronoun could point at: no relation noun, pronoun or
    capitalised word (but places after in/at/from …) besides the subject itself."""
    rest = clause.strip()
    lead = subject + (f" {name}" if name else "")
    if rest.startswith(lead):
        rest = rest[len(lead) :]
    if has_cjk(clause):
        return not _PEOPLE_CN.search(rest[1:] if rest.startswith("的") else rest)
    if _PEOPLE_EN.search(rest.lower()):
        return False
    for m in re.finditer(r"\b[A-Z][\w-]*", rest):
        if not _PLACE_PREP.search(rest[: m.start()]):
            return False
    return True


def _clause_parts(sentence: str) -> list[str] | None:
    """The clauses of one sentence when each has its own subject and verb and a pronoun in
    them can only mean the sentence's subject; None to keep the sentence whole."""
    cjk = has_cjk(sentence)
    cut = _CLAUSE_CUT_CN if cjk else _CLAUSE_CUT_EN
    pieces = [p.strip() for p in cut.split(sentence)]
    if len(pieces) < 2 or _REPORTED.search(sentence):
        return None
    if any(_INNER_CLAUSE.search(p) for p in pieces) or _INTRODUCTORY.search(pieces[0]):
        return None  # "Ivo is tired, but because of …, Ivo …" / "Ruth has to admit, …"
    subject = guess_subject(pieces[0])
    if subject is None:
        return None
    name = None if cjk else _appositive(pieces[0], subject)
    if not _first_clause_unambiguous(pieces[0], subject, name):
        return None
    if not cjk:
        head = pieces[0][len(subject) :].strip()
        if name:
            head = head[len(name) :].strip()
        if not re.match(_VERB_EN, head):
            return None
    known = _GENDER.get(_relation_word(subject)) if re.search(r"'s |的", subject) else None
    parts = [pieces[0]]
    for piece in pieces[1:]:
        if _ANAPHORA_EN.search(piece) or _ANAPHORA_CN.search(piece) or "'" in piece.split(" ")[0]:
            return None
        if _BACK_REFERENCE.search(piece.lower()):
            return None
        m = _PRONOUN_CN.match(piece) if cjk else _PRONOUN_EN.match(piece)
        if m:
            gender = _GENDER[m["p"].lower()]
            if known is not None and gender != known:
                return None  # "X's sister …, he …": someone else
            rest = piece[m.end() :].strip()
            if not cjk and not re.match(_VERB_EN, rest):
                return None
            piece = f"{name or subject}{rest}" if cjk else f"{name or subject} {rest}"
        elif cjk:
            return None
        else:
            other = guess_subject(piece)
            if other is None or not re.match(_VERB_EN, piece[len(other) :].strip()):
                return None
        if is_tiny(piece):
            return None
        parts.append(piece)
    return parts


def _relation_word(subject: str) -> str:
    return subject.rsplit(" ", 1)[-1].lower()


def split_parts(memory: MemoryView) -> list[str] | None:
    """Self-contained sentences when a memory holds several independent facts, else None.

    Boundaries: . ! ? 。！？； ; and "and also". A part that opens with she/he/her/his
    (她/他), or with no subject ("also …", "也…"), gets the person named at the start of
    the memory ("She also …" → "Ruth also …"). None when there is one sentence only,
    when a later sentence depends on an earlier one (opens with It/This/That/But/它/这/但…,
    or refers back with "it"/"there"/这/那), when a pronoun cannot be resolved, or when a
    part would be a fragment (< 12 characters, < 6 for CJK text).
    """
    sentences = []
    for sentence in split_sentences(memory.content):
        sentences += _clause_parts(sentence) or [sentence]
    if len(sentences) < 2:
        return None
    subject = guess_subject(sentences[0])
    if subject is not None and normalize_content(sentences[0]) == normalize_content(subject):
        subject = None  # "Oliver's hilarious.": the 's was "is", not a relation
    if subject is not None and (
        _REPORTED.search(sentences[0]) or not _first_clause_unambiguous(sentences[0], subject, None)
    ):
        subject = None  # "Ruth said it was Ivo, …; his voice …": whose voice?
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
    text. Not light sleep's `content_words` (light_text.py), which counts the informative
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
            (
                f"stale pin: not referenced for {(now - _last_activity(m)).days} days "
                f"(since {_last_activity(m).date().isoformat()}; threshold {stale_days} days)"
            ),
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
                    (
                        f"over the resident cap: {len(remaining)} pins for {resident_cap} resident slots, "
                        f"and this one is among the least referenced (reference_count {m.reference_count:g})"
                    ),
                )
            )
    return out
