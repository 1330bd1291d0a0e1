"""Chat-time context in sections, and active search: the public API of `anima_pipeline.recall`.

`assemble_context` keeps each kind of memory in its own bucket (resident → passive recall →
active search; no cross-type fused list):

1. *resident*: pinned ∪ top-N by decayed citation weight (`recall.resident.resident_set`);
2. *summaries*: only for a question about a time ("when", "in May 2023", "last week",
   "上个月"): temporal summaries of the period named, or matching the question;
3. *memories*: passive recall of active semantic memories, resident ones excluded, and
   those sourced only from the current session;
4. *episodic*: past messages, the current session's own excluded, with date, speaker, title.

Sections 2-4 share one character budget (`Budgets.recall`, default 2,000): summaries take at
most `Budgets.summaries` of it first, memories up to `memory_share` of what is left, messages
the rest, then memories whatever messages left. With vectors (recall by meaning), `Budgets.dense`
(300) of the budget is kept for the nearest items by meaning that the lexical lists did not
place: memories first, then messages, each in its own section. Items are packed by characters,
best first (a section's header and newlines count): an
item longer than `item_max` is cut around the words asked about (marked " …"), one that does
not fit what is left is skipped, so a section never overflows. Nothing here writes.

`search_memories` / `search_messages` are the active search: more results, paging, filters;
ranked like a section (with vectors: the lexical list, then the nearest items it lacks).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from anima_pipeline.config import Settings
from anima_pipeline.core.errors import InputError
from anima_pipeline.recall import neighbours, rerank
from anima_pipeline.recall.dense import QueryVector, query_vector
from anima_pipeline.recall.episodic import READ_CHARS, MessageSearch, rank_messages
from anima_pipeline.recall.neighbours import Neighbours, find_neighbours
from anima_pipeline.recall.passive import MemorySearch, rank_memories
from anima_pipeline.recall.query import QueryPlan, plan_query
from anima_pipeline.recall.ranking import run
from anima_pipeline.recall.render import MIN_CUT, dated, fit, memory_item
from anima_pipeline.recall.resident import send_resident_rows_cut
from anima_pipeline.recall.sections import (
    SECTION_TITLES,
    AssembledContext,
    Budgets,
    ContextItem,
    ContextSection,
    SearchPage,
    SectionName,
)
from anima_pipeline.recall.summaries import send_summaries
from anima_pipeline.store.db import Connection

MAX_PAGE = 500  # one page of active search
# search_messages shows a past message found by meaning alone (it shares no word with the
# query) only at this cosine similarity or more: the 95th percentile of a question's
# similarity to a message of another dialogue, rounded up (benchmarks/dense_floor.py, LoCoMo
# dev, all-MiniLM-L6-v2: unrelated p95 0.239; the floor keeps 60 % of the messages that answer
# a question and 41 % of those sharing no word with it, 3.7 % of the unrelated; docs/benchmarks.md).
# Without it a query nothing matches ("Lisbon" over the demo week) listed its 20 nearest
# messages, none about it. Contexts keep their dense reserve (README, "Recall by meaning").
DENSE_SEARCH_FLOOR = 0.25
_SIMILAR_ONLY = re.compile(r"similar (-?\d+\.\d+)")  # recall.ranking.fuse's why of a dense-only item
# Candidates ranked per section: as many as the recall budget could hold lines of the shortest
# kind placed (a cut line is at least MIN_CUT characters and a prefix), so that one section could
# take the whole budget; 32 for the default 2,000 characters. Twice as many cost 2-3 ms of
# Python a context (the items are built whole) and placed the same answers (docs/benchmarks.md,
# "Probes that say less").
CHARS_PER_CANDIDATE = 64
MIN_RANKED = 10


def ranked_for(budgets: Budgets) -> int:
    """The candidates each section's list ranks for these budgets."""
    return max(MIN_RANKED, -(-budgets.recall // CHARS_PER_CANDIDATE))


LEX_IN = rerank.FEATURES.index("lex_in")


def budgets_from(settings: Settings) -> Budgets:
    return Budgets(
        resident=settings.recall.resident_chars,
        recall=settings.recall.budget_chars,
        memory_share=settings.recall.memory_share,
        summaries=settings.recall.summary_chars,
        item_max=settings.recall.item_max_chars,
        dense=settings.recall.dense_chars,
    )


class Packer:
    """Fills one section best first within a budget that may grow (what another section left)."""

    def __init__(
        self,
        name: SectionName,
        ranked: list[ContextItem],
        words: list[str],
        item_max: int,
        placed: rerank.Placed | None = None,
    ) -> None:
        self.section = ContextSection(name=name, title=SECTION_TITLES[name])
        self.queue, self.words, self.item_max = list(ranked), words, item_max
        self.placed = placed  # the lines of every section so far: one that repeats them is left out

    def fill_from(self, items: list[ContextItem], room: int) -> int:
        """Take the `items` not placed yet, best first, into `room` more characters."""
        placed = {i.ref for i in self.section.items}
        self.queue = [i for i in items if i.ref not in placed]
        return self.fill(room)

    def fill(self, room: int) -> int:
        """Take items into `room` more characters; returns the characters taken. What the
        section renders counts: each line's newline, and with its first item its header and
        the blank line that separates it from the section before (so the block as rendered
        stays within the budgets)."""
        self.section.budget += room
        header = len(self.section.title) + 2 + 2  # "# " + title, and the "\n\n" before it
        taken, rest = 0, []
        for item in self.queue:
            extra = 1 + (0 if self.section.items else header)
            fitted = fit(item, min(self.item_max, room - taken - extra), self.words)
            if fitted is None:
                rest.append(item)
                continue
            said, shown = fitted
            if self.placed is not None:
                if self.placed.repeats(said):
                    continue
                self.placed.add(said)
            self.section.items.append(shown)
            taken += shown.chars + extra
        self.queue = rest
        self.section.chars_used += taken
        self.section.budget -= room - taken  # the unused part goes back to the shared budget
        return taken


@dataclass
class FirstStage:
    """What the first stage found for one question: the resident set, each source's ranked
    list (its `Search` keeps the lexical and nearest lists behind it) and the summaries."""

    plan: QueryPlan
    dense: QueryVector | None
    lexical_why: str | None
    memory_search: MemorySearch
    message_search: MessageSearch
    resident: list[dict[str, Any]]
    overflow: int
    memories: list[ContextItem]
    messages: list[ContextItem]
    summaries: list[ContextItem]
    # the rows the hits' names lead to (recall.neighbours), when `recall.neighbours` is on
    neighbours: Neighbours = field(default_factory=Neighbours)


def first_stage(
    conn: Connection,
    anima_id: str,
    query: str,
    *,
    settings: Settings,
    session_id: str | None,
    now: datetime,
    ranked: int | None = None,
) -> FirstStage:
    """The searches of a context (recall.ranking.run): resident set, memories, messages,
    summaries, with the question embedded once for both sections; `ranked` candidates per
    section (default: `ranked_for` the settings' budgets)."""
    tz: ZoneInfo = settings.tz
    ranked = ranked or ranked_for(budgets_from(settings))
    plan = plan_query(query, now.astimezone(tz).date())
    sessions = [session_id] if session_id else []
    dense, lexical_why = query_vector(conn, settings, query)
    memory_search = MemorySearch(anima_id, plan, tz=tz, exclude_sessions=sessions, limit=ranked, dense=dense)
    message_search = MessageSearch(
        anima_id,
        plan,
        tz=tz,
        exclude_sessions=sessions,
        limit=ranked,
        dense=dense,
        replies=settings.recall.replies,
        read_chars=READ_CHARS,
    )
    resident: list = []
    overflow = 0

    def prepare(firsts: list) -> None:  # the resident set is known before memories are searched
        nonlocal resident, overflow
        resident, overflow = firsts[0]
        memory_search.params["exclude_ids"] = [m["id"] for m in resident]

    (memories_ranked, messages_ranked), (_, summaries_ranked) = run(
        conn,
        anima_id,
        [memory_search, message_search],
        first=(
            lambda: send_resident_rows_cut(
                conn, anima_id, settings.recall.resident_top_n, settings.recall.pinned_max
            ),
            lambda: send_summaries(conn, anima_id, plan),
        ),
        prepare=prepare,
    )
    found = FirstStage(
        plan,
        dense,
        lexical_why,
        memory_search,
        message_search,
        resident,
        overflow,
        memories_ranked,
        messages_ranked,
        summaries_ranked,
    )
    if settings.recall.neighbours:  # one more round trip: the rows the hits' names lead to
        found.neighbours = find_neighbours(
            conn, query, (memory_search, memories_ranked), (message_search, messages_ranked)
        )
    return found


def assemble_context(
    conn: Connection,
    anima_id: str,
    query: str,
    *,
    settings: Settings,
    session_id: str | None = None,
    budgets: Budgets | None = None,
    now: datetime | None = None,
) -> AssembledContext:
    """The context an agent gets for `query`, in sections; `session_id` is the current
    conversation (its messages, and memories sourced only from it, are already in the window).
    The question is embedded once (when vectors are available) for both sections.
    `settings` gives the time zone, the resident limits and (unless `budgets`) the budgets;
    `settings.recall.drop_repeats` whether a line repeating a placed one is left out, and
    `settings.recall.second_stage` whether the reserve goes to the best candidates of every
    list by the learned score (recall.rerank) instead of the nearest items."""
    budgets = budgets or budgets_from(settings)
    tz: ZoneInfo = settings.tz
    now = now or datetime.now(tz)
    found = first_stage(
        conn, anima_id, query, settings=settings, session_id=session_id, now=now, ranked=ranked_for(budgets)
    )
    resident_items = [memory_item(m, score=0.0, why="resident", tz=tz) for m in found.resident]
    resident_pack = Packer("resident", resident_items, [], budgets.item_max)
    resident_pack.fill(budgets.resident)
    placed = resident_pack.section.items
    if settings.recall.second_stage:
        recalled = place_ranked(found, query, now.astimezone(tz).date(), budgets, placed)
    else:
        recalled = place_by_shares(found, budgets, placed if settings.recall.drop_repeats else None)
    sections = [resident_pack.section, *recalled]
    rendered = "\n\n".join(s.render() for s in sections if s.items)
    dense = found.dense
    return AssembledContext(
        anima_id=anima_id,
        query=query,
        session_id=session_id,
        sections=sections,
        rendered=rendered,
        chars=len(rendered),
        resident_overflow=found.overflow,
        asks_time=found.plan.about_time,
        periods=[p.iso for p in found.plan.periods],
        recall_mode="hybrid" if dense else "lexical",
        lexical_reason=found.lexical_why,
        dense_model=dense.model_id if dense else None,
        embed_ms=round(dense.seconds * 1000, 1) if dense else None,
    )


def place_by_shares(
    found: FirstStage, budgets: Budgets, resident: list[ContextItem] | None = None
) -> list[ContextSection]:
    """Each section its own list in its own share: summaries first (at most `summaries`),
    memories up to `memory_share` of what is left, messages the rest, memories what messages
    left; with entity neighbours (recall.neighbours) their part of the budget goes to the rows
    the hits' names lead to, not placed yet; with vectors the reserve goes to the nearest items
    not placed yet. With `resident` (the lines already in the context) a line that repeats a placed one is left out
    (`rerank.Placed`: a memory and the message it came from) and its room goes to the next."""
    words = found.plan.terms
    placed = rerank.Placed(resident) if resident is not None else None
    summaries = Packer("summaries", found.summaries, words, budgets.item_max, placed)
    reserve = min(budgets.dense, budgets.recall) if found.dense else 0
    # entity neighbours (recall.neighbours) keep their own part of the budget, as the nearest do
    near = found.neighbours
    kept = min(neighbours.CHARS, budgets.recall - reserve) if near.memories or near.messages else 0
    room = budgets.recall - reserve - kept
    left = room - summaries.fill(min(budgets.summaries, room))
    memories = Packer("memories", found.memories, words, budgets.item_max, placed)
    episodic = Packer("episodic", found.messages, words, budgets.item_max, placed)
    left -= memories.fill(round(left * budgets.memory_share))
    left -= episodic.fill(left)
    left -= memories.fill(left)
    if kept:  # the rows the hits' names lead to, not placed yet, in their sections, memories first
        left += kept
        left -= memories.fill_from(near.memories, left)
        left -= episodic.fill_from(near.messages, left)
        if not found.dense:  # what they left goes to the memories' list, as the lexical packing ends
            left -= memories.fill_from(found.memories, left)
    if found.dense:  # the nearest items not placed yet get the reserve, memories first, in their sections
        left += reserve
        left -= memories.fill_from(found.memory_search.nearest, left)
        left -= episodic.fill_from(found.message_search.nearest, left)
        memories.fill(left)
    return [summaries.section, memories.section, episodic.section]


def place_ranked(
    found: FirstStage,
    query: str,
    today: date,
    budgets: Budgets,
    resident: list[ContextItem],
    *,
    weights: rerank.Weights | None = None,
    cands: list[rerank.Candidate] | None = None,
) -> list[ContextSection]:
    """The sections packed with the second stage (recall.rerank): each lexical list first takes
    its share in the first stage's order (summaries at most `Budgets.summaries`, memories
    `memory_share`, messages the rest, memories what messages left), then the reserve
    (`Budgets.dense`, lexical or hybrid alike) and whatever is left (a line that repeats one
    already placed, the resident set's included, is left out and frees its room) go to the
    best candidates of every list by the second stage's score, each in its own section (a long
    item cut around the words asked about). `weights` (default: the
    packaged ones) and `cands` (default: the candidates of `found`) are for the fit
    (benchmarks/fit_ranker.py)."""
    words = found.plan.terms
    if cands is None:
        cands = rerank.candidates(
            found.plan,
            query,
            today,
            found.memory_search,
            found.memories,
            found.message_search,
            found.messages,
            found.summaries,
        )
    ranked = rerank.rank(cands, weights)
    sections = {
        name: ContextSection(name=name, title=SECTION_TITLES[name])
        for name in ("summaries", "memories", "episodic")
    }
    placed = rerank.Placed(resident)
    refs: set[str] = set()
    left = budgets.recall
    caps = {"summaries": min(budgets.summaries, budgets.recall)}

    def fill(queue: list[rerank.Candidate], room: int) -> int:
        """Place the candidates of `queue` in order within `room` more characters; the taken."""
        nonlocal left
        taken = 0
        for cand in queue:
            if min(left, room - taken) < MIN_CUT:
                break
            section = sections[cand.section]
            extra = 1 + (0 if section.items else len(section.title) + 4)  # "# " + title, "\n\n" before it
            space = min(left, room - taken) - extra
            if cand.section in caps:
                space = min(space, caps[cand.section] - section.chars_used - extra)
            if space < MIN_CUT or cand.item.ref in refs:
                continue
            fitted = fit(cand.item, min(budgets.item_max, space), words)
            if fitted is None:
                continue
            said, shown = fitted
            if placed.repeats(said):
                continue
            shown.score = round(cand.score, 4)
            section.items.append(shown)
            section.chars_used += shown.chars + extra
            taken += shown.chars + extra
            left -= shown.chars + extra
            placed.add(said)
            refs.add(shown.ref)
        return taken

    # the first stage's lists in their shares, as `place_by_shares` packs them (a repeat left out)
    lexical = [c for c in cands if c.x[LEX_IN]]
    reserve = min(budgets.dense, budgets.recall)
    fill([c for c in lexical if c.section == "summaries"], min(budgets.summaries, budgets.recall - reserve))
    room = left - reserve
    room -= fill([c for c in lexical if c.section == "memories"], round(room * budgets.memory_share))
    room -= fill([c for c in lexical if c.section == "episodic"], room)
    fill([c for c in lexical if c.section == "memories"], room)
    fill(ranked, left)  # the reserve, and what the lists left or a repeat freed: the best of any list
    for section in sections.values():
        section.budget = section.chars_used
    return list(sections.values())


def search_memories(
    conn: Connection,
    anima_id: str,
    query: str,
    *,
    settings: Settings,
    types: Sequence[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 20,
    offset: int = 0,
    now: datetime | None = None,
) -> SearchPage:
    """Active search over the anima's active memories (resident ones included), best first.
    `since`/`until` bound when a memory was observed (else created). Paging reaches as deep
    as the candidates the index gives (`recall.ranking.CAP` per word)."""
    return _page(
        rank_memories,
        conn,
        anima_id,
        query,
        settings,
        limit,
        offset,
        now,
        types=types,
        since=since,
        until=until,
    )


def search_messages(
    conn: Connection,
    anima_id: str,
    query: str,
    *,
    settings: Settings,
    conversation_id: str | None = None,
    speaker: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    exclude_session: str | None = None,
    limit: int = 20,
    offset: int = 0,
    now: datetime | None = None,
) -> SearchPage:
    """Active search over past messages (cron and debug conversations left out), best first.
    A longer message is read in part as a context reads it (READ_CHARS around the first word
    asked about, marked `truncated`): a page of 100 messages of 256,000 characters would be
    50 MB. `AnimaMemory.message` reads one whole, in parts."""
    return _page(
        rank_messages,
        conn,
        anima_id,
        query,
        settings,
        limit,
        offset,
        now,
        exclude_sessions=[exclude_session] if exclude_session else [],
        conversation_id=conversation_id,
        speaker=speaker,
        since=since,
        until=until,
        floor=DENSE_SEARCH_FLOOR,
        read_chars=READ_CHARS,
    )


def _page(
    rank: Callable[..., list[ContextItem]],
    conn: Connection,
    anima_id: str,
    query: str,
    settings: Settings,
    limit: int,
    offset: int,
    now: datetime | None,
    floor: float | None = None,
    **filters: Any,
) -> SearchPage:
    """One page of what `rank` finds for `query`: one item more than the page is ranked, to
    know whether another page exists. With vectors the ranking is a context's (recall.ranking):
    the lexical list, then the nearest items by meaning it lacks (those sharing no word too),
    those under `floor` left out of the page (their places stay, so pages do not shift)."""
    _check_page(limit, offset)
    tz = settings.tz
    plan = plan_query(query, (now or datetime.now(tz)).astimezone(tz).date())
    dense, lexical_why = query_vector(conn, settings, query)
    items = rank(conn, anima_id, plan, tz=tz, limit=limit + 1, offset=offset, dense=dense, **filters)
    shown = items[:limit]
    if floor is not None:
        shown = [i for i in shown if not ((m := _SIMILAR_ONLY.fullmatch(i.why)) and float(m[1]) < floor)]
    shown = [dated(i) for i in shown]  # the lines shown only
    return SearchPage(
        query=query,
        items=shown,
        offset=offset,
        limit=limit,
        has_more=len(items) > limit,
        recall_mode="hybrid" if dense else "lexical",
        lexical_reason=lexical_why,
    )


def _check_page(limit: int, offset: int) -> None:
    if limit < 1 or limit > MAX_PAGE:
        raise InputError(f"must be between 1 and {MAX_PAGE}, got {limit}", field="limit")
    if offset < 0:
        raise InputError(f"must be 0 or more, got {offset}", field="offset")
