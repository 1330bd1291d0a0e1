"""The night as ONE partitioned multi-asset over the 14 step keys (docs/ordering.md).

Why one multi-asset with a single-run backfill policy and not 14 self-dependent assets: see
docs/ordering.md. In short, a backfill of a day range becomes one run; this body walks
`context.partition_keys` in order and runs each whole night before the next through
`night/runner.py::run_days`, which also refuses an anima's day D while its night of D-1 is
failed or not over. Selecting one key and one partition in the UI runs just that step
(`context.selected_asset_keys`), with config `force: true` to redo a done step.

Metadata: after each (day, step) the runner reports that step's results and the body logs
an AssetMaterialization of that key for that partition at once, with that day's metadata
(metadata.py), so the UI plots per day and a night stopped later (a failure, a signal)
keeps exactly what finished.

Quiet (day, step) pairs: a step that no anima had anything to do for on a day is
materialized too, with zeros, so a processed day shows every step materialized however it
was run (a CLI range, one day, a UI backfill, the schedule). They are written in batches of
up to QUIET_BATCH, at the end of a night, and at the end of the run whatever happened
(Dagster's own event batching, with the SQLite batch write of defs/instance.py): on
SQLite storage an event costs milliseconds, and one by one 13 quiet steps a day made a year
of mostly quiet nights spend most of its time in the event log (benchmarks/year_of_nights.py).

Step timing: the run ends with an observation of its last step's asset holding a Markdown
table of the time each step took over the run's days (with a bar per step), beside the
per-(day, step) `duration_s` metadata the UI plots across partitions.

Checks: check specs of this asset, evaluated by the body on its own connection (checks.py);
a blocking one stops the night.

Retries: the database's transient failures only (a lost connection, a deadlock), requested
by the body; the API's are the engine's to retry, per request (night/failure_kinds.py's is_transient). A termination (SIGINT / SIGTERM, the UI's Terminate)
rolls back the step in progress, marks the run canceling and is never retried.
"""

import inspect
import os
import signal
import threading
import time
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import date
from typing import Any, Literal

import dagster as dg
from pydantic import Field

from anima_pipeline.config import Settings
from anima_pipeline.core.errors import InputError, NightError
from anima_pipeline.defs.night import checks as night_checks
from anima_pipeline.defs.night.metadata import step_metadata
from anima_pipeline.defs.night.partitions import partition_day
from anima_pipeline.defs.night.resources import EngineResource, MemoryStoreResource
from anima_pipeline.llm.factory import engine_class
from anima_pipeline.night import failure_kinds, runner
from anima_pipeline.night.frame import Night, StepResult
from anima_pipeline.night.registry import STEPS
from anima_pipeline.night.steps.declaration import StepDef
from anima_pipeline.store import embedded, sleep_state

NIGHT_OP = "night"
SHARD_TAG = "anima/shard"  # "i/N": this run does the animas of shard i of N
DAY_TAG = "anima/day"
TRIGGER_TAG = "anima/trigger"  # cli | schedule | ui | backfill
ENGINE_TAG = "anima/engine"
MODE_TAG = "anima/mode"
TIMING_LOG = "time in the night {night_s:.3f} s, in checks {checks_s:.3f} s"
QUIET_BATCH = 13 * 16  # quiet (day, step) materializations written at once: about two weeks of quiet days


# why a run's page shows one step for 14 assets, where the UI shows the asset and the job
ONE_STEP = (
    "All 14 assets are materialized by one Dagster step, `night`: a night runs its steps in "
    "order for every anima, and a range of days is one run walking the days in order (14 "
    "assets depending on their own previous day do not backfill as one run; docs/ordering.md). "
    "Each materialization's `run_log` names its run and its line in that step's log."
)
NIGHT_DESCRIPTION = (
    "The nightly sleep cycle, one day per partition; a range backfill is one run, days in order. " + ONE_STEP
)


def asset_key(step_key: str) -> dg.AssetKey:
    return dg.AssetKey(step_key.split("/"))


def step_key(key: dg.AssetKey) -> str:
    return "/".join(key.path)


