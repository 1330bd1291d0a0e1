"""What the dream tells the model. It sends deep sleep's prefix (system, message 1 = the store
as deep sleep found it; night/prefix.py), then message 1.5 (the rounds' changes), message 2
(today's new and changed memories) and this task as message 3.
"""

from __future__ import annotations

DREAM = """\
Message 3 — the dream (REM creative synthesis, one journal entry per night): look for
non-obvious connections across the memories, update beliefs where the evidence shifted, and
prepare concrete next steps. Message 2 lists today's new and changed memories with their
confidence (c=...); message 1 (with the changes of message 1.5) is the long-term store.
1. Cross-domain connections between today's memories and the long-term store ("A ↔ B" and why).
2. Confidence updates where today's evidence shifted a belief: only ids shown, with the old
   value visible in the data; change a value by at most 0.3 per night, and give the reason.
3. Concrete next-session actions (what to ask, follow up or remember to mention).
4. Bank pages (entity or concept) only for a topic that came up 3 or more times — count the
   memories that mention it; fewer than 3 means no page.
Call write_dream_entry once (empty lists are fine); no other tool."""
