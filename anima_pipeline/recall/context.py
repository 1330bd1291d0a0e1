"""Chat-time recall: what the agent gets back when it asks its memory.

The seeds' order of priority: resident memories (pinned ∪ most cited, always in context),
then passive recall (full-text and trigram match on the query, resident ones excluded),
within a character budget. Read-only: recall never writes.
"""

from __future__ import annotations

from pydantic import BaseModel

from anima_pipeline.store.db import Connection
from anima_pipeline.store.memories import _COLUMNS, MemoryRepo, SemanticMemory

RESIDENT_TOP_N = 20
PINNED_MAX = 40


class Recalled(BaseModel):
    memory: SemanticMemory
    score: float
    why: str


class RecallResult(BaseModel):
    anima_id: str
    query: str
    resident: list[SemanticMemory]
    recalled: list[Recalled]
    resident_overflow: int = 0

    def render(self) -> str:
        """The text block a host would put into the agent's context."""
        lines = ["# Resident memories"]
        lines += [f"- [[anima:{m.ref}]] {m.content}" for m in self.resident] or ["(none)"]
        lines.append(f"# Recalled for: {self.query}")
        lines += [f"- [[anima:{r.memory.ref}]] {r.memory.content}" for r in self.recalled] or ["(nothing matched)"]
        return "\n".join(lines)


def resident_set(conn: Connection, anima_id: str, top_n: int = RESIDENT_TOP_N, pinned_max: int = PINNED_MAX):
    """Pinned ∪ top-N by reference count. Pins beyond pinned_max are cut from the read (and
    reported), never unpinned in the store."""
    active = MemoryRepo(conn).active(anima_id)
    pinned = sorted((m for m in active if m.pinned), key=lambda m: (-m.reference_count, m.id))
    overflow = max(0, len(pinned) - pinned_max)
    pinned = pinned[:pinned_max]
    rest = sorted(
        (m for m in active if not m.pinned and m.reference_count > 0), key=lambda m: (-m.reference_count, m.id)
    )[:top_n]
    return pinned + rest, overflow


def recall(conn: Connection, anima_id: str, query: str, limit: int = 8, max_chars: int = 2000) -> RecallResult:
    resident, overflow = resident_set(conn, anima_id)
    exclude = [m.id for m in resident]
    rows = conn.execute(
        f"""SELECT {_COLUMNS},
                   ts_rank(search, plainto_tsquery('simple', %(q)s)) AS fts,
                   word_similarity(%(q)s, content) AS trgm
            FROM semantic_memory
            WHERE anima_id = %(a)s AND status = 'active' AND NOT (id = ANY(%(x)s))
              AND (search @@ plainto_tsquery('simple', %(q)s) OR word_similarity(%(q)s, content) > 0.3)
            ORDER BY ts_rank(search, plainto_tsquery('simple', %(q)s)) + word_similarity(%(q)s, content) DESC, id
            LIMIT %(n)s""",
        {"q": query, "a": anima_id, "x": exclude, "n": limit * 3},
    ).fetchall()
    recalled, used = [], 0
    for row in rows:
        fts, trgm = float(row.pop("fts")), float(row.pop("trgm"))
        mem = SemanticMemory.model_validate(row)
        if used + len(mem.content) > max_chars or len(recalled) >= limit:
            break
        used += len(mem.content)
        why = "full-text match" if fts > 0 else "similar wording"
        recalled.append(Recalled(memory=mem, score=round(fts + trgm, 4), why=why))
    return RecallResult(anima_id=anima_id, query=query, resident=resident, recalled=recalled, resident_overflow=overflow)
