"""Offline light-sleep heuristics: one day of conversation in, memory candidates out.

These pure functions are the offline engine's stand-in for the three light-sleep
LLM stages (semantic facts, emotional anchors, narrative significance) and the
"message 2" dedup. They are an honest baseline: pattern matching on first-person
statements in English and Chinese, no world knowledge, no coreference beyond the
previous sentence. They never touch the database; the light-sleep step turns
their output into validated tool calls.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime

from . import lexicon as lx
from .dates import resolve_relative_dates

__all__ = [
    "AnchorCandidate",
    "Decision",
    "FactCandidate",
    "Utterance",
    "dedup_against",
    "detect_anchors",
    "extract_facts",
    "is_small_talk",
    "narrative_significance",
    "normalize_key",
    "resolve_relative_dates",
]


@dataclass(frozen=True)
class Utterance:
    """One message of the day, tool calls already stripped; created_at is local and tz-aware."""

    conversation_id: str
    message_id: str
    role: str  # 'user' | 'assistant'
    speaker: str | None
    text: str
    created_at: datetime


@dataclass(frozen=True)
class FactCandidate:
    """A proposed semantic memory; `key` is what within-day and store dedup compare."""

    type: str  # world | experience | preference | opinion | imprint
    content: str
    observed_at: datetime
    conversation_id: str
    confidence: float
    key: str


@dataclass(frozen=True)
class AnchorCandidate:
    """A proposed emotional anchor: the mood of a conversation or a turning point in it."""

    conversation_id: str
    occurred_at: datetime
    emotion: str
    valence: float  # -1..1
    arousal: float  # 0..1
    intensity: float  # 0..1
    trigger: str
    note: str


@dataclass(frozen=True)
class Decision:
    """What to do with one candidate against the active memories of the same sessions."""

    action: str  # 'create' | 'update' | 'skip'
    candidate: FactCandidate
    memory_id: int | None = None  # the memory updated or twinned
    content: str | None = None  # content to write for create / update
    reason: str = ""


# --- text utilities -----------------------------------------------------------------

_CJK = re.compile(r"[\u3400-\u9fff]")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]*|\d+")
_ISO_DATE = re.compile(r"(?<!\d)(?:19|20)\d{2}(?!\d)")  # any year, so also any ISO date
_ABBREVIATION = re.compile(r"\b(?:Dr|Mr|Mrs|Ms|St|Jr|Sr|vs|etc|e\.g|i\.e|Mt)\.$")
_EN_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")
_ZH_SPLIT = re.compile(r"(?<=[。！？；!?;])|\n+")
_MAX_CHARS = 240  # a memory is one fact, not a paragraph
_CUE_WEIGHTS = {"preference": 2.0, "world": 2.0}  # stable facts are worth keeping even when short
_MIN_EVENT = 1.8  # the same, for a short first-person event with a concrete object
_MIN_SCORE = 2.6  # informativeness a sentence needs to become a memory (see _en_score)
_MIN_SCORE_ZH = 2.5  # Chinese sentences are scored on their own scale (cue + content characters)
_MIN_ATTRIBUTED = 2.0  # the same, for a statement without first person (kept as reported speech)
_IMPRINT_FEELING = 0.7  # message intensity that makes a milestone or turning point an imprint
_CONFIDENCE = {"world": 0.8, "preference": 0.8, "experience": 0.7, "opinion": 0.6, "imprint": 0.75}
_ROLE_LABELS = {  # (language, role) -> (default name, label used when the name itself is the fact)
    ("en", "user"): ("the user", "The user's"),
    ("en", "assistant"): ("the assistant", "The assistant's"),
    ("zh", "user"): ("用户", "用户"),
    ("zh", "assistant"): ("助手", "助手"),
}


def is_chinese(text: str) -> bool:
    """Chinese when CJK characters weigh at least as much as Latin letters (one CJK ~ two letters)."""
    cjk = len(_CJK.findall(text))
    return cjk > 0 and 2 * cjk >= len(re.findall(r"[A-Za-z]", text))


def normalize_key(text: str) -> str:
    """Lowercase, punctuation-free, whitespace-folded form used to spot twins."""
    kept = [" " if unicodedata.category(c)[0] in "PSZ" else c for c in text.lower()]
    return " ".join("".join(kept).split())


_TOOL_MARKUP = re.compile(r"<(tool_call|tool_result|function_call)>.*?</\1>", re.S)


def _clean(text: str) -> str:
    text = _TOOL_MARKUP.sub(" ", text)
    text = lx.EMOJI.sub(" ", lx.PHOTO_TAG.sub(" ", lx.URL.sub(" ", text)))
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"').replace("\u201d", '"')
    return re.sub(r"[ \t]+", " ", text).strip()


def split_sentences(text: str) -> list[str]:
    """Sentences of one message; keeps abbreviations such as 'Dr.' attached."""
    if is_chinese(text):
        return [s.strip() for s in _ZH_SPLIT.split(text) if s and s.strip()]
    out: list[str] = []
    for piece in _EN_SPLIT.split(text):
        if out and _ABBREVIATION.search(out[-1]):
            out[-1] += " " + piece
        elif piece.strip():
            out.append(piece.strip())
    return out


def _content_words(text: str) -> list[str]:
    return [
        w
        for w in _WORD.findall(text)
        if len(w) > 2
        and w.lower() not in lx.STOPWORDS
        and w.lower() not in lx.SMALL_TALK_WORDS
        and w.lower() not in lx.VAGUE_WORDS
    ]


def _zh_content_chars(text: str) -> int:
    return len(
        re.findall(r"[\u3400-\u9fff]", re.sub(r"[我你他她它的了是很也都吗呢吧啊呀哦嗯好就在有和]", "", text))
    )


# --- small talk ---------------------------------------------------------------------


def _is_informative(sentence: str) -> bool:
    sentence = sentence.strip()
    if not sentence:
        return False
    if lx.SELF_INTRO.search(sentence):
        return True
    if is_chinese(sentence):
        if lx.ZH_QUESTION.search(sentence):
            return False
        clauses = [c for c in re.split(r"[，,、]", sentence) if c and not lx.ZH_SMALL_TALK.match(c.strip())]
        return _zh_content_chars("".join(clauses)) >= 4
    if sentence.endswith("?"):
        return False
    return len(_content_words(lx.LEADING_FILLERS.sub("", sentence))) >= 2


def is_small_talk(utterances: Iterable[Utterance]) -> bool:
    """True when nothing said is more than greetings, thanks, pleasantries or questions.

    Restraint principle: such a day must write nothing, so extraction stops here.
    """
    return not any(_is_informative(s) for u in utterances for s in split_sentences(_clean(u.text)))


# --- narrative significance ----------------------------------------------------------


def _cue(pattern: re.Pattern[str], text: str) -> bool:
    for m in pattern.finditer(text):
        before = text[: m.start()]
        if _CJK.match(m.group(0)):
            if not lx.ZH_NEGATION_BEFORE.search(before):
                return True
        elif not lx.NEGATION_BEFORE.search(before[-40:]):
            return True
    return False


def narrative_significance(text: str) -> str | None:
    """'turning_point', 'milestone', 'notable' or None, from cue words (negations and questions ignored).

    Turning points win over milestones: "decided to move" is first a change of course.
    """
    text = _clean(text)
    if not text or text.rstrip().endswith(("?", "？")):
        return None
    for label, pattern in (
        ("turning_point", lx.TURNING_POINT),
        ("milestone", lx.MILESTONE),
        ("notable", lx.NOTABLE),
    ):
        if _cue(pattern, text):
            return label
    return None


# --- emotion scoring (shared by anchors and imprint typing) ---------------------------


def _emotion_hits(text: str) -> list[tuple[str, float, float]]:
    """(emotion, valence, arousal) per emotion word; a negation flips and damps the valence."""
    hits: list[tuple[str, float, float]] = []
    if is_chinese(text):
        for word, (emotion, valence, arousal) in lx.ZH_EMOTIONS.items():
            for m in re.finditer(re.escape(word), text):
                if lx.ZH_NEGATION_BEFORE.search(text[max(0, m.start() - 2) : m.start()]):
                    hits.append((f"not {emotion}", -0.5 * valence, arousal * 0.5))
                else:
                    hits.append((emotion, valence, arousal))
        return hits
    words = [w.lower() for w in _WORD.findall(text)]
    for i, word in enumerate(words):
        if word in lx.EN_EMOTIONS:
            emotion, valence, arousal = lx.EN_EMOTIONS[word]
            window = words[max(0, i - 3) : i]
            if any(w in ("not", "never", "no") or w.endswith("n't") for w in window):
                hits.append((f"not {emotion}", -0.5 * valence, arousal * 0.5))
            else:
                hits.append((emotion, valence, arousal))
    return hits


def _intensity(text: str, hits: Sequence[tuple[str, float, float]]) -> float:
    if not hits:
        return 0.0
    lowered = text.lower()
    boost = 0.15 if any(f" {w} " in f" {lowered} " for w in lx.EN_INTENSIFIERS) else 0.0
    if any(w in text for w in lx.ZH_INTENSIFIERS):
        boost = 0.15
    boost += 0.1 if "!" in text or "！" in text else 0.0
    strength = max(abs(v) for _, v, _ in hits)
    return min(1.0, 0.3 + 0.4 * strength + 0.1 * (len(hits) - 1) + boost)


# --- fact extraction: English ---------------------------------------------------------

_FIRST_PERSON = re.compile(r"\bI\b|\bI'(?:m|ve|ll|d)\b|\b(?:my|me|mine|myself|we|we're|we've|our|us)\b", re.I)
_FIRST_PERSON_STRICT = re.compile(r"\bI\b|\b(?:[Mm]y|me|mine|myself|[Ww]e|[Oo]ur|us)\b")
_EXPANSIONS = (
    (r"\bgonna\b", "going to"),
    (r"\bwanna\b", "want to"),
    (r"\bgotta\b", "have to"),
    (r"\bu\b", "you"),
)
_YOU_SHOULD_TRY = re.compile(
    r"\byou (?:can|should|could|might) (?:go |also )?(?:see|watch|read|try|check out|listen to)\b", re.I
)
_SUBJECTLESS_PREFIX = (
    (re.compile(r"^(?:going to|gonna)\b", re.I), "I'm "),
    (re.compile(r"^(?:planning|thinking of|hoping to|looking forward)\b", re.I), "I'm "),
    (
        re.compile(
            r"^been\b(?!\s+(?:a|an|the|so|such|quite|pretty|busy|crazy|wild|hectic|ages|forever)\b)", re.I
        ),
        "I've ",
    ),
)


def _conjugate(word: str) -> str:
    """Third-person singular of the verb that followed 'I'."""
    low = word.lower()
    special = {"am": "is", "have": "has", "do": "does", "go": "goes", "don't": "doesn't", "haven't": "hasn't"}
    if low in special:
        return special[low]
    if (
        low in lx.MODALS
        or low in lx.IRREGULAR_PAST
        or (low.endswith("ed") and low not in lx.NOT_PAST_ED)
        or "'" in low
        or not low.isalpha()
    ):
        return word
    if low.endswith("y") and len(low) > 2 and low[-2] not in "aeiou":
        return word[:-1] + "ies"
    if low.endswith(("s", "sh", "ch", "x", "z", "o")):
        return word + "es"
    return word + "s"


_TOKEN = re.compile(r"[A-Za-z]+(?:'[A-Za-z]+)?")
_YOU_VERBS = frozenset(
    """are were have had love like enjoy prefer hate work live want need go make do get know think feel
    seem look sound said told mentioned went got did made""".split()
)
_SENTENCE_START = re.compile(r"(?:^|[.!?;:]\s*)$")


class _Rewriter:
    """First person -> the speaker (name on first mention, then 'they'), second person -> the other.

    One left-to-right pass so that the verb after a replaced subject is conjugated
    and the name is written once, which keeps memories short and unambiguous.
    """

    def __init__(self, speaker: str, other: str, mentioned: bool = False) -> None:
        self.speaker, self.other = speaker, other
        self.subject_named = self.any_named = mentioned
        self.plural_named = False
        self.later = True  # may later mentions use they/them/their?

    def __call__(self, text: str) -> str:
        text = re.sub(r"\b[Yy]ou (?:mentioned|said|told me)(?: that)? (?=you\b)", "", text)
        if re.search(r"\b(?:they|them|their|theirs|they're|they've)\b", text, re.I):
            self.later = False  # 'they' would be ambiguous: keep the name everywhere
        tokens = list(_TOKEN.finditer(text))
        repl: dict[int, str] = {}
        self._last_subject: int | None = None  # token index of the speaker's last subject 'I'
        for i, m in enumerate(tokens):
            if i in repl:
                continue
            low = m.group(0).lower()
            if (
                low.startswith("i")
                and low in ("i", "i'm", "i've", "i'll", "i'd")
                and not m.group(0).startswith("I")
            ):
                continue  # a lowercase 'i' is not the pronoun
            verb = self._next_verb(tokens, i)
            self._at, self._text = i, text
            out = self._first_person(low, tokens, verb, repl) or self._second_person(low, tokens, verb, repl)
            if out is not None:
                repl[i] = out
        parts, pos = [], 0
        for i, m in enumerate(tokens):
            if i in repl:
                word = repl[i]
                if _SENTENCE_START.search(text[: m.start()]) and word[:1].islower():
                    word = word[:1].upper() + word[1:]
                parts += [text[pos : m.start()], word]
                pos = m.end()
        return "".join(parts) + text[pos:]

    def _same_clause(self, tokens: list[re.Match[str]], first: int, second: int) -> bool:
        """Do two subject I's sit in one clause ('I think I can'), with no punctuation or other subject between?"""
        between = self._text[tokens[first].end() : tokens[second].start()]
        words = [t.group(0).lower() for t in tokens[first + 1 : second]]
        return (
            0 < len(words) <= 3
            and not re.search(r"[,;:.!?\u2013\u2014-]|\s(?:and|but|or|so|if|when|because)\s", f" {between} ")
            and not set(words) & {"he", "she", "it", "they", "you", "we", "that"}
        )

    @staticmethod
    def _next_verb(tokens: list[re.Match[str]], i: int) -> int | None:
        j = i + 1
        while j < len(tokens) and (
            tokens[j].group(0).lower() in lx.ADVERBS or tokens[j].group(0).endswith("ly")
        ):
            j += 1
        return j if j < len(tokens) else None

    def _first_person(
        self, low: str, tokens: list[re.Match[str]], verb: int | None, repl: dict[int, str]
    ) -> str | None:
        # Each memory is read alone later, so a subject "I" is always the name, never "they".
        subject = {"i": "", "i'm": "is", "i've": "has", "i'll": "will", "i'd": "would"}
        if low in subject:
            self.subject_named = self.any_named = True
            previous, self._last_subject = self._last_subject, self._at
            if previous is not None and self._same_clause(tokens, previous, self._at):
                # "I decided I'm not flying back": the second I of one clause reads "they", not the name again
                return {"i": "they", "i'm": "they are", "i've": "they have", "i'll": "they will"}.get(
                    low, "they would"
                )
            if low == "i":
                if verb is not None:
                    repl[verb] = _conjugate(tokens[verb].group(0))
                return self.speaker
            named = subject[low]
            if (
                low == "i'd"
                and verb is not None
                and re.fullmatch(r"been|had|gone|done|seen|\w+ed", tokens[verb].group(0))
            ):
                named = "had"
            return f"{self.speaker} {named}"
        plural = {"we": "", "we're": " are", "we've": " have", "we'll": " will", "we'd": " would"}
        if low in plural:  # 'we' names the group once; a later singular 'I' still gets the name
            first = not (self.plural_named and self.later)
            self.plural_named = True
            return f"{self.speaker} and others{plural[low]}" if first else "they" + low[2:]
        objects = {
            "my": ("'s", "their"),
            "our": ("'s", "their"),
            "mine": ("'s", "theirs"),
            "ours": ("'s", "theirs"),
            "me": ("", "them"),
            "myself": ("", "themself"),
            "us": (" and others", "them"),
        }
        if low in objects:
            suffix, later = objects[low]
            group = low in ("our", "ours", "us")
            first = not ((self.plural_named if group else self.any_named) and self.later)
            if group:
                self.plural_named = True
            else:
                self.any_named = True
            return f"{self.speaker}{suffix}" if first else later
        return None

    def _second_person(
        self, low: str, tokens: list[re.Match[str]], verb: int | None, repl: dict[int, str]
    ) -> str | None:
        contracted = {"you're": " is", "you've": " has", "you'll": " will", "you'd": " would"}
        if low in contracted:
            return self.other + contracted[low]
        if low in ("your", "yours"):
            return f"{self.other}'s"
        if low == "yourself":
            return self.other
        if low != "you":
            return None
        if verb is not None and tokens[verb].group(0).lower() in _YOU_VERBS | lx.MODALS:
            v = tokens[verb].group(0)
            repl[verb] = {"are": "is", "were": "was"}.get(v.lower()) or _conjugate(v)
        return self.other


