"""The statements of recall's ranking by indexes (recall/ranking.py holds the scoring and the
stages, docs/benchmarks.md the figures): per source (memories, messages) the probe of the
GIN full-text index, the lookup of respelt words, the scoring of the candidates, the nearest
neighbours by pgvector, the rows naming what the first hits name (entity neighbours); the
anima's vocabulary for misspelt words, the `fts` statistics, and the temporal summaries of a
question about a time.

Each `send_*` queues its statement on the connection and returns how to take its rows, so that
recall sends the statements of one stage together (psycopg pipeline mode, `ranking.pipelined`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time
from typing import Any
from zoneinfo import ZoneInfo

from psycopg.adapt import PyFormat, Transformer

from anima_pipeline.core.errors import InternalError
from anima_pipeline.store.db import Connection

Rows = Callable[[], list[dict[str, Any]]]

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


# The per-candidate part of a scoring statement over `x`: the weighted share of terms held,
# the terms matched (for `why`), and ts_rank_cd. `extra_match` lets a message's speaker count.
# The terms' tsqueries are parsed once a statement (a tsquery[] parameter), and each term is
# matched once a row for both the share and the list (`_hits_join`, a lateral join after `x`).
_HITS_COLUMNS = "h.coverage, h.matched, coalesce(ts_rank_cd(x.fts, %(or_q)s::tsquery, 32), 0) AS rank_cd"


def _hits_join(extra_match: str = "false") -> str:
    return f"""CROSS JOIN LATERAL (
        SELECT coalesce(sum(t.w) FILTER (WHERE t.hit), 0) / %(w_sum)s AS coverage,
               coalesce(array_agg(t.label ORDER BY t.k) FILTER (WHERE t.hit), '{{}}') AS matched
        FROM (SELECT u.label, u.w, u.k, x.fts @@ u.tsq OR {extra_match} AS hit
              FROM unnest(%(t_label)s::text[], %(t_tsq)s::tsquery[], %(t_w)s::float8[])
                   WITH ORDINALITY AS u(label, tsq, w, k)) t) h"""


@dataclass(frozen=True)
class Clause:
    """One optional filter of a source's rows: `text` applies when the parameter `param` is
    given (not None; an empty list for one without a `cast`, whose clause holds for it anyway).
    In a statement built once (`Filter.full`) a clause with a `cast` is guarded by its
    parameter being NULL."""

    param: str
    text: str
    cast: str | None = None

    @property
    def full(self) -> str:
        return self.text if self.cast is None else f"(%({self.param})s::{self.cast} IS NULL OR {self.text})"

    def given(self, params: dict[str, Any]) -> bool:
        value = params.get(self.param)
        return bool(value) if self.cast is None else value is not None


@dataclass(frozen=True)
class Filter:
    """A source's filter: `base` always, then its optional clauses."""

    base: str
    clauses: tuple[Clause, ...]

    @property
    def full(self) -> str:
        """Every clause, each guarded by its parameter: for statements built once."""
        return "\n    AND ".join([self.base, *(c.full for c in self.clauses)])

    def given(self, params: dict[str, Any]) -> str:
        """Only the clauses whose parameters `params` gives: the same rows as `full`, in a
        shorter text. A probe repeats its filter once per word, and psycopg converts a
        statement of more than 4,096 characters anew on every call (0.5-1.1 ms for six to nine
        words) instead of once."""
        return " AND ".join([self.base, *(c.text for c in self.clauses if c.given(params))])


