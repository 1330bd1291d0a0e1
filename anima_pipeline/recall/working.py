"""The working context of a turn: everything the model gets, inside one token budget.

A turn's cycle before the model call (README, "The whole turn"): the system prompt (Self, the resident
memories, the temporal segment, the recall sections) folded to per-segment character budgets
and one global system budget; the current conversation as summary | slim | raw
(`recall.session_view`); passive recall before the call. `segments` is the prompt debug:
one row per segment, its characters, estimated tokens, items and whether it was cut; the
rows add up to the characters and tokens returned.

System segments, in prompt order, each with its budget (settings, characters):

    self.identity, self.persona           identity never cut; persona whole up to CORE_SHARE
                                          of the system's characters, then cut to its head
    self.values, self.relationships,
    self.current_state                    ANIMA_WORKING_BLOCK_CHARS each
    self.autobiography_summary            ANIMA_WORKING_AUTOBIOGRAPHY_CHARS
    resident                              ANIMA_RECALL_RESIDENT_CHARS (pinned ∪ most cited)
    temporal                              ANIMA_WORKING_TEMPORAL_CHARS: yesterday's day summary,
                                          the current week and month (the latest written)
    recall.summaries, recall.memories,
    recall.episodic                       today's `context` for the message, ANIMA_RECALL_BUDGET_CHARS
                                          together; the current session's own sources and the
                                          resident memories excluded

The fold: each segment is first cut to its own budget; when they still exceed the global
system budget (ANIMA_WORKING_SYSTEM_CHARS, and ANIMA_WORKING_SYSTEM_SHARE of the turn's token
budget, more when the session is short and leaves part of its own share unused) they give
way in FOLD_ORDER, each as far as needed before the next is touched: first the background,
the self blocks from the autobiography summary up to values, each down to its
head (ANIMA_WORKING_BLOCK_HEAD_CHARS, cut on a line or sentence) and never further; then the
temporal segment (month, week, then yesterday); then the recall sections (episodic,
memories, summaries together: the lowest-scored item of the three first) but only down to
RECALL_SHARE
of the system's characters; the resident set last (resident memories come before passive
recall: what every turn carries goes last). When that is not enough a second round goes the
same way with no share kept and the background blocks below their heads. So the segments
scale with a small budget instead of the core keeping its room and recall getting what is
left. Identity is never cut, even past the budget (the report shows it).

The messages get what the system leaves of the budget, less the user's message itself.

The budget holds, the message counted: the character fold is an estimate, so the segments
are then measured and cut again in FOLD_ORDER until they fit their share in tokens
(`fold_tokens`, past their heads if need be), and the session view is kept within what is
left (`session_view.trim_view`). A message that, with identity and persona, leaves no room
is refused (`refuse_if_no_room`): README, "The whole turn".
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from anima_pipeline.config import Settings
from anima_pipeline.core.errors import InputError
from anima_pipeline.core.types import SELF_BLOCKS
from anima_pipeline.recall.assemble import assemble_context
from anima_pipeline.recall.render import fenced, fit, summary_item
from anima_pipeline.recall.sections import AssembledContext, ContextItem
from anima_pipeline.recall.session_view import (
    Flusher,
    FlushOutcome,
    MessageItem,
    Summarizer,
    open_session,
    session_view,
    trim_view,
)
from anima_pipeline.store import session_rows as store
from anima_pipeline.store.db import Connection
from anima_pipeline.store.events import Audit
from anima_pipeline.store.layers import SelfBlockRepo

CORE = ("identity", "persona")  # identity never cut; persona whole up to CORE_SHARE
CORE_SEGMENTS = tuple(f"self.{name}" for name in CORE)
# Shares of the system's characters that scale the segments with a small budget: identity and
# persona stay whole up to CORE_SHARE of it (then the persona is cut to its head, identity
# never), and the recall sections give way only down to RECALL_SHARE of it while another
# segment can still give way (docs/benchmarks.md, "The working context": at 500 tokens the
# persona kept its room and recall got 114 characters).
CORE_SHARE = 0.35
RECALL_SHARE = 0.4
RECALL_SECTIONS = ("summaries", "memories", "episodic")
RECALL_ORDER = {f"recall.{name}": k for k, name in enumerate(RECALL_SECTIONS)}
FOLD_ORDER = (
    "self.autobiography_summary",  # background first, down to its head
    "self.current_state",
    "self.relationships",
    "self.values",
    "temporal",
    "recall.episodic",
    "recall.memories",
    "recall.summaries",
    "resident",  # last: resident memories come before passive recall
)
TITLES = {
    "resident": "Resident memories",
    "temporal": "Recent time (yesterday, this week, this month)",
    "recall.summaries": "Summaries of the period asked about",
    "recall.memories": "Recalled memories",
    "recall.episodic": "Past messages",
}
FIRST_RECALL = next(name for name in FOLD_ORDER if name.startswith("recall."))
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|\n")
HEAD_MIN_CHARS = 20  # a self block cut shorter than this is left out: a stub says nothing


class SystemSegment(BaseModel):
    """One segment of the system prompt: `text` is what goes into the prompt (its title line
    first), `items` the memories, summaries or messages it holds (none for a self block)."""

    name: str
    text: str
    items: list[ContextItem] = Field(default_factory=list)
    chars: int
    tokens: int = 0
    budget: int | None = None  # characters; None: never cut
    cut: bool = False


class SegmentReport(BaseModel):
    name: str  # "self.identity" … "recall.episodic", "messages.summary", "messages.slim", "messages.raw"
    part: Literal["system", "messages"]
    chars: int
    tokens: int
    items: int
    budget_chars: int | None = None
    cut: bool = False


class WorkingContext(BaseModel):
    anima_id: str
    session_id: str
    message: str
    system: list[SystemSegment]
    messages: list[MessageItem]
    segments: list[SegmentReport]
    chars: int = Field(description="characters of the system segments' texts and the messages' contents")
    tokens: int = Field(description="estimated tokens of the same (the segments' sum)")
    message_tokens: int = Field(
        description="the user's message, reserved from the budget (not returned): "
        "tokens + message_tokens never exceed budget_tokens"
    )
    omitted_turns: int = Field(
        0,
        description="turns of the session neither in its summary nor shown: the budget had no room for them",
    )
    budget_tokens: int
    system_budget_chars: int
    compaction_at_tokens: int = Field(
        description="the session compacts (and flushes first) past this: the window less the reserve and the soft margin"
    )
    counter: str = Field(description="how tokens were estimated: anthropic (count_tokens) or ratio")
    watermark: int | None = None
    compacted: bool = False
    summary_reused: bool = False
    flushed: list[str] = Field(default_factory=list, description="memories the flush of this call wrote")
    recall_mode: Literal["hybrid", "lexical"] = Field(
        "lexical", description="how the recall sections were ranked, as for a context"
    )
    lexical_reason: str | None = Field(None, description="why recall is lexical, when it is")

    def system_text(self) -> str:
        """The system prompt: the segments' texts, a blank line between two (not counted)."""
        return "\n\n".join(s.text for s in self.system if s.text)

    def as_messages(self, then: str | None = None) -> list[dict[str, str]]:
        """The messages for the Messages API, `then` (the user's message) last: tool and system
        turns as user text, turns of the same role merged, a user turn first."""
        out: list[dict[str, str]] = []
        said = [(m.role, m.content) for m in self.messages] + ([("user", then)] if then is not None else [])
        for stored, content in said:
            role = stored if stored in ("user", "assistant") else "user"
            text = content if stored in ("user", "assistant") else f"[{stored}] {content}"
            if out and out[-1]["role"] == role:
                out[-1]["content"] += "\n\n" + text
            else:
                out.append({"role": role, "content": text})
        if out and out[0]["role"] == "assistant":
            out.insert(0, {"role": "user", "content": "(the conversation so far)"})
        return out