def _third_person(text: str, speaker: str, other: str, mentioned: bool = False) -> str:
    """Rewrite a sentence so it names its people; see _Rewriter."""
    return _Rewriter(speaker, other, mentioned)(text)


def _strip_en(sentence: str, names: Sequence[str]) -> str:
    """Drop interjections, fillers and vocatives ('Hey Mel!', ', Caroline!')."""
    prev = None
    while prev != sentence:
        prev = sentence
        sentence = lx.LEADING_FILLERS.sub("", sentence).strip()
        sentence = lx.EN_ANNOUNCEMENT.sub("", sentence).strip()
        m = re.match(
            r"^([A-Z][A-Za-z]+(?: [A-Z][a-z]+)?)(?:\s+(?:companion|friend|buddy|dear|assistant|pal))?\s*[,!.;]+\s*",
            sentence,
        )
        if m and _is_vocative(m.group(1), names):
            sentence = sentence[m.end() :]
    m = re.search(r",\s*([A-Z][a-z]+(?: [A-Z][a-z]+)?)\s*([!.]*)$", sentence)
    if m and _is_vocative(m.group(1), names):
        sentence = sentence[: m.start()] + m.group(2)
    sentence = lx.TRAILING_FILLERS.sub(r"\1", sentence)
    sentence = lx.INLINE_FILLERS.sub("", sentence)
    sentence = lx.COPULA_INTENSIFIER.sub(lambda m: m.group(1) + " ", sentence)
    for pattern, repl in _EXPANSIONS:
        sentence = re.sub(pattern, repl, sentence, flags=re.I)
    return re.sub(r"\s+([,.!])", r"\1", re.sub(r"\s{2,}", " ", sentence)).strip(" ,;-")


