"""The identity context every memory step carries (seeds: "all memory processing must carry
the self layer's six blocks + resident memory"): the system prompt of every LLM call."""

from __future__ import annotations

from anima_pipeline.store.db import Connection
from anima_pipeline.store.layers import SelfBlockRepo
from anima_pipeline.store.memories import MemoryRepo, SemanticMemory

RESIDENT_IN_PROMPT = 20


def identity_context(
    conn: Connection, anima_id: str, resident: int = RESIDENT_IN_PROMPT, memories: list[SemanticMemory] | None = None
) -> str:
    """`memories` pins the resident set to a snapshot (deep sleep keeps its prompt prefix
    byte-identical across rounds even while the rounds change the store)."""
    blocks = SelfBlockRepo(conn).all(anima_id)
    lines = [f"# Self of anima {anima_id}"]
    for name, content in blocks.items():
        lines.append(f"## {name}\n{content.strip() or '(empty)'}")
    lines.append(f"# Resident memories (pinned first, then most cited; top {resident})")
    if memories is None:
        mems = MemoryRepo(conn).resident(anima_id, resident)
    else:
        mems = sorted(memories, key=lambda m: (not m.pinned, -m.reference_count, m.id))[:resident]
    if not mems:
        lines.append("(none yet)")
    for m in mems:
        pin = " [pinned]" if m.pinned else ""
        lines.append(f"- {m.ref} ({m.type}){pin}: {m.content}")
    return "\n".join(lines)
