"""Self-layer refresh: persona, values, relationships and current_state rewritten from the
consolidated active memories, so the identity context every later call carries reflects
what the night learned. identity is never written by sleep (it is who the anima is, set by
its owner), and autobiography_summary belongs to light sleep's stage 3b.

Offline the blocks are deterministic templates (offline/self_blocks.py): relationships lists the named people and
pets with what is known about them, current_state the experiences and plans of the last 7
days, values the most confident and most cited opinions, persona the imprints and
preferences. A block without material keeps its current text, and writing unchanged text
creates no new version (SelfBlockRepo), so a quiet re-run leaves history untouched.
"""

from __future__ import annotations

from anima_pipeline.llm.types import StepRequest, TextBlock, ToolCall
from anima_pipeline.offline.self_blocks import strength, templates
from anima_pipeline.offline.temporal import bullets
from anima_pipeline.sleep import prompts
from anima_pipeline.sleep.day_input import render_memories
from anima_pipeline.sleep.identity import identity_context
from anima_pipeline.sleep.night import Night, StepOutcome, StepResult, plan_of, run_step
from anima_pipeline.sleep.temporal import memory_changes, render_changes
from anima_pipeline.store.db import Connection, Database
from anima_pipeline.store.events import Audit
from anima_pipeline.store.memories import MemoryRepo
from anima_pipeline.tools.executor import ToolExecutor
from anima_pipeline.tools.schemas import tool_specs
from anima_pipeline.tools.scope import Scope

STEP = "self_blocks/refreshed"
TOOLS = ("write_self_block",)
BLOCKS = ("persona", "values", "relationships", "current_state")
INPUT_CHARS = 60_000


def refresh_self(db: Database, night: Night, anima_id: str) -> StepResult:
    def body(conn: Connection, audit: Audit) -> StepOutcome:
        mems = MemoryRepo(conn).active(anima_id)
        if not mems:
            return StepOutcome(stats={"memories": 0, "self_blocks": 0, "input_chars": 0})
        shown, size = [], 0
        for m in sorted(mems, key=strength):
            size += len(m.content) + 60
            if size > INPUT_CHARS:
                break
            shown.append(m)
        system = identity_context(conn, anima_id)
        learned, changed = render_changes(conn, memory_changes(conn, anima_id, night.day))
        msg1 = prompts.tagged(
            "changes",
            "\n".join(
                [f"# Today's changes to memory ({night.day})", "Learned:", *bullets(learned)]
                + ["Changed:", *bullets(changed)]
            ),
        )
        msg2 = render_memories(
            sorted(shown, key=lambda m: m.id), f"# Consolidated active memories ({len(shown)} of {len(mems)})"
        )
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
            system=prompts.system_blocks(prompts.SELF_REFRESH_SYSTEM, night.day, night.tz, system),
            user=[TextBlock(text=msg1), TextBlock(text=msg2), TextBlock(text=prompts.SELF_REFRESH)],
            tools=tool_specs(TOOLS),
        )
        usage = night.engine.run(request, executor, plan_of(*calls))
        return StepOutcome(
            stats={
                "memories": len(mems),
                "input_chars": len(system) + len(msg1) + len(msg2),
                "blocks_planned": len(calls),
                "self_blocks": 0,
                **executor.stats,
            },
            usage=usage,
        )

    return run_step(db, night, anima_id, STEP, body)
