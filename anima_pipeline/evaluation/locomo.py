"""The LoCoMo score of this memory system, as a user with a key would measure it.

`evaluate_locomo` takes dialogues in LoCoMo's JSON shape (a list of samples, each with
`sample_id`, `conversation` = {speaker_a, speaker_b, session_N: [{speaker, dia_id, text}],
session_N_date_time: "1:56 pm on 8 May, 2023"} and `qa` = [{question, answer, category,
evidence}]), imports them as a scratch set of animas (`eval-<sample_id>`, one conversation
per session, speaker_a as the user), sleeps every session day with the configured engine,
then for each question builds the chat-time context (recall's `assemble_context`, as of the
day after the last session), asks the answer model and a judge model, and reports J — the
share of answers the judge labels CORRECT — per category 1-4 (multi-hop, temporal,
open-domain, single-hop; category 5, adversarial, is left out as in the published
comparisons), the context tokens per question, and the cost of the night and of the eval.

The protocol is Mem0's and EverMemOS's LLM-as-a-judge over categories 1-4 (Mem0 paper,
arXiv:2504.19413; its judge prompt is `ACCURACY_PROMPT` in mem0ai/mem0
evaluation/metrics/llm_judge.py, which EverMemOS's evaluation reuses). JUDGE_SYSTEM below
follows that prompt's rules in our own words: generous on wording, strict on the fact, a
date in another format or a relative date that resolves to the gold date counts as correct.

With the offline engine there is no model to answer or judge: the report then holds the
offline context measure instead — the share of questions whose context contains every key
word of the gold answer.
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from pydantic import BaseModel, Field, ValidationError

from anima_pipeline.config import Settings
from anima_pipeline.core.errors import InputError
from anima_pipeline.llm.contract import Engine, Usage
from anima_pipeline.night.runner import run_days
from anima_pipeline.recall.assemble import assemble_context
from anima_pipeline.store.archive import ImportStats, import_records, parse_lines
from anima_pipeline.store.db import Database
from anima_pipeline.store.events import Audit

CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
JUDGED = (1, 2, 3, 4)
ANIMA_PREFIX = "eval-"
STEP_ANSWER = "eval/answer"
STEP_JUDGE = "eval/judge"

ANSWER_SYSTEM = """\
You answer questions about a person's past conversations with their assistant, using only the
memory context given (memories, past messages and summaries, with their dates). Answer with a
short phrase — a name, a date, a place, a few words — not a sentence of explanation. Resolve
relative dates against the dates shown ("last week" in a message of 2023-05-08 -> the week
before 2023-05-08). If the context does not contain the answer, say "unknown"."""

# Follows ACCURACY_PROMPT of mem0ai/mem0 evaluation/metrics/llm_judge.py (see module doc).
JUDGE_SYSTEM = """\
You are a grader. You get a question, the gold answer and a generated answer, and label the
generated answer CORRECT or WRONG. Be generous with wording: a generated answer that states
the same fact as the gold answer is CORRECT even if it is longer or phrased differently, and a
date or time period in another format (or a relative expression that resolves to it) is
CORRECT when it refers to the same date or period. It is WRONG when it states a different
fact, misses the fact, or says it does not know. Reply with JSON only:
{"reasoning": "one sentence", "label": "CORRECT" or "WRONG"}."""

_STOP = set(
    "a an the of in on at to for and or but is are was were be been with by from as it its this that "
    "he she they them his her their i you we my your our me us do did does not no yes".split()
)


class LocomoError(InputError):
    """The input is not LoCoMo-shaped; the message names the sample and the key."""


class Turn(BaseModel):
    speaker: str
    text: str
    dia_id: str = ""


class Session(BaseModel):
    index: int
    started_at: datetime
    turns: list[Turn]


class Question(BaseModel):
    question: str
    answer: str | None = None
    category: int
    evidence: list[str] = Field(default_factory=list)
    asked_at: datetime | None = None  # when the question is asked (LongMemEval's question_date)


class Dialogue(BaseModel):
    sample_id: str
    speaker_a: str
    speaker_b: str
    sessions: list[Session]
    qa: list[Question]

    @property
    def anima_id(self) -> str:
        return ANIMA_PREFIX + self.sample_id


class QuestionResult(BaseModel):
    sample_id: str
    category: int
    question: str
    answer: str
    prediction: str | None = None
    label: str | None = None  # CORRECT | WRONG (judged runs)
    context_chars: int
    context_tokens: int
    keywords_found: bool


class Report(BaseModel):
    engine: str
    model: str | None
    benchmark: str = "locomo"
    category_names: dict[int, str] = Field(default_factory=lambda: dict(CATEGORIES))
    judged_categories: list[int] = Field(default_factory=lambda: list(JUDGED))
    samples: list[str]
    questions: list[QuestionResult]
    night_cost_usd: float
    eval_cost_usd: float
    night_usage: Usage
    eval_usage: Usage

    def judged(self) -> bool:
        return any(q.label for q in self.questions)

    def j_by_category(self) -> list[dict[str, Any]]:
        rows = []
        for c in self.judged_categories:
            qs = [q for q in self.questions if q.category == c]
            correct = sum(1 for q in qs if q.label == "CORRECT")
            rows.append(
                {
                    "category": c,
                    "name": self.category_names[c],
                    "questions": len(qs),
                    "correct": correct,
                    "J": round(correct / len(qs), 3) if qs else None,
                }
            )
        qs = [q for q in self.questions if q.category in self.judged_categories]
        correct = sum(1 for q in qs if q.label == "CORRECT")
        rows.append(
            {
                "category": 0,
                "name": self.overall_name,
                "questions": len(qs),
                "correct": correct,
                "J": round(correct / len(qs), 3) if qs else None,
            }
        )
        return rows

    @property
    def overall_name(self) -> str:
        c = self.judged_categories
        return f"overall {min(c)}-{max(c)}" if c else "overall"

    def keyword_coverage(self) -> list[dict[str, Any]]:
        rows = []
        judged = self.judged_categories
        for c in (*judged, 0):
            qs = [q for q in self.questions if (q.category == c if c else q.category in judged)]
            hit = sum(1 for q in qs if q.keywords_found)
            rows.append(
                {
                    "category": c,
                    "name": self.category_names.get(c, self.overall_name),
                    "questions": len(qs),
                    "all_keywords_in_context": hit,
                    "share": round(hit / len(qs), 3) if qs else None,
                }
            )
        return rows

    def context_tokens(self) -> dict[str, float]:
        values = [q.context_tokens for q in self.questions]
        if not values:
            return {"mean": 0, "median": 0, "p95": 0, "max": 0}
        ordered = sorted(values)
        return {
            "mean": round(statistics.fmean(values), 1),
            "median": statistics.median(values),
            "p95": ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))],
            "max": ordered[-1],
        }

    def to_json(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        data["j_by_category"] = self.j_by_category() if self.judged() else None
        data["keyword_coverage"] = self.keyword_coverage()
        data["context_tokens_summary"] = self.context_tokens()
        return data


# ---- input ------------------------------------------------------------------------------

_WHEN = re.compile(r"^\s*(\d{1,2}):(\d{2})\s*([ap]m)\s+on\s+(\d{1,2})\s+(\w+),?\s+(\d{4})\s*$", re.I)


def parse_when(text: str, tz: ZoneInfo) -> datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023" as an aware datetime in `tz`."""
    m = _WHEN.match(text or "")
    if not m:
        raise LocomoError(f"not a LoCoMo session time (like '1:56 pm on 8 May, 2023'): {text!r}")
    hour, minute, half, day, month, year = m.groups()
    when = datetime.strptime(f"{day} {month[:3]} {year} {hour}:{minute} {half.upper()}", "%d %b %Y %I:%M %p")
    return when.replace(tzinfo=tz)


