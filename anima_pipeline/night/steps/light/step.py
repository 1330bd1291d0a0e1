"""Light sleep: the day's conversations into semantic memories (stage 1), emotional anchors
(stage 2), autobiographical narratives (stage 3, phase A) and the autobiography summary in
the self layer (stage 3b, phase B). Each stage is its own step, so each can be re-run alone;
any stage may write nothing and the later ones still run (restraint is a normal result).
"""

from __future__ import annotations

import functools
from datetime import timedelta

from anima_pipeline.core.steps import StepKey
from anima_pipeline.llm.contract import StepRequest, ToolCall, Usage
from anima_pipeline.night.frame import Night, StepOutcome, StepResult, plan_of, run_step
from anima_pipeline.night.prefix import day_transcript, identity_as_found
from anima_pipeline.night.steps.declaration import StepDef
from anima_pipeline.night.steps.framing import input_chars
from anima_pipeline.night.steps.light import preview
from anima_pipeline.night.steps.light.day_input import (
    chunk_conversations,
    load_day,
    render_day,
    render_memories,
)
from anima_pipeline.night.steps.light.plan import (
    anchor_plan,
    autobiography_outline,
    narrative_plan,
    semantic_plan,
    short_date,
)
from anima_pipeline.night.steps.light.prompt import listing
from anima_pipeline.night.steps.light.request import run_stage
from anima_pipeline.night.steps.light.tools import (
    ANCHOR_TOOLS,
    CREATE_ONLY,
    NARRATIVE_TOOLS,
    SEMANTIC_TOOLS,
    SUMMARY_TOOLS,
)
from anima_pipeline.recall.identity import identity_context
from anima_pipeline.store.db import Connection, Database
from anima_pipeline.store.erasure import corrected_wordings
from anima_pipeline.store.events import Audit
from anima_pipeline.store.layers import AnchorRepo, AutobiographyRepo, SelfBlockRepo
from anima_pipeline.store.memories import MemoryRepo
from anima_pipeline.store.undo import REVERTED_REASON
from anima_pipeline.tools.executor import ToolExecutor
from anima_pipeline.tools.scope import Scope

STEP_SEMANTIC = StepKey.SEMANTIC_EXTRACTED
STEP_LIMBIC = StepKey.ANCHORS_MARKED
STEP_NARRATIVE = StepKey.AUTOBIOGRAPHY_NARRATED
STEP_SUMMARY = StepKey.AUTOBIOGRAPHY_SUMMARY

NARRATIVE_WINDOW_DAYS = 7
# The counts each stage always reports, 0 included, so a quiet night plots as 0 instead of a gap.
ZERO_COUNTS: dict[str, tuple[str, ...]] = {
    STEP_SEMANTIC: ("created", "updated", "deprecated", "errors"),
    STEP_LIMBIC: ("anchors", "errors"),
    STEP_NARRATIVE: ("narratives", "narratives_deprecated", "errors"),
    STEP_SUMMARY: ("self_blocks", "errors"),
}


def _quiet(step: str, **stats: int) -> StepOutcome:
    """The stats of a stage with nothing to read: no input, every zero count."""
    return StepOutcome(stats={**stats, "input_chars": 0, **dict.fromkeys(ZERO_COUNTS[step], 0)})


def _outcome(
    step: str, executor: ToolExecutor, request: StepRequest, usage: Usage, **stats: int
) -> StepOutcome:
    """The stats every stage reports: its own counts, the input size, its zero counts (a quiet
    night plots as 0) overridden by what the executor did."""
    return StepOutcome(
        stats={
            **stats,
            "input_chars": input_chars(request),
            **dict.fromkeys(ZERO_COUNTS[step], 0),
            **executor.stats,
        },
        usage=usage,
    )


# ---- stage 1: semantic --------------------------------------------------------------


