"""Temporal summaries: what happened on a day, and the week / month / year built from them.

The day summary is the time-ordered view that semantic memory lacks: "what did we talk
about on the 18th" has no single fact to recall. It is written from the day's conversations
and the day's memory changes (light and deep sleep events of that day), so it also says what
was learned and what changed. The cascade compresses upwards from the level below: a week
on its Sunday from its days, a month on its last day from its weeks (days where a week
crosses the month boundary), a year on 31 December from its months. Each level is an
upsert per period, so re-runs replace and never add a second summary.

Offline, the summaries are extractive (deterministic sentence picking); with an LLM the
same input goes to prompts.TEMPORAL_DAY / TEMPORAL_CASCADE and the model writes the text
through write_temporal_summary.
"""

from __future__ import annotations

import re
from datetime import date, timedelta
from typing import Any

from anima_pipeline.llm.types import StepRequest, TextBlock, ToolCall, ToolResult, Usage
from anima_pipeline.sleep import prompts
from anima_pipeline.sleep.day_input import load_day, render_day
from anima_pipeline.sleep.identity import identity_context
from anima_pipeline.sleep.night import Night, StepOutcome, StepResult, plan_of, run_step
from anima_pipeline.store.archive import DayConversation, animas_active_between
from anima_pipeline.store.db import Connection, Database
from anima_pipeline.store.events import Audit
from anima_pipeline.store.layers import TemporalRepo
from anima_pipeline.store.memories import MemoryRepo
from anima_pipeline.tools.executor import ToolExecutor
from anima_pipeline.tools.schemas import tool_specs
from anima_pipeline.tools.scope import Scope

STEP_DAY = "temporal_summaries/day"
STEP_CASCADE = "temporal_summaries/cascade"
TOOLS = ("write_temporal_summary",)
MAX_SUMMARY_CHARS = 8000  # the tool's limit
HIGHLIGHTS = 8
LIST_ITEMS = 25
UNIT_CHARS = 300
# How many lines the cascade keeps from each input, by the input's level.
PICK = {"day": 3, "week": 4, "month": 5}
BELOW = {"week": ("day",), "month": ("week", "day"), "year": ("month", "week", "day")}


def _memory_steps() -> list[str]:
    # imported here: the step registry (cycle) imports this module
    from anima_pipeline.sleep.cycle import memory_step_keys

    return memory_step_keys()


# ---- sentence picking (offline) -------------------------------------------------------

_SPLIT = re.compile(r"(?<=[.!?。！？])\s+|(?<=[。！？])|\n+")
_GREETING = re.compile(
    r"^(?:hi|hello|hey|good (?:morning|night|evening|afternoon)|thanks|thank you|bye|goodbye|see you|"
    r"ok(?:ay)?|haha+|lol|nice to meet you|you're welcome|no problem|你好|您好|晚安|早安|早上好|晚上好|"
    r"谢谢|拜拜|再见|好的|知道啦|哈哈+)\b[\s,.!~，。！]*",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"\d+(?:[.,:/-]\d+)*|[一二两三四五六七八九十百千万]+(?:个|岁|年|月|日|号|点|公里|天|周)")
_DATE_WORD = re.compile(
    r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b|\b(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*day\b|"
    r"\b(?:tomorrow|yesterday|tonight|next week|last week|weekend)\b|明天|昨天|今天|下周|上周|周末|星期|礼拜",
    re.IGNORECASE,
)
_CAPITAL = re.compile(r"\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*")
_ZH_NAME = re.compile(r"叫[\u4e00-\u9fff]{2,3}")
_PREFIX = re.compile(r"^(?:\[\d\d:\d\d\]\s*)?(?:f-\d+\s+\(\w+\)\s+|[^:：]{1,30}[:：]\s+)?")
_CJK = re.compile(r"[\u4e00-\u9fff]")


def _names(text: str) -> int:
    """Capitalised word runs not opening the sentence (a crude, language-light name cue)."""
    return sum(1 for m in _CAPITAL.finditer(text) if m.start() > 0) + len(_ZH_NAME.findall(text))


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SPLIT.split(text) if s and s.strip()]


