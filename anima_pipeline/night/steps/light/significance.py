"""Narrative significance of a message: turning point, milestone or notable, from cue words."""

from __future__ import annotations

import re

from anima_pipeline.text import lexicon as lx
from anima_pipeline.text.words import CJK, clean_text


def _cue(pattern: re.Pattern[str], text: str) -> bool:
    for m in pattern.finditer(text):
        before = text[: m.start()]
        if CJK.match(m.group(0)):
            if not lx.ZH_NEGATION_BEFORE.search(before):
                return True
        elif not lx.NEGATION_BEFORE.search(before[-40:]):
            return True
    return False


def narrative_significance(text: str) -> str | None:
    """'turning_point', 'milestone', 'notable' or None, from cue words (negations and questions ignored).

    Turning points win over milestones: "decided to move" is first a change of course.
    """
    text = clean_text(text)
    if not text or text.rstrip().endswith(("?", "？")):
        return None
    for label, pattern in (
        ("turning_point", lx.TURNING_POINT),
        ("milestone", lx.MILESTONE),
        ("notable", lx.NOTABLE),
    ):
        if _cue(pattern, text):
            return label
    return None
