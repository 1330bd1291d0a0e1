"""After an anima's steps: the vectors of what the night wrote (recall by meaning).

The memories the night created get their vectors in the same night, each batch committed on
its own; pending messages only up to ANIMA_EMBEDDER_NIGHT_MESSAGES per anima, by default none.
Why none: on the evaluation store recall was the same to the last figure with and without
message vectors (the night has turned the messages into memories by then, and the memories
carry the vectors recall uses), and embedding every message was most of what the encoder cost
a night (docs/benchmarks.md, "Encoder"). Messages appended through the facade are still
embedded as they arrive (store/vectors.py `Backfill`), when they are all recall has of a
day; `anima embed --kind message` embeds the rest. This runs after the steps
committed, and any embedder failure is logged and counted, never raised: a night's writes
never depend on the embedder, and what it missed waits for the next night or `anima embed`.
The counts go into the night's stats and the last step's metadata (`embed_backlog_*`)."""

from __future__ import annotations

import logging

from anima_pipeline.config import Settings
from anima_pipeline.embed.provider import make_embedder
from anima_pipeline.store import vectors
from anima_pipeline.store.db import Database

log = logging.getLogger(__name__)


def embed_night(db: Database, anima_id: str, settings: Settings) -> dict[str, int]:
    with db.pool.connection() as conn:
        if not vectors.available(conn):
            conn.rollback()
            return {}
        try:
            embedder = make_embedder(settings)
            if embedder is None:
                conn.rollback()
                return {}
            batch = settings.embedder.batch  # as `anima embed` and the facade's Backfill
            memories = vectors.embed_pending(
                conn, embedder, anima_id=anima_id, kinds=["memory"], batch=batch, commit=conn.commit
            )
            limit = settings.embedder.night_messages
            messages = (
                vectors.embed_pending(
                    conn,
                    embedder,
                    anima_id=anima_id,
                    kinds=["message"],
                    batch=batch,
                    limit=limit,
                    commit=conn.commit,
                )
                if limit
                else vectors.EmbedReport({"message": 0}, {})
            )
            left = (messages if limit else memories).left  # the backlog after the last pass
            conn.commit()
        except Exception as exc:  # noqa: BLE001 - the night's writes are committed; vectors can wait
            conn.rollback()
            log.warning("vectors for %s not made this night: %s: %s", anima_id, type(exc).__name__, exc)
            return {"embed_failed": 1}
    error = memories.error or messages.error
    if error:
        log.warning("vectors for %s: the embedder stopped: %s", anima_id, error)
    return {
        "embedded_memories": memories.embedded.get("memory", 0),
        "embedded_messages": messages.embedded.get("message", 0),
        "embed_backlog_memories": left.get("memory", 0),
        "embed_backlog_messages": left.get("message", 0),
        "embed_failed": int(bool(error)),
    }
