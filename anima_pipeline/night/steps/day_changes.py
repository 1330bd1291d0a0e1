"""The day's changes to semantic memory as the prompts show them: what the day summary and the
self refresh both read (the light- and deep-sleep events of the day, rendered as "Learned"
and "Changed" lines).
"""

from __future__ import annotations

from datetime import date
from typing import Any

from anima_pipeline.core.steps import MEMORY_STEPS
from anima_pipeline.night.steps.framing import tagged
from anima_pipeline.night.steps.temporal.plan import UNIT_CHARS, bullets
from anima_pipeline.store.db import Connection
from anima_pipeline.store.events import semantic_writes
from anima_pipeline.store.memories import MemoryRepo
from anima_pipeline.text.entities import clip


def memory_changes(conn: Connection, anima_id: str, day: date) -> list[dict]:
    """The day's semantic-memory events written by light and deep sleep, in order."""
    return semantic_writes(conn, anima_id, day, list(MEMORY_STEPS))


def render_changes(conn: Connection, events: list[dict]) -> tuple[list[str], list[str]]:
    """("Learned" lines, "Changed" lines) from the day's memory events."""
    created = list(dict.fromkeys(int(e["memory_id"]) for e in events if e["op"] == "create"))
    current = {m.id: m for m in MemoryRepo(conn).get_many(created)}
    learned = [
        f"f-{i} ({current[i].type}) {clip(current[i].content, UNIT_CHARS)}"
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
                    f'updated f-{mid}: "{clip(before.get("content", ""), 140)}" → "{clip(after.get("content", ""), 140)}"'
                )
            else:
                fields = sorted(
                    k for k in after if k not in ("updated_at",) and after.get(k) != before.get(k)
                )
                changed.append(f"updated f-{mid} ({', '.join(fields) or 'no visible change'})")
        elif e["op"] == "deprecate":
            succ = f", superseded by f-{after['superseded_by']}" if after.get("superseded_by") else ""
            reason = after.get("deprecated_reason") or "no reason"
            changed.append(f'deprecated f-{mid} "{clip(before.get("content", ""), 140)}" ({reason}{succ})')
        elif e["op"] == "merge":
            merged.setdefault(after.get("superseded_by"), []).append(f"f-{mid}")
        elif e["op"] == "split":
            changed.append(f"f-{mid} {after.get('deprecated_reason') or 'split'}")
        elif e["op"] in ("pin", "unpin"):
            changed.append(f"{e['op']}ned f-{mid}")
    changed += [f"merged {', '.join(srcs)} into f-{target}" for target, srcs in merged.items()]
    return learned, changed


def changes_message(header: str, learned: list[str], changed: list[str]) -> str:
    """The changes as one tagged message under `header`."""
    return tagged(
        "changes", "\n".join([header, "Learned:", *bullets(learned), "Changed:", *bullets(changed)])
    )
