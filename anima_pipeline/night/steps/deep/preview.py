"""What deep sleep's rounds show in Dagster: the audit-log counts of each round and the
memories it changed (a Markdown table, by id, op and size)."""

from __future__ import annotations

from anima_pipeline.core.steps import StepKey
from anima_pipeline.night.steps.declaration import Changes, changes
from anima_pipeline.night.steps.previews import changed_memories

ROUND_CHANGES: dict[str, Changes] = {
    StepKey.DECONFLICTED: changes("semantic_memory", deprecated="deprecate"),
    StepKey.SPLIT: changes("semantic_memory", split="split", created="create"),
    StepKey.MERGED: changes("semantic_memory", merged="merge", created="create"),
    StepKey.PINS_REVIEWED: changes("semantic_memory", pinned="pin", unpinned="unpin"),
}

round_preview = changed_memories