def _is_vocative(word: str, names: Sequence[str]) -> bool:
    low = word.lower()
    return any(n and n.lower().startswith(low) and len(low) >= 2 for n in names)


def _feeling(text: str) -> float:
    """Emotional intensity of a whole message: a milestone said with strong feeling is an imprint."""
    return _intensity(text, _emotion_hits(text))


def _en_type(sentence: str, significance: str | None, feeling: float) -> str:
    if significance in ("milestone", "turning_point") and feeling >= _IMPRINT_FEELING:
        return "imprint"
    if lx.EN_PREFERENCE.search(sentence):
        return "preference"
    past = bool(lx.EN_PAST_EVENT.search(sentence))
    if lx.EN_OPINION.search(sentence) and not past:
        return "opinion"
    if lx.EN_WORLD.search(sentence) and not (past or lx.EN_PLAN.search(sentence)):
        return "world"
    return "experience"


def _en_score(sentence: str, speaker_names: Sequence[str], significance: str | None) -> float:
    cues = (
        (lx.EN_PREFERENCE, _CUE_WEIGHTS["preference"]),
        (lx.EN_WORLD, _CUE_WEIGHTS["world"]),
        (lx.EN_PLAN, 1.5),
        (lx.EN_PAST_EVENT, 1.5),
        (lx.EN_OPINION, 1.0),
    )
    score = max((weight for cue, weight in cues if cue.search(sentence)), default=0.0)
    words = _content_words(sentence)
    score += 0.4 * min(len(words), 6)
    tokens = _WORD.findall(sentence)
    proper = [w for w in tokens[1:] if w[0].isupper() and w != "I" and not _is_vocative(w, speaker_names)]
    if tokens and _looks_like_name(tokens[0]) and not _is_vocative(tokens[0], speaker_names):
        proper.append(tokens[0])
    score += 0.7 * min(len(proper), 2)
    if re.search(r"\d", sentence):
        score += 0.8
    if significance:
        score += 1.0
    if re.search(r"\byou(?:r|rs|'re|'ve)?\b", sentence, re.I):
        score -= 1.5 if len(words) < 5 else 0.5  # about the listener, unless rich in its own content
    if lx.EN_REACTION.search(sentence):
        score -= 2.0
    return score


