"""One scripted Claude night over a large store, shared by benchmarks/claude_cache.py and the
tests (test_night_cost.py): the store it starts from (a day of synthetic conversations
and N synthetic memories) and a scripted model for the fake Messages API."""

from __future__ import annotations

import json
import random
from datetime import date, datetime
from typing import Any

from anima_pipeline.store.archive import ImportStats, import_records, parse_lines
from anima_pipeline.store.db import Database
from anima_pipeline.store.events import Audit
from anima_pipeline.store.memories import MemoryRepo
from testkit.data import conversation_lines
from testkit.fake_messages_api import reply, sleep_autopilot, tool_use

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
    """A scripted model: light sleep records two facts in its one answer (as its task asks);
    deep sleep's round 1 optionally deprecates one memory; the steps that must write get the
    autopilot's write."""
    state = {"deprecated": False}

    def answer(body: dict[str, Any]) -> dict[str, Any] | None:
        tools = {t["name"] for t in body.get("tools") or []}
        turns = len(body["messages"])
        prompt = json.dumps(body["messages"][0]["content"], ensure_ascii=False)
        task = body["messages"][0]["content"][-1]["text"]  # the step's instruction (message 3)
        if "create_semantic_memory" in tools and "Record the durable facts" in task:  # stage 1
            if turns == 1:
                return reply(
                    *(
                        tool_use(
                            "create_semantic_memory",
                            {
                                "type": "experience",
                                "content": f"Sam had lunch with a friend ({n}).",
                                "source_sessions": [f"{ANIMA}:{DAY}-0"],
                            },
                        )
                        for n in (1, 2)
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
