"""As a night's animas end: the vectors of what their nights wrote (recall by meaning).

`NightVectors` collects the animas whose night succeeded as the pool reports them
(`night/pool.py::AnimaPool.run`'s `on_done`, in the runner's thread) and every GROUP of them
embeds the memories they lack vectors for together, in batches across animas, each batch
committed on its own; `flush` takes the rest once the pool is done. Why across animas and not
one call per anima: an anima-night writes about ten memories, and the encoder runs well below
the machine's matrix rate on so few rows (docs/benchmarks.md, "Encoder": calls of one anima's
memories cost 1.2-1.3x the CPU of the same texts in one call, and each call its own queries).
Why while the pool runs: worker processes leave this process idle, so the encoder runs beside
them instead of after them; worker processes never load it. Pending messages only up to
ANIMA_EMBEDDER_NIGHT_MESSAGES per anima, by default none. Why none: on the evaluation store
recall was the same to the last figure with and without message vectors (the night has
turned the messages into memories by then, and the memories carry the vectors recall uses),
and embedding every message was most of what the encoder cost a night. Messages appended
through the facade are still embedded as they arrive (store/vectors.py `Backfill`), when
they are all recall has of a day; `anima embed --kind message` embeds the rest.

The vectors are an index of what the nights committed: any embedder failure is logged and
counted, never raised, and what a failure (or a stop before a group's turn) missed waits for
a re-run of that day (its done animas still pass through here), the anima's next night or
`anima embed`. The counts go into each night's stats and its
last step's metadata (`embedded_*`, `embed_backlog_*`, `embed_failed`)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

import psycopg

from anima_pipeline.config import Settings
from anima_pipeline.core.errors import InternalError
from anima_pipeline.embed.provider import make_embedder, provider_name
from anima_pipeline.store import sleep_state, vectors
from anima_pipeline.store.db import Database

if TYPE_CHECKING:  # types only: the night's orchestration imports this module, not the reverse
    from anima_pipeline.night.anima_night import AnimaOutcome
    from anima_pipeline.night.frame import Night

log = logging.getLogger(__name__)

GROUP = 8  # animas embedded together: about 80 memories, a batch or two (ANIMA_EMBEDDER_BATCH)


class NightVectors:
    """The vectors of a night's succeeded animas, GROUP at a time (`add`, then `flush`), each
    night's counts added to its last step's stats and to its night row."""

    def __init__(self, db: Database, night: Night, settings: Settings) -> None:
        self.db, self.night, self.settings = db, night, settings
        self.waiting: list[AnimaOutcome] = []
        self.off = provider_name(settings) == "none"  # nothing to make: no query either

    def add(self, outcome: AnimaOutcome) -> None:
        if self.off or outcome.failure is not None or not outcome.results:
            return
        self.waiting.append(outcome)
        if len(self.waiting) >= GROUP:
            self.flush()

    def flush(self) -> None:
        group, self.waiting = self.waiting, []
        made = embed_night(self.db, [o.anima_id for o in group], self.settings)  # never raises
        if not made:
            return
        for o in group:
            o.results[-1].stats.update(made[o.anima_id])
        try:
            with self.db.transaction() as conn:
                sleep_state.add_night_stats(conn, self.night.day, self.night.run_id, made)
        except psycopg.Error as exc:  # the counts are a report: the nights stand without them
            log.warning(
                "the vectors' counts of %s were not recorded: %s: %s", self.night.day, type(exc).__name__, exc
            )


def embed_night(db: Database, anima_ids: Sequence[str], settings: Settings) -> dict[str, dict[str, int]]:
    """Embed what the nights of `anima_ids` wrote; each anima's counts (empty without vectors
    or without an embedder)."""
    if isinstance(anima_ids, str):  # a str is a sequence of one-letter "animas"
        raise InternalError("embed_night takes a list of anima ids, not one id")
    if not anima_ids:
        return {}
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
            report = vectors.embed_pending(
                conn, embedder, anima_id=list(anima_ids), kinds=["memory"], batch=batch, commit=conn.commit
            )
            errors = [report.error] if report.error else []
            messages: dict[str, int] = {}
            limit = settings.embedder.night_messages
            for anima_id in anima_ids if limit and not errors else ():
                more = vectors.embed_pending(
                    conn,
                    embedder,
                    anima_id=anima_id,
                    kinds=["message"],
                    batch=batch,
                    limit=limit,
                    commit=conn.commit,
                )
                messages[anima_id] = more.embedded.get("message", 0)
                if more.error:
                    errors.append(more.error)
                    break
            left = vectors.backlog_of(conn, embedder.model_id, anima_ids)
            conn.commit()
        except Exception as exc:  # noqa: BLE001 - the nights' writes are committed; vectors can wait
            conn.rollback()
            log.warning(
                "vectors of %d anima(s) not made this night: %s: %s", len(anima_ids), type(exc).__name__, exc
            )
            return {a: {"embed_failed": 1} for a in anima_ids}
    if errors:
        log.warning("vectors of this night: the embedder stopped: %s", errors[0])
    waiting = ("memory", "message") if limit else ("memory",)  # what the night would have embedded
    return {
        a: {
            "embedded_memories": report.by_anima[a],
            "embedded_messages": messages.get(a, 0),
            "embed_backlog_memories": left[a]["memory"],
            "embed_backlog_messages": left[a]["message"],
            "embed_failed": int(bool(errors) and any(left[a][k] for k in waiting)),
        }
        for a in anima_ids
    }
