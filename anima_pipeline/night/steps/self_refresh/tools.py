"""The tool the self refresh offers the model and the blocks it may write with it (identity is
never written by sleep; autobiography_summary is light sleep's). The tool model is in
tools/schemas.py: the one contract the executor applies for every engine and every door.
"""

from __future__ import annotations

TOOLS = ("write_self_block",)
BLOCKS = ("persona", "values", "relationships", "current_state")
