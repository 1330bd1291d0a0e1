"""Chat-time context on LoCoMo and MemoryBank: does what recall puts into the agent's context
hold the answer, within the same 2,000 characters?

Run:  .venv/bin/python -m benchmarks.recall_at_k --from-store DATABASE_URL [--data DIR]
      (data: $ANIMA_DATA_DIR, by default ../shared/data next to the repository)
      [--budget 2000] [--share 0.3 0.5 0.7] [--dense MEM:MSG[:CHARS] ...] [--contexts FILE]
      [--neighbours [HITS:NAMES:ROWS:LINK_CAP:CHARS ...]] [--only tuned|unseen]

The store is one where the dev dialogues were imported and slept through every night offline
(``anima import`` of ``locomo/dev.archive.jsonl`` and ``memorybank/*.archive.jsonl``, then
``anima sleep --from 2022-01-21 --to 2023-10-23``); it is opened read-only.

What is measured (one run, shares printed, nothing asserted), per LoCoMo category 1-4, for the
dialogues the ranking was tuned on (conv-26, conv-30) and for the unseen ones (conv-41, conv-42):

* *hit*: the context holds every key word of the gold answer (``light_sleep_coverage.key_words``:
  dates normalized to ISO on both sides, number words to digits, stopwords dropped, plurals
  folded; a date key word matches a longer ISO date with the same prefix). The context is the
  text of the recall sections only, at most `--budget` characters, the same for every mode:
  - ``bm25``: raw messages ranked by Okapi BM25 (k1 1.2, b 0.75) over the English stems
    PostgreSQL gives (the same ``anima_search_vector``), the question as it is;
  - ``memories``: passive recall of memories alone, the whole budget;
  - ``episodic``: the episodic section alone (messages ranked by ``recall.ranking``);
  - ``summaries``: the summaries section of the lexical assembled context, alone;
  - ``assembled``: ``assemble_context`` (summaries, memories, messages in their sections),
    lexical (``ANIMA_EMBEDDER=none``); with ``--dense MEM:MSG[:CHARS]`` also with vectors
    (the RRF weights of each section's dense list and the characters kept for the nearest);
    with ``--neighbours`` each assembled mode also with entity neighbours (recall/neighbours.py)
    at these limits, a prefix of them (the rest the module's; bare: the module's).
  Every context is the recall sections as rendered, headers and newlines counted. Besides the
  hit, the answer-word share: the part of the answer's key words the context holds.
  Messages are rendered as the agent sees them (``- [date speaker] text``, a long one cut
  around the words asked about) in every mode.
* *store*: the share the store could answer at all: one active memory sourced from an
  evidence conversation holds all key words (``recall_at_k.Judge``, the coverage rule), or
  the evidence conversations' messages (with their dates) together hold them.
* MemoryBank has no gold answers. What is measurable: for the probing questions that name a
  day ("On May 4th, ..."), the share whose context holds an item (message or memory) of that
  day's conversation. The other probing questions are reported as not measurable.

``now`` for a question is the day after the anima's last message (LoCoMo questions are asked
after the dialogue). ``--share`` tries several memory shares of the budget (the split between
the memories and episodic sections) and prints the assembled figures for each.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import TextIO

import pandas as pd
import psycopg
from psycopg.rows import dict_row

from anima_pipeline.config import Settings, get_settings
from anima_pipeline.recall import neighbours
from anima_pipeline.recall.assemble import Packer, assemble_context, budgets_from
from anima_pipeline.recall.episodic import MessageSearch
from anima_pipeline.recall.passive import MemorySearch, rank_memories
from anima_pipeline.recall.query import plan_query
from anima_pipeline.recall.render import message_item
from anima_pipeline.recall.sections import Budgets
from anima_pipeline.store.memories import MemoryRepo
from benchmarks.light_sleep_coverage import (
    CATEGORIES,
    _has_all,
    _only_dates,
    _stems,
    _topic_words,
    key_words,
    memory_tokens,
    speaker_names,
)
from testkit.data import TZ, data_dir, group_of, read_jsonl

MODES = ("bm25", "memories", "episodic", "assembled")


class Judge:
    """The coverage benchmark's single-memory rule, per question, with cached memory tokens."""

    def __init__(self, names: dict[str, set[str]]) -> None:
        self.names = names
        self._tokens: dict[int, tuple[set[str], set[str]]] = {}

    def _memory(self, mem) -> tuple[set[str], set[str]]:
        cached = self._tokens.get(mem.id)
        if cached is None:
            tokens = memory_tokens(mem.content)
            cached = self._tokens[mem.id] = (tokens, _stems(tokens))
        return cached

    def covers(self, q: dict, memories) -> bool:
        words = key_words(str(q["answer"]))
        evidence = set(q["evidence_conversation_ids"])
        topic = (
            _topic_words(q["question"], self.names.get(q["anima_id"], set())) if _only_dates(words) else set()
        )
        need = 0 if not topic else 1 if len(topic) <= 2 else 2
        for mem in memories:
            if not evidence & set(mem.source_sessions):
                continue
            tokens, stems = self._memory(mem)
            if _has_all(words, tokens) and len(topic & stems) >= need:
                return True
        return False


