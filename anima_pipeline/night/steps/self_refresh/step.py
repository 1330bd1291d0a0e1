"""Self-layer refresh: persona, values, relationships and current_state rewritten from the
consolidated active memories, so the identity context every later call carries reflects
what the night learned. identity is never written by sleep (it is who the anima is, set by
its owner), and autobiography_summary belongs to light sleep's stage 3b.

Offline the blocks are deterministic templates (night/steps/self_refresh/plan.py): relationships lists the named people and
pets with what is known about them, current_state the experiences and plans of the last 7
days, values the most confident and most cited opinions, persona the imprints and
preferences. A block without material keeps its current text, and writing unchanged text
creates no new version (SelfBlockRepo), so a quiet re-run leaves history untouched.

With an LLM the request is deep sleep's prefix (the store as message 1 and the self-block
snapshot, read from the prompt cache), the rounds' changes, today's changes and the task. A
store that did not change that day is skipped and says so (`skipped_unchanged`).
"""

from __future__ import annotations

from anima_pipeline.core.steps import StepKey
from anima_pipeline.llm.contract import StepRequest, TextBlock, ToolCall
from anima_pipeline.night import prompts
from anima_pipeline.night.frame import Night, StepOutcome, StepResult, plan_of, run_step, unchanged
from anima_pipeline.night.steps.deep import step as deep_sleep
from anima_pipeline.night.steps.self_refresh.plan import templates
from anima_pipeline.night.steps.temporal.plan import bullets
from anima_pipeline.night.steps.temporal.step import memory_changes, render_changes
from anima_pipeline.store.db import Connection, Database
from anima_pipeline.store.events import Audit
from anima_pipeline.store.memories import MemoryRepo
from anima_pipeline.tools.executor import ToolExecutor
from anima_pipeline.tools.scope import Scope

STEP = StepKey.SELF_REFRESHED
TOOLS = ("write_self_block",)
BLOCKS = ("persona", "values", "relationships", "current_state")


def refresh_self(db: Database, night: Night, anima_id: str) -> StepResult:
    def body(conn: Connection, audit: Audit) -> StepOutcome:
        if not night.force and not deep_sleep.store_changed(conn, anima_id, night):
            return unchanged(memories=0, self_blocks=0, input_chars=0)
        mems = MemoryRepo(conn).active(anima_id)
        if not mems:
            return StepOutcome(stats={"memories": 0, "self_blocks": 0, "input_chars": 0})
        learned, changed = render_changes(conn, memory_changes(conn, anima_id, night.day))
        msg2 = prompts.tagged(
            "changes",
            "\n".join(
                [f"# Message 2: today's changes to memory ({night.day})", "Learned:", *bullets(learned)]
                + ["Changed:", *bullets(changed)]
            ),
        )
        # deep sleep's prefix, byte for byte (read from the prompt cache), then the rounds' changes
        prefix = deep_sleep.night_prefix(conn, anima_id, night, STEP)
        msg15 = prompts.tagged("changes", deep_sleep.message_one_five(prefix.events))
        blocks = templates(mems, night.end, night.tz, anima_id)
        calls = [
            ToolCall(name="write_self_block", input={"name": n, "content": blocks[n]})
            for n in BLOCKS
            if blocks[n]
        ]
        scope = Scope(anima_id=anima_id, tools=TOOLS, self_blocks=frozenset(BLOCKS))
        executor = ToolExecutor(conn, scope, audit)
        request = StepRequest(
            step=STEP,
            system=prefix.system,
            user=[
                prefix.slices[0][2],
                TextBlock(text=msg15),
                TextBlock(text=msg2),
                TextBlock(text=prompts.SELF_REFRESH),
            ],
            tools=prefix.tools,
        )
        usage = night.engine.run(request, executor, plan_of(*calls))
        return StepOutcome(
            stats={
                "memories": len(mems),
                "input_chars": sum(len(b.text) for b in [*request.system, *request.user]),
                "blocks_planned": len(calls),
                "self_blocks": 0,
                **executor.stats,
            },
            usage=usage,
        )

    return run_step(db, night, anima_id, STEP, body)