# --- the sources' statements (recall/passive.py, recall/episodic.py, recall/summaries.py) ----
# Semantic memories: passive recall and active search.
# The resident set is left out when candidates are scored (it is read in the same round trip).
MEMORY_FILTER = Filter(
    "x.anima_id = %(anima)s AND x.status = 'active'",
    (
        Clause(
            "exclude_sessions",
            "NOT (cardinality(x.source_sessions) > 0 AND x.source_sessions <@ %(exclude_sessions)s::text[])",
        ),
        Clause("types", "x.type = ANY(%(types)s::text[])", "text[]"),
        Clause("since", "coalesce(x.observed_at, x.created_at) >= %(since)s::timestamptz", "timestamptz"),
        Clause("until", "coalesce(x.observed_at, x.created_at) < %(until)s::timestamptz", "timestamptz"),
    ),
)
MEMORY_WHERE = MEMORY_FILTER.full

MEMORY_SCORE_SQL = f"""
SELECT id, type, content, source_sessions, observed_at, created_at, pinned, matched, dated, in_period,
       coverage + %(rank_w)s * rank_cd
           + CASE WHEN %(asks_time)s AND dated THEN %(date_bonus)s ELSE 0 END
           + CASE WHEN in_period THEN %(period_bonus)s ELSE 0 END AS score
FROM (
    SELECT x.id, x.type, x.content, x.source_sessions, x.observed_at, x.created_at, x.pinned, {_HITS_COLUMNS},
           %(asks_time)s AND x.content ~* %(dated_re)s AS dated,  -- the regex only when asked when
           EXISTS (SELECT 1 FROM unnest(%(p_start)s::date[], %(p_end)s::date[]) AS p(s, e)
                   WHERE (coalesce(x.observed_at, x.valid_from) AT TIME ZONE %(tz)s)::date >= p.s
                     AND (coalesce(x.observed_at, x.valid_from) AT TIME ZONE %(tz)s)::date < p.e) AS in_period
    FROM semantic_memory x
    {_hits_join()}
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
# A context and active search read a long message in part (`read_chars`, recall/episodic.py):
# a line shows a few hundred characters of it, a message may be 256,000 (core/validation.py).
# The part is the one a context line is cut from (recall/render.py `cut`): around the first
# place the text holds one of the query words' heads (`heads`: their first five letters as one
# case-insensitive alternation), its head when none. A long text is decompressed once for all that reads it
# (each function given a stored value decompresses it anew: 50 rows of 256,000 characters cost
# about 1 ms a row a reading).


def _read_sql(x: str) -> str:
    """After the rows `x` (`content`, `chars`): `d.part`, whether the row is read in part (longer
    than `read_chars`; never when `read_chars` is NULL), `d.text`, such a
    row's text decompressed once, and `rd.start`, where (1-based) its part begins: a third of
    it before the first query word held, within the text."""
    return f"""CROSS JOIN LATERAL (
    SELECT part, CASE WHEN part THEN {x}.content || '' ELSE {x}.content END AS text
    FROM (SELECT coalesce({x}.chars > %(read_chars)s::int, false) AS part) p
    OFFSET 0) d  -- computed once a row (not folded into each expression reading it)
LEFT JOIN LATERAL (
    -- the first match's text found again by strpos: its place (regexp_instr needs PostgreSQL 15)
    SELECT greatest(1, least(coalesce(nullif(strpos(d.text, (regexp_match(d.text, %(heads)s, 'i'))[1]), 0), 1)
                             - %(read_chars)s::int / 3, {x}.chars - %(read_chars)s::int + 1)) AS start
    WHERE d.part) rd ON true"""


def _read_columns(x: str) -> str:
    """The row `x`'s text as read (whole, or the part from `rd.start`) and `read_from`, the
    0-based offset of that part (NULL when read whole)."""
    return f"""CASE WHEN d.part THEN substr(d.text, rd.start, %(read_chars)s::int) ELSE {x}.content END AS content,
       CASE WHEN d.part THEN rd.start - 1 END AS read_from"""


MESSAGE_FILTER = Filter(
    "x.anima_id = %(anima)s AND x.role IN ('user', 'assistant') AND x.forgotten_at IS NULL",
    (
        Clause("exclude_sessions", "NOT (x.conversation_id = ANY(%(exclude_sessions)s::text[]))"),
        Clause("conversation", "x.conversation_id = %(conversation)s::text", "text"),
        Clause("speaker", "x.speaker = %(speaker)s::text", "text"),
        Clause("since", "x.created_at >= %(since)s::timestamptz", "timestamptz"),
        Clause("until", "x.created_at < %(until)s::timestamptz", "timestamptz"),
    ),
)
MESSAGE_WHERE = MESSAGE_FILTER.full

MESSAGE_SCORE_SQL = f"""
SELECT page.id, page.conversation_id, page.role, page.speaker, {_read_columns("page")},
       page.created_at, page.title, page.matched, page.in_period, page.score, page.chars,
       r.id AS r_id, r.role AS r_role, r.speaker AS r_speaker, r.content AS r_content,
       r.created_at AS r_created_at
