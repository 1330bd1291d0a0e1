"""Ranking by indexes: candidates from the GIN full-text index, scoring of the candidates only.

A few statements per source (memories, messages), whatever the size of the store; the
sources' statements of one stage go to the server together (pipeline mode), so a context
costs two round trips (two more when a word is misspelt), not one per statement:

1. *Probe.* Each question word (or CJK bigram) goes through ``plainto_tsquery('english', …)``
   inside the statement (PostgreSQL stems it and drops its stop words; the same stem twice
   counts once) and one index lookup, ``fts @@ term``, reads at most `CAP` matching ids; one
   more reads the rows holding every term; with a time column, the rows of the periods the
   question names. A term's document frequency is the number of ids found: exact below the
   cap, saturated at it. A term that ANALYZE's statistics of the `fts` column (``pg_stats``,
   kept by autovacuum, read every `STATS_TTL_S`) show in `COMMON_ROWS` rows or more brings
   no candidates and weighs as saturated. No statistics are counted over all rows per query.
2. *Spelling.* A word of four letters or more that a source lacks and that the anima's
   vocabulary (``recall_word``, kept by triggers, memories and messages together) lacks too is
   looked up there by trigram similarity and searched as the word it most resembles
   ("resturant" -> "restaurant"); a word the anima uses stays as it is ("regards").
3. *Score.* Candidates are first ordered by the weights of the terms their id lists show
   (exact for the rarer terms, whose lists are complete); only the best `SCORED` (fetched by
   primary key) are scored in full: the IDF-weighted share of the query's terms each one
   holds, IDF ``ln(1 + IDF_REF / (df + 0.5))``; plus a small ``ts_rank_cd`` for proximity;
   plus the source's own bonuses (a dated memory for a "when" question, a message of the
   period named).

4. *Meaning* (when the question has a vector, `recall.dense`): in the scoring round trip, the
   source's `DENSE_K` nearest items by cosine (pgvector, `store.vectors`), under the same
   filters; dense neighbours that share no word are candidates too. The two lists of one
   source are fused (`fuse`, weighted reciprocal rank; at the tuned weight 0 the lexical order
   stands and the nearest items it lacks follow it), and `Search.nearest` keeps the dense list
   for the section's reserve (`recall.assemble`). A source's lists never mix with another's
   (one list per section: a memory and a past message are not comparable scores).

Every term is a constant of its statement, so the planner estimates it from the column's
statistics: a rare term reads the GIN index, a frequent one may stop early on a plain scan,
since at most `CAP` rows are wanted.

The statements themselves are store/recall_queries.py's; this module holds the stages, the
weights and the fusion.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from time import monotonic as time_now
from typing import Any
from zoneinfo import ZoneInfo

from anima_pipeline.recall.dense import QueryVector
from anima_pipeline.recall.query import QueryPlan
from anima_pipeline.recall.sections import ContextItem
from anima_pipeline.store import recall_queries as queries
from anima_pipeline.store.db import Connection

CAP = 100  # ids read per term from the index; document frequencies are counted up to it
IDF_REF = 10 * CAP  # the collection size IDF is taken against: weights do not drift as a store grows
SCORED = 100  # candidates scored in full, the best by the terms their id lists show
COMMON_ROWS = 10 * CAP  # a term this frequent (ANALYZE's statistics) brings no candidates of its own
STATS_TTL_S = 300.0  # how long the table statistics read from pg_stats are reused
SPELLING_MIN = 0.45  # pg_trgm similarity a vocabulary word needs to stand for a misspelt one
RANK_CD_WEIGHT = 0.1
DENSE_K = 30  # nearest neighbours read per source
RRF_K = 60  # reciprocal rank fusion's constant: 1 / (RRF_K + rank)


@dataclass
class Term:
    label: str  # the word or bigram as asked ("resturant~restaurant" when corrected)
    tsquery: str  # plainto_tsquery('english', word)::text
    ids: list[int] = field(default_factory=list)
    common: bool = False  # in COMMON_ROWS rows or more by the table's statistics: not probed

    @property
    def live(self) -> bool:
        return bool(self.ids) or self.common

    @property
    def weight(self) -> float:
        df = CAP if self.common else len(self.ids)
        return math.log(1 + IDF_REF / (df + 0.5)) if self.live else 0.0


@dataclass(frozen=True)
class Signal:
    """A candidate's place in one first-stage list: its rank (0 first) and its score there."""

    rank: int
    score: float
    in_period: bool = False  # the row is of a period the question names


