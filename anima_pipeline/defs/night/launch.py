"""Launching the night through Dagster from Python: the CLI (`anima sleep`, `anima demo`) and tests.

`launch_night` creates a run of the `nightly_sleep` job of the code location (the same job
the schedule and the UI run), recorded with the code location's origin so that the UI shows
it under the job and can re-execute it, tagged with who started it, the engine, the mode and
the days; then executes it in this process (one day is a partition run, a range is ONE run
over the partition range, the single-run backfill shape; steps are an asset subset).

SIGINT and SIGTERM cancel it: the step in progress rolls back, the night is marked failed
(a re-run carries on), the Dagster run ends CANCELED, and `launch_night` reports the signal
so the CLI exits non-zero. A run left STARTED by a process that was killed outright
(kill -9) is marked failed the next time the CLI launches a night (`mark_dead_runs`).
"""

from __future__ import annotations

import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, timedelta

import dagster as dg

# Dagster 1.13.27 has no public API to create a run that carries a code location's origin
# outside a workspace process (execute_job leaves remote_job_origin empty, and the UI and
# GraphQL re-execution need it), nor to execute an existing run in-process: these are the
# internals `dagster api execute_run` itself uses. Checked with 1.13.27.
from dagster._core.definitions.reconstruct import ReconstructableJob
from dagster._core.definitions.repository_definition import SINGLETON_REPOSITORY_NAME
from dagster._core.execution.api import execute_run
from dagster._core.remote_origin import (
    ManagedGrpcPythonEnvCodeLocationOrigin,
    RemoteJobOrigin,
    RemoteRepositoryOrigin,
)
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    PARTITION_NAME_TAG,
)
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

from anima_pipeline import definitions
from anima_pipeline.config import Settings
from anima_pipeline.core.errors import InputError
from anima_pipeline.core.steps import STEP_ORDER, parse_steps
from anima_pipeline.defs.night import assets as night_assets
from anima_pipeline.defs.night.schedules import ENGINE_TAG, JOB_NAME, MODE_TAG, TRIGGER_TAG
from anima_pipeline.night.frame import scheduled_mode

DEFINITIONS_MODULE = "anima_pipeline.definitions"
LOCATION_NAME = "anima_pipeline"  # workspace.yaml location_name and [tool.dg] code_location_name
PID_TAG = "anima/pid"
COMMAND_TAG = "anima/command"  # the command line that launched a CLI run
HOST_TAG = "anima/host"
ACTIVE = (dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING)


def night_run_config(
    mode: str = "full", force: bool = False, animas: Sequence[str] = (), shard: str = ""
) -> dict:
    return {
        "ops": {
            night_assets.NIGHT_OP: {
                "config": {"mode": mode, "force": force, "animas": list(animas), "shard": shard}
            }
        }
    }


def code_location_definitions() -> dg.Definitions:
    """The definitions exactly as the code location loads them (anima_pipeline.definitions),
    loaded afresh: a long-lived process sees the first day a later import recorded."""
    return definitions.load()


def nightly_sleep_job() -> dg.JobDefinition:
    """The nightly_sleep job of the code location (a module-level function, so that
    dg.reconstructable can point a run at it)."""
    return code_location_definitions().resolve_job_def(JOB_NAME)


def remote_job_origin(job_name: str = JOB_NAME) -> RemoteJobOrigin:
    """The origin the webserver gives runs of this job when it loads workspace.yaml."""
    root = definitions.checkout()  # workspace.yaml's working_directory; none for an installed wheel
    target = LoadableTargetOrigin(
        executable_path=sys.executable,
        module_name=DEFINITIONS_MODULE,
        attribute="defs",
        working_directory=str(root) if root else None,
    )
    location = ManagedGrpcPythonEnvCodeLocationOrigin(target, location_name=LOCATION_NAME)
    return RemoteRepositoryOrigin(location, SINGLETON_REPOSITORY_NAME).get_job_origin(job_name)


def check_days(parts: dg.PartitionsDefinition | None, first: date, last: date, timezone: str) -> None:
    """A ValueError naming the problem when first..last is not a range of partitions."""
    if last < first:
        raise InputError(f"--to {last} is before --from {first}")
    if parts is None:
        raise InputError("the night job has no partitions")
    newest = parts.get_last_partition_key()
    if newest is None or last.isoformat() > newest:
        raise InputError(
            f"{last} is not over yet in {timezone}: the latest day that can sleep is {newest} "
            "(a partition is a whole local day)"
        )
    oldest = parts.get_first_partition_key()
    if oldest is not None and first.isoformat() < oldest:
        raise InputError(
            f"{first} is before the first day of data ({oldest}): import the archive holding that day "
            "(`anima import` moves the first day earlier) or set ANIMA_START_DATE"
        )