def informativeness(sentence: str) -> float | None:
    """How much a sentence says: names, numbers and dates count, questions and greetings
    do not. None for sentences not worth keeping at all (greetings, fragments)."""
    rest = _GREETING.sub("", sentence).strip()
    cjk = bool(_CJK.search(rest))
    if (len(rest) < 6) if cjk else (len(rest.split()) < 4):
        return None
    score = 2.0 * _names(rest) + 1.5 * len(_NUMBER.findall(rest)) + 2.0 * len(_DATE_WORD.findall(rest))
    size = len(rest) / 2 if cjk else len(rest.split())
    score += 1.0 if 6 <= size <= 40 else 0.0
    if rest.rstrip().endswith(("?", "？")):
        score -= 2.0
    return score


def _clip(text: str, limit: int = UNIT_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def highlights(convs: list[DayConversation], tz: Any, limit: int = HIGHLIGHTS) -> list[str]:
    """The day's most informative sentences, shown in the order they were said."""
    scored: list[tuple[float, int, str]] = []
    pos = 0
    for conv in convs:
        for m in conv.messages:
            who = m.speaker or m.role
            for s in sentences(m.content):
                pos += 1
                score = informativeness(s)
                if score is None or score <= 0:
                    continue
                bonus = 0.5 if m.role == "user" else 0.0  # facts are mostly what the user tells
                line = f"[{m.created_at.astimezone(tz):%H:%M}] {who}: {_clip(s)}"
                scored.append((score + bonus, pos, line))
    best = sorted(scored, key=lambda x: (-x[0], x[1]))[:limit]
    return [line for _, _, line in sorted(best, key=lambda x: x[1])]


_CONV_LINE = re.compile(r"^\d\d:\d\d–\d\d:\d\d\s+(?P<title>.+?)\s+\(\d+ messages\)$")
_HEADER_LINE = re.compile(r"^(?:Day|Week|Month|Year) \d{4}")
_FACT_LINE = re.compile(r"^f-\d+\s+\(\w+\)\s+")


def _pick_lines(content: str, k: int) -> tuple[list[str], list[str]]:
    """(conversation titles, the k most informative other lines in their order) of a
    lower-level summary. Learned facts weigh more than quoted highlights: they are the
    distilled part of a day."""
    titles, units = [], []
    for i, raw in enumerate(content.splitlines()):
        line = raw.strip().lstrip("-•* ").strip()
        if not line or line.endswith(":") or line.startswith("#") or _HEADER_LINE.match(line):
            continue
        if conv := _CONV_LINE.match(line):
            titles.append(conv.group("title").strip('"'))
            continue
        line = re.sub(r"^\[\d\d:\d\d\]\s*", "", line)
        fact = bool(_FACT_LINE.match(line))
        line = _FACT_LINE.sub("", line)
        score = informativeness(_PREFIX.sub("", line))
        if score is not None:
            units.append((score + (1.5 if fact else 0.0), i, _clip(line)))
    best = sorted(units, key=lambda x: (-x[0], x[1]))[:k]
    return titles, [u for _, _, u in sorted(best, key=lambda x: x[1])]


# ---- day ------------------------------------------------------------------------------


def memory_changes(conn: Connection, anima_id: str, day: date) -> list[dict]:
    """The day's semantic-memory events written by light and deep sleep, in order."""
    return conn.execute(
        """SELECT * FROM memory_event WHERE anima_id = %s AND day = %s AND table_name = 'semantic_memory'
             AND step = ANY(%s) ORDER BY id""",
        (anima_id, day, _memory_steps()),
    ).fetchall()


def render_changes(conn: Connection, events: list[dict]) -> tuple[list[str], list[str]]:
    """("Learned" lines, "Changed" lines) from the day's memory events."""
    created = list(dict.fromkeys(int(e["memory_id"]) for e in events if e["op"] == "create"))
    current = {m.id: m for m in MemoryRepo(conn).get_many(created)}
    learned = [
        f"f-{i} ({current[i].type}) {_clip(current[i].content)}"
        for i in created
        if i in current and current[i].status == "active"
    ]
    changed: list[str] = []
    merged: dict[Any, list[str]] = {}
    for e in events:
        mid, before, after = int(e["memory_id"]), e["before"] or {}, e["after"] or {}
        if e["op"] == "update" and mid not in created:
            if before.get("content") != after.get("content"):
                changed.append(
                    f'updated f-{mid}: "{_clip(before.get("content", ""), 140)}" → "{_clip(after.get("content", ""), 140)}"'
                )
            else:
                fields = sorted(
                    k for k in after if k not in ("updated_at",) and after.get(k) != before.get(k)
                )
                changed.append(f"updated f-{mid} ({', '.join(fields) or 'no visible change'})")
        elif e["op"] == "deprecate":
            succ = f", superseded by f-{after['superseded_by']}" if after.get("superseded_by") else ""
            reason = after.get("deprecated_reason") or "no reason"
            changed.append(f'deprecated f-{mid} "{_clip(before.get("content", ""), 140)}" ({reason}{succ})')
        elif e["op"] == "merge":
            merged.setdefault(after.get("superseded_by"), []).append(f"f-{mid}")
        elif e["op"] == "split":
            changed.append(f"f-{mid} {after.get('deprecated_reason') or 'split'}")
        elif e["op"] in ("pin", "unpin"):
            changed.append(f"{e['op']}ned f-{mid}")
    changed += [f"merged {', '.join(srcs)} into f-{target}" for target, srcs in merged.items()]
    return learned, changed


def _bullets(items: list[str], limit: int = LIST_ITEMS) -> list[str]:
    out = [f"- {x}" for x in items[:limit]]
    if len(items) > limit:
        out.append(f"- … and {len(items) - limit} more")
    return out


def day_summary(
    convs: list[DayConversation], learned: list[str], changed: list[str], day: date, tz: Any
) -> str:
    """The offline (extractive) day summary: conversations, highlights, learned, changed."""
    n_msgs = sum(len(c.messages) for c in convs)
    lines = [f"Day {day.isoformat()}: {len(convs)} conversation(s), {n_msgs} message(s).", "Conversations:"]
    convs_lines = []
    for c in convs:
        start, end = c.started_at.astimezone(tz), c.ended_at.astimezone(tz)
        title = f'"{c.title}"' if c.title else c.id
        convs_lines.append(f"{start:%H:%M}–{end:%H:%M} {title} ({len(c.messages)} messages)")
    lines += _bullets(convs_lines, 20)
    picked = highlights(convs, tz)
    if picked:
        lines += ["Highlights:", *_bullets(picked)]
    if learned:
        lines += ["Learned:", *_bullets(learned)]
    if changed:
        lines += ["Changed:", *_bullets(changed)]
    return "\n".join(lines)[:MAX_SUMMARY_CHARS]


def _debug_ids(conn: Connection, anima_id: str) -> set[str]:
    """Debug conversations (test harnesses, prompt checks) are not part of the anima's day."""
    rows = conn.execute("SELECT id FROM conversation WHERE anima_id = %s AND debug", (anima_id,)).fetchall()
    return {r["id"] for r in rows}


def summarize_day(db: Database, night: Night, anima_id: str) -> StepResult:
    def body(conn: Connection, audit: Audit) -> StepOutcome:
        debug = _debug_ids(conn, anima_id)
        convs = [c for c in load_day(conn, anima_id, night.start, night.end) if c.id not in debug]
        if not convs:
            return StepOutcome(stats={"levels": 0, "conversations": 0, "input_chars": 0, "summary_chars": 0})
        events = memory_changes(conn, anima_id, night.day)
        learned, changed = render_changes(conn, events)
        day = night.day.isoformat()
        system = identity_context(conn, anima_id)
        msg1 = render_day(convs, night.tz, day)
        msg2 = prompts.tagged(
            "changes",
            "\n".join(
                [
                    "# Memory changes of the day",
                    "Learned:",
                    *_bullets(learned),
                    "Changed:",
                    *_bullets(changed),
                ]
            ),
        )
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
            [msg1, msg2, period, prompts.TEMPORAL_DAY],
            ("day", night.day, night.day),
            call,
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


class _PeriodGuard:
    """The executor, restricted to one (level, period): the scope limits levels, and this
    keeps a model from overwriting another day's or week's summary by a wrong date."""

    def __init__(self, executor: ToolExecutor, level: str, start: date, end: date) -> None:
        self.executor, self.level, self.start, self.end = executor, level, start.isoformat(), end.isoformat()

    def call(self, name: str, input: dict[str, Any]) -> ToolResult:
        if name == "write_temporal_summary" and isinstance(input, dict):
            got = (input.get("level"), str(input.get("period_start")), str(input.get("period_end")))
            if got != (self.level, self.start, self.end):
                return ToolResult(
                    is_error=True,
                    content=f"this step writes level {self.level!r} for period_start {self.start}, "
                    f"period_end {self.end}; got {got[0]!r} {got[1]}–{got[2]}",
                )
        return self.executor.call(name, input)


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
) -> tuple[Usage, dict[str, int]]:
    """One write_temporal_summary for one period, through the engine (offline: `call`)."""
    scope = Scope(anima_id=anima_id, tools=TOOLS, summary_levels=frozenset({period[0]}))
    executor = ToolExecutor(conn, scope, audit)
    request = StepRequest(
        step=step,
        system=prompts.system_blocks(prompts.TEMPORAL_SYSTEM, night.day, night.tz, system),
        user=[TextBlock(text=t, cache=i == 0) for i, t in enumerate(user)],
        tools=tool_specs(TOOLS),
        must_write=True,
    )
    usage = night.engine.run(request, _PeriodGuard(executor, *period), plan_of(call))
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
        rows = conn.execute(
            """SELECT DISTINCT anima_id FROM temporal_summary
               WHERE level = 'day' AND period_start >= %s AND period_start <= %s""",
            (min(p[1] for p in periods), night.day),
        ).fetchall()
        found |= {r["anima_id"] for r in rows}
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


