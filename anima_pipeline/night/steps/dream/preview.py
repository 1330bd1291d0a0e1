"""What the dream shows in Dagster: the entries written and the confidences it changed
(counted from the audit log), and a Markdown line per entry with the size of each part."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from anima_pipeline.night.steps.declaration import changes
from anima_pipeline.night.steps.previews import esc
from anima_pipeline.store import night_report
from anima_pipeline.store.db import Connection
from anima_pipeline.store.layers import DREAM_FIELDS

CHANGES = {
    **changes("dream_journal", dreams_written="upsert"),
    **changes("semantic_memory", confidence_updated="confidence"),
}


def preview(conn: Connection, day: date, step: str, animas: Sequence[str]) -> str:
    rows = night_report.dream_entries(conn, day, animas)
    if not rows:
        return "_no dream_"
    return "\n".join(
        f"- {esc(r['anima_id'])}: "
        + ", ".join(f"{len(r[f] or [])} {f.replace('_', ' ')}" for f in DREAM_FIELDS)
        for r in rows
    )
