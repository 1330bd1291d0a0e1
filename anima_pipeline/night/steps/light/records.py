"""The records light sleep passes around: a message of the day in, memory candidates and decisions out."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Utterance:
    """One message of the day, tool calls already stripped; created_at is local and tz-aware."""

    conversation_id: str
    message_id: str
    role: str  # 'user' | 'assistant'
    speaker: str | None
    text: str
    created_at: datetime


@dataclass(frozen=True)
class FactCandidate:
    """A proposed semantic memory; `key` is what within-day and store dedup compare."""

    type: str  # world | experience | preference | opinion | imprint
    content: str
    observed_at: datetime
    conversation_id: str
    confidence: float
    key: str


@dataclass(frozen=True)
class AnchorCandidate:
    """A proposed emotional anchor: the mood of a conversation or a turning point in it."""

    conversation_id: str
    occurred_at: datetime
    emotion: str
    valence: float  # -1..1
    arousal: float  # 0..1
    intensity: float  # 0..1
    trigger: str
    note: str


@dataclass(frozen=True)
class Decision:
    """What to do with one candidate against the active memories of the same sessions."""

    action: str  # 'create' | 'update' | 'skip'
    candidate: FactCandidate
    memory_id: int | None = None  # the memory updated or twinned
    content: str | None = None  # content to write for create / update
    reason: str = ""
