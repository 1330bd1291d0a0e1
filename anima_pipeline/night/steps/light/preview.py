"""What light sleep's stages show in Dagster: the audit-log counts of each stage (the first
table is the one it writes) and the Markdown previews of stage 1 (the memories it changed)
and stage 3b (the autobiography summary it wrote)."""

from __future__ import annotations

from anima_pipeline.night.steps.declaration import changes
from anima_pipeline.night.steps.previews import changed_memories, written

SEMANTIC_CHANGES = changes("semantic_memory", created="create", updated="update", deprecated="deprecate")
ANCHOR_CHANGES = changes("emotional_anchor", anchors_created="create")
NARRATIVE_CHANGES = changes(
    "autobiographical_memory", narratives_created="create", narratives_deprecated="deprecate"
)
SUMMARY_CHANGES = changes("self_block", self_blocks_written="write")

semantic_preview = changed_memories
summary_preview = written("self_block", "_unchanged_")
