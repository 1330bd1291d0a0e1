"""What one active anima-night costs on the Claude path, per step, measured with the fake
Messages API's token accounting (the model's minimum cacheable prefix, caches per model) and
the project's price table, through the real pipeline and the real SDK; with the estimate
`anima sleep --estimate` makes from the store's sizes beside it.

    .venv/bin/python -m benchmarks.night_cost [--memories 200 400 550] [--database-url URL]
        [--splits default all-main deep-main]

For each store size and each mode (sync, batch) it prints, per step: the model, calls, input,
cache-write, cache-read and output tokens, the measured dollars and the estimated dollars;
then the night's total against the targets (at most $0.04 sync, $0.02 batch, at 400
memories), and the batch night again with each batch taking `--turnaround` seconds for the
fake's cache (entries live 5 minutes from their last use), where the turns lose their cache. `--splits` also prices other model splits (docs/cost.md: which steps on which
model), synchronous, at each size. The anima is the one of benchmarks/claude_cache.py: a day
of four short conversations, light sleep records two facts over two turns, every other step
answers at once (the steps that must write write once). Without --database-url the store is
an embedded PostgreSQL under a temporary ANIMA_HOME (a URL must name an empty scratch database).
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path

from pydantic import SecretStr

from anima_pipeline.config import Settings
from anima_pipeline.core.steps import SMALL_MODEL_STEPS, STEP_ORDER
from anima_pipeline.llm.anthropic.batches import BatchCollector
from anima_pipeline.llm.anthropic.engine import AnthropicEngine
from anima_pipeline.llm.budget import Budget
from anima_pipeline.llm.contract import Usage
from anima_pipeline.night.estimate import estimate_night
from anima_pipeline.night.runner import run_days
from anima_pipeline.store.db import Database, open_database
from benchmarks.claude_cache import _clear
from testkit.claude_night import DAY, KEY, responder, seed
from testkit.fake_messages_api import FakeMessagesAPI

TARGETS = {"sync": 0.04, "batch": 0.02}  # dollars per active anima-night at 400 memories
SPLITS: dict[str, dict[str, str]] = {
    "default": {},  # core/steps.py's SMALL_MODEL_STEPS on the small model, the rest on the main one
    "all-main": dict.fromkeys(STEP_ORDER, "main"),
    # rounds 2-4, the dream and the self refresh on the main model: they read round 1's cache
    "deep-main": dict.fromkeys(
        ("semantic_memory/split", "semantic_memory/merged", "semantic_memory/pins_reviewed")
        + ("dreams/journal", "self_blocks/refreshed"),
        "main",
    ),
    "all-small": dict.fromkeys(STEP_ORDER, "small"),
}


def one_night(
    db: Database, settings: Settings, memories: int, turnaround_s: float = 0.0
) -> tuple[dict[str, Usage], Usage, dict[str, Usage]]:
    """(measured usage per step, the estimate's total, the estimate per step) of one night on
    a fresh store; `turnaround_s`: how much the fake's cache ages between two batches."""
    _clear(db)
    seed(db, memories)
    estimate = estimate_night(db, settings, DAY, "full")
    collector = BatchCollector(window_s=0.05, poll_s=0.01) if settings.llm.mode == "batch" else None
    with FakeMessagesAPI(
        min_cache_tokens=None, responder=responder(False), batch_turnaround_s=turnaround_s
    ) as fake:
        engine = AnthropicEngine(
            settings.model,
            SecretStr(KEY),
            base_url=fake.url,
            budget=Budget(),
            settings=settings,
            timeout=30,
            collector=collector,
        )
        try:
            results = run_days(db, settings, [DAY], mode="full", force=True, engine=engine)
        finally:
            engine.close()
    measured: dict[str, Usage] = {}
    for r in results:
        if r.usage.calls:
            measured[r.step] = measured.get(r.step, Usage()) + r.usage
    estimated = {s.step: s.usage for s in estimate.steps}
    return measured, sum(estimated.values(), Usage()), estimated


def report(settings: Settings, memories: int, mode: str, measured, estimated) -> tuple[float, float]:
    print(f"\n== {memories} memories, {mode} (main {settings.model}, small {settings.small_model_for()})")
    head = f"{'step':34} {'model':18} {'calls':>5} {'input':>7} {'c-write':>8} {'c-read':>8} {'output':>6}"
    print(f"{head} {'$ measured':>11} {'$ estimate':>11}")
    for step in STEP_ORDER:
        u, e = measured.get(step), estimated.get(step)
        if u is None and e is None:
            continue
        u = u or Usage()
        print(
            f"{step:34} {settings.step_model(step):18} {u.calls:5d} {u.input_tokens:7d} "
            f"{u.cache_write_tokens:8d} {u.cache_read_tokens:8d} {u.output_tokens:6d} "
            f"{u.cost_usd:11.5f} {(e.cost_usd if e else 0):11.5f}"
        )
    total = sum(measured.values(), Usage())
    est = sum(estimated.values(), Usage())
    off = (est.cost_usd - total.cost_usd) / total.cost_usd if total.cost_usd else 0.0
    print(
        f"{'the night':53} {total.calls:5d} {total.input_tokens:7d} {total.cache_write_tokens:8d} "
        f"{total.cache_read_tokens:8d} {total.output_tokens:6d} {total.cost_usd:11.5f} {est.cost_usd:11.5f}"
    )
    target = TARGETS[mode]
    verdict = "met" if total.cost_usd <= target else "NOT met"
    note = f" (target <= ${target:.2f} at 400 memories: {verdict})" if memories == 400 else ""
    print(f"measured ${total.cost_usd:.4f}, estimate ${est.cost_usd:.4f} ({off:+.1%}){note}")
    return total.cost_usd, est.cost_usd


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, nargs="+", default=[200, 400, 550])
    parser.add_argument("--database-url", default=None, help="an empty scratch database (default: embedded)")
    parser.add_argument(
        "--splits", nargs="*", default=["all-main", "deep-main", "all-small"], choices=list(SPLITS)
    )
    parser.add_argument(
        "--turnaround", type=float, default=600.0, help="seconds a batch takes, for the slow-batch row"
    )
    args = parser.parse_args(argv)
    logging.getLogger("anima_pipeline").setLevel(logging.ERROR)  # the quiet steps' "declined" notes
    rows, split_rows = [], []
    with tempfile.TemporaryDirectory() as home:
        base = Settings(home=Path(home), database_url=args.database_url, engine="anthropic")
        db = open_database(base)
        try:
            for n in args.memories:
                for mode in ("sync", "batch"):
                    settings = base.model_copy(update={"llm": base.llm.model_copy(update={"mode": mode})})
                    measured, _, estimated = one_night(db, settings, n)
                    rows.append((n, mode, *report(settings, n, mode, measured, estimated)))
                # a batch that takes longer than the cache's 5 minutes: the turns lose it
                settings = base.model_copy(update={"llm": base.llm.model_copy(update={"mode": "batch"})})
                measured, est, _ = one_night(db, settings, n, turnaround_s=args.turnaround)
                slow = sum(measured.values(), Usage()).cost_usd
                print(
                    f"batch, {args.turnaround:.0f} s a batch: measured ${slow:.4f} (estimate, cache kept: ${est.cost_usd:.4f})"
                )
                rows.append((n, f"batch {args.turnaround:.0f}s", slow, est.cost_usd))
                for split in args.splits:
                    settings = base.model_copy(
                        update={"llm": base.llm.model_copy(update={"step_models": SPLITS[split]})}
                    )
                    measured, est, _ = one_night(db, settings, n)
                    split_rows.append((n, split, sum(measured.values(), Usage()).cost_usd, est.cost_usd))
        finally:
            db.close()
    print("\nmemories  mode        measured $  estimate $  estimate/measured")
    for n, mode, cost, est in rows:
        print(f"{n:8d}  {mode:10} {cost:11.4f} {est:11.4f} {est / cost if cost else 0:18.3f}")
    if split_rows:
        print(f"\nmodel splits, sync (default: {', '.join(SMALL_MODEL_STEPS)} on the small model)")
        print("memories  split       measured $  estimate $")
        for n, split, cost, est in [(n, "default", c, e) for n, m, c, e in rows if m == "sync"] + split_rows:
            print(f"{n:8d}  {split:10} {cost:11.4f} {est:11.4f}")


if __name__ == "__main__":
    main()
