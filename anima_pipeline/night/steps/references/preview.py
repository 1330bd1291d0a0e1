"""What reference sync shows in Dagster: the citations it recorded and re-pointed and the
reference counts it changed (counted from the audit log). No Markdown preview."""

from __future__ import annotations

from anima_pipeline.night.steps.declaration import changes

CHANGES = {
    **changes("memory_reference", references_created="create", references_repointed="repoint"),
    **changes("semantic_memory", reference_counts_updated="reference_count"),
}
