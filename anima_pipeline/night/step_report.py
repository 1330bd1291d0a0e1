"""What one (day, step) materialization reports, as plain values: what a person plots and
reads in the UI (defs/night/metadata.py only translates it into Dagster's metadata values).

- Only the counts the step can change (its declaration's `changes`), taken from the audit
  log (memory_event) as (table, op) pairs, so they mean the same for the offline and the LLM
  engine; the same keys on every partition (0 when nothing happened, never missing).
- `animas`, `duration_s`, and `input_chars` for the steps that build a model request.
- tokens / cache / cost / calls only when an LLM engine ran (offline they are always 0).
- `dagster/row_count`: rows of the table the step writes, for the animas that ran it.
- A Markdown `preview` of what the step wrote (its folder's preview.py): by id, size and
  count, never the text (night/steps/previews.py says why).
"""

from __future__ import annotations

from datetime import date

from anima_pipeline.core.steps import StepKey
from anima_pipeline.night import runner
from anima_pipeline.night.frame import StepResult
from anima_pipeline.night.registry import BY_KEY
from anima_pipeline.night.steps.previews import PREVIEW_ROWS, esc
from anima_pipeline.store import night_report
from anima_pipeline.store.db import Connection

LLM_KEYS = ("llm_calls", "tokens_in", "tokens_out", "cache_read", "cache_write", "cost_usd")


class Markdown(str):
    """A value the UI renders as Markdown (every other str is plain text)."""

    __slots__ = ()


Figure = int | float | str  # a Markdown is a str


def step_report(
    conn: Connection, day: date, step: str, results: list[StepResult], *, llm: bool, mode: str
) -> dict[str, Figure]:
    """The figures of one (day, step), summed over the animas that ran it, in display order."""
    spec = BY_KEY[StepKey(step)]
    animas = sorted({r.anima_id for r in results})
    summary = runner.summarize(results)
    # a quiet (day, step) reads nothing: its zeros are known (a year has thousands of them)
    counts = night_report.change_counts(conn, day, step, animas) if animas else {}
    out: dict[str, Figure] = {key: counts.get(pair, 0) for key, pair in spec.changes.items()}
    out["animas"] = len(animas)
    out["already_done"] = int(summary["already_done"])  # skipped: done before
    out["duration_s"] = float(summary["duration_s"])
    if spec.sends_request:
        out["input_chars"] = int(summary.get("input_chars", 0))
    if llm:
        for key in LLM_KEYS:
            value = summary.get(key, 0)
            out[key] = float(value) if key == "cost_usd" else int(value)
    declined = [r for r in results if r.stats.get("declined")]
    out["declined"] = len(declined)  # animas whose model wrote nothing
    if declined:
        out["declined_text"] = Markdown(
            "| anima | the model said |\n|---|---|\n"
            + "\n".join(
                f"| {esc(r.anima_id)} | {esc(str(r.stats.get('declined_text', '')))} |"
                for r in declined[:PREVIEW_ROWS]
            )
        )
    if spec.skips_unchanged:
        out["skipped_unchanged"] = int(summary.get("skipped_unchanged", 0))
    out["mode"] = mode
    out["dagster/row_count"] = night_report.row_count(conn, spec.table, animas) if animas else 0
    if spec.preview is not None and animas:
        out["preview"] = Markdown(spec.preview(conn, day, step, animas))
    return out
