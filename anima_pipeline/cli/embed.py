"""`anima embed`: backfill the vectors the configured embedder lacks (recall by meaning)."""

from __future__ import annotations

from typing import cast

import typer

from anima_pipeline.cli.app import app
from anima_pipeline.cli.common import (
    alive_lines,
    anima_ids,
    console,
    fail,
    open_store,
    progress_bar,
    settings,
)


@app.command("embed")
def embed(
    anima: str | None = typer.Option(
        None, "--anima", callback=anima_ids, help="Only this anima (default: every anima)."
    ),
    kind: list[str] = typer.Option(
        ["memory", "message"], "--kind", help="memory and/or message (repeat the option)."
    ),
) -> None:
    """Embed every active memory and past message that has no vector under the configured
    model (ANIMA_EMBEDDER, ANIMA_EMBEDDER_MODEL), batch by batch, committing each batch: an
    interrupted backfill keeps what it did and the same command carries on. Nights embed what
    they write; this catches up on appended messages, a new model, or what a failing embedder
    missed."""
    from anima_pipeline.embed.provider import make_embedder
    from anima_pipeline.store import vectors
    from anima_pipeline.store.planner_stats import keep_fresh

    for k in kind:
        if k not in vectors.KINDS:
            fail(f"--kind: {k!r} is not one of {', '.join(vectors.KINDS)}", 2)
    s = settings()
    embedder = make_embedder(s)
    if embedder is None:
        from anima_pipeline.embed.embedder import INSTALL_HINT

        fail(
            "ANIMA_EMBEDDER=none: nothing to embed"
            if s.embedder.kind
            else f"no embedder installed: nothing to embed ({INSTALL_HINT})",
            2,
        )
    db = open_store()
    try:
        with db.pool.connection() as conn:
            reason = vectors.unavailable_reason(conn)
            if reason:
                fail(f"vectors unavailable: {reason}", 2)
            waiting = vectors.backlog(conn, embedder.model_id, anima)
            total = sum(waiting[k] for k in kind)
            conn.commit()
            with progress_bar() as progress, alive_lines(progress):  # a line a minute to a file
                task = progress.add_task(f"embedding ({embedder.model_id})", total=total)
                report = vectors.embed_pending(
                    conn,
                    embedder,
                    anima_id=anima,
                    kinds=cast("list[vectors.Kind]", kind),  # each checked against KINDS above
                    batch=s.embedder.batch,
                    progress=lambda n: progress.advance(task, n),
                    commit=conn.commit,
                )
            if total:
                keep_fresh(conn, {"embedding": total})
            conn.commit()
    finally:
        db.close()
    done = ", ".join(f"{n} {k}(s)" for k, n in report.embedded.items())
    left = ", ".join(f"{n} {k}(s)" for k, n in report.left.items() if k in kind)
    console.print(f"embedded {done} with {embedder.model_id}; waiting: {left}")
    if report.error:
        fail(f"the embedder stopped: {report.error} (run anima embed again)", 1)
