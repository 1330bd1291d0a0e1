"""What several steps' previews share (each folder's preview.py): one escaped Markdown line,
the table of the memories a step changed, the list of the rows it wrote.

A preview names what a step wrote by id, size and count, never its text: Dagster keeps every
materialization's metadata in its event log, and Dagster 1.13 cannot remove it selectively
(`wipe_assets` only hides an asset's events, `wipe_asset_partitions` is not implemented by
the SQL storages, `delete_run` drops a whole run, every anima's): text kept there would
outlive a `forget --purge` (docs/forget.md). The text is one command away: `anima export
--markdown`, `anima recall`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date
from typing import TYPE_CHECKING

from anima_pipeline.store import night_report
from anima_pipeline.store.db import Connection

if TYPE_CHECKING:
    from anima_pipeline.night.steps.declaration import Preview

PREVIEW_ROWS = 20
PREVIEW_CHARS = 400  # per name in a preview; the text itself is in the store and in `anima export`


def esc(text: str) -> str:
    """One line of Markdown: no line breaks, no table pipes, clipped (ids and names, not text)."""
    line = " ".join(str(text).split()).replace("|", "\\|")
    return line if len(line) <= PREVIEW_CHARS else line[: PREVIEW_CHARS - 1] + "…"


def changed_memories(conn: Connection, day: date, step: str, animas: Sequence[str]) -> str:
    """The memories the step created, changed or deprecated (the first PREVIEW_ROWS)."""
    rows = night_report.changed_memories(conn, day, [step], animas, PREVIEW_ROWS)
    if not rows:
        return "_no memory changed_"
    lines = ["| anima | memory | change | chars |", "|---|---|---|---|"]
    lines += [
        f"| {esc(r['anima_id'])} | f-{r['memory_id']} | {r['op']} | {len(r['content'])} |" for r in rows
    ]
    return "\n".join(lines)


def written(table: str, empty: str) -> Preview:
    """The preview of a step that writes rows of `table` (self blocks, summaries): one line per
    row, its level or name and its size; `empty` when it wrote none."""

    def render(conn: Connection, day: date, step: str, animas: Sequence[str]) -> str:
        rows = night_report.written_rows(conn, day, step, table, animas, PREVIEW_ROWS)
        if not rows:
            return empty
        return "\n".join(
            f"- {esc(r['anima_id'])}: {esc(r['level'] or r['memory_id'])}, {len(r['content'])} chars"
            for r in rows
        )

    return render