def _you_as_i(sentence: str) -> str:
    """Read an assistant's 'you love X' as the user's 'I love X' for cue matching and scoring."""
    sentence = re.sub(r"\b[Yy]ou (?:mentioned|said|told me)(?: that)? (?=you\b)", "", sentence)
    for pattern, repl in (
        (r"\byou're\b", "I'm"),
        (r"\byou've\b", "I've"),
        (r"\byour\b", "my"),
        (r"\byou\b", "I"),
    ):
        sentence = re.sub(pattern, repl, sentence, flags=re.I)
    return sentence


def _looks_like_name(word: str) -> bool:
    """A capitalised sentence opener that is not a common word ('Tilly helps me' vs 'Seeing it')."""
    low = word.lower().split("'", 1)[0]
    return (
        word[:1].isupper()
        and len(low) > 2
        and low not in lx.STOPWORDS | lx.SMALL_TALK_WORDS | lx.VAGUE_WORDS | lx.ADVERBS
        and not low.endswith(("ing", "ed", "ly"))
        and not lx.IMPERATIVE.match(low)
        and not lx.LEADING_FILLERS.match(low)
    )


def _titles(text: str) -> list[str]:
    return [a or b for a, b in re.findall(r'"([^"]{2,60})"|《([^》]{1,40})》', text)]


# --- fact extraction: Chinese -------------------------------------------------------


def _zh_type(sentence: str, significance: str | None, feeling: float) -> str:
    if significance in ("milestone", "turning_point") and feeling >= _IMPRINT_FEELING:
        return "imprint"
    if lx.ZH_PREFERENCE.search(sentence):
        return "preference"
    if lx.ZH_STRONG_WORLD.search(sentence):
        return "world"
    if lx.ZH_OPINION.search(sentence):
        return "opinion"
    if lx.ZH_PLAN.search(sentence):
        return "experience"
    if lx.ZH_WORLD.search(sentence) and not re.search(r"了|过", sentence):
        return "world"
    return "experience"


_ZH_QUOTED = re.compile(r"(《[^》]*》|「[^」]*」|『[^』]*』|“[^”]*”)")
_ZH_LEADING_DATE = r"(^|[，。；！：])(\d{4}-\d{2}(?:-\d{2})?(?:晚上)?)(?=[A-Za-z]|NAMES)"


def _zh_rewrite(sentence: str, speaker: str, other: str) -> str:
    """我 -> speaker, 你 -> other, outside titles and quotes (《当我谈跑步时我谈些什么》 stays whole)."""
    parts = _ZH_QUOTED.split(sentence)
    for i in range(0, len(parts), 2):
        part = re.sub(r"(?<![自忘])我们", f"{speaker}他们", parts[i])
        part = re.sub(r"(?<![自忘])我", speaker, part)  # 自我 / 忘我 are words, not the speaker
        parts[i] = part.replace("你们", f"{other}他们").replace("您", other).replace("你", other)
    out = "".join(parts)
    # A date opening a clause reads as its own phrase: "2026-11-16，Lin Wei去了…", not "2026-11-16Lin Wei去了…".
    names = "|".join(re.escape(n) for n in (speaker, other) if n)
    return re.sub(_ZH_LEADING_DATE.replace("NAMES", names or "$^"), r"\1\2，", out)


# --- extraction driver --------------------------------------------------------------


@dataclass
class _Context:
    speaker: str
    other: str
    label: str  # role label used when the name is the fact itself ("The user's name is ...")
    role: str
    names: tuple[str, ...]
    said_on: date
    lower_words: frozenset[str] = frozenset()  # words seen in lower case today: common, not names
    narrator: bool = False  # does this speaker tell their own life today (a person, not an AI)?


