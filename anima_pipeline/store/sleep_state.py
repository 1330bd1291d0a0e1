"""sleep_state: per (anima, day, step) status and stats, in the database.

A finished step is skipped on re-run unless forced; this is what makes a night idempotent.

The row with step NIGHT is the night of one anima on one day (docs/ordering.md): RUNNING
while a run works on it, under a lease its run renews with a heartbeat; then DONE, FAILED,
or SKIPPED when the anima had nothing to do that day. A RUNNING night whose lease has lapsed
belongs to a run that is gone, and the next run of that day takes it over. The order guard
reads these rows: an anima's day D waits for its night of D-1.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime

from psycopg.types.json import Jsonb

from anima_pipeline.store.db import Connection, one

NIGHT = "night"  # sleep_state.step of the row that records a whole night of one anima
RUNNING, DONE, FAILED, SKIPPED = "running", "done", "failed", "skipped"
FINISHED = (DONE, SKIPPED)  # a night or step that is over and need not run again


def get(conn: Connection, anima_id: str, day: date, step: str) -> dict | None:
    return conn.execute(
        "SELECT * FROM sleep_state WHERE anima_id = %s AND day = %s AND step = %s", (anima_id, day, step)
    ).fetchone()


def is_done(conn: Connection, anima_id: str, day: date, step: str) -> bool:
    row = get(conn, anima_id, day, step)
    return bool(row and row["status"] in FINISHED)


def steps_done(conn: Connection, anima_id: str, day: date) -> set[str]:
    rows = conn.execute(
        "SELECT step FROM sleep_state WHERE anima_id = %s AND day = %s AND step <> %s AND status = ANY(%s)",
        (anima_id, day, NIGHT, list(FINISHED)),
    ).fetchall()
    return {r["step"] for r in rows}


def steps_done_of(conn: Connection, animas: list[str], day: date) -> dict[str, set[str]]:
    """`steps_done` for many animas in one query."""
    rows = conn.execute(
        """SELECT anima_id, step FROM sleep_state
           WHERE anima_id = ANY(%s) AND day = %s AND step <> %s AND status = ANY(%s)""",
        (animas, day, NIGHT, list(FINISHED)),
    ).fetchall()
    out: dict[str, set[str]] = {}
    for r in rows:
        out.setdefault(r["anima_id"], set()).add(r["step"])
    return out


def finish(
    conn: Connection, anima_id: str, day: date, step: str, stats: dict, run_id: str, status: str = DONE
) -> None:
    conn.execute(
        """INSERT INTO sleep_state (anima_id, day, step, status, stats, run_id, finished_at, error)
           VALUES (%s, %s, %s, %s, %s, %s, now(), NULL)
           ON CONFLICT (anima_id, day, step) DO UPDATE SET status = EXCLUDED.status, stats = EXCLUDED.stats,
               run_id = EXCLUDED.run_id, finished_at = now(), error = NULL""",
        (anima_id, day, step, status, Jsonb(stats), run_id),
    )


def fail(
    conn: Connection, anima_id: str, day: date, step: str, error: str, run_id: str, stats: dict | None = None
) -> None:
    """Record a failed step with what it spent (`stats`: usage, so a failed step shows its cost)."""
    conn.execute(
        """INSERT INTO sleep_state (anima_id, day, step, status, stats, run_id, error, finished_at)
           VALUES (%s, %s, %s, 'failed', %s, %s, %s, now())
           ON CONFLICT (anima_id, day, step) DO UPDATE SET status = 'failed', run_id = EXCLUDED.run_id,
               stats = EXCLUDED.stats, error = EXCLUDED.error, finished_at = now()""",
        (anima_id, day, step, Jsonb(stats or {}), run_id, error[:4000]),
    )


# ---- the night of one anima: lease, heartbeat, takeover --------------------------------------


def claim_night(
    conn: Connection, anima_id: str, day: date, run_id: str, lease_s: float, stats: dict
) -> dict | None:
    """Mark the night RUNNING for `run_id` with a fresh lease, unless another run holds it
    with a lease that has not lapsed. Returns the previous row ({} when there was none), or
    None when a live run holds the night (the row is then left as it is)."""
    prev = conn.execute(
        """SELECT *, (status = 'running' AND lease_until IS NOT NULL AND lease_until > now()) AS alive
           FROM sleep_state WHERE anima_id = %s AND day = %s AND step = %s FOR UPDATE""",
        (anima_id, day, NIGHT),
    ).fetchone()
    if prev is not None and prev["alive"] and prev["run_id"] != run_id:
        return None
    conn.execute(
        """INSERT INTO sleep_state (anima_id, day, step, status, stats, run_id, started_at, finished_at,
                                    error, lease_until, heartbeat_at)
           VALUES (%s, %s, %s, 'running', %s, %s, now(), NULL, NULL, now() + make_interval(secs => %s), now())
           ON CONFLICT (anima_id, day, step) DO UPDATE SET status = 'running', stats = EXCLUDED.stats,
               run_id = EXCLUDED.run_id, started_at = now(), finished_at = NULL, error = NULL,
               lease_until = EXCLUDED.lease_until, heartbeat_at = now()""",
        (anima_id, day, NIGHT, Jsonb(stats), run_id, lease_s),
    )
    return dict(prev) if prev is not None else {}


def end_night(
    conn: Connection,
    anima_id: str,
    day: date,
    run_id: str,
    status: str,
    stats: dict,
    error: str | None = None,
) -> bool:
    """Close a night this run holds (DONE or FAILED). False when another run has taken it
    over since (this run's lease lapsed): that run's record stands."""
    row = conn.execute(
        """UPDATE sleep_state SET status = %s, stats = %s, error = %s, finished_at = now(),
               lease_until = NULL, heartbeat_at = now()
           WHERE anima_id = %s AND day = %s AND step = %s AND run_id = %s AND status = 'running'
           RETURNING 1""",
        (status, Jsonb(stats), error[:4000] if error else None, anima_id, day, NIGHT, run_id),
    ).fetchone()
    return row is not None


def add_night_stats(conn: Connection, day: date, run_id: str, stats: dict[str, dict]) -> None:
    """Add to the night rows of `day` this run recorded each anima's `stats` ({anima: stats}),
    in one statement (the night's vectors are counted after its animas ended)."""
    if not stats:
        return
    animas = list(stats)
    conn.execute(
        """UPDATE sleep_state s SET stats = s.stats || v.stats
           FROM unnest(%s::text[], %s::jsonb[]) AS v(anima_id, stats)
           WHERE s.anima_id = v.anima_id AND s.day = %s AND s.step = %s AND s.run_id = %s""",
        (animas, [Jsonb(stats[a]) for a in animas], day, NIGHT, run_id),
    )


def restore_night(conn: Connection, anima_id: str, day: date, run_id: str, prev: dict) -> None:
    """Put back the night row a partial run (some steps only) found, if this run still holds
    it: removed when there was none; a RUNNING one (its run was gone) becomes FAILED, so the
    day is redone."""
    if not prev:
        conn.execute(
            "DELETE FROM sleep_state WHERE anima_id = %s AND day = %s AND step = %s AND run_id = %s",
            (anima_id, day, NIGHT, run_id),
        )
        return
    status, error = prev["status"], prev["error"]
    if status == RUNNING:
        status, error = FAILED, f"interrupted (run {prev['run_id']} stopped before the night was over)"
    conn.execute(
        """UPDATE sleep_state SET status = %s, stats = %s, run_id = %s, started_at = %s, finished_at = %s,
               error = %s, lease_until = NULL
           WHERE anima_id = %s AND day = %s AND step = %s AND run_id = %s""",
        (
            status,
            Jsonb(prev["stats"]),
            prev["run_id"],
            prev["started_at"],
            prev["finished_at"],
            error,
            anima_id,
            day,
            NIGHT,
            run_id,
        ),
    )


def heartbeat(conn: Connection, run_id: str, lease_s: float) -> int:
    """Renew the lease of every night `run_id` is running; returns how many."""
    return conn.execute(
        """UPDATE sleep_state SET lease_until = now() + make_interval(secs => %s), heartbeat_at = now()
           WHERE run_id = %s AND step = %s AND status = 'running'""",
        (lease_s, run_id, NIGHT),
    ).rowcount


def unfinished_nights(conn: Connection, day: date, animas: Iterable[str] | None = None) -> dict[str, dict]:
    """The nights of `day` that are not over (FAILED, or RUNNING: `alive` says whether its
    lease still holds), by anima: what the order guard refuses the next day over."""
    rows = conn.execute(
        """SELECT *, (status = 'running' AND lease_until IS NOT NULL AND lease_until > now()) AS alive
           FROM sleep_state WHERE day = %s AND step = %s AND status IN ('failed', 'running')
             AND (%s::text[] IS NULL OR anima_id = ANY(%s))""",
        (day, NIGHT, *(2 * [list(animas) if animas is not None else None])),
    ).fetchall()
    return {r["anima_id"]: r for r in rows}


def skip_idle(
    conn: Connection, day: date, run_id: str, exclude: Iterable[str], only: Iterable[str] | None = None
) -> int:
    """Record in one statement that every anima with conversations, except `exclude` (and
    within `only` when given), had nothing to do on `day` (SKIPPED), so a re-run finds the
    night over. A night that is done, or running under a live lease, stays as it is."""
    return conn.execute(
        """INSERT INTO sleep_state (anima_id, day, step, status, stats, run_id, finished_at)
           SELECT DISTINCT c.anima_id, %s::date, %s, 'skipped', '{"idle": true}'::jsonb, %s, now()
           FROM conversation c
           WHERE c.anima_id <> ALL(%s::text[]) AND (%s::text[] IS NULL OR c.anima_id = ANY(%s::text[]))
           ON CONFLICT (anima_id, day, step) DO UPDATE SET status = 'skipped', stats = EXCLUDED.stats,
               run_id = EXCLUDED.run_id, finished_at = now(), error = NULL, lease_until = NULL
           WHERE sleep_state.status = 'failed'
              OR (sleep_state.status = 'running' AND (sleep_state.lease_until IS NULL
                                                      OR sleep_state.lease_until <= now()))""",
        (day, NIGHT, run_id, list(exclude), *(2 * [list(only) if only is not None else None])),
    ).rowcount


def animas_with_conversations(conn: Connection) -> list[str]:
    """Every anima the store has conversations of (the animas a night can be about)."""
    return [r["anima_id"] for r in conn.execute("SELECT DISTINCT anima_id FROM conversation ORDER BY 1")]


def animas_on(conn: Connection, days: list[date]) -> list[str]:
    """The animas with a step done on any of `days` (not the nights themselves: an idle
    anima's night is recorded as skipped)."""
    return [
        r["anima_id"]
        for r in conn.execute(
            "SELECT DISTINCT anima_id FROM sleep_state WHERE day = ANY(%s) AND step <> %s AND status = 'done' "
            "ORDER BY 1",
            (days, NIGHT),
        ).fetchall()
    ]


def days_with_steps(conn: Connection, anima_ids: list[str], days: list[date]) -> list[date]:
    """Of `days`, those where a step (or the night) of one of `anima_ids` is done or
    running: a message arriving late for such a day is not in what those steps read."""
    rows = conn.execute(
        """SELECT DISTINCT day FROM sleep_state
           WHERE anima_id = ANY(%s) AND day = ANY(%s) AND status IN ('done', 'running') ORDER BY day""",
        (anima_ids, days),
    ).fetchall()
    return [r["day"] for r in rows]


def declined_steps(conn: Connection, days: list[date], animas: list[str] | None) -> list[dict]:
    """The steps of `days` (these animas; None = all) in which the model wrote nothing and
    said why (stats.declined, night/frame.py): anima, day, step, the words, the cause."""
    return conn.execute(
        """SELECT anima_id, day, step, stats->>'declined_text' AS said,
                  coalesce(stats->>'declined_cause', 'text only') AS cause
           FROM sleep_state
           WHERE day = ANY(%s) AND step <> %s AND stats ? 'declined'
             AND (%s::text[] IS NULL OR anima_id = ANY(%s))
           ORDER BY day, anima_id, step""",
        (days, NIGHT, animas, animas),
    ).fetchall()


def latest_declined(conn: Connection, nights: int = 3) -> list[dict]:
    """The declined steps of the latest `nights` days that have step rows (`declined_steps`'
    columns), newest day first: what `anima status` shows."""
    return conn.execute(
        """SELECT anima_id, day, step, coalesce(stats->>'declined_text', '') AS said,
                  coalesce(stats->>'declined_cause', 'text only') AS cause
           FROM sleep_state
           WHERE step <> %s AND stats ? 'declined'
             AND day IN (SELECT DISTINCT day FROM sleep_state WHERE step <> %s ORDER BY day DESC LIMIT %s)
           ORDER BY day DESC, anima_id, step""",
        (NIGHT, NIGHT, nights),
    ).fetchall()


def nights_finished_by_others(conn: Connection, day: date, run_id: str) -> int:
    """How many animas' nights of `day` an earlier run (not `run_id`) finished: a re-run that
    had nothing left to do on a day says so instead of reporting an empty night."""
    row = one(
        conn.execute(
            """SELECT count(*) AS n FROM sleep_state
               WHERE step = %s AND day = %s AND status = ANY(%s) AND run_id IS DISTINCT FROM %s""",
            (NIGHT, day, list(FINISHED), run_id),
        )
    )
    return int(row["n"])


def latest_night_finished(conn: Connection, first: date, last: date, since: datetime) -> date | None:
    """The latest day in [first, last] whose night (any anima's) finished at or after `since`,
    or None: how far a run that started at `since` has come (nights end in day order)."""
    row = conn.execute(
        """SELECT max(day) AS d FROM sleep_state WHERE step = %s AND status = ANY(%s)
           AND day BETWEEN %s AND %s AND finished_at >= %s""",
        (NIGHT, list(FINISHED), first, last, since),
    ).fetchone()
    return row["d"] if row else None


def night_statuses_of_run(conn: Connection, day: date, run_id: str) -> set[str]:
    """The statuses of the nights of `day` that `run_id` holds or held (empty: it ran none)."""
    return {
        r["status"]
        for r in conn.execute(
            "SELECT DISTINCT status FROM sleep_state WHERE step = %s AND day = %s AND run_id = %s",
            (NIGHT, day, run_id),
        )
    }


def step_rows_of_run(conn: Connection, day: date, run_id: str) -> list[dict]:
    """The step rows (not the nights) `run_id` wrote on `day`: anima_id, step and stats."""
    return conn.execute(
        "SELECT anima_id, step, stats FROM sleep_state WHERE day = %s AND step <> %s AND run_id = %s",
        (day, NIGHT, run_id),
    ).fetchall()
