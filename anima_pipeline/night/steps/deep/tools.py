"""The tools deep sleep's rounds offer the model, per round: what its executor scope allows.

Every round sends the same tool list, the union of its family's (night/prefix.py): tools come
first in the provider's cache prefix, so a list per round would invalidate the cached system
and message 1 in each round; what a round may call is still limited by its scope, and its
task names its tools. The tool models are in tools/schemas.py: the one contract the executor
applies for every engine and every door.
"""

from __future__ import annotations

ROUND_TOOLS: dict[str, tuple[str, ...]] = {
    "contradiction": ("deprecate_semantic_memory",),
    "split": ("split_semantic_memory",),
    "merge": ("merge_semantic_memories",),
    "pin_review": ("unpin_semantic_memory", "pin_semantic_memory"),
}
