"""Vectors for recall by meaning, in pgvector: keyed by (anima, kind, item, model id).

Only on a server with pgvector (sql/0011_vectors.sql creates the tables there and nowhere
else); every function here is a no-op, or reports "unavailable", without it. Derived data,
like an index: `embed_pending` (re)builds what a model lacks from the texts, so a model change
embeds incrementally beside the old vectors and the two spaces never meet in one query.

The index: one partial HNSW index per (model, kind) over ``v::vector(d)`` (cosine). HNSW over
IVFFlat because it needs no training (IVFFlat's lists are fitted to the rows present when it is
built and drift as a store grows from empty) and keeps recall under inserts. Per-anima
filtering: the query filters on anima_id and the planner, from the statistics, either walks the
primary key (anima, kind, model) and sorts the anima's own vectors exactly (a small anima in a
big store) or walks the HNSW index with pgvector 0.8's iterative scan (``relaxed_order``) so
that the filter cannot starve the LIMIT (docs/benchmarks.md "Recall by meaning").
"""

from __future__ import annotations

import hashlib
import logging
import math
import threading
import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from time import monotonic
from typing import TYPE_CHECKING, Literal

from anima_pipeline.core.errors import InputError, InternalError, StoreError

if TYPE_CHECKING:  # only annotations: numpy loads with an embedder
    import numpy as np

from anima_pipeline.store.db import Connection, forget_lock, one

log = logging.getLogger(__name__)

Kind = Literal["memory", "message"]
KINDS: tuple[Kind, ...] = ("memory", "message")

# What each kind's texts are: active memories; the user's and assistant's messages outside cron
# and debug conversations (what episodic recall can return).
_PENDING: dict[str, str] = {
    "memory": """SELECT x.id, x.anima_id, x.content FROM semantic_memory x
        WHERE x.status = 'active' AND {anima}
          AND NOT EXISTS (SELECT 1 FROM embedding e WHERE e.anima_id = x.anima_id AND e.kind = 'memory'
                          AND e.model_id = %(model)s AND e.item_id = x.id)""",
    "message": """SELECT x.id, x.anima_id, x.content FROM message x
        JOIN conversation c ON c.anima_id = x.anima_id AND c.id = x.conversation_id
        WHERE x.role IN ('user', 'assistant') AND c.platform <> 'cron' AND NOT c.debug AND {anima}
          AND x.forgotten_at IS NULL
          AND NOT EXISTS (SELECT 1 FROM embedding e WHERE e.anima_id = x.anima_id AND e.kind = 'message'
                          AND e.model_id = %(model)s AND e.item_id = x.id)""",
}


# What every context call asks before it embeds its question: does this database hold vectors,
# and which dimension does the model have here. A "yes" stays true for the life of a connection:
# the tables are never dropped, a model's row is never deleted (nothing deletes from
# embedding_model), and a dropped or re-created database ends its connections. So a "yes" is
# kept per connection (a pooled one asks once, not twice per call) and asked again after
# KNOWN_TTL_S; a "no" is never kept, so vectors another process makes count at the next call.
# A model row written by the asking transaction itself is not kept either (it may roll back).
KNOWN_TTL_S = 300.0
_known: weakref.WeakKeyDictionary[Connection, dict[str, tuple[float, int]]] = weakref.WeakKeyDictionary()
_TABLES = ""  # the key of "the vector tables exist" in a connection's entry


def _recall(conn: Connection, key: str) -> int | None:
    entry = _known.get(conn, {}).get(key)
    return entry[1] if entry and monotonic() - entry[0] < KNOWN_TTL_S else None


def _keep(conn: Connection, key: str, value: int) -> None:
    _known.setdefault(conn, {})[key] = (monotonic(), value)


def available(conn: Connection) -> bool:
    """True when this database holds the vector tables (pgvector was there at migration)."""
    if _recall(conn, _TABLES):
        return True
    ok = bool(one(conn.execute("SELECT to_regclass('embedding') IS NOT NULL AS ok"))["ok"])
    if ok:
        _keep(conn, _TABLES, 1)
    return ok


