"""Entity neighbours: the multi-hop path of a context (docs/benchmarks.md, "Entity neighbours").

An answer spread over several conversations is often reached in two hops: the question's words
find one part, and that part names a person, place or thing that the other parts name too.
After the first stage (recall.ranking) this finds those rows and joins them to the sections:

1. *Names*: the names (`text.entities.names_in`: capitalised runs, "叫X" names; one at a
   sentence start only when the hits also hold it mid-sentence) that the first `HITS` items
   of each section's list hold, memories before messages, each once; a name sharing a word
   with the question is left out (the question's own words found the hits already); at most
   `NAMES`.
2. *Rows*: one statement per source, both in one round trip (`store.recall_queries.send_named`):
   the rows naming them, read through the GIN index as a probe reads a word; a name found in
   more than `LINK_CAP` rows links nothing (the anima's own name, a word written capitalised),
   the hits themselves are left out, at most `ROWS` per source, best by the names each holds,
   then by the question's words (ts_rank_cd).
3. *Join*: each source's rows join its section's list by weighted reciprocal rank fusion
   (`recall.ranking.fuse`, the rows' list at `WEIGHT`): a row the list already holds moves up,
   a new one comes in at the rank its weight gives it. The sections, their shares and the
   dense reserve stay as they are (recall.assemble).

Bounded whatever the store's size: at most `NAMES` index reads of `LINK_CAP` + 1 ids per
source, and `ROWS` rows fetched by primary key.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from anima_pipeline.recall.query import CJK
from anima_pipeline.recall.ranking import RANK_CD_WEIGHT, Search, fuse, pipelined
from anima_pipeline.recall.sections import ContextItem
from anima_pipeline.store import recall_queries as queries
from anima_pipeline.store.db import Connection
from anima_pipeline.text.entities import names_in

HITS = 3  # first items of each section's list whose names are followed
NAMES = 8  # names looked up per question (those in too many rows link nothing)
LINK_CAP = 20  # a name in more rows than this (per source) links nothing
ROWS = 5  # rows naming them kept per source
WEIGHT = 0.3  # RRF weight of those rows' list in the section's list (which has 1 - it)

_WORD = re.compile(rf"[a-z0-9]+|[{CJK}]+")
_CJK_NAME = re.compile(f"^[{CJK}]+$")


@dataclass
class Neighbours:
    """What the first stage's hits led to: the names followed and the rows naming them."""

    names: list[str] = field(default_factory=list)
    memories: list[tuple[ContextItem, float]] = field(default_factory=list)
    messages: list[tuple[ContextItem, float]] = field(default_factory=list)


def hit_names(query: str, hits: list[ContextItem], limit: int = NAMES) -> list[str]:
    """The names the `hits` hold that share no word with `query`, in the hits' order, at most `limit`."""
    asked = set(_WORD.findall(query.lower()))
    out = []
    for name in names_in([item.text for item in hits]):
        if asked.isdisjoint(_WORD.findall(name.lower())):
            out.append(name)
    return out[:limit]


def name_query(name: str) -> tuple[str, str, bool]:
    """(label, query, phrase) for `store.recall_queries.send_named`: a Latin name is a phrase
    for PostgreSQL's parser; a CJK one the AND of its bigrams, as `anima_search_vector` indexes
    CJK text (no positions: no phrase)."""
    if _CJK_NAME.match(name):
        grams = [name[i : i + 2] for i in range(max(len(name) - 1, 1))]
        return name, " & ".join(f"'{g}'" for g in grams), False
    return name, name, True


def find_neighbours(
    conn: Connection,
    query: str,
    memories: tuple[Search, list[ContextItem]],
    messages: tuple[Search, list[ContextItem]],
    *,
    hits: int | None = None,
    names: int | None = None,
    link_cap: int | None = None,
    rows: int | None = None,
) -> Neighbours:
    """The entity neighbours of the first stage's lists (each source's search with its ranked
    list): the names of the first `hits` items of each list, then per source the rows naming
    them, at most `rows`, in one round trip. Nothing is asked when the hits name nothing new.
    Unset, the limits are this module's (read at call time: benchmarks/recall_at_k.py tries others)."""
    hits = HITS if hits is None else hits
    names = NAMES if names is None else names
    link_cap = LINK_CAP if link_cap is None else link_cap
    rows = ROWS if rows is None else rows
    followed = hit_names(query, [item for _, ranked in (memories, messages) for item in ranked[:hits]], names)
    found = Neighbours(names=followed)
    if not followed or rows <= 0:
        return found
    named = [name_query(name) for name in followed]

    def send(search: Search, ranked: list[ContextItem]) -> Callable[[], list[tuple[ContextItem, float]]]:
        params = dict(
            search.params,
            link_cap=link_cap,
            rows=rows,
            not_ids=[item.id for item in ranked[:hits]],  # they hold the names: no hop
            or_q=search.probe.arrays()["or_q"],
            rank_w=RANK_CD_WEIGHT,
        )
        params.setdefault("exclude_ids", [])
        take = queries.send_named(conn, search.table, params, named)

        def items() -> list[tuple[ContextItem, float]]:
            found_rows = take()
            out = search.items(found_rows)
            for item, r in zip(out, found_rows, strict=True):
                item.why = "names " + ", ".join(r["matched"])
            return [(item, float(r["score"])) for item, r in zip(out, found_rows, strict=True)]

        return items

    found.memories, found.messages = pipelined(conn, lambda: send(*memories), lambda: send(*messages))
    return found


def join_neighbours(
    ranked: list[ContextItem], rows: list[tuple[ContextItem, float]], weight: float | None = None
) -> list[ContextItem]:
    """A section's list with its neighbour rows fused in (`ranking.fuse`, the rows at `weight`,
    unset this module's `WEIGHT`)."""
    weight = WEIGHT if weight is None else weight
    if not rows or weight <= 0:
        return ranked
    return fuse(ranked, rows, weight, reason=lambda item, _score: item.why)
