"""What the temporal summaries show in Dagster: the summaries written (counted from the audit
log) and a Markdown line per summary, by level and size."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date

from anima_pipeline.night.steps.declaration import changes
from anima_pipeline.night.steps.previews import esc, written
from anima_pipeline.store import night_report
from anima_pipeline.store.db import Connection

DAY_CHANGES = changes("temporal_summary", summaries_written="upsert")
CASCADE_CHANGES = changes("temporal_summary", summaries_written="upsert")


def day_preview(conn: Connection, day: date, step: str, animas: Sequence[str]) -> str:
    rows = night_report.day_summaries(conn, day, animas)
    if not rows:
        return "_no day summary_"
    return "\n".join(f"- {esc(r['anima_id'])}: day summary, {len(r['content'])} chars" for r in rows)


cascade_preview = written("temporal_summary", "_no week, month or year closed_")
