"""What counts as quoting purged text (docs/forget.md, "Later days"): a derived row of any
later day (a dream entry, a summary, a self block, a narrative, a session summary, a model's
words in a step's stats, an audit event) that names an erased memory (`f-N`), holds a word
that only the purged text held, or repeats a run of WINDOW characters of it. Pure: the
cascade (memory/forget.py) gives it the texts, the ids and the words, and asks of each row.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

# a run of this many characters (whitespace folded, case ignored) of a purged text, found in
# another text, is a quote of it: about seven words, or a short sentence in Chinese
WINDOW = 32
_REF = re.compile(r"(?<![\w-])f-(\d+)(?!\d)")


def _fold(text: str) -> str:
    return " ".join(text.split()).casefold()


class Quotes:
    """A test for "this text quotes what was purged"."""

    def __init__(self, texts: Iterable[str], memory_ids: Iterable[int], words: Iterable[str]) -> None:
        self.ids = {int(i) for i in memory_ids}
        self.words = (
            re.compile(r"\b(" + "|".join(sorted(map(re.escape, {w.casefold() for w in words}))) + r")\b")
            if words
            else None
        )
        self.windows: set[str] = set()
        for text in texts:
            folded = _fold(text)
            if len(folded) < WINDOW:
                if len(folded) >= WINDOW // 2:  # a short text counts whole
                    self.windows.add(folded)
                continue
            self.windows.update(folded[i : i + WINDOW] for i in range(len(folded) - WINDOW + 1))
        self._short = {w for w in self.windows if len(w) < WINDOW}

    def __bool__(self) -> bool:
        return bool(self.ids or self.words or self.windows)

    def __call__(self, text: str | None) -> bool:
        if not text:
            return False
        if self.ids and any(int(m) in self.ids for m in _REF.findall(text)):
            return True
        folded = _fold(text)
        if self.words is not None and self.words.search(folded):
            return True
        if any(s in folded for s in self._short):
            return True
        return any(folded[i : i + WINDOW] in self.windows for i in range(len(folded) - WINDOW + 1))

    def scrub(self, value: Any) -> Any:
        """`value` (a JSON value) with every string that quotes replaced by "(erased)"."""
        if isinstance(value, str):
            return "(erased)" if self(value) else value
        if isinstance(value, list):
            return [self.scrub(v) for v in value]
        if isinstance(value, dict):
            return {k: self.scrub(v) for k, v in value.items()}
        return value