FROM (
SELECT id, conversation_id, role, speaker, content, created_at, title, matched, in_period,
       coverage + %(rank_w)s * rank_cd + CASE WHEN in_period THEN %(period_bonus)s ELSE 0 END AS score,
       length(content) AS chars
FROM (
    SELECT x.id, x.conversation_id, x.role, x.speaker, x.content, x.created_at, c.title,
           {_HITS_COLUMNS},
           EXISTS (SELECT 1 FROM unnest(%(p_start)s::date[], %(p_end)s::date[]) AS p(s, e)
                   WHERE (x.created_at AT TIME ZONE %(tz)s)::date >= p.s
                     AND (x.created_at AT TIME ZONE %(tz)s)::date < p.e) AS in_period
    FROM message x
    -- each candidate's conversation by its key (a join was planned as a scan of them all)
    CROSS JOIN LATERAL (SELECT c.title, c.platform, c.debug FROM conversation c
                        WHERE c.anima_id = x.anima_id AND c.id = x.conversation_id OFFSET 0) c
    -- the speaker's words once a row (not once a term)
    CROSS JOIN LATERAL (SELECT to_tsvector('english'::regconfig, coalesce(x.speaker, '')) AS v OFFSET 0) sp
    {_hits_join("sp.v @@ u.tsq")}
    WHERE x.id = ANY(%(ids)s::bigint[]) AND c.platform <> 'cron' AND NOT c.debug
    OFFSET 0  -- score each candidate once (no flattening into the outer WHERE and ORDER BY)
) scored
WHERE coverage > 0 OR in_period
ORDER BY score DESC, chars, id
LIMIT %(limit)s OFFSET %(offset)s
) page
{_read_sql("page")}
-- with `replies`, a message asking something brings the turn that answers it: the next message
-- of its conversation (recall/episodic.py)
LEFT JOIN LATERAL (
    -- its head only (one character more tells a longer one): a context shows a few hundred
    -- characters of it, a message may be megabytes (left() decompresses no more than it needs)
    SELECT n.id, n.role, n.speaker, left(n.content, %(reply_chars)s + 1) AS content, n.created_at
    FROM message n
    WHERE %(replies)s AND strpos(d.text, '?') > 0
      AND n.anima_id = %(anima)s AND n.conversation_id = page.conversation_id
      AND n.created_at >= page.created_at AND (n.created_at, n.id) > (page.created_at, page.id)
      AND n.role IN ('user', 'assistant') AND n.forgotten_at IS NULL
    ORDER BY n.created_at, n.id LIMIT 1) r ON true
ORDER BY page.score DESC, page.chars, page.id
"""


MESSAGE_DENSE_SQL = f"""
SELECT n.id, n.conversation_id, n.role, n.speaker, {_read_columns("n")}, n.created_at, n.title,
       n.matched, n.in_period, n.chars, 1 - n.dist AS sim, 1 - n.dist AS score FROM (
SELECT x.id, x.conversation_id, x.role, x.speaker, x.content, x.created_at, c.title,
       '{{{{}}}}'::text[] AS matched, false AS in_period, length(x.content) AS chars,
       e.v::vector({{d}}) <=> %(qv)s::vector({{d}}) AS dist
FROM embedding e
JOIN message x ON x.id = e.item_id
JOIN conversation c ON c.anima_id = x.anima_id AND c.id = x.conversation_id
WHERE e.anima_id = %(anima)s AND e.kind = 'message' AND e.model_id = %(model)s
  AND {MESSAGE_WHERE} AND c.platform <> 'cron' AND NOT c.debug
ORDER BY dist  -- the same expression as the index's: the HNSW scan gives the order
LIMIT %(k)s) n
{_read_sql("n")}
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


