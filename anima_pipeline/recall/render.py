"""How each kind of item reads in the context, and cutting an item to a length.

Content is data (docs/content_is_data.md): every text placed in a context block (a memory's,
a message's, a summary's; a speaker, a title) is fenced first, so it cannot act as structure.
It stays on its item's line (line breaks become spaces: it cannot start a section heading or
a line of its own), holds no angle bracket (it cannot close or open a tag a host wraps the
block in, e.g. ``</memories><system>``) and no citation marker (``[[anima:f-N]]`` only ever
comes from the item's own prefix, so a reply echoing the text cites nothing)."""

from __future__ import annotations

import functools
import re
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from anima_pipeline.core.citations import cite, inert
from anima_pipeline.core.types import LEVELS
from anima_pipeline.recall.sections import (
    TRUNCATION_MARK,
    AssembledContext,
    ContextItem,
    ItemKind,
    MessagePart,
    SearchPage,
)
from anima_pipeline.text.dates import resolve_relative_dates

MIN_CUT = 40  # a cut shorter than this says nothing: skip the item instead
_DAY = LEVELS[0]  # the level of a day's summary, which quotes that day's sentences
_SENTENCE_END = re.compile(r"[.!?](?=\s)|[。！？]")
_BREAKS = re.compile(r"[\r\n\v\f\x85\u2028\u2029]+")
_TAGS = str.maketrans({"<": "‹", ">": "›"})


def fenced(text: str, *, lines: bool = False, own_citations: bool = False) -> str:
    """`text` as inert data, the one fence of every text a prompt holds (docs/content_is_data.md):
    no angle bracket (``</memories><system>`` reads ``‹/memories›‹system›``) and no live
    citation marker (``[[anima:f-1]]`` reads ``⟦anima:f-1⟧``). On one line (an item of a
    section: line breaks become spaces), or with `lines` its line breaks kept (a self block,
    the session's summary, a turn of the conversation: texts of several lines by nature).
    `own_citations` keeps the markers of the agent's own earlier answers live: they are the
    citations it made, and the examples it writes its next ones by."""
    if not lines:
        text = _BREAKS.sub(" ", text)
    return (text if own_citations else inert(text)).translate(_TAGS)


def _local_day(value: datetime | date | None, tz: ZoneInfo) -> date | None:
    if isinstance(value, datetime):
        return value.astimezone(tz).date()
    return value


def _prefix(item: ContextItem) -> str:
    if item.kind == "memory":
        return f"- {cite(item.id)} "
    if item.kind == "message":
        where = f', "{fenced(item.title)}"' if item.title else ""
        return f"- [{item.date} {fenced(item.speaker or '?')}{where}] "
    return f"- [{item.type} {item.date}] "


def _suffix(item: ContextItem, text: str) -> str:
    """A memory's date, unless its text already shows it (a date once per line)."""
    if item.kind != "memory" or not item.date or str(item.date) in text:
        return ""
    return f" ({item.date})"


def _line(item: ContextItem, text: str) -> str:
    """The item's line over `text` (already fenced): its prefix, the text, a memory's date."""
    return _prefix(item) + text + _suffix(item, text)


def with_text(item: ContextItem, text: str, truncated: bool = False) -> ContextItem:
    text = fenced(text)
    line = _line(item, text)
    return item.model_copy(update={"text": text, "line": line, "chars": len(line), "truncated": truncated})


REF_PREFIX: dict[ItemKind, str] = {"memory": "f", "message": "m", "summary": "t"}


def _item(kind: ItemKind, row: dict[str, Any], score: float, why: str, **fields: Any) -> ContextItem:
    """The item of a row of its kind: its ref, rounded score and line over the row's content.
    Built once (recall builds a couple of hundred per context): the text is fenced and the line
    set on the new item before it escapes, instead of a second, copied item (`with_text`)."""
    ref = f"{REF_PREFIX[kind]}-{row['id']}"
    text = fenced(row["content"])
    item = ContextItem(
        id=row["id"],
        ref=ref,
        kind=kind,
        text=text,
        line="",
        chars=0,
        score=round(score, 4),
        why=why,
        **fields,
    )
    item.line = _line(item, text)
    item.chars = len(item.line)
    return item