# Dagster's own switch (read by the event log storage when a run is created; checked with
# 1.13.27): a run over a partition range plans each asset with ONE event holding the range,
# instead of one event per (asset, day). Over 240 days that is 14 events instead of 3,360,
# which on SQLite storage were a third of a long `anima sleep --from --to`
# (benchmarks/year_of_nights.py). (Every (day, step) is still materialized, the quiet ones
# in one batch per day: assets.py.) The price, for ranges only: while the run goes the UI does not
# show its days in progress (a failed day is still marked failed: assets.mark_day_failed). A
# single day keeps per-day planning.
PLANNED_AS_SUBSET_ENV = "DAGSTER_EMIT_PARTITION_SUBSET_IN_PLANNED_EVENTS"


# Dagster reads the switch from os.environ only (no per-call parameter): one lock makes the
# flip and its undo whole for every thread that creates a run through this module, so a run
# created by one thread never sees another thread's setting.
_PLANNING = threading.Lock()


@contextmanager
def plan_range_as_one_event(enabled: bool) -> Iterator[None]:
    """While creating a run: plan a partition range with one event per asset (see above), or
    per (asset, day) when not `enabled`; the previous value is restored on the way out."""
    with _PLANNING:
        previous = os.environ.get(PLANNED_AS_SUBSET_ENV)
        if enabled:
            os.environ[PLANNED_AS_SUBSET_ENV] = "true"
        else:
            os.environ.pop(PLANNED_AS_SUBSET_ENV, None)
        try:
            yield
        finally:
            if previous is None:
                os.environ.pop(PLANNED_AS_SUBSET_ENV, None)
            else:
                os.environ[PLANNED_AS_SUBSET_ENV] = previous


def check_steps(steps: Sequence[str] | None) -> list[dg.AssetKey]:
    """The asset keys of `steps` (all for none); unknown names raise UnknownStepError."""
    return [night_assets.asset_key(k) for k in (parse_steps(steps) if steps else STEP_ORDER)]


def mode_tag(mode: str, first: date, last: date) -> str:
    """The deep-sleep mode as it ran: 'scheduled' (the weekday rule) resolved to full or
    incremental when every day of the run has the same, else named as the rule."""
    if mode != "scheduled":
        return mode
    modes = {scheduled_mode(first + timedelta(days=i)) for i in range(min((last - first).days, 7) + 1)}
    return modes.pop() if len(modes) == 1 else "weekday rule (full Mondays, else incremental)"


def partition_tags(first: date, last: date) -> dict[str, str]:
    if first == last:
        return {PARTITION_NAME_TAG: first.isoformat(), night_assets.DAY_TAG: first.isoformat()}
    return {
        ASSET_PARTITION_RANGE_START_TAG: first.isoformat(),
        ASSET_PARTITION_RANGE_END_TAG: last.isoformat(),
    }


@dataclass
class LaunchOutcome:
    run_id: str
    status: dg.DagsterRunStatus
    signal: int | None = None  # the signal that canceled it
    error: str = ""
    failed_day: date | None = None
    marked_dead: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == dg.DagsterRunStatus.SUCCESS


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def mark_dead_runs(instance: dg.DagsterInstance) -> list[str]:
    """Runs of the night started by the CLI on this host whose process is gone (kill -9, a
    crash, a power cut) but that are still STARTED or CANCELING in the run history: marked
    failed (canceled if a cancel had been asked). Returns their ids."""
    host = socket.gethostname()
    marked = []
    records = instance.get_runs(
        filters=dg.RunsFilter(
            job_name=JOB_NAME, statuses=list(ACTIVE), tags={TRIGGER_TAG: "cli", HOST_TAG: host}
        )
    )
    for run in records:
        pid = run.tags.get(PID_TAG, "")
        if not pid.isdigit() or int(pid) == os.getpid() or _pid_alive(int(pid)):
            continue
        message = f"the process that ran it (pid {pid} on {host}) is gone; marked by the next `anima` launch"
        if run.status == dg.DagsterRunStatus.CANCELING:
            instance.report_run_canceled(run, message=message)
        else:
            instance.report_run_failed(run, message=message)
        marked.append(run.run_id)
    return marked


@contextmanager
def cancel_on_signals(instance: dg.DagsterInstance, run_id: str) -> Iterator[list[int]]:
    """SIGINT / SIGTERM while the run executes: mark it canceling and interrupt. Inside the
    step Dagster's own handler raises the interrupt (the night body then marks the run
    canceling, see assets.py), so which signal came is read from a wakeup pipe, which the
    interpreter writes to whatever the Python handler. Yields the list of received signals
    (complete when the block has ended)."""
    received: list[int] = []
    read_fd, write_fd = os.pipe()
    os.set_blocking(read_fd, False)
    os.set_blocking(write_fd, False)
    previous_fd = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)

    def handler(signum: int, _frame) -> None:
        run = instance.get_run_by_id(run_id)
        if run is not None and run.status in (dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED):
            instance.report_run_canceling(run, message=f"{signal.Signals(signum).name} received")
        raise KeyboardInterrupt

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        signal.set_wakeup_fd(previous_fd)
        try:
            data = os.read(read_fd, 1024)
        except BlockingIOError:
            data = b""
        os.close(read_fd)
        os.close(write_fd)
        received.extend(n for n in data if n in (signal.SIGINT, signal.SIGTERM))


