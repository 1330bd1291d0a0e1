"""One night for many animas, offline: one worker against the default pool (docs/deploy.md).

N animas (default 1,000) are made from the shared evaluation archives (LoCoMo dev and both
MemoryBank languages, read at run time from ANIMA_DATA_DIR, default ../shared/data next to
the repository; nothing of them is copied): anima i gets conversation i of those archives
(cycling), relabelled with its own anima and conversation ids and shifted in time so that it
is held on the benchmark day. Two identical sets are imported into one store (a fresh
embedded server under a temporary ANIMA_HOME, or ANIMA_DATABASE_URL): `s-NNNN` slept by
`runner.run_days` with one worker, then `p-NNNN` with the default pool (ANIMA_WORKERS, else
the number of cores). Prints anima-nights per second of both, their ratio, the CPU seconds
of each set (here, in the worker processes and in the embedded server: on a shared machine
the figure that follows the work rather than the load), peak memory, and whether both sets
ended with the same memories.

`--encoder both` runs each set twice in the same run, recall by meaning's encoder off
(ANIMA_EMBEDDER=none) and on (the default), taking turns (off, on, then the pool's off, on),
and prints on / off by wall and by CPU: the encoder's cost as one run measures it, beside the
load it ran under.

    python -m benchmarks.many_animas [--animas 1000] [--day 2025-06-02] [--threads] [--encoder both]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path

from testkit.data import data_dir, locomo_dir, memorybank_dir, read_jsonl


def archives() -> list[Path]:
    return [
        locomo_dir() / "dev.archive.jsonl",
        memorybank_dir() / "memorybank_en.archive.jsonl",
        memorybank_dir() / "memorybank_cn.archive.jsonl",
    ]


def conversations() -> list[list[dict]]:
    """Every conversation of the archives, its messages in file order."""
    found: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for path in archives():
        if not path.exists():
            raise SystemExit(f"{path} not found: set ANIMA_DATA_DIR (now {data_dir()}) to the shared data")
        for row in read_jsonl(path):
            found[(row["anima_id"], row["conversation_id"])].append(row)
    return list(found.values())


def relabel(convs: list[list[dict]], n: int, prefix: str, day: date) -> list[dict]:
    """Anima `prefix-i` holds conversation i % len(convs), moved to `day` (same clock times)."""
    rows = []
    for i in range(n):
        anima = f"{prefix}-{i:04d}"
        conv = convs[i % len(convs)]
        start = datetime.fromisoformat(conv[0]["created_at"])
        shift = day - start.date()
        for m in conv:
            at = datetime.fromisoformat(m["created_at"]) + shift
            rows.append(
                {
                    **m,
                    "anima_id": anima,
                    "conversation_id": f"{anima}:c",
                    "message_id": f"{anima}:{m['message_id']}",
                    "created_at": at.isoformat(),
                }
            )
    return rows


def import_rows(db, rows: list[dict]) -> None:
    from anima_pipeline.store.archive import ImportStats, import_records, parse_lines
    from anima_pipeline.store.events import Audit

    lines = [json.dumps(r, ensure_ascii=False) for r in rows]
    with db.transaction() as conn:
        audit = Audit(conn=conn, anima_id="", run_id="import-bench", step="import")
        import_records(conn, parse_lines(lines, "many_animas"), audit, ImportStats())


def _ticks(pid: int, children: bool) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    used = int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if children else 0)
    return used / os.sysconf("SC_CLK_TCK")


def server_cpu(settings) -> float | None:
    """CPU seconds the embedded server has used so far: the postmaster with its ended children,
    and its live backends; None for a server that is not a process of this machine's home."""
    from anima_pipeline.store.embedded import pgdata_dir

    try:
        master = int((pgdata_dir(settings.home) / "postmaster.pid").read_text().splitlines()[0])
        total = _ticks(master, children=True)
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == master:
                    total += _ticks(int(stat.parent.name), children=False)
            except (OSError, ValueError):
                continue  # ended meanwhile
        return total
    except (OSError, ValueError, IndexError):
        return None


@dataclass(frozen=True)
class SetTime:
    wall: float  # seconds
    here: float  # CPU seconds of this process and its ended worker processes
    server: float | None  # CPU seconds of the embedded server, None for another server

    @property
    def cpu(self) -> float:
        return self.here + (self.server or 0.0)

    def __str__(self) -> str:
        spent = "n/a" if self.server is None else f"{self.server:.1f}"
        return f"cpu {self.here:.1f} s here + {spent} s server"


def sleep_set(db, settings, day: date, animas: list[str], workers: int | None, run_id: str = "") -> SetTime:
    """Wall seconds of the set, and its CPU seconds: this process and its ended worker
    processes, and the embedded server (on a shared machine the wall time follows the load,
    the CPU much less)."""
    from anima_pipeline.night import runner

    def cpu() -> tuple[float, float | None]:
        own, ended = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + ended.ru_utime + ended.ru_stime, server_cpu(settings)

    (here, server), t0 = cpu(), time.monotonic()
    runner.run_days(
        db, settings, [day], animas=animas, workers=workers, run_id=run_id or f"bench-{workers or 'pool'}"
    )
    wall = time.monotonic() - t0
    here_after, server_after = cpu()
    spent = None if server is None or server_after is None else server_after - server
    return SetTime(wall, here_after - here, spent)


def sleep_set_in_threads(db, settings, day: date, animas: list[str]) -> SetTime:
    """The default pool forced to threads (what the anthropic engine uses), to show what the
    GIL leaves of the offline engine's parallelism."""
    from anima_pipeline.night.pool import AnimaPool

    chosen = AnimaPool.kind
    AnimaPool.kind = lambda self, busy: "threads" if busy >= 2 and self.workers > 1 else "serial"
    try:
        return sleep_set(db, settings, day, animas, workers=None)
    finally:
        AnimaPool.kind = chosen


