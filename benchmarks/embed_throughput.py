"""Embedding throughput, load time and peak memory of the local encoder (all-MiniLM-L6-v2 in numpy).

Run:  .venv/bin/python -m benchmarks.embed_throughput [--texts 512] [--baseline DIR] [--rounds 1]
          [--threads N]

Synthetic sentences of three lengths (short chat lines, a memory, a long message), each set
embedded once after a warm-up; prints texts/s per length, their token count, the arithmetic
rate against a matrix product of the encoder's shape on every core (one BLAS thread each)
timed between them, the model's load
time (the first load of a fresh ANIMA_HOME, which unpacks the model into its cache, and a
later one), and the peak resident memory (ru_maxrss) before loading, after loading and after
embedding. Every measurement runs in a new process under a temporary ANIMA_HOME.
`--baseline DIR` runs the same in another checkout of the package (e.g. `git worktree add
/tmp/enc_before <commit>`) in the same rounds, taking turns, and prints now / before per
figure: a before/after in one run. `--threads N` runs this checkout's buckets N side by side, each
product on one BLAS thread, as a pool worker's share of the cores does (`embed.local.share_cores`,
which gives N when N divides the cores; the default is `embed.local.THREADS`, one per core).
One run, no assertion: the figures depend on the machine's load (printed)."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORDS = (
    "the a my we she he they garden train river morning coffee friend sister project meeting"
    " weekend dinner walked talked planned finished started visited cooked painted read wrote"
    " quietly again finally yesterday tomorrow because after before with near under over"
).split()
SETS = (("chat line, 8 words", 8), ("memory, 20 words", 20), ("message, 80 words", 80))

# One measurement in a new process: the package from argv[1] ("" = this checkout), then prints
# one JSON line. Only `load_local(None)` and `.embed(texts)` are used: every version has them.
_WORKER = """
import json, os, random, resource, sys, time
if sys.argv[1]:
    sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f)]
    sys.path.insert(0, sys.argv[1])
