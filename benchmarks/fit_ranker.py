"""Fit the second stage of recall (`anima_pipeline/recall/rerank.py`) on the tuned dialogues.

Run:  .venv/bin/python -m benchmarks.fit_ranker --from-store DATABASE_URL [--data DIR]
      [--alpha 0 0.25 0.5] [--l2 1.0] [--write]

The store is recall_at_k's (the dev dialogues imported and slept offline); it is opened
read-only. Only the TUNED dialogues (conv-26, conv-30; testkit/data.py) are read: the unseen
ones and MemoryBank are for `benchmarks.recall_at_k` to report, never to fit on.

For every tuned question the first stage runs as a context's does (`recall.assemble.first_stage`,
with vectors when the store has them, the default budgets, "now" the day after the dialogue's
last message) and every candidate of its lists gets its features (`recall.rerank.candidates`).
The label of a candidate is the share of the answer's key words its line holds
(``light_sleep_coverage.key_words`` / ``memory_tokens``, recall_at_k's judge). The model is
linear over the standardised features, fit pairwise by default (numpy, Newton steps, an L2
penalty): a logistic regression on the differences of two candidates of one question whose
labels differ, each question weighing the same whatever its number of candidates; packing
only uses the order within a question, and a pointwise fit (``--model logistic``) spends its
weights on what differs between questions. On the tuned dialogues the pairwise fit packed
0.746 of the answer words, the pointwise one 0.729-0.738 (docs/benchmarks.md). Then, for each packing exponent `--alpha`,
the contexts are packed again (`recall.assemble.place_ranked`, no database) and the tuned
answer-word share and hit printed; the best alpha is kept. With `--write` the weights go to
``anima_pipeline/recall/ranker_weights.json`` (package data), with the fit's figures in
``meta``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import psycopg
from psycopg.rows import dict_row

from anima_pipeline.config import Settings
from anima_pipeline.recall import rerank
from anima_pipeline.recall.assemble import FirstStage, budgets_from, first_stage, place_ranked
from benchmarks.light_sleep_coverage import CATEGORIES, key_words, memory_tokens
from testkit.data import TZ, data_dir, group_of, read_jsonl

WEIGHTS_PATH = Path(__file__).resolve().parents[1] / "anima_pipeline" / "recall" / rerank.WEIGHTS_FILE
SETTINGS = Settings()  # vectors when the store has them, as a context is assembled by default


def collect(conn, questions: list[dict]) -> list[tuple[dict, FirstStage, list[rerank.Candidate]]]:
    """Per tuned question its first stage and its candidates with their features."""
    out = []
    last = {
        r["anima_id"]: r["t"]
        for r in conn.execute("SELECT anima_id, max(created_at) AS t FROM message GROUP BY 1").fetchall()
    }
    for q in questions:
        now = (last[q["anima_id"]] + timedelta(days=1)).astimezone(TZ)
        with conn.transaction():
            found = first_stage(
                conn, q["anima_id"], q["question"], settings=SETTINGS, session_id=None, now=now
            )
        cands = rerank.candidates(
            found.plan,
            q["question"],
            now.date(),
            found.memory_search,
            found.memories,
            found.message_search,
            found.messages,
            found.summaries,
        )
        q["_today"] = now.date()
        out.append((q, found, cands))
    return out


def labels(q: dict, cands: list[rerank.Candidate], rule: str) -> np.ndarray:
    """Per candidate: 1 when its line holds every key word of the answer ("all"), or the share
    of them it holds ("share"), or 1 for all and half the share for some ("mixed")."""
    answer = key_words(str(q["answer"]))
    share = np.array([len(answer & memory_tokens(c.item.line)) / len(answer) for c in cands])
    if rule == "share":
        return share
    whole = (share == 1.0).astype(float)
    return whole if rule == "all" else np.maximum(whole, share / 2)


def standardise(xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean, scale = xs.mean(axis=0), xs.std(axis=0)
    return mean, np.where(scale > 1e-9, scale, 1.0)


def pairs(rows, rule: str, mean: np.ndarray, scale: np.ndarray, cap: int, seed: int):
    """Per question, the differences of standardised features of the pairs (i, j) whose label
    says i holds more of the answer than j (at most `cap` pairs a question, drawn), weighted by
    the difference of their labels, each question weighing the same."""
    rng = np.random.default_rng(seed)
    diffs, weights = [], []
    for q, _, cands in rows:
        y = labels(q, cands, rule)
        z = (np.array([c.x for c in cands]) - mean) / scale
        i, j = np.nonzero(y[:, None] > y[None, :])
        if len(i) == 0:
            continue
        if len(i) > cap:
            keep = rng.choice(len(i), cap, replace=False)
            i, j = i[keep], j[keep]
        diffs.append(z[i] - z[j])
        weights.append((y[i] - y[j]) / len(i))
    d, w = np.vstack(diffs), np.concatenate(weights)
    return d, w * len(w) / w.sum()


def fit(a: np.ndarray, ys: np.ndarray, ws: np.ndarray, l2: float, bias: bool) -> np.ndarray:
    """Weighted logistic regression of `ys` on the rows of `a`, Newton steps, L2 on the
    weights (and an intercept, last, when `bias`)."""
    if bias:
        a = np.hstack([a, np.ones((len(a), 1))])
    beta = np.zeros(a.shape[1])
    penalty = np.full(a.shape[1], l2)
    if bias:
        penalty[-1] = 0.0
    for _ in range(50):
        p = 1 / (1 + np.exp(-np.clip(a @ beta, -30, 30)))
        grad = a.T @ (ws * (p - ys)) + penalty * beta
        hess = (a * (ws * p * (1 - p))[:, None]).T @ a + np.diag(penalty + 1e-9)
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.max(np.abs(step)) < 1e-7:
            break
    return beta


# More of the question's words, names or period never counts against a line: these weights are
# kept at 0 or above (a feature whose fitted weight comes out negative is held at 0 and the
# others refit), so that the tuned dialogues' quirks (every LoCoMo question names a speaker, and
# most lines do) cannot teach the opposite.
MONOTONE = ("idf_cov", "word_cov", "all_words", "name_cov", "speaker_named", "in_period", "idf_rel")


# The features fit by default; the others keep a weight of 0. Fit on one tuned dialogue and
# packed on the other, the whole set did worse than this one (conv-26 -> conv-30 0.784 against
# 0.796, conv-30 -> conv-26 0.706 against 0.707): the kind, type, length and age of a line
# differ between dialogues more than what the question asks of it.
FIT = (
    "lex_rank",
    "lex_score",
    "lex_log_rank",
    "dense_rank",
    "dense_log_rank",
    "cos",
    "idf_cov",
    "idf_rel",
    "speaker_named",
    "dated_when",
    "in_period",
    "period_dist",
    "is_summary",
)


def monotone_fit(d: np.ndarray, w: np.ndarray, l2: float, names: tuple[str, ...] = FIT) -> np.ndarray:
    """The pairwise fit of the features `names` (the others 0), the MONOTONE weights held at 0
    or above (active set)."""
    free = np.array([name in names for name in rerank.FEATURES])
    while True:
        beta = np.zeros(d.shape[1])
        beta[free] = fit(d[:, free], np.ones(len(d)), w, l2, bias=False)
        negative = [k for k, name in enumerate(rerank.FEATURES) if name in MONOTONE and beta[k] < 0]
        if not negative:
            return beta
        free[negative] = False


def evaluate(rows, weights: rerank.Weights) -> dict[str, float]:
    """The tuned answer-word share and hit of the contexts packed with `weights`."""
    budgets = budgets_from(SETTINGS)
    share = hit = 0.0
    per: dict[str, list[float]] = {}
    for q, found, cands in rows:
        sections = place_ranked(found, q["question"], q["_today"], budgets, [], weights=weights, cands=cands)
        text = "\n\n".join(s.render() for s in sections if s.items)
        answer = key_words(str(q["answer"]))
        got = len(answer & memory_tokens(text)) / len(answer)
        share += got
        hit += got == 1.0
        per.setdefault(CATEGORIES[q["category"]], []).append(got)
    n = len(rows)
    return {
        "share": share / n,
        "hit": hit / n,
        **{f"share:{c}": sum(v) / len(v) for c, v in sorted(per.items())},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--from-store", metavar="DATABASE_URL", required=True)
    parser.add_argument("--data", type=Path, default=data_dir())
    parser.add_argument("--alpha", type=float, nargs="+", default=[0.0])
    parser.add_argument("--model", choices=("pairwise", "logistic"), default="pairwise")
    parser.add_argument("--features", nargs="+", default=list(FIT), choices=rerank.FEATURES, metavar="NAME")
    parser.add_argument("--pairs", type=int, default=3000, help="pairs drawn per question (pairwise)")
    parser.add_argument("--l2", type=float, default=1.0, help="L2 penalty on the standardised weights")
    parser.add_argument(
        "--label", choices=("all", "share", "mixed"), default="share", help="what a candidate is fit to"
    )
    parser.add_argument("--write", action="store_true", help=f"write {WEIGHTS_PATH.name} (package data)")
    args = parser.parse_args(argv)
    qa = args.data / "locomo" / "dev.qa.jsonl"
    if not qa.exists():
        print(f"LoCoMo dev data not found under {args.data}; nothing to fit.", file=sys.stderr)
        return 2
    questions = [
        q
        for q in read_jsonl(qa)
        if q["category"] in CATEGORIES and key_words(str(q["answer"])) and group_of(q["anima_id"]) == "tuned"
    ]
    started = time.perf_counter()
    with psycopg.connect(args.from_store, row_factory=dict_row, autocommit=True) as conn:
        conn.execute("SET default_transaction_read_only = on")
        rows = collect(conn, questions)
    xs = np.array([c.x for _, _, cands in rows for c in cands], dtype=float)
    ys = np.concatenate([labels(q, cands, args.label) for q, _, cands in rows])
    mean, scale = standardise(xs)
    if args.model == "pairwise":  # the order within a question is what packing uses
        d, w = pairs(rows, args.label, mean, scale, args.pairs, seed=1)
        weight, bias = monotone_fit(d, w, args.l2, tuple(args.features)), 0.0
    else:
        ws = np.concatenate([np.full(len(cands), 1.0 / max(1, len(cands))) for _, _, cands in rows])
        beta = fit((xs - mean) / scale, ys, ws * len(ws) / ws.sum(), args.l2, bias=True)
        weight, bias = beta[:-1], float(beta[-1])
    print(
        f"{len(rows)} tuned questions, {len(xs)} candidates, {int((ys == 1).sum())} holding every key word;"
        f" {args.model}, labels {args.label}"
    )
    for name, w in sorted(zip(rerank.FEATURES, weight, strict=True), key=lambda p: -abs(p[1])):
        print(f"  {name:16} {w:+.3f}")
    best: tuple[float, rerank.Weights, dict] | None = None
    for alpha in args.alpha:
        weights = rerank.Weights(rerank.FEATURES, tuple(mean), tuple(scale), tuple(weight), bias, alpha, {})
        figures = evaluate(rows, weights)
        print(f"alpha {alpha:g}: " + ", ".join(f"{k} {v:.3f}" for k, v in figures.items()))
        if best is None or figures["share"] > best[0]:
            best = (figures["share"], weights, figures)
    assert best is not None
    _, weights, figures = best
    meta = {
        "fit_on": "LoCoMo dev, tuned dialogues only (testkit/data.py TUNED)",
        "questions": len(rows),
        "candidates": len(xs),
        "model": args.model,
        "fit": list(args.features) if args.model == "pairwise" else list(rerank.FEATURES),
        "l2": args.l2,
        "label": args.label,
        "tuned_share": round(figures["share"], 4),
        "tuned_hit": round(figures["hit"], 4),
        "script": "benchmarks/fit_ranker.py",
    }
    weights = rerank.Weights(
        weights.features, weights.mean, weights.scale, weights.weight, weights.bias, weights.alpha, meta
    )
    print(f"best alpha {weights.alpha:g}; {time.perf_counter() - started:.0f} s")
    if args.write:
        WEIGHTS_PATH.write_text(json.dumps(weights.to_json(), indent=1) + "\n", encoding="utf-8")
        print(f"wrote {WEIGHTS_PATH}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