# --- the system segments ----------------------------------------------------------------


def _head(text: str, limit: int) -> str:
    """The head of a block within `limit` characters, ending on a line or a sentence."""
    if len(text) <= limit:
        return text
    window = text[: max(0, limit - 2)]
    ends = [m.start() for m in _SENTENCE_END.finditer(window)]
    stop = ends[-1] if ends and ends[-1] >= limit // 2 else len(window)
    return window[:stop].rstrip() + " …"


class _Seg:
    """A segment while it is folded."""

    def __init__(
        self, name: str, budget: int | None, *, body: str = "", items: list[ContextItem] | None = None
    ) -> None:
        self.name, self.budget = name, budget
        self.body, self.full_body = body, body
        self.items = list(items or [])
        self.title = (
            f"# Self: {name.removeprefix('self.')}" if name.startswith("self.") else f"# {TITLES[name]}"
        )
        self.cut = False

    @property
    def text(self) -> str:
        if self.name.startswith("self."):
            return f"{self.title}\n{self.body}" if self.body.strip() else ""
        return "\n".join([self.title, *(i.line for i in self.items)]) if self.items else ""

    def shrink(self, to: int, head_min: int) -> None:
        """Cut to `to` characters at most (a self block never below `head_min`, its head)."""
        if len(self.text) <= to:
            return
        if self.name.startswith("self."):
            room = max(to - len(self.title) - 1, min(head_min, len(self.body)))
            whole = room >= len(self.full_body)
            self.body = _head(self.full_body, room) if whole or room >= HEAD_MIN_CHARS else ""
        else:
            while self.items and len(self.text) > to:
                self.items.pop()
        self.cut = True


