"""`anima sleep` and `anima revert`: nights through Dagster, and undoing a run."""

from __future__ import annotations

import sys
import uuid
from typing import TYPE_CHECKING, cast

import psycopg
import typer
from psycopg_pool import PoolTimeout
from rich.markup import escape
from rich.table import Table

from anima_pipeline.cli.app import app
from anima_pipeline.cli.common import (
    alive_lines,
    console,
    declined_line,
    err_console,
    fail,
    open_store,
    parse_day,
    per_anima_night,
    progress_bar,
    progress_line,
    require_animas,
    settings,
)
from anima_pipeline.core.steps import StepKey
from anima_pipeline.store import sleep_state

if TYPE_CHECKING:
    from anima_pipeline.night.frame import Mode


@app.command("sleep")
def sleep_(
    day: str | None = typer.Option(
        None, "--day", metavar="YYYY-MM-DD", help="One night: the local day to consolidate."
    ),
    first: str | None = typer.Option(
        None, "--from", metavar="YYYY-MM-DD", help="First day of a range (with --to)."
    ),
    last: str | None = typer.Option(
        None, "--to", metavar="YYYY-MM-DD", help="Last day of a range (with --from)."
    ),
    anima: list[str] = typer.Option(
        None, "--anima", metavar="ANIMA", help="Only these animas (repeatable); default: all active."
    ),
    mode: str | None = typer.Option(
        None,
        "--mode",
        metavar="full|incremental",
        help="Deep sleep mode: full | incremental. Default: the schedule's rule (Monday full).",
    ),
    force: bool = typer.Option(False, "--force", help="Re-run steps that already finished for a day."),
    step: list[str] = typer.Option(
        None, "--step", metavar="STEP", help="Only this step (asset key, e.g. semantic_memory/merged)."
    ),
    shard: str = typer.Option(
        "",
        "--shard",
        metavar="i/N",
        help="Only the animas of shard i of N, as i/N (e.g. 0/4); see docs/deploy.md.",
    ),
    estimate: bool = typer.Option(
        False,
        "--estimate",
        help="Print the expected tokens and dollars per step from the stores' sizes and send nothing "
        "(the estimate the ANIMA_BUDGET_USD guard refuses a run by; docs/cost.md).",
    ),
) -> None:
    """Run nights through Dagster, one day after another, recorded in the run history under
    DAGSTER_HOME (default $ANIMA_HOME/dagster): exactly what the UI and the 02:00 schedule run."""
    days = _days(day, first, last)
    if mode not in (None, "full", "incremental"):
        fail(f"--mode must be full or incremental, got {mode!r}", 2)
    require_animas(anima)
    if estimate:
        _print_estimate(days, animas=anima or (), mode=mode, force=force, steps=step or None, shard=shard)
        return
    rows = run_sleep(
        days, animas=anima or (), mode=mode or "scheduled", force=force, steps=step or None, shard=shard
    )
    console.print(sleep_table(rows))
    for line in declined_lines(rows):
        console.print(line, soft_wrap=True)
    if rows and rows[0].get("signal"):
        raise typer.Exit(128 + rows[0]["signal"])  # the shell's convention: 130 SIGINT, 143 SIGTERM
    failed = [r for r in rows if r["status"] in ("failed", "not run")]
    if failed:
        raise typer.Exit(1)