def load_locomo(path: Path, tz: ZoneInfo) -> list[Dialogue]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise LocomoError(f"{path}: cannot read a JSON document: {exc}") from None
    if not isinstance(raw, list):
        raise LocomoError(f"{path}: expected a JSON list of LoCoMo samples, got {type(raw).__name__}")
    return [_dialogue(path, i, s, tz) for i, s in enumerate(raw)]


def _dialogue(path: Path, i: int, sample: Any, tz: ZoneInfo) -> Dialogue:
    where = f"{path}: sample {i}"
    try:
        sid = str(sample["sample_id"])
        where = f"{path}: sample {sid}"
        conv = sample["conversation"]
        sessions = []
        for key in sorted(
            (k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1])
        ):
            n = int(key.split("_")[1])
            turns = [Turn.model_validate(t) for t in conv[key]]
            if turns:
                sessions.append(
                    Session(index=n, started_at=parse_when(conv[f"{key}_date_time"], tz), turns=turns)
                )
        qa = [
            Question(
                question=q["question"],
                answer=None if q.get("answer") is None else str(q["answer"]),
                category=int(q["category"]),
                evidence=[str(e) for e in q.get("evidence") or []],
            )
            for q in sample.get("qa") or []
        ]
        return Dialogue(
            sample_id=sid, speaker_a=conv["speaker_a"], speaker_b=conv["speaker_b"], sessions=sessions, qa=qa
        )
    except KeyError as exc:
        raise LocomoError(f"{where}: missing key {exc}") from None
    except (ValueError, TypeError, ValidationError) as exc:
        raise LocomoError(f"{where}: {exc}") from None


