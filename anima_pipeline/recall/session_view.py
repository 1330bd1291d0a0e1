"""The current conversation as the model sees it: summary | slim | raw (README, "The whole
turn"), kept within a token budget. Compression never deletes a stored message.

* **raw**: the latest turns verbatim, within `working.raw_share` of the messages budget and
  never fewer than `working.raw_min_turns` (the very latest turn is cut only when it alone
  is larger than the whole budget, and then flagged).
* **slim**: the turns before them, tool output and long content trimmed to
  `working.slim_chars`, every ``[[anima:f-N]]`` marker kept (appended when the cut took it).

Every turn and the summary are shown fenced (`render.fenced`, docs/content_is_data.md): the
markers of user, tool and system turns inert, the agent's own live, tags neutralised.
* **summary**: a rolling summary of everything older, stored per (session, watermark) in
  ``session_summary``; the watermark is the last message it covers.

A compaction cycle starts when the slim view no longer
fits the messages budget less the soft margin (`context.soft_tokens`, at most a fifth of
the budget): the watermark moves forward until the slim turns take at most half of what the summary
and the raw turns leave, so the next turns are added without another cycle. Before
the turns move into the summary they are *flushed*: the engine extracts the durable facts
in them with light sleep stage 1's rules (`memory/flush.py`), once per cycle (a row in
``session_flush`` per watermark, in the same transaction). The summary of the new watermark
extends the stored one with those turns only: the engine's summarizer (`Engine.summarizer`:
the model's, Claude's or an OpenAI-compatible server's, with its instructions and the identity
context as a cached prefix, llm/summary.py; offline, the extractive one of llm/offline_summary.py)
sees each turn once.
A turn that needs no cycle reuses the stored summary and calls no engine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from pydantic import BaseModel

from anima_pipeline.config import Settings
from anima_pipeline.llm.contract import Summarizer
from anima_pipeline.recall.render import fenced
from anima_pipeline.store import session_rows as store
from anima_pipeline.store.db import Connection, forget_lock
from anima_pipeline.store.events import Audit
from anima_pipeline.store.session_rows import Turn
from anima_pipeline.text.slim import MARKER, slim

SOFT_SHARE = 0.2  # the soft margin is at most this share of the messages budget
LOW_WATER = 0.5  # a cycle leaves slim this share of the room raw and the summary leave
SUMMARY_SHARE = 0.25  # the summary takes at most this share of the messages budget

ViewSegment = Literal["summary", "slim", "raw"]


class MessageItem(BaseModel):
    """One message of the view. `role` is the stored role (user, assistant, tool, system); the
    summary is one item of role "user" ahead of the turns."""

    segment: ViewSegment
    role: str
    content: str
    message_id: str | None = None  # the host's id (external_id) of a stored message
    created_at: datetime | None = None
    chars: int
    tokens: int
    cut: bool = False


@dataclass
class FlushOutcome:
    memory_ids: list[int] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)


Flusher = Callable[[Connection, Audit, Sequence[Turn]], FlushOutcome]


@dataclass
class Plan:
    """Which turns go where: indexes into the session's turns."""

    covered: int  # turns[:covered] are in the stored summary
    compact_to: int  # turns[covered:compact_to] move into the summary in this cycle
    slim_from: int  # turns[compact_to:raw_from] are slim
    raw_from: int  # turns[raw_from:] are raw

    @property
    def compacts(self) -> bool:
        return self.compact_to > self.covered


def plan_view(
    turns: Sequence[Turn],
    covered: int,
    summary_tokens: int,
    budget: int,
    settings: Settings,
    count: Callable[[str], int],
) -> Plan:
    """Where raw, slim and the summary start, for a messages budget of `budget` tokens."""
    n = len(turns)
    raw_cost = [count(t.content) for t in turns]
    slim_cost = [count(slim(t, settings.working.slim_chars)[0]) for t in turns]
    soft = min(settings.context.soft_tokens, int(budget * SOFT_SHARE))
    room = budget - summary_tokens
    if sum(raw_cost[covered:]) <= room:
        return Plan(covered, covered, covered, covered)
    raw_from = _raw_from(raw_cost, covered, room * settings.working.raw_share, settings.working.raw_min_turns)
    if sum(raw_cost[raw_from:]) + sum(slim_cost[covered:raw_from]) <= room - soft:
        return Plan(covered, covered, covered, raw_from)
    # a compaction cycle: the summary may grow to its share; raw and slim keep half the rest
    room = budget - max(summary_tokens, summary_limit(budget, settings))
    raw_from = max(
        covered,
        _raw_from(raw_cost, covered, room * settings.working.raw_share, settings.working.raw_min_turns),
    )
    keep = sum(raw_cost[raw_from:])
    target = keep + int(max(0, room - soft - keep) * LOW_WATER)  # slim takes half of what raw leaves
    slim_from = raw_from
    while slim_from > covered and keep + slim_cost[slim_from - 1] <= target:
        slim_from -= 1
        keep += slim_cost[slim_from]
    if slim_from == covered and n > covered:  # everything fits after all: no cycle needed
        return Plan(covered, covered, covered, raw_from)
    return Plan(covered, slim_from, slim_from, raw_from)


