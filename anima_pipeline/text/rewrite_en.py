"""English person rewriting: first person -> the speaker, second person -> the other, fillers dropped."""

from __future__ import annotations

import re
from collections.abc import Sequence

from anima_pipeline.text import lexicon as lx
from anima_pipeline.text.vocab import IRREGULAR_PAST

FIRST_PERSON = re.compile(r"\bI\b|\bI'(?:m|ve|ll|d)\b|\b(?:my|me|mine|myself|we|we're|we've|our|us)\b", re.I)
FIRST_PERSON_STRICT = re.compile(r"\bI\b|\b(?:[Mm]y|me|mine|myself|[Ww]e|[Oo]ur|us)\b")
_EXPANSIONS = (
    (r"\bgonna\b", "going to"),
    (r"\bwanna\b", "want to"),
    (r"\bgotta\b", "have to"),
    (r"\bu\b", "you"),
)


def _conjugate(word: str) -> str:
    """Third-person singular of the verb that followed 'I'."""
    low = word.lower()
    special = {"am": "is", "have": "has", "do": "does", "go": "goes", "don't": "doesn't", "haven't": "hasn't"}
    if low in special:
        return special[low]
    if (
        low in lx.MODALS
        or low in IRREGULAR_PAST
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


def third_person(text: str, speaker: str, other: str, mentioned: bool = False) -> str:
    """Rewrite a sentence so it names its people; see _Rewriter."""
    return _Rewriter(speaker, other, mentioned)(text)


def strip_en(sentence: str, names: Sequence[str]) -> str:
    """Drop interjections, fillers and vocatives ('Hey Ruth!', ', Ivo!')."""
    prev = None
    while prev != sentence:
        prev = sentence
        sentence = lx.LEADING_FILLERS.sub("", sentence).strip()
        sentence = lx.EN_ANNOUNCEMENT.sub("", sentence).strip()
        m = re.match(
            r"^([A-Z][A-Za-z]+(?: [A-Z][a-z]+)?)(?:\s+(?:companion|friend|buddy|dear|assistant|pal))?\s*[,!.;]+\s*",
            sentence,
        )
        if m and is_vocative(m.group(1), names):
            sentence = sentence[m.end() :]
    m = re.search(r",\s*([A-Z][a-z]+(?: [A-Z][a-z]+)?)\s*([!.]*)$", sentence)
    if m and is_vocative(m.group(1), names):
        sentence = sentence[: m.start()] + m.group(2)
    sentence = lx.TRAILING_FILLERS.sub(r"\1", sentence)
    sentence = lx.INLINE_FILLERS.sub("", sentence)
    sentence = lx.COPULA_INTENSIFIER.sub(lambda m: m.group(1) + " ", sentence)
    for pattern, repl in _EXPANSIONS:
        sentence = re.sub(pattern, repl, sentence, flags=re.I)
    return re.sub(r"\s+([,.!])", r"\1", re.sub(r"\s{2,}", " ", sentence)).strip(" ,;-")


def is_vocative(word: str, names: Sequence[str]) -> bool:
    low = word.lower()
    return any(n and n.lower().startswith(low) and len(low) >= 2 for n in names)


def you_as_i(sentence: str) -> str:
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