def unavailable_reason(conn: Connection) -> str | None:
    """None when vectors can be stored here, else why not (for status and the context)."""
    if available(conn):
        return None
    row = one(conn.execute("SELECT count(*) AS n FROM pg_available_extensions WHERE name = 'vector'"))
    if row["n"]:
        return (
            "pgvector was installed after the migration: re-create the tables (see README, Recall by meaning)"
        )
    version = conn.info.server_version // 10000
    return f"this PostgreSQL ({version}) has no pgvector extension"


def model_dimension(conn: Connection, model_id: str) -> int | None:
    """The dimension stored for `model_id`, None when it has no vectors here."""
    known = _recall(conn, model_id)
    if known:
        return known
    row = conn.execute(
        """SELECT dimension, xmin = pg_current_xact_id_if_assigned()::text::xid AS ours
           FROM embedding_model WHERE model_id = %s""",
        (model_id,),
    ).fetchone()
    if not row:
        return None
    if not row["ours"]:
        _keep(conn, model_id, row["dimension"])
    return row["dimension"]


def to_text(vector: np.ndarray | Sequence[float]) -> str:
    """pgvector's text form of one vector; InternalError for NaN or infinity, which pgvector
    refuses with a database error (embed/embedder.py checks every provider's answer first;
    this keeps any other embedder's from reaching a statement)."""
    numbers = [float(x) for x in vector]
    if not all(math.isfinite(x) for x in numbers):
        raise InternalError("a vector holds NaN or infinity")
    return "[" + ",".join(f"{x:.7g}" for x in numbers) + "]"


def index_name(model_id: str, kind: Kind) -> str:
    return f"embedding_hnsw_{kind}_{hashlib.sha1(model_id.encode()).hexdigest()[:12]}"


def ensure_model(conn: Connection, model_id: str, dimension: int) -> None:
    """Record the model's dimension and create its HNSW indexes (once per model)."""
    row = one(
        conn.execute(
            """INSERT INTO embedding_model (model_id, dimension) VALUES (%s, %s)
           ON CONFLICT (model_id) DO UPDATE SET model_id = EXCLUDED.model_id RETURNING dimension""",
            (model_id, dimension),
        )
    )
    stored = row["dimension"]
    if stored != dimension:
        raise StoreError(f"model {model_id!r} was stored with dimension {stored}, not {dimension}")
    quoted = model_id.replace("'", "''")
    for kind in KINDS:
        if one(conn.execute("SELECT to_regclass(%s) AS i", (index_name(model_id, kind),)))["i"]:
            continue  # no CREATE INDEX: even IF NOT EXISTS takes a lock that blocks writers
        conn.execute(
            f"CREATE INDEX IF NOT EXISTS {index_name(model_id, kind)} ON embedding"
            f" USING hnsw ((v::vector({int(dimension)})) vector_cosine_ops)"
            f" WHERE model_id = '{quoted}' AND kind = '{kind}'"
        )


def store_vectors(
    conn: Connection,
    anima_ids: Sequence[str],
    kind: Kind,
    ids: Sequence[int],
    texts: Sequence[str],
    model_id: str,
) -> int:
    """Upsert one vector per (anima, item), each in its text form (`to_text`); returns the rows
    written."""
    if not len(ids):
        return 0
    with conn.cursor() as cur:
        cur.executemany(
            """INSERT INTO embedding (anima_id, kind, item_id, model_id, v) VALUES (%s, %s, %s, %s, %s::vector)
               ON CONFLICT (anima_id, kind, model_id, item_id) DO UPDATE SET v = EXCLUDED.v, embedded_at = now()""",
            [(a, kind, int(i), model_id, t) for a, i, t in zip(anima_ids, ids, texts, strict=True)],
        )
    return len(ids)


def delete_vectors(conn: Connection, anima_id: str, kind: Kind, ids: Sequence[int]) -> int:
    """Erase the vectors of these items under every model (a purge); a no-op without pgvector.
    Returns the rows deleted."""
    if kind not in KINDS:
        raise InputError(f"kind must be one of {KINDS}, got {kind!r}")
    if not ids or not available(conn):
        return 0
    cur = conn.execute(
        "DELETE FROM embedding WHERE anima_id = %s AND kind = %s AND item_id = ANY(%s::bigint[])",
        (anima_id, kind, [int(i) for i in ids]),
    )
    return cur.rowcount


