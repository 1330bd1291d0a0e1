"""Sentence boundaries for English and Chinese text, memories and chat messages alike
(original casing kept): the one splitter of the offline engine.

A regex splitter is enough; what matters is not cutting where a cut would produce a broken
sentence: abbreviations ("Dr.", "St.", "U.S."), initials and decimals are never boundaries.
What differs is the text. A memory is written: a full stop before a lower-case word is no
boundary, and ";" and "and also" cut a compound fact in two (deep sleep's split). A chat
message is typed: a line break ends a sentence, so does . ! ? before any word (chat
capitalizes carelessly), and a clause after ";" stays with its sentence (light sleep weighs
whole sentences).
"""

from __future__ import annotations

import re

from anima_pipeline.text.similarity import CJK_CLASS, cjk_count, has_cjk, normalize_content

_ABBREVIATIONS = {
    "mr", "mrs", "ms", "dr", "st", "jr", "sr", "prof", "vs", "etc", "e.g", "i.e", "inc", "ltd",
    "co", "no", "mt", "ft", "u.s", "u.k", "a.m", "p.m", "approx", "dept", "fig", "gen", "sgt",
}  # fmt: skip
_CLOSERS = "\"'\u201d\u2019\u300d\u300f\uff09)\\]"
_BOUNDARY = re.compile(
    rf"(?P<cjk>[。！？；]+[{_CLOSERS}]*)\s*"
    rf"|(?P<end>[.!?]+[{_CLOSERS}]*)(?:\s+(?=[A-Z0-9\"'\u201c\u2018(\[]|[{CJK_CLASS}])|(?=[{CJK_CLASS}]))"
    r"|(?P<semi>;)\s*"
    r"|(?P<also>,?\s+and\s+)(?=also\s)"
)
# a message: . ! ? before white space or CJK text (a closing quote after the stop keeps the
# next sentence attached, as light sleep was tuned with), or a line break
_MESSAGE_BOUNDARY = re.compile(
    rf"(?P<cjk>[。！？；]+[{_CLOSERS}]*)\s*|(?P<end>[.!?]+)(?:\s+|(?=[{CJK_CLASS}]))|(?P<line>\n+)"
)
# the word before a stop, to tell an abbreviation or an initial ("J.") from a sentence end;
# the apostrophe keeps "didn't." from reading as the initial "t."
_WORD_BEFORE = re.compile(r"([A-Za-z.']+)$")
_WORD_CHAR = re.compile(r"[A-Za-z.']")
# longer than any abbreviation: a word that fills the window is cut, so it is none of them
_WORD_WINDOW = 32

# Below these sizes a "sentence" is a fragment, not a fact worth its own memory.
MIN_PART_CHARS = 12
MIN_PART_CJK_CHARS = 6


def split_sentences(text: str, *, message: bool = False) -> list[str]:
    """Sentences of `text`, each keeping its own terminal punctuation.

    Boundaries of a memory (the default): . ! ? followed by space and a capital/digit/quote
    (or by CJK text), 。！？； anywhere, ';', and ", and also" / " and also" (the next piece
    starts with "also", so a caller can tell it lacks a subject). Of a chat message
    (`message=True`): . ! ? followed by space or CJK text, 。！？； anywhere, and line breaks."""
    pieces: list[str] = []
    start = 0
    for m in (_MESSAGE_BOUNDARY if message else _BOUNDARY).finditer(text):
        found = m.groupdict()
        if found["end"] is not None:
            # the word is read in a window before the stop, never the whole prefix: a search
            # over text[:stop] at every stop made a 1 MB message quadratic (a night of minutes)
            low = max(0, m.start() - _WORD_WINDOW)
            before = _WORD_BEFORE.search(text, low, m.start())
            if before and not (before.start() == low and low and _WORD_CHAR.match(text, low - 1)):
                word = before[1].lower().rstrip(".")
                if word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha() and word != "i"):
                    continue
        if found.get("also") is not None or found.get("line") is not None:
            cut = m.start()  # the joining words or the line break belong to neither piece
        else:
            cut = m.start() + len(found["cjk"] or found["end"] or found.get("semi") or "")
        piece = text[start:cut].strip()
        if piece:
            pieces.append(piece)
        start = m.end()
    tail = text[start:].strip()
    if tail:
        pieces.append(tail)
    return pieces


def is_tiny(text: str) -> bool:
    """Too short to stand alone: < 6 meaningful characters for CJK text, < 12 otherwise."""
    normalized = normalize_content(text)
    if has_cjk(text):
        return len(normalized.replace(" ", "")) < MIN_PART_CJK_CHARS
    return len(normalized) < MIN_PART_CHARS


def is_long(text: str) -> bool:
    """Long enough that it probably packs several facts (a split pre-filter signal)."""
    return cjk_count(text) >= 40 or len(text) >= 160
