"""The offline light-sleep plans: the tool calls of each light-sleep stage, from the same
inputs the step gives the LLM (the day's conversations, the memories they already produced,
the recent experience memories, the narratives). Pure: no database.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from anima_pipeline.core.types import SIGNIFICANCE
from anima_pipeline.llm.contract import ToolBatch, ToolCall, ToolResult
from anima_pipeline.night.steps.light.anchors import detect_anchors
from anima_pipeline.night.steps.light.dedup import dedup_against
from anima_pipeline.night.steps.light.facts import extract_facts
from anima_pipeline.night.steps.light.records import Utterance
from anima_pipeline.night.steps.light.significance import narrative_significance
from anima_pipeline.night.steps.light.small_talk import is_small_talk

if TYPE_CHECKING:
    from anima_pipeline.store.archive import DayConversation
    from anima_pipeline.store.memories import SemanticMemory


def day_utterances(convs: list[DayConversation], tz: ZoneInfo) -> list[Utterance]:
    return [
        Utterance(
            conversation_id=c.id,
            message_id=m.external_id,
            role=m.role,
            speaker=m.speaker,
            text=m.content,
            created_at=m.created_at.astimezone(tz),
        )
        for c in convs
        for m in c.messages
    ]


def semantic_plan(
    chunk: list[DayConversation],
    existing: list[SemanticMemory],
    tz: ZoneInfo,
    retired: Sequence[SemanticMemory] = (),
) -> Generator[ToolBatch, list[ToolResult], None]:
    utterances = day_utterances(chunk, tz)
    if is_small_talk(utterances):
        return
    candidates = extract_facts(utterances)
    if retired:
        # A fact that deep sleep already merged, split or retired is known: re-extracting it on
        # a forced re-run must not bring it back as a new memory.
        known = {
            d.candidate
            for d in dedup_against(candidates, [(m.id, m.content) for m in retired])
            if d.action != "create"
        }
        candidates = [c for c in candidates if c not in known]
    current = {m.id: m for m in existing}
    calls: list[ToolCall] = []
    for d in dedup_against(candidates, [(m.id, m.content) for m in existing]):
        if d.action == "create":
            c = d.candidate
            calls.append(
                ToolCall(
                    name="create_semantic_memory",
                    input={
                        "type": c.type,
                        "content": c.content,
                        "confidence": round(c.confidence, 2),
                        "source_sessions": [c.conversation_id],
                        "observed_at": c.observed_at.isoformat(),
                    },
                )
            )
        elif d.action == "update" and d.memory_id in current:
            old = current[d.memory_id]
            sources = sorted(set(old.source_sessions) | {d.candidate.conversation_id})
            calls.append(
                ToolCall(
                    name="update_semantic_memory",
                    input={"id": old.ref, "content": d.content, "source_sessions": sources},
                )
            )
    if calls:
        # each decision was made against the store as it was: no call reads another's result
        yield ToolBatch(calls=calls)


def anchor_plan(
    convs: list[DayConversation], tz: ZoneInfo, seen: set
) -> Generator[ToolCall, ToolResult, None]:
    for a in detect_anchors(day_utterances(convs, tz)):
        if (a.conversation_id, a.occurred_at, a.emotion) in seen:
            continue  # a re-run recognises its own anchors
        yield ToolCall(
            name="create_emotional_anchor",
            input={
                "conversation_id": a.conversation_id,
                "occurred_at": a.occurred_at.isoformat(),
                "emotion": a.emotion,
                "valence": a.valence,
                "arousal": a.arousal,
                "intensity": a.intensity,
                "trigger": a.trigger[:500],
                "note": a.note,
            },
        )


def narrative_plan(
    recent: list[SemanticMemory], told: set[int], tz: ZoneInfo
) -> Generator[ToolCall, ToolResult, None]:
    """Restraint: only milestones and turning points become narratives, once each."""
    for m in recent:
        significance = narrative_significance(m.content)
        if m.id in told or significance not in ("milestone", "turning_point"):
            continue
        when = m.observed_at.astimezone(tz) if m.observed_at else None
        yield ToolCall(
            name="create_autobiographical_memory",
            input={
                "title": title(m.content),
                "narrative": f"On {when:%Y-%m-%d}: {m.content}" if when else m.content,
                "significance": significance,
                "occurred_from": when.isoformat() if when else None,
                "source_memory_ids": [m.ref],
            },
        )


_CLAUSE_END = "，、；：,;:"
_LATIN_TAIL = re.compile(r"[A-Za-z0-9][A-Za-z0-9\-:./']*$")  # a date, number or Latin word


def title(content: str, words: int = 9, chars: int = 24) -> str:
    """The memory's first words: up to `words` words, or `chars` characters of Chinese text cut
    at its last clause boundary (，、；：) in them, else before a date, number or Latin word
    the cut would fall inside ("从2026-11-" never); "…" marks a cut."""
    text = content.rstrip(".。!！")
    if any("\u4e00" <= ch <= "\u9fff" for ch in text):
        if len(text) <= chars:
            return text
        cut = text[:chars]
        boundary = max(cut.rfind(p) for p in _CLAUSE_END)
        if boundary >= chars // 3:
            return cut[:boundary] + "…"
        inside = _LATIN_TAIL.search(cut)
        if inside and re.match(r"[A-Za-z0-9\-:./']", text[chars]) and inside.start() > 0:
            cut = cut[: inside.start()]
        return cut.rstrip() + "…"
    parts = text.split()
    return " ".join(parts[:words]) + ("…" if len(parts) > words else "")


_ORDER = SIGNIFICANCE[::-1]  # the weightiest first
_LABEL = {
    "turning_point": "Turning points",
    "milestone": "Milestones",
    "notable": "Notable",
    "routine": "Everyday",
}


def autobiography_outline(narratives: list[dict], now: datetime, tz: ZoneInfo) -> str:
    """Grouped by significance, titles only; granularity fades with distance: the last 30 days
    keep every narrative, the last year drops routine ones, older only milestones and turning
    points, grouped by year."""
    recent, year, older = [], [], []
    for n in narratives:
        when = n["occurred_from"] or n["created_at"]
        age = now - when
        if age <= timedelta(days=30):
            recent.append(n)
        elif age <= timedelta(days=365):
            if n["significance"] != "routine":
                year.append(n)
        elif n["significance"] in ("milestone", "turning_point"):
            older.append(n)
    lines = []
    for heading, group in (("Recent (last 30 days)", recent), ("This year", year)):
        if group:
            lines.append(f"## {heading}")
            for sig in _ORDER:
                items = [n for n in group if n["significance"] == sig]
                if items:
                    lines.append(f"- {_LABEL[sig]}")
                    lines += [
                        f"  - {short_date(n['occurred_from'], tz)} {n['title']}" for n in _by_time(items)
                    ]
    if older:
        lines.append("## Earlier years")
        for y in sorted(
            {(n["occurred_from"] or n["created_at"]).astimezone(tz).year for n in older}, reverse=True
        ):
            items = [n for n in older if (n["occurred_from"] or n["created_at"]).astimezone(tz).year == y]
            lines.append(f"- {y}")
            lines += [f"  - {n['title']}" for n in _by_time(items)]
    return "\n".join(lines)


def _by_time(items: list[dict]) -> list[dict]:
    return sorted(items, key=lambda n: (n["occurred_from"] or n["created_at"], n["id"]), reverse=True)


def short_date(value: datetime | None, tz: ZoneInfo) -> str:
    return value.astimezone(tz).strftime("%Y-%m-%d") if value else "????-??-??"
