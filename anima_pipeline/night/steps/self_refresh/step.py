"""Self-layer refresh: persona, values, relationships and current_state rewritten from the
consolidated active memories, so the identity context every later call carries reflects
what the night learned. identity is never written by sleep (it is who the anima is, set by
its owner), and autobiography_summary belongs to light sleep's stage 3b.

Offline the blocks are deterministic templates (plan.py): relationships lists the named
people and pets with what is known about them, current_state the experiences and plans of the
last 7 days, values the most confident and most cited opinions, persona the imprints and
preferences. A block without material keeps its current text, and writing unchanged text
creates no new version (SelfBlockRepo), so a quiet re-run leaves history untouched.

With an LLM the request is deep sleep's prefix (the store as message 1 and the self-block
snapshot, read from the prompt cache; night/prefix.py), the rounds' changes, today's changes
and the task (prompt.py). A
store that did not change that day is skipped and says so (`skipped_unchanged`).
"""

from __future__ import annotations

from anima_pipeline.core.steps import StepKey
from anima_pipeline.llm.contract import ToolCall
from anima_pipeline.night.frame import Night, StepOutcome, StepResult, plan_of, run_step, unchanged
from anima_pipeline.night.prefix import deep_prefix, deep_request, store_changed
from anima_pipeline.night.steps.day_changes import changes_message, memory_changes, render_changes
from anima_pipeline.night.steps.declaration import StepDef
from anima_pipeline.night.steps.framing import input_chars
from anima_pipeline.night.steps.self_refresh.plan import templates
from anima_pipeline.night.steps.self_refresh.preview import CHANGES, preview
from anima_pipeline.night.steps.self_refresh.prompt import SELF_REFRESH
from anima_pipeline.night.steps.self_refresh.tools import BLOCKS, TOOLS
from anima_pipeline.store.db import Connection, Database
from anima_pipeline.store.events import Audit
from anima_pipeline.store.memories import MemoryRepo
from anima_pipeline.tools.executor import ToolExecutor
from anima_pipeline.tools.scope import Scope

STEP = StepKey.SELF_REFRESHED


def refresh_self(db: Database, night: Night, anima_id: str) -> StepResult:
    def body(conn: Connection, audit: Audit) -> StepOutcome:
        if not night.force and not store_changed(conn, anima_id, night):
            return unchanged(memories=0, self_blocks=0, input_chars=0)
        mems = MemoryRepo(conn).active(anima_id)
        if not mems:
            return StepOutcome(stats={"memories": 0, "self_blocks": 0, "input_chars": 0})
        learned, changed = render_changes(conn, memory_changes(conn, anima_id, night.day))
        msg2 = changes_message(f"# Message 2: today's changes to memory ({night.day})", learned, changed)
        # deep sleep's prefix, byte for byte (read from the prompt cache), then the rounds' changes
        prefix = deep_prefix(conn, anima_id, night, STEP)
        blocks = templates(mems, night.end, night.tz, anima_id)
        calls = [
            ToolCall(name="write_self_block", input={"name": n, "content": blocks[n]})
            for n in BLOCKS
            if blocks[n]
        ]
        scope = Scope(anima_id=anima_id, tools=TOOLS, self_blocks=frozenset(BLOCKS))
        executor = ToolExecutor(conn, scope, audit)
        request = deep_request(STEP, prefix, prefix.slices[0][2], prefix.events, msg2, SELF_REFRESH)
        usage = night.engine.run(request, executor, plan_of(*calls))
        return StepOutcome(
            stats={
                "memories": len(mems),
                "input_chars": input_chars(request),
                "blocks_planned": len(calls),
                "self_blocks": 0,
                **executor.stats,
            },
            usage=usage,
        )

    return run_step(db, night, anima_id, STEP, body)


DECLARED = (
    StepDef(
        STEP,
        "self_layer",
        "The self blocks other than identity refreshed from the day's consolidated memories.",
        refresh_self,
        (StepKey.AUTOBIOGRAPHY_SUMMARY,),
        CHANGES,
        preview=preview,
        skips_unchanged=True,
    ),
)
