"""The audit log: every write by any step or tool lands in memory_event with before/after.

Repositories take an `Audit` and call `record` for each row they change, so no write can
skip the log. It is also what `anima revert --run` would replay backwards.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from psycopg.types.json import Jsonb
from pydantic import BaseModel, Field

from anima_pipeline.store.db import Connection, one


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items() if k != "search"}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return value


# memory_event.step of the writes a running agent makes through the facade (append, remember,
# conversations): day-time writes, part of the store a night finds, never one of its steps.
AGENT_STEP_PREFIX = "agent/"


@dataclass
class ToolTally:
    calls: int = 0
    refused: list[str] = field(default_factory=list)  # the executor's words, in order
    retryable: bool = False  # one of them was the store failing, which a re-run may not meet


_RECORD = """INSERT INTO memory_event (anima_id, table_name, memory_id, op, before, after, run_id, day, step)
   VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)"""


class Audit(BaseModel):
    """Who is writing: the run, the partition day and the step. One per step execution."""

    # defer_build: the validator is built on the first Audit, not at import: a read (recall,
    # status) imports this module and never writes (about 2 ms of its start)
    model_config = {"arbitrary_types_allowed": True, "defer_build": True}

    conn: Connection
    anima_id: str
    run_id: str
    step: str
    day: date | None = None
    # review mode (docs/review.md): the executor stores this writer's destructive operations
    # as proposals instead of applying them
    review: bool = False
    # the model's words each time it wrote nothing in this step (restraint, recorded as
    # "declined" in the step's stats; night/frame.py)
    declined: list[str] = Field(default_factory=list)
    # the step's tool calls and the executor's refusals (shared by the copies of this Audit a
    # step makes): a step whose every call was refused wrote nothing (night/frame.py)
    tools: ToolTally = Field(default_factory=ToolTally)

    def record(self, table: str, memory_id: Any, op: str, before: dict | None, after: dict | None) -> None:
        self.conn.execute(_RECORD, self._event(table, memory_id, op, before, after))

    def record_many(self, table: str, events: Sequence[tuple[Any, str, dict | None, dict | None]]) -> None:
        """`record` of each (memory_id, op, before, after), in order, pipelined."""
        with self.conn.cursor() as cur:
            cur.executemany(_RECORD, [self._event(table, *e) for e in events])

    def _event(self, table: str, memory_id: Any, op: str, before: dict | None, after: dict | None) -> tuple:
        return (
            self.anima_id,
            table,
            None if memory_id is None else str(memory_id),
            op,
            None if before is None else Jsonb(_jsonable(before)),
            None if after is None else Jsonb(_jsonable(after)),
            self.run_id,
            self.day,
            self.step,
        )

    def for_anima(self, anima_id: str) -> Audit:
        return self.model_copy(update={"anima_id": anima_id})


def step_growth(conn: Connection, audit: Audit, after_id: int) -> dict[str, int]:
    """What one execution of a step (its memory_event rows after `after_id`) added to the
    anima's active semantic memories: `added` memories it created that are active now and
    their `added_chars`, less the `retired` active memories it deprecated (`retired_chars`)."""
    return one(
        conn.execute(
            """WITH ev AS (
               SELECT memory_id::bigint AS id, before FROM memory_event
               WHERE anima_id = %s AND table_name = 'semantic_memory' AND day = %s
                 AND id > %s AND run_id = %s AND step = %s),
           created AS (SELECT DISTINCT id FROM ev WHERE before IS NULL),
           retired AS (SELECT DISTINCT id FROM ev WHERE before->>'status' = 'active'
                       AND id NOT IN (SELECT id FROM created))
           SELECT count(*) FILTER (WHERE m.status = 'active' AND c.id IS NOT NULL) AS added,
                  coalesce(sum(length(m.content)) FILTER (WHERE m.status = 'active' AND c.id IS NOT NULL), 0)
                      AS added_chars,
                  count(*) FILTER (WHERE m.status <> 'active' AND r.id IS NOT NULL) AS retired,
                  coalesce(sum(length(m.content)) FILTER (WHERE m.status <> 'active' AND r.id IS NOT NULL), 0)
                      AS retired_chars
           FROM semantic_memory m
           LEFT JOIN created c ON c.id = m.id LEFT JOIN retired r ON r.id = m.id
           WHERE m.id IN (SELECT id FROM created UNION SELECT id FROM retired)""",
            (audit.anima_id, audit.day, after_id, audit.run_id, audit.step),
        )
    )


def events_of_steps(conn: Connection, anima_id: str, day: date, table: str, steps: list[str]) -> list[dict]:
    """The (anima, day) events of `table` written by `steps`, in order, leaving out the runs
    that a revert undid (whole, or for this anima and day): their writes are gone already."""
    return conn.execute(
        """SELECT e.id, e.memory_id, e.op, e.before, e.after, e.step FROM memory_event e
           WHERE e.anima_id = %s AND e.day = %s AND e.table_name = %s AND e.step = ANY(%s)
             AND e.erased_at IS NULL  -- scrubbed by a purge: its row is gone, or stays as it is now
             AND NOT EXISTS (
                 SELECT 1 FROM memory_event r
                 WHERE r.table_name = 'run' AND r.op = 'revert' AND r.memory_id = e.run_id
                   AND (r.anima_id = '' OR (r.anima_id = e.anima_id AND r.day = e.day)))
           ORDER BY e.id""",
        (anima_id, day, table, steps),
    ).fetchall()


def night_writes(conn: Connection, anima_id: str, day: date, table: str, steps: list[str]) -> list[dict]:
    """The writes `steps` made to `table` for `anima_id` on the night of `day`, in order (undone
    backwards, they give the store as that night found it)."""
    return conn.execute(
        """SELECT id, memory_id, op, before, after, step FROM memory_event
           WHERE anima_id = %s AND day = %s AND table_name = %s AND step = ANY(%s) ORDER BY id""",
        (anima_id, day, table, steps),
    ).fetchall()


def event_watermark(conn: Connection) -> int:
    """The newest memory_event id (0 when there is none): a step execution's own events are
    the ones after it."""
    return int(one(conn.execute("SELECT coalesce(max(id), 0) AS n FROM memory_event"))["n"])


def event(conn: Connection, event_id: int) -> dict | None:
    """The memory_event row `event_id`, whole, or None."""
    return conn.execute("SELECT * FROM memory_event WHERE id = %s", (event_id,)).fetchone()


def semantic_writes(conn: Connection, anima_id: str, day: date, steps: list[str]) -> list[dict]:
    """The (anima, day) semantic-memory events of `steps` that no purge scrubbed, in order:
    id, memory_id, op, before, after, step (a revert's undone runs included)."""
    return conn.execute(
        """SELECT id, memory_id, op, before, after, step FROM memory_event
           WHERE anima_id = %s AND day = %s AND table_name = 'semantic_memory' AND step = ANY(%s)
             AND erased_at IS NULL
           ORDER BY id""",
        (anima_id, day, steps),
    ).fetchall()


def semantic_writes_and_confidence(
    conn: Connection, anima_id: str, day: date, steps: list[str], confidence_step: str
) -> list[dict]:
    """The (anima, day) semantic-memory events of `steps`, and the 'confidence' ones of
    `confidence_step`, that no purge scrubbed, in order: memory_id, op, step, before, after."""
    return conn.execute(
        """SELECT memory_id, op, step, before, after FROM memory_event
           WHERE anima_id = %s AND day = %s AND table_name = 'semantic_memory' AND erased_at IS NULL
             AND (step = ANY(%s) OR (step = %s AND op = 'confidence')) ORDER BY id""",
        (anima_id, day, steps, confidence_step),
    ).fetchall()


def memories_changed_outside(
    conn: Connection, anima_id: str, day: date, steps: list[str], start: datetime, end: datetime
) -> set[int]:
    """Ids of the anima's semantic memories written on `day` by anything but `steps` (an
    audited write, by its event's day), or updated in [start, end) by a write no day-tagged
    event explains (unaudited)."""
    rows = conn.execute(
        """SELECT memory_id::bigint AS id FROM memory_event
           WHERE anima_id = %s AND table_name = 'semantic_memory' AND day = %s AND NOT (step = ANY(%s))
           UNION
           SELECT m.id FROM semantic_memory m
           WHERE m.anima_id = %s AND m.updated_at >= %s AND m.updated_at < %s
             AND NOT EXISTS (SELECT 1 FROM memory_event e
                             WHERE e.table_name = 'semantic_memory' AND e.memory_id = m.id::text
                               AND e.day IS NOT NULL AND e.created_at >= m.updated_at)""",
        (anima_id, day, steps, anima_id, start, end),
    ).fetchall()
    return {r["id"] for r in rows}


def deprecations_since(conn: Connection, audit: Audit, step: str, after_id: int) -> int:
    """How many active semantic memories the events after `after_id` of this audit's run,
    anima and day, written by `step`, deprecated."""
    row = one(
        conn.execute(
            """SELECT count(*) AS n FROM memory_event
           WHERE id > %s AND run_id = %s AND anima_id = %s AND step = %s AND day = %s
             AND table_name = 'semantic_memory'
             AND before->>'status' = 'active' AND after->>'status' = 'deprecated'""",
            (after_id, audit.run_id, audit.anima_id, step, audit.day),
        )
    )
    return int(row["n"])


# The semantic-memory events of (anima, day) as the loss guard reads them (night/guards.py).
_STATUS_CHANGES = """SELECT id, memory_id, op, after->>'superseded_by' AS superseded_by, before->>'status' AS before_status, before->>'content' AS before_content,
                    after->>'status' AS after_status, after->>'content' AS after_content
             FROM memory_event
             WHERE anima_id = %s AND table_name = 'semantic_memory' AND day = %s"""


def status_changes_of_step(conn: Connection, audit: Audit, after_id: int) -> list[dict]:
    """The semantic-memory events of this execution of the audit's step (after `after_id`),
    in order: id, memory_id, op, superseded_by, and status and content before and after."""
    return conn.execute(
        _STATUS_CHANGES + " AND id > %s AND run_id = %s AND step = %s ORDER BY id",
        (audit.anima_id, audit.day, after_id, audit.run_id, audit.step),
    ).fetchall()


def status_changes_of_night(conn: Connection, anima_id: str, day: date) -> list[dict]:
    """`status_changes_of_step` over every run of the night of `day` (reverts included)."""
    return conn.execute(_STATUS_CHANGES + " ORDER BY id", (anima_id, day)).fetchall()
