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
import random
import tempfile
from datetime import date, datetime
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from anima_pipeline.config import Settings
from anima_pipeline.llm.anthropic_engine import AnthropicEngine
from anima_pipeline.llm.budget import Budget
from anima_pipeline.sleep.deep_sleep import DEEP_STEPS
from anima_pipeline.sleep.night import StepResult
from anima_pipeline.sleep.runner import run_days
from anima_pipeline.store.archive import ImportStats, import_records, parse_lines
from anima_pipeline.store.db import Database, open_database
from anima_pipeline.store.events import Audit
from anima_pipeline.store.memories import MemoryRepo
from anima_pipeline_tests.fake_messages_api import FakeMessagesAPI, reply, sleep_autopilot, tool_use
from benchmarks.data import conversation_lines

DAY = date(2026, 11, 16)  # a Monday: deep sleep runs in full mode
ANIMA = "bench"
KEY = "sk-ant-bench-local"
PEOPLE = ["Mei", "Jun", "Sara", "Tom", "Ravi", "Ines", "小林", "王芳"]
PLACES = ["Qingdao", "Lisbon", "Chengdu", "Oslo", "Kyoto", "the West Lake", "Hangzhou", "Porto"]
THINGS = ["oolong tea", "trail running", "jazz piano", "sourdough", "chess", "hotpot", "birdwatching"]


def synthetic_facts(n: int, seed: int = 11) -> list[str]:
    rnd = random.Random(seed)
    shapes = [
        "{p} moved to {c} in {y} and works as a nurse there.",
        "{p} has practised {t} every weekend since {y}.",
        "Sam met {p} in {c} during the spring of {y}.",
        "Sam prefers {t} over most other hobbies.",
        "{p}的女儿{y}年出生在{c}。",
        "Sam and {p} plan a trip to {c} next year.",
    ]
    return [
        rnd.choice(shapes).format(
            p=rnd.choice(PEOPLE), c=rnd.choice(PLACES), t=rnd.choice(THINGS), y=2000 + i % 25
        )
        + f" (note {i})"
        for i in range(n)
    ]


def archive_lines(day: date) -> list[str]:
    lines = []
    for c in range(4):
        conv = f"{ANIMA}:{day}-{c}"
        t = datetime(day.year, day.month, day.day, 9 + 3 * c, 0)
        talk = [
            (
                "user",
                f"Today I had lunch with {PEOPLE[c]} in {PLACES[c]}; we talked about {THINGS[c]} for ages.",
            ),
            ("assistant", f"That sounds like a good day. How is {PEOPLE[c]} doing these days?"),
            ("user", f"{PEOPLE[c]} is fine, busy with a new job. I want to try {THINGS[c + 1]} next month."),
            ("assistant", "A good plan. Tell me how it goes."),
        ]
        lines += conversation_lines(ANIMA, conv, t, talk, speakers=("Sam", "Echo"))
    return lines


def seed(db: Database, memories: int) -> None:
    with db.transaction() as conn:
        audit = Audit(conn=conn, anima_id=ANIMA, run_id="bench-seed", step="seed")
        import_records(conn, parse_lines(archive_lines(DAY), "bench"), audit, ImportStats())
        repo = MemoryRepo(conn, audit)
        before = datetime(2026, 10, 1, 12, 0).astimezone()
        for i, content in enumerate(synthetic_facts(memories)):
            repo.create(
                ANIMA,
                {
                    "type": "world",
                    "content": content,
                    "source_sessions": [f"{ANIMA}:old-{i // 5}"],
                    "observed_at": before,
                },
                now=before,
            )


def responder(change_in_round_1: bool):
    """A scripted model: light sleep records two facts over two turns; deep sleep's round 1
    optionally deprecates one memory; the steps that must write get the autopilot's write."""
    state = {"deprecated": False}

    def answer(body: dict[str, Any]) -> dict[str, Any] | None:
        tools = {t["name"] for t in body.get("tools") or []}
        turns = len(body["messages"])
        prompt = json.dumps(body["messages"][0]["content"], ensure_ascii=False)
        task = body["messages"][0]["content"][-1]["text"]  # the step's instruction (message 3)
        if "create_semantic_memory" in tools and "Record the durable facts" in task:  # stage 1
            if turns in (1, 3):
                return reply(
                    tool_use(
                        "create_semantic_memory",
                        {
                            "type": "experience",
                            "content": f"Sam had lunch with a friend ({turns}).",
                            "source_sessions": [f"{ANIMA}:{DAY}-0"],
                        },
                    )
                )
            return None
        if "merge_semantic_memories" in tools and "this is round 1" in prompt and change_in_round_1:
            if turns == 1 and not state["deprecated"]:
                state["deprecated"] = True
                return reply(
                    tool_use("deprecate_semantic_memory", {"id": _some_id(prompt), "reason": "expired"})
                )
            return None
        return sleep_autopilot(body)

    return answer


def _some_id(prompt: str) -> str:
    import re

    m = re.search(r'\\"id\\":\\"(f-\d+)\\"', prompt)
    return m.group(1) if m else "f-1"


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
    deep = [r for r in results if r.step in DEEP_STEPS]
    first = next(r for r in deep if r.step == DEEP_STEPS[0])
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
                llm_step_models=dict.fromkeys(DEEP_STEPS, "main"),
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