def _print_estimate(days: list, *, animas, mode: str | None, force: bool, steps, shard: str) -> None:
    """`anima sleep --estimate`: one table per night and the run's total, nothing sent."""
    from anima_pipeline.defs.night.assets import parse_shard
    from anima_pipeline.night.estimate import estimate_run
    from anima_pipeline.night.registry import select_steps

    s = settings()
    keys = [d.key for d in select_steps(steps)]
    estimates = estimate_run(
        open_store(),
        s,
        days,
        cast("Mode | None", mode),  # checked by the caller: full | incremental | None
        animas or None,
        keys,
        force=force,
        shard=parse_shard(shard) if shard else None,
    )
    total = 0.0
    for e in estimates:
        table = Table(
            title=f"estimate: night of {e.day} ({e.mode}, {'batch' if e.batch else 'sync'}), {e.animas} anima(s)"
        )
        for col in ("step", "model", "animas", "calls", "input", "cache write", "cache read", "output", "$"):
            table.add_column(col, justify="left" if col in ("step", "model") else "right")
        for row in e.steps:
            u = row.usage
            table.add_row(
                row.step,
                row.model,
                str(row.animas),
                str(u.calls),
                f"{u.input_tokens:,}",
                f"{u.cache_write_tokens:,}",
                f"{u.cache_read_tokens:,}",
                f"{u.output_tokens:,}",
                f"{u.cost_usd:.4f}",
            )
        t = e.total
        table.add_row(
            "the night",
            "",
            str(e.animas),
            str(t.calls),
            f"{t.input_tokens:,}",
            f"{t.cache_write_tokens:,}",
            f"{t.cache_read_tokens:,}",
            f"{t.output_tokens:,}",
            f"{t.cost_usd:.4f}",
        )
        console.print(table)
        if e.already_done and not t.calls:
            console.print(
                f"the night of {e.day} is already done ({e.already_done} step(s)): a run would send "
                "nothing; `--force` estimates a re-run"
            )
        total += t.cost_usd
    budget = (
        f" (ANIMA_BUDGET_USD {s.budget_usd:.4f}: {'refused' if total > s.budget_usd else 'within'})"
        if s.budget_usd is not None
        else ""
    )
    console.print(f"estimated cost of the run: ${total:.4f}{budget}; nothing was sent")


def _days(day: str | None, first: str | None, last: str | None) -> list:
    from anima_pipeline.night.registry import day_range

    if day and not (first or last):
        return [parse_day("--day", day)]
    if first and last and not day:
        start, end = parse_day("--from", first), parse_day("--to", last)
        if end < start:
            fail(f"--to {end} is before --from {start}", 2)
        return day_range(start, end)
    fail("give either --day YYYY-MM-DD, or --from YYYY-MM-DD --to YYYY-MM-DD", 2)
    return []


