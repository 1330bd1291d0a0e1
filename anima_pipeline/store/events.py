"""The audit log: every write by any step or tool lands in memory_event with before/after.

Repositories take an `Audit` and call `record` for each row they change, so no write can
skip the log. It is also what `anima revert --run` would replay backwards.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from psycopg.types.json import Jsonb
from pydantic import BaseModel, Field

from anima_pipeline.store.db import Connection


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


class Audit(BaseModel):
    """Who is writing: the run, the partition day and the step. One per step execution."""

    model_config = {"arbitrary_types_allowed": True}

    conn: Connection
    anima_id: str
    run_id: str
    step: str
    day: date | None = None
    # review mode (docs/review.md): the executor stores this writer's destructive operations
    # as proposals instead of applying them
    review: bool = False
    # the model's words each time it wrote nothing in this step (restraint, recorded as
    # "declined" in the step's stats; sleep/night.py)
    declined: list[str] = Field(default_factory=list)

    def record(self, table: str, memory_id: Any, op: str, before: dict | None, after: dict | None) -> None:
        self.conn.execute(
            """INSERT INTO memory_event (anima_id, table_name, memory_id, op, before, after, run_id, day, step)
               VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)""",
            (
                self.anima_id,
                table,
                None if memory_id is None else str(memory_id),
                op,
                None if before is None else Jsonb(_jsonable(before)),
                None if after is None else Jsonb(_jsonable(after)),
                self.run_id,
                self.day,
                self.step,
            ),
        )

    def for_anima(self, anima_id: str) -> Audit:
        return self.model_copy(update={"anima_id": anima_id})
