"""Temporal summaries: what happened on a day, and the week / month / year built from them.

The day summary is the time-ordered view that semantic memory lacks: "what did we talk
about on the 18th" has no single fact to recall. It is written from the day's conversations
and the day's memory changes (light and deep sleep events of that day), so it also says what
was learned and what changed. The cascade compresses upwards from the level below: a week
on its Sunday from its days, a month on its last day from its weeks (days where a week
crosses the month boundary), a year on 31 December from its months. Each level is an
upsert per period, so re-runs replace and never add a second summary.

Offline, the summaries are extractive (deterministic sentence picking, plan.py); with an LLM
the same input goes with the day's or the cascade's task (prompt.py) and the model writes the
text through write_temporal_summary.
"""

from __future__ import annotations

from datetime import date, timedelta

from anima_pipeline.core.steps import StepKey
from anima_pipeline.llm.contract import ToolCall, Usage
from anima_pipeline.llm.failures import ModelAnswerError
from anima_pipeline.night.frame import Night, StepOutcome, StepResult, plan_of, run_step
from anima_pipeline.night.prefix import day_prefix, day_transcript, identity_as_found
from anima_pipeline.night.steps.day_changes import changes_message, memory_changes, render_changes
from anima_pipeline.night.steps.declaration import StepDef
from anima_pipeline.night.steps.framing import tagged
from anima_pipeline.night.steps.light.day_input import load_day
from anima_pipeline.night.steps.temporal import preview
from anima_pipeline.night.steps.temporal.plan import day_summary, period_label, period_summary
from anima_pipeline.night.steps.temporal.prompt import (
    TEMPORAL_CASCADE,
    TEMPORAL_DAY,
    TEMPORAL_SYSTEM,
    summary_request,
)
from anima_pipeline.night.steps.temporal.tools import TOOLS, PeriodGuard
from anima_pipeline.recall.identity import identity_context
from anima_pipeline.store.archive import animas_active_between, debug_conversations
from anima_pipeline.store.db import Connection, Database
from anima_pipeline.store.events import Audit
from anima_pipeline.store.layers import TemporalRepo
from anima_pipeline.tools.executor import ToolExecutor
from anima_pipeline.tools.scope import Scope

STEP_DAY = StepKey.DAY_SUMMARY
STEP_CASCADE = StepKey.CASCADE
BELOW = {"week": ("day",), "month": ("week", "day"), "year": ("month", "week", "day")}


# ---- day ------------------------------------------------------------------------------


def _debug_ids(conn: Connection, anima_id: str) -> set[str]:
    """Debug conversations (test harnesses, prompt checks) are not part of the anima's day."""
    return debug_conversations(conn, anima_id)


def summarize_day(db: Database, night: Night, anima_id: str) -> StepResult:
    def body(conn: Connection, audit: Audit) -> StepOutcome:
        debug = _debug_ids(conn, anima_id)
        convs = [c for c in load_day(conn, anima_id, night.start, night.end) if c.id not in debug]
        if not convs:
            return StepOutcome(stats={"levels": 0, "conversations": 0, "input_chars": 0, "summary_chars": 0})
        events = memory_changes(conn, anima_id, night.day)
        learned, changed = render_changes(conn, events)
        day = night.day.isoformat()
        # light sleep's prefix for the day (night/prefix.py): the same identity and transcript
        system = identity_as_found(conn, anima_id, night)
        msg1 = day_transcript(convs, night)
        msg2 = changes_message("# Memory changes of the day", learned, changed)
        period = f"Period: level day, period_start {day}, period_end {day}."
        content = day_summary(convs, learned, changed, night.day, night.tz)
        call = ToolCall(
            name="write_temporal_summary",
            input={"level": "day", "period_start": day, "period_end": day, "content": content},
        )
        usage, stats = _write(
            conn,
            audit,
            night,
            anima_id,
            STEP_DAY,
            system,
            [msg1, msg2, period, TEMPORAL_DAY],
            ("day", night.day, night.day),
            call,
            day_prefix(night.engine, STEP_DAY),
        )
        row = TemporalRepo(conn).get(anima_id, "day", night.day)
        return StepOutcome(
            stats={
                "levels": int(stats.get("summaries", 0) > 0),
                "conversations": len(convs),
                "memory_changes": len(events),
                "input_chars": len(system) + len(msg1) + len(msg2),
                "summary_chars": len(row["content"]) if row else 0,
                **stats,
            },
            usage=usage,
        )

    return run_step(db, night, anima_id, STEP_DAY, body)


