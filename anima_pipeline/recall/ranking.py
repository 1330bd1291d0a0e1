"""Ranking by indexes: candidates from the GIN full-text index, scoring of the candidates only.

A few statements per source (memories, messages), whatever the size of the store:

1. *Terms.* The question's words and CJK bigrams go through ``plainto_tsquery('english', …)``
   once (PostgreSQL stems them and drops its stop words); the same stem twice counts once.
2. *Probe.* For every term one index lookup, ``fts @@ term``, reads at most `CAP` matching
   ids; one more reads the rows holding all terms; with a time column, the rows of the
   periods the question names. A term's document frequency is the number of ids found: exact
   below the cap, saturated at it. A term found in `CAP` rows or more is common whatever the
   store's size, so no statistics over all rows are needed, nor kept up to date.
3. *Spelling.* A word of four letters or more found nowhere is looked up by trigram
   similarity in the anima's vocabulary (``recall_word``, kept by triggers) and searched as
   the word it most resembles ("resturant" -> "restaurant").
4. *Score.* Candidates are first ordered by the weights of the terms their id lists show
   (exact for the rarer terms, whose lists are complete); only the best `SCORED` (fetched by
   primary key) are scored in full: the IDF-weighted share of the query's terms each one holds, IDF
   ``ln(1 + IDF_REF / (df + 0.5))``; plus a small ``ts_rank_cd`` for proximity; plus the
   source's own bonuses (a dated memory for a "when" question, a message of the period named).

Every term is a constant of its statement, so the planner estimates it from the column's
statistics: a rare term reads the GIN index, a very common one may stop early on a plain
scan, since at most `CAP` rows are wanted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, time
from typing import Any
from zoneinfo import ZoneInfo

from anima_pipeline.recall.query import QueryPlan
from anima_pipeline.store.db import Connection

CAP = 100  # ids read per term from the index; document frequencies are counted up to it
IDF_REF = 10 * CAP  # the collection size IDF is taken against: weights do not drift as a store grows
SCORED = 100  # candidates scored in full, the best by the terms their id lists show
SPELLING_MIN = 0.45  # pg_trgm similarity a vocabulary word needs to stand for a misspelt one
RANK_CD_WEIGHT = 0.1


@dataclass
class Term:
    label: str  # the word or bigram as asked ("resturant~restaurant" when corrected)
    tsquery: str  # plainto_tsquery('english', word)::text
    ids: list[int] = field(default_factory=list)

    @property
    def weight(self) -> float:
        return math.log(1 + IDF_REF / (len(self.ids) + 0.5)) if self.ids else 0.0


@dataclass
class Probe:
    terms: list[Term] = field(default_factory=list)
    candidates: list[int] = field(default_factory=list)

    def arrays(self) -> dict[str, Any]:
        """The scoring statement's term parameters (only terms that found something)."""
        live = [t for t in self.terms if t.ids]
        return {
            "t_label": [t.label for t in live],
            "t_tsq": [t.tsquery for t in live],
            "t_w": [t.weight for t in live],
            "w_sum": sum(t.weight for t in live) or 1.0,
            "or_q": " | ".join(f"({t.tsquery})" for t in live) or None,
            "rank_w": RANK_CD_WEIGHT,
        }


def lexemes(conn: Connection, plan: QueryPlan) -> list[tuple[str, str]]:
    """(word, tsquery text) of the plan's terms, stop words dropped, one per stem; computed once
    per plan and kept on it."""
    if plan.lexemes is None:
        rows = conn.execute(
            """SELECT w.word, plainto_tsquery('english'::regconfig, w.word)::text AS q
               FROM unnest(%s::text[]) WITH ORDINALITY AS w(word, i) ORDER BY w.i""",
            (plan.terms,),
        ).fetchall()
        seen: set[str] = set()
        plan.lexemes = []
        for r in rows:
            if r["q"] and r["q"] not in seen:
                seen.add(r["q"])
                plan.lexemes.append((r["word"], r["q"]))
    return plan.lexemes


