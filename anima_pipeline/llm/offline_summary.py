"""The offline engine's rolling summary of a session: extractive, line per kept sentence.

A compaction hands over the turns that leave the verbatim view; their most informative
sentences (`text/informativeness.py`: names, numbers, dates; greetings and
questions out) become lines ``- [MM-DD HH:MM] speaker: sentence`` appended to the summary
so far, markers ``[[anima:f-N]]`` kept. When the whole no longer fits its budget, the least
informative lines go first (the oldest among equals), so a later turn extends the summary
and the older lines stay as they were written. An honest baseline: it keeps what was said,
it does not paraphrase.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from zoneinfo import ZoneInfo

from anima_pipeline.store.session_rows import Turn
from anima_pipeline.text.informativeness import informativeness, sentences
from anima_pipeline.text.slim import MARKER

LINE_CHARS = 240  # one kept sentence, at most
HEADER = "Summary of the earlier conversation (extractive):"


class ExtractiveSummarizer:
    """The compacted turns' most informative sentences (what the user and the agent said)."""

    name = "offline"

    def __init__(self, tz: ZoneInfo) -> None:
        self.tz = tz

    def extend(self, previous: str, turns: Sequence[Turn], fits: Callable[[str], bool]) -> str:
        said = [
            (t.speaker or t.role, t.content, t.created_at) for t in turns if t.role in ("user", "assistant")
        ]
        return extend(previous, turn_lines(said, self.tz), fits)


def _clip(text: str, limit: int = LINE_CHARS) -> str:
    if len(text) <= limit:
        return text
    markers = " ".join(dict.fromkeys(MARKER.findall(text[limit:])))
    cut = text[:limit].rsplit(" ", 1)[0] if " " in text[:limit] else text[:limit]
    return (cut.rstrip(" ,;") + " …" + (" " + markers if markers else "")).strip()


def turn_lines(
    turns: Sequence[tuple[str, str, datetime]], tz: ZoneInfo, share: float = 1.0
) -> list[tuple[float, str]]:
    """(score, line) for the best sentences of (speaker, text, at) turns, in the order said:
    at most about `share` of the turns' informative sentences, at least one per turn that
    has one, so no turn that said something vanishes without a trace."""
    scored: list[tuple[float, int, int, str]] = []
    seen: set[str] = set()
    for t, (who, text, at) in enumerate(turns):
        for s in sentences(text):
            score = informativeness(s)
            if score is None or score <= 0 or s in seen:  # said again: adds nothing
                continue
            seen.add(s)
            if MARKER.search(s):
                score += 1.0  # a cited memory was used here: keep the citation
            line = f"- [{at.astimezone(tz):%m-%d %H:%M}] {who}: {_clip(s)}"
            scored.append((score, t, len(scored), line))
    if not scored:
        return []
    keep = max(1, round(len(scored) * share))
    best_of_turn: dict[int, tuple[float, int, int, str]] = {}
    for item in scored:
        if item[1] not in best_of_turn or item[0] > best_of_turn[item[1]][0]:
            best_of_turn[item[1]] = item
    chosen = {id(i) for i in best_of_turn.values()}
    for item in sorted(scored, key=lambda x: (-x[0], x[2])):
        if len(chosen) >= max(keep, len(best_of_turn)):
            break
        chosen.add(id(item))
    return [(s, line) for s, _, _, line in (i for i in scored if id(i) in chosen)]


def extend(previous: str, new_lines: list[tuple[float, str]], fits: Callable[[str], bool]) -> str:
    """The summary so far with the new lines appended, thinned (least informative lines first,
    oldest among equals) until `fits` says it does."""
    old = [ln for ln in previous.splitlines() if ln.startswith("- ")]
    said = {_body(ln) for ln in old}
    fresh = []
    for score, ln in new_lines:  # a sentence said again adds nothing to the summary
        if _body(ln) not in said:
            said.add(_body(ln))
            fresh.append((score, ln))
    lines = [(_line_score(ln), ln) for ln in old] + fresh
    text = _render(lines)
    if fits(text):
        return text
    # Deleting the worst line (lowest score, oldest among equals) one at a time deletes them
    # in the order of (score, position): the fewest deletions that fit are found by bisection
    # over that order, as many renderings as the log of the lines (one rendering per deletion
    # took 3 s for the 1,900 turns of a first compaction, docs/benchmarks.md).
    order = sorted(range(len(lines)), key=lambda i: (lines[i][0], i))

    def kept(k: int) -> str:
        gone = set(order[:k])
        return _render([ln for i, ln in enumerate(lines) if i not in gone])

    lo, hi = 1, len(lines)  # fits(kept(len(lines))) holds: the empty summary
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(kept(mid)):
            hi = mid
        else:
            lo = mid + 1
    return kept(lo)


def _body(line: str) -> str:
    return line.split(": ", 1)[-1].strip()


def _line_score(line: str) -> float:
    body = _body(line)
    score = informativeness(body) or 0.0
    return score + (1.0 if MARKER.search(body) else 0.0)


def _render(lines: list[tuple[float, str]]) -> str:
    return "\n".join([HEADER, *(ln for _, ln in lines)]) if lines else ""