def launch_night(
    first: date,
    last: date | None = None,
    *,
    steps: Sequence[str] | None = None,
    mode: str = "full",
    force: bool = False,
    animas: Sequence[str] = (),
    shard: str = "",
    instance: dg.DagsterInstance,
    trigger: str = "cli",
    log_level: str | None = None,
    settings: Settings,
    resources: dict[str, dict] | None = None,
    extra_tags: dict[str, str] | None = None,
) -> LaunchOutcome:
    """Run the night for `first` (or first..last, one run, days in order) as a run of the
    nightly_sleep job; see the module docstring. ValueError before anything runs for days
    that are not partitions, unknown steps or a malformed shard. `resources` overrides the
    resources' config for this run only (a replay points memory_store at its shadow store)."""
    last = last or first
    keys = check_steps(steps)
    job = nightly_sleep_job()
    check_days(job.partitions_def, first, last, settings.timezone)
    if shard:
        night_assets.parse_shard(shard)
    marked = mark_dead_runs(instance)
    tags = {
        TRIGGER_TAG: trigger,
        ENGINE_TAG: settings.engine,
        MODE_TAG: mode_tag(mode, first, last),
        PID_TAG: str(os.getpid()),
        HOST_TAG: socket.gethostname(),
        **partition_tags(first, last),
    }
    if shard:
        tags[night_assets.SHARD_TAG] = shard
    tags.update(extra_tags or {})
    run_config = night_run_config(mode, force, animas, shard)
    if resources:
        run_config["resources"] = {name: {"config": cfg} for name, cfg in resources.items()}
    if log_level:  # the CLI draws its own progress; the full log stays in the run history
        run_config["loggers"] = {"console": {"config": {"log_level": log_level}}}
    recon = dg.reconstructable(nightly_sleep_job)
    # Dagster keeps the last definition a ReconstructableJob loaded (an lru_cache on
    # get_definition, process-wide, checked with 1.13.27), and every launch's recon is equal:
    # without this, a second launch in one process ran the first one's definitions (its
    # engine resource's model and base URL, its partitions), not the ones loaded above.
    ReconstructableJob.get_definition.cache_clear()
    ReconstructableJob.get_repository_definition.cache_clear()
    with plan_range_as_one_event(first != last):
        run = instance.create_run_for_job(
            job_def=job,
            run_config=run_config,
            tags=tags,
            asset_selection=frozenset(keys) if steps else None,
            remote_job_origin=remote_job_origin(),
            job_code_origin=recon.get_python_origin(),
        )
    with cancel_on_signals(instance, run.run_id) as received:
        try:
            execute_run(recon, run, instance)
        except KeyboardInterrupt:  # a signal outside the steps (Dagster's own bookkeeping)
            current = instance.get_run_by_id(run.run_id)
            if current is not None and current.status in ACTIVE:
                instance.report_run_canceled(current, message="interrupted by a signal")
    final = instance.get_run_by_id(run.run_id)
    status = final.status if final is not None else dg.DagsterRunStatus.FAILURE
    error, failed_day = (
        ("", None) if status == dg.DagsterRunStatus.SUCCESS else run_failure(instance, run.run_id)
    )
    return LaunchOutcome(run.run_id, status, received[0] if received else None, error, failed_day, marked)


def run_failure(instance: dg.DagsterInstance, run_id: str) -> tuple[str, date | None]:
    """The first line of the run's first failure, for a one-line report, and the day it failed
    on (from the failure's metadata, see assets.failure_metadata)."""
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if event is None or not event.is_failure or event.event_specific_data is None:
            continue
        err = getattr(event.event_specific_data, "error", None)
        if err is not None:
            user = getattr(event.event_specific_data, "user_failure_data", None)
            day = user.metadata.get("day") if user is not None else None
            # our dg.Failure's description is the failing step, anima and cause; anything else
            # (Dagster's own) is its exception's first line, without the class path
            said = (user.description if user is not None and user.description else err.message).strip()
            line = said.splitlines()[0] if said else "the run failed"
            return line.removeprefix("dagster._core.definitions.events.Failure: "), (
                date.fromisoformat(day.value) if day else None
            )
    return "the run failed (see the Dagster run log)", None
