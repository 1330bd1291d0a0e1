"""Chat-time recall: what the agent gets back when it asks its memory.

The seeds' order of priority: resident memories (pinned ∪ most cited, always in context),
then passive recall (full-text and trigram match on the query, resident ones and the
current session's own memories excluded), within a character budget (default 2000).
Read-only: recall never writes.

Passive recall is one parameterized SQL query over the anima's active memories:

* The query is cut into *terms* in Python (`plan_query`): question and stop words are
  dropped ("When did Caroline go to the LGBTQ support group?" -> caroline, lgbtq, support,
  group); an English word becomes a prefix lexeme of its crude stem ("painted" ->
  ``paint:*``), written dates become ISO substrings ("7 May 2023" -> ``2023-05-07``), and
  a run of CJK characters (no spaces to split on) becomes its character bigrams, question
  words such as 什么 / 什么时候 removed first.
* In SQL each (memory, term) pair is a hit of 1 when the tsvector (``'simple'`` config)
  matches the term's lexeme or, for CJK, the content contains the bigram; otherwise, for
  words of four letters or more, pg_trgm ``word_similarity`` at or above 0.6 counts as a
  partial hit (typos: "Carolline", "suport").
* A memory's score is the IDF-weighted share of the query's terms it hits (terms that
  occur in every memory, such as the speakers' names, weigh little), plus a small
  ``ts_rank_cd`` of the OR-combined tsquery (term proximity), plus a bonus for memories
  carrying a date when the question asks *when*. Memories with no hit are never returned,
  so a query of question words alone recalls nothing.
* The ranked rows are packed greedily into the character budget: a memory that does not
  fit is skipped and a shorter one further down may still be taken.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

from pydantic import BaseModel

from anima_pipeline.store.db import Connection
from anima_pipeline.store.memories import _COLUMNS, SemanticMemory

log = logging.getLogger(__name__)

RESIDENT_TOP_N = 20
PINNED_MAX = 40
MAX_CHARS = 2000  # memory.passive_recall default (seed: context management)
FUZZY_MIN = 0.6  # pg_trgm's own default word_similarity_threshold
DATE_BONUS = 0.2
RANK_CD_WEIGHT = 0.1


class Recalled(BaseModel):
    memory: SemanticMemory
    score: float
    why: str


class RecallResult(BaseModel):
    anima_id: str
    query: str
    resident: list[SemanticMemory]
    recalled: list[Recalled]
    resident_overflow: int = 0

    def render(self) -> str:
        """The text block a host would put into the agent's context."""
        lines = ["# Resident memories"]
        lines += [f"- [[anima:{m.ref}]] {m.content}" for m in self.resident] or ["(none)"]
        lines.append(f"# Recalled for: {self.query}")
        lines += [f"- [[anima:{r.memory.ref}]] {r.memory.content}" for r in self.recalled] or [
            "(nothing matched)"
        ]
        return "\n".join(lines)


# --- resident set ---------------------------------------------------------------------


def resident_set(
    conn: Connection, anima_id: str, top_n: int = RESIDENT_TOP_N, pinned_max: int = PINNED_MAX
) -> tuple[list[SemanticMemory], int]:
    """Pinned ∪ top-N by reference count. Pins beyond pinned_max are cut from the read (most
    cited pins kept, then the oldest id), reported as overflow and logged, never unpinned."""
    rows = conn.execute(
        f"""WITH pins AS (
                SELECT count(*) AS pinned_total FROM semantic_memory
                WHERE anima_id = %(a)s AND status = 'active' AND pinned
            ), picked AS (
                (SELECT {_COLUMNS}, 0 AS part FROM semantic_memory
                 WHERE anima_id = %(a)s AND status = 'active' AND pinned
                 ORDER BY reference_count DESC, id LIMIT %(pmax)s)
                UNION ALL
                (SELECT {_COLUMNS}, 1 AS part FROM semantic_memory
                 WHERE anima_id = %(a)s AND status = 'active' AND NOT pinned AND reference_count > 0
                 ORDER BY reference_count DESC, id LIMIT %(n)s)
            )
            SELECT pins.pinned_total, picked.* FROM pins LEFT JOIN picked ON true
            ORDER BY picked.part, picked.reference_count DESC, picked.id""",
        {"a": anima_id, "pmax": max(0, pinned_max), "n": max(0, top_n)},
    ).fetchall()
    pinned_total = int(rows[0]["pinned_total"])
    memories = [
        SemanticMemory.model_validate({k: v for k, v in r.items() if k not in ("pinned_total", "part")})
        for r in rows
        if r["id"] is not None
    ]
    overflow = max(0, pinned_total - max(0, pinned_max))
    if overflow:
        log.warning(
            "anima %s has %d pins, %d over pinned_max=%d: cut from the resident read",
            anima_id,
            pinned_total,
            overflow,
            pinned_max,
        )
    return memories, overflow


