"""The second stage of recall: one score per candidate, over every list the first stage found.

The first stage (`recall.ranking`) gives each source its lexical list, its nearest items by
meaning and, for a dated source, the rows of the period asked about; the summaries come
beside them. Each list is ranked by its own score, and those scores are not comparable across
lists or sections. Here every candidate of every list gets the same features (`FEATURES`):
its lexical and cosine scores and ranks, how much of the question's words and names it holds,
where its date lies against the time asked about, its kind and type, who said it, its length;
a logistic model over them (`ranker_weights.json`, package data, fit by
``benchmarks/fit_ranker.py`` on the tuned dialogues only, docs/benchmarks.md) turns them into
one probability that the line holds the answer. `recall.assemble` then gives the characters to
the best candidates, each in its own section, and drops a line that says again what a placed
line says (`Placed.repeats`: a memory and the message it came from).

Pure Python over the rows already read (numpy is an optional dependency: the fit uses it, a
query does not): no statement, no model call.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import date
from importlib import resources
from typing import Any

from anima_pipeline.core.errors import InternalError
from anima_pipeline.recall.query import QueryPlan
from anima_pipeline.recall.ranking import Search, Signal
from anima_pipeline.recall.sections import ContextItem, SectionName
from anima_pipeline.text.entities import entities
from anima_pipeline.text.vocab import STOPWORDS

WEIGHTS_FILE = "ranker_weights.json"
MEMORY_TYPES = ("world", "experience", "preference", "opinion")  # "imprint" is the baseline type
FEATURES: tuple[str, ...] = (
    "lex_in",  # in the source's lexical list
    "lex_score",  # its score there (coverage, proximity, bonuses: store/recall_queries.py)
    "lex_rank",  # 1 / (1 + rank) in that list
    "lex_log_rank",  # log(1 + rank) in that list (the list's length when not in it)
    "dense_in",  # among the source's nearest by meaning
    "cos",  # cosine to the question (the list's last one's when not among the nearest)
    "dense_rank",
    "dense_log_rank",
    "idf_cov",  # the IDF-weighted share of the question's terms the text holds
    "word_cov",  # the plain share of them
    "all_words",  # every term held
    "name_cov",  # the share of the names the question says the text (or its speaker) holds
    "asks_names",  # the question names someone or something
    "speaker_named",  # a message said by someone the question names
    "in_period",  # of a period the question names
    "period_dist",  # how far (log days) its date lies outside the periods named
    "asks_time",
    "dated_when",  # the text carries a date and the question asks when
    "message_when",  # a message (its date shown) and the question asks when
    "age",  # log days between its date and now
    "is_message",
    "is_summary",
    *(f"type_{t}" for t in MEMORY_TYPES),
    "chars",  # log of its line's length
    "long",  # longer than a line of the context may be (it will be cut)
    "cov_message",  # idf_cov for a message (messages hold the words differently)
    "cos_message",
    # against the question's other candidates (what a list's scores mean varies by question)
    "idf_rel",  # idf_cov / the best idf_cov of any candidate
    "cos_rel",  # cos - the best cos of any candidate
    "lex_rel",  # lex_score / the best lex_score of its source
)
LIST_END = 60  # the rank a candidate missing from a list is given (the lists are about that long)
CONTAINED = 1.0  # every word of a line (every number among them) inside one placed line: it repeats it
FROM_SOURCE = 0.9  # the same for a memory and a message of the conversation it came from
_QUESTION_WORDS = frozenset(
    "what when where who whom whose which why how did does do is are was were can could would should".split()
)
_TOKEN = re.compile(r"[a-z0-9]+")
_SAID = re.compile(r"\d{4}-\d\d-\d\d|[a-z0-9]+")  # an ISO date is one word: its parts are not numbers
_CJK = re.compile(r"[\u3400-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af]")
_CJK_RUN = re.compile(r"[\u3400-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af]+")
_DATED = re.compile(
    r"\b(19|20)\d\d\b|\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?\s+\d|\d+\s*[年月日号]"
    r"|\b(yesterday|today|tomorrow|tonight|ago)\b|\b(last|next|this)\s+(week|weekend|month|year)\b"
)


@dataclass(frozen=True)
class Weights:
    """A fitted logistic model: per feature its mean and scale (the standardisation of the fit)
    and its weight, and the intercept."""

    features: tuple[str, ...]
    mean: tuple[float, ...]
    scale: tuple[float, ...]
    weight: tuple[float, ...]
    bias: float
    alpha: float = 0.0  # the length exponent of the packing order: score / (chars / 100) ** alpha
    meta: dict[str, Any] = field(default_factory=dict)

    def score(self, x: Sequence[float]) -> float:
        """The probability that a candidate of features `x` (in `FEATURES` order) holds the answer."""
        z = self.bias + sum(
            (v - m) / s * w for v, m, s, w in zip(x, self.mean, self.scale, self.weight, strict=True)
        )
        return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))

    def to_json(self) -> dict[str, Any]:
        return {
            "features": list(self.features),
            "mean": [round(float(v), 6) for v in self.mean],
            "scale": [round(float(v), 6) for v in self.scale],
            "weight": [round(float(v), 6) for v in self.weight],
            "bias": round(self.bias, 6),
            "alpha": self.alpha,
            "meta": self.meta,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Weights:
        """The weights of `data`; they must name exactly the features computed here, in order
        (InternalError otherwise: the packaged file and the code disagree, a bug)."""
        names = tuple(data.get("features") or ())
        if names != FEATURES:
            missing, extra = set(FEATURES) - set(names), set(names) - set(FEATURES)
            raise InternalError(
                f"{WEIGHTS_FILE}: features differ from recall.rerank.FEATURES"
                f" (missing {sorted(missing)}, unknown {sorted(extra)}, or another order): refit them"
                " with benchmarks/fit_ranker.py"
            )
        arrays = [tuple(float(v) for v in data[k]) for k in ("mean", "scale", "weight")]
        for key, arr in zip(("mean", "scale", "weight"), arrays, strict=True):
            if len(arr) != len(FEATURES):
                raise InternalError(f"{WEIGHTS_FILE}: {key} has {len(arr)} values, not {len(FEATURES)}")
        mean, scale, weight = arrays
        return cls(
            names,
            mean,
            tuple(v if v > 0 else 1.0 for v in scale),
            weight,
            float(data["bias"]),
            float(data.get("alpha", 0.0)),
            dict(data.get("meta") or {}),
        )


@functools.cache
def packaged_weights() -> Weights:
    """The weights shipped with the package (read once per process)."""
    text = resources.files("anima_pipeline.recall").joinpath(WEIGHTS_FILE).read_text(encoding="utf-8")
    return Weights.from_json(json.loads(text))


@dataclass
class Candidate:
    """One item of a first-stage list, the section it would go to, and its features."""

    item: ContextItem
    section: SectionName
    x: list[float]
    score: float = 0.0


@dataclass
class Asked:
    """What the features read of the question, once per question."""

    terms: list[str]  # as searched (a respelt word as the word it stands for)
    weights: dict[str, float]  # IDF weight per term (the source's, 1.0 when it found nothing)
    names: set[str]  # the words of the names the question says, lowercased
    periods: list[tuple[date, date]]
    asks_time: bool
    today: date


def asked(plan: QueryPlan, query: str, search: Search | None, today: date) -> Asked:
    """The question's terms with the IDF weights one source's probe gave them, and its names."""
    weights: dict[str, float] = {}
    for term in search.terms if search else []:
        label = term.label.split("~")[-1].lower()
        weights[label] = term.weight
    terms = [t.lower() for t in plan.terms]
    for asked_as, (word, _) in ((k, v) for k, v in plan.corrections.items() if v):
        terms = [word.lower() if t == asked_as.lower() else t for t in terms]
    if weights:  # the words the source searched on: PostgreSQL's stop words ("when", "did") left out
        terms = [t for t in terms if t in weights]
    names = {
        w
        for name, at_start in entities(query)
        for w in _TOKEN.findall(name.lower())
        if not (at_start and w in _QUESTION_WORDS) and w not in _QUESTION_WORDS
    }
    return Asked(
        terms=terms,
        weights={t: weights.get(t, 1.0) for t in terms},
        names=names,
        periods=[(p.start, p.end) for p in plan.periods],
        asks_time=plan.about_time,
        today=today,
    )


def _stem(term: str) -> str:
    """A crude stem for matching a question word in a text: "painting" finds "painted"."""
    return term if len(term) < 5 else term[: max(4, len(term) - 3)]


@functools.lru_cache(maxsize=4096)
def _finder(term: str) -> re.Pattern[str]:
    """How a term is found in a lowercased text: a CJK term anywhere, a word by its stem at the
    start of a word (one compiled search per term, not one test per word of the text)."""
    if _CJK.search(term):
        return re.compile(re.escape(term))
    return re.compile(r"(?<![a-z0-9])" + re.escape(_stem(term)))


def features(
    item: ContextItem,
    q: Asked,
    lexical: Signal | None,
    dense: Signal | None,
    cos_floor: float,
) -> list[float]:
    """The values of `FEATURES` for one candidate."""
    text = item.text.lower()
    tokens = set(_TOKEN.findall(text))
    held = [t for t in q.terms if _finder(t).search(text)]
    w_sum = sum(q.weights.values()) or 1.0
    idf_cov = sum(q.weights[t] for t in held) / w_sum if q.terms else 0.0
    word_cov = len(held) / len(q.terms) if q.terms else 0.0
    speaker = set(_TOKEN.findall((item.speaker or "").lower()))
    names_held = {n for n in q.names if n in tokens or n in speaker}
    is_message, is_summary = item.kind == "message", item.kind == "summary"
    in_period = bool(lexical.in_period) if lexical else False
    dist = 0.0
    if item.date and q.periods:
        gaps = [
            0 if s <= item.date < e else min(abs((item.date - s).days), abs((item.date - e).days))
            for s, e in q.periods
        ]
        dist = math.log1p(min(gaps))
        in_period = in_period or min(gaps) == 0
    age = math.log1p(max(0, (q.today - item.date).days)) if item.date else 0.0
    cos = dense.score if dense else cos_floor
    chars = math.log(max(item.chars, 1))
    return [
        1.0 if lexical else 0.0,
        lexical.score if lexical else 0.0,
        1.0 / (1 + lexical.rank) if lexical else 0.0,
        math.log1p(lexical.rank if lexical else LIST_END),
        1.0 if dense else 0.0,
        cos,
        1.0 / (1 + dense.rank) if dense else 0.0,
        math.log1p(dense.rank if dense else LIST_END),
        idf_cov,
        word_cov,
        1.0 if q.terms and len(held) == len(q.terms) else 0.0,
        len(names_held) / len(q.names) if q.names else 0.0,
        1.0 if q.names else 0.0,
        1.0 if is_message and speaker & q.names else 0.0,
        1.0 if in_period else 0.0,
        dist,
        1.0 if q.asks_time else 0.0,
        1.0 if q.asks_time and _DATED.search(text) else 0.0,
        1.0 if q.asks_time and is_message else 0.0,
        age,
        1.0 if is_message else 0.0,
        1.0 if is_summary else 0.0,
        *(1.0 if item.kind == "memory" and item.type == t else 0.0 for t in MEMORY_TYPES),
        chars,
        1.0 if item.chars > 400 else 0.0,
        idf_cov if is_message else 0.0,
        cos if is_message else 0.0,
    ]


def candidates(
    plan: QueryPlan,
    query: str,
    today: date,
    memory_search: Search,
    memories: list[ContextItem],
    message_search: Search,
    messages: list[ContextItem],
    summaries: list[ContextItem],
) -> list[Candidate]:
    """The union of the first stage's lists, one candidate per item, with its features: the
    memories' and the messages' fused lists and their nearest by meaning, and the summaries."""
    out: list[Candidate] = []
    pools: list[tuple[SectionName, Search | None, Iterable[ContextItem]]] = [
        ("memories", memory_search, [*memories, *memory_search.nearest]),
        ("episodic", message_search, [*messages, *message_search.nearest]),
        ("summaries", None, summaries),
    ]
    q_messages = asked(plan, query, message_search, today)
    for section, search, items in pools:
        q = asked(plan, query, search, today) if search is memory_search else q_messages
        sims = [s.score for s in search.dense_hits.values()] if search else []
        floor = min(sims) - 0.05 if sims else 0.0
        seen: set[str] = set()
        for item in items:
            if item.ref in seen:
                continue
            seen.add(item.ref)
            lexical = search.lexical.get(item.ref) if search else None
            if section == "summaries":
                lexical = Signal(0, item.score, item.why == "covers the period")
            dense = search.dense_hits.get(item.ref) if search else None
            out.append(Candidate(item, section, features(item, q, lexical, dense, floor)))
    _relative(out)
    return out


def _relative(cands: list[Candidate]) -> None:
    """Append the features that compare a candidate with the question's others."""
    if not cands:
        return
    idf, cos, lex = (FEATURES.index(n) for n in ("idf_cov", "cos", "lex_score"))
    best_idf = max(c.x[idf] for c in cands) or 1.0
    best_cos = max(c.x[cos] for c in cands)
    best_lex: dict[str, float] = {}
    for c in cands:
        best_lex[c.section] = max(best_lex.get(c.section, 0.0), c.x[lex])
    for c in cands:
        c.x += [c.x[idf] / best_idf, c.x[cos] - best_cos, c.x[lex] / (best_lex[c.section] or 1.0)]


