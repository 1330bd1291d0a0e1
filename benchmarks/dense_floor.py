"""Where active search's similarity floor for neighbours by meaning lies (recall/assemble.py
DENSE_SEARCH_FLOOR): the cosine of a question and the message that answers it, against the
cosine of a question and a message of another dialogue (unrelated by construction).

Run:  .venv/bin/python -m benchmarks.dense_floor [--questions 150] [--floor 0.3]
      (data: $ANIMA_DATA_DIR/locomo, by default ../shared/data/locomo next to the repository)

The local encoder (all-MiniLM-L6-v2) embeds LoCoMo dev questions (categories 1-4), their
evidence messages and, per question, two messages of the other dialogues. Prints the
percentiles of both distributions, those of the evidence that shares no content word with
its question (the neighbours only meaning finds, the ones a floor could cut), and, for the
floor given, the share of each kept. One run, no assertion."""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics

from testkit.data import data_dir

WORD = re.compile(r"[a-z0-9']+")
STOP = frozenset(
    "a an the and or but of to in on at for with from by is are was were be been do did does what when "
    "where who whom which why how that this these those it its he she they them his her their i you we "
    "my your our me us has have had not no so as if than then there here about into over after before".split()
)


def content_words(text: str) -> set[str]:
    return {w for w in WORD.findall(text.lower()) if w not in STOP and len(w) > 2}


def percentiles(values: list[float]) -> str:
    q = statistics.quantiles(values, n=100, method="inclusive")
    return "  ".join(f"p{p} {q[p - 1]:.3f}" for p in (5, 10, 25, 50, 75, 90, 95, 99))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=150)
    parser.add_argument("--floor", type=float, action="append", default=None)
    args = parser.parse_args(argv)
    import numpy as np

    from anima_pipeline.embed.local import load_local

    folder = data_dir() / "locomo"
    messages = {
        m["message_id"]: m for m in map(json.loads, (folder / "dev.archive.jsonl").read_text().splitlines())
    }
    qa = [
        q
        for q in map(json.loads, (folder / "dev.qa.jsonl").read_text().splitlines())
        if q["category"] in (1, 2, 3, 4) and q["evidence_message_ids"]
    ]
    rng = random.Random(7)
    rng.shuffle(qa)
    qa = qa[: args.questions]
    by_anima: dict[str, list[str]] = {}
    for mid, m in messages.items():
        by_anima.setdefault(m["anima_id"], []).append(mid)
    pairs: list[tuple[int, str, str]] = []  # (question index, message id, "true" | "unrelated")
    for i, q in enumerate(qa):
        pairs += [(i, mid, "true") for mid in q["evidence_message_ids"] if mid in messages]
        others = [mid for a, ids in by_anima.items() if a != q["anima_id"] for mid in ids]
        pairs += [(i, mid, "unrelated") for mid in rng.sample(others, 2)]
    texts = sorted({messages[mid]["content"] for _, mid, _ in pairs})
    embedder = load_local(None)
    qv = np.asarray(embedder.embed([q["question"] for q in qa]))
    mv = dict(zip(texts, np.asarray(embedder.embed(texts)), strict=True))

    def cos(i: int, mid: str) -> float:
        a, b = qv[i], mv[messages[mid]["content"]]
        return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))

    sims: dict[str, list[float]] = {"true": [], "true, no shared word": [], "unrelated": []}
    for i, mid, kind in pairs:
        s = cos(i, mid)
        sims[kind].append(s)
        if kind == "true" and not content_words(qa[i]["question"]) & content_words(messages[mid]["content"]):
            sims["true, no shared word"].append(s)
    print(f"{embedder.model_id}: {len(qa)} LoCoMo dev questions, {len(pairs)} pairs")
    for kind, values in sims.items():
        print(f"  {kind:22} n={len(values):4}  {percentiles(values)}")
    for floor in args.floor or [0.2, 0.25, 0.3, 0.35, 0.4]:
        kept = {k: sum(v >= floor for v in vals) / len(vals) for k, vals in sims.items()}
        print(
            f"  floor {floor:.2f}: keeps {kept['true']:.1%} of the evidence, "
            f"{kept['true, no shared word']:.1%} of the evidence sharing no word, "
            f"{kept['unrelated']:.1%} of the unrelated"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