# --- query planning -------------------------------------------------------------------

STOPWORDS = frozenset(
    """a an the and or but of to in on at for with by from as into onto about over under after before
    is are was were be been being am do does did done doing have has had having it its this that these those
    he she they him her his hers their theirs them i my me mine we our us you your yours s t
    what when where which who whom whose why how whats whens wheres whos hows many much long often
    would could should can will shall may might must likely ever also kind type sort some any there here
    not no yes so than then just very really any anything something someone thing things
    go goes went gone going tell think know happen happens happened""".split()
)
IRREGULAR = {
    "got": "get",
    "met": "meet",
    "made": "make",
    "took": "take",
    "bought": "buy",
    "won": "win",
    "gave": "give",
    "saw": "see",
    "seen": "see",
    "ran": "run",
    "wrote": "write",
    "began": "begin",
    "found": "find",
    "felt": "feel",
    "left": "leave",
    "told": "tell",
    "taught": "teach",
    "held": "hold",
    "kept": "keep",
    "lost": "lose",
    "sold": "sell",
    "spent": "spend",
    "brought": "bring",
    "built": "build",
    "ate": "eat",
    "drew": "draw",
    "flew": "fly",
    "read": "read",
    "sang": "sing",
    "swam": "swim",
    "came": "come",
    "became": "become",
}
_MONTHS = "january february march april may june july august september october november december".split()
_MONTH_RE = r"(jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*"
_EN_DATE_INTENT = re.compile(
    r"\bwhen\b|\b(what|which)\s+(date|day|year|month|week|time)\b|\bhow\s+long\b|\bsince\s+when\b"
)
# Chinese: question words are removed before bigrams are cut; single characters split runs.
_ZH_QUESTION = sorted(
    """什么时候 什么 为什么 怎么样 怎么 怎样 如何 哪里 哪儿 哪些 哪个 哪天 哪一天 哪年 哪个月 几月 几号 几时 何时
    多少 多久 是不是 有没有 是否 可以 请问 一下""".split(),
    key=len,
    reverse=True,
)
_ZH_STOP_CHARS = set(
    "的了吗呢吧啊呀嘛谁哪几是在我你他她它们和与及或过也都就还又被把给对这那个么？?，,。！!、：:；;"
)
_ZH_DATE_INTENT = re.compile(r"什么时候|何时|哪天|哪一天|哪年|哪个月|几月|几号|几时|多久|日期")
_CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
_CJK_RUN = re.compile(f"[{_CJK}]+")
# What "carries a date" means for the date bonus (matched on content, case-insensitive).
DATED_RE = (
    r"\m(1[89]|20)\d\d\M|\m" + _MONTH_RE + r"\M\.?\s*\d|\d\s+" + _MONTH_RE + r"\M"
    r"|\d+\s*[年月日号]|\m(yesterday|today|tomorrow|tonight)\M|\m(last|next|this)\s+(week|weekend|month|year"
    r"|night|monday|tuesday|wednesday|thursday|friday|saturday|sunday)\M|\mago\M"
)


@dataclass
class Term:
    label: str  # shown in `why`
    tsquery: str | None = None  # a to_tsquery('simple', …) expression for words and numbers
    substring: str | None = None  # a lowercase substring for CJK bigrams and ISO dates
    fuzzy: str | None = None  # the word compared by trigram word_similarity


@dataclass
class QueryPlan:
    terms: list[Term] = field(default_factory=list)
    date_intent: bool = False


def _stem(word: str) -> str:
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3]
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith(("ed", "es")):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _lexeme(word: str) -> str:
    stem = _stem(word)
    return f"{stem}:*" if len(stem) >= 3 and not stem.isdigit() else stem


