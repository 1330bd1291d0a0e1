"""Emotional anchors: each conversation's mood and its valence turning points."""

from __future__ import annotations

from collections.abc import Sequence

from anima_pipeline.night.steps.light.records import AnchorCandidate, Utterance
from anima_pipeline.text import lexicon as lx
from anima_pipeline.text.emotion import emotion_hits, emotion_intensity
from anima_pipeline.text.sentences import split_sentences
from anima_pipeline.text.words import clean_text, is_chinese

_MAX_ANCHORS = 3


def _utterance_emotion(u: Utterance) -> tuple[str, float, float, float, str] | None:
    """(emotion, valence, arousal, intensity, trigger sentence) of one message, questions ignored."""
    best: tuple[str, float, float, float, str] | None = None
    for sentence in split_sentences(clean_text(u.text), message=True):
        if sentence.rstrip().endswith(("?", "？")) or lx.FORMULAIC_EMOTION.search(sentence):
            continue
        hits = emotion_hits(sentence)
        if not hits:
            continue
        intensity = emotion_intensity(sentence, hits)
        emotion = max(hits, key=lambda h: abs(h[1]))[0]
        valence = sum(h[1] for h in hits) / len(hits)
        arousal = sum(h[2] for h in hits) / len(hits)
        if best is None or intensity > best[3]:
            best = (emotion, valence, arousal, intensity, sentence)
    return best


def _conversation_anchors(conversation_id: str, utterances: Sequence[Utterance]) -> list[AnchorCandidate]:
    scored = [(u, e) for u in utterances if (e := _utterance_emotion(u)) is not None]
    if not scored or sum(e[3] for _, e in scored) < 0.8:
        return []  # neutral talk (or one passing mild word) leaves no anchor
    zh = is_chinese(" ".join(u.text for u in utterances))
    weights: dict[str, float] = {}
    for _, e in scored:
        weights[e[0]] = weights.get(e[0], 0.0) + e[3]
    dominant = max(weights, key=lambda k: weights[k])
    total = sum(e[3] for _, e in scored)
    valence = sum(e[1] * e[3] for _, e in scored) / total
    arousal = sum(e[2] for _, e in scored) / len(scored)
    peak_u, peak = max(scored, key=lambda pair: pair[1][3])
    mean_intensity = total / len(scored)
    intensity = min(1.0, mean_intensity * (0.6 + 0.4 * min(1.0, len(scored) / 4)))
    note = (
        f"当天对话的整体情绪：{dominant}（{len(scored)} 条带情绪的消息）"
        if zh
        else f"Overall mood of the conversation: {dominant} ({len(scored)} emotional messages)."
    )
    anchors = [
        AnchorCandidate(
            conversation_id,
            peak_u.created_at,
            dominant,
            round(valence, 2),
            round(arousal, 2),
            round(intensity, 2),
            _shorten(peak[4]),
            note,
        )
    ]
    previous = scored[0][1]
    for u, e in scored[1:]:
        if len(anchors) >= _MAX_ANCHORS:
            break
        if previous[1] * e[1] < 0 and abs(e[1] - previous[1]) >= 0.9:
            who = u.speaker or u.role
            note = (
                f"情绪转折：{previous[0]} → {e[0]}（{who}）"
                if zh
                else f"Turning point: mood shifted from {previous[0]} to {e[0]} ({who})."
            )
            anchors.append(
                AnchorCandidate(
                    conversation_id,
                    u.created_at,
                    e[0],
                    round(e[1], 2),
                    round(e[2], 2),
                    round(min(1.0, e[3] + 0.1), 2),
                    _shorten(e[4]),
                    note,
                )
            )
        previous = e
    return anchors


def _shorten(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rsplit(" ", 1)[0] + "…"


def detect_anchors(utterances: list[Utterance]) -> list[AnchorCandidate]:
    """Limbic-stage candidates: each conversation's mood plus valence turning points.

    At most three per conversation; a conversation without emotion words gets none
    (restraint: neutral talk is not an emotional memory).
    """
    by_conversation: dict[str, list[Utterance]] = {}
    for u in sorted(utterances, key=lambda u: u.created_at):
        by_conversation.setdefault(u.conversation_id, []).append(u)
    return [a for cid, utts in by_conversation.items() for a in _conversation_anchors(cid, utts)]
