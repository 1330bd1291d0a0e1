"""`anima eval locomo PATH` and `anima eval longmemeval PATH`: the LoCoMo and LongMemEval scores of
this memory system, with one protocol (evaluation/locomo.py, evaluation/longmemeval.py)."""

from __future__ import annotations

import json
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

import typer

from anima_pipeline.cli.app import HELP, app
from anima_pipeline.cli.common import alive_lines, console, fail, progress_bar, progress_line

eval_app = typer.Typer(help="Measure the memory system on public benchmarks.", **HELP)
app.add_typer(eval_app, name="eval")
# the options both benchmarks take
REPORT = typer.Option(None, "--report", help="Where to write the JSON report.")
DATABASE_URL = typer.Option(
    None,
    "--database-url",
    help="A scratch database for the eval animas; default: an embedded store in a temporary directory "
    "(your own store is never touched).",
)


@eval_app.command("locomo")
def locomo(
    path: Path = typer.Argument(
        ..., help="LoCoMo-shaped JSON: a list of samples (sample_id, conversation, qa)."
    ),
    sample: list[str] = typer.Option(None, "--sample", help="Only these sample ids (repeatable)."),
    max_questions: int | None = typer.Option(None, "--max-questions", help="At most N questions per sample."),
    report: Path | None = REPORT,
    database_url: str | None = DATABASE_URL,
) -> None:
    """Import the dialogues as scratch animas (eval-<sample_id>), sleep every session day with
    the configured engine (ANIMA_ENGINE), then answer each question of categories 1-4 from
    the chat-time context and judge it (J, Mem0/EverMemOS protocol). With the offline engine:
    the share of questions whose context holds every key word of the answer."""
    from anima_pipeline.config import get_settings
    from anima_pipeline.evaluation.locomo import load_locomo

    dialogues = load_locomo(path, get_settings().tz)
    if sample:
        dialogues = _only(
            dialogues, sample, "sample", f"; the file has {', '.join(d.sample_id for d in dialogues)}"
        )
    _evaluate(dialogues, "locomo", max_questions=max_questions, report=report, database_url=database_url)


@eval_app.command("longmemeval")
def longmemeval(
    path: Path = typer.Argument(
        ...,
        help="LongMemEval JSON as published (longmemeval_s / _m / _oracle): a list of questions with "
        "question_id, question_type, question, answer, question_date and their haystack_sessions.",
    ),
    question: list[str] = typer.Option(None, "--question", help="Only these question ids (repeatable)."),
    max_questions: int | None = typer.Option(None, "--max-questions", help="At most the first N questions."),
    report: Path | None = REPORT,
    database_url: str | None = DATABASE_URL,
) -> None:
    """Import each question's haystack as a scratch anima (eval-<question_id>), sleep every
    session day with the configured engine (ANIMA_ENGINE), then ask the question at its
    question_date from the chat-time context and judge it with LoCoMo's J protocol, per
    question type (abstention questions left out). With the offline engine: the share of
    questions whose context holds every key word of the answer."""
    from anima_pipeline.config import get_settings
    from anima_pipeline.evaluation.longmemeval import load_longmemeval

    dialogues = load_longmemeval(path, get_settings().tz)
    if question:
        dialogues = _only(dialogues, question, "question", f" in {path}")
    _evaluate(
        dialogues[:max_questions], "longmemeval", max_questions=None, report=report, database_url=database_url
    )


def _only(dialogues: list, ids: list[str], what: str, where: str) -> list:
    """The dialogues whose id is one of `ids`; exit 2 naming the ids the file does not have."""
    unknown = sorted(set(ids) - {d.sample_id for d in dialogues})
    if unknown:
        fail(f"unknown {what} id(s) {unknown}{where}", 2)
    return [d for d in dialogues if d.sample_id in ids]