def rank(cands: list[Candidate], weights: Weights | None = None) -> list[Candidate]:
    """The candidates scored by `weights` (the packaged ones by default), best first in the
    packing order: score / (chars / 100) ** alpha (alpha 0: by score alone)."""
    if not cands:
        return []
    weights = weights or packaged_weights()
    for c in cands:
        c.score = weights.score(c.x)
    a = weights.alpha

    def order(c: Candidate) -> tuple[float, str]:
        per = c.score / ((max(c.item.chars, 40) / 100) ** a) if a else c.score
        return (-per, c.item.ref)

    return sorted(cands, key=order)


class Placed:
    """The lines already in the context, to tell a line that only repeats one of them."""

    def __init__(self, items: Sequence[ContextItem] = ()) -> None:
        self._lines: list[tuple[ContextItem, frozenset[str]]] = []
        for item in items:
            self.add(item)

    def add(self, item: ContextItem) -> None:
        self._lines.append((item, said(item)))

    def repeats(self, item: ContextItem) -> bool:
        """`item` says nothing a placed line does not: its words (every number and date among
        them) nearly all in one placed line (CONTAINED), or, for a memory and a message of the
        conversation it came from, most of the shorter one's words in the other (FROM_SOURCE)."""
        mine = said(item)
        if not mine:
            return False
        for other, theirs in self._lines:
            shared = mine & theirs
            if any(t[0].isdigit() for t in mine - shared):
                continue  # a number or a date the placed line lacks: another fact
            if len(shared) >= CONTAINED * len(mine):
                return True
            if _source_pair(item, other) and len(shared) >= FROM_SOURCE * min(len(mine), len(theirs)):
                return True
        return False


def said(item: ContextItem) -> frozenset[str]:
    """The words a line says, its date included, stop words and single letters left out (not
    single digits). Not a message's speaker: with it, a message whose words a memory naming its
    speaker holds counted as a repeat, and leaving those out lowered the answers placed
    (docs/benchmarks.md, 2026-12-02)."""
    text = f"{item.text} {item.date or ''}".lower()
    return frozenset(
        t for t in _SAID.findall(text) if (len(t) > 1 or t.isdigit()) and t not in STOPWORDS
    ) | frozenset(text[i : i + 2] for run in _CJK_RUN.findall(text) for i in range(len(run) - 1))


def _source_pair(a: ContextItem, b: ContextItem) -> bool:
    """A memory and a message of one of the memory's source conversations."""
    if a.kind == "memory" and b.kind == "message":
        return b.conversation_id in a.sources
    if a.kind == "message" and b.kind == "memory":
        return a.conversation_id in b.sources
    return False
