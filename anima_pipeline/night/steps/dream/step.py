"""Dream (REM synthesis): today's memories against the
long-term store, into one dream_journal entry per (anima, day).

The journal holds what consolidation by sorting cannot: links between memories that share
a person, pet, place or a rare word (creative connections), entities that keep coming back
(aha moments), confidence raised where today re-confirmed a memory, concrete next-session
actions from today's plans, and bank page suggestions for topics that recurred 3+ times.

Offline this is a deterministic baseline of exactly those cues (plan.py); with an LLM, the
request is deep sleep's prefix (the store as message 1, read from the prompt cache;
night/prefix.py), the rounds' changes, today's memories and the task (prompt.py). A store
that did not change that day is not dreamt over again: the step is skipped and says so
(`skipped_unchanged`). Either way the entry is one write_dream_entry call: the executor
applies the confidence updates (audited, op 'confidence') and upserts the entry. This module
gathers the inputs and runs the step.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date

from anima_pipeline.core.steps import MEMORY_STEPS, StepKey
from anima_pipeline.llm.contract import ToolCall
from anima_pipeline.night.frame import Night, StepOutcome, StepResult, plan_of, run_step, unchanged
from anima_pipeline.night.prefix import deep_prefix, deep_request, store_changed
from anima_pipeline.night.steps.declaration import StepDef
from anima_pipeline.night.steps.dream.plan import DayMemories, synthesize
from anima_pipeline.night.steps.dream.preview import CHANGES, preview
from anima_pipeline.night.steps.dream.prompt import DREAM
from anima_pipeline.night.steps.dream.tools import TOOLS
from anima_pipeline.night.steps.framing import input_chars
from anima_pipeline.night.steps.light.day_input import render_memories
from anima_pipeline.store.db import Connection, Database
from anima_pipeline.store.events import Audit, semantic_writes_and_confidence
from anima_pipeline.store.layers import DreamRepo
from anima_pipeline.store.memories import MemoryRepo
from anima_pipeline.tools.executor import ToolExecutor
from anima_pipeline.tools.scope import Scope

STEP = StepKey.DREAM
_ENTRY_KEYS = ("creative_connections", "aha_moments", "next_session_actions", "bank_suggestions")


# ---- the day's input ------------------------------------------------------------------


def day_memories(conn: Connection, anima_id: str, day: date) -> DayMemories:
    events = semantic_writes_and_confidence(conn, anima_id, day, list(MEMORY_STEPS), STEP)
    created: set[int] = set()
    touched: list[int] = []
    reconfirmed: dict[int, str] = {}
    merged: dict[int, list[str]] = defaultdict(list)
    base: dict[int, float] = {}
    for e in events:
        mid = int(e["memory_id"])
        if e["step"] == STEP:
            base.setdefault(mid, float(e["before"]["confidence"]))
        elif e["op"] == "create":
            created.add(mid)
            touched.append(mid)
        elif e["op"] == "update":
            touched.append(mid)
            if mid not in created:
                reconfirmed.setdefault(mid, "re-confirmed today (updated)")
        elif e["op"] == "merge" and (e["after"] or {}).get("superseded_by"):
            merged[int(e["after"]["superseded_by"])].append(f"f-{mid}")
    for target, sources in merged.items():
        reconfirmed[target] = f"re-confirmed today (merged from {', '.join(sources)})"
    active = {
        m.id: m for m in MemoryRepo(conn).get_many(list(dict.fromkeys(touched))) if m.status == "active"
    }
    return DayMemories(
        today=[active[i] for i in sorted(active)],
        reconfirmed={i: why for i, why in reconfirmed.items() if i in active},
        dream_base=base,
    )


# ---- the step -------------------------------------------------------------------------


def dream(db: Database, night: Night, anima_id: str) -> StepResult:
    def body(conn: Connection, audit: Audit) -> StepOutcome:
        if not night.force and not store_changed(conn, anima_id, night):
            return unchanged(today_memories=0, dreams=0, input_chars=0)
        dm = day_memories(conn, anima_id, night.day)
        if not dm.today:
            return StepOutcome(stats={"today_memories": 0, "dreams": 0, "input_chars": 0})
        store = MemoryRepo(conn).active(anima_id)
        today_ids = {m.id for m in dm.today}
        # deep sleep's prefix, byte for byte (one cached prefix): the store as deep sleep found
        # it, then what the rounds changed, then today's memories and the task
        prefix = deep_prefix(conn, anima_id, night, STEP)
        _, shown, msg1 = prefix.slices[0]
        msg2 = render_memories(dm.today, f"# Message 2: today's new and changed memories ({night.day})")
        entry = synthesize(night.day, dm, store, anima_id)
        visible = today_ids | {m.id for m in shown} | {int(e["memory_id"]) for e in prefix.events}
        scope = Scope(anima_id=anima_id, tools=TOOLS, memory_ids=frozenset(visible))
        executor = ToolExecutor(conn, scope, audit)
        request = deep_request(STEP, prefix, msg1, prefix.events, msg2, DREAM, must_write=True)
        usage = night.engine.run(request, executor, plan_of(ToolCall(name="write_dream_entry", input=entry)))
        row = DreamRepo(conn).get(anima_id, night.day)
        written = {k: len(row[k]) if row else 0 for k in _ENTRY_KEYS}
        return StepOutcome(
            stats={
                "today_memories": len(dm.today),
                "input_chars": input_chars(request),
                **written,
                "dreams": 0,
                "confidence_updates": 0,
                **executor.stats,
            },
            usage=usage,
        )

    return run_step(db, night, anima_id, STEP, body)


DECLARED = (
    StepDef(
        STEP,
        "dream",
        "REM synthesis: cross-memory connections, confidence updates, next-session actions, bank page suggestions.",
        dream,
        (StepKey.AUTOBIOGRAPHY_SUMMARY,),
        CHANGES,
        preview=preview,
        skips_unchanged=True,
    ),
)
