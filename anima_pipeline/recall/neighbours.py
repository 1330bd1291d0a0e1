"""Entity neighbours: the multi-hop path of a context, off by default (`recall.neighbours`;
docs/benchmarks.md, "Entity neighbours": on the unseen dialogues it placed no more of the
answers).

An answer spread over several conversations may be reached in two hops: the question's words
find one part, and that part names a person, place or thing that the other parts name too.
After the first stage (recall.ranking) this finds those rows:

1. *Names*: the names (`text.entities.names_in`: capitalised runs, "叫X" names; one at a
   sentence start only when the hits also hold it mid-sentence) that the first `HITS` items
   of each section's list hold, memories before messages, each once; a name sharing a word
   with the question is left out (the question's own words found the hits already); at most
   `NAMES`.
2. *Rows*: one statement per source, both in one round trip (`store.recall_queries.send_named`):
   the rows naming them, read through the GIN index as a probe reads a word; a name found in
   more than `LINK_CAP` rows links nothing (the anima's own name, a word written capitalised),
   nor does one whose stem ANALYZE's statistics show as common (it is not read at all,
   `ranking.common_lexemes`); the rows must write the name as it is written, the hits
   themselves are left out; at most `ROWS` per source, best by the names each holds, then by
   the question's words (ts_rank_cd).
3. *Room*: `CHARS` of the recall budget is kept for them, as the nearest items' reserve is
   (recall.assemble): after the lexical lists took their shares, the rows not placed yet go
   into their own sections, memories first; what they leave goes to the memories' list (with
   vectors, to the nearest items' reserve). The sections and their shares stay as they are.

Bounded whatever the store's size: at most `NAMES` index reads of `LINK_CAP` + 1 ids per
source and `ROWS` rows fetched by primary key, in one more round trip.
"""

from __future__ import annotations

import functools
import re
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from anima_pipeline.recall.query import CJK
from anima_pipeline.recall.ranking import RANK_CD_WEIGHT, Search, common_lexemes, pipelined
from anima_pipeline.recall.sections import ContextItem
from anima_pipeline.store import recall_queries as queries
from anima_pipeline.store.db import Connection
from anima_pipeline.text.entities import names_in

# Tuned on conv-26 and conv-30 only (docs/benchmarks.md, "Entity neighbours")
HITS = 3  # first items of each section's list whose names are followed
NAMES = 8  # names looked up per question (those in too many rows link nothing)
LINK_CAP = 20  # a name in more rows than this (per source) links nothing
ROWS = 3  # rows naming them kept per source
CHARS = 150  # of the recall budget, kept for those rows

_WORD = re.compile(rf"[a-z0-9]+|[{CJK}]+")
_CJK_NAME = re.compile(f"^[{CJK}]+$")


@dataclass
class Neighbours:
    """What the first stage's hits led to: the names followed and the rows naming them."""

    names: list[str] = field(default_factory=list)
    memories: list[ContextItem] = field(default_factory=list)
    messages: list[ContextItem] = field(default_factory=list)


def hit_names(query: str, hits: list[ContextItem], limit: int = NAMES) -> list[str]:
    """The names the `hits` hold that share no word with `query`, in the hits' order, at most `limit`."""
    asked = set(_WORD.findall(query.lower()))
    out = [
        name
        for name in names_in([item.text for item in hits])
        if asked.isdisjoint(_WORD.findall(name.lower()))
    ]
    return out[:limit]


def name_query(name: str) -> tuple[str, str, bool]:
    """(label, query, phrase) for `store.recall_queries.send_named`: a Latin name is a phrase
    for PostgreSQL's parser; a CJK one the AND of its bigrams, as `anima_search_vector` indexes
    CJK text (no positions: no phrase)."""
    if _CJK_NAME.match(name):
        grams = [name[i : i + 2] for i in range(max(len(name) - 1, 1))]
        return name, " & ".join(f"'{g}'" for g in grams), False
    return name, name, True


@functools.lru_cache(maxsize=16)
def _by_head(common: frozenset[str]) -> dict[str, list[tuple[str, str]]]:
    """The common stems' tsquery texts by their first two letters, with the stem."""
    heads: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for text in common:
        stem = text[1:-1]
        heads[stem[:2]].append((stem, text))
    return dict(heads)


def _common_for(conn: Connection, table: str, names: list[str]) -> list[str]:
    """The common stems (`ranking.common_lexemes`) that may be a name's: a word of it, or one it
    begins with its last letter aside ("happy" gives 'happi'). A cost guard only (a common name
    would be in more than `LINK_CAP` rows anyway): the few that may match are sent, not the
    store's whole list (about 1,000 stems)."""
    heads = _by_head(common_lexemes(conn, table))
    words = {w for name in names for w in _WORD.findall(name.lower())}
    return sorted(
        {
            text
            for w in words
            for stem, text in heads.get(w[:2], ())
            if w == stem or (len(stem) >= 3 and w.startswith(stem[:-1]))
        }
    )


def find_neighbours(
    conn: Connection,
    query: str,
    memories: tuple[Search, list[ContextItem]],
    messages: tuple[Search, list[ContextItem]],
) -> Neighbours:
    """The entity neighbours of the first stage's lists (each source's search with its ranked
    list): the names of the first HITS items of each list, then per source the rows naming
    them, at most ROWS, in one round trip. Nothing is asked when the hits name nothing new.
    The limits are read at call time (benchmarks/recall_at_k.py tries others)."""
    hits, names, link_cap, rows = HITS, NAMES, LINK_CAP, ROWS
    followed = hit_names(query, [item for _, ranked in (memories, messages) for item in ranked[:hits]], names)
    found = Neighbours(names=followed)
    if not followed or rows <= 0:
        return found
    named = [name_query(name) for name in followed]

    def send(search: Search, ranked: list[ContextItem]) -> Callable[[], list[ContextItem]]:
        params = dict(
            search.params,
            link_cap=link_cap,
            rows=rows,
            common=_common_for(conn, search.table, followed),
            not_ids=[item.id for item in ranked[:hits]],  # they hold the names: no hop
            or_q=search.probe.arrays()["or_q"],
            rank_w=RANK_CD_WEIGHT,
        )
        params.setdefault("exclude_ids", [])
        take = queries.send_named(conn, search.table, params, named)

        def items() -> list[ContextItem]:
            found_rows = take()
            out = search.items(found_rows)
            for item, r in zip(out, found_rows, strict=True):
                item.why = "names " + ", ".join(r["matched"])
            return out

        return items

    found.memories, found.messages = pipelined(conn, lambda: send(*memories), lambda: send(*messages))
    return found