@dataclass(frozen=True)
class Source:
    """One searched table's statements: the filter on `x` every statement shares (`Filter`), the scoring of
    candidates, the nearest neighbours ({d}: the vectors' dimension), what the rows naming an
    entity (`send_named`) select beyond the filter (`columns` of the scoring statement, the
    `joins` and the `keep` condition they need) and, for a table whose rows are dated, the column
    the periods a question names are read by."""

    filter: Filter
    score: str
    dense: str
    columns: str
    joins: str
    keep: str
    time_column: str | None = None


SOURCES = {
    "semantic_memory": Source(
        MEMORY_FILTER,
        MEMORY_SCORE_SQL,
        MEMORY_DENSE_SQL,
        columns="x.id, x.type, x.content, x.source_sessions, x.observed_at, x.created_at, x.pinned,"
        " false AS dated, false AS in_period",
        joins="",
        keep="NOT (x.id = ANY(%(exclude_ids)s::bigint[]))",  # the resident set, as in MEMORY_DENSE_SQL
    ),
    # indexed with anima_id: the rows of a period the question names
    "message": Source(
        MESSAGE_FILTER,
        MESSAGE_SCORE_SQL,
        MESSAGE_DENSE_SQL,
        columns="x.id, x.conversation_id, x.role, x.speaker, x.content, x.created_at, c.title, false AS in_period",
        joins="JOIN conversation c ON c.anima_id = x.anima_id AND c.id = x.conversation_id",
        keep="c.platform <> 'cron' AND NOT c.debug",
        time_column="created_at",
    ),
}


def text_array(items: Sequence[str]) -> str:
    """`items` as one PostgreSQL array literal, dumped by psycopg's own text[] dumper, for a
    parameter cast with ``::text[]``: built once, it is sent as one string per query."""
    values = list(items)
    dumped = Transformer().get_dumper(values, PyFormat.TEXT).dump(values)
    if dumped is None:
        raise InternalError("psycopg dumped a list as NULL")
    return bytes(dumped).decode()


def fts_statistics(conn: Connection, table: str) -> dict[str, Any] | None:
    """`table`'s estimated rows (reltuples) and the most common lexemes of its `fts` column
    with their frequencies (`elems`, `freqs`), as ANALYZE (autovacuum) keeps them in pg_stats."""
    return conn.execute(_STATS_SQL, (table,)).fetchone()


