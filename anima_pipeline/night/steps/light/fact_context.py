"""What fact extraction knows about one message's speaker, and the thresholds both languages share."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

IMPRINT_FEELING = 0.7  # message intensity that makes a milestone or turning point an imprint
CONFIDENCE = {"world": 0.8, "preference": 0.8, "experience": 0.7, "opinion": 0.6, "imprint": 0.75}


@dataclass
class Context:
    """One message's speaker and day, as fact extraction sees them."""

    speaker: str
    other: str
    label: str  # role label used when the name is the fact itself ("The user's name is ...")
    role: str
    names: tuple[str, ...]
    said_on: date
    lower_words: frozenset[str] = frozenset()  # words seen in lower case today: common, not names
    narrator: bool = False  # does this speaker tell their own life today (a person, not an AI)?