def extract_semantic(db: Database, night: Night, anima_id: str) -> StepResult:
    def body(conn: Connection, audit: Audit) -> StepOutcome:
        convs = load_day(conn, anima_id, night.start, night.end)
        stats: dict[str, int] = {"conversations": len(convs), "messages": sum(len(c.messages) for c in convs)}
        stats.update(
            dict.fromkeys(ZERO_COUNTS[STEP_SEMANTIC], 0)
        )  # a night that writes nothing still reports 0
        usage, chunks_log, sent = Usage(), [], 0
        if convs:
            system = identity_as_found(conn, anima_id, night)
            for chunk in chunk_conversations(convs, night.tz):
                ids = sorted({c.id for c in chunk})
                meeting = MemoryRepo(conn).by_source_sessions(anima_id, ids)
                # a memory the user corrected is settled: known (never learned again, nor its
                # old wording) but not the night's to update
                existing = [m for m in meeting if m.settled_at is None]
                settled = [m for m in meeting if m.settled_at is not None]
                retired = [  # consolidated or retired facts; a reverted run's facts may be learned again
                    m
                    for m in MemoryRepo(conn).by_source_sessions(anima_id, ids, status="deprecated")
                    if not (m.deprecated_reason or "").startswith(REVERTED_REASON)
                ]
                retired += settled + corrected_wordings(conn, [m.id for m in settled])
                msg1 = render_day(chunk, night.tz, night.day.isoformat())
                msg2 = render_memories(
                    existing, "# Existing memories from these conversations (ids you may update or deprecate)"
                )
                scope = Scope(
                    anima_id=anima_id,
                    # update and deprecate act only on the ids message 2 shows: with none shown
                    # their schemas are tokens for nothing (docs/cost.md)
                    tools=SEMANTIC_TOOLS if existing else CREATE_ONLY,
                    memory_ids=frozenset(m.id for m in existing),
                    conversation_ids=frozenset(ids),
                    default_sources=tuple(ids),
                    default_observed_at=max(c.ended_at for c in chunk),
                )
                executor = ToolExecutor(conn, scope, audit)
                request, spent = run_stage(
                    STEP_SEMANTIC,
                    night.engine,
                    night.day,
                    night.tz,
                    executor,
                    system,
                    [msg1, msg2] if existing else [msg1],  # an empty message 2 says nothing
                    functools.partial(semantic_plan, chunk, existing, night.tz, retired),
                )
                sent += input_chars(request)
                usage += spent
                chunks_log.append(ids)
                for k, v in executor.stats.items():
                    stats[k] = stats.get(k, 0) + v
        stats.update(chunks=len(chunks_log), input_chars=sent)
        return StepOutcome(stats=stats, usage=usage, details={"chunk_conversations": chunks_log})

    return run_step(db, night, anima_id, STEP_SEMANTIC, body)


# ---- stage 2: limbic ----------------------------------------------------------------


def extract_anchors(db: Database, night: Night, anima_id: str) -> StepResult:
    def body(conn: Connection, audit: Audit) -> StepOutcome:
        convs = load_day(conn, anima_id, night.start, night.end)
        if not convs:
            return _quiet(STEP_LIMBIC, conversations=0)
        ids = sorted(c.id for c in convs)
        existing = AnchorRepo(conn).between(anima_id, night.start, night.end)
        system = identity_as_found(conn, anima_id, night)
        msg1 = day_transcript(convs, night)
        msg2 = listing(
            "anchors",
            "# Anchors already recorded today",
            (
                f"- {a['conversation_id']} {a['occurred_at'].astimezone(night.tz).isoformat()} {a['emotion']}"
                for a in existing
            ),
        )
        scope = Scope(anima_id=anima_id, tools=ANCHOR_TOOLS, conversation_ids=frozenset(ids))
        executor = ToolExecutor(conn, scope, audit)
        seen = {(a["conversation_id"], a["occurred_at"], a["emotion"]) for a in existing}
        request, usage = run_stage(
            STEP_LIMBIC,
            night.engine,
            night.day,
            night.tz,
            executor,
            system,
            [msg1, msg2],
            lambda: anchor_plan(convs, night.tz, seen),
        )
        return _outcome(STEP_LIMBIC, executor, request, usage, conversations=len(convs))

    return run_step(db, night, anima_id, STEP_LIMBIC, body)


# ---- stage 3: autobiographical narratives (phase A) --------------------------------------


