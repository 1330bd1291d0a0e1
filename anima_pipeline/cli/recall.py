"""`anima recall`: what the agent would get back at chat time, section by section."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

import typer
from pydantic import BaseModel, ConfigDict, ValidationError

from anima_pipeline.cli.app import app
from anima_pipeline.cli.common import fail, only_anima, open_store, settings
from anima_pipeline.core.validation import READ_DEFAULT, READ_MAX


@app.command("recall")
def recall_(
    query: str | None = typer.Argument(None, help="What the agent is asking its memory."),
    anima: str | None = typer.Option(None, "--anima", help="Which anima (default: the only one)."),
    session: str | None = typer.Option(
        None,
        "--session",
        help="The current conversation's id: its messages, and memories sourced only from it, are left out.",
    ),
    budget: int | None = typer.Option(
        None,
        "--budget",
        help="Characters for recalled memories + messages (+ summaries); default from config.",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the sections as JSON (ids, scores, chars)."),
    batch: Path | None = typer.Option(
        None,
        "--batch",
        help="A file of questions, one a line (plain text, or JSON with question/anima/session/now):"
        " prints one JSON line per question. '-' reads standard input.",
    ),
) -> None:
    """Resident memories, then summaries (for a question about a time), recalled memories and
    past messages, each within its character budget."""
    from anima_pipeline.recall.assemble import assemble_context, budgets_from
    from anima_pipeline.store.db import read_only

    cfg = settings()
    budgets = budgets_from(cfg)
    if budget is not None:
        if budget < 0:
            fail(f"--budget must be 0 or more, got {budget}", 2)
        budgets = budgets.model_copy(update={"recall": budget})
    if (query is None) == (batch is None):
        fail("give either a QUERY or --batch FILE", 2)
    requests: list[dict[str, Any]] = (
        [{"question": query, "anima": anima, "session": session}] if batch is None else _read_batch(batch)
    )
    db = open_store(read_only=True)
    try:
        for req in requests:
            with db.transaction() as conn:
                read_only(conn)
                result = assemble_context(
                    conn,
                    only_anima(conn, req.get("anima") or anima),
                    req["question"],
                    settings=cfg,
                    session_id=req.get("session") or session,
                    budgets=budgets,
                    now=req.get("now"),
                )
            if batch is not None:
                print(json.dumps({"id": req.get("id"), **result.model_dump(mode="json")}, ensure_ascii=False))
            elif as_json:
                print(result.model_dump_json(indent=2))
            else:
                # plain text, not rich: nothing to draw, and rich's import is 15 ms of the start
                sys.stdout.write(_text(result) + "\n")
    finally:
        db.close()


@app.command("message")
def message_(
    ref: str = typer.Argument(..., help="The message's id as recall shows it (m-12, or 12)."),
    anima: str | None = typer.Option(None, "--anima", help="Which anima (default: the only one)."),
    offset: int = typer.Option(
        0, "--offset", help="The first character to read (a previous read's next offset)."
    ),
    limit: int = typer.Option(
        READ_DEFAULT, "--limit", help=f"Characters to read at most (1 to {READ_MAX:,})."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print every field as JSON."),
) -> None:
    """One past message by its id, whole or in parts: what a context or a search shows in part
    (marked …). The same read as the HTTP route and the MCP tool read_message."""
    from anima_pipeline.memory.models import MessageRequest
    from anima_pipeline.recall.episodic import read_message
    from anima_pipeline.recall.render import message_lines
    from anima_pipeline.store.db import read_only

    cfg = settings()
    req = MessageRequest.of(cfg, id=ref, offset=offset, limit=limit)  # the rules of every door
    db = open_store(read_only=True)
    try:
        with db.transaction() as conn:
            read_only(conn)
            part = read_message(conn, only_anima(conn, anima), req.number, req.offset, req.limit)
    finally:
        db.close()
    sys.stdout.write((part.model_dump_json(indent=2) if as_json else message_lines(part)) + "\n")


def _text(result) -> str:
    from anima_pipeline.recall.render import read_note

    lines = []
    for s in result.sections:
        if s.name == "summaries" and not s.items:
            continue
        lines.append(f"# {s.title} ({s.chars_used}/{s.budget} chars)")
        lines += [i.line for i in s.items] or ["(none)"]
        lines.append("")
    note = read_note(result, "`anima message`")
    return "\n".join([*lines, *([note] if note else [])]).rstrip()


class BatchLine(BaseModel):
    """One JSON line of `anima recall --batch`."""

    model_config = ConfigDict(extra="forbid")
    question: str
    id: str | int | None = None
    anima: str | None = None
    session: str | None = None
    now: datetime | None = None


def _read_batch(path: Path) -> list[dict]:
    """Questions of a batch file; a bad line stops everything before any recall, naming it."""
    name = "<stdin>" if str(path) == "-" else str(path)
    try:
        text = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
    except OSError as exc:
        fail(f"--batch {name}: cannot read ({exc.strerror})", 2)
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        if raw.lstrip().startswith("{"):
            try:
                line = BatchLine.model_validate_json(raw)
            except ValidationError as exc:
                err = exc.errors()[0]
                fail(f"{name}:{n}: {'.'.join(map(str, err['loc'])) or 'line'}: {err['msg']}", 2)
            if not line.question.strip():
                fail(f"{name}:{n}: question is empty", 2)
            if line.now is not None and line.now.tzinfo is None:
                fail(f"{name}:{n}: now has no UTC offset", 2)
            out.append(line.model_dump())
        else:
            out.append({"question": raw.strip()})
    return out
