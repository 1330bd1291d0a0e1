"""How long `anima sleep --from --to` takes over many mostly quiet days, with the offline engine.

Writes a synthetic archive (one anima, talk on a few days spread over the range), imports it
into a fresh embedded store under a temporary ANIMA_HOME (or ANIMA_DATABASE_URL if set),
runs the whole range through the real CLI (one Dagster run over the range, days in order), then runs it again
with --force to show that a second pass changes no count (--no-force-pass skips it). Then
sleeps the same archive in a second fresh store with `runner.run_days` alone (the loop the
Dagster asset calls): how much of the CLI's time is the nights themselves, and how much is
Dagster's run. Prints the timings measured in this one run, and the first pass's Dagster
events by type (every (day, step) is materialized, a quiet day's quiet steps in one batch,
and a range is planned with one event per asset; docs/ordering.md "Quiet days in a range").

    .venv/bin/python -m benchmarks.year_of_nights [--days 365] [--active 29] [--no-force-pass]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import date, datetime, timedelta
from pathlib import Path

TOPICS = [
    ("I went hiking at {place} with my friend {name} yesterday.", "That sounds lovely! How was the view?"),
    ("I really love {food}, I could eat it every day.", "Good to know, I'll remember you love {food}."),
    ("My sister {name} just started a new job as a {job}.", "Congratulations to {name}!"),
    ("I'm planning to visit {place} next month.", "Exciting! Let me know if you want tips."),
    ("Honestly I feel stressed about work this week.", "I'm sorry, that sounds hard. Want to talk about it?"),
    ("I finally finished my first marathon today!", "That's a huge milestone, well done!"),
    ("我昨天和{name}去了{place}，玩得很开心。", "听起来很棒！"),
    ("我最喜欢吃{food}了。", "记住了，你喜欢{food}。"),
]
FILL = {
    "place": ["Mount Tai", "the West Lake", "Qingdao", "the botanical garden", "Xi'an"],
    "name": ["Mei", "Jun", "Sara", "Tom", "小林"],
    "food": ["dumplings", "hotpot", "mango sticky rice", "ramen", "火锅"],
    "job": ["nurse", "teacher", "designer", "pilot"],
}


def write_archive(path: Path, first: date, days: int, active: int, seed: int = 7) -> list[date]:
    rnd = random.Random(seed)
    talk_days = sorted(rnd.sample(range(days), active))
    lines = []
    for n in talk_days:
        day = first + timedelta(days=n)
        conv = f"bench:{day}"
        t = datetime(day.year, day.month, day.day, 20, 0).astimezone().replace(tzinfo=None)
        for i, (u, a) in enumerate(rnd.sample(TOPICS, 3)):
            fill = {k: rnd.choice(v) for k, v in FILL.items()}
            for j, (role, text) in enumerate((("user", u), ("assistant", a))):
                stamp = (t + timedelta(minutes=2 * i, seconds=40 * j)).isoformat() + "+08:00"
                lines.append(
                    json.dumps(
                        {
                            "anima_id": "bench",
                            "conversation_id": conv,
                            "message_id": f"{conv}:{i}:{j}",
                            "role": role,
                            "speaker": "Sam" if role == "user" else "Echo",
                            "content": text.format(**fill),
                            "created_at": stamp,
                        },
                        ensure_ascii=False,
                    )
                )
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [first + timedelta(days=n) for n in talk_days]


def anima(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("anima")
    return subprocess.run([str(exe), *args], env=env, capture_output=True, text=True, check=True)


def runner_alone(archive: Path, first: date, last: date, home: Path) -> float:
    """Seconds `runner.run_days` takes over the range in a fresh embedded store (no Dagster)."""
    from anima_pipeline.config import Settings
    from anima_pipeline.night import runner
    from anima_pipeline.store import embedded
    from anima_pipeline.store.archive import ImportStats, import_records, parse_lines
    from anima_pipeline.store.db import open_database
    from anima_pipeline.store.events import Audit

    settings = Settings(home=home, engine="offline", start_date=first)
    db = open_database(settings)
    try:
        with db.transaction() as conn:
            audit = Audit(conn=conn, anima_id="", run_id="import", step="import")
            lines = archive.read_text(encoding="utf-8").splitlines()
            import_records(conn, parse_lines(lines, str(archive)), audit, ImportStats())
        t0 = time.monotonic()
        runner.run_days(db, settings, [first + timedelta(days=i) for i in range((last - first).days + 1)])
        return time.monotonic() - t0
    finally:
        db.close()
        embedded.stop(home)


def dagster_events(env: dict[str, str]) -> Counter:
    """The newest nightly_sleep run's events in the benchmark's Dagster instance, by type."""
    import dagster as dg

    from anima_pipeline.defs.instance import get_instance

    saved = dict(os.environ)
    os.environ.update(DAGSTER_HOME=env["DAGSTER_HOME"], ANIMA_HOME=env["ANIMA_HOME"])
    try:
        with get_instance() as instance:
            [run] = instance.get_runs(filters=dg.RunsFilter(job_name="nightly_sleep"), limit=1)
            return Counter(
                e.dagster_event.event_type_value for e in instance.all_logs(run.run_id) if e.dagster_event
            )
    finally:
        os.environ.clear()
        os.environ.update(saved)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=int, default=240)
    ap.add_argument("--active", type=int, default=29)
    ap.add_argument("--first", default="2025-03-01")
    ap.add_argument("--no-force-pass", action="store_true", help="skip the second pass (--force)")
    args = ap.parse_args()
    first = date.fromisoformat(args.first)
    last = first + timedelta(days=args.days - 1)
    with tempfile.TemporaryDirectory(prefix="anima_bench_") as tmp:
        env = {
            **os.environ,
            "ANIMA_HOME": f"{tmp}/home",
            "DAGSTER_HOME": f"{tmp}/dagster",
            "ANIMA_ENGINE": "offline",
            "ANIMA_START_DATE": first.isoformat(),
        }
        archive = Path(tmp) / "bench.archive.jsonl"
        talk = write_archive(archive, first, args.days, args.active)
        anima(["import", str(archive)], env)
        t0 = time.monotonic()
        anima(["sleep", "--from", str(first), "--to", str(last)], env)
        first_pass = time.monotonic() - t0
        events = dagster_events(env)
        before = json.loads(anima(["status", "--json"], env).stdout)["totals"]
        second_pass, after = None, before
        if not args.no_force_pass:
            t0 = time.monotonic()
            anima(["sleep", "--from", str(first), "--to", str(last), "--force"], env)
            second_pass = time.monotonic() - t0
            after = json.loads(anima(["status", "--json"], env).stdout)["totals"]
        if not env.get("ANIMA_DATABASE_URL"):
            anima(["db", "stop"], env)
        alone = runner_alone(archive, first, last, Path(tmp) / "home_runner")
    print(
        f"days: {args.days} ({len(talk)} with talk), offline engine, one Dagster run over the range; "
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores"
    )
    print(f"first pass:  {first_pass:7.1f} s  = {first_pass / args.days:.2f} s per night")
    print(
        f"  its Dagster events: {sum(events.values())} in all, {events['ASSET_MATERIALIZATION_PLANNED']} planned, "
        f"{events['ASSET_MATERIALIZATION']} materializations (14 steps x {args.days} days = {14 * args.days})"
    )
    if second_pass is not None:
        print(f"second pass (--force): {second_pass:7.1f} s")
    print(f"extrapolated to 365 nights: {first_pass / args.days * 365 / 60:.1f} min")
    print(
        f"runner.run_days alone over the same range: {alone:7.1f} s = {alone / args.days:.3f} s per night "
        "(the rest of the first pass is the CLI and Dagster's run)"
    )
    print(
        f"memories {before['semantic_active']}, day summaries vs days with talk: "
        f"{before['temporal_summaries']} summaries (day+week+month) for {len(talk)} talk days"
    )
    changed = {k: (before[k], after[k]) for k in before if before[k] != after[k]}
    print("second pass changed counts:", changed or "none")


if __name__ == "__main__":
    main()