class Bm25:
    """Okapi BM25 over one anima's messages, on the stems of ``anima_search_vector``."""

    def __init__(self, conn, anima_id: str, k1: float = 1.2, b: float = 0.75) -> None:
        rows = conn.execute(
            """SELECT m.id, m.conversation_id, m.role, m.speaker, m.content, m.created_at, c.title,
                      ARRAY(SELECT v.lexeme FROM unnest(m.fts) v) AS lexemes,
                      ARRAY(SELECT coalesce(array_length(v.positions, 1), 1) FROM unnest(m.fts) v) AS tfs
               FROM message m JOIN conversation c ON c.anima_id = m.anima_id AND c.id = m.conversation_id
               WHERE m.anima_id = %s AND m.role IN ('user', 'assistant') ORDER BY m.id""",
            (anima_id,),
        ).fetchall()
        self.rows, self.k1, self.b = rows, k1, b
        self.tf = [dict(zip(r["lexemes"], r["tfs"], strict=True)) for r in rows]
        self.len = [sum(r["tfs"]) for r in rows]
        self.avg = statistics.mean(self.len) if rows else 1.0
        self.df = Counter(t for tf in self.tf for t in tf)

    def rank(self, conn, question: str) -> list[dict]:
        terms = conn.execute(
            "SELECT tsvector_to_array(anima_search_vector(%s)) AS t", (question,)
        ).fetchone()["t"]
        n = len(self.rows)
        scores = []
        for i, tf in enumerate(self.tf):
            s = 0.0
            for t in terms:
                f = tf.get(t)
                if f:
                    idf = math.log(1 + (n - self.df[t] + 0.5) / (self.df[t] + 0.5))
                    s += (
                        idf
                        * f
                        * (self.k1 + 1)
                        / (f + self.k1 * (1 - self.b + self.b * self.len[i] / self.avg))
                    )
            if s > 0:
                scores.append((s, i))
        scores.sort(key=lambda x: (-x[0], x[1]))
        return [dict(self.rows[i], score=s) for s, i in scores[:80]]


def _budgets(budget: int, share: float) -> Budgets:
    """The configured budgets (ANIMA_RECALL_*), with this recall budget and memory share."""
    return budgets_from(get_settings()).model_copy(update={"recall": budget, "memory_share": share})


def _text(items) -> str:
    return "\n".join(i.line for i in items)


def _pack(name, ranked, words: list[str], budget: int, item_max: int):
    packer = Packer(name, ranked, words, item_max)
    packer.fill(budget)
    return packer.section.items