def step_code_reference(s: StepDef) -> dg.CodeReferencesMetadataValue:
    """Where the step's function is: the UI links the asset to it ("View code")."""
    fn = inspect.unwrap(s.run)
    _, line = inspect.getsourcelines(fn)
    with warnings.catch_warnings():  # code references are beta in 1.13: chosen, not a surprise
        warnings.simplefilter("ignore", dg.BetaWarning)
        return dg.CodeReferencesMetadataValue(
            code_references=[
                dg.LocalFileCodeReference(file_path=inspect.getsourcefile(fn) or "", line_number=line)
            ]
        )


def night_specs() -> list[dg.AssetSpec]:
    """One spec per registry step. (A function, not a module-level list: the defs loader
    would collect a list of specs as separate assets with the same keys.) The description
    starts with the key itself: two keys end in "extracted", and the graph shows the last part."""
    return [
        dg.AssetSpec(
            key=asset_key(s.key),
            deps=[asset_key(d) for d in s.deps],
            group_name=s.group,
            description=f"{s.description}\n\n{ONE_STEP}",
            kinds={"postgres", "python"},
            metadata={
                "step": str(s.key),  # the plain string: Dagster serializes no foreign Enum (StepKey)
                "function": f"anima_pipeline.{s.module}.{s.fn}",
                "dagster/code_references": step_code_reference(s),
            },
        )
        for s in STEPS
    ]


# Transient failures only (night/failure_kinds.py's is_transient), requested by the body with RetryRequested.
# Not the op's retry_policy: Dagster 1.13 applies an op's retry policy to interrupts too
# (SIGINT / SIGTERM / "Terminate" would restart the night), see plan/utils.py there.
RETRY_POLICY = dg.RetryPolicy(
    max_retries=3, delay=30, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS
)


class NightConfig(dg.Config):
    """Run config of the night (launchpad: ops -> night -> config)."""

    mode: Literal["full", "incremental", "scheduled"] = Field(
        default="full",
        description="Deep-sleep mode. 'scheduled' = full on Mondays, incremental otherwise (what the "
        "schedule passes); a manual run is full unless told otherwise.",
    )
    force: bool = Field(
        default=False,
        description="Redo steps already done for (anima, day), and run a day even when the night "
        "before is recorded as running or failed. For diagnostic re-runs.",
    )
    animas: list[str] = Field(
        default=[], description="Only these animas (empty = every anima active that day)."
    )

    shard: str = Field(
        default="",
        description="Only the animas of shard i of N ('i/N', e.g. '0/4'; empty = all, or the run's "
        "anima/shard tag). An anima's shard is fixed (crc32 of its id mod N).",
    )

    def runner_mode(self) -> Literal["full", "incremental"] | None:
        return None if self.mode == "scheduled" else self.mode


def failure_metadata(exc: BaseException, context_run_id: str) -> dict[str, Any]:
    md: dict[str, Any] = {"run_id": dg.MetadataValue.text(context_run_id)}
    if isinstance(exc, failure_kinds.NightFailed):
        md.update(
            day=dg.MetadataValue.text(exc.day.isoformat()),
            step=dg.MetadataValue.text(str(exc.step)),
            anima=dg.MetadataValue.text(exc.anima_id or "-"),
            cause=dg.MetadataValue.text(type(exc.cause).__name__),
            error=dg.MetadataValue.text(str(exc.cause)[:4000]),
            tokens_in=dg.MetadataValue.int(exc.usage.input_tokens),
            tokens_out=dg.MetadataValue.int(exc.usage.output_tokens),
            cost_usd=dg.MetadataValue.float(exc.usage.cost_usd),
            failed_animas=dg.MetadataValue.text(", ".join(f.describe() for f in exc.failures)[:4000]),
        )
    order = exc.cause if isinstance(exc, failure_kinds.NightFailed) else exc
    if isinstance(order, failure_kinds.NightOrderError):
        md.update(
            day=dg.MetadataValue.text(order.day.isoformat()),
            previous_day=dg.MetadataValue.text(order.previous_day.isoformat()),
            previous_status=dg.MetadataValue.text(order.previous_status),
            previous_run_id=dg.MetadataValue.text(str(order.previous_run_id)),
        )
    if isinstance(exc, BlockingCheckFailed):
        md.update(
            day=dg.MetadataValue.text(exc.day.isoformat()),
            check=dg.MetadataValue.text(str(exc.result.check_name)),
        )
    if not isinstance(exc, failure_kinds.NightFailed | failure_kinds.NightOrderError):
        md.update(
            cause=dg.MetadataValue.text(type(exc).__name__), error=dg.MetadataValue.text(str(exc)[:4000])
        )
    return md


