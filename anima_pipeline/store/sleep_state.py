"""sleep_state: per (anima, day, step) status and stats — the seeds' light_sleep_state.json.

A finished step is skipped on re-run unless forced; this is what makes a night idempotent
and what the backfill guard reads to know that day D-1 has finished."""

from __future__ import annotations

from datetime import date

from psycopg.types.json import Jsonb

from anima_pipeline.store.db import Connection


def get(conn: Connection, anima_id: str, day: date, step: str) -> dict | None:
    return conn.execute(
        "SELECT * FROM sleep_state WHERE anima_id = %s AND day = %s AND step = %s", (anima_id, day, step)
    ).fetchone()


def is_done(conn: Connection, anima_id: str, day: date, step: str) -> bool:
    row = get(conn, anima_id, day, step)
    return bool(row and row["status"] in ("done", "skipped"))


def finish(
    conn: Connection, anima_id: str, day: date, step: str, stats: dict, run_id: str, status: str = "done"
) -> None:
    conn.execute(
        """INSERT INTO sleep_state (anima_id, day, step, status, stats, run_id, finished_at, error)
           VALUES (%s, %s, %s, %s, %s, %s, now(), NULL)
           ON CONFLICT (anima_id, day, step) DO UPDATE SET status = EXCLUDED.status, stats = EXCLUDED.stats,
               run_id = EXCLUDED.run_id, finished_at = now(), error = NULL""",
        (anima_id, day, step, status, Jsonb(stats), run_id),
    )


def fail(conn: Connection, anima_id: str, day: date, step: str, error: str, run_id: str) -> None:
    conn.execute(
        """INSERT INTO sleep_state (anima_id, day, step, status, run_id, error)
           VALUES (%s, %s, %s, 'failed', %s, %s)
           ON CONFLICT (anima_id, day, step) DO UPDATE SET status = 'failed', run_id = EXCLUDED.run_id,
               error = EXCLUDED.error, finished_at = now()""",
        (anima_id, day, step, run_id, error[:4000]),
    )


def animas_on(conn: Connection, days: list[date]) -> list[str]:
    """The animas with a step recorded on any of `days` (night markers excluded)."""
    return [
        r["anima_id"]
        for r in conn.execute(
            "SELECT DISTINCT anima_id FROM sleep_state WHERE day = ANY(%s) AND anima_id <> '*' ORDER BY 1",
            (days,),
        ).fetchall()
    ]


def days_with_steps(conn: Connection, anima_ids: list[str], days: list[date]) -> list[date]:
    """Of `days`, those where a step (or the night marker) of one of `anima_ids` is done or
    running: a message arriving late for such a day is not in what those steps read."""
    rows = conn.execute(
        """SELECT DISTINCT day FROM sleep_state
           WHERE anima_id = ANY(%s) AND day = ANY(%s) AND status IN ('done', 'running') ORDER BY day""",
        (anima_ids, days),
    ).fetchall()
    return [r["day"] for r in rows]