def _shown(pd, rows: list[dict], benchmark: str) -> str:
    """A score table as text: a type without questions shows "-" (no score), not NaN; LongMemEval's
    rows are named by question type, so its category numbers (ours, not the benchmark's) are left out."""
    frame = pd.DataFrame(rows)
    if benchmark == "longmemeval":
        frame = frame.drop(columns="category").rename(columns={"name": "question type"})
    frame = frame.astype(object).where(frame.notna(), "-")
    text = frame.to_string(index=False)
    if any(r["questions"] == 0 for r in rows):
        text += "\n(-: no question of that kind in the file)"
    return text


_PHASES = {"import": "importing the dialogues", "nights": "sleeping their days", "questions": "asking"}


def _drawn(bar):
    """evaluate_locomo's progress on the bar; without a terminal, a line when a phase starts
    and ends (and alive_lines' line a minute between)."""
    tasks: dict[str, Any] = {}

    def report(phase: str, done: int, total: int) -> None:
        if phase not in tasks:
            tasks[phase] = bar.add_task(_PHASES.get(phase, phase), total=total)
            progress_line(bar, tasks[phase])
        bar.update(tasks[phase], completed=done)
        if done == total and done:
            progress_line(bar, tasks[phase])

    return report


def _evaluate(dialogues: list, benchmark: str, *, max_questions, report: Path | None, database_url) -> None:
    """Run the eval on scratch animas in a scratch store and print its tables (both benchmarks)."""
    try:
        import pandas as pd
    except ImportError:
        fail("anima eval needs pandas: pip install 'anima_pipeline[bench]'", 2)

    from anima_pipeline.config import get_settings
    from anima_pipeline.evaluation.locomo import evaluate_locomo
    from anima_pipeline.llm.budget import Budget
    from anima_pipeline.llm.factory import make_engine
    from anima_pipeline.store.db import open_database

    settings = get_settings()
    categories: dict[str, Any] = {}
    if benchmark == "longmemeval":
        from anima_pipeline.evaluation.longmemeval import JUDGED, QUESTION_TYPES

        categories = {"benchmark": benchmark, "category_names": QUESTION_TYPES, "judged_categories": JUDGED}

    with tempfile.TemporaryDirectory(prefix="anima_eval_") as scratch:
        home = Path(scratch)
        run_settings = settings.model_copy(update={"home": home, "database_url": database_url})
        engine = make_engine(run_settings, Budget.from_settings(settings))
        db = open_database(run_settings)
        try:
            with progress_bar() as bar, alive_lines(bar):
                result = evaluate_locomo(
                    db,
                    run_settings,
                    engine,
                    dialogues,
                    max_questions=max_questions,
                    progress=_drawn(bar),
                    **categories,
                )
        finally:
            db.close()
            engine.close()

    with pd.option_context("display.width", 120, "display.max_columns", 20):
        if result.judged():
            console.print(
                f"J per {'question type' if categories else 'category'} ({result.engine}, {result.model}):"
            )
            console.print(_shown(pd, result.j_by_category(), benchmark))
        else:
            console.print(
                "offline engine: no model to answer or judge; offline context measure instead "
                "(share of questions whose context holds every key word of the answer):"
            )
            console.print(_shown(pd, result.keyword_coverage(), benchmark))
        tokens = result.context_tokens()
        unit = "API-counted answer prompt" if result.judged() else "characters / 4"
        console.print(f"\ncontext tokens per question ({unit}):")
        console.print(pd.DataFrame([tokens]).to_string(index=False))
        console.print(
            f"\nnight cost ${result.night_cost_usd:.4f} ({result.night_usage.calls} calls); "
            f"eval cost ${result.eval_cost_usd:.4f} ({result.eval_usage.calls} calls)"
        )
    out = report or settings.home / "eval" / f"{benchmark}-{datetime.now():%Y%m%d-%H%M%S}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result.to_json(), ensure_ascii=False, indent=2), encoding="utf-8")
    console.print(f"report: {out}")