def night_settings(memory_store: MemoryStoreResource, anima_engine: EngineResource) -> Settings:
    return anima_engine.apply(memory_store.settings())


class BlockingCheckFailed(NightError):
    """A blocking check failed after a day: the run stops before the next day builds on it."""

    def __init__(self, day: date, result: dg.AssetCheckResult) -> None:
        self.day = day
        self.result = result
        super().__init__(f"blocking check {result.check_name} failed on {day}: {result.description}")


def rate_shares(instance: dg.DagsterInstance, settings: Settings) -> int:
    """How many runs share the provider's rate limits at once: the slots of the engine's
    Dagster pool (`dagster instance concurrency set anthropic N`, or the instance's default
    pool limit), else ANIMA_NIGHT_SHARDS (every shard of a night may run at once). Each run
    paces itself to that share (llm/ratelimit.py; docs/deploy.md, "Throughput")."""
    slots = 0
    storage = instance.event_log_storage
    pool = engine_class(settings).pool
    if pool is not None and storage.supports_global_concurrency_limits:
        info = storage.get_concurrency_info(pool)
        slots = info.slot_count or 0
    default = instance.get_concurrency_config().pool_config.default_pool_limit
    return max(1, slots or default or settings.night_shards)


def _shard(config: "NightConfig", tags: Mapping[str, str]) -> tuple[int, int] | None:
    """(index, count) from the run config, else from the run's `anima/shard` tag ("i/N")."""
    text = config.shard or tags.get(SHARD_TAG, "")
    return parse_shard(text) if text else None


def parse_shard(text: str) -> tuple[int, int]:
    index, sep, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        raise InputError(f"shard {text!r}: expected i/N, e.g. 0/4") from None
    if not sep or n < 1 or not 0 <= i < n:
        raise InputError(f"shard {text!r}: expected i/N with 0 <= i < N")
    return i, n


def _scope_animas(db, days: list[date], ran: set[str]) -> list[str]:
    """The animas checks look at: those the run's steps ran for; for a checks-only run, those
    recorded in sleep_state on its days."""
    if ran:
        return sorted(ran)
    with db.transaction() as conn:
        return sleep_state.animas_on(conn, days)


def build_night(partitions_def: dg.PartitionsDefinition, pool: str | None = None) -> dg.AssetsDefinition:
    """The night multi-asset over these partitions (built when the definitions load, so the
    partitions can start at the store's first day; see partitions.py). `pool`: the Dagster
    concurrency pool the night's step takes a slot of (the LLM provider's name for an LLM
    engine, so `dagster instance concurrency set anthropic N` bounds the runs calling it at
    once, across runs and shards; docs/deploy.md)."""

    @dg.multi_asset(
        name=NIGHT_OP,
        specs=night_specs(),
        check_specs=night_checks.check_specs(),
        partitions_def=partitions_def,
        can_subset=True,
        backfill_policy=dg.BackfillPolicy.single_run(),
        pool=pool,
        description=NIGHT_DESCRIPTION,
    )
    def night(
        context: dg.AssetExecutionContext,
        config: NightConfig,
        memory_store: MemoryStoreResource,
        anima_engine: EngineResource,
    ):
        yield from _night_body(context, config, memory_store, anima_engine)

    return night


