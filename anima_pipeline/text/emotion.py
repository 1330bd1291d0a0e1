"""Emotion scoring from the emotion lexicon, shared by anchors and imprint typing."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache

from anima_pipeline.text import lexicon as lx
from anima_pipeline.text.words import WORD, clean_text, is_chinese


def emotion_hits(text: str) -> list[tuple[str, float, float]]:
    """(emotion, valence, arousal) per emotion word; a negation flips and damps the valence."""
    hits: list[tuple[str, float, float]] = []
    if is_chinese(text):
        for word, (emotion, valence, arousal) in lx.ZH_EMOTIONS.items():
            for m in re.finditer(re.escape(word), text):
                negated = bool(lx.ZH_NEGATION_BEFORE.search(text[max(0, m.start() - 2) : m.start()]))
                hits.append(_hit(emotion, valence, arousal, negated))
        return hits
    words = [w.lower() for w in WORD.findall(text)]
    for i, word in enumerate(words):
        if word in lx.EN_EMOTIONS:
            emotion, valence, arousal = lx.EN_EMOTIONS[word]
            window = words[max(0, i - 3) : i]
            negated = any(w in ("not", "never", "no") or w.endswith("n't") for w in window)
            hits.append(_hit(emotion, valence, arousal, negated))
    return hits


def _hit(emotion: str, valence: float, arousal: float, negated: bool) -> tuple[str, float, float]:
    """One emotion word's hit; negated ("not happy", 不开心) the valence flips and both halve."""
    return (f"not {emotion}", -0.5 * valence, arousal * 0.5) if negated else (emotion, valence, arousal)


def emotion_intensity(text: str, hits: Sequence[tuple[str, float, float]]) -> float:
    if not hits:
        return 0.0
    lowered = text.lower()
    boost = 0.15 if any(f" {w} " in f" {lowered} " for w in lx.EN_INTENSIFIERS) else 0.0
    if any(w in text for w in lx.ZH_INTENSIFIERS):
        boost = 0.15
    boost += 0.1 if "!" in text or "！" in text else 0.0
    strength = max(abs(v) for _, v, _ in hits)
    return min(1.0, 0.3 + 0.4 * strength + 0.1 * (len(hits) - 1) + boost)


def message_feeling(text: str) -> float:
    """Emotional intensity of a whole message: a milestone said with strong feeling is an imprint."""
    return emotion_intensity(text, emotion_hits(text))


@lru_cache(maxsize=256)
def utterance_feeling(raw_text: str) -> float:
    """`message_feeling` of a raw message, computed once per message: every sentence of a
    message asks for it, and recomputing it per sentence made a long message quadratic."""
    return message_feeling(clean_text(raw_text))
