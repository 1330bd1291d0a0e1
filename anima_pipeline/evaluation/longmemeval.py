"""The LongMemEval score of this memory system, with LoCoMo's protocol (evaluation/locomo.py).

LongMemEval (Wu et al., ICLR 2025, arXiv:2410.10813) is a JSON list of questions, each with
its own chat history (the "haystack"), as published (longmemeval_s / _m / _oracle):

    {"question_id": "…", "question_type": "single-session-user" | "single-session-assistant" |
     "single-session-preference" | "multi-session" | "knowledge-update" | "temporal-reasoning",
     "question": "…", "answer": "…", "question_date": "2023/05/30 (Tue) 23:40",
     "haystack_session_ids": ["…", …], "haystack_dates": ["2023/05/20 (Sat) 02:21", …],
     "haystack_sessions": [[{"role": "user" | "assistant", "content": "…", "has_answer": true?}, …], …],
     "answer_session_ids": ["…", …]}

Each question becomes a scratch anima (`eval-<question_id>`) holding its haystack, one
conversation per session at its date; every session day is slept with the configured engine,
and the question is asked at its `question_date` from the chat-time context. The answer and
the judge are LoCoMo's (Mem0's J protocol, the same prompts), and the offline engine gets the
same offline measure (every key word of the answer in the context). J is reported per question
type. Abstention questions (question_id ending in `_abs`, whose gold "answer" explains why
there is none) are left out, as LoCoMo's adversarial category is: the J judge's rules count
"I don't know" as wrong.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from pydantic import BaseModel, Field, ValidationError

from anima_pipeline.evaluation.locomo import Dialogue, LocomoError, Question, Session, Turn

QUESTION_TYPES = {
    1: "single-session-user",
    2: "single-session-assistant",
    3: "single-session-preference",
    4: "multi-session",
    5: "knowledge-update",
    6: "temporal-reasoning",
    7: "abstention",
}
JUDGED = (1, 2, 3, 4, 5, 6)
_TYPE_IDS = {name: i for i, name in QUESTION_TYPES.items()}
DATE_FORMAT = "%Y/%m/%d (%a) %H:%M"  # "2023/05/20 (Sat) 02:21"


class LongMemEvalError(LocomoError):
    """The input is not LongMemEval-shaped; the message names the question and the key."""


class _Message(BaseModel):
    role: str = Field(pattern="^(user|assistant)$")
    content: str
    has_answer: bool = False


class _Item(BaseModel):
    question_id: str = Field(min_length=1, max_length=58)  # "eval-" + id stays a valid anima id
    question_type: str
    question: str
    answer: Any
    question_date: str
    haystack_session_ids: list[str]
    haystack_dates: list[str]
    haystack_sessions: list[list[_Message]]
    answer_session_ids: list[str] = Field(default_factory=list)


def parse_date(text: str, tz: ZoneInfo) -> datetime:
    """LongMemEval's "2023/05/20 (Sat) 02:21" as an aware datetime in `tz`."""
    try:
        return datetime.strptime(text.strip(), DATE_FORMAT).replace(tzinfo=tz)
    except (AttributeError, ValueError):
        raise LongMemEvalError(f"not a LongMemEval date (like '2023/05/20 (Sat) 02:21'): {text!r}") from None


def load_longmemeval(path: Path, tz: ZoneInfo) -> list[Dialogue]:
    """The questions of a LongMemEval file as dialogues (one per question, its haystack as
    sessions), in the file's order; LongMemEvalError naming the place when it is not that shape."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise LongMemEvalError(f"{path}: cannot read a JSON document: {exc}") from None
    if not isinstance(raw, list):
        raise LongMemEvalError(
            f"{path}: expected a JSON list of LongMemEval questions, got {type(raw).__name__}"
        )
    dialogues = [_dialogue(path, i, item, tz) for i, item in enumerate(raw)]
    seen: set[str] = set()
    for d in dialogues:
        if d.sample_id in seen:
            raise LongMemEvalError(f"{path}: question_id {d.sample_id!r} appears twice")
        seen.add(d.sample_id)
    return dialogues


def _dialogue(path: Path, i: int, raw: Any, tz: ZoneInfo) -> Dialogue:
    where = f"{path}: question {i}"
    try:
        item = _Item.model_validate(raw)
        where = f"{path}: question {item.question_id}"
        if not (len(item.haystack_sessions) == len(item.haystack_dates) == len(item.haystack_session_ids)):
            raise LongMemEvalError(
                "haystack_sessions, haystack_dates and haystack_session_ids differ in length"
            )
        kind = "abstention" if item.question_id.endswith("_abs") else item.question_type
        if kind not in _TYPE_IDS:
            raise LongMemEvalError(
                f"question_type {item.question_type!r} is not one of {', '.join(QUESTION_TYPES.values())}"
            )
        sessions = [
            Session(
                index=n,
                started_at=parse_date(when, tz),
                turns=[Turn(speaker=m.role, text=m.content) for m in messages if m.content.strip()],
            )
            for n, (when, messages) in enumerate(
                zip(item.haystack_dates, item.haystack_sessions, strict=True), 1
            )
        ]
        sessions = [s for s in sessions if s.turns]
        if not sessions:
            raise LongMemEvalError("the haystack holds no message")
        question = Question(
            question=item.question,
            answer=str(item.answer),
            category=_TYPE_IDS[kind],
            evidence=list(item.answer_session_ids),
            asked_at=parse_date(item.question_date, tz),
        )
        return Dialogue(
            sample_id=item.question_id,
            speaker_a="user",
            speaker_b="assistant",
            sessions=sessions,
            qa=[question],
        )
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        raise LongMemEvalError(f"{where}: {field}: {first['msg']}") from None
    except ValueError as exc:
        raise LongMemEvalError(f"{where}: {exc}") from None
