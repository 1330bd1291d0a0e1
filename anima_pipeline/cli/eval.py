"""`anima eval locomo PATH`: the LoCoMo score of this memory system (evaluation/locomo.py)."""

from __future__ import annotations

import json
import tempfile
from datetime import datetime
from pathlib import Path

import typer
from rich.markup import escape

from anima_pipeline.cli.app import app
from anima_pipeline.cli.common import console, err_console, fail

eval_app = typer.Typer(help="Measure the memory system on public benchmarks.", no_args_is_help=True)
app.add_typer(eval_app, name="eval")


@eval_app.command("locomo")
def locomo(
    path: Path = typer.Argument(
        ..., help="LoCoMo-shaped JSON: a list of samples (sample_id, conversation, qa)."
    ),
    sample: list[str] = typer.Option(None, "--sample", help="Only these sample ids (repeatable)."),
    max_questions: int | None = typer.Option(None, "--max-questions", help="At most N questions per sample."),
    report: Path | None = typer.Option(None, "--report", help="Where to write the JSON report."),
    database_url: str | None = typer.Option(
        None,
        "--database-url",
        help="A scratch database for the eval animas; default: an embedded store in a temporary directory "
        "(your own store is never touched).",
    ),
) -> None:
    """Import the dialogues as scratch animas (eval-<sample_id>), sleep every session day with
    the configured engine (ANIMA_ENGINE), then answer each question of categories 1-4 from
    the chat-time context and judge it (J, Mem0/EverMemOS protocol). With the offline engine:
    the share of questions whose context holds every key word of the answer."""
    try:
        import pandas as pd
    except ImportError:
        fail("anima eval needs pandas: pip install 'anima_pipeline[bench]'", 2)

    from anima_pipeline.config import get_settings
    from anima_pipeline.evaluation.locomo import LocomoError, evaluate_locomo, load_locomo
    from anima_pipeline.llm.budget import Budget
    from anima_pipeline.llm.errors import EngineError
    from anima_pipeline.llm.factory import make_engine
    from anima_pipeline.sleep.runner import NightFailed
    from anima_pipeline.store.db import open_database

    settings = get_settings()
    try:
        dialogues = load_locomo(path, settings.tz)
    except LocomoError as exc:
        fail(str(exc), 2)
    if sample:
        unknown = sorted(set(sample) - {d.sample_id for d in dialogues})
        if unknown:
            fail(
                f"unknown sample id(s) {unknown}; the file has {', '.join(d.sample_id for d in dialogues)}", 2
            )
        dialogues = [d for d in dialogues if d.sample_id in sample]

    with tempfile.TemporaryDirectory(prefix="anima_eval_") as scratch:
        home = Path(scratch)
        run_settings = settings.model_copy(update={"home": home, "database_url": database_url})
        engine = make_engine(run_settings, Budget.from_settings(settings))
        db = open_database(run_settings)
        try:
            result = evaluate_locomo(db, run_settings, engine, dialogues, max_questions=max_questions)
        except (NightFailed, EngineError) as exc:
            err_console.print(f"[red]eval stopped:[/red] {escape(str(exc))}")
            raise typer.Exit(1) from None
        finally:
            db.close()
            close = getattr(engine, "close", None)
            if close is not None:
                close()

    with pd.option_context("display.width", 120, "display.max_columns", 20):
        if result.judged():
            console.print(f"J per category ({result.engine}, {result.model}):")
            console.print(pd.DataFrame(result.j_by_category()).to_string(index=False))
        else:
            console.print(
                "offline engine: no model to answer or judge; offline context measure instead "
                "(share of questions whose context holds every key word of the answer):"
            )
            console.print(pd.DataFrame(result.keyword_coverage()).to_string(index=False))
        tokens = result.context_tokens()
        unit = "API-counted answer prompt" if result.judged() else "characters / 4"
        console.print(f"\ncontext tokens per question ({unit}):")
        console.print(pd.DataFrame([tokens]).to_string(index=False))
        console.print(
            f"\nnight cost ${result.night_cost_usd:.4f} ({result.night_usage.calls} calls); "
            f"eval cost ${result.eval_cost_usd:.4f} ({result.eval_usage.calls} calls)"
        )
    out = report or settings.home / "eval" / f"locomo-{datetime.now():%Y%m%d-%H%M%S}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result.to_json(), ensure_ascii=False, indent=2), encoding="utf-8")
    console.print(f"report: {out}")
