"""Semantic memory: facts with provenance (source_sessions, observed_at) and validity
(valid_from / valid_until, status, superseded_by). Soft deprecation only; every write audited."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel

from anima_pipeline.core.errors import InternalError, NotFound
from anima_pipeline.core.types import MemoryType
from anima_pipeline.store.db import Connection, one
from anima_pipeline.store.events import Audit

_COLUMNS = (
    "id, anima_id, type, content, confidence, source_sessions, observed_at, valid_from, valid_until, "
    "status, deprecated_reason, superseded_by, pinned, pinned_at, reference_count, last_referenced_at, "
    "created_at, updated_at, settled_at"
)
# Columns a tool may change through update; everything else is owned by the program.
UPDATABLE = ("type", "content", "confidence", "source_sessions", "observed_at", "valid_from", "valid_until")
# Columns only the program changes (deprecation, pins, citation bookkeeping); with UPDATABLE,
# everything `MemoryRepo.update` may write.
PROGRAM_OWNED = (
    "status",
    "deprecated_reason",
    "superseded_by",
    "pinned",
    "pinned_at",
    "reference_count",
    "last_referenced_at",
    "settled_at",  # set by an agent's correction (anima_pipeline/memory/forget.py): the night leaves it be
)
WRITABLE = (*UPDATABLE, *PROGRAM_OWNED)


class SemanticMemory(BaseModel):
    id: int
    anima_id: str
    type: MemoryType
    content: str
    confidence: float
    source_sessions: list[str]
    observed_at: datetime | None
    valid_from: datetime | None
    valid_until: datetime | None
    status: Literal["active", "deprecated"]
    deprecated_reason: str | None
    superseded_by: int | None
    pinned: bool
    pinned_at: datetime | None
    reference_count: float
    last_referenced_at: datetime | None
    created_at: datetime
    updated_at: datetime
    settled_at: datetime | None = None

    @property
    def ref(self) -> str:
        """How the model sees this memory: never the internal row, always f-<id>."""
        return f"f-{self.id}"


def _insert(cols: list[str]) -> str:
    """The INSERT of one memory naming `cols`, returning the row as the repository reads it."""
    return f"INSERT INTO semantic_memory ({', '.join(cols)}) VALUES ({', '.join(['%s'] * len(cols))}) RETURNING {_COLUMNS}"


class MemoryRepo:
    def __init__(self, conn: Connection, audit: Audit | None = None) -> None:
        self.conn = conn
        self.audit = audit

    def _audit(self) -> Audit:
        if self.audit is None:
            raise InternalError("this MemoryRepo is read-only: give it an Audit to write")
        return self.audit

    # reads
    def get(self, memory_id: int) -> SemanticMemory | None:
        row = self.conn.execute(
            f"SELECT {_COLUMNS} FROM semantic_memory WHERE id = %s", (memory_id,)
        ).fetchone()
        return SemanticMemory.model_validate(row) if row else None

    def get_many(self, ids: list[int]) -> list[SemanticMemory]:
        rows = self.conn.execute(
            f"SELECT {_COLUMNS} FROM semantic_memory WHERE id = ANY(%s) ORDER BY id", (ids,)
        ).fetchall()
        return [SemanticMemory.model_validate(r) for r in rows]

    def active(self, anima_id: str) -> list[SemanticMemory]:
        rows = self.conn.execute(
            f"SELECT {_COLUMNS} FROM semantic_memory WHERE anima_id = %s AND status = 'active' ORDER BY id",
            (anima_id,),
        ).fetchall()
        return [SemanticMemory.model_validate(r) for r in rows]

    def by_source_sessions(
        self, anima_id: str, sessions: list[str], status: str = "active"
    ) -> list[SemanticMemory]:
        """Memories whose sources meet these conversations (active ones: light sleep's message 2)."""
        rows = self.conn.execute(
            f"""SELECT {_COLUMNS} FROM semantic_memory
                WHERE anima_id = %s AND status = %s AND source_sessions && %s::text[] ORDER BY id""",
            (anima_id, status, sessions),
        ).fetchall()
        return [SemanticMemory.model_validate(r) for r in rows]

    def create(self, anima_id: str, values: dict[str, Any], now: datetime | None = None) -> SemanticMemory:
        cols = ["anima_id", *values.keys()]
        params = [anima_id, *values.values()]
        if now is not None:
            cols += ["created_at", "updated_at"]
            params += [now, now]
        row = self.conn.execute(_insert(cols), params).fetchone()
        mem = SemanticMemory.model_validate(row)
        self._audit().record("semantic_memory", mem.id, "create", None, mem.model_dump())
        return mem

    def create_many(self, anima_id: str, rows: Sequence[dict[str, Any]]) -> list[SemanticMemory]:
        """`create` of each row, in order, with the same statement and audit: pipelined, so a
        run of creations costs a few round trips rather than two each (rows share their keys)."""
        if not rows:
            return []
        keys = list(rows[0])
        if any(list(r) != keys for r in rows):
            raise InternalError("create_many: every row must name the same columns, in the same order")
        mems = []
        with self.conn.cursor() as cur:
            cur.executemany(
                _insert(["anima_id", *keys]), [[anima_id, *r.values()] for r in rows], returning=True
            )
            while True:
                mems.append(SemanticMemory.model_validate(cur.fetchone()))
                if not cur.nextset():
                    break
        self._audit().record_many("semantic_memory", [(m.id, "create", None, m.model_dump()) for m in mems])
        return mems

    def update(
        self, memory_id: int, changes: dict[str, Any], op: str = "update", now: datetime | None = None
    ) -> SemanticMemory:
        before = self.get(memory_id)
        if before is None:
            raise NotFound("memory", f"f-{memory_id}", field="id")
        bad = set(changes) - set(WRITABLE)
        if bad:
            raise InternalError(f"not a semantic_memory column: {sorted(bad)}")
        sets = ", ".join(f"{c} = %s" for c in changes)
        row = self.conn.execute(
            f"UPDATE semantic_memory SET {sets}, updated_at = COALESCE(%s, now()) WHERE id = %s RETURNING {_COLUMNS}",
            [*changes.values(), now, memory_id],
        ).fetchone()
        after = SemanticMemory.model_validate(row)
        self._audit().record("semantic_memory", memory_id, op, before.model_dump(), after.model_dump())
        return after

    def deprecate(
        self,
        memory_id: int,
        reason: str,
        superseded_by: int | None = None,
        valid_until: datetime | None = None,
        op: str = "deprecate",
        now: datetime | None = None,
    ) -> SemanticMemory:
        changes: dict[str, Any] = {
            "status": "deprecated",
            "deprecated_reason": reason,
            "superseded_by": superseded_by,
            "pinned": False,
        }
        if valid_until is not None:
            changes["valid_until"] = valid_until
        return self.update(memory_id, changes, op=op, now=now)


def send_resident_rows(
    conn: Connection, anima_id: str, top_n: int, pinned_max: int
) -> Callable[[], list[dict[str, Any]]]:
    """The resident read (recall/resident.py) in two halves: queue the statement (pipeline
    mode), then take its rows: the pins (most cited first, at most `pinned_max`), then the
    top `top_n` unpinned by reference count, each row with `pinned_total` (every active pin,
    also those cut) and `part`; one row of NULLs but `pinned_total` when nothing is resident."""
    cur = conn.execute(
        f"""WITH pins AS (
                SELECT count(*) AS pinned_total FROM semantic_memory
                WHERE anima_id = %(a)s AND status = 'active' AND pinned
            ), picked AS (
                (SELECT {_COLUMNS}, 0 AS part FROM semantic_memory
                 WHERE anima_id = %(a)s AND status = 'active' AND pinned
                 ORDER BY reference_count DESC, id LIMIT %(pmax)s)
                UNION ALL
                (SELECT {_COLUMNS}, 1 AS part FROM semantic_memory
                 WHERE anima_id = %(a)s AND status = 'active' AND NOT pinned AND reference_count > 0
                 ORDER BY reference_count DESC, id LIMIT %(n)s)
            )
            SELECT pins.pinned_total, picked.* FROM pins LEFT JOIN picked ON true
            ORDER BY picked.part, picked.reference_count DESC, picked.id""",
        {"a": anima_id, "pmax": max(0, pinned_max), "n": max(0, top_n)},
    )
    return cur.fetchall


def similar_memory_pairs(
    conn: Connection,
    ids: list[int],
    threshold: float,
    focus: set[int] | None,
    *,
    every_pair_ids: int,
    neighbours: int,
) -> list[tuple[int, int, float]]:
    """Deep sleep's candidate pairs among the memories `ids` (night/steps/deep/step.py
    `similar_pairs` says why): (a, b, similarity) with a < b, most similar first, at most 200.
    A pair is pg_trgm-similar above `threshold` (every pair up to `every_pair_ids` memories,
    else each memory with its `neighbours` next in content order) or shares two rare
    full-text terms; with `focus`, only pairs touching it. Sets pg_trgm.similarity_threshold
    for the rest of the transaction."""
    conn.execute("SELECT set_config('pg_trgm.similarity_threshold', %s, true)", (str(threshold),))
    rows = conn.execute(
        """WITH lex AS (
               SELECT id, unnest(tsvector_to_array(search)) AS w FROM semantic_memory WHERE id = ANY(%(ids)s)),
           df AS (SELECT w, count(*) AS n FROM lex GROUP BY w),
           rare AS (SELECT lex.id, lex.w FROM lex JOIN df USING (w)
                    WHERE df.n BETWEEN 2 AND greatest(2, %(max_df)s) AND length(lex.w) > 2),
           fts AS (SELECT x.id AS a, y.id AS b FROM rare x JOIN rare y ON x.w = y.w AND x.id < y.id
                   WHERE %(all)s OR x.id = ANY(%(focus)s) OR y.id = ANY(%(focus)s)
                   GROUP BY x.id, y.id HAVING count(*) >= 2),
           near AS (SELECT id, content,
                           lead(id, k) OVER w AS nid, lead(content, k) OVER w AS ncontent
                    FROM semantic_memory, generate_series(1, %(neighbours)s) AS k
                    WHERE NOT %(every_pair)s AND id = ANY(%(ids)s)
                    WINDOW w AS (PARTITION BY k ORDER BY lower(content), id)),
           trgm AS (SELECT a.id AS a, b.id AS b FROM semantic_memory a
                    JOIN semantic_memory b ON b.anima_id = a.anima_id AND b.id > a.id
                    WHERE %(every_pair)s AND a.id = ANY(%(ids)s) AND b.id = ANY(%(ids)s)
                      AND (%(all)s OR a.id = ANY(%(focus)s) OR b.id = ANY(%(focus)s))
                      AND a.content %% b.content
                    UNION
                    SELECT least(id, nid), greatest(id, nid) FROM near
                    WHERE nid IS NOT NULL AND (%(all)s OR id = ANY(%(focus)s) OR nid = ANY(%(focus)s))
                      AND content %% ncontent)
           SELECT p.a, p.b, similarity(a.content, b.content) AS sim
           FROM (SELECT a, b FROM trgm UNION SELECT a, b FROM fts) p
           JOIN semantic_memory a ON a.id = p.a JOIN semantic_memory b ON b.id = p.b
           ORDER BY sim DESC, p.a, p.b LIMIT 200""",
        {
            "ids": ids,
            "max_df": max(2, len(ids) // 20),
            "all": focus is None,
            "focus": sorted(focus or ()),
            "every_pair": len(ids) <= every_pair_ids,
            "neighbours": neighbours,
        },
    ).fetchall()
    return [(r["a"], r["b"], round(float(r["sim"]), 3)) for r in rows]


def active_counts(conn: Connection, anima_id: str, touched: list[int]) -> dict[str, int]:
    """The anima's active semantic memories: `active` all of them, `untouched` those not in
    `touched`."""
    row = one(
        conn.execute(
            """SELECT count(*) FILTER (WHERE NOT (id = ANY(%s))) AS untouched, count(*) AS active
           FROM semantic_memory WHERE anima_id = %s AND status = 'active'""",
            (touched, anima_id),
        )
    )
    return {"untouched": int(row["untouched"]), "active": int(row["active"])}


def supersede_links(conn: Connection, anima_id: str) -> list[dict]:
    """Every semantic memory of the anima, whatever its status: id, status, superseded_by."""
    return conn.execute(
        "SELECT id, status, superseded_by FROM semantic_memory WHERE anima_id = %s", (anima_id,)
    ).fetchall()


def active_before(conn: Connection, anima_id: str, events: list[dict]) -> list[SemanticMemory]:
    """Active memories as they were before `events` (audit events of semantic_memory, in id
    order: a night's writes), rebuilt from the events' `before` images."""
    repo = MemoryRepo(conn)
    state: dict[int, dict] = {m.id: m.model_dump() for m in repo.active(anima_id)}
    touched = sorted({int(e["memory_id"]) for e in events} - set(state))
    state.update({m.id: m.model_dump() for m in repo.get_many(touched)})
    for e in reversed(events):
        mid = int(e["memory_id"])
        if e["before"] is None:
            state.pop(mid, None)
        else:
            state[mid] = SemanticMemory.model_validate(e["before"]).model_dump()
    return [SemanticMemory.model_validate(v) for k, v in sorted(state.items()) if v["status"] == "active"]
