"""Calibrate the offline token estimate of the working context against a real Claude tokenizer.

Run:  .venv/bin/python -m benchmarks.token_ratio --tokenizer tokenizer.json [--data DIR]

Anthropic publishes no tokenizer for current models (they count with `messages.count_tokens`);
the last one it shipped is the `tokenizer.json` inside the anthropic SDK up to 0.38
(``pip download anthropic==0.34.2 --no-deps``, then unzip ``anthropic/tokenizer.json``), read
with the `tokenizers` package (``pip install tokenizers``; neither is a dependency of this
project). Over the message texts of LoCoMo dev, MemoryBank en and cn and the repository's
sample week, it prints per set: characters, CJK characters, tokens, characters per token, the
least-squares fit tokens = a × other + b × CJK, and the ratio estimate/real of the configured
`RatioCounter` (ANIMA_CHARS_PER_TOKEN, ANIMA_TOKENS_PER_CJK_CHAR) per set: above 1 over-counts
(a budget packed by it holds), below 1 under-counts.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from anima_pipeline.config import get_settings
from anima_pipeline.recall.tokens import CJK, RatioCounter
from testkit.data import data_dir, read_jsonl

SAMPLE = Path(__file__).resolve().parents[1] / "anima_pipeline" / "sample" / "week.archive.jsonl"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokenizer", type=Path, required=True, help="a tokenizer.json (see the module doc)")
    parser.add_argument("--data", type=Path, default=data_dir(), help="the shared data directory")
    args = parser.parse_args(argv)
    try:
        from tokenizers import Tokenizer
    except ImportError:
        print("needs the tokenizers package: pip install tokenizers", file=sys.stderr)
        return 2
    tok = Tokenizer.from_file(str(args.tokenizer))
    sets = {
        "locomo dev": args.data / "locomo" / "dev.archive.jsonl",
        "memorybank en": args.data / "memorybank" / "memorybank_en.archive.jsonl",
        "memorybank cn": args.data / "memorybank" / "memorybank_cn.archive.jsonl",
        "sample week": SAMPLE,
    }
    settings = get_settings()
    counter = RatioCounter(settings.chars_per_token, settings.tokens_per_cjk_char)
    rows, xs, ys = [], [], []
    for name, path in sets.items():
        if not path.exists():
            print(f"{name}: {path} not found, left out", file=sys.stderr)
            continue
        texts = [r["content"] for r in read_jsonl(path)]
        real = [len(tok.encode(t).ids) for t in texts]
        cjk = [len(CJK.findall(t)) for t in texts]
        chars = sum(len(t) for t in texts)
        estimate = sum(counter.count(t) for t in texts)
        rows.append((name, len(texts), chars, sum(cjk), sum(real), chars / sum(real), estimate / sum(real)))
        xs += [(len(t) - c, c) for t, c in zip(texts, cjk, strict=True)]
        ys += real
    print(f"{'set':14} {'texts':>6} {'chars':>8} {'cjk':>7} {'tokens':>7} {'chars/tok':>9} {'est/real':>8}")
    for name, n, chars, cjk, real, per, ratio in rows:
        print(f"{name:14} {n:6} {chars:8} {cjk:7} {real:7} {per:9.3f} {ratio:8.3f}")
    # least squares without an intercept, two unknowns: the normal equations by hand
    saa = sum(a * a for a, _ in xs)
    sbb = sum(b * b for _, b in xs)
    sab = sum(a * b for a, b in xs)
    say = sum(a * y for (a, _), y in zip(xs, ys, strict=True))
    sby = sum(b * y for (_, b), y in zip(xs, ys, strict=True))
    det = saa * sbb - sab * sab
    a = (say * sbb - sby * sab) / det
    b = (saa * sby - sab * say) / det
    print(f"fit: tokens = {a:.4f} x other + {b:.4f} x CJK  ({1 / a:.2f} other characters a token)")
    print(
        f"configured: {settings.chars_per_token} other characters a token, {settings.tokens_per_cjk_char} a CJK character"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