def _night_body(
    context: dg.AssetExecutionContext,
    config: NightConfig,
    memory_store: MemoryStoreResource,
    anima_engine: EngineResource,
):
    days: list[date] = sorted(partition_day(k) for k in context.partition_keys)
    selected = {step_key(k) for k in context.selected_asset_keys}
    steps = [s.key for s in STEPS if s.key in selected]
    wanted_checks = [night_checks.BY_KEY[k] for k in context.selected_asset_check_keys]
    blocking = [c for c in wanted_checks if c.blocking]
    last_light = next((k for k in reversed(night_checks.LIGHT_SLEEP_STEPS) if k in steps), None)
    marker = steps[-1] if steps else None  # the night's last step: its day's quiet steps follow it
    quiet: list[dg.AssetMaterialization] = []  # quiet (day, step) pairs not yet written (one batch)
    step_times: dict[str, list[float]] = {k: [] for k in steps}
    materialized: dict[str, set[str]] = {k: set() for k in steps}  # partitions logged, per step
    ran: set[str] = set()
    check_results: dict[str, dg.AssetCheckResult] = {}
    timing = {"night_s": 0.0, "checks_s": 0.0}
    settings = night_settings(memory_store, anima_engine)
    llm = engine_class(settings).priced  # tokens and cost in the metadata, the provider's rate shares
    if llm and "rate_shares" not in settings.llm.model_fields_set:
        shares = settings.llm.model_copy(update={"rate_shares": rate_shares(context.instance, settings)})
        settings = settings.model_copy(update={"llm": shares})
    shard = _shard(config, context.run.tags)
    _tag_run(context, settings.engine, config.mode)

    def on_step(n: Night, key: str, results: list[StepResult]) -> None:
        partition = n.day.isoformat()
        ran.update(r.anima_id for r in results)
        step_times[key].append(sum(r.duration_s for r in results))
        materialized[key].add(partition)
        with db.transaction() as conn:
            md = step_metadata(conn, n.day, key, results, llm=llm, mode=n.mode)
        counts = [
            f"{k} {v.value}"
            for k, v in md.items()
            if isinstance(v, dg.IntMetadataValue)
            and v.value
            and k not in ("animas", "input_chars", "dagster/row_count")
        ]
        line = f"{partition} {key} ({n.mode}): " + ", ".join([f"{md['animas'].value} anima(s)", *counts])
        # the run's page shows one step, `night`, for all 14 assets (NIGHT_DESCRIPTION): this
        # says which run and which line of that step's log are this (day, step)'s
        md["run_log"] = dg.MetadataValue.text(
            f"run {context.run.run_id}, step {NIGHT_OP}: "
            + (f"the line '{line}'" if results else f"no line ({partition} {key}: nothing to do)")
        )
        if not results and key != marker:  # quiet: materialized with its zeros, in the day's batch
            quiet.append(dg.AssetMaterialization(asset_key=asset_key(key), partition=partition, metadata=md))
            return
        with deferred_interrupts():  # never half an event in Dagster's storage
            # recorded at once: a night stopped later (a failure, a signal) keeps what finished
            context.log_event(
                dg.AssetMaterialization(asset_key=asset_key(key), partition=partition, metadata=md)
            )
            if results:  # the quiet night's marker has its zeros in the materialization
                context.log.info(line)
        if key == marker and len(quiet) >= QUIET_BATCH:
            log_in_one_batch(context, quiet)
        if key == last_light and blocking and results:
            t = time.monotonic()
            scope = night_checks.CheckScope([n.day], sorted({r.anima_id for r in results}), settings.timezone)
            with db.transaction() as conn:
                for check in blocking:
                    result = check.evaluate(conn, scope)
                    check_results[check.name] = result
                    if not result.passed:
                        raise BlockingCheckFailed(n.day, result)
            timing["checks_s"] += time.monotonic() - t

    try:
        context.log.info(
            f"night over {days[0]}..{days[-1]} ({len(days)} day(s)), {len(steps)} step(s), engine {settings.engine}, "
            f"mode {config.mode}, force {config.force}"
            + (f", animas {config.animas}" if config.animas else "")
            + (f", shard {shard[0]}/{shard[1]}" if shard else "")
        )
        with memory_store.open(settings) as db:
            t0 = time.monotonic()
            if steps:
                try:
                    runner.run_days(
                        db,
                        settings,
                        days,
                        steps,
                        mode=config.runner_mode(),
                        force=config.force,
                        animas=config.animas or None,
                        on_step=on_step,
                        run_id=context.run.run_id,
                        shard=shard,
                    )
                finally:  # the quiet steps of a day stopped by a failure did finish
                    log_in_one_batch(context, quiet)
                if marker is not None:
                    log_step_times(context, asset_key(marker), days[-1], step_times)
            timing["night_s"] = time.monotonic() - t0 - timing["checks_s"]
            t = time.monotonic()
            scope = night_checks.CheckScope(days, _scope_animas(db, days, ran), settings.timezone)
            with db.transaction() as conn:
                for check in wanted_checks:
                    if check.name not in check_results or not steps:
                        check_results[check.name] = check.evaluate(conn, scope)
            timing["checks_s"] += time.monotonic() - t
    except (KeyboardInterrupt, dg.DagsterExecutionInterruptedError):
        # SIGINT / SIGTERM: the step in progress was rolled back and the night marked failed by
        # the runner; say the run was canceled (not failed) before Dagster records the interrupt.
        with deferred_interrupts():
            _log_checks(context, check_results)
            run = context.instance.get_run_by_id(context.run.run_id)
            if run is not None and run.status == dg.DagsterRunStatus.STARTED:
                context.instance.report_run_canceling(
                    run, message="interrupted by a signal; the night will continue on the next run"
                )
        raise
    except Exception as exc:
        with deferred_interrupts():
            _log_checks(context, check_results)
        if (
            failure_kinds.is_transient(exc)
            and context.retry_number < RETRY_POLICY.max_retries
            and not _stopped_by_operator(settings)
        ):
            delay = RETRY_POLICY.calculate_delay(context.retry_number + 1)
            context.log.warning(
                f"transient failure, retry {context.retry_number + 1} in {delay:.0f} s: {exc}"
            )
            raise dg.RetryRequested(max_retries=RETRY_POLICY.max_retries, seconds_to_wait=delay) from exc
        failed_day = getattr(exc, "day", None)
        if isinstance(failed_day, date) and planned_as_one_event(context):
            mark_day_failed(
                context, failed_day, [k for k in steps if failed_day.isoformat() not in materialized[k]]
            )
        say_stopped = _stopped_by_operator(settings) and not isinstance(exc, embedded.StoppedByOperator)
        raise dg.Failure(
            description=(
                f"the memory database was stopped (anima db stop) during the night: {exc}"
                if say_stopped
                else str(exc)
            ),
            metadata=failure_metadata(exc, context.run.run_id),
            allow_retries=False,
        ) from exc

    context.log.info(TIMING_LOG.format(**timing))
    yield from check_results.values()


