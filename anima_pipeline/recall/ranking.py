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
   (one list per section, as the context-management seed asks).

Every term is a constant of its statement, so the planner estimates it from the column's
statistics: a rare term reads the GIN index, a frequent one may stop early on a plain scan,
since at most `CAP` rows are wanted.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, time
from time import monotonic as time_now
from typing import Any
from zoneinfo import ZoneInfo

from anima_pipeline.recall.dense import QueryVector
from anima_pipeline.recall.query import QueryPlan
from anima_pipeline.recall.sections import ContextItem
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


_CORRECTIONS_SQL = """
SELECT t.word AS typo, best.word, plainto_tsquery('english'::regconfig, best.word)::text AS q
FROM unnest(%(typos)s::text[]) AS t(word)
CROSS JOIN LATERAL (
    SELECT v.word FROM recall_word v
    WHERE v.anima_id = %(anima)s AND v.word %% t.word AND similarity(v.word, t.word) >= %(min)s
    ORDER BY similarity(v.word, t.word) DESC, v.word LIMIT 1) best
-- a word the anima itself uses is no typo, even where one source lacks it ("regards")
WHERE NOT EXISTS (SELECT 1 FROM recall_word k WHERE k.anima_id = %(anima)s AND k.word = lower(t.word))"""


_STATS_SQL = """
SELECT c.reltuples, s.most_common_elems::text::text[] AS elems, s.most_common_elem_freqs AS freqs
FROM pg_class c
LEFT JOIN pg_stats s ON s.schemaname = c.relnamespace::regnamespace::text AND s.tablename = c.relname
                     AND s.attname = 'fts'
WHERE c.oid = %s::regclass"""
_stats: dict[tuple[str, str, str], tuple[float, frozenset[str]]] = {}


def common_lexemes(conn: Connection, table: str) -> frozenset[str]:
    """The tsquery texts of the lexemes in COMMON_ROWS rows of `table` or more, by the statistics
    ANALYZE (autovacuum) keeps on its `fts` column: term statistics maintained by PostgreSQL,
    read once every STATS_TTL_S per process and table, never counted per query."""
    key = (conn.info.host, str(conn.info.port), f"{conn.info.dbname}.{table}")
    cached = _stats.get(key)
    if cached and time_now() - cached[0] < STATS_TTL_S:
        return cached[1]
    row = conn.execute(_STATS_SQL, (table,)).fetchone()
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
    _stats[key] = (time_now(), common)
    return common


