"""The pre-compaction flush (the idea of OpenClaw's memoryFlush; README, "The whole turn"): before turns of a
running session move into its summary, light sleep stage 1 reads them, silently, and writes
the durable facts they hold, the session as their source.

It is stage 1 itself over a slice of one conversation: the same request (framing, identity,
message 1 = the turns, message 2 = the active memories already sourced from this session,
the same task and tools), the same offline plan when the engine is offline, the same
executor, scope and audit (step ``agent/flush``). So the night's light sleep finds these
memories in its message 2 as existing memories of that session and, by the same rules, does
not write them again. Which memories a flush wrote is recorded per compaction cycle
(``session_flush``, by `recall.session_view`), which is what makes it once per cycle.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from zoneinfo import ZoneInfo

from anima_pipeline.core.steps import StepKey
from anima_pipeline.llm.contract import Engine, ToolCall, ToolResult
from anima_pipeline.night.steps.light.day_input import render_day, render_memories, strip_tool_blocks
from anima_pipeline.night.steps.light.plan import semantic_plan
from anima_pipeline.night.steps.light.request import run_stage
from anima_pipeline.night.steps.light.tools import SEMANTIC_TOOLS
from anima_pipeline.recall.identity import identity_context
from anima_pipeline.recall.session_view import FlushOutcome
from anima_pipeline.store.archive import DayConversation, DayMessage
from anima_pipeline.store.db import Connection, try_anima_lock
from anima_pipeline.store.events import AGENT_STEP_PREFIX, Audit
from anima_pipeline.store.memories import MemoryRepo
from anima_pipeline.store.session_rows import Turn, consolidated
from anima_pipeline.store.undo import REVERTED_REASON
from anima_pipeline.tools.executor import ToolExecutor
from anima_pipeline.tools.scope import Scope

FLUSH_STEP = f"{AGENT_STEP_PREFIX}flush"


class _Written:
    """The executor, noting the memories each successful call created or updated."""

    def __init__(self, executor: ToolExecutor) -> None:
        self.executor, self.ids = executor, []  # type: ignore[var-annotated]

    def call(self, name: str, input: dict[str, Any]) -> ToolResult:
        return self._noted(name, self.executor.call(name, input))

    def call_many(self, calls: Sequence[ToolCall]) -> list[ToolResult]:
        results = self.executor.call_many(calls)
        return [self._noted(c.name, r) for c, r in zip(calls, results, strict=True)]

    def _noted(self, name: str, result: ToolResult) -> ToolResult:
        ref = result.data.get("id")
        if (
            not result.is_error
            and isinstance(ref, str)
            and ref.startswith("f-")
            and name != "deprecate_semantic_memory"
        ):
            self.ids.append(int(ref[2:]))
        return result

    @property
    def scope(self) -> Scope:
        return self.executor.scope


def flush_turns(
    conn: Connection, audit: Audit, turns: Sequence[Turn], *, engine: Engine, session_id: str, tz: ZoneInfo
) -> FlushOutcome:
    """Light sleep stage 1 over `turns` of `session_id` (tool messages and blocks removed);
    `tz` is what a day is (the night's ANIMA_TIMEZONE)."""
    messages = tuple(
        DayMessage(t.id, session_id, t.external_id, t.role, t.speaker, text, t.created_at)
        for t in turns
        if t.role in ("user", "assistant") and (text := strip_tool_blocks(t.content))
    )
    if not messages or not consolidated(conn, audit.anima_id, session_id):
        # nothing said, or a debug / cron conversation: the night would not learn from it either
        return FlushOutcome(stats={"turns": len(turns), "created": 0, "updated": 0})
    if not try_anima_lock(conn, audit.anima_id):
        # a night's step is writing this anima: each would read its memories before the other
        # wrote and both would write the same facts. These turns stay in the store, and the
        # night of their day learns them; the turn does not wait for a step (minutes with a model)
        return FlushOutcome(stats={"turns": len(turns), "created": 0, "updated": 0, "left_to_the_night": 1})
    conv = DayConversation(id=session_id, title=None, platform="chat", messages=messages)
    repo = MemoryRepo(conn)
    existing = repo.by_source_sessions(audit.anima_id, [session_id])
    retired = [
        m
        for m in repo.by_source_sessions(audit.anima_id, [session_id], status="deprecated")
        if not (m.deprecated_reason or "").startswith(REVERTED_REASON)
    ]
    day = conv.ended_at.astimezone(tz).date()
    flush_audit = audit.model_copy(update={"step": FLUSH_STEP})
    scope = Scope(
        anima_id=audit.anima_id,
        tools=SEMANTIC_TOOLS,
        memory_ids=frozenset(m.id for m in existing),
        conversation_ids=frozenset({session_id}),
        default_sources=(session_id,),
        default_observed_at=conv.ended_at,
    )
    runner = _Written(ToolExecutor(conn, scope, flush_audit))
    msg1 = render_day([conv], tz, day.isoformat())
    msg2 = render_memories(
        existing, "# Existing memories from these conversations (ids you may update or deprecate)"
    )
    run_stage(
        StepKey.SEMANTIC_EXTRACTED,
        engine,
        day,
        tz,
        runner,  # type: ignore[arg-type]
        identity_context(conn, audit.anima_id),
        [msg1, msg2],
        lambda: semantic_plan([conv], existing, tz, retired),
    )
    stats = {"turns": len(turns), **{k: int(v) for k, v in runner.executor.stats.items()}}
    return FlushOutcome(memory_ids=sorted(set(runner.ids)), stats=stats)
