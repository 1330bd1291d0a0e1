"""The metadata of one (day, step) materialization: the night's own report of it
(night/step_report.py), translated into Dagster's typed metadata values."""

from __future__ import annotations

from datetime import date

import dagster as dg

from anima_pipeline.night.frame import StepResult
from anima_pipeline.night.step_report import Figure, Markdown, step_report
from anima_pipeline.store.db import Connection


def step_metadata(
    conn: Connection, day: date, step: str, results: list[StepResult], *, llm: bool, mode: str
) -> dict[str, dg.MetadataValue]:
    """Typed metadata of one (day, step), summed over the animas that ran it."""
    return {key: _value(v) for key, v in step_report(conn, day, step, results, llm=llm, mode=mode).items()}


def _value(v: Figure) -> dg.MetadataValue:
    if isinstance(v, Markdown):
        return dg.MetadataValue.md(str(v))
    if isinstance(v, str):
        return dg.MetadataValue.text(v)
    if isinstance(v, float):
        return dg.MetadataValue.float(v)
    return dg.MetadataValue.int(v)