# the sections packed by their shares (the defaults); "no-repeats": a line repeating a placed
# one left out; "second+dense": the second stage on (recall/rerank.py)
LEXICAL = Settings(
    embedder={"kind": "none"}, recall={"drop_repeats": False, "second_stage": False, "neighbours": False}
)
DENSE = Settings(recall={"drop_repeats": False, "second_stage": False, "neighbours": False})
# --neighbours: the same with entity neighbours (recall/neighbours.py) at the limits of a spec
LEXICAL_NB, DENSE_NB = (
    s.model_copy(update={"recall": s.recall.model_copy(update={"neighbours": True})})
    for s in (LEXICAL, DENSE)
)
RANKED = {
    "no-repeats": Settings(embedder={"kind": "none"}, recall={"drop_repeats": True}),
    "no-repeats+dense": Settings(recall={"drop_repeats": True}),
    "second+dense": Settings(recall={"second_stage": True}),
}


def _mode(share: float, weights: tuple[float, ...] | None, spec: tuple[float, ...] | None = None) -> str:
    return (
        f"assembled@{share}"
        + ("+dense" + "/".join(f"{w:g}" for w in weights) if weights else "")
        + ("+nb" + "/".join(f"{v:g}" for v in spec) if spec else "")
    )


NEIGHBOUR_LIMITS = ("HITS", "NAMES", "ROWS", "LINK_CAP", "CHARS")  # a --neighbours spec's order


def _neighbours_spec(text: str) -> tuple[float, ...]:
    values = tuple(float(x) for x in text.split(":"))
    if not 1 <= len(values) <= len(NEIGHBOUR_LIMITS):
        raise SystemExit(f"--neighbours {text!r}: expected {':'.join(NEIGHBOUR_LIMITS)} (a prefix of it)")
    return values


def _set_neighbours(spec: tuple[float, ...]) -> None:
    """recall/neighbours.py's limits for the next contexts (as --dense sets the RRF weights)."""
    for name, value in zip(NEIGHBOUR_LIMITS, spec, strict=False):
        setattr(neighbours, name, int(value))


# --contexts FILE: one line per assemble_context call (anima, mode, budgets, question, the
# rendered context's sha256), so two commits can be shown to give the same contexts byte for byte
CONTEXTS: TextIO | None = None


def _context(conn, anima, question, budgets, now, settings: Settings, mode: str):
    ctx = assemble_context(conn, anima, question, budgets=budgets, now=now, settings=settings)
    if CONTEXTS is not None:
        digest = hashlib.sha256(ctx.rendered.encode()).hexdigest()
        line = [anima, mode, ctx.recall_mode, budgets.model_dump(), question, digest]
        CONTEXTS.write(json.dumps(line, ensure_ascii=False, sort_keys=True) + "\n")
    return ctx


def _assemble(
    conn,
    anima,
    question,
    budgets,
    now,
    weights: tuple[float, ...] | None,
    spec: tuple[float, ...] | None = None,
):
    """assemble_context lexical-only (weights None), or fusing each section's nearest items
    with these (memories, messages[, reserved characters]) dense weights; with `spec` (a
    --neighbours one) the entity neighbours joined too."""
    suffix = "+nb" + ":".join(f"{v:g}" for v in spec) if spec else ""
    if spec:
        _set_neighbours(spec)
    if weights is None:
        settings = LEXICAL_NB if spec else LEXICAL
        return _context(conn, anima, question, budgets, now, settings, "lexical" + suffix)
    MemorySearch.dense_weight, MessageSearch.dense_weight = weights[:2]
    if len(weights) > 2:
        budgets = budgets.model_copy(update={"dense": int(weights[2])})
    settings = DENSE_NB if spec else DENSE
    mode = "dense" + ":".join(f"{w:g}" for w in weights) + suffix
    return _context(conn, anima, question, budgets, now, settings, mode)


def _recalled(ctx) -> str:
    """The recall sections as rendered (headers and newlines included), resident set left out."""
    return "\n\n".join(s.render() for s in ctx.sections if s.name != "resident" and s.items)