BATCH_SIZE_ENV = (
    "DAGSTER_EVENT_BATCH_SIZE"  # Dagster's switch: events with batch metadata are written in batches
)


def log_in_one_batch(
    context: dg.AssetExecutionContext, materializations: list[dg.AssetMaterialization]
) -> None:
    """Log `materializations` (emptying the list) the way Dagster logs the materializations of
    one output over a partition range: events carrying one batch id, written together by the
    event log's store_event_batch. Dagster batches only while DAGSTER_EVENT_BATCH_SIZE > 0
    (read at each event), so it is set for the call."""
    if not materializations:
        return
    # Dagster's step-event constructors (no public way to log a batch; checked with 1.13.27)
    from dagster._core.events import DagsterEventBatchMetadata, generate_event_batch_id

    step_context = context.op_execution_context._step_execution_context
    batch_id, last = generate_event_batch_id(), len(materializations) - 1
    previous = os.environ.get(BATCH_SIZE_ENV)
    os.environ[BATCH_SIZE_ENV] = str(len(materializations) + 1)
    try:
        with deferred_interrupts():
            for i, m in enumerate(materializations):
                dg.DagsterEvent.asset_materialization(
                    step_context, m, DagsterEventBatchMetadata(batch_id, i == last)
                )
    finally:
        if previous is None:
            os.environ.pop(BATCH_SIZE_ENV, None)
        else:
            os.environ[BATCH_SIZE_ENV] = previous
    materializations.clear()


def _stopped_by_operator(settings: Settings) -> bool:
    """The embedded store was stopped (`anima db stop`) during this run: a retry would only wait
    for a server that must not be started behind the operator's back (docs/ordering.md)."""
    return settings.database_url is None and embedded.stopped_by_operator(settings.home)


def planned_as_one_event(context: dg.AssetExecutionContext) -> bool:
    """Whether Dagster planned this run's assets with one event for the whole partition range
    (launch.plan_range_as_one_event): then no per-day plan marks a failed day failed."""
    records = context.instance.get_records_for_run(
        context.run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION_PLANNED, limit=1
    ).records
    if not records or records[0].event_log_entry.dagster_event is None:
        return False
    planned = records[0].event_log_entry.dagster_event.event_specific_data
    return (
        getattr(planned, "partition", None) is None
        and getattr(planned, "partitions_subset", None) is not None
    )