@dataclass
class Probe:
    terms: list[Term] = field(default_factory=list)
    candidates: list[int] = field(default_factory=list)

    def arrays(self) -> dict[str, Any]:
        """The scoring statement's term parameters (only terms that found something)."""
        live = [t for t in self.terms if t.live]
        return {
            "t_label": [t.label for t in live],
            "t_tsq": [t.tsquery for t in live],
            "t_w": [t.weight for t in live],
            "w_sum": sum(t.weight for t in live) or 1.0,
            "or_q": " | ".join(f"({t.tsquery})" for t in live) or None,
            "rank_w": RANK_CD_WEIGHT,
        }


@dataclass(frozen=True)
class CommonLexemes:
    """One read of a table's common lexemes: the set, and the array literal the probe sends as
    its parameter (one string built once per read: a list of a thousand is dumped per query)."""

    read_at: float
    lexemes: frozenset[str]
    literal: str


_stats: dict[tuple[str, str, str, str], CommonLexemes] = {}


def _database(conn: Connection) -> tuple[str, str, str]:
    """The server and database `conn` reads: what the per-process caches below are kept by."""
    return conn.info.host, str(conn.info.port), conn.info.dbname


def read_common(conn: Connection, table: str) -> CommonLexemes:
    """The tsquery texts of the lexemes in COMMON_ROWS rows of `table` or more, by the statistics
    ANALYZE (autovacuum) keeps on its `fts` column: term statistics maintained by PostgreSQL,
    read once every STATS_TTL_S per process and table, never counted per query."""
    key = (*_database(conn), table)
    cached = _stats.get(key)
    if cached and time_now() - cached.read_at < STATS_TTL_S:
        return cached
    row = queries.fts_statistics(conn, table)
    rows = max(float(row["reltuples"] or 0), 0.0) if row else 0.0
    common = (
        frozenset(
            "'" + e.replace("'", "''") + "'"
            for e, f in zip(row["elems"] or [], row["freqs"] or [], strict=False)
            if f * rows >= COMMON_ROWS
        )
        if row
        else frozenset()
    )
    _stats[key] = read = CommonLexemes(time_now(), common, queries.text_array(sorted(common)))
    return read


def common_lexemes(conn: Connection, table: str) -> frozenset[str]:
    """`read_common`'s set of lexemes."""
    return read_common(conn, table).lexemes


# Per server: each question word's query text (its stem, or '' for a stop word), learnt from
# the probes' answers. A word known to read nothing (a stop word, or a stem ANALYZE shows in
# COMMON_ROWS rows or more) is sent no more: each word is a branch of its probe, and planning
# one (the tsquery's selectivity from the statistics) costs about 0.08 ms apiece.
STEMS_MAX = 50_000  # distinct question words remembered; past this nothing more is learnt
_stems: dict[tuple[str, str, str], dict[str, str]] = {}


def word_stems(conn: Connection) -> dict[str, str]:
    """The question words whose query text is known on `conn`'s server and database."""
    return _stems.setdefault(_database(conn), {})