def locomo(
    conn, questions, names, budget: int, shares: list[float], dense_weights, ranked_modes, specs=()
) -> dict:
    judge = Judge(names)
    out: dict = defaultdict(lambda: defaultdict(int))
    seconds: list[float] = []
    seconds_ranked: list[float] = []
    seconds_nb: list[float] = []
    item_max = Budgets().item_max
    by_anima: dict[str, list[dict]] = defaultdict(list)
    for q in questions:
        by_anima[q["anima_id"]].append(q)
    for anima, qs in sorted(by_anima.items()):
        bm25 = Bm25(conn, anima)
        memories = MemoryRepo(conn).active(anima)
        last = max(r["created_at"] for r in bm25.rows)
        now = (last + timedelta(days=1)).astimezone(TZ)
        evidence_text = _evidence_text(conn, anima)
        split = group_of(anima)
        for q in qs:
            key = (split, q["category"])
            answer = key_words(str(q["answer"]))
            out[key]["n"] += 1
            if judge.covers(q, memories) or _has_all(
                answer, memory_tokens(" ".join(evidence_text[c] for c in q["evidence_conversation_ids"]))
            ):
                out[key]["store"] += 1
            plan = plan_query(q["question"], now.date())
            words = plan.terms
            bm = [
                message_item(r, score=r["score"], why="bm25", tz=TZ) for r in bm25.rank(conn, q["question"])
            ]
            contexts = {"bm25": _text(_pack("episodic", bm, words, budget, item_max))}
            mem_ranked = rank_memories(conn, anima, plan, tz=TZ, limit=60)
            contexts["memories"] = _text(_pack("memories", mem_ranked, words, budget, item_max))
            only_msgs = _budgets(budget, 0.0).model_copy(update={"summaries": 0})
            ctx = _context(conn, anima, q["question"], only_msgs, now, LEXICAL, "episodic")
            contexts["episodic"] = _text(ctx.section("episodic").items)
            for share in shares:
                for weights in dense_weights:
                    for spec in (None, *specs):
                        started = time.perf_counter()
                        ctx = _assemble(
                            conn, anima, q["question"], _budgets(budget, share), now, weights, spec
                        )
                        (seconds_nb if spec else seconds).append(time.perf_counter() - started)
                        contexts[_mode(share, weights, spec)] = text = _recalled(ctx)
                        if weights is None and spec is None and share == shares[0]:  # the summaries section
                            contexts["summaries"] = _text(ctx.section("summaries").items)
                        assert len(text) <= budget, (q["qa_id"], len(text))  # headers and newlines counted
            for mode in ranked_modes:
                started = time.perf_counter()
                ctx = _context(
                    conn, anima, q["question"], _budgets(budget, shares[0]), now, RANKED[mode], mode
                )
                seconds_ranked.append(time.perf_counter() - started)
                contexts[mode] = text = _recalled(ctx)
                assert len(text) <= budget, (q["qa_id"], len(text))
            tokens_of = {mode: memory_tokens(text) for mode, text in contexts.items()}
            for mode, text in contexts.items():
                found = answer & tokens_of[mode]
                out[key][mode] += found == answer
                out[key][f"{mode}:share"] += len(found) / len(answer)
                out[key][f"{mode}:chars"] += len(text)
    return {"counts": out, "seconds": seconds, "seconds_ranked": seconds_ranked, "seconds_nb": seconds_nb}


def _evidence_text(conn, anima: str) -> dict[str, str]:
    rows = conn.execute(
        """SELECT conversation_id, string_agg(to_char(created_at AT TIME ZONE %s, 'YYYY-MM-DD') || ' '
                                              || content, ' ' ORDER BY id) AS t
           FROM message WHERE anima_id = %s GROUP BY 1""",
        (str(TZ), anima),
    ).fetchall()
    return defaultdict(str, {r["conversation_id"]: r["t"] for r in rows})


_DAY_EN = re.compile(
    r"\b(?:on\s+)?(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\s+(\d{1,2})(?:st|nd|rd|th)?\b", re.I
)
_DAY_ZH = re.compile(r"(\d{1,2})\s*月\s*(\d{1,2})\s*[日号]")
_MON = "jan feb mar apr may jun jul aug sep oct nov dec".split()