texts_n, threads = int(sys.argv[2]), int(sys.argv[3])
sets = json.loads(sys.argv[4]); words = json.loads(sys.argv[5])
def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
import numpy
before = peak()
from anima_pipeline.embed import local
if threads:
    local.share_cores(max(1, (os.cpu_count() or 1) // threads))
started = time.perf_counter()
embedder = local.load_local(None)
out = {"load_s": time.perf_counter() - started, "before_mib": before, "loaded_mib": peak(), "sets": {}}
rng = random.Random(19)
for label, n_words in sets if texts_n else ():
    texts = [" ".join(rng.choice(words) for _ in range(n_words)).capitalize() + "." for _ in range(texts_n)]
    embedder.embed(texts[:32])
    started = time.perf_counter()
    embedder.embed(texts)
    seconds = time.perf_counter() - started
    counts = [len(e.ids) for e in embedder.tokenizer.encode_batch(texts)]
    tokens = sum(counts) / len(texts)
    # the encoder's multiply-adds for these texts at their own lengths (6 layers of width 384,
    # feed-forward 1536): QKV, scores and mix, output, feed-forward; 2 FLOPs each
    flops = sum(6 * 2 * (n * 384 * 384 * 4 + 2 * n * n * 384 + 2 * n * 384 * 1536) for n in counts)
    out["sets"][label] = {
        "rate": len(texts) / seconds, "seconds": seconds, "tokens": tokens, "gflops": flops / seconds / 1e9,
    }
started = time.perf_counter()
local.load_local(None)
out["again_s"] = time.perf_counter() - started
out["after_mib"] = peak()
print("RESULT " + json.dumps(out))
"""


def _measure(src: Path | None, texts: int, threads: int, env: dict[str, str]) -> dict:
    cmd = [
        sys.executable,
        "-c",
        _WORKER,
        str(src or ""),
        str(texts),
        str(threads),
        json.dumps(SETS),
        json.dumps(WORDS),
    ]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    line = done.stdout.rpartition("RESULT ")[2]
    if done.returncode != 0 or not line:
        raise SystemExit(f"{src or 'this checkout'} failed ({done.returncode}): {done.stderr.strip()[-600:]}")
    return json.loads(line)


def _ceiling(seconds: float = 0.5) -> float:
    """GFLOP/s of the encoder's largest product, (256 x 384) @ (384 x 1536) in float32, run the
    way the encoder runs its buckets: one thread per core, each product on one BLAS thread
    (embed/local.py; OpenBLAS's own threads wait on each other under load). What this machine
    gives such products right now."""
    from concurrent.futures import ThreadPoolExecutor

    import numpy
    from threadpoolctl import threadpool_limits

    a, b = numpy.ones((256, 384), numpy.float32), numpy.ones((384, 1536), numpy.float32)
    cores = os.cpu_count() or 1

    def spin(_: int) -> int:
        reps, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds:
            a @ b
            reps += 1
        return reps

    with threadpool_limits(1, user_api="blas"):
        a @ b
        started = time.perf_counter()
        with ThreadPoolExecutor(cores) as pool:
            reps = sum(pool.map(spin, range(cores)))
        elapsed = time.perf_counter() - started
    return reps * 2 * 256 * 384 * 1536 / elapsed / 1e9


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=512, help="texts per length")
    parser.add_argument("--baseline", type=Path, help="another checkout's root, measured in the same rounds")
    parser.add_argument("--rounds", type=int, default=1, help="measurements of each checkout (median)")
    parser.add_argument(
        "--threads", type=int, default=0, help="encoder threads of this checkout (buckets side by side)"
    )
    args = parser.parse_args(argv)
    sources: dict[str, Path | None] = {"now": None}
    if args.baseline is not None:
        sources = {"before": args.baseline.resolve(), **sources}
    runs: dict[str, list[dict]] = {label: [] for label in sources}
    first: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="embed_throughput_") as tmp:
        env = {**os.environ, "ANIMA_HOME": tmp}
        for label, src in sources.items():  # "now": the unpack into the fresh cache
            first[label] = _measure(src, 0, 0, env)["load_s"]
        ceilings = [_ceiling()]
        for _ in range(args.rounds):
            for label, src in sources.items():
                runs[label].append(_measure(src, args.texts, args.threads if label == "now" else 0, env))
                ceilings.append(_ceiling())

    def med(label: str, *keys: str) -> float:
        values = []
        for run in runs[label]:
            v = run
            for k in keys:
                v = v[k]
            values.append(float(v))
        return statistics.median(values)

    cols = list(sources)
    print(f"{'':28}" + "".join(f"{c:>16}" for c in cols) + ("   now / before" if len(cols) == 2 else ""))

    def row(name: str, values: list[float], fmt: str, ratio: bool = True) -> None:
        text = "".join(f"{format(v, fmt):>16}" for v in values)
        if len(values) == 2 and ratio and values[0]:
            text += f"   {values[1] / values[0]:6.2f}x"
        print(f"{name:28}{text}")

    for label, _ in SETS:
        tokens = med(cols[-1], "sets", label, "tokens")
        row(f"{label} ({tokens:.0f} tok)", [med(c, "sets", label, "rate") for c in cols], ".1f")
    ceiling = statistics.median(ceilings)
    for label, _ in SETS:
        row(f"  GFLOP/s, {label[: label.index(',')]}", [med(c, "sets", label, "gflops") for c in cols], ".1f")
        row("    of the machine's product", [med(c, "sets", label, "gflops") / ceiling for c in cols], ".0%")
    row("first load, s", [first[c] for c in cols], ".3f")
    row("load, s", [med(c, "load_s") for c in cols], ".3f")
    row("again, s", [med(c, "again_s") for c in cols], ".3f")
    for key, name in (("before_mib", "peak MiB before loading"), ("loaded_mib", "peak MiB loaded")):
        row(name, [med(c, key) for c in cols], ".0f")
    row("peak MiB after embedding", [med(c, "after_mib") for c in cols], ".0f")
    print(
        f"texts/s per length ({args.texts} texts each, after a warm-up), medians of {args.rounds} round(s);"
        " first load: before = from the wheel's zip, now = the unpack into a fresh cache; load: a new"
        " process's (now: from the cache); again: a second load in the same process; GFLOP/s: the"
        " encoder's arithmetic at the texts' own lengths over the seconds, against the machine's product:"
        " a (256 x 384) @ (384 x 1536) float32 product on one thread per core, timed between the measurements"
        f" (median {statistics.median(ceilings):.1f} GFLOP/s; a share near 100 % leaves little for a"
        " faster encoder)"
    )
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
