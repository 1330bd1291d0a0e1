"""What the prompt cache saves on the Claude path: one night of one anima with a large store,
through the real pipeline and the real SDK against the fake Messages API, which bills the
cache the way the API does (the model's minimum cacheable prefix, writes 1.25x, reads 0.1x).

    .venv/bin/python -m benchmarks.claude_cache [--memories 400] [--database-url URL]

Prints, per step, the billed-equivalent input (input + 1.25 x cache writes + 0.1 x cache
reads) against one pass of the step's input (the full prompt of each conversation's first
call), and for deep sleep's four rounds together the same sum against one pass of round 1's
prompt (message 1 and what precedes it): the floor with four one-call rounds is
1.25 + 3 x 0.1 = 1.55. Two scenarios: every round answers at once ("quiet"), and round 1
deprecates one memory (one more turn). Without --database-url the store is an embedded
PostgreSQL under a temporary ANIMA_HOME (a URL must name an empty, scratch database).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from pydantic import SecretStr

from anima_pipeline.config import Settings
from anima_pipeline.core.steps import DEEP_SLEEP
from anima_pipeline.llm.anthropic.engine import AnthropicEngine
from anima_pipeline.llm.budget import Budget
from anima_pipeline.night.frame import StepResult
from anima_pipeline.night.runner import run_days
from anima_pipeline.store.db import Database, open_database
from testkit.claude_night import DAY, KEY, responder, seed
from testkit.fake_messages_api import FakeMessagesAPI


def one_night(settings: Settings, db: Database, change_in_round_1: bool) -> tuple[list[StepResult], int]:
    """The night's results, and the prefix round 1 wrote to the cache (tools, system and
    message 1: what every round shares)."""
    with FakeMessagesAPI(min_cache_tokens=None, responder=responder(change_in_round_1)) as fake:
        engine = AnthropicEngine(
            settings.model, SecretStr(KEY), base_url=fake.url, budget=Budget(), settings=settings, timeout=30
        )
        try:
            results = run_days(db, settings, [DAY], mode="full", force=True, engine=engine)
        finally:
            engine.close()
        pairs = list(zip(fake.messages, fake.responses, strict=True))
    round_1 = next(
        a
        for b, a in pairs
        if len(b["messages"]) == 1 and "this is round 1" in json.dumps(b["messages"][0], ensure_ascii=False)
    )
    return results, round_1["usage"]["cache_creation_input_tokens"]


def report(night: tuple[list[StepResult], int], label: str) -> float:
    results, msg1 = night
    print(f"\n== {label}")
    print(f"{'step':38} {'calls':>5} {'one pass':>9} {'billed-eq':>10} {'ratio':>6} {'read':>8} {'write':>8}")
    for r in results:
        u = r.usage
        if not u.calls:
            continue
        print(
            f"{r.step:38} {u.calls:5d} {u.one_pass_tokens:9d} {u.billed_equiv_tokens:10.0f} "
            f"{u.billed_equiv_ratio:6.2f} {u.cache_read_tokens:8d} {u.cache_write_tokens:8d}"
        )
    deep = [r for r in results if r.step in DEEP_SLEEP]
    first = next(r for r in deep if r.step == DEEP_SLEEP[0])
    total = sum(r.usage.billed_equiv_tokens for r in deep)
    ratio = total / msg1
    whole = total / first.usage.one_pass_tokens
    cost = sum(r.usage.cost_usd for r in results)
    print(
        f"deep sleep, 4 rounds: billed-equivalent {total:.0f} tokens / one pass of message 1 {msg1} = "
        f"{ratio:.3f} (floor 1.55, target <= 1.6); per pass of round 1's whole prompt "
        f"({first.usage.one_pass_tokens}): {whole:.3f}; night cost ${cost:.4f}"
    )
    return ratio


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, nargs="+", default=[200, 400, 550])
    parser.add_argument("--database-url", default=None, help="an empty scratch database (default: embedded)")
    args = parser.parse_args(argv)
    rows = []
    for n in args.memories:
        with tempfile.TemporaryDirectory() as home:
            # the four rounds on one model: this measures the cache inside one model (the
            # default split puts rounds 2-4 on the small model: benchmarks/night_cost.py)
            settings = Settings(
                home=Path(home),
                database_url=args.database_url,
                engine="anthropic",
                llm={"step_models": dict.fromkeys(DEEP_SLEEP, "main")},
            )
            db = open_database(settings)
            try:
                _clear(db)
                seed(db, n)
                quiet = report(one_night(settings, db, False), f"{n} memories, quiet rounds (one call each)")
                busy = report(one_night(settings, db, True), f"{n} memories, round 1 deprecates one memory")
            finally:
                db.close()
        rows.append((n, quiet, busy))
    print("\nmemories  quiet  round-1-change   (deep sleep billed-equivalent / one pass of message 1)")
    for n, quiet, busy in rows:
        print(f"{n:8d}  {quiet:5.3f}  {busy:5.3f}")


def _clear(db: Database) -> None:
    """A scratch store: the benchmark's anima starts empty at each size (CASCADE: and every
    table that refers to these, as later migrations add them)."""
    with db.transaction() as conn:
        conn.execute(
            """TRUNCATE conversation, message, semantic_memory, memory_event, emotional_anchor,
                   autobiographical_memory, self_block, self_block_history, temporal_summary,
                   memory_reference, dream_journal, sleep_state CASCADE"""
        )


if __name__ == "__main__":
    main()