class Search:
    """One source's ranking in stages (probe, spelling, score), so that the stages of several
    sources go to the server together (psycopg pipeline mode: one round trip per stage)."""

    table: str  # the source, named by its table: its statements are store/recall_queries.py's
    dense_weight: float  # its dense list's weight in the fusion (the lexical list has 1 - it)

    def __init__(
        self,
        anima_id: str,
        plan: QueryPlan,
        *,
        tz: ZoneInfo,
        limit: int = 60,
        offset: int = 0,
        dense: QueryVector | None = None,
        dense_weight: float | None = None,
        **filters: Any,
    ) -> None:
        self.plan, self.tz, self.limit, self.offset = plan, tz, limit, offset
        self.dense = dense
        self.nearest: list[ContextItem] = []  # the dense list alone, best first
        # what the second stage reads of each list (recall/rerank.py): per ref its rank and score
        self.lexical: dict[str, Signal] = {}
        self.dense_hits: dict[str, Signal] = {}
        if dense_weight is not None:
            self.dense_weight = dense_weight
        self.params: dict[str, Any] = {"anima": anima_id, **self.filter_params(**filters)}
        self.terms: list[Term] = []
        self.found: list[list[int]] = []
        self.periods_found: list[list[int]] = []
        self.misspelt: list[Term] = []
        self.probe = Probe()

    def filter_params(self, **filters: Any) -> dict[str, Any]:
        """The source's own filters (named by its keyword arguments) as parameters of its statements."""
        raise NotImplementedError

    # stage 1 ---------------------------------------------------------------------------
    def send_probe(self, conn: Connection) -> Callable[[], None]:
        words = self.plan.terms
        common = read_common(conn, self.table)
        periods = [(p.start, p.end) for p in self.plan.periods]
        stems = word_stems(conn)
        known = common.lexemes
        idle = {w: q for w in words if (q := stems.get(w)) is not None and (q == "" or q in known)}
        take = queries.send_probe(
            conn,
            self.table,
            dict(self.params, cap=CAP, common=common.literal),
            words,
            periods,
            self.tz,
            idle,
        )
        if take is None:
            return lambda: None

        def done() -> None:
            rows = sorted(take(), key=lambda r: r["i"])
            seen: set[str] = set()
            for r in rows[: len(words)]:
                if len(stems) < STEMS_MAX:
                    stems[words[r["i"]]] = r["tsq"]
                if r["tsq"] and r["tsq"] not in seen:  # a stop word, or the same stem twice
                    seen.add(r["tsq"])
                    self.terms.append(
                        Term(label=words[r["i"]], tsquery=r["tsq"], ids=r["ids"], common=r["tsq"] in known)
                    )
            self.found = [r["ids"] for r in rows]
            self.periods_found = [r["ids"] for r in rows[len(words) + (1 if len(words) > 1 else 0) :]]
            self.misspelt = [
                t
                for t in self.terms
                if not t.ids
                and not t.common
                and len(t.label) >= 4
                and t.label.isascii()
                and t.label.isalpha()
            ]

        return done

    # stage 2 (only when a word was found nowhere) ----------------------------------------
    def send_respell(self, conn: Connection) -> Callable[[], None] | None:
        fixes = [(t, fix) for t in self.misspelt if (fix := self.plan.corrections.get(t.label))]
        if not fixes:
            return None
        take = queries.send_lookup(conn, self.table, dict(self.params, cap=CAP), [q for _, (_, q) in fixes])

        def done() -> None:
            for (term, (word, q)), ids in zip(fixes, take(), strict=True):
                term.label, term.tsquery, term.ids = f"{term.label}~{word}", q, ids
                self.found.append(ids)

        return done

    # stage 3 -----------------------------------------------------------------------------
    def send_score(self, conn: Connection) -> Callable[[], list[ContextItem]] | None:
        # What the id lists show: the weight of every term a candidate was found under (exact
        # for the rarer terms, whose lists are complete); a period's rows count as a rare term.
        excluded = set(self.params.get("exclude_ids") or ())
        estimate: dict[int, float] = {id_: 0.0 for ids in self.found for id_ in ids if id_ not in excluded}
        for term in self.terms:
            weight = term.weight  # once per term, not per id
            for id_ in term.ids:
                if id_ in estimate:
                    estimate[id_] += weight
        for ids in self.periods_found:
            for id_ in ids:
                if id_ in estimate:
                    estimate[id_] += math.log(1 + IDF_REF)
        self.probe = Probe(self.terms, sorted(estimate, key=lambda i: (-estimate[i], -i))[:SCORED])
        if self.limit <= 0:
            return None
        scored = queries.send_score(conn, self.table, self.score_args()) if self.probe.candidates else None
        near = self._send_dense(conn)
        if near is None:
            return (lambda: self._lexical(scored())) if scored is not None else None

        def fused() -> list[ContextItem]:
            lexical = self._lexical(scored()) if scored is not None else []
            nearest = near()
            self.nearest = [item for item, _ in nearest]  # for the dense reserve (recall.assemble)
            self.dense_hits = {item.ref: Signal(rank, sim) for rank, (item, sim) in enumerate(nearest)}
            return fuse(lexical, nearest, self.dense_weight, self.offset, self.limit)

        return fused

    def _lexical(self, rows: list[dict[str, Any]]) -> list[ContextItem]:
        """The scored rows as items, their ranks and scores kept for the second stage."""
        items = self.items(rows)
        self.lexical = {
            item.ref: Signal(rank, item.score, bool(r.get("in_period")))
            for rank, (item, r) in enumerate(zip(items, rows, strict=True))
        }
        return self.with_replies(items, rows)

    def with_replies(self, items: list[ContextItem], rows: list[dict[str, Any]]) -> list[ContextItem]:
        """The ranked list as placed (a source may add the rows its hits bring along)."""
        return items

    def _send_dense(self, conn: Connection) -> Callable[[], list[tuple[ContextItem, float]]] | None:
        if self.dense is None:
            return None
        args = dict(self.params, qv=self.dense.text, model=self.dense.model_id, k=DENSE_K + self.offset)
        args.setdefault("exclude_ids", [])
        nearest = queries.send_nearest(conn, self.table, self.dense.dimension, args)

        def take() -> list[tuple[ContextItem, float]]:
            rows = sorted(nearest(), key=lambda r: -r["sim"])  # relaxed order: sorted here
            items = self.items(rows)
            for item in items:  # new items, not shared yet: no copy
                item.why = ""
            return [(item, r["sim"]) for item, r in zip(items, rows, strict=True)]

        return take

    # what a source defines ------------------------------------------------------------------
    def score_args(self) -> dict[str, Any]:
        return {
            **self.probe.arrays(),
            "ids": self.probe.candidates,
            "p_start": [p.start for p in self.plan.periods],
            "p_end": [p.end for p in self.plan.periods],
            "tz": str(self.tz),
            # with a dense list the page is cut after the fusion: the lexical list from the top
            "limit": self.limit + self.offset if self.dense else self.limit,
            "offset": 0 if self.dense else self.offset,
        }

    def items(self, rows: list[dict[str, Any]]) -> list[ContextItem]:
        raise NotImplementedError