def narrate(db: Database, night: Night, anima_id: str) -> StepResult:
    def body(conn: Connection, audit: Audit) -> StepOutcome:
        since = night.start - timedelta(days=NARRATIVE_WINDOW_DAYS - 1)
        recent = [
            m
            for m in MemoryRepo(conn).active(anima_id)
            if m.type in ("experience", "imprint") and m.observed_at and since <= m.observed_at < night.end
        ]
        narratives = AutobiographyRepo(conn).active(anima_id)
        if not recent:
            return _quiet(STEP_NARRATIVE, candidates=0)
        system = identity_context(conn, anima_id)
        msg1 = render_memories(recent, f"# Experience and imprint memories, {since.date()} to {night.day}")
        msg2 = listing(
            "narratives",
            "# Existing narratives (date, significance, title, the memories each already covers)",
            (
                f"- a-{n['id']} {short_date(n['occurred_from'], night.tz)} [{n['significance']}] {n['title']}"
                f" — covers {', '.join(f'f-{i}' for i in n['source_memory_ids']) or 'no memory'}"
                for n in narratives
            ),
        )
        scope = Scope(
            anima_id=anima_id,
            tools=NARRATIVE_TOOLS,
            memory_ids=frozenset(m.id for m in recent),
            narrative_ids=frozenset(n["id"] for n in narratives),
        )
        executor = ToolExecutor(conn, scope, audit)
        told = {i for n in narratives for i in n["source_memory_ids"]}
        request, usage = run_stage(
            STEP_NARRATIVE,
            night.engine,
            night.day,
            night.tz,
            executor,
            system,
            [msg1, msg2],
            lambda: narrative_plan(recent, told, night.tz),
        )
        return _outcome(STEP_NARRATIVE, executor, request, usage, candidates=len(recent))

    return run_step(db, night, anima_id, STEP_NARRATIVE, body)


# ---- stage 3b: autobiography summary (phase B) -----------------------------------------


def summarize_autobiography(db: Database, night: Night, anima_id: str) -> StepResult:
    def body(conn: Connection, audit: Audit) -> StepOutcome:
        narratives = AutobiographyRepo(conn).active(anima_id)
        if not narratives:
            return _quiet(STEP_SUMMARY, narratives_read=0)
        system = identity_context(conn, anima_id)
        msg1 = listing(
            "narratives",
            "# Active narratives",
            (
                f"- a-{n['id']} [{n['significance']}] {short_date(n['occurred_from'], night.tz)} {n['title']}"
                for n in narratives
            ),
        )
        scope = Scope(
            anima_id=anima_id, tools=SUMMARY_TOOLS, self_blocks=frozenset({"autobiography_summary"})
        )
        executor = ToolExecutor(conn, scope, audit)
        outline = autobiography_outline(narratives, night.end, night.tz)
        plan = plan_of(
            ToolCall(name="write_self_block", input={"name": "autobiography_summary", "content": outline})
        )
        request, usage = run_stage(
            STEP_SUMMARY, night.engine, night.day, night.tz, executor, system, [msg1], plan, must_write=True
        )
        current = SelfBlockRepo(conn).all(anima_id)["autobiography_summary"]
        return _outcome(
            STEP_SUMMARY,
            executor,
            request,
            usage,
            narratives_read=len(narratives),
            summary_chars=len(current),
        )

    return run_step(db, night, anima_id, STEP_SUMMARY, body)


DECLARED = (
    StepDef(
        STEP_SEMANTIC,
        "light_sleep",
        "Stage 1: the day's conversations into semantic memories (create / update / deprecate within message 2).",
        extract_semantic,
        (StepKey.CLEANED,),
        preview.SEMANTIC_CHANGES,
        preview=preview.semantic_preview,
    ),
    StepDef(
        STEP_LIMBIC,
        "light_sleep",
        "Stage 2: the day's mood and emotional turning points as anchors.",
        extract_anchors,
        (STEP_SEMANTIC,),
        preview.ANCHOR_CHANGES,
    ),
    StepDef(
        STEP_NARRATIVE,
        "light_sleep",
        "Stage 3 (phase A): narratives from the last 7 days' experience and imprint memories, only when worth telling.",
        narrate,
        (STEP_LIMBIC,),
        preview.NARRATIVE_CHANGES,
    ),
    StepDef(
        STEP_SUMMARY,
        "light_sleep",
        "Stage 3b (phase B): the autobiography summary self block, a grouped outline fading with distance.",
        summarize_autobiography,
        (STEP_NARRATIVE,),
        preview.SUMMARY_CHANGES,
        preview=preview.summary_preview,
    ),
)