def summary_limit(budget: int, settings: Settings) -> int:
    """The tokens the rolling summary may take: its setting, at most a share of the budget."""
    return max(1, min(settings.working.summary_tokens, int(budget * SUMMARY_SHARE)))


def _raw_from(cost: list[int], covered: int, raw_budget: float, min_turns: int) -> int:
    i, used = len(cost), 0
    while i > covered:
        c = cost[i - 1]
        if len(cost) - i >= min_turns and used + c > raw_budget:
            break
        used += c
        i -= 1
    return i


def _covered(turns: Sequence[Turn], summary: dict | None) -> int:
    if summary is None:
        return 0
    mark = (summary["watermark_at"], summary["watermark"])
    return sum(1 for t in turns if (t.created_at, t.id) <= mark)


@dataclass
class Session:
    """A session as read under its lock: its turns in order and its latest stored summary."""

    id: str
    turns: list[Turn]
    stored: dict | None

    @property
    def covered(self) -> int:
        return _covered(self.turns, self.stored)

    def need(self, count: Callable[[str], int]) -> int:
        """Tokens the view takes uncompressed: the stored summary and every turn after it."""
        summary = self.stored["content"] if self.stored else ""
        return count(summary) + sum(count(t.content) for t in self.turns[self.covered :])


def open_session(conn: Connection, anima_id: str, session_id: str) -> Session:
    """Lock the session (until the transaction ends: one compaction at a time; no forget of
    the anima meanwhile, store/db.py `forget_lock`) and read it."""
    forget_lock(conn, anima_id, shared=True)
    store.lock_session(conn, anima_id, session_id)
    turns = store.session_turns(conn, anima_id, session_id)
    return Session(session_id, turns, store.latest_summary(conn, anima_id, session_id))


@dataclass
class SessionView:
    items: list[MessageItem]
    omitted: int  # turns neither in the summary nor shown: the budget had no room for them
    turns: int
    watermark: int | None  # the stored summary's (after this call)
    compacted: bool  # this call ran a compaction cycle
    flushed: FlushOutcome | None
    summary_reused: bool  # a stored summary was used as it was


