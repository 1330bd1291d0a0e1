"""Embedding throughput and peak memory of the local encoder (all-MiniLM-L6-v2 in numpy).

Run:  .venv/bin/python -m benchmarks.embed_throughput [--texts 512]

Synthetic sentences of three lengths (short chat lines, a memory, a long message), each set
embedded once after a warm-up; prints texts/s per length, the model's load time, and the
process's peak resident memory (ru_maxrss) before loading, after loading and after embedding.
One run, no assertion: the figures depend on the machine's load (printed)."""

from __future__ import annotations

import argparse
import os
import random
import resource
import time

WORDS = (
    "the a my we she he they garden train river morning coffee friend sister project meeting"
    " weekend dinner walked talked planned finished started visited cooked painted read wrote"
    " quietly again finally yesterday tomorrow because after before with near under over"
).split()


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def sentences(n: int, words: int, rng: random.Random) -> list[str]:
    return [" ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "." for _ in range(n)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=512, help="texts per length")
    args = parser.parse_args(argv)
    from anima_pipeline.embed.local import load_local

    before = peak_mib()
    started = time.perf_counter()
    embedder = load_local(None)
    print(
        f"model {embedder.model_id}, {embedder.dimension} dimensions, loaded in {time.perf_counter() - started:.1f} s"
    )
    loaded = peak_mib()
    rng = random.Random(19)
    for label, words in (("chat line, 8 words", 8), ("memory, 20 words", 20), ("message, 80 words", 80)):
        texts = sentences(args.texts, words, rng)
        embedder.embed(texts[:32])  # warm-up
        started = time.perf_counter()
        embedder.embed(texts)
        seconds = time.perf_counter() - started
        print(f"  {label:20} {len(texts) / seconds:7.1f} texts/s ({len(texts)} in {seconds:.1f} s)")
    print(
        f"peak resident memory: {before:.0f} MiB before loading, {loaded:.0f} MiB loaded,"
        f" {peak_mib():.0f} MiB after embedding (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
