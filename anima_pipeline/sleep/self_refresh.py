"""Self-layer refresh: persona, values, relationships and current_state rewritten from the
consolidated active memories, so the identity context every later call carries reflects
what the night learned. identity is never written by sleep (it is who the anima is, set by
its owner), and autobiography_summary belongs to light sleep's stage 3b.

Offline the blocks are deterministic templates: relationships lists the named people and
pets with what is known about them, current_state the experiences and plans of the last 7
days, values the most confident and most cited opinions, persona the imprints and
preferences. A block without material keeps its current text, and writing unchanged text
creates no new version (SelfBlockRepo), so a quiet re-run leaves history untouched.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from anima_pipeline.llm.types import StepRequest, TextBlock, ToolCall
from anima_pipeline.sleep import prompts
from anima_pipeline.sleep.day_input import render_memories
from anima_pipeline.sleep.dream import clip, entity_index, entity_kind, plan_of_memory
from anima_pipeline.sleep.identity import identity_context
from anima_pipeline.sleep.night import Night, StepOutcome, StepResult, plan_of, run_step
from anima_pipeline.sleep.temporal import _bullets, memory_changes, render_changes
from anima_pipeline.store.db import Connection, Database
from anima_pipeline.store.events import Audit
from anima_pipeline.store.memories import MemoryRepo, SemanticMemory
from anima_pipeline.tools.executor import ToolExecutor
from anima_pipeline.tools.schemas import tool_specs
from anima_pipeline.tools.scope import Scope

STEP = "self_blocks/refreshed"
TOOLS = ("write_self_block",)
BLOCKS = ("persona", "values", "relationships", "current_state")
RECENT_DAYS = 7
MAX_PEOPLE, MAX_PETS, FACTS_PER_ENTITY = 12, 6, 4
MAX_ITEMS = 8
INPUT_CHARS = 60_000
BLOCK_CHARS = 8000  # the tool's limit


def _strength(m: SemanticMemory) -> tuple:
    """Most confident, then most cited, then newest: what the self should lead with."""
    return (-round(m.confidence, 3), -round(m.reference_count, 3), -m.id)


def _when(m: SemanticMemory) -> datetime:
    return m.observed_at or m.created_at


def relationships(mems: list[SemanticMemory], anima_id: str = "") -> str:
    index = entity_index(mems, frozenset({anima_id.lower()}))
    by_id = {m.id: m for m in mems}
    groups: dict[str, list[str]] = {"person": [], "pet": []}
    for name in sorted(index, key=lambda e: (-len(index[e]), e)):
        about = sorted((by_id[i] for i in index[name]), key=_strength)
        kind = entity_kind(name, about)
        if kind not in groups:
            continue
        facts = []
        for m in about[:FACTS_PER_ENTITY]:
            text = m.content[len(name) :].lstrip(" ,") if m.content.startswith(name + " ") else m.content
            facts.append(clip(text.rstrip(".。"), 160))
        groups[kind].append(f"- {name}: " + "; ".join(facts))
    lines = []
    if groups["person"]:
        lines += ["People:", *groups["person"][:MAX_PEOPLE]]
    if groups["pet"]:
        lines += ["Pets:", *groups["pet"][:MAX_PETS]]
    return "\n".join(lines)[:BLOCK_CHARS]


def current_state(mems: list[SemanticMemory], end: datetime, tz, anima_id: str = "") -> str:
    since = end - timedelta(days=RECENT_DAYS)
    recent = [m for m in mems if since <= _when(m) < end]
    today = (end - timedelta(days=1)).date()
    experiences = sorted(
        (m for m in recent if m.type == "experience"), key=lambda m: (_when(m), m.id), reverse=True
    )
    plans = sorted(
        (m for m in recent if plan_of_memory(m.content, today, frozenset({anima_id.lower()}))),
        key=lambda m: (_when(m), m.id),
    )
    lines = []
    if experiences:
        lines.append(f"Recently (last {RECENT_DAYS} days):")
        lines += [
            f"- {_when(m).astimezone(tz):%Y-%m-%d}: {clip(m.content, 200)}" for m in experiences[:MAX_ITEMS]
        ]
    if plans:
        lines.append("Plans ahead:")
        lines += [f"- {clip(m.content, 200)}" for m in plans[:MAX_ITEMS]]
    return "\n".join(lines) if lines else f"Nothing new in the last {RECENT_DAYS} days."


def _ranked(mems: list[SemanticMemory], types: tuple[str, ...]) -> list[str]:
    chosen = sorted((m for m in mems if m.type in types), key=_strength)[:MAX_ITEMS]
    return [f"- {clip(m.content, 200)}" for m in chosen]


def values(mems: list[SemanticMemory]) -> str:
    items = _ranked(mems, ("opinion",))
    return "\n".join(["Views held (most confident and most cited first):", *items]) if items else ""


def persona(mems: list[SemanticMemory]) -> str:
    lines = []
    if imprints := _ranked(mems, ("imprint",)):
        lines += ["Moments that shaped me:", *imprints]
    if prefs := _ranked(mems, ("preference",)):
        lines += ["Preferences I keep in mind:", *prefs]
    return "\n".join(lines)


def templates(mems: list[SemanticMemory], end: datetime, tz, anima_id: str = "") -> dict[str, str]:
    """The offline blocks; an empty string means "no material, keep the current block"."""
    return {
        "persona": persona(mems),
        "values": values(mems),
        "relationships": relationships(mems, anima_id),
        "current_state": current_state(mems, end, tz, anima_id),
    }


def refresh_self(db: Database, night: Night, anima_id: str) -> StepResult:
    def body(conn: Connection, audit: Audit) -> StepOutcome:
        mems = MemoryRepo(conn).active(anima_id)
        if not mems:
            return StepOutcome(stats={"memories": 0, "self_blocks": 0, "input_chars": 0})
        shown, size = [], 0
        for m in sorted(mems, key=_strength):
            size += len(m.content) + 60
            if size > INPUT_CHARS:
                break
            shown.append(m)
        system = identity_context(conn, anima_id)
        learned, changed = render_changes(conn, memory_changes(conn, anima_id, night.day))
        msg1 = prompts.tagged(
            "changes",
            "\n".join(
                [f"# Today's changes to memory ({night.day})", "Learned:", *_bullets(learned)]
                + ["Changed:", *_bullets(changed)]
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
