"""How offline light sleep's heuristics scale with the length of one message.

Run:  .venv/bin/python benchmarks/light_sleep_scaling.py [--sizes 80000,160000,320000,1000000]

One synthetic message (first-person English sentences from a small fixed vocabulary, so
consecutive sizes hold the same kind of text) of each size goes through what the light-sleep
stages run on a day: `extract_facts` (stage 1, with its dedup) and `detect_anchors` (stage 2).
Printed: seconds per size, and the ratio of each time to the previous one next to the ratio
of the sizes (near-linear work doubles when the size doubles; quadratic work quadruples).
Measured in one run; nothing is asserted.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from anima_pipeline.night.steps.light.anchors import detect_anchors  # noqa: E402
from anima_pipeline.night.steps.light.facts import extract_facts  # noqa: E402
from anima_pipeline.night.steps.light.records import Utterance  # noqa: E402

SENTENCES = (
    "I moved to Porto last spring and I work as a nurse at the children's hospital.",
    "My sister Ana visits every other weekend and we cook cataplana together.",
    "Yesterday I finally finished the watercolour of the old bridge!",
    "I love hiking in the mountains with my dog Max.",
    "Tomorrow I start evening classes in Japanese.",
    "We went to a jazz concert on Friday and it was wonderful.",
    "I can't stand crowded trains in the morning.",
    "My grandmother taught me to bake sourdough when I was ten.",
)


def message(chars: int, seed: int = 7) -> str:
    rng = random.Random(seed)
    parts, size = [], 0
    while size < chars:
        s = rng.choice(SENTENCES)
        parts.append(s)
        size += len(s) + 1
    return " ".join(parts)[:chars]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="80000,160000,320000,1000000", help="message sizes in characters")
    args = parser.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",")]
    print(f"{'chars':>10} {'facts':>6} {'anchors':>8} {'seconds':>8} {'time ratio':>11} {'size ratio':>11}")
    previous: tuple[int, float] | None = None
    for n in sizes:
        utt = [
            Utterance(
                conversation_id="c1",
                message_id="m1",
                role="user",
                speaker="Sam",
                text=message(n),
                created_at=datetime(2026, 1, 1, 12, tzinfo=UTC),
            )
        ]
        t0 = time.perf_counter()
        facts = extract_facts(utt)
        anchors = detect_anchors(utt)
        elapsed = time.perf_counter() - t0
        ratios = (
            f"{elapsed / previous[1]:>11.2f} {n / previous[0]:>11.2f}" if previous and previous[1] > 0 else ""
        )
        print(f"{n:>10,} {len(facts):>6} {len(anchors):>8} {elapsed:>8.2f} {ratios}")
        previous = (n, elapsed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