def _iso_dates(text: str) -> tuple[str, list[str]]:
    """Written dates to ISO substrings ("7 May 2023", "May 7, 2023" -> 2023-05-07; "May 2023" -> 2023-05)."""
    found: list[str] = []

    def full(m: re.Match, d: str, mon: str, y: str) -> str:
        found.append(f"{int(y):04d}-{_month(mon):02d}-{int(d):02d}")
        return " "

    def month(m: re.Match) -> str:
        found.append(f"{int(m.group('y')):04d}-{_month(m.group('mon')):02d}")
        return " "

    text = re.sub(
        r"\b(?P<d>\d{1,2})(?:st|nd|rd|th)?\s+(?P<mon>" + _MONTH_RE + r")[\s,]+(?P<y>\d{4})\b",
        lambda m: full(m, m["d"], m["mon"], m["y"]),
        text,
    )
    text = re.sub(
        r"\b(?P<mon>" + _MONTH_RE + r")\s+(?P<d>\d{1,2})(?:st|nd|rd|th)?,?\s+(?P<y>\d{4})\b",
        lambda m: full(m, m["d"], m["mon"], m["y"]),
        text,
    )
    text = re.sub(r"\b(?P<mon>" + _MONTH_RE + r")[\s,]+(?P<y>\d{4})\b", month, text)
    found += re.findall(r"\b\d{4}-\d{2}(?:-\d{2})?\b", text)
    text = re.sub(r"\b\d{4}-\d{2}(?:-\d{2})?\b", " ", text)
    return text, found


def _month(name: str) -> int:
    return next(i for i, m in enumerate(_MONTHS, 1) if m.startswith(name[:3]))


def plan_query(query: str) -> QueryPlan:
    """The terms recall matches on, and whether the question asks for a date."""
    text = query.lower()
    plan = QueryPlan(date_intent=bool(_EN_DATE_INTENT.search(text) or _ZH_DATE_INTENT.search(text)))
    seen: set[str] = set()

    def add(term: Term) -> None:
        key = term.tsquery or term.substring or ""
        if key and key not in seen:
            seen.add(key)
            plan.terms.append(term)

    text, dates = _iso_dates(text)
    for iso in dates:
        add(Term(label=iso, substring=iso))
    for run in _CJK_RUN.findall(text):
        for word in _ZH_QUESTION:
            run = run.replace(word, " ")
        for segment in re.split(r"\s+", "".join(" " if ch in _ZH_STOP_CHARS else ch for ch in run)):
            grams = [segment] if len(segment) == 1 else [segment[i : i + 2] for i in range(len(segment) - 1)]
            for gram in filter(None, grams):
                add(Term(label=gram, substring=gram))
    for word in re.findall(r"[a-z0-9]+", _CJK_RUN.sub(" ", text)):
        if word in STOPWORDS or (len(word) == 1 and not word.isdigit()):
            continue
        if word in IRREGULAR and IRREGULAR[word] != word:
            base = IRREGULAR[word]
            add(
                Term(
                    label=word, tsquery=f"({word} | {_lexeme(base)})", fuzzy=word if len(word) >= 4 else None
                )
            )
        else:
            add(
                Term(
                    label=word,
                    tsquery=_lexeme(word),
                    fuzzy=word if len(word) >= 4 and not word.isdigit() else None,
                )
            )
    return plan


# --- passive recall -------------------------------------------------------------------

