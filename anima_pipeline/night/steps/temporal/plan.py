"""The offline temporal summaries: extractive day summaries (the day's most informative
sentences, what was learned and changed) and the week / month / year cascade built from the
most informative lines of the level below. Pure functions over the step's inputs.
"""

from __future__ import annotations

import re
from datetime import date
from typing import TYPE_CHECKING, Any

from anima_pipeline.text.entities import clip, entities
from anima_pipeline.text.informativeness import informativeness, sentences

if TYPE_CHECKING:
    from anima_pipeline.store.archive import DayConversation

MAX_SUMMARY_CHARS = 8000  # the tool's limit
HIGHLIGHTS = 8
LIST_ITEMS = 25
UNIT_CHARS = 300
# How many lines the cascade keeps from each input, by the input's level.
PICK = {"day": 3, "week": 4, "month": 5}

_PREFIX = re.compile(r"^(?:\[\d\d:\d\d\]\s*)?(?:f-\d+\s+\(\w+\)\s+|[^:：]{1,30}[:：]\s+)?")


def _clip(text: str, limit: int = UNIT_CHARS) -> str:
    return clip(text, limit)


def highlights(convs: list[DayConversation], tz: Any, limit: int = HIGHLIGHTS) -> list[str]:
    """The day's most informative sentences, shown in the order they were said."""
    scored: list[tuple[float, int, str]] = []
    pos = 0
    for conv in convs:
        for m in conv.messages:
            who = m.speaker or m.role
            for s in sentences(m.content):
                pos += 1
                score = informativeness(s)
                if score is None or score <= 0:
                    continue
                bonus = 0.5 if m.role == "user" else 0.0  # facts are mostly what the user tells
                line = f"{who}: {_clip(s)}"
                scored.append((score + bonus, pos, line))
    best = sorted(scored, key=lambda x: (-x[0], x[1]))[:limit]
    return [line for _, _, line in sorted(best, key=lambda x: x[1])]


_CONV_LINE = re.compile(
    r"^\d\d:\d\d–\d\d:\d\d\s+(?P<title>.+?)\s+\(\d+ messages\)$"
)  # the conversation lines of day summaries written by an earlier version
_GREETINGS = frozenset(
    "hi hello hey dear thanks thank ok okay yes no oh wow good morning evening night".split()
)
_TITLES_LINE = re.compile(r"^Conversations: (?P<titles>.+)$")
_NAMED_LINE = re.compile(r"^Named: ")
_HEADER_LINE = re.compile(r"^(?:Day|Week|Month|Year) \d{4}")
_FACT_LINE = re.compile(r"^f-\d+\s+\(\w+\)\s+")


def _pick_lines(content: str, k: int) -> tuple[list[str], list[str]]:
    """(conversation titles, the k most informative other lines in their order) of a
    lower-level summary. Learned facts weigh more than quoted highlights: they are the
    distilled part of a day."""
    titles, units = [], []
    for i, raw in enumerate(content.splitlines()):
        line = raw.strip().lstrip("-•* ").strip()
        if not line or line.endswith(":") or line.startswith("#") or _HEADER_LINE.match(line):
            continue
        if conv := _CONV_LINE.match(line):
            titles.append(conv.group("title").strip('"'))
            continue
        if listed := _TITLES_LINE.match(line):
            titles += [t.strip() for t in listed.group("titles").split("; ") if t.strip()]
            continue
        if _NAMED_LINE.match(line):
            continue
        line = re.sub(r"^\[\d\d:\d\d\]\s*", "", line)
        fact = bool(_FACT_LINE.match(line))
        line = _FACT_LINE.sub("", line)
        score = informativeness(_PREFIX.sub("", line))
        if score is not None:
            units.append((score + (1.5 if fact else 0.0), i, _clip(line)))
    best = sorted(units, key=lambda x: (-x[0], x[1]))[:k]
    return titles, [u for _, _, u in sorted(best, key=lambda x: x[1])]


def bullets(items: list[str], limit: int = LIST_ITEMS) -> list[str]:
    out = [f"- {x}" for x in items[:limit]]
    if len(items) > limit:
        out.append(f"- … and {len(items) - limit} more")
    return out


def named_things(convs: list[DayConversation], limit: int = 12) -> list[str]:
    """The names the day's messages use (people, places, things), most mentioned first,
    speakers left out: they are listed as who talked."""
    speakers = {w for c in convs for m in c.messages if m.speaker for w in m.speaker.split()}
    counts: dict[str, int] = {}
    for c in convs:
        for m in c.messages:
            for name, at_start in entities(m.content):
                parts = name.split()
                if at_start and len(parts) == 1 or parts[0].lower() in _GREETINGS or speakers & set(parts):
                    continue  # a capital that only starts a sentence, a greeting, a speaker
                counts[name] = counts.get(name, 0) + 1
    return sorted(counts, key=lambda n: (-counts[n], n))[:limit]


def day_summary(
    convs: list[DayConversation], learned: list[str], changed: list[str], day: date, tz: Any
) -> str:
    """The offline (extractive) day summary, content first: who talked and about what (the
    conversations' titles), what was learnt and decided (the night's memories), the day's most
    informative sentences, the named things, what changed. No counts or clock times: recall
    shows the first few hundred characters of a summary, and they must say what the day held."""
    who = list(dict.fromkeys(m.speaker or m.role for c in convs for m in c.messages))
    titles = [c.title for c in convs if c.title]
    lines = [f"Day {day.isoformat()}: {', '.join(who)}."]
    if titles:
        lines.append("Conversations: " + "; ".join(dict.fromkeys(titles)))
    if learned:
        lines += ["Learned:", *bullets(learned)]
    picked = highlights(convs, tz)
    if picked:
        lines += ["Highlights:", *bullets(picked)]
    if named := named_things(convs):
        lines.append("Named: " + ", ".join(named))
    if changed:
        lines += ["Changed:", *bullets(changed)]
    return "\n".join(lines)[:MAX_SUMMARY_CHARS]


def period_label(row: dict) -> str:
    if row["level"] == "day":
        return row["period_start"].isoformat()
    if row["level"] == "month":
        return row["period_start"].strftime("%Y-%m")
    return f"{row['level']} {row['period_start'].isoformat()}–{row['period_end'].isoformat()}"


def period_summary(level: str, start: date, end: date, inputs: list[dict]) -> str:
    """The offline cascade: the most informative lines of each input, labelled by period."""
    head = {
        "week": f"Week {start.isocalendar().year}-W{start.isocalendar().week:02d} ({start} – {end})",
        "month": f"Month {start:%Y-%m}",
        "year": f"Year {start.year}",
    }[level]
    lines = [
        f"{head}: built from {len(inputs)} summaries ({', '.join(sorted({r['level'] for r in inputs}))})."
    ]
    for row in inputs:
        titles, picked = _pick_lines(row["content"], PICK.get(row["level"], 3))
        parts = [" / ".join(_clip(t, 80) for t in titles[:4])] if titles else []
        parts += ["; ".join(picked)] if picked else []
        if parts:
            lines.append(f"- {period_label(row)}: " + " — ".join(parts))
    return "\n".join(lines)[:MAX_SUMMARY_CHARS]
