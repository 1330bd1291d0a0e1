"""The metadata of one (day, step) materialization: what a person plots and reads in the UI.

- Only the counts the step can change, taken from the audit log (memory_event) as
  (table, op) pairs, so they mean the same for the offline and the LLM engine; the same keys
  on every partition (0 when nothing happened, never missing).
- `animas`, `duration_s`, and `input_chars` for the steps that build a model request.
- tokens / cache / cost / calls only when an LLM engine ran (offline they are always 0).
- `dagster/row_count`: rows of the table the step writes, for the animas that ran it.
- A Markdown `preview` of what the step wrote: the memories it created / changed / deprecated
  (first 20, ids and ops), the day summary, the dream entry, the self blocks — by id, size and
  count, never their text. Dagster keeps every materialization's metadata in its event log,
  and Dagster 1.13 cannot remove it selectively (`wipe_assets` only hides an asset's events,
  `wipe_asset_partitions` is not implemented by the SQL storages, `delete_run` drops a whole
  run, every anima's): text kept here would outlive a `forget --purge`. The text is one
  command away: `anima export --markdown`, `anima recall`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date

import dagster as dg

from anima_pipeline.core.steps import StepKey
from anima_pipeline.night import runner
from anima_pipeline.night.frame import StepResult
from anima_pipeline.store import night_report
from anima_pipeline.store.db import Connection
from anima_pipeline.store.layers import DREAM_FIELDS

PREVIEW_ROWS = 20
PREVIEW_CHARS = 400  # per name in a preview; the text itself is in the store and in `anima export`


def _ops(table: str, **ops: str) -> dict[str, tuple[str, str]]:
    """{metadata key: (table, op)} for the ops of one table, written as key=op."""
    return {key: (table, op) for key, op in ops.items()}


# step -> {metadata key: (table, op) of the audit log}; the first table is the one the step writes
STEP_CHANGES: dict[str, dict[str, tuple[str, str]]] = {
    StepKey.CLEANED: _ops("conversation", conversations_deleted="delete"),
    StepKey.SEMANTIC_EXTRACTED: _ops(
        "semantic_memory", created="create", updated="update", deprecated="deprecate"
    ),
    StepKey.ANCHORS_MARKED: _ops("emotional_anchor", anchors_created="create"),
    StepKey.AUTOBIOGRAPHY_NARRATED: _ops(
        "autobiographical_memory", narratives_created="create", narratives_deprecated="deprecate"
    ),
    StepKey.AUTOBIOGRAPHY_SUMMARY: _ops("self_block", self_blocks_written="write"),
    StepKey.DECONFLICTED: _ops("semantic_memory", deprecated="deprecate"),
    StepKey.SPLIT: _ops("semantic_memory", split="split", created="create"),
    StepKey.MERGED: _ops("semantic_memory", merged="merge", created="create"),
    StepKey.PINS_REVIEWED: _ops("semantic_memory", pinned="pin", unpinned="unpin"),
    StepKey.REFERENCES_SYNCED: {
        **_ops("memory_reference", references_created="create", references_repointed="repoint"),
        **_ops("semantic_memory", reference_counts_updated="reference_count"),
    },
    StepKey.DAY_SUMMARY: _ops("temporal_summary", summaries_written="upsert"),
    StepKey.CASCADE: _ops("temporal_summary", summaries_written="upsert"),
    StepKey.DREAM: {
        **_ops("dream_journal", dreams_written="upsert"),
        **_ops("semantic_memory", confidence_updated="confidence"),
    },
    StepKey.SELF_REFRESHED: _ops("self_block", self_blocks_written="write"),
}

# the table each step writes (its dagster/row_count)
STEP_TABLE: dict[str, str] = {step: next(iter(changes.values()))[0] for step, changes in STEP_CHANGES.items()}

# steps without a model request (nothing to measure as input_chars)
NO_REQUEST = frozenset({StepKey.CLEANED, StepKey.REFERENCES_SYNCED})

LLM_KEYS = ("llm_calls", "tokens_in", "tokens_out", "cache_read", "cache_write", "cost_usd")
# steps that send nothing for an anima whose store did not change that day (docs/cost.md):
# how many animas they skipped so, on every partition (0 included)
SKIP_UNCHANGED = frozenset({StepKey.DREAM, StepKey.SELF_REFRESHED})


def _esc(text: str) -> str:
    """One line of Markdown: no line breaks, no table pipes, clipped (ids and names, not text)."""
    line = " ".join(str(text).split()).replace("|", "\\|")
    return line if len(line) <= PREVIEW_CHARS else line[: PREVIEW_CHARS - 1] + "…"


def _memories_md(conn: Connection, day: date, step: str, animas: Sequence[str]) -> str:
    rows = night_report.changed_memories(conn, day, [step], animas, PREVIEW_ROWS)
    if not rows:
        return "_no memory changed_"
    lines = ["| anima | memory | change | chars |", "|---|---|---|---|"]
    lines += [
        f"| {_esc(r['anima_id'])} | f-{r['memory_id']} | {r['op']} | {len(r['content'])} |" for r in rows
    ]
    return "\n".join(lines)


def _day_summary_md(conn: Connection, day: date, step: str, animas: Sequence[str]) -> str:
    rows = night_report.day_summaries(conn, day, animas)
    if not rows:
        return "_no day summary_"
    return "\n".join(f"- {_esc(r['anima_id'])}: day summary, {len(r['content'])} chars" for r in rows)


def _written_md(table: str, empty: str) -> Callable[[Connection, date, str, Sequence[str]], str]:
    def render(conn: Connection, day: date, step: str, animas: Sequence[str]) -> str:
        rows = night_report.written_rows(conn, day, step, table, animas, PREVIEW_ROWS)
        if not rows:
            return empty
        return "\n".join(
            f"- {_esc(r['anima_id'])}: {_esc(r['level'] or r['memory_id'])}, {len(r['content'])} chars"
            for r in rows
        )

    return render


def _dream_md(conn: Connection, day: date, step: str, animas: Sequence[str]) -> str:
    rows = night_report.dream_entries(conn, day, animas)
    if not rows:
        return "_no dream_"
    return "\n".join(
        f"- {_esc(r['anima_id'])}: "
        + ", ".join(f"{len(r[f] or [])} {f.replace('_', ' ')}" for f in DREAM_FIELDS)
        for r in rows
    )


PREVIEWS: dict[str, Callable[[Connection, date, str, Sequence[str]], str]] = {
    StepKey.SEMANTIC_EXTRACTED: _memories_md,
    StepKey.DECONFLICTED: _memories_md,
    StepKey.SPLIT: _memories_md,
    StepKey.MERGED: _memories_md,
    StepKey.PINS_REVIEWED: _memories_md,
    StepKey.DAY_SUMMARY: _day_summary_md,
    StepKey.CASCADE: _written_md("temporal_summary", "_no week, month or year closed_"),
    StepKey.DREAM: _dream_md,
    StepKey.AUTOBIOGRAPHY_SUMMARY: _written_md("self_block", "_unchanged_"),
    StepKey.SELF_REFRESHED: _written_md("self_block", "_no self block changed_"),
}


def step_metadata(
    conn: Connection, day: date, step: str, results: list[StepResult], *, llm: bool, mode: str
) -> dict[str, dg.MetadataValue]:
    """Typed metadata of one (day, step), summed over the animas that ran it."""
    animas = sorted({r.anima_id for r in results})
    summary = runner.summarize(results)
    # a quiet (day, step) reads nothing: its zeros are known (a year has thousands of them)
    counts = night_report.change_counts(conn, day, step, animas) if animas else {}
    md: dict[str, dg.MetadataValue] = {
        key: dg.MetadataValue.int(counts.get(pair, 0)) for key, pair in STEP_CHANGES[step].items()
    }
    md["animas"] = dg.MetadataValue.int(len(animas))
    md["already_done"] = dg.MetadataValue.int(int(summary["already_done"]))  # skipped: done before
    md["duration_s"] = dg.MetadataValue.float(float(summary["duration_s"]))
    if step not in NO_REQUEST:
        md["input_chars"] = dg.MetadataValue.int(int(summary.get("input_chars", 0)))
    if llm:
        for key in LLM_KEYS:
            value = summary.get(key, 0)
            md[key] = (
                dg.MetadataValue.float(float(value))
                if key == "cost_usd"
                else dg.MetadataValue.int(int(value))
            )
    declined = [r for r in results if r.stats.get("declined")]
    md["declined"] = dg.MetadataValue.int(len(declined))  # animas whose model wrote nothing
    if declined:
        md["declined_text"] = dg.MetadataValue.md(
            "| anima | the model said |\n|---|---|\n"
            + "\n".join(
                f"| {_esc(r.anima_id)} | {_esc(str(r.stats.get('declined_text', '')))} |"
                for r in declined[:PREVIEW_ROWS]
            )
        )
    if step in SKIP_UNCHANGED:
        md["skipped_unchanged"] = dg.MetadataValue.int(int(summary.get("skipped_unchanged", 0)))
    md["mode"] = dg.MetadataValue.text(mode)
    rows = night_report.row_count(conn, STEP_TABLE[step], animas) if animas else 0
    md["dagster/row_count"] = dg.MetadataValue.int(rows)
    if step in PREVIEWS and animas:
        md["preview"] = dg.MetadataValue.md(PREVIEWS[step](conn, day, step, animas))
    return md
