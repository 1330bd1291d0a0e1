"""The resident set: pinned ∪ top-N by decayed citation weight, always in the agent's context.

The rest of chat-time recall (passive recall of memories, episodic recall of messages,
temporal summaries, each in its own section) is `recall.assemble` (anima_pipeline/recall/assemble.py).
Read-only: recall never writes.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from anima_pipeline.config import RecallSettings
from anima_pipeline.store.db import Connection
from anima_pipeline.store.memories import SemanticMemory, send_resident_rows

log = logging.getLogger(__name__)

RESIDENT_TOP_N: int = RecallSettings.model_fields["resident_top_n"].default
PINNED_MAX: int = RecallSettings.model_fields["pinned_max"].default


# --- resident set ---------------------------------------------------------------------


def resident_set(
    conn: Connection, anima_id: str, top_n: int = RESIDENT_TOP_N, pinned_max: int = PINNED_MAX
) -> tuple[list[SemanticMemory], int]:
    """Pinned ∪ top-N by reference count. Pins beyond pinned_max are cut from the read (most
    cited pins kept, then the oldest id), reported as overflow and logged, never unpinned."""
    return send_resident(conn, anima_id, top_n, pinned_max)()


def send_resident(
    conn: Connection, anima_id: str, top_n: int = RESIDENT_TOP_N, pinned_max: int = PINNED_MAX
) -> Callable[[], tuple[list[SemanticMemory], int]]:
    """`resident_set` in two halves: queue the statement (pipeline mode), then take the result."""
    rows_of = send_resident_rows_cut(conn, anima_id, top_n, pinned_max)

    def take() -> tuple[list[SemanticMemory], int]:
        rows, overflow = rows_of()
        return [SemanticMemory.model_validate(r) for r in rows], overflow

    return take


def send_resident_rows_cut(
    conn: Connection, anima_id: str, top_n: int = RESIDENT_TOP_N, pinned_max: int = PINNED_MAX
) -> Callable[[], tuple[list[dict[str, Any]], int]]:
    """`send_resident` with the store's rows (memory columns) instead of validated models: what
    the context needs (its lines, the ids to leave out of passive recall), without validating
    each row the store just returned on every context call."""
    rows_of = send_resident_rows(conn, anima_id, top_n, pinned_max)

    def take() -> tuple[list[dict[str, Any]], int]:
        rows = rows_of()
        pinned_total = int(rows[0]["pinned_total"])
        memories = [
            {k: v for k, v in r.items() if k not in ("pinned_total", "part")}
            for r in rows
            if r["id"] is not None
        ]
        overflow = max(0, pinned_total - max(0, pinned_max))
        if overflow:
            log.warning(
                "anima %s has %d pins, %d over pinned_max=%d: cut from the resident read",
                anima_id,
                pinned_total,
                overflow,
                pinned_max,
            )
        return memories, overflow

    return take
