"""The identity context every memory step carries: the self layer's six blocks and the resident
memories, the system prompt of every LLM call, so every step judges as the anima would."""

from __future__ import annotations

from anima_pipeline.recall.resident import PINNED_MAX, RESIDENT_TOP_N, resident_set
from anima_pipeline.store.db import Connection
from anima_pipeline.store.layers import SelfBlockRepo
from anima_pipeline.store.memories import SemanticMemory

RESIDENT_IN_PROMPT = 20


def identity_context(
    conn: Connection,
    anima_id: str,
    resident: int = RESIDENT_IN_PROMPT,
    memories: list[SemanticMemory] | None = None,
    blocks: dict[str, str] | None = None,
) -> str:
    """`memories` and `blocks` pin the resident set and the self blocks to a snapshot (deep
    sleep keeps its prompt prefix byte-identical across rounds even while the rounds, the
    dream and the self refresh change the store)."""
    if blocks is None:
        blocks = SelfBlockRepo(conn).all(anima_id)
    lines = [f"# Self of anima {anima_id}"]
    for name, content in blocks.items():
        lines.append(f"## {name}\n{content.strip() or '(empty)'}")
    lines.append(f"# Resident memories (pinned first, then most cited; top {resident})")
    if memories is None:
        mems, _ = resident_set(conn, anima_id)
    else:  # the same rule as resident_set, over a snapshot
        pinned = sorted((m for m in memories if m.pinned), key=lambda m: (-m.reference_count, m.id))
        cited = sorted(
            (m for m in memories if not m.pinned and m.reference_count > 0),
            key=lambda m: (-m.reference_count, m.id),
        )
        mems = pinned[:PINNED_MAX] + cited[:RESIDENT_TOP_N]
    mems = mems[:resident]
    if not mems:
        lines.append("(none yet)")
    for m in mems:
        pin = " [pinned]" if m.pinned else ""
        lines.append(f"- {m.ref} ({m.type}){pin}: {m.content}")
    return "\n".join(lines)