def archive_lines(dialogues: list[Dialogue]) -> list[str]:
    """The dialogues in the archive format: one conversation per session, speaker_a as the
    user, a minute between turns."""
    lines = []
    for d in dialogues:
        for s in d.sessions:
            conv = f"{d.anima_id}:session_{s.index}"
            for j, t in enumerate(s.turns):
                role = "user" if t.speaker == d.speaker_a else "assistant"
                lines.append(
                    json.dumps(
                        {
                            "anima_id": d.anima_id,
                            "conversation_id": conv,
                            "message_id": t.dia_id or f"{conv}:{j}",
                            "role": role,
                            "speaker": t.speaker,
                            "content": t.text,
                            "created_at": (s.started_at + timedelta(minutes=j)).isoformat(),
                        },
                        ensure_ascii=False,
                    )
                )
    return lines


# progress(phase, done, total): "import", "nights" (one per session day), "questions"; the CLI
# draws it, and where no terminal is drawn on prints a line at least once a minute
EvalProgress = Callable[[str, int, int], None]


def _quiet(_phase: str, _done: int, _total: int) -> None:
    return None


def import_dialogues(db: Database, dialogues: list[Dialogue]) -> None:
    with db.transaction() as conn:
        audit = Audit(conn=conn, anima_id="", run_id="eval-import", step="import")
        import_records(conn, parse_lines(archive_lines(dialogues), "locomo"), audit, ImportStats())


# ---- the night ------------------------------------------------------------------------------


def sleep_dialogues(
    db: Database,
    settings: Settings,
    engine: Engine,
    dialogues: list[Dialogue],
    progress: EvalProgress | None = None,
) -> Usage:
    """Every session day, in order, for the eval animas only; the night's usage."""
    days = sorted({s.started_at.astimezone(settings.tz).date() for d in dialogues for s in d.sessions})
    report = progress or _quiet
    report("nights", 0, len(days))
    done = iter(range(1, len(days) + 1))
    results = run_days(
        db,
        settings,
        days,
        animas=[d.anima_id for d in dialogues],
        engine=engine,
        on_night=lambda _night, _results: report("nights", next(done), len(days)),
    )
    return sum((r.usage for r in results), Usage())


# ---- questions ------------------------------------------------------------------------------


def keywords(answer: str) -> list[str]:
    return [w for w in re.findall(r"\w+", answer.lower()) if w not in _STOP]


def has_keywords(answer: str, context: str) -> bool:
    words = keywords(answer)
    text = context.lower()
    return bool(words) and all(w in text for w in words)


