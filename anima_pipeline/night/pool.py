"""The busy animas of one night, run at once by a bounded pool (ANIMA_WORKERS, default the
number of cores); each anima's steps stay in order, on its own connection. One anima's
failure does not stop the others: every outcome comes back and the runner reports them all.

Which executor, by engine (`Engine.worker_processes`; benchmarks/many_animas.py measures it):
- offline: the heuristics are CPU-bound Python, so threads would only take turns on the GIL;
  worker processes (spawned, each with its own small connection pool and offline engine)
  run them side by side. Starting them costs about a second, so a day with fewer than
  PROCESS_MIN busy animas runs in this process, and the workers live for the whole run.
- anthropic (an engine that waits on the network): threads share this process's connection
  pool and the run's one engine (one budget, one client).
A worker process exits by itself when the process that started it is gone (kill -9), so a
killed night leaves nothing running; its open transaction is rolled back by PostgreSQL.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

from anima_pipeline.config import Settings
from anima_pipeline.llm.budget import Budget
from anima_pipeline.llm.contract import Engine
from anima_pipeline.llm.factory import engine_class, make_engine
from anima_pipeline.night.anima_night import NIGHT, AnimaOutcome, run_anima_night
from anima_pipeline.night.failure_kinds import failure
from anima_pipeline.night.frame import Night, StepResult
from anima_pipeline.night.registry import step_functions
from anima_pipeline.store.db import Database, embedded_home

PROCESS_MIN = 8  # busy animas in a day from which worker processes pay for their start


@dataclass(frozen=True)
class Task:
    anima_id: str
    keys: tuple[str, ...]  # the selected steps this anima has today, in registry order
    whole_night: tuple[str, ...] | None  # all its steps today, when the run selected only some


def default_workers(settings: Settings) -> int:
    """ANIMA_WORKERS, else the engine's own default (`Engine.default_workers`: as many animas as
    requests may be in flight for an engine that waits on the network, one per core offline)."""
    return settings.workers or engine_class(settings).default_workers(settings)


class AnimaPool:
    def __init__(
        self,
        db: Database,
        settings: Settings,
        engine: Engine,
        fns: dict[str, Callable[..., StepResult]],
        *,
        workers: int,
        lease_s: float,
    ) -> None:
        self.db, self.settings, self.engine, self.fns = db, settings, engine, fns
        self.workers, self.lease_s = max(1, workers), lease_s
        self._threads: ThreadPoolExecutor | None = None
        self._procs: ProcessPoolExecutor | None = None

    def kind(self, busy: int) -> str:
        """serial | threads | processes for a day with `busy` animas to run."""
        if self.workers == 1 or busy < 2:
            return "serial"
        if self.engine.worker_processes:
            return "processes" if busy >= PROCESS_MIN else "serial"
        return "threads"

    def run(
        self, night: Night, tasks: Sequence[Task], on_done: Callable[[AnimaOutcome], None] | None = None
    ) -> list[AnimaOutcome]:
        """Each task's outcome, in task order. `on_done` is called in this thread with each
        outcome as its anima ends (the night's vectors are made meanwhile: night/embedding.py)."""
        kind = self.kind(len(tasks))
        done = on_done or (lambda _outcome: None)
        if kind == "serial":
            outcomes = []
            for t in tasks:
                outcomes.append(self._one(night, t))
                done(outcomes[-1])
            return outcomes
        executor = self._executor(kind)
        if kind == "threads":
            futures = [executor.submit(self._one, night, t) for t in tasks]
        else:
            spec = _night_spec(night)
            futures = [executor.submit(_work, spec, t, self.lease_s) for t in tasks]
        task_of = dict(zip(futures, tasks, strict=True))
        ended: dict[Future, AnimaOutcome] = {}
        for f in as_completed(futures):
            ended[f] = _outcome(f, task_of[f])
            done(ended[f])
        outcomes = [ended[f] for f in futures]
        if kind == "processes" and any(o.failure and not o.failure.recorded for o in outcomes):
            self._close_procs()  # a worker died: start fresh ones for the next day
        return outcomes

    def _one(self, night: Night, t: Task) -> AnimaOutcome:
        # In batch mode the thread is one of the night's members: a batch goes out as soon as
        # every member waits on the collector (llm/anthropic/batches.py).
        with self.engine.batch_member():
            return run_anima_night(
                self.db,
                night,
                t.anima_id,
                t.keys,
                self.fns,
                lease_s=self.lease_s,
                whole_night=t.whole_night,
            )

    def _executor(self, kind: str) -> Executor:
        if kind == "threads":
            if self._threads is None:
                pool = self.db.pool  # one connection per thread, plus the runner's own
                pool.resize(pool.min_size, max(pool.max_size, self.workers + 2))
                self._threads = ThreadPoolExecutor(self.workers, thread_name_prefix="anima")
            return self._threads
        if self._procs is None:
            self._procs = ProcessPoolExecutor(
                self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_init_worker,
                initargs=(self.db.url, self.settings, os.getpid()),
            )
        return self._procs

    def _close_procs(self) -> None:
        if self._procs is not None:
            self._procs.shutdown(wait=True, cancel_futures=True)
            self._procs = None

    def close(self) -> None:
        if self._threads is not None:
            self._threads.shutdown(wait=True)
            self._threads = None
        self._close_procs()

    def __enter__(self) -> AnimaPool:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        if exc_type is not None and not issubclass(exc_type, Exception):
            # an interrupt (SIGINT / SIGTERM, Dagster's Terminate): do not wait for the animas in
            # flight. Worker processes exit when this process is gone (their transactions roll
            # back); a worker thread ends with its current step, then finds its pool shut.
            for executor in (self._threads, self._procs):
                if executor is not None:
                    executor.shutdown(wait=False, cancel_futures=True)
            self._threads = self._procs = None
        self.close()


def _outcome(f: Future, t: Task) -> AnimaOutcome:
    try:
        return f.result()
    except Exception as exc:  # noqa: BLE001 - a dead worker fails its anima, reported with cause
        return AnimaOutcome(t.anima_id, [], failure(t.anima_id, NIGHT, exc, recorded=False))


# ---- inside a worker process ------------------------------------------------------------------

_worker: dict[str, Any] = {}


def _night_spec(night: Night) -> dict[str, Any]:
    return {
        k: getattr(night, k)
        for k in ("day", "tz", "run_id", "force", "mode", "log_dir", "recall", "deep", "limits", "review")
    }


def _init_worker(url: str, settings: Settings, parent: int) -> None:
    threading.Thread(target=_exit_with, args=(parent,), name="parent-watch", daemon=True).start()
    _worker["db"] = Database(url, max_size=2, home=embedded_home(settings))
    _worker["engine"] = make_engine(settings, Budget.from_settings(settings))


def _exit_with(parent: int) -> None:
    """Exit when the process that started this worker is gone (reparented): a kill -9 of the
    night must not leave workers behind."""
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(70)


def _work(spec: dict[str, Any], t: Task, lease_s: float) -> AnimaOutcome:
    night = Night(engine=_worker["engine"], **spec)
    return run_anima_night(
        _worker["db"],
        night,
        t.anima_id,
        t.keys,
        step_functions(t.keys),
        lease_s=lease_s,
        whole_night=t.whole_night,
    )
