"""`anima review list / approve / reject`: the proposals of a night in review mode (docs/review.md)."""

from __future__ import annotations

import json
from datetime import date

import typer
from rich.markup import escape
from rich.table import Table

from anima_pipeline.cli.app import HELP, app
from anima_pipeline.cli.common import anima_ids, console, fail, open_store, parse_day, settings

review_app = typer.Typer(
    help="Review mode (ANIMA_REVIEW_MODE=true): list a night's proposed deprecations, merges, splits "
    "and unpins, and approve or reject them; only an approval changes the store.",
    **HELP,
)
app.add_typer(review_app, name="review")

_ANIMA = typer.Option(
    None,
    "--anima",
    callback=anima_ids,
    help="The anima whose proposals these are (needed only when the store has several).",
)
_DAY = typer.Option(None, "--day", help="Every pending proposal of this night (YYYY-MM-DD).")


@review_app.command("list")
def list_(
    anima: str | None = typer.Option(
        None, "--anima", callback=anima_ids, help="Only this anima's proposals."
    ),
    day: str | None = _DAY,
    status: str = typer.Option("pending", "--status", help="pending | approved | rejected | conflict | all."),
    as_json: bool = typer.Option(False, "--json", help="One JSON array: each proposal with its memories."),
) -> None:
    """Proposals with the model's reason and the memories they would change, side by side."""
    from anima_pipeline.review.decisions import pending

    db = open_store()
    try:
        views = pending(db, anima, _day(day), None if status == "all" else status)
    finally:
        db.close()
    if as_json:
        print(json.dumps([_row(v) for v in views], ensure_ascii=False, default=str, indent=1))
        return
    if not views:
        console.print(f"no {status} proposals")
        return
    table = Table(title=f"{status} proposals", show_lines=True)
    for col in ("proposal", "anima", "night", "operation", "reason", "memories"):
        table.add_column(col, overflow="fold")
    for v in views:
        p = v.proposal
        mems = "\n".join(f"f-{m.id} [{m.status}] {m.content}" for m in v.memories)
        extra = f"\n→ {p.input['content']}" if "content" in p.input else ""
        table.add_row(
            p.ref,
            p.anima_id,
            str(p.day),
            p.tool.removesuffix("_semantic_memory").removesuffix("_semantic_memories"),
            escape(p.reason or "(none given by the model)"),
            escape(mems + extra),
        )
    console.print(table)


@review_app.command("approve")
def approve(
    proposals: list[str] = typer.Argument(
        None, help="Proposal ids (r-N); with --day, every pending one of that night."
    ),
    anima: str | None = _ANIMA,
    day: str | None = _DAY,
    who: str = typer.Option("operator", "--by", help="Who decides (kept in the audit log)."),
) -> None:
    """Apply the proposals, each exactly as proposed, under one audited run (`anima revert --run` undoes it)."""
    from anima_pipeline.review.decisions import approve as apply

    _decide(lambda db, a: apply(db, settings(), a, proposals or [], day=_day(day), who=who), anima)


@review_app.command("reject")
def reject(
    proposals: list[str] = typer.Argument(
        None, help="Proposal ids (r-N); with --day, every pending one of that night."
    ),
    anima: str | None = _ANIMA,
    day: str | None = _DAY,
    reason: str | None = typer.Option(None, "--reason", help="Why (kept with the proposal)."),
    who: str = typer.Option("operator", "--by", help="Who decides (kept in the audit log)."),
) -> None:
    """Mark the proposals rejected: the store stays as it is and a later night is told a person said no."""
    from anima_pipeline.review.decisions import reject as refuse

    _decide(lambda db, a: refuse(db, a, proposals or [], day=_day(day), who=who, reason=reason), anima)


def _decide(action, anima: str | None) -> None:
    db = open_store()
    try:
        decisions = action(db, anima or _only_anima(db))
    finally:
        db.close()
    for d in decisions:
        console.print(
            f"{d.proposal}: {d.status}: {escape(d.message)}" + (f" (run {d.run_id})" if d.run_id else "")
        )
    if any(d.status == "conflict" for d in decisions):
        raise typer.Exit(1)


def _only_anima(db) -> str:
    """The store's one anima (README's `anima review approve r-1` names none); with several,
    exit 2 naming --anima and them. Known = conversations or memories (store/animas.py)."""
    from anima_pipeline.store.animas import known_animas

    with db.transaction() as conn:
        known = known_animas(conn, limit=21)
    if len(known) != 1:
        shown = ", ".join(known[:20]) + (", …" if len(known) > 20 else "")
        fail(
            f"the store has {'several animas' if known else 'no anima'}: choose one with --anima "
            f"(known: {shown or 'none'})",
            2,
        )
    return known[0]


def _day(value: str | None) -> date | None:
    return None if value is None else parse_day("--day", value)


def _row(v) -> dict:
    return {
        **v.proposal.model_dump(mode="json"),
        "proposal": v.proposal.ref,
        "memories": [m.model_dump(mode="json") for m in v.memories],
    }