def run_sleep(
    days: list, *, animas=(), mode: str = "scheduled", force: bool = False, steps=None, shard: str = ""
) -> list[dict]:
    """The whole range as ONE Dagster run (the UI's single-run backfill shape: days strictly
    in order inside it), with a progress bar over days fed from the night markers the run
    writes; returns one summary row per day read back from sleep_state."""
    import signal
    import threading

    from anima_pipeline.defs.instance import get_instance
    from anima_pipeline.defs.night.launch import COMMAND_TAG, launch_night
    from anima_pipeline.store.calendar import note_first_day
    from anima_pipeline.store.db import db_now

    s = settings()
    db = open_store()  # starts the embedded server and migrates before Dagster opens it
    instance = get_instance()
    first, last = days[0], days[-1]
    with db.transaction() as conn:
        t0 = db_now(conn)
        note_first_day(conn, s.timezone)  # where the partitions start (store/calendar.py)
    done = threading.Event()
    outcome: dict = {}
    try:
        with progress_bar() as progress, alive_lines(progress):  # a long night: a line a minute
            task = progress.add_task(f"nights {first}..{last}", total=len(days))

            def poll() -> None:
                seen = None
                # five times a second: a range of quiet days runs in bulk, a busy night in
                # a second or two, and a slower poll let the bar skip most of them
                while not done.wait(0.2):
                    try:
                        with db.transaction() as conn:
                            latest = sleep_state.latest_night_finished(conn, first, last, t0)
                    except (psycopg.Error, PoolTimeout):  # the store went away: the night reports it
                        continue
                    if latest and latest != seen:
                        seen = latest  # nights end in day order: the latest one says how far
                        progress.update(
                            task, completed=(seen - first).days + 1, description=f"night of {seen}"
                        )
                        progress_line(progress, task)

            poller = threading.Thread(target=poll, daemon=True)
            poller.start()
            try:  # a ValueError (a day not over yet, an unknown step) propagates: nothing ran
                launched = launch_night(
                    first,
                    last,
                    steps=steps,
                    mode=mode,
                    force=force,
                    animas=animas,
                    shard=shard,
                    instance=instance,
                    # one line per failed night below; Dagster's STEP_FAILURE with its stack
                    # trace stays in the run log (the UI, `dagster run logs`), not on the terminal
                    log_level="CRITICAL",
                    settings=s,
                    extra_tags={COMMAND_TAG: " ".join(["anima", *sys.argv[1:]])[:1000]},
                )
                outcome = {
                    "ok": launched.ok,
                    "run_id": launched.run_id,
                    "error": launched.error,
                    "failed_day": launched.failed_day,
                    "signal": launched.signal,
                    "status": launched.status.value,
                }
                for run_id in launched.marked_dead:
                    err_console.print(
                        f"note: run {run_id} was left running by a process that is gone; marked failed"
                    )
            finally:
                done.set()
                poller.join()
            if outcome["ok"]:
                progress.update(task, completed=len(days))
        try:
            rows = [_day_row(db, d, outcome) for d in days]
        except (psycopg.Error, PoolTimeout) as exc:  # the store went away during the night
            rows = [_unread_row(d, outcome, exc) for d in days]
    finally:
        instance.dispose()
        db.close()
    if outcome["signal"]:
        name = signal.Signals(outcome["signal"]).name
        err_console.print(
            f"[red]stopped by {name}:[/red] the step in progress was rolled back, run {outcome['run_id']} "
            f"is {outcome['status']}; run the same command again to carry on"
        )
    elif not outcome["ok"]:
        err_console.print(
            f"[red]the night failed:[/red] {escape(outcome['error'])} (run {outcome['run_id']}; the full "
            "trace is in its Dagster run log)",
            soft_wrap=True,
        )
    return rows


def _unread_row(d, outcome: dict, exc: BaseException) -> dict:
    """A day of a run whose store could not be read afterwards: failed unless the run was ok."""
    return {
        "day": d,
        "run_id": outcome["run_id"],
        "signal": outcome["signal"],
        "status": "done" if outcome["ok"] else "failed",
        "error": outcome["error"] or f"the memory database could not be read ({type(exc).__name__})",
        **dict.fromkeys(_TOTALS, 0),
        "animas": 0,
        "llm_calls": 0,
        "cost_usd": 0.0,
        "declined": [],
    }


def _day_row(db, d, outcome: dict) -> dict:
    """One day of this run: done, failed (an anima's night failed, or the run stopped on this
    day), or not run (the run stopped before it); the totals of this run's rows only."""
    with db.transaction() as conn:
        statuses = sleep_state.night_statuses_of_run(conn, d, outcome["run_id"])
        earlier = sleep_state.nights_finished_by_others(conn, d, outcome["run_id"]) if not statuses else 0
    if outcome["ok"]:
        status = "already done" if earlier else "done"  # "already done": an earlier run slept it
    elif sleep_state.FAILED in statuses or sleep_state.RUNNING in statuses or d == outcome["failed_day"]:
        status = "failed"
    elif statuses:
        status = "done"
    else:
        status = "not run"
    return {
        "day": d,
        "run_id": outcome["run_id"],
        "signal": outcome["signal"],
        "status": status,
        "error": outcome["error"],
        **_day_totals(db, d, outcome["run_id"]),
    }


_TOTALS = ("created", "updated", "deprecated", "merged", "split", "anchors", "narratives", "summaries")


