"""Sentence boundaries for English and Chinese memory text (original casing kept).

Memories are short, so a regex splitter is enough; what matters is not cutting where a
cut would produce a broken memory: abbreviations ("Dr.", "St.", "U.S."), initials,
decimals, and an English full stop followed by a lower-case word are not boundaries.
"""

from __future__ import annotations

import re

from .similarity import CJK_CLASS, cjk_count, has_cjk, normalize_content

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
_WORD_BEFORE = re.compile(r"([A-Za-z.]+)$")

# Below these sizes a "sentence" is a fragment, not a fact worth its own memory.
MIN_PART_CHARS = 12
MIN_PART_CJK_CHARS = 6


def split_sentences(text: str) -> list[str]:
    """Sentences of `text`, each keeping its own terminal punctuation.

    Boundaries: . ! ? followed by space and a capital/digit/quote (or by CJK text),
    。！？； anywhere, ';', and ", and also" / " and also" (the next piece starts with
    "also", so a caller can tell it lacks a subject)."""
    pieces: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        if m["end"] is not None:
            before = _WORD_BEFORE.search(text[: m.start()])
            if before:
                word = before[1].lower().rstrip(".")
                if word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha() and word != "i"):
                    continue
        cut = m.start() if m["also"] is not None else m.start() + len(m["cjk"] or m["end"] or m["semi"] or "")
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