class Search:
    """One source's ranking in stages (probe, spelling, score), so that the stages of several
    sources go to the server together (psycopg pipeline mode: one round trip per stage)."""

    table: str
    where: str
    time_column: str | None = None
    score_sql: str  # the source's scoring statement over the probed candidates
    # the source's nearest-neighbour statement over `embedding e` joined to `x`; {d} is the dimension
    dense_sql: str
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
        if dense_weight is not None:
            self.dense_weight = dense_weight
        self.params: dict[str, Any] = {"anima": anima_id, **self.filter_params(**filters)}
        self.terms: list[Term] = []
        self.found: list[list[int]] = []
        self.periods_found: list[list[int]] = []
        self.misspelt: list[Term] = []
        self.probe = Probe()

    def filter_params(self, **filters: Any) -> dict[str, Any]:
        """The source's own filters (named by its keyword arguments) as parameters of `where`."""
        raise NotImplementedError

    # stage 1 ---------------------------------------------------------------------------
    def send_probe(self, conn: Connection) -> Callable[[], None]:
        words = self.plan.terms
        periods = self.plan.periods if self.time_column else []
        args = dict(self.params, cap=CAP, common=sorted(common_lexemes(conn, self.table)))
        branches = []
        for i, word in enumerate(words):
            # the word's stem(s); a stop word gives an empty query that matches nothing, and a
            # common stem is not read at all (a one-time filter before the scan)
            args[f"w{i}"] = word
            q = f"plainto_tsquery('english'::regconfig, %(w{i})s)"
            branches.append(
                f"SELECT {i} AS i, {q}::text AS tsq, ARRAY(SELECT x.id FROM {self.table} x WHERE {self.where}"
                f" AND NOT ({q}::text = ANY(%(common)s::text[])) AND x.fts @@ {q} LIMIT %(cap)s) AS ids"
            )
        extra = []
        if len(words) > 1:  # the rows holding every term, however common each one is
            every = " && ".join(f"plainto_tsquery('english'::regconfig, %(w{i})s)" for i in range(len(words)))
            extra.append(
                f"SELECT x.id FROM {self.table} x WHERE {self.where} AND x.fts @@ ({every}) LIMIT %(cap)s"
            )
        for i, p in enumerate(periods):
            args[f"ps{i}"] = datetime.combine(p.start, time(), self.tz)
            args[f"pe{i}"] = datetime.combine(p.end, time(), self.tz)
            col = self.time_column
            extra.append(
                f"SELECT x.id FROM {self.table} x WHERE {self.where} AND x.{col} >= %(ps{i})s"
                f" AND x.{col} < %(pe{i})s ORDER BY x.{col} LIMIT %(cap)s"
            )
        branches += [f"SELECT {len(words) + k} AS i, NULL, ARRAY({sql})" for k, sql in enumerate(extra)]
        if not branches:
            return lambda: None
        cur = conn.execute(" UNION ALL ".join(branches), args)
        common = set(args["common"])

        def done() -> None:
            rows = sorted(cur.fetchall(), key=lambda r: r["i"])
            seen: set[str] = set()
            for r in rows[: len(words)]:
                if r["tsq"] and r["tsq"] not in seen:  # a stop word, or the same stem twice
                    seen.add(r["tsq"])
                    self.terms.append(
                        Term(label=words[r["i"]], tsquery=r["tsq"], ids=r["ids"], common=r["tsq"] in common)
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
        take = self._send_lookup(conn, dict(self.params, cap=CAP), [q for _, (_, q) in fixes], [])

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
            for id_ in term.ids:
                if id_ in estimate:
                    estimate[id_] += term.weight
        for ids in self.periods_found:
            for id_ in ids:
                if id_ in estimate:
                    estimate[id_] += math.log(1 + IDF_REF)
        self.probe = Probe(self.terms, sorted(estimate, key=lambda i: (-estimate[i], -i))[:SCORED])
        if self.limit <= 0:
            return None
        cur = conn.execute(self.score_sql, self.score_args()) if self.probe.candidates else None
        near = self._send_dense(conn)
        if near is None:
            return (lambda: self.items(cur.fetchall())) if cur is not None else None

        def fused() -> list[ContextItem]:
            lexical = self.items(cur.fetchall()) if cur is not None else []
            nearest = near()
            self.nearest = [item for item, _ in nearest]  # for the dense reserve (recall.assemble)
            return fuse(lexical, nearest, self.dense_weight, self.offset, self.limit)

        return fused

    def _send_dense(self, conn: Connection) -> Callable[[], list[tuple[ContextItem, float]]] | None:
        if self.dense is None:
            return None
        args = dict(self.params, qv=self.dense.text, model=self.dense.model_id, k=DENSE_K + self.offset)
        args.setdefault("exclude_ids", [])
        cur = conn.execute(self.dense_sql.format(d=int(self.dense.dimension)), args)

        def take() -> list[tuple[ContextItem, float]]:
            rows = sorted(cur.fetchall(), key=lambda r: -r["sim"])  # relaxed order: sorted here
            items = self.items(rows)
            for item in items:  # new items, not shared yet: no copy
                item.why = ""
            return [(item, r["sim"]) for item, r in zip(items, rows, strict=True)]

        return take

    def _send_lookup(
        self, conn: Connection, args: dict[str, Any], queries: list[str], extra: list[str]
    ) -> Callable[[], list[list[int]]]:
        """Ids per tsquery (and per extra branch), each read through the index, at most CAP."""
        branches = []
        for i, q in enumerate(queries):
            args[f"q{i}"] = q
            branches.append(
                f"SELECT {i} AS i, ARRAY(SELECT x.id FROM {self.table} x WHERE {self.where}"
                f" AND x.fts @@ %(q{i})s::tsquery LIMIT %(cap)s) AS ids"
            )
        branches += [f"SELECT {len(branches) + k} AS i, ARRAY({sql}) AS ids" for k, sql in enumerate(extra)]
        if not branches:
            return list
        cur = conn.execute(" UNION ALL ".join(branches), args)
        return lambda: [r["ids"] for r in sorted(cur.fetchall(), key=lambda r: r["i"])]

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
    cur = conn.execute(_CORRECTIONS_SQL, {"typos": todo, "anima": anima_id, "min": SPELLING_MIN})

    def take() -> None:
        found = {r["typo"]: (r["word"], r["q"]) for r in cur.fetchall() if r["q"]}
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
    scans = [lambda: send_iterative_scan(conn)] if any(s.dense for s in searches) else []
    ranked = pipelined(conn, *scans, *(lambda s=s: s.send_score(conn) for s in searches))
    return [r or [] for r in ranked[len(scans) :]], firsts


def send_iterative_scan(conn: Connection) -> None:
    """pgvector 0.8: the HNSW scans of this stage go on past ef_search while the anima's filter
    drops rows (once per stage, before its nearest-neighbour statements)."""
    conn.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', false)")


# The per-candidate part of a scoring statement over `x`: the weighted share of terms held,
# the terms matched (for `why`), and ts_rank_cd. `extra_match` lets a message's speaker count.
def hits_sql(extra_match: str = "false") -> str:
    return f"""
        (SELECT coalesce(sum(t.w), 0) / %(w_sum)s
         FROM unnest(%(t_tsq)s::text[], %(t_w)s::float8[]) AS t(tsq, w)
         WHERE x.fts @@ t.tsq::tsquery OR {extra_match}) AS coverage,
        ARRAY(SELECT t.label FROM unnest(%(t_label)s::text[], %(t_tsq)s::text[]) AS t(label, tsq)
              WHERE x.fts @@ t.tsq::tsquery OR {extra_match}) AS matched,
        coalesce(ts_rank_cd(x.fts, %(or_q)s::tsquery, 32), 0) AS rank_cd"""


# --- the sources' statements (recall.passive, recall.episodic, recall.summaries) ----------
# Semantic memories: passive recall and active search.
# The resident set is left out when candidates are scored (it is read in the same round trip).
MEMORY_WHERE = """x.anima_id = %(anima)s AND x.status = 'active'
    AND NOT (cardinality(x.source_sessions) > 0 AND x.source_sessions <@ %(exclude_sessions)s::text[])
    AND (%(types)s::text[] IS NULL OR x.type = ANY(%(types)s::text[]))
    AND (%(since)s::timestamptz IS NULL OR coalesce(x.observed_at, x.created_at) >= %(since)s::timestamptz)
    AND (%(until)s::timestamptz IS NULL OR coalesce(x.observed_at, x.created_at) < %(until)s::timestamptz)"""

MEMORY_SCORE_SQL = f"""
SELECT id, type, content, source_sessions, observed_at, created_at, pinned, matched, dated, in_period,
       coverage + %(rank_w)s * rank_cd
           + CASE WHEN %(asks_time)s AND dated THEN %(date_bonus)s ELSE 0 END
           + CASE WHEN in_period THEN %(period_bonus)s ELSE 0 END AS score
FROM (
    SELECT x.id, x.type, x.content, x.source_sessions, x.observed_at, x.created_at, x.pinned, {hits_sql()},
           %(asks_time)s AND x.content ~* %(dated_re)s AS dated,  -- the regex only when asked when
           EXISTS (SELECT 1 FROM unnest(%(p_start)s::date[], %(p_end)s::date[]) AS p(s, e)
                   WHERE (coalesce(x.observed_at, x.valid_from) AT TIME ZONE %(tz)s)::date >= p.s
                     AND (coalesce(x.observed_at, x.valid_from) AT TIME ZONE %(tz)s)::date < p.e) AS in_period
    FROM semantic_memory x
    WHERE x.id = ANY(%(ids)s::bigint[])
    OFFSET 0  -- score each candidate once (no flattening into the outer WHERE and ORDER BY)
) scored
WHERE coverage > 0
ORDER BY score DESC, length(content), id
LIMIT %(limit)s OFFSET %(offset)s
"""


# The nearest memories under the same filters (the resident set left out here too); the
# columns of MEMORY_SCORE_SQL, the similarity as score. The distance is computed once per row
# (the select list's copies of it would each be evaluated for every row an exact sort reads).
MEMORY_DENSE_SQL = f"""
SELECT n.*, 1 - n.dist AS sim, 1 - n.dist AS score FROM (
SELECT x.id, x.type, x.content, x.source_sessions, x.observed_at, x.created_at, x.pinned,
       '{{{{}}}}'::text[] AS matched, false AS dated, false AS in_period,
       e.v::vector({{d}}) <=> %(qv)s::vector({{d}}) AS dist
FROM embedding e
JOIN semantic_memory x ON x.id = e.item_id
WHERE e.anima_id = %(anima)s AND e.kind = 'memory' AND e.model_id = %(model)s
  AND {MEMORY_WHERE} AND NOT (x.id = ANY(%(exclude_ids)s::bigint[]))
ORDER BY dist  -- the same expression as the index's: the HNSW scan gives the order
LIMIT %(k)s) n
"""


# Past messages: episodic recall and active search; cron and debug conversations never.
MESSAGE_WHERE = """x.anima_id = %(anima)s AND x.role IN ('user', 'assistant') AND x.forgotten_at IS NULL
    AND NOT (x.conversation_id = ANY(%(exclude_sessions)s::text[]))
    AND (%(conversation)s::text IS NULL OR x.conversation_id = %(conversation)s::text)
    AND (%(speaker)s::text IS NULL OR x.speaker = %(speaker)s::text)
    AND (%(since)s::timestamptz IS NULL OR x.created_at >= %(since)s::timestamptz)
    AND (%(until)s::timestamptz IS NULL OR x.created_at < %(until)s::timestamptz)"""

MESSAGE_SCORE_SQL = f"""
SELECT id, conversation_id, role, speaker, content, created_at, title, matched, in_period,
       coverage + %(rank_w)s * rank_cd + CASE WHEN in_period THEN %(period_bonus)s ELSE 0 END AS score
FROM (
    SELECT x.id, x.conversation_id, x.role, x.speaker, x.content, x.created_at, c.title,
           {hits_sql("sp.v @@ t.tsq::tsquery")},
           EXISTS (SELECT 1 FROM unnest(%(p_start)s::date[], %(p_end)s::date[]) AS p(s, e)
                   WHERE (x.created_at AT TIME ZONE %(tz)s)::date >= p.s
                     AND (x.created_at AT TIME ZONE %(tz)s)::date < p.e) AS in_period
    FROM message x
    JOIN conversation c ON c.anima_id = x.anima_id AND c.id = x.conversation_id
    CROSS JOIN LATERAL (SELECT to_tsvector('english'::regconfig, coalesce(x.speaker, '')) AS v) sp
    WHERE x.id = ANY(%(ids)s::bigint[]) AND c.platform <> 'cron' AND NOT c.debug
    OFFSET 0  -- score each candidate once (no flattening into the outer WHERE and ORDER BY)
) scored
WHERE coverage > 0 OR in_period
ORDER BY score DESC, length(content), id
LIMIT %(limit)s OFFSET %(offset)s
"""


MESSAGE_DENSE_SQL = f"""
SELECT n.*, 1 - n.dist AS sim, 1 - n.dist AS score FROM (
SELECT x.id, x.conversation_id, x.role, x.speaker, x.content, x.created_at, c.title,
       '{{{{}}}}'::text[] AS matched, false AS in_period,
       e.v::vector({{d}}) <=> %(qv)s::vector({{d}}) AS dist
FROM embedding e
JOIN message x ON x.id = e.item_id
JOIN conversation c ON c.anima_id = x.anima_id AND c.id = x.conversation_id
WHERE e.anima_id = %(anima)s AND e.kind = 'message' AND e.model_id = %(model)s
  AND {MESSAGE_WHERE} AND c.platform <> 'cron' AND NOT c.debug
ORDER BY dist  -- the same expression as the index's: the HNSW scan gives the order
LIMIT %(k)s) n
"""


# Temporal summaries for a question about a time: those covering a period the question
# names, then those whose text matches it (the expression GIN index on anima_search_vector).
SUMMARIES_SQL = """
SELECT id, level, period_start, period_end, content, in_period,
       (CASE WHEN in_period THEN 1 ELSE 0 END) + rank AS score
FROM (
    SELECT s.id, s.level, s.period_start, s.period_end, s.content,
           EXISTS (SELECT 1 FROM unnest(%(p_start)s::date[], %(p_end)s::date[]) AS p(ps, pe)
                   WHERE s.period_start < p.pe AND s.period_end >= p.ps) AS in_period,
           CASE WHEN to_tsquery('english'::regconfig, %(or_q)s) IS NULL THEN 0
                ELSE ts_rank_cd(anima_search_vector(s.content), to_tsquery('english'::regconfig, %(or_q)s), 32) END AS rank
    FROM temporal_summary s
    WHERE s.id IN (
        (SELECT t.id FROM temporal_summary t
         WHERE t.anima_id = %(anima)s AND t.period_start < %(p_max)s::date AND t.period_end >= %(p_min)s::date
         LIMIT %(cap)s)
        UNION
        (SELECT t.id FROM temporal_summary t
         WHERE t.anima_id = %(anima)s AND anima_search_vector(t.content) @@ to_tsquery('english'::regconfig, %(or_q)s)
         LIMIT %(cap)s))
) found
WHERE in_period OR rank > 0
ORDER BY score DESC, array_position(ARRAY['day', 'week', 'month', 'year'], level), period_start DESC
LIMIT %(limit)s
"""