def judge_label(raw: str) -> str:
    """CORRECT | WRONG from the judge's JSON (or its bare word, when it skipped the JSON)."""
    match = re.search(r"\{.*\}", raw, re.S)
    if match:
        try:
            label = str(json.loads(match.group(0)).get("label", "")).upper()
            if label in ("CORRECT", "WRONG"):
                return label
        except json.JSONDecodeError:
            pass  # fall through to the bare word
    return "CORRECT" if re.search(r"\bCORRECT\b", raw.upper()) and "WRONG" not in raw.upper() else "WRONG"


def ask(
    engine: Engine, d: Dialogue, q: Question, context: str, asked_at: datetime
) -> tuple[str, str, Usage, Usage]:
    """The answer model's answer and the judge's label for one question, with each call's usage."""
    prompt = (
        f"Memory context (as of {asked_at:%Y-%m-%d}):\n<context>\n{context}\n</context>\n\n"
        f"Question about {d.speaker_a}: {q.question}"
    )
    prediction, used = engine.complete(STEP_ANSWER, ANSWER_SYSTEM, prompt, max_tokens=200)
    verdict = (
        f"Question: {q.question}\nGold answer: {q.answer}\nGenerated answer: {prediction}\n"
        "Label the generated answer."
    )
    raw, judged = engine.complete(STEP_JUDGE, JUDGE_SYSTEM, verdict, max_tokens=300)
    return prediction, judge_label(raw), used, judged


def evaluate_locomo(
    db: Database,
    settings: Settings,
    engine: Engine,
    dialogues: list[Dialogue],
    *,
    max_questions: int | None = None,
    benchmark: str = "locomo",
    category_names: dict[int, str] = CATEGORIES,
    judged_categories: tuple[int, ...] = JUDGED,
    progress: EvalProgress | None = None,
) -> Report:
    """Import, sleep, then build each judged question's context and, with a model, answer and
    judge it (see the module docstring). LongMemEval (evaluation/longmemeval.py) passes its
    own categories; a question with `asked_at` is asked then, else the day after the last session."""
    report = progress or _quiet
    report("import", 0, 1)
    import_dialogues(db, dialogues)
    report("import", 1, 1)
    night = sleep_dialogues(db, settings, engine, dialogues, report)
    judged = engine.model is not None  # a model answers and judges; offline measures the contexts
    spent, results = Usage(), []
    asked = {
        d.sample_id: [q for q in d.qa if q.category in judged_categories and q.answer][:max_questions]
        for d in dialogues
    }
    total = sum(len(qs) for qs in asked.values())
    report("questions", 0, total)
    for d in dialogues:
        last_session = max(s.started_at for s in d.sessions) + timedelta(days=1)
        for q in asked[d.sample_id]:
            asked_at = q.asked_at or last_session
            with db.transaction() as conn:
                ctx = assemble_context(conn, d.anima_id, q.question, settings=settings, now=asked_at)
            row = QuestionResult(
                sample_id=d.sample_id,
                category=q.category,
                question=q.question,
                answer=q.answer or "",
                context_chars=ctx.chars,
                context_tokens=max(1, ctx.chars // 4),  # replaced by the API's count when judged
                keywords_found=has_keywords(q.answer or "", ctx.rendered),
            )
            if judged:
                row.prediction, row.label, answered, judged_by = ask(engine, d, q, ctx.rendered, asked_at)
                spent = spent + answered + judged_by
                row.context_tokens = answered.one_pass_tokens  # the answer prompt, as the API counted it
            results.append(row)
            report("questions", len(results), total)
    return Report(
        engine=engine.name,
        model=engine.model,
        benchmark=benchmark,
        category_names=dict(category_names),
        judged_categories=list(judged_categories),
        samples=[d.sample_id for d in dialogues],
        questions=results,
        night_cost_usd=night.cost_usd,
        eval_cost_usd=spent.cost_usd,
        night_usage=night,
        eval_usage=spent,
    )
