"""The offline self-layer blocks: deterministic templates over the active memories
(relationships: named people and pets with what is known about them; current_state: the
last days' experiences and plans; values: the most confident and cited opinions; persona:
imprints and preferences). Pure: no database.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from anima_pipeline.text.entities import clip, entity_index, entity_kind, plan_of_memory

if TYPE_CHECKING:
    from anima_pipeline.store.memories import SemanticMemory

RECENT_DAYS = 7
MAX_PEOPLE, MAX_PETS, FACTS_PER_ENTITY = 12, 6, 4
MAX_ITEMS = 8
BLOCK_CHARS = 8000  # the tool's limit


def strength(m: SemanticMemory) -> tuple:
    """Most confident, then most cited, then newest: what the self should lead with."""
    return (-round(m.confidence, 3), -round(m.reference_count, 3), -m.id)


def _when(m: SemanticMemory) -> datetime:
    return m.observed_at or m.created_at


def relationships(mems: list[SemanticMemory], anima_id: str = "") -> str:
    index = entity_index(mems, frozenset({anima_id.lower()}))
    by_id = {m.id: m for m in mems}
    groups: dict[str, list[str]] = {"person": [], "pet": []}
    for name in sorted(index, key=lambda e: (-len(index[e]), e)):
        about = sorted((by_id[i] for i in index[name]), key=strength)
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
    chosen = sorted((m for m in mems if m.type in types), key=strength)[:MAX_ITEMS]
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