def fold_tokens(segs: list[_Seg], limit: int, measure: Callable[[str], int]) -> dict[str, int]:
    """The segments cut in FOLD_ORDER until their measured tokens fit `limit`: the character
    fold (`system_segments`) estimates, this makes sure. Past its budget a self block goes
    below its head, and to nothing, before the next segment is touched; identity and persona
    are never cut (`working_context` refuses a budget they do not fit). Returns each
    segment's tokens."""
    tokens = {s.name: measure(s.text) if s.text else 0 for s in segs}
    by_name = {s.name: s for s in segs}
    for name in FOLD_ORDER:
        seg = by_name[name]
        while tokens[name] and sum(tokens.values()) > limit:
            over = sum(tokens.values()) - limit
            chars = len(seg.text)
            seg.shrink(max(0, chars - 1 - math.ceil(over * chars / tokens[name])), 0)
            tokens[name] = measure(seg.text) if seg.text else 0
    return tokens


def _temporal_items(conn: Connection, anima_id: str, today: datetime, budget: int) -> list[ContextItem]:
    rows = store.temporal_for(conn, anima_id, today.date())
    each = max(80, budget // max(1, len(rows)))
    items = []
    for r in rows:
        fitted = fit(summary_item(r, score=0.0, why=f"{r['level']} summary"), each, [])
        if fitted is not None:
            items.append(fitted[1])  # as a context shows it: a day's quoted "yesterday" dated
    return items


def system_segments(
    conn: Connection,
    anima_id: str,
    recalled: AssembledContext,
    now: datetime,
    settings: Settings,
    cap_chars: int,
) -> tuple[list[_Seg], int]:
    """The segments, each cut to its budget, then folded to `cap_chars` in FOLD_ORDER."""
    blocks = SelfBlockRepo(conn).all(anima_id)
    budgets: dict[str, int | None] = dict.fromkeys(CORE)
    budgets["autobiography_summary"] = settings.working.autobiography_chars
    segs = [
        _Seg(
            f"self.{name}",
            budgets.get(name, settings.working.block_chars),
            body=fenced(blocks[name].strip(), lines=True),  # night-written text: data, like a memory's
        )
        for name in SELF_BLOCKS
    ]
    resident = recalled.section("resident")
    segs.append(_Seg("resident", settings.recall.resident_chars, items=resident.items))
    segs.append(
        _Seg(
            "temporal",
            settings.working.temporal_chars,
            items=_temporal_items(conn, anima_id, now, settings.working.temporal_chars),
        )
    )
    for name in RECALL_SECTIONS:
        section = recalled.section(name)  # type: ignore[arg-type]
        segs.append(
            _Seg(f"recall.{name}", section.budget or settings.recall.budget_chars, items=section.items)
        )
    head = settings.working.block_head_chars
    for s in segs:
        if s.budget is not None:
            s.shrink(s.budget, head)
    by_name = {s.name: s for s in segs}
    identity, persona = by_name["self.identity"], by_name["self.persona"]
    persona_room = int(CORE_SHARE * cap_chars) - len(identity.text)
    if len(persona.text) > persona_room:  # persona: whole up to its share, then its head
        persona.shrink(max(persona_room, 0), head)
    recall = [by_name[f"recall.{name}"] for name in RECALL_SECTIONS]
    floor = int(RECALL_SHARE * cap_chars)
    for keep in (floor, 0):  # first the recall sections keep their share, then nothing is kept
        for name in FOLD_ORDER:
            over = sum(len(s.text) for s in segs) - cap_chars
            if over <= 0:
                return segs, cap_chars
            if name.startswith("recall."):
                if name == FIRST_RECALL:  # the three together
                    to = max(keep, sum(len(s.text) for s in recall) - over)
                    _shrink_recall(recall, to)
                continue
            seg = by_name[name]
            # first pass: a background block down to its head; second: below it, before recall
            seg.shrink(max(0, len(seg.text) - over), head if keep else 0)
    return segs, cap_chars


def _shrink_recall(recall: list[_Seg], to: int) -> None:
    """The recall sections together within `to` characters, the lowest-scored item of any of
    them first. A section's scores are the IDF-weighted share of the question's terms an item
    holds (recall.ranking), with vectors its fused rank (`fuse`: 1 for first in both lists),
    or the second stage's: comparable enough across sections that at 500 and 1,000 tokens
    this kept more of the answers than cutting one section after the other
    (docs/benchmarks.md, "Recall that ranks what it found")."""
    while sum(len(s.text) for s in recall) > to:
        holding = [s for s in recall if s.items]
        if not holding:
            return
        seg = min(holding, key=lambda s: (min(i.score for i in s.items), -RECALL_ORDER[s.name]))
        worst = min(range(len(seg.items)), key=lambda k: (seg.items[k].score, -k))
        seg.items.pop(worst)
        seg.cut = True


# --- the whole turn ---------------------------------------------------------------------


def working_context(
    conn: Connection,
    audit: Audit,
    session_id: str,
    message: str,
    *,
    budget: int,
    settings: Settings,
    count: Callable[[str], int],
    measure: Callable[[str], int] | None = None,
    counter_name: str = "ratio",
    summarizer: Summarizer,
    flusher: Flusher | None,
    now: datetime,
) -> WorkingContext:
    """The working context of the turn that answers `message` in `session_id`, within `budget`
    tokens. Writes only the session's summary and flush when a compaction cycle is due.

    `count` is the estimate the packing uses, item by item (fast); `measure` (default: the
    same) what the report states per segment, e.g. Anthropic's token counting."""
    exact = measure is None  # one estimate for the packing and the report
    measure = measure or count
    anima_id = audit.anima_id
    recalled = assemble_context(conn, anima_id, message, settings=settings, session_id=session_id, now=now)
    # the system's cap in characters: its setting, and at most its share of the budget in
    # tokens, converted at the ratio of the segments' own text (English and Chinese differ)
    draft, _ = system_segments(conn, anima_id, recalled, now, settings, settings.working.system_chars)
    sample = "".join(s.text for s in draft)
    measured = measure(sample) if sample else 0
    per_token = len(sample) / max(1, measured) if sample else settings.chars_per_token
    if not exact and sample:  # pack by the fast estimate, scaled to what the engine counts
        scale, estimate = measured / max(1, count(sample)), count
        count = lambda text: math.ceil(estimate(text) * scale)  # noqa: E731
    message_tokens = measure(message)
    core = sum(measure(s.text) for s in draft if s.name in CORE_SEGMENTS and s.text)
    refuse_if_no_room(budget, message_tokens, core)
    # the system gets its share of the budget, and whatever a short session leaves unused
    floor = budget * (1 - settings.working.system_share)  # what the messages may claim at least
    session = open_session(conn, anima_id, session_id)
    need = session.need(count)
    left = (budget - message_tokens - min(need, floor)) * 0.97  # a margin: the fold's text may read denser
    system_tokens = min(max(budget * settings.working.system_share, left), budget - message_tokens)
    cap = min(settings.working.system_chars, int(system_tokens * per_token))
    segs, cap = (
        system_segments(conn, anima_id, recalled, now, settings, cap) if cap < len(sample) else (draft, cap)
    )
    tokens = fold_tokens(segs, int(system_tokens), measure)
    system = [
        SystemSegment(
            name=s.name,
            text=s.text,
            items=s.items,
            chars=len(s.text),
            tokens=tokens[s.name],
            budget=s.budget,
            cut=s.cut,
        )
        for s in segs
    ]
    room = max(0, budget - sum(s.tokens for s in system) - message_tokens)
    view = session_view(
        conn, audit, session, room, settings=settings, count=count, summarizer=summarizer, flusher=flusher
    )
    reports = [
        SegmentReport(
            name=s.name,
            part="system",
            chars=s.chars,
            tokens=s.tokens,
            items=_items(s),
            budget_chars=s.budget,
            cut=s.cut,
        )
        for s in system
    ]
    messages, omitted = view.items, view.omitted
    by = None if exact else measure
    parts = _message_reports(messages, by)
    system_total = sum(r.tokens for r in reports)
    for attempt in range(5):  # the engine's count of the turns above the estimate they were packed by
        over = system_total + sum(r.tokens for r in parts) + message_tokens - budget
        if over <= 0:
            break
        if attempt == 4:  # never over the budget: the turns give way whole
            omitted += sum(m.segment != "summary" for m in messages)
            messages, parts = [], _message_reports([], by)
            break
        messages, dropped = trim_view(messages, sum(m.tokens for m in messages) - over, count)
        omitted += dropped
        parts = _message_reports(messages, by)
    reports += parts
    flushed: FlushOutcome | None = view.flushed
    return WorkingContext(
        anima_id=anima_id,
        session_id=session_id,
        message=message,
        system=system,
        messages=messages,
        omitted_turns=omitted,
        segments=reports,
        chars=sum(r.chars for r in reports),
        tokens=sum(r.tokens for r in reports),
        message_tokens=message_tokens,
        budget_tokens=budget,
        system_budget_chars=cap,
        compaction_at_tokens=compaction_threshold(settings),
        counter=counter_name,
        watermark=view.watermark,
        compacted=view.compacted,
        summary_reused=view.summary_reused,
        flushed=[f"f-{i}" for i in (flushed.memory_ids if flushed else [])],
        recall_mode=recalled.recall_mode,
        lexical_reason=recalled.lexical_reason,
    )


def refuse_if_no_room(budget: int, message_tokens: int, core_tokens: int) -> None:
    """InputError when the message and the self's identity and persona (never cut) alone do
    not fit `budget`: no cut could make the context fit, and a message cut short would answer
    another question. Named `message` (or `budget` when the self alone is over it), the words
    naming both."""
    if message_tokens + core_tokens <= budget:
        return
    field = "budget" if core_tokens > budget else "message"
    raise InputError(
        f"the message ({message_tokens:,} tokens) and the self's identity and persona "
        f"({core_tokens:,} tokens, never cut) do not fit the budget of {budget:,} tokens: "
        "shorten message or raise budget",
        field=field,
    )


def _message_reports(items: list[MessageItem], measure: Callable[[str], int] | None) -> list[SegmentReport]:
    """The rows of the three message segments; their tokens as packed, or by `measure`."""
    rows = []
    for part in ("summary", "slim", "raw"):
        of = [m for m in items if m.segment == part]
        text = "\n".join(m.content for m in of)
        rows.append(
            SegmentReport(
                name=f"messages.{part}",
                part="messages",
                chars=sum(m.chars for m in of),
                tokens=sum(m.tokens for m in of) if measure is None else (measure(text) if text else 0),
                items=len(of),
                cut=any(m.cut for m in of),
            )
        )
    return rows


def _items(s: SystemSegment) -> int:
    return len(s.items) if s.items else (1 if s.text else 0)


def default_budget(settings: Settings) -> int:
    """The turn's budget when the caller gives none: the window less the reserve."""
    return settings.context.window_tokens - settings.context.reserve_tokens


def compaction_threshold(settings: Settings) -> int:
    """Where a session compacts: window − reserve − soft (200,000 − 20,000 − 4,000 by default)."""
    return settings.context.window_tokens - settings.context.reserve_tokens - settings.context.soft_tokens
