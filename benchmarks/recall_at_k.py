"""Recall@k on LoCoMo: does chat-time recall put an answering memory into the context?

Run:  .venv/bin/python -m benchmarks.recall_at_k --from-store DATABASE_URL [--data DIR] [--k 5 10 20]

What is measured (one run, ratios printed, nothing asserted):

* For every question of category 1-4 (the same set as ``light_sleep_coverage.py``) the
  question text is given to ``recall(conn, anima_id, question, limit=k)`` exactly as the
  agent would ask it, with the default character budget. The returned context is the
  resident set plus the recalled memories.
* A question is *recalled at k* when one single memory of that context covers it, with
  the coverage benchmark's own rule, imported rather than copied: the memory's source
  conversations meet the question's ``evidence_conversation_ids``, its key words
  (dates normalized to ISO, number words to digits, stopwords dropped, plurals folded)
  contain every key word of the gold answer, and a date-only answer also needs one or
  two topic words of the question.
* The *oracle* is that rule applied to every active memory of the anima: the share of
  questions the store can answer at all, the ceiling any recall can reach.
* Also printed: the average characters returned (resident + recalled contents) and the
  latency of one ``recall`` call (mean, median, p95, wall clock, same connection).

The store is opened read-only (``default_transaction_read_only``); nothing is written.
``--recall module:function`` measures another implementation with the same signature
(e.g. a saved copy of the previous version) for before/after figures.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

from benchmarks.data import locomo_dir, read_jsonl
from benchmarks.light_sleep_coverage import (
    CATEGORIES,
    _has_all,
    _only_dates,
    _share,
    _stems,
    _topic_words,
    key_words,
    memory_tokens,
    speaker_names,
)


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


def _load_recall(spec: str):
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name or "recall")


def run(url: str, questions: list[dict], names: dict[str, set[str]], ks: list[int], recall_fn) -> dict:
    import psycopg
    from psycopg.rows import dict_row

    from anima_pipeline.store.memories import MemoryRepo

    judge = Judge(names)
    out: dict = {"total": defaultdict(int), "oracle": defaultdict(int)}
    for k in ks:
        out[k] = {"hit": defaultdict(int), "chars": 0, "seconds": [], "recalled": 0}
    with psycopg.connect(url, row_factory=dict_row, autocommit=True) as conn:
        conn.execute("SET default_transaction_read_only = on")
        store = {a: MemoryRepo(conn).active(a) for a in {q["anima_id"] for q in questions}}
        out["memories"] = sum(len(v) for v in store.values())
        for q in questions:
            cat = q["category"]
            out["total"][cat] += 1
            if judge.covers(q, store[q["anima_id"]]):
                out["oracle"][cat] += 1
            for k in ks:
                started = time.perf_counter()
                with conn.transaction():
                    res = recall_fn(conn, q["anima_id"], q["question"], limit=k)
                out[k]["seconds"].append(time.perf_counter() - started)
                context = [*res.resident, *(r.memory for r in res.recalled)]
                out[k]["chars"] += sum(len(m.content) for m in context)
                out[k]["recalled"] += len(res.recalled)
                if judge.covers(q, context):
                    out[k]["hit"][cat] += 1
    return out


def report(out: dict, ks: list[int], spec: str) -> None:
    total, oracle = out["total"], out["oracle"]
    n = sum(total.values())
    n_oracle = sum(oracle.values())
    print(f"recall function         : {spec}")
    print(f"questions considered    : {n} (categories 1-4)   active memories: {out['memories']}")
    print(
        f"oracle (store coverage) : {_share(n_oracle, n)}"
        + "".join(f"  c{c} {_share(oracle[c], total[c])}" for c in sorted(total))
    )
    for k in ks:
        hit, secs = out[k]["hit"], sorted(out[k]["seconds"])
        n_hit = sum(hit.values())
        print(
            f"recall@{k:<2}               : {_share(n_hit, n)}   of oracle {_share(n_hit, n_oracle)}"
            + "".join(f"  c{c} {hit[c] / total[c]:.1%}" for c in sorted(total))
        )
        print(
            f"  avg chars returned    : {out[k]['chars'] / n:7.0f}   avg recalled {out[k]['recalled'] / n:4.1f}"
            f"   latency mean {statistics.mean(secs) * 1e3:.1f} ms, median {statistics.median(secs) * 1e3:.1f} ms,"
            f" p95 {secs[int(0.95 * (len(secs) - 1))] * 1e3:.1f} ms"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from-store", metavar="DATABASE_URL", required=True, help="store to recall from")
    parser.add_argument(
        "--data", type=Path, default=locomo_dir(), help="directory with dev.archive.jsonl and dev.qa.jsonl"
    )
    parser.add_argument("--k", type=int, nargs="+", default=[5, 10, 20], help="recall limits to measure")
    parser.add_argument(
        "--recall", default="anima_pipeline.recall.context:recall", help="module:function to measure"
    )
    args = parser.parse_args(argv)
    archive, qa = args.data / "dev.archive.jsonl", args.data / "dev.qa.jsonl"
    if not archive.exists() or not qa.exists():
        print(f"LoCoMo dev data not found under {args.data}; nothing to measure.", file=sys.stderr)
        return 2
    questions = [q for q in read_jsonl(qa) if q["category"] in CATEGORIES and key_words(str(q["answer"]))]
    names = speaker_names(read_jsonl(archive))
    recall_fn = _load_recall(args.recall)
    started = time.perf_counter()
    try:
        out = run(args.from_store, questions, names, args.k, recall_fn)
    except Exception as exc:  # one clear line; the URL may hold a password, so it is not echoed
        print(f"--from-store: cannot recall from the store ({type(exc).__name__}: {exc})", file=sys.stderr)
        return 2
    report(out, args.k, args.recall)
    print(f"elapsed                 : {time.perf_counter() - started:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