def send_probe(
    conn: Connection,
    table: str,
    params: dict[str, Any],
    words: Sequence[str],
    periods: Sequence[tuple[date, date]],
    tz: ZoneInfo,
    idle: Mapping[str, str] | None = None,
) -> Rows | None:
    """One statement: per word (or CJK bigram) its tsquery text and at most `cap` ids through the
    index (a stop word matches nothing; a stem in `common` is not read at all); then the rows
    holding every word; then, for a dated table, the rows of each period (local days in `tz`).
    Rows (i, tsq, ids) by branch; None when there is nothing to ask. `params` holds the
    source's filters, `cap` and `common` (a list, or its `text_array`). A word in `idle` is
    known to read nothing (its query text given: '' for a stop word, or a stem in `common`): it
    has no branch of its own, and its row says so (that text, no ids), as the server's would."""
    source = SOURCES[table]
    idle = idle or {}
    periods = periods if source.time_column else []
    args = dict(params)
    where = source.filter.given(params)
    branches = []
    stemmed = [i for i, word in enumerate(words) if idle.get(word) != ""]  # a common stem counts too
    for i in stemmed:
        args[f"w{i}"] = words[i]
        if words[i] in idle:
            continue
        # the word's stem(s); a stop word gives an empty query that matches nothing, and a
        # common stem is not read at all (a one-time filter before the scan)
        q = f"plainto_tsquery('english'::regconfig, %(w{i})s)"
        branches.append(
            f"SELECT {i} AS i, {q}::text AS tsq, ARRAY(SELECT x.id FROM {table} x WHERE {where}"
            f" AND NOT ({q}::text = ANY(%(common)s::text[])) AND x.fts @@ {q} LIMIT %(cap)s) AS ids"
        )
    known = [{"i": i, "tsq": idle[word], "ids": []} for i, word in enumerate(words) if word in idle]
    extra: list[tuple[int, str]] = []  # (i, the ids' query) after the words: every word, the periods
    if len(words) > 1:  # the rows holding every term, however common each one is
        if stemmed:  # (an empty query adds nothing to the others: && leaves them as they are)
            every = " && ".join(f"plainto_tsquery('english'::regconfig, %(w{i})s)" for i in stemmed)
            extra.append(
                (len(words), f"SELECT x.id FROM {table} x WHERE {where} AND x.fts @@ ({every}) LIMIT %(cap)s")
            )
        else:
            known.append({"i": len(words), "tsq": None, "ids": []})
    first_period = len(words) + (len(words) > 1)
    for k, (start, end) in enumerate(periods):
        args[f"ps{k}"] = datetime.combine(start, time(), tz)
        args[f"pe{k}"] = datetime.combine(end, time(), tz)
        col = source.time_column
        sql = (
            f"SELECT x.id FROM {table} x WHERE {where} AND x.{col} >= %(ps{k})s"
            f" AND x.{col} < %(pe{k})s ORDER BY x.{col} LIMIT %(cap)s"
        )
        extra.append((first_period + k, sql))
    # named as the words' branches are: a probe of periods alone (a question of stop words and
    # a time, "what did we do yesterday?") has no word branch to name its columns
    branches += [f"SELECT {i} AS i, NULL AS tsq, ARRAY({sql}) AS ids" for i, sql in extra]
    if not branches:
        return (lambda: known) if known else None
    rows = conn.execute(" UNION ALL ".join(branches), args).fetchall
    return (lambda: rows() + known) if known else rows


