"""The one tool the dream offers the model: write_dream_entry (the executor applies its
confidence updates, audited, and upserts the entry). The tool model is in tools/schemas.py:
the one contract the executor applies for every engine and every door.
"""

from __future__ import annotations

TOOLS = ("write_dream_entry",)