def corrections(
    conn: Connection, anima_id: str, plan: QueryPlan, words: list[str]
) -> dict[str, tuple[str, str]]:
    """For misspelt words, the anima's most similar vocabulary word and its tsquery text."""
    todo = [w for w in words if w not in plan.corrections]
    if todo:
        rows = conn.execute(
            """SELECT t.word AS typo, best.word, plainto_tsquery('english'::regconfig, best.word)::text AS q
               FROM unnest(%(typos)s::text[]) AS t(word)
               CROSS JOIN LATERAL (
                   SELECT v.word FROM recall_word v
                   WHERE v.anima_id = %(anima)s AND v.word %% t.word AND similarity(v.word, t.word) >= %(min)s
                   ORDER BY similarity(v.word, t.word) DESC, v.word LIMIT 1) best""",
            {"typos": todo, "anima": anima_id, "min": SPELLING_MIN},
        ).fetchall()
        found = {r["typo"]: (r["word"], r["q"]) for r in rows if r["q"]}
        for w in todo:
            plan.corrections[w] = found.get(w)
    return {w: plan.corrections[w] for w in words if plan.corrections.get(w)}


def _lookup(
    conn: Connection, table: str, where: str, args: dict[str, Any], queries: list[str], extra: list[str]
) -> list[list[int]]:
    """Ids per tsquery (and per extra branch), each read through the index, at most CAP."""
    branches = []
    for i, q in enumerate(queries):
        args[f"q{i}"] = q
        branches.append(
            f"SELECT {i} AS i, ARRAY(SELECT x.id FROM {table} x WHERE {where}"
            f" AND x.fts @@ %(q{i})s::tsquery LIMIT %(cap)s) AS ids"
        )
    branches += [f"SELECT {len(branches) + k} AS i, ARRAY({sql}) AS ids" for k, sql in enumerate(extra)]
    if not branches:
        return []
    rows = conn.execute(" UNION ALL ".join(branches), args).fetchall()
    return [r["ids"] for r in sorted(rows, key=lambda r: r["i"])]


def probe(
    conn: Connection,
    table: str,
    where: str,
    params: dict[str, Any],
    plan: QueryPlan,
    *,
    time_column: str | None = None,
    tz: ZoneInfo | None = None,
) -> Probe:
    """Candidate ids of `table` (alias x) matching `where` and any term of the plan; with a
    `time_column` (indexed with anima_id), also the rows of the periods the plan names."""
    terms = [Term(label=w, tsquery=q) for w, q in lexemes(conn, plan)]
    periods = plan.periods if time_column and tz else []
    args = dict(params, cap=CAP)
    extra = []
    if len(terms) > 1:  # the rows holding every term, however common each one is
        args["q_all"] = " & ".join(f"({t.tsquery})" for t in terms)
        extra.append(
            f"SELECT x.id FROM {table} x WHERE {where} AND x.fts @@ %(q_all)s::tsquery LIMIT %(cap)s"
        )
    for i, p in enumerate(periods):
        args[f"ps{i}"] = datetime.combine(p.start, time(), tz)
        args[f"pe{i}"] = datetime.combine(p.end, time(), tz)
        extra.append(
            f"SELECT x.id FROM {table} x WHERE {where} AND x.{time_column} >= %(ps{i})s"
            f" AND x.{time_column} < %(pe{i})s ORDER BY x.{time_column} LIMIT %(cap)s"
        )
    found = _lookup(conn, table, where, args, [t.tsquery for t in terms], extra)
    for term, ids in zip(terms, found, strict=False):
        term.ids = ids
    estimate: dict[int, float] = {id_: 0.0 for ids in found for id_ in ids}
    misspelt = [
        t for t in terms if not t.ids and len(t.label) >= 4 and t.label.isascii() and t.label.isalpha()
    ]
    fixed = corrections(conn, str(params["anima"]), plan, [t.label for t in misspelt]) if misspelt else {}
    if fixed:
        fixes = [(t, fixed[t.label]) for t in misspelt if t.label in fixed]
        args = dict(params, cap=CAP)
        for (term, (word, q)), ids in zip(
            fixes, _lookup(conn, table, where, args, [q for _, (_, q) in fixes], []), strict=True
        ):
            term.label, term.tsquery, term.ids = f"{term.label}~{word}", q, ids
            estimate.update(dict.fromkeys(ids, 0.0))
    # What the id lists show: the weight of every term a candidate was found under (exact for
    # the rarer terms, whose lists are complete); the period's rows count as one rare term.
    for term in terms:
        for id_ in term.ids:
            estimate[id_] += term.weight
    for ids in found[len(terms) + (1 if len(terms) > 1 else 0) :]:
        for id_ in ids:
            estimate[id_] += math.log(1 + IDF_REF)
    best = sorted(estimate, key=lambda i: (-estimate[i], -i))[:SCORED]
    return Probe(terms=terms, candidates=best)


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