def _participants(utterances: Sequence[Utterance]) -> dict[str, dict[str, str]]:
    """Per conversation, the first speaker name seen for each role."""
    out: dict[str, dict[str, str]] = {}
    for u in utterances:
        if u.speaker:
            out.setdefault(u.conversation_id, {}).setdefault(u.role, u.speaker)
    return out


def _finish(content: str, zh: bool) -> str:
    content = re.sub(r"\s{2,}", " ", content).strip(" ,;-—")
    if len(content) > _MAX_CHARS:
        cut = max(content.rfind(p, 0, _MAX_CHARS) for p in (", ", "; ", " - ", "，", "；"))
        content = content[: cut if cut > _MAX_CHARS // 2 else _MAX_CHARS].rstrip(" ,;，；")
    content = content[:1].upper() + content[1:]
    if zh:
        return content if content.endswith(("。", "）")) else content.rstrip("!！.") + "。"
    return content if content.endswith((".", ")", '"')) else content.rstrip("!") + "."


def _stamp(content: str, ftype: str, said_on: date, zh: bool) -> str:
    """Give experiences a date when the sentence carried none: a memory is read long after."""
    if ftype not in ("experience", "imprint") or _ISO_DATE.search(content):
        return content
    body = content.rstrip("。.!！")
    return f"{body}（{said_on.isoformat()}）。" if zh else f"{body} ({said_on.isoformat()})."


_GERUND_NOUNS = frozenset(
    """something nothing anything everything morning evening spring thing king being wedding building meeting
    painting feeling clothing ceiling nothing during according including regarding ring swing string""".split()
)
_SUBJECT_WORD = re.compile(
    r"\b(?:I|we|he|she|they|it|my|our|his|her|their|this|that|there)\b|\b\w+ing\b|^[A-Z][a-z]+\s+[a-z]+s\b",
    re.I,
)


def _drop_subjectless_head(sentence: str) -> str:
    """'Almost four years; it pays okay' -> 'it pays okay': a verbless answer fragment before ';' goes."""
    head, sep, tail = sentence.partition("; ")
    if (
        sep
        and tail
        and not _FINITE.search(head)
        and not _SUBJECT_WORD.search(head)
        and _FINITE.search(tail)
        and len(_WORD.findall(tail)) >= 3
    ):
        return tail[:1].upper() + tail[1:]
    return sentence


def _en_fact(sentence: str, utt: Utterance, ctx: _Context) -> tuple[str, str, float] | None:
    """(type, content, confidence) for one English sentence, or None."""
    if sentence.endswith("?"):
        return None
    original = _strip_en(sentence, ctx.names)
    if len(_WORD.findall(original)) < 3:
        return None
    if lx.EN_PLEASANTRY.match(original) or lx.EN_META.search(original):
        return None  # greetings, farewells, apologies and remarks about the chat itself
    original = _drop_subjectless_head(original)
    gerund = re.match(r"([A-Z][a-z]{2,}ing)\s+(?=[a-z])", original)
    if (
        gerund
        and gerund.group(1).lower() not in _GERUND_NOUNS
        and not _FINITE.search(re.split(r"[;,]", original[gerund.end() :], maxsplit=1)[0])
    ):
        original = (
            "I'm " + original[:1].lower() + original[1:]
        )  # "Finishing up a draft" -> "I'm finishing ..."
    for pattern, prefix in _SUBJECTLESS_PREFIX:
        if pattern.match(original):
            original = prefix + original[0].lower() + original[1:]
            break
    else:
        if lx.EN_SUBJECTLESS.match(original) and not _FIRST_PERSON_STRICT.match(original):
            original = "I " + original[0].lower() + original[1:]
    titles = _titles(original)
    if titles and (lx.EN_RECOMMENDATION.search(original) or _YOU_SHOULD_TRY.search(original)):
        return (
            "experience",
            f"{ctx.speaker} recommended {', '.join(chr(34) + t + chr(34) for t in titles)} to {ctx.other}",
            0.7,
        )
    intro = re.search(r"\bmy name(?:'s| is) ([A-Z][\w-]+(?: [A-Z][\w-]+)*)", original)
    if intro and ctx.speaker.startswith(intro.group(1)):
        return "world", f"{ctx.label} name is {ctx.speaker}", 0.9
    you_mode = False
    if not _FIRST_PERSON_STRICT.search(original):
        if (
            utt.role != "assistant"
            or not lx.EN_YOU_FACT.match(original)
            or lx.EN_YOU_NOT_FACT.search(original)
        ):
            return _attributed(original, ctx)
        you_mode = True
    elif lx.EN_SERVICE.search(original) or re.match(r"let's\b", original, re.I):
        return None  # an AI's offer of help, or a proposal ("Let's make it count"), states no fact
    significance = narrative_significance(original)
    score = _en_score(_you_as_i(original) if you_mode else original, ctx.names, significance)
    if score < _MIN_SCORE and not (not you_mode and score >= _MIN_EVENT and _concrete_event(original)):
        return None
    ftype = _en_type(_you_as_i(original) if you_mode else original, significance, _feeling(_clean(utt.text)))
    if ftype == "opinion" and utt.role == "assistant" and not you_mode and not ctx.narrator:
        return None  # an AI's view of the user's news ("a brave move, I think") is no memory
    confidence = _CONFIDENCE[ftype]
    if you_mode:
        confidence -= 0.1
    if re.search(r"\b(?:maybe|might|probably|perhaps|thinking (?:about|of))\b", original, re.I):
        confidence -= 0.1
    return ftype, _third_person(original, ctx.speaker, ctx.other), round(confidence, 2)


_HABIT = re.compile(
    r"\b(?:once|twice|\w+ times) (?:a|per|every) (?:day|week|month|year)\b|\bevery (?:day|week|weekend|month|"
    r"morning|evening|night|year|summer|winter)\b",
    re.I,
)


def _concrete_event(sentence: str) -> bool:
    """A short first-person event or habit with a concrete object ("We made pizza!", "I see them twice a week").

    Such sentences score low (few words) yet are exactly what is asked about later.
    """
    if not (lx.EN_PAST_EVENT.search(sentence) or _HABIT.search(sentence)):
        return False
    if _EVENT_VAGUE.search(sentence) or re.match(
        r"(?:because|cause|since|if|when|while|though|although)\b", sentence, re.I
    ):
        return False  # a vague event, or a subordinate clause answering a question, states nothing alone
    return any(
        len(w) > 3 and w.lower() not in lx.VAGUE_WORDS and not re.search(r"(?:ed|ing|ly)$", w.lower())
        for w in _content_words(sentence.split(";")[0])
    )


_EVENT_VAGUE = re.compile(
    r"\b(?:got it|get it|(?:been|keeping|kept) busy|since (?:we|I) (?:last )?(?:talked|chatted|spoke)|"
    r"something|anything|nothing|a few days|made it|did it|finished it)\b",
    re.I,
)


def _attributed(sentence: str, ctx: _Context) -> tuple[str, str, float] | None:
    """A specific third-person statement, kept as reported speech ("Gina said the store is doing great").

    In conversation most such sentences are still about the speaker's own world
    (their shop, their pet, their book); reported speech records that honestly
    without pretending to know whose it is.
    """
    if ctx.role == "assistant" and not (ctx.narrator or lx.EN_NARRATED.search(sentence)):
        return None  # an AI's own remarks, forecasts and pleasantries are not memories
    if re.search(
        r"\byou(?:r|rs|rself|'re|'ve|'ll)?\b|^(?:let's|here's|here is|check|look|thank)", sentence, re.I
    ):
        return None
    if lx.EN_REACTION.search(sentence) or _en_score(sentence, ctx.names, None) < _MIN_ATTRIBUTED:
        return None
    specific = re.search(r"\d|\"", sentence) or any(
        w[0].isupper() for w in _WORD.findall(sentence)[1:] if w != "I"
    )
    if ctx.role == "assistant" and not specific and _en_score(sentence, ctx.names, None) < _MIN_SCORE:
        return None  # the assistant's general remark ("reading can change your mood") is not a memory
    if lx.IMPERATIVE.match(sentence):
        return None  # advice to the other person, not a fact
    if _is_fragment(sentence):
        return None  # "Usually alone along the river." answers a question; alone it states nothing
    sentence = _kin_of(sentence, ctx.speaker)
    ftype = "opinion" if re.search(r"\b(?:should|shouldn't|best|worst)\b", sentence, re.I) else "world"
    if re.match(re.escape(ctx.speaker) + r"'s\b", sentence):
        return ftype, sentence, 0.5  # "Dad's tests are fine" -> "Lin Wei's dad's tests are fine"
    first = sentence.split(" ", 1)[0]
    if first != "I" and not first.isupper() and not _proper_opener(first, ctx):
        sentence = sentence[:1].lower() + sentence[1:]
    return ftype, f"{ctx.speaker} said {sentence}", 0.5


_FINITE = re.compile(
    r"\b(?:is|are|was|were|am|be|been|has|have|had|do|does|did|will|would|can|could|should|shall|may|"
    r"might|must|got|get|gets|went|goes|go|made|make|makes|came|comes|took|takes|said|says|told|felt|feels|"
    r"knew|knows|thinks|thought|loves|likes|wants|needs|works|lives|calls|call|keep|keeps|kept|became|left|"
    r"ran|runs|saw|sees|found|put|let|gave|gives|"
    + "|".join(sorted(lx.IRREGULAR_PAST))
    + r")\b|'(?:s|re|ve|ll|d|m)\b|n't\b|\b[a-z]{3,}ed\b|\b[a-z]{2,}(?:es|ts|ks|ps|ns|ls|rs|ys|gs|ds|ms)\b(?=\s+(?:a|an|the|to|in|on|at|with|for|it|him|her|them|me|us|out|up|off|his|their|my|our|your|that|this)\b)",
    re.I,
)
_FRAGMENT_OPENER = re.compile(
    r"^(?:like|usually|mostly|normally|just|only|almost|maybe|probably|perhaps|with|without|because|cause|"
    r"and|but|or|except|unless|hopefully|definitely|mainly|especially|not|nothing|nope)\b(?!,?\s+(?:I|we|he|she|"
    r"they|it|my|our|his|her|their)\b)",
    re.I,
)


def _is_fragment(sentence: str) -> bool:
    """No finite verb, or an opener that makes it the tail of an answer ("Like life's too short ...")."""
    if lx.EN_META.search(sentence):
        return True
    if _FRAGMENT_OPENER.match(sentence):
        return True
    return not _FINITE.search(sentence)


_KIN_NAMES = re.compile(r"\b(Dad|Mom|Mum|Mommy|Daddy|Mama|Papa|Grandma|Grandpa|Granny|Nana)\b(?!\s+[A-Z])")


def _kin_of(sentence: str, speaker: str) -> str:
    """'Dad' used as a name is the speaker's dad: the first mention says whose."""
    m = _KIN_NAMES.search(sentence)
    if not m:
        return sentence
    kin = m.group(1).lower()
    return (
        sentence[: m.start()]
        + f"{speaker}'s {kin}"
        + _KIN_NAMES.sub(lambda k: k.group(1).lower(), sentence[m.end() :])
    )


def _proper_opener(word: str, ctx: _Context) -> bool:
    """Is a capitalised sentence opener a name ('Mei', 'Shanghai') rather than a common word ('Real')?"""
    low = word.lower().split("'", 1)[0]
    if low in ctx.lower_words or low in lx.STOPWORDS | lx.SMALL_TALK_WORDS | lx.VAGUE_WORDS | lx.ADVERBS:
        return False
    return _looks_like_name(word) or any(n and n.split()[0] == word for n in ctx.names)


def _zh_fact(sentence: str, utt: Utterance, ctx: _Context) -> tuple[str, str, float] | None:
    if lx.ZH_QUESTION.search(sentence):
        return None
    clauses = [c.strip() for c in re.split(r"[，,]", sentence.rstrip("。！!；;"))]
    clauses = [
        lx.ZH_LEADING_FILLERS.sub("", c + "，").rstrip("，")
        for c in clauses
        if c and not lx.ZH_SMALL_TALK_CLAUSE.match(c)
    ]
    clauses = [c for c in clauses if c and c not in ctx.names]
    if clauses and lx.ZH_REQUEST.search(clauses[0]):
        return None  # "给我推荐一本书" / "跟你说说我家吧" asks or announces; it states no fact
    text = "，".join(clauses)
    intro = re.search(r"我(?:叫|的名字是|的名字叫)([\u3400-\u9fffA-Za-z·]{1,8})", text)
    if intro and intro.group(1) == ctx.speaker:
        return "world", f"{ctx.label}的名字是{ctx.speaker}", 0.9
    if _zh_content_chars(text) < 4:
        return None
    titles = _titles(text)
    if titles and re.search(r"推荐|建议你?(?:看|读|听)", text):
        return (
            "experience",
            f"{ctx.speaker}向{ctx.other}推荐了{'、'.join('《' + t + '》' for t in titles)}",
            0.7,
        )
    you_mode = False
    if "我" not in text:
        if utt.role != "assistant" or not lx.ZH_YOU_FACT.match(text) or lx.ZH_YOU_NOT_FACT.match(text):
            return None
        you_mode = True
    elif (utt.role == "assistant" and lx.ZH_SERVICE.search(text)) or lx.ZH_REACTION.search(text):
        return None
    significance = narrative_significance(text)
    cues = (lx.ZH_PREFERENCE, lx.ZH_PLAN, lx.ZH_WORLD, lx.ZH_OPINION, lx.ZH_EVENT)
    score = (1.5 if any(c.search(text) for c in cues) else 0.0) + 0.25 * min(_zh_content_chars(text), 10)
    score += 1.0 if significance else 0.0
    if score < _MIN_SCORE_ZH:
        return None
    ftype = _zh_type(text.replace("你", "我") if you_mode else text, significance, _feeling(_clean(utt.text)))
    confidence = _CONFIDENCE[ftype]
    return (
        ftype,
        _zh_rewrite(text, ctx.speaker, ctx.other),
        round(confidence - (0.1 if you_mode else 0), 2),
    )


def _pet_name(sentence: str, previous: str, ctx: _Context) -> str | None:
    """'I got a puppy. Her name's Coco, she's two.' -> "<speaker>'s puppy is named Coco; she is two"."""
    m = lx.NAME_CLAUSE.match(sentence)
    noun = lx.PET_OR_PERSON_NOUN.search(previous)
    if not m or not noun or not _FIRST_PERSON.search(previous):
        return None
    named = f"{ctx.speaker}'s {noun.group(1)} is named {m.group(1)}"
    rest = sentence[m.end() :].strip(" ,;.!-")
    if rest.lower().startswith(("and ", "but ")):
        rest = rest.split(" ", 1)[1]
    if len(_WORD.findall(rest)) < 2:
        return named
    rest = re.sub(r"\b([Ss]he|[Hh]e|[Ii]t)'s\b(?!\s+(?:been|got|gotten|had)\b)", r"\1 is", rest)
    return f"{named}; {_third_person(rest, ctx.speaker, ctx.other, mentioned=True)}"


def _continues(sentence: str, following: str) -> bool:
    """Is `following` a short elaboration of a short, vague `sentence`?"""
    return (
        bool(following)
        and not following.rstrip().endswith("?")
        and not sentence.rstrip().endswith("?")
        and bool(lx.PRONOUN_CONTINUATION.match(following))
        and len(_WORD.findall(sentence)) <= 10
    )


def _facts_of(utt: Utterance, ctx: _Context) -> list[FactCandidate]:
    text = _clean(utt.text)
    zh = is_chinese(text)
    out: list[FactCandidate] = []
    previous, previous_kept = "", False
    sentences = [resolve_relative_dates(raw, ctx.said_on) for raw in split_sentences(text)]
    skip = False
    for i, sentence in enumerate(sentences):
        if skip:
            skip = False
            continue
        named = None if zh else _pet_name(_strip_en(sentence, ctx.names), previous, ctx)
        fact = (
            ("world", named, 0.85)
            if named
            else _zh_fact(sentence, utt, ctx)
            if zh
            else _en_fact(sentence, utt, ctx)
        )
        following = sentences[i + 1] if i + 1 < len(sentences) else ""
        if (
            fact is None
            and not zh
            and _continues(sentence, following)
            and not lx.NAME_CLAUSE.match(_strip_en(following, ctx.names))
        ):
            # "I love this series. It has adventures and magic." is one fact, said in two sentences.
            fact = _en_fact(sentence.rstrip(".! ") + "; " + following[:1].lower() + following[1:], utt, ctx)
            skip = fact is not None
        if fact is None and not zh:
            if previous_kept and lx.PRONOUN_CONTINUATION.match(sentence) and _is_informative(sentence):
                tail = _third_person(_strip_en(sentence, ctx.names), ctx.speaker, ctx.other, mentioned=True)
                last = out[-1]
                merged = last.content.rstrip(".") + "; " + tail[:1].lower() + tail[1:]
                if len(merged) <= _MAX_CHARS and not tail.endswith("?"):
                    content = _finish(merged, zh)
                    out[-1] = replace(last, content=content, key=normalize_key(content))
        if fact is not None:
            ftype, content, confidence = fact
            content = _finish(_stamp(_finish(content, zh), ftype, ctx.said_on, zh), zh)
            out.append(
                FactCandidate(
                    ftype, content, utt.created_at, utt.conversation_id, confidence, normalize_key(content)
                )
            )
        previous, previous_kept = sentence, fact is not None
    return out


def extract_facts(utterances: list[Utterance]) -> list[FactCandidate]:
    """Semantic-stage candidates for one day: first-person facts, preferences, plans and events.

    Each candidate names its person (first person -> speaker, and for the assistant
    role second person -> the user), carries resolved absolute dates and stays in
    the language it was said in. A small-talk day yields nothing; twins within the
    day (same key) are kept once.
    """
    utterances = sorted(utterances, key=lambda u: u.created_at)
    if not utterances or is_small_talk(utterances):
        return []
    utterances = [u for u in utterances if u.role in ("user", "assistant")]  # tool / system output is no talk
    people = _participants(utterances)
    lower_words = frozenset(w for u in utterances for w in re.findall(r"\b[a-z][a-z'-]+\b", u.text))
    narrators = {
        (u.conversation_id, u.role)
        for u in utterances
        if u.role == "user" or lx.EN_SELF_NARRATION.search(_clean(u.text))
    }
    seen: set[str] = set()
    facts: list[FactCandidate] = []
    for utt in utterances:
        roles = people.get(utt.conversation_id, {})
        lang = "zh" if is_chinese(utt.text) else "en"
        other_role = "assistant" if utt.role == "user" else "user"
        default, label = _ROLE_LABELS.get((lang, utt.role), _ROLE_LABELS[(lang, "user")])
        speaker = utt.speaker or default
        other = roles.get(other_role) or _ROLE_LABELS[(lang, other_role)][0]
        ctx = _Context(
            speaker,
            other,
            label,
            utt.role,
            tuple(roles.values()),
            utt.created_at.date(),
            lower_words,
            (utt.conversation_id, utt.role) in narrators,
        )
        for fact in _facts_of(utt, ctx):
            if fact.key and fact.key not in seen:
                seen.add(fact.key)
                facts.append(fact)
    # Near-twins of the same day (the assistant echoing the user) collapse into the fuller one.
    return [d.candidate for d in dedup_against(facts, []) if d.action == "create"]


# --- emotional anchors ---------------------------------------------------------------

_MAX_ANCHORS = 3


def _utterance_emotion(u: Utterance) -> tuple[str, float, float, float, str] | None:
    """(emotion, valence, arousal, intensity, trigger sentence) of one message, questions ignored."""
    best: tuple[str, float, float, float, str] | None = None
    for sentence in split_sentences(_clean(u.text)):
        if sentence.rstrip().endswith(("?", "？")) or lx.FORMULAIC_EMOTION.search(sentence):
            continue
        hits = _emotion_hits(sentence)
        if not hits:
            continue
        intensity = _intensity(sentence, hits)
        emotion = max(hits, key=lambda h: abs(h[1]))[0]
        valence = sum(h[1] for h in hits) / len(hits)
        arousal = sum(h[2] for h in hits) / len(hits)
        if best is None or intensity > best[3]:
            best = (emotion, valence, arousal, intensity, sentence)
    return best


def _conversation_anchors(conversation_id: str, utterances: Sequence[Utterance]) -> list[AnchorCandidate]:
    scored = [(u, e) for u in utterances if (e := _utterance_emotion(u)) is not None]
    if not scored or sum(e[3] for _, e in scored) < 0.8:
        return []  # neutral talk (or one passing mild word) leaves no anchor
    zh = is_chinese(" ".join(u.text for u in utterances))
    weights: dict[str, float] = {}
    for _, e in scored:
        weights[e[0]] = weights.get(e[0], 0.0) + e[3]
    dominant = max(weights, key=lambda k: weights[k])
    total = sum(e[3] for _, e in scored)
    valence = sum(e[1] * e[3] for _, e in scored) / total
    arousal = sum(e[2] for _, e in scored) / len(scored)
    peak_u, peak = max(scored, key=lambda pair: pair[1][3])
    mean_intensity = total / len(scored)
    intensity = min(1.0, mean_intensity * (0.6 + 0.4 * min(1.0, len(scored) / 4)))
    note = (
        f"当天对话的整体情绪：{dominant}（{len(scored)} 条带情绪的消息）"
        if zh
        else f"Overall mood of the conversation: {dominant} ({len(scored)} emotional messages)."
    )
    anchors = [
        AnchorCandidate(
            conversation_id,
            peak_u.created_at,
            dominant,
            round(valence, 2),
            round(arousal, 2),
            round(intensity, 2),
            _shorten(peak[4]),
            note,
        )
    ]
    previous = scored[0][1]
    for u, e in scored[1:]:
        if len(anchors) >= _MAX_ANCHORS:
            break
        if previous[1] * e[1] < 0 and abs(e[1] - previous[1]) >= 0.9:
            who = u.speaker or u.role
            note = (
                f"情绪转折：{previous[0]} → {e[0]}（{who}）"
                if zh
                else f"Turning point: mood shifted from {previous[0]} to {e[0]} ({who})."
            )
            anchors.append(
                AnchorCandidate(
                    conversation_id,
                    u.created_at,
                    e[0],
                    round(e[1], 2),
                    round(e[2], 2),
                    round(min(1.0, e[3] + 0.1), 2),
                    _shorten(e[4]),
                    note,
                )
            )
        previous = e
    return anchors


def _shorten(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"


def detect_anchors(utterances: list[Utterance]) -> list[AnchorCandidate]:
    """Limbic-stage candidates: each conversation's mood plus valence turning points.

    At most three per conversation; a conversation without emotion words gets none
    (restraint: neutral talk is not an emotional memory).
    """
    by_conversation: dict[str, list[Utterance]] = {}
    for u in sorted(utterances, key=lambda u: u.created_at):
        by_conversation.setdefault(u.conversation_id, []).append(u)
    return [a for cid, utts in by_conversation.items() for a in _conversation_anchors(cid, utts)]


# --- dedup against message 2 ---------------------------------------------------------


def _tokens(text: str) -> set[str]:
    """Content words, plus Chinese character bigrams, for overlap measures."""
    key = normalize_key(text)
    words = {w for w in key.split() if w not in lx.STOPWORDS and not _CJK.search(w)}
    cjk = "".join(_CJK.findall(key))
    return words | {cjk[i : i + 2] for i in range(len(cjk) - 1)}


@dataclass
class _Known:
    memory_id: int | None  # None: created by an earlier candidate of this batch
    content: str
    tokens: set[str]
    decision: int | None  # index of the decision that currently writes this entry


def _relation(key: str, tokens: set[str], known: _Known) -> tuple[int, str]:
    """(rank, kind): twin > contained > fuller > near; rank 0 means unrelated."""
    if key == normalize_key(known.content):
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
    known = [_Known(mid, content, _tokens(content), None) for mid, content in existing]
    decisions: list[Decision] = []
    for cand in candidates:
        tokens = _tokens(cand.content)
        best, rank, kind = None, 0, ""
        for entry in known:
            r, k = _relation(cand.key, tokens, entry)
            if r > rank:
                best, rank, kind = entry, r, k
        if best is None:
            known.append(_Known(None, cand.content, tokens, len(decisions)))
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
        decisions.append(Decision(action, cand, best.memory_id, cand.content, f"fuller version of {ref}"))
    return decisions
