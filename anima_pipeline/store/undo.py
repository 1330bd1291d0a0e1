"""What `anima revert` (night/revert.py) reads of the audit log and writes back: a run's
events and its revert markers, the later writes that forbid rolling a row back, and the
undo of the layers it changes directly (anchors, narratives, summaries, dream entries,
hidden messages, the run's sleep_state rows). The caller audits every undo."""

from __future__ import annotations

from datetime import date
from typing import Any

from psycopg.types.json import Jsonb

from anima_pipeline.core.errors import InternalError
from anima_pipeline.store.db import Connection

# The prefix of the deprecated_reason an undo gives a memory the run created: light sleep and
# the agent's flush may learn such a fact again (a reverted run's knowledge was not refused).
REVERTED_REASON = "reverted run"
# The layers whose rows an undo sets back column by column (derived, one per period).
DERIVED = ("temporal_summary", "dream_journal")
# The layers an undo gives back their status (deprecated, never deleted).
STATUS_LAYERS = ("emotional_anchor", "autobiographical_memory")


def revert_markers(conn: Connection, run_id: str) -> list[dict]:
    """The revert markers of `run_id` in order: the reverting run_id, anima_id and day ('' and
    None for a whole-run revert), its after (the revert's stats) and created_at."""
    return conn.execute(
        """SELECT run_id, anima_id, day, after, created_at FROM memory_event
           WHERE table_name = 'run' AND memory_id = %s AND op = 'revert' ORDER BY id""",
        (run_id,),
    ).fetchall()


def later_writers(conn: Connection, run_id: str, first: dict[tuple[str, str, str], int]) -> list[dict]:
    """For rows keyed (anima_id, table_name, memory_id) -> the id of `run_id`'s first event on
    it: the later events of other runs on those rows (anima_id, table_name, memory_id, run_id)."""
    return conn.execute(
        """SELECT e.anima_id, e.table_name, e.memory_id, e.run_id
           FROM memory_event e
           JOIN unnest(%s::text[], %s::text[], %s::text[], %s::bigint[]) AS r(anima_id, table_name, memory_id, since)
             ON e.anima_id = r.anima_id AND e.table_name = r.table_name AND e.memory_id = r.memory_id
           WHERE e.id > r.since AND e.run_id <> %s""",
        (
            [k[0] for k in first],
            [k[1] for k in first],
            [k[2] for k in first],
            list(first.values()),
            run_id,
        ),
    ).fetchall()


# the events of a run (only those of an anima / a day when given), its revert markers left out
_RUN_EVENTS = """FROM memory_event WHERE run_id = %s AND table_name <> 'run'
             AND (%s::text IS NULL OR anima_id = %s) AND (%s::date IS NULL OR day = %s)"""


def run_events(conn: Connection, run_id: str, anima_id: str | None, day: date | None) -> list[dict]:
    """The events of `run_id` (only those of `anima_id` / `day` when given), its revert
    markers left out, whole rows, newest first (the order an undo replays them in)."""
    return conn.execute(
        f"SELECT * {_RUN_EVENTS} ORDER BY id DESC", (run_id, anima_id, anima_id, day, day)
    ).fetchall()


def run_animas(conn: Connection, run_id: str, anima_id: str | None, day: date | None) -> list[str]:
    """The animas `run_events` of the same arguments returns events of, sorted."""
    rows = conn.execute(
        f"SELECT DISTINCT anima_id {_RUN_EVENTS} AND anima_id <> '' ORDER BY anima_id",
        (run_id, anima_id, anima_id, day, day),
    ).fetchall()
    return [r["anima_id"] for r in rows]


def clear_sleep_state(
    conn: Connection, run_id: str, anima_id: str | None, day: date | None, night_step: str
) -> int:
    """Delete the sleep_state rows of `run_id` (with `anima_id`: that anima's step rows, its
    `night_step` row kept; with `day`: that day's); how many went."""
    return conn.execute(
        """DELETE FROM sleep_state WHERE run_id = %s
             AND (%s::text IS NULL OR (anima_id = %s AND step <> %s)) AND (%s::date IS NULL OR day = %s)""",
        (run_id, anima_id, anima_id, night_step, day, day),
    ).rowcount


def set_layer_status(conn: Connection, table: str, row_id: Any, status: str, reason: str) -> dict | None:
    """Give row `row_id` of `table` (one of STATUS_LAYERS) `status`; a narrative also gets
    `reason` as its deprecated_reason. The row after, or None when it is gone."""
    if table not in STATUS_LAYERS:
        raise InternalError(f"set_layer_status: {table!r} is not one of {', '.join(STATUS_LAYERS)}")
    extra = ", deprecated_reason = %s" if table == "autobiographical_memory" else ""
    params = (status, reason, row_id) if extra else (status, row_id)
    return conn.execute(f"UPDATE {table} SET status = %s{extra} WHERE id = %s RETURNING *", params).fetchone()


def delete_derived(conn: Connection, table: str, row_id: int) -> None:
    """Delete row `row_id` of `table` (one of DERIVED: a summary or dream entry a run made)."""
    if table not in DERIVED:
        raise InternalError(f"delete_derived: {table!r} is not one of {', '.join(DERIVED)}")
    conn.execute(f"DELETE FROM {table} WHERE id = %s", (row_id,))


def restore_derived(conn: Connection, table: str, row_id: int, before: dict[str, Any]) -> None:
    """Set row `row_id` of `table` (one of DERIVED) back to `before`, every column but its
    id, anima and creation time."""
    if table not in DERIVED:
        raise InternalError(f"restore_derived: {table!r} is not one of {', '.join(DERIVED)}")
    cols = [k for k in before if k not in ("id", "anima_id", "created_at")]
    sets = ", ".join(f"{c} = %s" for c in cols)
    values = [Jsonb(before[c]) if isinstance(before[c], (dict, list)) else before[c] for c in cols]
    conn.execute(f"UPDATE {table} SET {sets} WHERE id = %s", [*values, row_id])


def unhide_messages(conn: Connection, anima_id: str, ids: list[int]) -> None:
    """Bring back the anima's messages `ids` that a soft forget hid."""
    conn.execute(
        "UPDATE message SET forgotten_at = NULL WHERE anima_id = %s AND id = ANY(%s)", (anima_id, ids)
    )
