"""What the self refresh shows in Dagster: the self blocks it wrote (counted from the audit
log) and a Markdown line per block, by name and size."""

from __future__ import annotations

from anima_pipeline.night.steps.declaration import changes
from anima_pipeline.night.steps.previews import written

CHANGES = changes("self_block", self_blocks_written="write")

preview = written("self_block", "_no self block changed_")