def send_named(
    conn: Connection,
    table: str,
    params: dict[str, Any],
    names: Sequence[tuple[str, str, bool]],
) -> Rows:
    """Entity neighbours (recall/neighbours.py), one statement: per name (label, query, phrase)
    at most `link_cap` + 1 ids of the rows naming it through the GIN index, as a probe reads a
    word (the query a phrase for `phraseto_tsquery('english', …)`, else a tsquery text: CJK
    bigrams); a name found in more than `link_cap` rows, or in none, links nothing, nor does
    one whose query is in `common` (stems ANALYZE shows in many rows: not read at all). Then
    at most `rows` of the rows these names find that write one of them as it is written (the
    index finds a stem in any case), `not_ids` left out, best first by how many of the names
    each holds plus `rank_w` times ts_rank_cd of the question's `or_q`, with the columns of
    the source's scoring statement (`matched`: the names held) and `score`. `params` holds the
    source's filters, `link_cap`, `common`, `rows`, `not_ids`, `or_q` and `rank_w`."""
    if not names:
        raise InternalError("send_named needs at least one name")
    source = SOURCES[table]
    args = dict(params, n_label=[label for label, _, _ in names])
    where = source.filter.given(params)
    branches = []
    for i, (_, query, phrase) in enumerate(names):
        args[f"n{i}"] = query
        q = f"phraseto_tsquery('english'::regconfig, %(n{i})s)" if phrase else f"%(n{i})s::tsquery"
        # a common stem is not read at all (a one-time filter before the scan, as in send_probe)
        branches.append(
            f"SELECT {i} AS i, ARRAY(SELECT x.id FROM {table} x WHERE {where}"
            f" AND NOT ({q}::text = ANY(%(common)s::text[])) AND x.fts @@ {q} LIMIT %(link_cap)s + 1) AS ids"
        )
    sql = f"""
WITH named AS ({" UNION ALL ".join(branches)}),
linked AS (SELECT (%(n_label)s::text[])[i + 1] AS label, i, ids FROM named
           WHERE cardinality(ids) BETWEEN 1 AND %(link_cap)s)
SELECT r.*, cardinality(r.matched) + %(rank_w)s * r.rank_cd AS score FROM (
    SELECT {source.columns},
           -- the name as written: the index finds its stem in any case ("Connected", "connect")
           ARRAY(SELECT l.label FROM linked l WHERE x.id = ANY(l.ids) AND strpos(x.content, l.label) > 0
                 ORDER BY l.i) AS matched,
           coalesce(ts_rank_cd(x.fts, %(or_q)s::tsquery, 32), 0) AS rank_cd
    FROM {table} x {source.joins}
    WHERE x.id IN (SELECT unnest(l.ids) FROM linked l)
      AND NOT (x.id = ANY(%(not_ids)s::bigint[])) AND {source.keep}
    OFFSET 0  -- each row's names once (no flattening into the outer WHERE and ORDER BY)
) r
WHERE cardinality(r.matched) > 0
ORDER BY score DESC, length(r.content), r.id
LIMIT %(rows)s"""
    return conn.execute(sql, args).fetchall


def send_lookup(
    conn: Connection, table: str, params: dict[str, Any], queries: Sequence[str]
) -> Callable[[], list[list[int]]]:
    """Ids per tsquery text, each read through the index, at most `cap` (in `params`)."""
    source = SOURCES[table]
    args = dict(params)
    where = source.filter.given(params)
    branches = []
    for i, q in enumerate(queries):
        args[f"q{i}"] = q
        branches.append(
            f"SELECT {i} AS i, ARRAY(SELECT x.id FROM {table} x WHERE {where}"
            f" AND x.fts @@ %(q{i})s::tsquery LIMIT %(cap)s) AS ids"
        )
    if not branches:
        return list
    cur = conn.execute(" UNION ALL ".join(branches), args)
    return lambda: [r["ids"] for r in sorted(cur.fetchall(), key=lambda r: r["i"])]


def send_score(conn: Connection, table: str, args: dict[str, Any]) -> Rows:
    """The candidates `args["ids"]` scored in full, best first, one page (`limit`, `offset`)."""
    return conn.execute(SOURCES[table].score, args).fetchall


def send_nearest(conn: Connection, table: str, dimension: int, args: dict[str, Any]) -> Rows:
    """The `k` nearest rows to the vector `qv` of model `model`, under the source's filters."""
    return conn.execute(SOURCES[table].dense.format(d=int(dimension)), args).fetchall


def send_corrections(conn: Connection, anima_id: str, typos: list[str], min_similarity: float) -> Rows:
    """For each typo, the anima's vocabulary word it most resembles (pg_trgm) and its tsquery
    text; none for a word the anima itself uses."""
    return conn.execute(_CORRECTIONS_SQL, {"typos": typos, "anima": anima_id, "min": min_similarity}).fetchall


def send_iterative_scan(conn: Connection) -> None:
    """pgvector 0.8: the HNSW scans of this stage go on past ef_search while the anima's filter
    drops rows (once per stage, before its nearest-neighbour statements)."""
    conn.execute("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', false)")


def send_summaries(conn: Connection, args: dict[str, Any]) -> Rows:
    """The temporal summaries covering a period in `p_start`/`p_end`, or matching `or_q`."""
    return conn.execute(SUMMARIES_SQL, args).fetchall