def fuse(
    lexical: list[ContextItem],
    near: list[tuple[ContextItem, float]],
    w_dense: float,
    offset: int = 0,
    limit: int | None = None,
) -> list[ContextItem]:
    """One source's lexical and dense lists as one: weighted reciprocal rank fusion, scaled so
    that first in both lists scores 1. An item in both keeps its lexical reasons. Only the
    `limit` items from `offset` are returned. The lexical items are the caller's own, made for
    this call: they are updated in place (score, reasons); the dense ones are copied (the
    caller keeps them as they are, for the section's reserve)."""
    score: dict[str, float] = {}
    items: dict[str, ContextItem] = {}
    whys: dict[str, str] = {}
    for rank, item in enumerate(lexical):
        score[item.ref] = (1 - w_dense) / (RRF_K + rank + 1)
        items[item.ref] = item
    dense_only: set[str] = set()
    for rank, (item, sim) in enumerate(near):
        score[item.ref] = score.get(item.ref, 0.0) + w_dense / (RRF_K + rank + 1)
        known = items.get(item.ref)
        why = f"similar {sim:.2f}"
        whys[item.ref] = f"{known.why}; {why}" if known and known.why else why
        if known is None:
            items[item.ref] = item
            dense_only.add(item.ref)
    order = sorted(items, key=lambda ref: -score[ref])
    out = []
    for ref in order[offset : None if limit is None else offset + limit]:
        fused = round(score[ref] * (RRF_K + 1), 4)
        item = items[ref]
        if ref in dense_only:
            out.append(item.model_copy(update={"score": fused, "why": whys[ref]}))
            continue
        item.score = fused
        if ref in whys:
            item.why = whys[ref]
        out.append(item)
    return out


def send_corrections(
    conn: Connection, anima_id: str, plan: QueryPlan, words: list[str]
) -> Callable[[], None] | None:
    """Queue the lookup of misspelt words in the anima's vocabulary; results kept on the plan."""
    todo = sorted({w for w in words if w not in plan.corrections})
    if not todo:
        return None
    rows = queries.send_corrections(conn, anima_id, todo, SPELLING_MIN)

    def take() -> None:
        found = {r["typo"]: (r["word"], r["q"]) for r in rows() if r["q"]}
        for w in todo:
            plan.corrections[w] = found.get(w)

    return take


def pipelined(conn: Connection, *sends: Callable[[], Callable[[], Any] | None]) -> list[Any]:
    """Run the `sends` (each queues a statement and returns how to take its result) in one round
    trip, then take every result in order."""
    with conn.pipeline():
        takes = [send() for send in sends]
    return [take() if take else None for take in takes]


def run(
    conn: Connection,
    anima_id: str,
    searches: list[Search],
    *,
    first: tuple[Callable[[], Any], ...] = (),
    prepare: Callable[[list[Any]], None] | None = None,
) -> tuple[list[list[ContextItem]], list[Any]]:
    """Every stage of `searches`, one round trip per stage: the probes (with the one-off
    statements `first`, whose results go to `prepare` before scoring), the spelling stage when
    a word was found nowhere, the scoring. Returns the ranked items and the results of `first`."""
    plan = searches[0].plan
    results = pipelined(conn, *(lambda s=s: s.send_probe(conn) for s in searches), *first)
    firsts = results[len(searches) :]
    if prepare:
        prepare(firsts)
    words = [t.label for s in searches for t in s.misspelt]
    if words:
        pipelined(conn, lambda: send_corrections(conn, anima_id, plan, words))
        pipelined(conn, *(lambda s=s: s.send_respell(conn) for s in searches))
    scans = [lambda: queries.send_iterative_scan(conn)] if any(s.dense for s in searches) else []
    ranked = pipelined(conn, *scans, *(lambda s=s: s.send_score(conn) for s in searches))
    return [r or [] for r in ranked[len(scans) :]], firsts