Animas = str | Sequence[str] | None  # one anima, several (a night's pass), or all


def _of_animas(animas: Animas) -> str:
    if animas is None:
        return "true"
    return "x.anima_id = %(anima)s" if isinstance(animas, str) else "x.anima_id = ANY(%(anima)s::text[])"


def pending(
    conn: Connection, model_id: str, kind: Kind, anima_id: Animas = None, limit: int | None = None
) -> list[dict]:
    """Items of `kind` with no vector under `model_id` (of `anima_id`: one anima, several, or
    all), oldest id first."""
    sql = _PENDING[kind].format(anima=_of_animas(anima_id)) + " ORDER BY x.id"
    sql += " LIMIT %(limit)s" if limit else ""
    args = {"model": model_id, "anima": _listed(anima_id), "limit": limit}
    return conn.execute(sql, args).fetchall()


def _listed(animas: Animas) -> str | list[str] | None:
    return animas if animas is None or isinstance(animas, str) else list(animas)


def backlog(conn: Connection, model_id: str, anima_id: str | None = None) -> dict[str, int]:
    """{kind: items waiting for a vector under `model_id`}; empty without pgvector."""
    if not available(conn):
        return {}
    out: dict[str, int] = {}
    for kind in KINDS:
        sql = f"SELECT count(*) AS n FROM ({_PENDING[kind].format(anima=_of_animas(anima_id))}) p"
        out[kind] = int(one(conn.execute(sql, {"model": model_id, "anima": anima_id}))["n"])
    return out


def backlog_of(conn: Connection, model_id: str, animas: Sequence[str]) -> dict[str, dict[str, int]]:
    """`backlog` of each of `animas` in one statement per kind ({anima: {kind: n}}, every anima
    and kind present); empty without pgvector."""
    if not available(conn):
        return {}
    out: dict[str, dict[str, int]] = {a: dict.fromkeys(KINDS, 0) for a in animas}
    for kind in KINDS:
        sql = (
            f"SELECT p.anima_id, count(*) AS n FROM ({_PENDING[kind].format(anima=_of_animas(animas))}) p"
            " GROUP BY p.anima_id"
        )
        for row in conn.execute(sql, {"model": model_id, "anima": list(animas)}):
            out[row["anima_id"]][kind] = int(row["n"])
    return out


@dataclass
class EmbedReport:
    embedded: dict[str, int]
    left: dict[str, int]
    error: str | None = None
    by_anima: Counter[str] = field(default_factory=Counter)  # items embedded per anima, all kinds

    @property
    def total(self) -> int:
        return sum(self.embedded.values())


def _still_current(
    conn: Connection, model_id: str, kind: Kind, chunk: list[dict], texts: list[str]
) -> tuple[list[dict], list[str]]:
    """The rows of `chunk` (and their vectors) still pending as `pending` reads them, under
    their animas' forget locks (shared, until the transaction ends: store/db.py `forget_lock`):
    a forget that ran while they were embedded (no lock is held meanwhile) left them out, and
    one that starts now waits for this batch, whose vectors it then deletes with the rest. So a
    hidden or erased text never keeps a vector."""
    animas = sorted({r["anima_id"] for r in chunk})
    forget_lock(conn, *animas, shared=True)
    sql = _PENDING[kind].format(anima=_of_animas(animas)) + " AND x.id = ANY(%(ids)s::bigint[])"
    args = {"model": model_id, "anima": animas, "ids": [r["id"] for r in chunk]}
    ids = {r["id"] for r in conn.execute(sql, args).fetchall()}
    kept = [(r, t) for r, t in zip(chunk, texts, strict=True) if r["id"] in ids]
    return [r for r, _ in kept], [t for _, t in kept]


