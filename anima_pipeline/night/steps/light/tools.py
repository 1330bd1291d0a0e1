"""The tools light sleep's stages offer the model: each stage's whitelist, which is also what
its executor scope allows. The tool models themselves (their JSON schemas, their validation)
are in tools/schemas.py: the one contract the executor applies for every engine and every
door, so the offline plan's calls and the model's pass the same checks.
"""

from __future__ import annotations

SEMANTIC_TOOLS = ("create_semantic_memory", "update_semantic_memory", "deprecate_semantic_memory")
CREATE_ONLY = SEMANTIC_TOOLS[:1]  # stage 1 when no existing memory is shown (nothing to update)
ANCHOR_TOOLS = ("create_emotional_anchor",)
NARRATIVE_TOOLS = ("create_autobiographical_memory", "deprecate_autobiographical_memory")
SUMMARY_TOOLS = ("write_self_block",)
