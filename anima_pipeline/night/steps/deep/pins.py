"""Round 4 of deep sleep, offline: `stale_pins`, which pins no longer earn their place in the
resident set (stale, or beyond the resident cap)."""

from __future__ import annotations

from datetime import datetime, timedelta

from anima_pipeline.config import RecallSettings
from anima_pipeline.night.steps.deep.memory_view import MemoryView

# the pins the resident read holds by default (the recall side cuts the rest, recall/resident.py)
RESIDENT_CAP: int = RecallSettings.model_fields["pinned_max"].default


def _last_activity(m: MemoryView) -> datetime:
    return m.last_referenced_at or m.pinned_at or m.updated_at


def stale_pins(
    memories: list[MemoryView],
    now: datetime,
    stale_days: int = 30,
    resident_cap: int = RESIDENT_CAP,
) -> list[tuple[int, str]]:
    """Pins to suggest unpinning, as (id, reason).

    Stale: pinned and not referenced within `stale_days` (last_referenced_at, else
    pinned_at, else updated_at). Over cap: if the pins that remain still exceed
    `resident_cap`, the least referenced beyond the cap (lowest reference_count, then
    longest unused, then lowest id) — the resident read is capped anyway, so these pins
    do nothing but crowd it. Stale first (oldest activity first), then over-cap.
    Datetimes must be all timezone-aware (or all naive)."""
    cutoff = now - timedelta(days=stale_days)
    pinned = [m for m in memories if m.pinned]
    stale = sorted((m for m in pinned if _last_activity(m) < cutoff), key=lambda m: (_last_activity(m), m.id))
    out = [
        (
            m.id,
            (
                f"stale pin: not referenced for {(now - _last_activity(m)).days} days "
                f"(since {_last_activity(m).date().isoformat()}; threshold {stale_days} days)"
            ),
        )
        for m in stale
    ]
    stale_ids = {m.id for m in stale}
    remaining = [m for m in pinned if m.id not in stale_ids]
    if len(remaining) > resident_cap:
        ranked = sorted(remaining, key=lambda m: (-m.reference_count, -_last_activity(m).timestamp(), m.id))
        for m in sorted(ranked[resident_cap:], key=lambda m: (m.reference_count, _last_activity(m), m.id)):
            out.append(
                (
                    m.id,
                    (
                        f"over the resident cap: {len(remaining)} pins for {resident_cap} resident slots, "
                        f"and this one is among the least referenced (reference_count {m.reference_count:g})"
                    ),
                )
            )
    return out