def memorybank(
    conn,
    data: Path,
    budget: int,
    share: float,
    dense: tuple[float, float] | None,
    spec: tuple[float, ...] | None = None,
) -> pd.DataFrame:
    rows = []
    for lang in ("en", "cn"):
        archive = read_jsonl(data / "memorybank" / f"memorybank_{lang}.archive.jsonl")
        anima_of = {r["speaker"].strip(): r["anima_id"] for r in archive if r["role"] == "user"}
        counts: dict[str, int] = defaultdict(int)
        for line in read_jsonl(data / "memorybank" / f"probing_questions_{lang}.jsonl"):
            for user, questions in line.items():
                anima = anima_of[user]
                for question in questions:
                    counts["questions"] += 1
                    day = _named_day(question)
                    if day is None:
                        continue
                    counts["dated"] += 1
                    now = datetime(2023, 5, 7, 21, tzinfo=TZ)
                    conv = f"{anima}:{day.isoformat()}"
                    runs: list = [("assembled", None), ("hybrid", dense), ("no-repeats", "no-repeats")]
                    if spec:
                        runs += [
                            ("assembled+nb", (None, spec)),
                            *([("hybrid+nb", (dense, spec))] if dense else []),
                        ]
                    runs += (
                        [("no-repeats+dense", "no-repeats+dense"), ("second+dense", "second+dense")]
                        if dense
                        else []
                    )
                    for mode, weights in runs:
                        if isinstance(weights, str):
                            ctx = _context(
                                conn, anima, question, _budgets(budget, share), now, RANKED[weights], mode
                            )
                        elif mode.endswith("+nb"):
                            ctx = _assemble(conn, anima, question, _budgets(budget, share), now, *weights)
                        else:
                            ctx = _assemble(conn, anima, question, _budgets(budget, share), now, weights)
                        items = [
                            i for s in ctx.sections if s.name in ("memories", "episodic") for i in s.items
                        ]
                        counts[mode] += any(i.conversation_id == conv or conv in i.sources for i in items)
                    bm = Bm25(conn, anima)
                    ranked = [
                        message_item(r, score=r["score"], why="", tz=TZ) for r in bm.rank(conn, question)
                    ]
                    packed = _pack("episodic", ranked, plan_query(question, now.date()).terms, budget, 400)
                    counts["bm25"] += any(i.conversation_id == conv for i in packed)
        rows.append(
            {
                "language": lang,
                "probing questions": counts["questions"],
                "naming a day": counts["dated"],
                "bm25: holds that day": _pct(counts["bm25"], counts["dated"]),
                "assembled: holds that day": _pct(counts["assembled"], counts["dated"]),
                **({"hybrid: holds that day": _pct(counts["hybrid"], counts["dated"])} if dense else {}),
                **(
                    {
                        f"{mode}: holds that day": _pct(counts[mode], counts["dated"])
                        for mode in ("assembled+nb", *(["hybrid+nb"] if dense else []))
                    }
                    if spec
                    else {}
                ),
                "no-repeats: holds that day": _pct(counts["no-repeats"], counts["dated"]),
                **(
                    {"no-repeats+dense: holds that day": _pct(counts["no-repeats+dense"], counts["dated"])}
                    if dense
                    else {}
                ),
                **(
                    {"second+dense: holds that day": _pct(counts["second+dense"], counts["dated"])}
                    if dense
                    else {}
                ),
                "answer hit": "not measurable (no gold answers)",
            }
        )
    return pd.DataFrame(rows).set_index("language")


def _named_day(question: str) -> date | None:
    if m := _DAY_EN.search(question):
        return date(2023, _MON.index(m.group(1).lower()[:3]) + 1, int(m.group(2)))
    if m := _DAY_ZH.search(question):
        return date(2023, int(m.group(1)), int(m.group(2)))
    return None


def _pct(a: int, b: int) -> str:
    return f"{a / b:.1%}" if b else "-"


