"""The citation marker, and keeping it out of content (content is data, docs/content_is_data.md).

An agent cites a memory it used as ``[[anima:f-N]]``; the night's memory-ref-sync counts those
markers in assistant messages, and the counts decide what stays resident. A marker must
therefore come only from the context block's own item prefixes, never from text: memory text
is made inert on write (every memory tool call goes through the tool executor) and every text
placed in a context block is made inert again when rendered (rows stored before, messages,
summaries). An inert marker reads ``⟦anima:f-N⟧``: a reply that echoes it cites nothing.
"""

from __future__ import annotations

import re

CITATION = re.compile(r"\[\[anima:f-(\d+)\]\]")  # what memory-ref-sync counts
CITATION_FORMAT = "[[anima:f-{id}]]"
# anything that could be read, or "corrected" by a model, into a marker: [[anima:…]], any case and spacing
_MARKER_LIKE = re.compile(r"\[\[(\s*anima\s*:[^\[\]]*)\]\]", re.IGNORECASE)
_OPENER_LIKE = re.compile(r"\[\[(?=\s*anima\s*:)", re.IGNORECASE)


def cite(memory_id: int) -> str:
    return CITATION_FORMAT.format(id=memory_id)


def inert(text: str) -> str:
    """`text` with every marker-like ``[[anima:…]]`` turned into ``⟦anima:…⟧`` (idempotent)."""
    if "[[" not in text:
        return text
    return _OPENER_LIKE.sub("⟦", _MARKER_LIKE.sub(r"⟦\1⟧", text))
