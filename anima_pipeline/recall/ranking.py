"""Ranking by indexes: candidates from the GIN full-text (and trigram) indexes, scoring of the
candidates only.

Two statements per source (memories, messages), whatever the size of the store:

1. *Probe.* For every query term one index lookup, ``fts @@ plainto_tsquery('english', term)``,
   reads at most `CAP` matching ids; one more reads the rows holding all terms. Each term's
   document frequency is the number of ids found, exact below the cap and saturated at it:
   a term found in `CAP` rows or more is common whatever the store's size, so no statistics
   over all rows are needed, nor kept up to date. A word of four letters or more found
   nowhere is probably misspelt: the trigram index (``word <% content``) gives its candidates.
2. *Score.* Only the candidates (at most a few hundred rows, fetched by primary key) are
   scored: the IDF-weighted share of the query's terms each one holds, with IDF
   ``ln(1 + IDF_REF / (df + 0.5))``; plus a small ``ts_rank_cd`` for proximity; plus the
   source's own bonuses (a dated memory for a "when" question, a message of the period named).

Each term is a separate constant in the first statement so the planner estimates it from the
column's statistics: a rare term reads the GIN index, a very common one may stop early on a
plain scan, since at most `CAP` rows are wanted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from anima_pipeline.recall.query import QueryPlan
from anima_pipeline.store.db import Connection

CAP = 200  # ids read per term from the index; document frequencies are counted up to it
IDF_REF = 10 * CAP  # the collection size IDF is taken against: weights do not drift as a store grows
FUZZY_MIN = 0.6  # pg_trgm's default word_similarity_threshold, which `<%` uses in the index
RANK_CD_WEIGHT = 0.1


@dataclass
class Term:
    label: str  # the word or bigram as asked
    tsquery: str  # plainto_tsquery('english', label)::text, '' for a stop word
    ids: list[int]
    fuzzy: bool = False  # matched by trigram similarity (a word found nowhere as written)

    @property
    def df(self) -> int:
        return len(self.ids)

    @property
    def weight(self) -> float:
        return math.log(1 + IDF_REF / (self.df + 0.5)) if self.ids else 0.0


@dataclass
class Probe:
    terms: list[Term] = field(default_factory=list)
    candidates: list[int] = field(default_factory=list)

    def arrays(self) -> dict[str, Any]:
        """The scoring statement's term parameters (only terms that found something)."""
        live = [t for t in self.terms if t.ids]
        return {
            "t_label": [t.label for t in live],
            "t_tsq": [None if t.fuzzy else t.tsquery for t in live],
            "t_fuzzy": [t.label if t.fuzzy else None for t in live],
            "t_w": [t.weight for t in live],
            "w_sum": sum(t.weight for t in live) or 1.0,
            "or_q": " | ".join(f"({t.tsquery})" for t in live if not t.fuzzy and t.tsquery) or None,
            "fuzzy_min": FUZZY_MIN,
            "rank_w": RANK_CD_WEIGHT,
        }


def probe(conn: Connection, table: str, where: str, params: dict[str, Any], plan: QueryPlan) -> Probe:
    """Candidate ids of `table` (alias x) matching `where` and any term of the plan."""
    labels = plan.terms
    if not labels:
        return Probe()
    args = dict(params, cap=CAP)
    branches = []
    for i, label in enumerate(labels):
        args[f"t{i}"] = label
        q = f"plainto_tsquery('english'::regconfig, %(t{i})s)"
        branches.append(
            f"SELECT {i} AS i, {q}::text AS tsq,"
            f" ARRAY(SELECT x.id FROM {table} x WHERE {where} AND x.fts @@ {q} LIMIT %(cap)s) AS ids"
        )
    if len(labels) > 1:
        every = " && ".join(f"plainto_tsquery('english'::regconfig, %(t{i})s)" for i in range(len(labels)))
        branches.append(
            f"SELECT -1, NULL,"
            f" ARRAY(SELECT x.id FROM {table} x WHERE {where} AND x.fts @@ ({every}) LIMIT %(cap)s)"
        )
    rows = conn.execute(" UNION ALL ".join(branches), args).fetchall()
    result = Probe()
    seen_q: set[str] = set()
    candidates: dict[int, None] = {}
    for row in sorted(rows, key=lambda r: r["i"]):
        for id_ in row["ids"]:
            candidates.setdefault(id_, None)
        if row["i"] < 0:
            continue
        label, tsq = labels[row["i"]], row["tsq"] or ""
        if not tsq or tsq in seen_q:  # a stop word, or the same stem twice ("paint", "painted")
            continue
        seen_q.add(tsq)
        result.terms.append(Term(label=label, tsquery=tsq, ids=list(row["ids"])))
    misspelt = [t for t in result.terms if not t.ids and len(t.label) >= 4 and t.label.isalpha()]
    if misspelt:
        fuzzy_args = dict(params, cap=CAP)
        fuzzy_branches = []
        for i, t in enumerate(misspelt):
            fuzzy_args[f"f{i}"] = t.label
            fuzzy_branches.append(
                f"SELECT {i} AS i, ARRAY(SELECT x.id FROM {table} x WHERE {where}"
                f" AND %(f{i})s <%% x.content LIMIT %(cap)s) AS ids"
            )
        for row in conn.execute(" UNION ALL ".join(fuzzy_branches), fuzzy_args).fetchall():
            term = misspelt[row["i"]]
            term.ids, term.fuzzy = list(row["ids"]), True
            for id_ in row["ids"]:
                candidates.setdefault(id_, None)
    result.candidates = list(candidates)
    return result


# The per-candidate part of a scoring statement over `x`: the weighted share of terms held,
# the terms matched (for `why`), and ts_rank_cd. `extra_match` lets a message's speaker count.
def hits_sql(extra_match: str = "false") -> str:
    return f"""
        (SELECT coalesce(sum(t.w * CASE
                    WHEN t.tsq IS NOT NULL AND (x.fts @@ t.tsq::tsquery OR {extra_match}) THEN 1.0
                    WHEN t.fz IS NOT NULL THEN (SELECT CASE WHEN s >= %(fuzzy_min)s THEN s ELSE 0 END
                                                FROM (SELECT word_similarity(t.fz, x.content) AS s) ws)
                    ELSE 0 END), 0) / %(w_sum)s
         FROM unnest(%(t_tsq)s::text[], %(t_fuzzy)s::text[], %(t_w)s::float8[]) AS t(tsq, fz, w)) AS coverage,
        ARRAY(SELECT t.label || CASE WHEN t.fz IS NOT NULL THEN '~' ELSE '' END
              FROM unnest(%(t_label)s::text[], %(t_tsq)s::text[], %(t_fuzzy)s::text[]) AS t(label, tsq, fz)
              WHERE (t.tsq IS NOT NULL AND (x.fts @@ t.tsq::tsquery OR {extra_match}))
                 OR (t.fz IS NOT NULL AND word_similarity(t.fz, x.content) >= %(fuzzy_min)s)) AS matched,
        coalesce(ts_rank_cd(x.fts, %(or_q)s::tsquery, 32), 0) AS rank_cd"""
