"""Where the evaluation data is and how to read it: shared by every benchmark.

The data lives outside the repository (LoCoMo is CC BY-NC 4.0: never copied in). Its
directory is ANIMA_DATA_DIR, by default `../shared/data` next to the repository.

Validation discipline (docs/benchmarks.md): heuristics are tuned on the TUNED dialogues only;
the UNSEEN ones (and the MemoryBank users) are reported beside them and never tuned on.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterable
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

from anima_pipeline.config import DEFAULT_TIMEZONE
from anima_pipeline.night.steps.light.records import Utterance

DATA_DIR_ENV = "ANIMA_DATA_DIR"
REPO_ROOT = Path(__file__).resolve().parents[1]
TZ = ZoneInfo(DEFAULT_TIMEZONE)  # the day boundaries light sleep would see

TUNED: tuple[str, ...] = ("conv-26", "conv-30")
UNSEEN: tuple[str, ...] = ("conv-41", "conv-42")


def data_dir() -> Path:
    """ANIMA_DATA_DIR, or ../shared/data next to the repository."""
    env = os.environ.get(DATA_DIR_ENV)
    return Path(env).expanduser() if env else REPO_ROOT.parent / "shared" / "data"


def locomo_dir() -> Path:
    return data_dir() / "locomo"


def memorybank_dir() -> Path:
    return data_dir() / "memorybank"


def group_of(anima_id: str) -> str:
    """'tuned' for the dialogues heuristics may be tuned on, 'unseen' for every other one."""
    return "tuned" if anima_id in TUNED else "unseen"


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def group_days(messages: Iterable[dict]) -> dict[str, dict[date, list[Utterance]]]:
    """Per anima and local day, the user/assistant messages as light sleep receives them."""
    days: dict[str, dict[date, list[Utterance]]] = defaultdict(lambda: defaultdict(list))
    for m in messages:
        if m["role"] not in ("user", "assistant"):
            continue
        at = datetime.fromisoformat(m["created_at"]).astimezone(TZ)
        days[m["anima_id"]][at.date()].append(
            Utterance(m["conversation_id"], m["message_id"], m["role"], m.get("speaker"), m["content"], at)
        )
    return days


def conversation_lines(
    anima_id: str,
    conversation_id: str,
    start: datetime,
    talk: Iterable[tuple[str, str]],
    speakers: tuple[str, str] = ("user", "assistant"),
    gap: timedelta = timedelta(minutes=1),
) -> list[str]:
    """A synthetic conversation as archive lines (`anima import`'s JSONL): the (role, text)
    turns of `talk` from `start` (a naive local time, read as UTC+8) `gap` apart, spoken by
    `speakers` (the user's, the assistant's); message ids `conversation_id:i`."""
    at = start.replace(tzinfo=timezone(timedelta(hours=8)))
    return [
        json.dumps(
            {
                "anima_id": anima_id,
                "conversation_id": conversation_id,
                "message_id": f"{conversation_id}:{i}",
                "role": role,
                "speaker": speakers[0] if role == "user" else speakers[1],
                "content": text,
                "created_at": (at + i * gap).isoformat(),
            },
            ensure_ascii=False,
        )
        for i, (role, text) in enumerate(talk)
    ]