def _write(
    conn: Connection,
    audit: Audit,
    night: Night,
    anima_id: str,
    step: str,
    system: str,
    user: list[str],
    period: tuple[str, date, date],
    call: ToolCall,
    shared: tuple[tuple[str, ...], str, bool] = (TOOLS, TEMPORAL_SYSTEM, False),
) -> tuple[Usage, dict[str, int]]:
    """One write_temporal_summary for one period, through the engine (offline: `call`);
    `shared`: the (tools, framing, cached) of the prefix the request shares (the day summary's;
    the cascade's own is not cached: its one write ends it and no other step sends it,
    night/prefix.py's `read_follows`)."""
    scope = Scope(anima_id=anima_id, tools=TOOLS, summary_levels=frozenset({period[0]}))
    executor = ToolExecutor(conn, scope, audit)
    request = summary_request(step, night, system, user, shared)
    try:
        with conn.transaction():  # a savepoint: a refused or cut answer leaves nothing
            usage = night.engine.run(request, PeriodGuard(executor, *period), plan_of(call))
    except ModelAnswerError as exc:
        executor.declined(f"{type(exc).__name__}: {exc}")
        executor.stats["summaries"] = 0  # what it wrote before was rolled back
        usage = exc.usage
    if executor.said and not executor.stats["summaries"]:
        # the model declined; the summary is a row the product needs (recall, the cascade)
        executor.without_model(request, plan_of(call))
    return usage, dict(executor.stats)


# ---- cascade --------------------------------------------------------------------------


def closed_periods(day: date) -> list[tuple[str, date, date]]:
    """The (level, start, end) periods that `day` closes, lowest level first."""
    out = []
    if day.weekday() == 6:
        out.append(("week", day - timedelta(days=6), day))
    if (day + timedelta(days=1)).day == 1:
        out.append(("month", day.replace(day=1), day))
    if day.month == 12 and day.day == 31:
        out.append(("year", date(day.year, 1, 1), day))
    return out


def animas_for(conn: Connection, night: Night) -> list[str]:
    """Animas active that day (the day summary's default) and, for the cascade, animas with
    a day summary inside a period this day closes, so a quiet Sunday still closes the week.

    The registry's hook is per module and both steps live here, so it is the union: the day
    step writes nothing for a quiet anima and the cascade nothing on a day closing nothing.
    """
    found = set(animas_active_between(conn, night.start, night.end))
    periods = closed_periods(night.day)
    if periods:
        found |= TemporalRepo(conn).animas_with_days(min(p[1] for p in periods), night.day)
    return sorted(found)


def cascade_inputs(conn: Connection, anima_id: str, level: str, start: date, end: date) -> list[dict]:
    """The summaries a period is built from: the highest level below it first, then lower
    levels only for the days those leave uncovered (a week crossing the month boundary
    gives way to its days inside the month). Chronological."""
    repo = TemporalRepo(conn)
    covered: set[date] = set()
    chosen = []
    for lower in BELOW[level]:
        for row in repo.between(anima_id, lower, start, end):
            if row["period_end"] > end:
                continue
            days = {
                row["period_start"] + timedelta(days=i)
                for i in range((row["period_end"] - row["period_start"]).days + 1)
            }
            if days & covered:
                continue
            chosen.append(row)
            covered |= days
    return sorted(chosen, key=lambda r: (r["period_start"], r["period_end"]))


def cascade(db: Database, night: Night, anima_id: str) -> StepResult:
    def body(conn: Connection, audit: Audit) -> StepOutcome:
        written: list[str] = []
        usage, input_chars, summary_chars = Usage(), 0, 0
        system = ""
        for level, start, end in closed_periods(night.day):
            inputs = cascade_inputs(conn, anima_id, level, start, end)
            if not inputs:
                continue
            system = system or identity_context(conn, anima_id)
            msg1 = tagged(
                "summaries",
                "\n\n".join(
                    [f"# Summaries below the {level} {start} – {end}"]
                    + [f"## {period_label(r)} ({r['level']})\n{r['content']}" for r in inputs]
                ),
            )
            period = f"Period: level {level}, period_start {start}, period_end {end}."
            call = ToolCall(
                name="write_temporal_summary",
                input={
                    "level": level,
                    "period_start": start.isoformat(),
                    "period_end": end.isoformat(),
                    "content": period_summary(level, start, end, inputs),
                },
            )
            prompt = TEMPORAL_CASCADE.format(level=level)
            used, stats = _write(
                conn,
                audit,
                night,
                anima_id,
                STEP_CASCADE,
                system,
                [msg1, period, prompt],
                (level, start, end),
                call,
            )
            usage += used
            input_chars += len(system) + len(msg1)
            row = TemporalRepo(conn).get(anima_id, level, start)
            if row is not None and stats.get("summaries", 0):
                written.append(level)
                summary_chars += len(row["content"])
        return StepOutcome(
            stats={
                "levels": len(written),
                "level_names": ",".join(written),
                "input_chars": input_chars,
                "summary_chars": summary_chars,
            },
            usage=usage,
        )

    return run_step(db, night, anima_id, STEP_CASCADE, body)


DECLARED = (
    StepDef(
        STEP_DAY,
        "temporal",
        "The day summary from the day's conversations and memory changes.",
        summarize_day,
        (StepKey.AUTOBIOGRAPHY_SUMMARY,),
        preview.DAY_CHANGES,
        animas=animas_for,
        preview=preview.day_preview,
    ),
    StepDef(
        STEP_CASCADE,
        "temporal",
        "Week (on Sunday), month (last day) and year (31 December) summaries from the level below.",
        cascade,
        (StepKey.PINS_REVIEWED, STEP_DAY),
        preview.CASCADE_CHANGES,
        animas=animas_for,
        preview=preview.cascade_preview,
    ),
)
