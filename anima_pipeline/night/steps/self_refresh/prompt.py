"""What the self refresh tells the model. It sends deep sleep's prefix (system with the
self-block snapshot, message 1 = the store as deep sleep found it; night/prefix.py), then
message 1.5 (the rounds' changes), message 2 (today's changes to memory) and this task as
message 3.
"""

from __future__ import annotations

from anima_pipeline.night.steps.framing import RESTRAINT_RULE

SELF_REFRESH = f"""\
Message 3 — the self-layer refresh: you keep the blocks persona, values, relationships and
current_state that stay in the prompt (identity is never written by sleep; the blocks as they
are now are in the system prompt). Message 2 lists today's changes to memory (created,
updated, deprecated, with dates); message 1 (with the changes of message 1.5) holds the
memories they touch. Rewrite only a block that today's changes make out of date; keep what
is still true; leave the others alone. Length budget per block: persona 800, values 600,
relationships 1,200, current_state 600 characters. Short, factual, in the user's language.
{RESTRAINT_RULE}
Tool: write_self_block; no other tool."""