def mark_day_failed(context: dg.AssetExecutionContext, day: date, keys: list[str]) -> None:
    """In a range planned as one event, plan the failed day's unfinished steps for that day
    alone: Dagster marks a partition failed when the run that planned it fails without
    materializing it, so the failed day reads failed (and the days after it, never reached,
    stay missing) as in a run planned day by day."""
    # Dagster's planned-event constructors (no public way to plan one partition; checked with 1.13.27)
    from dagster._core.events import AssetMaterializationPlannedData

    step_key = context.op_execution_context._step_execution_context.step.key
    with deferred_interrupts():
        for key in keys:
            planned = AssetMaterializationPlannedData(asset_key(key), partition=day.isoformat())
            event = dg.DagsterEvent.build_asset_materialization_planned_event(
                context.run.job_name, step_key, planned
            )
            context.instance.report_dagster_event(event, context.run.run_id)


def step_times_markdown(step_times: dict[str, list[float]]) -> str:
    """A table of each step's time over the run's days, with a bar scaled to the slowest step."""
    totals = {k: sum(v) for k, v in step_times.items()}
    top = max(totals.values(), default=0.0) or 1.0
    rows = [
        f"| {k} | {len(v)} | {totals[k]:.3f} | {max(v, default=0.0):.3f} | {'█' * round(24 * totals[k] / top)} |"
        for k, v in step_times.items()
    ]
    return "| step | days | total s | slowest day s | |\n|---|---:|---:|---:|---|\n" + "\n".join(rows)


def log_step_times(
    context: dg.AssetExecutionContext, key: dg.AssetKey, day: date, step_times: dict[str, list[float]]
) -> None:
    """The run's step timing as an observation of its last step's asset (shown in the run's
    event log and on the asset): the Markdown table and each step's seconds as typed values."""
    metadata: dict[str, dg.MetadataValue] = {
        "step_times": dg.MetadataValue.md(step_times_markdown(step_times)),
        "steps_total_s": dg.MetadataValue.float(round(float(sum(map(sum, step_times.values()))), 3)),
    }
    metadata.update(
        {f"s/{k}": dg.MetadataValue.float(round(float(sum(v)), 3)) for k, v in step_times.items()}
    )
    with deferred_interrupts():
        context.log_event(dg.AssetObservation(asset_key=key, partition=day.isoformat(), metadata=metadata))


@contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Hold SIGINT / SIGTERM for the block and deliver them to the handler in place (inside a
    step, Dagster's, which raises the interrupt) when it ends: a signal must not cut a write
    to Dagster's event log in half. Store writes need no such care: a transaction that is cut
    rolls back."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    for s in previous:
        signal.signal(s, lambda signum, _frame: pending.append(signum))
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        first = signal.Signals(pending[0]) if pending else None
        handler = previous.get(first) if first is not None else None
        if first is not None and callable(handler):
            handler(first, None)


def _tag_run(context: dg.AssetExecutionContext, engine: str, mode: str) -> None:
    """Runs launched from the UI (a launch, a re-execution, a backfill) get the tags the CLI
    and the schedule set themselves: who started it, the engine, the mode."""
    # BACKFILL_ID_TAG: Dagster's own run tag, not exported publicly and with no public
    # property of the run (1.13.27); a re-execution is the run's documented parent_run_id
    from dagster._core.storage.tags import BACKFILL_ID_TAG

    tags = context.run.tags
    if TRIGGER_TAG in tags and context.run.parent_run_id is None:
        return
    trigger = "backfill" if BACKFILL_ID_TAG in tags else "ui"
    context.instance.add_run_tags(
        context.run.run_id, {TRIGGER_TAG: trigger, ENGINE_TAG: engine, MODE_TAG: mode}
    )


def _log_checks(context, check_results) -> None:
    """The checks evaluated before a failure stay recorded (the blocking one that stopped it)."""
    for result in check_results.values():
        context.log_event(
            dg.AssetCheckEvaluation(
                asset_key=result.asset_key,
                check_name=result.check_name,
                passed=result.passed,
                metadata=result.metadata,
                severity=result.severity,
                description=result.description,
            )
        )