def _day_totals(db, d, run_id: str) -> dict:
    """Sums over the step rows this run wrote on day d (done or failed: a failed step records
    what it spent); steps skipped as done by an earlier run are that run's."""
    with db.transaction() as conn:
        rows = sleep_state.step_rows_of_run(conn, d, run_id)
    totals: dict[str, float] = dict.fromkeys(_TOTALS, 0)
    # animas with talk that day: light sleep runs only for them (cleanup looks at everyone)
    talked = {r["anima_id"] for r in rows if r["step"] == StepKey.SEMANTIC_EXTRACTED}
    totals.update(animas=len(talked), llm_calls=0, cost_usd=0.0)
    for r in rows:
        for k in (*_TOTALS, "llm_calls", "cost_usd"):
            v = r["stats"].get(k)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                totals[k] += v
    # the steps whose model wrote nothing and why (docs/ordering.md, "Restraint"): done, and named
    declined = [
        {
            "anima_id": r["anima_id"],
            "step": r["step"],
            "cause": str(r["stats"].get("declined_cause") or "text only"),
            "said": str(r["stats"].get("declined_text") or ""),
        }
        for r in sorted(rows, key=lambda r: (r["anima_id"], r["step"]))
        if r["stats"].get("declined")
    ]
    return {**totals, "declined": declined}


_TOTALS_SHORT = ("new", "upd", "depr", "merg", "split", "anch", "narr", "summ")


def declined_lines(rows: list[dict]) -> list[str]:
    """One line per declined step under the nights table: day, anima, step, cause and words."""
    return [
        declined_line(r["day"], d["anima_id"], d["step"], d["cause"], d["said"])
        for r in rows
        for d in r.get("declined") or ()
    ]


def sleep_table(rows: list[dict]) -> Table:
    table = Table(
        title="nights (new/upd/depr/merg/split = semantic memories; anch = anchors; narr = narratives; "
        "summ = summaries)"
    )
    for col in ("day", "status", "animas", *_TOTALS_SHORT, "llm", "$", "$/anima-night", "declined"):
        table.add_column(col, justify="left" if col in ("day", "status") else "right", no_wrap=True)
    for r in rows:
        idle = not r["animas"] and not r.get("declined")
        if idle and r["status"] != "failed" and len(rows) > 14 and r is not rows[-1]:
            continue  # a long range lists the days with activity; the count below covers the rest
        table.add_row(
            str(r["day"]),
            r["status"],
            str(r["animas"]),
            *(str(r[k]) for k in _TOTALS),
            str(r["llm_calls"]),
            f"{r['cost_usd']:.4f}",
            per_anima_night(r["cost_usd"], r["llm_calls"], r["animas"]),
            str(len(r.get("declined") or ())),
        )
    before = sum(1 for r in rows if r["status"] == "already done")
    quiet = sum(1 for r in rows if not r["animas"]) - before
    run_ids = sorted({r["run_id"] for r in rows if r["run_id"]})
    table.caption = (
        f"{len(rows)} night(s), {len(rows) - quiet - before} with activity"
        + (f", {before} already done by an earlier run (--force redoes them)" if before else "")
        + f"; Dagster run {', '.join(run_ids) or '-'}"
    )
    return table


@app.command("revert")
def revert_(
    run: str = typer.Option(..., "--run", help="The run id to undo (Dagster run id, shown by anima sleep)."),
    force: bool = typer.Option(
        False,
        "--force",
        help="When later runs changed some of its rows, revert only the rows they did not touch.",
    ),
) -> None:
    """Undo what one run wrote, replaying its audit log backwards: created memories are
    deprecated, changed ones get their previous state, cleaned conversations come back.
    The revert is itself audited, and its nights can be run again. A run is reverted once; a
    run whose rows later runs changed is refused unless --force (docs/guards.md)."""
    from anima_pipeline.night.revert import revert_run

    db = open_store()
    revert_id = f"revert-{uuid.uuid4().hex[:12]}"
    try:
        with db.transaction() as conn:
            stats = revert_run(conn, run, revert_id, force=force)
    finally:
        db.close()
    console.print(
        f"reverted run {run} as {revert_id}: " + ", ".join(f"{k} {v}" for k, v in sorted(stats.items()))
    )