def _label(row: dict) -> str:
    if row["level"] == "day":
        return row["period_start"].isoformat()
    if row["level"] == "month":
        return row["period_start"].strftime("%Y-%m")
    return f"{row['level']} {row['period_start'].isoformat()}–{row['period_end'].isoformat()}"


def period_summary(level: str, start: date, end: date, inputs: list[dict]) -> str:
    """The offline cascade: the most informative lines of each input, labelled by period."""
    head = {
        "week": f"Week {start.isocalendar().year}-W{start.isocalendar().week:02d} ({start} – {end})",
        "month": f"Month {start:%Y-%m}",
        "year": f"Year {start.year}",
    }[level]
    lines = [
        f"{head}: built from {len(inputs)} summaries ({', '.join(sorted({r['level'] for r in inputs}))})."
    ]
    for row in inputs:
        titles, picked = _pick_lines(row["content"], PICK.get(row["level"], 3))
        parts = [" / ".join(_clip(t, 80) for t in titles[:4])] if titles else []
        parts += ["; ".join(picked)] if picked else []
        if parts:
            lines.append(f"- {_label(row)}: " + " — ".join(parts))
    return "\n".join(lines)[:MAX_SUMMARY_CHARS]


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
            msg1 = prompts.tagged(
                "summaries",
                "\n\n".join(
                    [f"# Summaries below the {level} {start} – {end}"]
                    + [f"## {_label(r)} ({r['level']})\n{r['content']}" for r in inputs]
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
            prompt = prompts.TEMPORAL_CASCADE.format(level=level)
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