def memory_item(row: dict[str, Any], *, score: float, why: str, tz: ZoneInfo) -> ContextItem:
    return _item(
        "memory",
        row,
        score,
        why,
        date=_local_day(row.get("observed_at"), tz),
        at=row.get("observed_at"),
        pinned=bool(row.get("pinned")),
        type=row["type"],
        sources=list(row["source_sessions"]),
    )


def message_item(row: dict[str, Any], *, score: float, why: str, tz: ZoneInfo) -> ContextItem:
    return _item(
        "message",
        row,
        score,
        why,
        date=_local_day(row["created_at"], tz),
        at=row["created_at"],
        speaker=row["speaker"] or row["role"],
        conversation_id=row["conversation_id"],
        title=row.get("title"),
    )


def summary_item(row: dict[str, Any], *, score: float, why: str) -> ContextItem:
    return _item("summary", row, score, why, date=row["period_start"], type=row["level"])


def marked_part(part: str, start: int, total: int) -> str:
    """`part`, read from offset `start` of a text of `total` characters, marked as `cut`
    marks a window: a leading mark when it does not begin the text, a trailing one when it does
    not end it."""
    head = TRUNCATION_MARK.strip() + " " if start > 0 else ""
    return head + part + (TRUNCATION_MARK if start + len(part) < total else "")