def session_view(
    conn: Connection,
    audit: Audit,
    session: Session,
    budget: int,
    *,
    settings: Settings,
    count: Callable[[str], int],
    summarizer: Summarizer,
    flusher: Flusher | None,
) -> SessionView:
    """The session's messages within `budget` tokens, compacting (flush, then summary) when
    the view needs a new cycle. Runs in the caller's transaction, `session` opened (locked) in it."""
    anima_id, session_id = audit.anima_id, session.id
    turns, stored, covered = session.turns, session.stored, session.covered
    summary = stored["content"] if stored else ""
    plan = plan_view(turns, covered, count(summary), budget, settings, count)
    flushed = None
    if plan.compacts:
        moving = turns[plan.covered : plan.compact_to]
        mark = moving[-1]
        if flusher is not None and store.flush_of(conn, anima_id, session_id, mark.id) is None:
            flushed = flusher(conn, audit, moving)
            store.record_flush(
                conn,
                audit,
                session_id,
                mark.id,
                stored["watermark"] if stored else None,
                flushed.memory_ids,
                flushed.stats,
                summarizer.name,
            )
        limit = summary_limit(budget, settings)
        summary = summarizer.extend(summary, moving, lambda text: count(text) <= limit)
        stored = store.save_summary(
            conn,
            audit,
            session_id,
            mark,
            stored["watermark"] if stored else None,
            summary,
            plan.compact_to,
            summarizer.name,
        )
        summary = stored["content"]
    items: list[MessageItem] = []
    if summary:
        shown = fenced(summary, lines=True)
        items.append(
            MessageItem(segment="summary", role="user", content=shown, chars=len(shown), tokens=count(shown))
        )
    for t in turns[plan.compact_to : plan.raw_from]:
        text, was_cut = slim(t, settings.working.slim_chars)
        items.append(_item("slim", t, text, was_cut, count))
    raw = list(turns[plan.raw_from :])
    costs = [count(t.content) for t in raw]
    # A budget too small for all of it: the latest turn keeps at least half of it (or all it
    # needs), the older latest turns their slim form; the oldest slim turns give way first,
    # then the oldest of the latest turns.
    omitted, used = 0, sum(i.tokens for i in items)
    if used + sum(costs) > budget:
        older = [count(slim(t, settings.working.slim_chars)[0]) for t in raw[:-1]]
        need = sum(older) + (min(costs[-1], budget // 2) if raw else 0)
        slims = [i for i in items if i.segment == "slim"]
        while used + need > budget and (slims or older):
            if slims:
                gone = slims.pop(0)
                items.remove(gone)
                used -= gone.tokens
            else:
                raw.pop(0), costs.pop(0)
                need -= older.pop(0)
            omitted += 1
    left = budget - sum(i.tokens for i in items)
    rest = sum(costs)  # what turn k and every later one cost raw (kept as it goes, not re-summed)
    for k, t in enumerate(raw):
        segment: ViewSegment = "raw"
        text, was_cut = t.content, False
        # the latest turns do not all fit (huge tool output): the oldest of them are slimmed
        # (once one fits, every later one does), and the very last is cut as a last resort
        if k < len(raw) - 1 and rest > left:
            (text, was_cut), segment = slim(t, settings.working.slim_chars), "slim"
        elif k == len(raw) - 1 and costs[k] > left:
            text, was_cut = _fit(text, max(1, left), count), True
        item = _item(segment, t, text, was_cut, count)
        left -= item.tokens
        rest -= costs[k]
        items.append(item)
    items, dropped = trim_view(items, budget, count)
    return SessionView(
        items=items,
        omitted=omitted + dropped,
        turns=len(turns),
        watermark=stored["watermark"] if stored else None,
        compacted=plan.compacts,
        flushed=flushed,
        summary_reused=bool(stored) and not plan.compacts,
    )


def trim_view(
    items: list[MessageItem], budget: int, count: Callable[[str], int]
) -> tuple[list[MessageItem], int]:
    """`items` within `budget` tokens whatever they held: the oldest slim turns left out
    first, then the summary cut (or left out), then the oldest turns, and the latest cut
    (flagged) or, when not even its head fits, left out. Returns the items and how many turns
    were left out."""
    items, omitted = list(items), 0

    def over() -> int:
        return sum(i.tokens for i in items) - budget

    while over() > 0 and any(i.segment == "slim" for i in items[:-1]):
        items.remove(next(i for i in items[:-1] if i.segment == "slim"))
        omitted += 1
    if over() > 0 and items and items[0].segment == "summary":
        summary = items.pop(0)
        room = summary.tokens - over()
        if room > 0:
            text = _fit(summary.content, room, count)
            if count(text) <= room:
                items.insert(0, summary.model_copy(update=_sized(text, count) | {"cut": True}))
    while over() > 0 and len(items) > 1:
        omitted += items.pop(0).segment != "summary"
    if over() > 0 and items:
        last = items.pop()
        room = last.tokens - over()
        text = _fit(last.content, room, count) if room > 0 else ""
        if text and count(text) <= room:
            items.append(last.model_copy(update=_sized(text, count) | {"cut": True}))
        elif last.segment != "summary":
            omitted += 1
    return items, omitted


def _sized(text: str, count: Callable[[str], int]) -> dict:
    return {"content": text, "chars": len(text), "tokens": count(text)}


def _item(segment: ViewSegment, t: Turn, text: str, cut: bool, count: Callable[[str], int]) -> MessageItem:
    """A turn as the model sees it: fenced like every text of the context (a user's literal
    ``[[anima:f-1]]`` or ``</memories>`` is data, and a model echoing it cites nothing), its
    lines kept, an assistant turn's own citations live; the stored message is as it was."""
    text = fenced(text, lines=True, own_citations=t.role == "assistant")
    return MessageItem(
        segment=segment,
        role=t.role,
        content=text,
        message_id=t.external_id,
        created_at=t.created_at,
        chars=len(text),
        tokens=count(text),
        cut=cut,
    )


def _fit(text: str, tokens: int, count: Callable[[str], int]) -> str:
    """The head of `text` within `tokens`, with the markers it held appended (counted too)."""
    markers = " ".join(dict.fromkeys(MARKER.findall(text)))
    tail = " …" + (" " + markers if markers else "")
    room = tokens - count(tail)
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(text[:mid]) <= room:
            lo = mid
        else:
            hi = mid - 1
    head = text[:lo]
    while head and count(head + tail) > tokens:  # the join may round up
        head = head[:-1]
    return head + tail