_RECALL_SQL = f"""
WITH terms AS (
    SELECT i::int AS i, label, CASE WHEN tsq IS NOT NULL THEN to_tsquery('simple', tsq) END AS q, sub, fuzzy
    FROM unnest(%(labels)s::text[], %(tsq)s::text[], %(sub)s::text[], %(fuzzy)s::text[])
         WITH ORDINALITY AS t(label, tsq, sub, fuzzy, i)
), docs AS (  -- one row per candidate memory with its hit on every term, in term order
    SELECT {_COLUMNS}, search,
           ARRAY(SELECT CASE
                   WHEN t.q IS NOT NULL AND m.search @@ t.q THEN 1.0
                   WHEN t.sub IS NOT NULL AND strpos(lower(m.content), t.sub) > 0 THEN 1.0
                   WHEN t.fuzzy IS NOT NULL THEN (SELECT CASE WHEN s >= %(fuzzy_min)s THEN s ELSE 0 END
                                                  FROM (SELECT word_similarity(t.fuzzy, m.content) AS s) w)
                   ELSE 0 END
                 FROM terms t ORDER BY t.i) AS hv
    FROM semantic_memory m
    WHERE anima_id = %(anima)s AND status = 'active' AND NOT (id = ANY(%(exclude_ids)s::bigint[]))
      AND NOT (cardinality(source_sessions) > 0 AND source_sessions <@ %(exclude_sessions)s::text[])
), idf AS MATERIALIZED (  -- BM25's idf of every term over the candidates, as an array in term order
    SELECT array_agg(w ORDER BY i) AS wv, sum(w) AS wsum
    FROM (SELECT t.i, ln(1 + (c.n - c.df + 0.5) / (c.df + 0.5)) AS w
          FROM terms t CROSS JOIN LATERAL (
              SELECT count(*) AS n, count(*) FILTER (WHERE d.hv[t.i] > 0) AS df FROM docs d) c) per_term
), scored AS (
    SELECT d.*,
           (SELECT sum(idf.wv[k] * d.hv[k]) FROM generate_subscripts(d.hv, 1) k) / nullif(idf.wsum, 0) AS coverage,
           ARRAY(SELECT t.label || CASE WHEN d.hv[t.i] < 1 THEN '~' ELSE '' END
                 FROM terms t WHERE d.hv[t.i] > 0 ORDER BY t.i) AS matched,
           coalesce(ts_rank_cd(d.search, to_tsquery('simple', %(orq)s::text), 32), 0) AS rank_cd,
           d.content ~* %(dated_re)s AS dated
    FROM docs d CROSS JOIN idf
    WHERE 0 < ANY(d.hv)
)
SELECT {_COLUMNS}, matched, dated,
       coverage + %(rank_w)s * rank_cd + CASE WHEN %(date_intent)s AND dated THEN %(date_bonus)s ELSE 0 END
           AS score
FROM scored
ORDER BY score DESC, length(content), id
LIMIT %(n)s
"""


def recall(
    conn: Connection,
    anima_id: str,
    query: str,
    limit: int = 8,
    max_chars: int = MAX_CHARS,
    exclude_sessions: list[str] | None = None,
) -> RecallResult:
    """The resident set, then at most `limit` memories matching `query` whose contents add up
    to at most `max_chars` characters. `exclude_sessions` are the current conversation's ids:
    a memory whose sources all lie among them is already in the window and is not recalled
    (one that also draws on other conversations still is)."""
    resident, overflow = resident_set(conn, anima_id)
    plan = plan_query(query)
    recalled: list[Recalled] = []
    if plan.terms and limit > 0 and max_chars > 0:
        words = [t.tsquery for t in plan.terms if t.tsquery]
        rows = conn.execute(
            _RECALL_SQL,
            {
                "labels": [t.label for t in plan.terms],
                "tsq": [t.tsquery for t in plan.terms],
                "sub": [t.substring for t in plan.terms],
                "fuzzy": [t.fuzzy for t in plan.terms],
                "orq": " | ".join(words) if words else None,
                "anima": anima_id,
                "exclude_ids": [m.id for m in resident],
                "exclude_sessions": list(exclude_sessions or []),
                "fuzzy_min": FUZZY_MIN,
                "dated_re": DATED_RE,
                "date_intent": plan.date_intent,
                "date_bonus": DATE_BONUS,
                "rank_w": RANK_CD_WEIGHT,
                "n": limit * 4 + 10,
            },
        ).fetchall()
        used = 0
        for row in rows:
            if len(recalled) >= limit:
                break
            if used + len(row["content"]) > max_chars:
                continue
            score, matched, dated = float(row.pop("score")), row.pop("matched"), row.pop("dated")
            mem = SemanticMemory.model_validate(row)
            used += len(mem.content)
            why = "matched " + ", ".join(matched) + (" (dated)" if plan.date_intent and dated else "")
            recalled.append(Recalled(memory=mem, score=round(score, 4), why=why))
    return RecallResult(
        anima_id=anima_id, query=query, resident=resident, recalled=recalled, resident_overflow=overflow
    )