def outcome(db, prefix: str) -> dict[str, int]:
    with db.transaction() as conn:
        row = conn.execute(
            """SELECT (SELECT count(*) FROM sleep_state WHERE step = 'night' AND status = 'done'
                         AND anima_id LIKE %s) AS nights,
                      (SELECT count(*) FROM semantic_memory WHERE status = 'active' AND anima_id LIKE %s) AS memories,
                      (SELECT count(*) FROM temporal_summary WHERE anima_id LIKE %s) AS summaries""",
            (f"{prefix}-%",) * 3,
        ).fetchone()
    return dict(row)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--animas", type=int, default=1000)
    ap.add_argument("--day", default="2025-06-02", help="the night slept (a Monday: full deep sleep)")
    ap.add_argument("--threads", action="store_true", help="also a third set with the pool forced to threads")
    ap.add_argument(
        "--encoder",
        choices=["default", "both"],
        default="default",
        help="both: every set slept with the encoder off and on, taking turns, and on / off printed",
    )
    args = ap.parse_args()
    day = date.fromisoformat(args.day)

    from anima_pipeline.config import Settings
    from anima_pipeline.night.pool import default_workers
    from anima_pipeline.store import embedded
    from anima_pipeline.store.db import open_database

    convs = conversations()
    # (label, id prefix, workers, embedder kind): each set its own animas, identical data
    sets: list[tuple[str, str, int | None, str | None]] = [
        ("1 worker", "s", 1, None),
        ("pool", "p", None, None),
    ]
    if args.encoder == "both":
        sets = [
            ("1 worker, encoder off", "so", 1, "none"),
            ("1 worker, encoder on", "s", 1, None),
            ("pool, encoder off", "po", None, "none"),
            ("pool, encoder on", "p", None, None),
        ]
    with tempfile.TemporaryDirectory(prefix="anima_many_") as tmp:
        common = {
            "database_url": os.environ.get("ANIMA_DATABASE_URL") or None,
            "home": Path(tmp) / "home",
            "engine": "offline",
            "workers": int(os.environ["ANIMA_WORKERS"]) if os.environ.get("ANIMA_WORKERS") else None,
        }
        settings = Settings(**common)
        db = open_database(settings)
        times: dict[str, SetTime] = {}
        outcomes: dict[str, dict[str, int]] = {}
        try:
            t0 = time.monotonic()
            rows: list[dict] = []
            for _, prefix, _, _ in sets:
                rows = relabel(convs, args.animas, prefix, day)
                import_rows(db, rows)
            if args.threads:
                import_rows(db, relabel(convs, args.animas, "t", day))
            imported = time.monotonic() - t0
            for label, prefix, workers, kind in sets:
                chosen = Settings(**common, embedder={"kind": kind}) if kind else settings
                ids = [f"{prefix}-{i:04d}" for i in range(args.animas)]
                times[label] = sleep_set(db, chosen, day, ids, workers=workers, run_id=f"bench-{prefix}")
                outcomes[label] = outcome(db, prefix)
            threaded = (
                sleep_set_in_threads(db, settings, day, [f"t-{i:04d}" for i in range(args.animas)])
                if args.threads
                else None
            )
            outcome_t = outcome(db, "t") if args.threads else None
        finally:
            db.close()
            if not settings.database_url:
                embedded.stop(settings.home)
    peak_self = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    peak_child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    workers = default_workers(settings)
    print(
        f"animas: {args.animas} (from {len(convs)} conversations of LoCoMo dev + MemoryBank en/cn, "
        f"{len(rows)} messages per set), night of {day}, offline engine, {os.cpu_count()} cores, "
        f"pool of {workers} workers"
    )
    print(f"import of the sets: {imported:.1f} s; load average {os.getloadavg()[0]:.1f} at the end")
    for label, spent in times.items():
        print(
            f"{label + ':':24s} {spent.wall:7.1f} s  {args.animas / spent.wall:6.2f} anima-nights/s  "
            f"{outcomes[label]}  {spent}"
        )
    serial, pooled = (times[label] for label, _, _, kind in sets if kind is None)
    print(f"ratio pool / 1 worker: {serial.wall / pooled.wall:.2f}")
    if args.encoder == "both":
        for where in ("1 worker", "pool"):
            on, off = times[f"{where}, encoder on"], times[f"{where}, encoder off"]
            print(
                f"{where}: encoder on / off {on.wall / off.wall:.2f}x by wall, {on.cpu / off.cpu:.2f}x by CPU "
                f"(here and server); pool / 1 worker with the encoder off "
                f"{times['1 worker, encoder off'].wall / times['pool, encoder off'].wall:.2f}"
                if where == "pool"
                else f"{where}: encoder on / off {on.wall / off.wall:.2f}x by wall, {on.cpu / off.cpu:.2f}x by CPU "
                "(here and server)"
            )
    if threaded is not None:
        print(
            f"pool forced to {workers} threads: {threaded.wall:7.1f} s  {args.animas / threaded.wall:6.2f} "
            f"anima-nights/s  ratio {serial.wall / threaded.wall:.2f}  {outcome_t}  {threaded}"
        )
    print(f"peak memory: this process {peak_self:.0f} MiB, largest worker process {peak_child:.0f} MiB")
    same = {str(o) for label, o in outcomes.items() if not label.endswith("off")}
    print("same results in the encoder-on sets:", "yes" if len(same) == 1 else f"NO: {outcomes}")


if __name__ == "__main__":
    main()