def embed_pending(
    conn: Connection,
    embedder,
    *,
    anima_id: Animas = None,
    kinds: Sequence[Kind] = KINDS,
    batch: int = 64,
    limit: int | None = None,
    progress: Callable[[int], None] | None = None,
    commit: Callable[[], None] | None = None,
) -> EmbedReport:
    """Embed what `embedder` (embed.Embedder) lacks (of `anima_id`: one anima, several, or all),
    batch by batch, `commit` after each batch when given (a long backfill keeps what it did
    when stopped). An embedder error stops the work and is reported, never raised: what it
    missed stays pending for the next pass. The report's `left` is the backlog of one anima or
    all (None for several: `backlog_of` counts theirs)."""
    done: dict[str, int] = dict.fromkeys(kinds, 0)
    by_anima: Counter[str] = Counter()
    one_or_all = anima_id if anima_id is None or isinstance(anima_id, str) else None
    several = one_or_all is None and anima_id is not None

    def left() -> dict[str, int]:
        return {} if several else backlog(conn, embedder.model_id, one_or_all)

    if not available(conn):
        return EmbedReport(done, {}, "vectors unavailable")
    try:
        dimension = embedder.dimension  # an HTTP provider asks its server once
    except Exception as exc:  # noqa: BLE001 - as below: reported, the work stays pending
        return EmbedReport(done, left(), f"{type(exc).__name__}: {exc}")
    stored = model_dimension(conn, embedder.model_id)
    if stored and stored != dimension:  # the server's model changed under the same name
        changed = f"{embedder.model_id} answers {dimension} dimensions, its stored vectors have {stored}"
        return EmbedReport(done, left(), changed)
    ensure_model(conn, embedder.model_id, dimension)
    if commit:  # a new model's index holds a lock on the table a forget deletes from: not past here
        commit()
    error: str | None = None
    for kind in kinds:
        rows = pending(conn, embedder.model_id, kind, anima_id, limit)
        for s in range(0, len(rows), batch):
            chunk = rows[s : s + batch]
            try:
                vectors = embedder.embed([r["content"] for r in chunk])
                if len(vectors) != len(chunk) or any(len(v) != dimension for v in vectors):
                    raise InternalError(
                        f"{len(vectors)} vectors for {len(chunk)} texts, or not {dimension} long"
                    )
                texts = [to_text(v) for v in vectors]
            except Exception as exc:  # noqa: BLE001 - any provider failure leaves the rest pending
                error = f"{type(exc).__name__}: {exc}"
                log.warning("embedding stopped (%s); %s", embedder.model_id, error)
                break
            chunk, texts = _still_current(conn, embedder.model_id, kind, chunk, texts)
            owners = [r["anima_id"] for r in chunk]
            done[kind] += store_vectors(
                conn, owners, kind, [r["id"] for r in chunk], texts, embedder.model_id
            )
            by_anima.update(owners)
            if commit:
                commit()
            if progress:
                progress(len(chunk))
        if error:
            break
    return EmbedReport(done, left(), error, by_anima)


class Backfill:
    """Embeds one anima's new messages in a background thread, so that an append returns at
    once; `wait` lets the next context call see them (bounded by `timeout`). `make` builds the
    embedder on first use (None: no embedder); a failure is logged and left pending."""

    def __init__(self, db, anima_id: str, make: Callable[[], object | None], batch: int = 64) -> None:
        self.db, self.anima_id, self.make, self.batch = db, anima_id, make, batch
        self._lock = threading.Lock()
        self._again = False
        self._thread: threading.Thread | None = None
        self._usable: bool | None = None  # vectors here and an embedder: known after the first kick

    def kick(self) -> None:
        if self._usable is False:
            return
        with self._lock:
            self._again = True
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"embed-{self.anima_id}", daemon=True)
                self._thread.start()

    def wait(self, timeout: float) -> None:
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._again:
                    self._thread = None
                    return
                self._again = False
            try:
                self._once()
            except Exception as exc:  # noqa: BLE001 - left pending for the night or `anima embed`
                log.warning(
                    "background embedding of %s stopped: %s: %s", self.anima_id, type(exc).__name__, exc
                )

    def _once(self) -> None:
        with self.db.pool.connection() as conn:
            if self._usable is None:
                self._usable = available(conn) and self.make() is not None
                conn.rollback()
            if not self._usable:
                return
            embed_pending(
                conn,
                self.make(),
                anima_id=self.anima_id,
                kinds=["message"],
                batch=self.batch,
                commit=conn.commit,
            )
            conn.commit()