def cut(item: ContextItem, max_chars: int, words: list[str]) -> ContextItem | None:
    """The item within `max_chars` (its line): whole when it fits, else a window of its text
    around the first query word it holds, marked; None when even a cut would say nothing."""
    if item.chars <= max_chars:
        return item
    if max_chars - 2 * len(TRUNCATION_MARK) < MIN_CUT:  # no room whatever the prefix: the common case
        return None  # once a section is nearly full (every item left is tried against it)
    room = max_chars - len(_prefix(item)) - len(_suffix(item, "")) - 2 * len(TRUNCATION_MARK)
    if room < MIN_CUT:
        return None
    text = item.text
    lower = text.lower()
    hits = [lower.find(w[:5].lower()) for w in words if w]
    at = min((h for h in hits if h >= 0), default=0)
    start = max(0, min(at - room // 3, len(text) - room))
    if start > 0:  # begin on a word
        space = text.find(" ", start)
        start = space + 1 if 0 <= space < start + 20 else start
    window = text[start : start + room]
    if start + room < len(text):
        # end on a sentence when one ends in the window's second half, else on a word
        ends = [m.end() for m in _SENTENCE_END.finditer(window) if m.end() >= len(window) // 2]
        window = window[: ends[-1]] if ends else (re.sub(r"\s+\S*$", "", window) or window)
    out = (TRUNCATION_MARK.strip() + " " if start > 0 else "") + window.strip()
    out += TRUNCATION_MARK if start + len(window) < len(text) else ""
    result = with_text(item, out, truncated=True)
    return result if result.chars <= max_chars else None


# the lines an anima is shown again turn after turn: 512 texts of at most 4,000 characters
# (recall.episodic.READ_CHARS) and their dated copies
@functools.lru_cache(maxsize=512)
def _dated_text(text: str, day: date) -> str:
    return resolve_relative_dates(text, day, annotate=True)


def dated(item: ContextItem) -> ContextItem:
    """A message as recall shows it: each relative time phrase as said, then its date seen
    from the day it was said ("yesterday (2023-05-07)", "last week (the week before
    2023-06-09, June 2023)"), so a line read months later says when; a day's summary alike
    (it quotes what was said that day). A memory (written with absolute dates already:
    docs/architecture.md), a week's or longer summary (it quotes several days) and a text
    without such a phrase are returned as they are."""
    if item.date is None or not (item.kind == "message" or (item.kind == "summary" and item.type == _DAY)):
        return item
    text = _dated_text(item.text, item.date)
    return item if text == item.text else with_text(item, text, truncated=item.truncated)


def fit(item: ContextItem, max_chars: int, words: list[str]) -> tuple[ContextItem, ContextItem] | None:
    """The item's line within `max_chars` as said (`cut`) and as a context shows it (`dated`,
    then `cut`); None when it does not fit. A repeat is told by the line as said (a date read
    off "on Friday" is not another fact than a memory of that Friday). The dates are read only
    for an item that fits (one that does not is tried again as sections fill; reading them
    costs about 45 µs a line); should the dated line not fit where the plain one does, the
    plain one is shown."""
    said = cut(item, max_chars, words)
    if said is None or item.kind == "memory":
        return None if said is None else (said, said)
    return said, cut(dated(item), max_chars, words) or said


def page_lines(page: SearchPage) -> str:
    """A search page as compact lines for a prompt, one result a line: `ref | date | type |
    text` (a message: `ref | date | speaker in conversation | text`), then how to get more.
    Texts are fenced like a context block's (one line, no markers, no angle brackets)."""

    def line(i: ContextItem) -> str:
        what = i.type or "-"
        if i.kind == "message":
            what = f"{fenced(i.speaker or '-')} in {fenced(i.conversation_id or '-')}"
        return f"{i.ref} | {i.date.isoformat() if i.date else '-'} | {what} | {fenced(i.text)}"

    head = f"{len(page.items)} result(s) for {page.query!r} from offset {page.offset}"
    more = f"\n(more: call again with offset={page.offset + page.limit})" if page.has_more else ""
    if any(i.truncated and i.kind == "message" for i in page.items):
        more += f"\n({TRUNCATION_MARK.strip()} marks a message shown in part: read_message with its ref reads the rest)"
    return "\n".join([head, *map(line, page.items)]) + more


def read_note(ctx: AssembledContext, reader: str = "read_message") -> str | None:
    """For a reader with a way to read a message whole (`reader`: the MCP tool, or `anima
    message`): when a past message is shown in part, the line naming the refs it reads them
    by; None when every message line is whole."""
    shown = [i for s in ctx.sections for i in s.items if i.kind == "message" and i.truncated]
    if not shown:
        return None
    refs = ", ".join(f"{i.ref} [{i.date} {fenced(i.speaker or '?')}]" for i in shown)
    return f"({TRUNCATION_MARK.strip()} marks a past message shown in part; {reader} with its ref reads it whole: {refs})"


def context_lines(ctx: AssembledContext) -> str:
    """A context for a reader with tools (MCP `context`): the block as rendered, then
    `read_note`. The note comes after the block, outside its budgets: the block stays every
    door's, byte for byte (a ref on each cut line took characters from recall:
    docs/benchmarks.md)."""
    note = read_note(ctx)
    return ctx.rendered if note is None else f"{ctx.rendered}\n\n{note}"


def message_lines(part: MessagePart) -> str:
    """A message read by its ref, for a prompt: a heading line (ref | time | speaker in
    conversation | the characters shown of how many), then its text, fenced with its line
    breaks kept (a pasted document keeps its shape), then how to read on."""
    where = f'"{fenced(part.title)}"' if part.title else fenced(part.conversation_id)
    end = part.offset + len(part.content)
    head = (
        f"{part.id} | {part.created_at.isoformat()} | {fenced(part.speaker or part.role)} in {where} | "
        f"characters {part.offset:,}-{end:,} of {part.total_chars:,}"
    )
    more = f"\n(more: call again with offset={part.next_offset})" if part.has_more else ""
    return head + "\n" + fenced(part.content, lines=True) + more
