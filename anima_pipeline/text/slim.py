"""A turn's text trimmed to a size, its citation markers kept: the session view's slim segment
(recall/session_view.py) and the turns an engine's session summarizer reads (llm/) trim with
the same rule, so it sits below both."""

from __future__ import annotations

import re
from typing import Protocol

MARKER = re.compile(r"\[\[anima:f-\d+\]\]")
TOOL_HEAD = 120  # what a slimmed tool output keeps of itself


class Said(Protocol):
    """What trimming reads of a stored turn (store/session_rows.py's Turn)."""

    @property
    def role(self) -> str: ...

    @property
    def content(self) -> str: ...


def slim(turn: Said, max_chars: int) -> tuple[str, bool]:
    """A turn trimmed to `max_chars` (tool output to a head and its size), markers kept."""
    text = turn.content
    if turn.role == "tool":
        head = " ".join(text[:TOOL_HEAD].split())
        out = f"[tool output, {len(text)} chars] {head}" + (" …" if len(text) > TOOL_HEAD else "")
    elif len(text) <= max_chars:
        return text, False
    else:
        room = max(40, max_chars - 3)
        head, tail = text[: room * 2 // 3], text[len(text) - room // 3 :]
        head = head.rsplit(" ", 1)[0] if " " in head[-30:] else head
        tail = tail.split(" ", 1)[-1] if " " in tail[:30] else tail
        out = f"{head.rstrip()} … {tail.lstrip()}"
    kept = set(MARKER.findall(out))
    lost = [m for m in dict.fromkeys(MARKER.findall(text)) if m not in kept]
    if lost:
        out += " " + " ".join(lost)
    return out, out != text