def locomo_table(counts, modes: list[str], store: bool = True) -> pd.DataFrame:
    rows = {}
    for label, cats in [*((CATEGORIES[c], (c,)) for c in CATEGORIES), ("all", tuple(CATEGORIES))]:
        row = {}
        for split in ("tuned", "unseen"):
            n = sum(counts[(split, c)]["n"] for c in cats)
            for mode in [*modes, *(["store"] if store else [])]:
                row[(split, mode)] = sum(counts[(split, c)][mode] for c in cats) / n if n else float("nan")
            row[(split, "n")] = n
        rows[label] = row
    df = pd.DataFrame.from_dict(rows, orient="index")
    df.columns = pd.MultiIndex.from_tuples(df.columns)
    return df


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from-store", metavar="DATABASE_URL", required=True, help="store to recall from")
    parser.add_argument("--data", type=Path, default=data_dir(), help="the shared data directory")
    parser.add_argument("--budget", type=int, default=2000, help="characters of the recall sections")
    parser.add_argument("--share", type=float, nargs="+", default=None, help="memory shares to try")
    parser.add_argument(
        "--dense",
        nargs="*",
        default=None,
        metavar="MEM:MSG[:CHARS]",
        help="dense weights (memories:messages, and the reserve in characters) to try beside"
        " lexical-only; bare --dense: the defaults",
    )
    parser.add_argument(
        "--neighbours",
        nargs="*",
        default=None,
        metavar=":".join(NEIGHBOUR_LIMITS),
        help="entity neighbours (recall/neighbours.py) at these limits (a prefix of them; the rest"
        " the module's) beside every assembled mode without them; bare --neighbours: the module's",
    )
    parser.add_argument("--only", choices=("tuned", "unseen"), help="one split only (tuning runs)")
    parser.add_argument(
        "--contexts",
        type=Path,
        metavar="FILE",
        help="write each context's sha256 there, one JSON line a call with its question (compare two"
        " commits with cmp; the file quotes the data: keep it outside the repository)",
    )
    args = parser.parse_args(argv)
    qa = args.data / "locomo" / "dev.qa.jsonl"
    archive = args.data / "locomo" / "dev.archive.jsonl"
    if not qa.exists() or not archive.exists():
        print(f"LoCoMo dev data not found under {args.data}; nothing to measure.", file=sys.stderr)
        return 2
    shares = args.share or [get_settings().recall.memory_share]
    questions = [q for q in read_jsonl(qa) if q["category"] in CATEGORIES and key_words(str(q["answer"]))]
    if args.only:
        questions = [q for q in questions if group_of(q["anima_id"]) == args.only]
    dense_weights: list = [None]
    if args.dense is not None:
        pairs = args.dense or [
            f"{MemorySearch.dense_weight}:{MessageSearch.dense_weight}"
        ]  # reserve: settings
        dense_weights += [tuple(float(x) for x in p.split(":")) for p in pairs]
    specs: list[tuple[float, ...]] = []
    if args.neighbours is not None:
        defaults = tuple(float(getattr(neighbours, name)) for name in NEIGHBOUR_LIMITS)
        for text in args.neighbours or [":".join(f"{v:g}" for v in defaults)]:
            given = _neighbours_spec(text)
            specs.append(given + defaults[len(given) :])
    names = speaker_names(read_jsonl(archive))
    global CONTEXTS
    CONTEXTS = args.contexts.open("w", encoding="utf-8") if args.contexts else None
    started = time.perf_counter()
    with psycopg.connect(args.from_store, row_factory=dict_row, autocommit=True) as conn:
        conn.execute("SET default_transaction_read_only = on")
        ranked_modes = [
            "no-repeats",
            *(["no-repeats+dense", "second+dense"] if args.dense is not None else []),
        ]
        result = locomo(conn, questions, names, args.budget, shares, dense_weights, ranked_modes, specs)
        modes = [
            "bm25",
            "memories",
            "episodic",
            "summaries",
            *(_mode(s, w, spec) for s in shares for w in dense_weights for spec in (None, *specs)),
            *ranked_modes,
        ]
        pd.set_option("display.width", 200)
        pd.set_option("display.max_columns", 30)
        table = locomo_table(result["counts"], modes)
        print(f"LoCoMo, share of questions whose context ({args.budget} chars) holds every answer key word")
        print(table.to_string(float_format=lambda v: f"{v:.3f}"))
        print(
            f"LoCoMo, answer-word share: the part of the answer's key words in the context ({args.budget} chars)"
        )
        shares_table = locomo_table(result["counts"], [f"{m}:share" for m in modes], store=False)
        print(shares_table.to_string(float_format=lambda v: f"{v:.3f}"))
        for split in ("tuned", "unseen"):
            for mode in modes:
                total = sum(result["counts"][(split, c)]["n"] for c in CATEGORIES)
                chars = sum(result["counts"][(split, c)][f"{mode}:chars"] for c in CATEGORIES)
                if total:
                    print(f"  {split:6} {mode:16} avg chars {chars / total:7.0f}")
        best = f"assembled@{get_settings().recall.memory_share}"
        best = best if best in modes else modes[-1]
        gain = table.loc["all", ("unseen", best)] - table.loc["all", ("unseen", "bm25")]
        print(f"unseen: {best} - bm25 = {gain:+.3f}")
        for share in shares:
            for weights in dense_weights[1:]:
                lexical, hybrid = f"assembled@{share}:share", f"{_mode(share, weights)}:share"
                diffs = [
                    f"{split} {shares_table.loc['all', (split, hybrid)] - shares_table.loc['all', (split, lexical)]:+.3f}"
                    for split in ("tuned", "unseen")
                ]
                print(f"answer-word share, {_mode(share, weights)} - lexical: {', '.join(diffs)}")
        for share in shares:
            for weights in dense_weights:
                for spec in specs:
                    before, after = _mode(share, weights), _mode(share, weights, spec)
                    diffs = [
                        f"{split} share {shares_table.loc['all', (split, after + ':share')] - shares_table.loc['all', (split, before + ':share')]:+.3f}"
                        f" hit {table.loc['all', (split, after)] - table.loc['all', (split, before)]:+.3f}"
                        f" multi-hop hit {table.loc['multi-hop', (split, after)] - table.loc['multi-hop', (split, before)]:+.3f}"
                        for split in ("tuned", "unseen")
                        if (split, before) in table.columns
                    ]
                    print(f"{after} - {before}: {', '.join(diffs)}")
        for mode in ranked_modes:
            before = _mode(shares[0], dense_weights[-1] if mode != "no-repeats" else None)
            diffs = [
                f"{split} share {shares_table.loc['all', (split, mode + ':share')] - shares_table.loc['all', (split, before + ':share')]:+.3f}"
                f" hit {table.loc['all', (split, mode)] - table.loc['all', (split, before)]:+.3f}"
                for split in ("tuned", "unseen")
            ]
            print(f"{mode} - {before}: {', '.join(diffs)}")
        for label, key in (
            ("first stage, packed by shares", "seconds"),
            ("second stage", "seconds_ranked"),
            ("with entity neighbours", "seconds_nb"),
        ):
            secs = sorted(result[key])
            if not secs:
                continue
            print(
                f"assemble_context latency ({label}): median {statistics.median(secs) * 1e3:.1f} ms,"
                f" p95 {secs[int(0.95 * (len(secs) - 1))] * 1e3:.1f} ms over {len(secs)} calls"
            )
        print()
        if args.only == "tuned":  # a tuning run: the unseen MemoryBank stays unseen
            print("MemoryBank: left out (--only tuned)")
        else:
            print("MemoryBank probing questions (unseen; no gold answers)")
            spec = specs[-1] if specs else None
            print(memorybank(conn, args.data, args.budget, shares[-1], dense_weights[-1], spec).to_string())
    if CONTEXTS is not None:
        CONTEXTS.close()
    print(f"elapsed {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
