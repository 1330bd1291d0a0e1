"""The night as ONE partitioned multi-asset over the 14 step keys (docs/ordering.md).

Why one multi-asset with a single-run backfill policy and not 14 self-dependent assets: see
docs/ordering.md. In short, a backfill of a day range becomes one run; this body walks
`context.partition_keys` in order and runs each whole night before the next through
`sleep.runner.run_days`, which also refuses an anima's day D while its night of D-1 is
failed or not over. Selecting one key and one partition in the UI runs just that step
(`context.selected_asset_keys`), with config `force: true` to redo a done step.

Metadata: after each (day, step) the runner reports that step's results; they are summed
over animas and attached to that partition of that key with `add_asset_metadata`, and the
body yields one MaterializeResult per selected key at the end, from which Dagster emits
one materialization per partition of the run, each with its own day's metadata (so the UI
plots per day, and asset checks downstream of the outputs run). When a day fails mid-range,
the (day, step) pairs that finished are logged as AssetMaterialization events before the
failure is raised, so Dagster's partition status matches the store.
"""

from datetime import date
from typing import Any, Literal

import dagster as dg
from pydantic import Field

from anima_pipeline.config import Settings
from anima_pipeline.defs.night.partitions import night_partitions, partition_day
from anima_pipeline.defs.night.resources import EngineResource, MemoryStoreResource
from anima_pipeline.sleep import runner
from anima_pipeline.sleep.cycle import STEPS
from anima_pipeline.sleep.night import Night, StepResult

NIGHT_OP = "night"


def asset_key(step_key: str) -> dg.AssetKey:
    return dg.AssetKey(step_key.split("/"))


def step_key(key: dg.AssetKey) -> str:
    return "/".join(key.path)


def night_specs() -> list[dg.AssetSpec]:
    """One spec per registry step. (A function, not a module-level list: the defs loader
    would collect a list of specs as separate assets with the same keys.)"""
    return [
        dg.AssetSpec(
            key=asset_key(s.key),
            deps=[asset_key(d) for d in s.deps],
            group_name=s.group,
            description=s.description,
            kinds={"postgres", "python"},
            metadata={"step": s.key, "function": f"anima_pipeline.sleep.{s.module}.{s.fn}"},
        )
        for s in STEPS
    ]


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

    def runner_mode(self) -> Literal["full", "incremental"] | None:
        return None if self.mode == "scheduled" else self.mode


# Counts are integers in the UI; cost and duration are the only floats of a step summary.
INT_KEYS = (set(runner.SUMMARY_KEYS) - {"cost_usd", "duration_s"}) | {"animas", "already_done"}


def step_metadata(night: Night, results: list[StepResult]) -> dict[str, dg.MetadataValue]:
    """Typed metadata of one (day, step): the summed counts the UI plots across partitions."""
    md: dict[str, dg.MetadataValue] = {}
    for key, value in runner.summarize(results).items():
        if key in INT_KEYS or (isinstance(value, int) and key not in ("cost_usd", "duration_s")):
            md[key] = dg.MetadataValue.int(int(value))
        else:
            md[key] = dg.MetadataValue.float(float(value))
    md["mode"] = dg.MetadataValue.text(night.mode)
    md["anima_ids"] = dg.MetadataValue.text(", ".join(sorted({r.anima_id for r in results}))[:2000])
    return md


def failure_metadata(exc: BaseException, context_run_id: str) -> dict[str, Any]:
    md: dict[str, Any] = {"run_id": dg.MetadataValue.text(context_run_id)}
    if isinstance(exc, runner.NightFailed):
        md.update(
            day=dg.MetadataValue.text(exc.day.isoformat()),
            step=dg.MetadataValue.text(exc.step),
            anima=dg.MetadataValue.text(exc.anima_id or "-"),
            cause=dg.MetadataValue.text(type(exc.cause).__name__),
            error=dg.MetadataValue.text(str(exc.cause)[:4000]),
            tokens_in=dg.MetadataValue.int(exc.usage.input_tokens),
            tokens_out=dg.MetadataValue.int(exc.usage.output_tokens),
            cost_usd=dg.MetadataValue.float(exc.usage.cost_usd),
            failed_animas=dg.MetadataValue.text(", ".join(f.describe() for f in exc.failures)[:4000]),
        )
    order = exc.cause if isinstance(exc, runner.NightFailed) else exc
    if isinstance(order, runner.NightOrderError):
        md.update(
            day=dg.MetadataValue.text(order.day.isoformat()),
            previous_day=dg.MetadataValue.text(order.previous_day.isoformat()),
            previous_status=dg.MetadataValue.text(order.previous_status),
            previous_run_id=dg.MetadataValue.text(str(order.previous_run_id)),
        )
    if not isinstance(exc, runner.NightFailed | runner.NightOrderError):
        md.update(
            cause=dg.MetadataValue.text(type(exc).__name__), error=dg.MetadataValue.text(str(exc)[:4000])
        )
    return md


def night_settings(memory_store: MemoryStoreResource, anima_engine: EngineResource) -> Settings:
    return anima_engine.apply(memory_store.settings())


def llm_pool() -> str | None:
    """The Dagster pool of the night op: named after the LLM provider when the code location
    runs the Anthropic engine, so every run on the instance shares one limit
    (`dagster instance concurrency set anthropic N`: at most N nights talk to the API at once;
    inside a night ANIMA_LLM_CONCURRENCY bounds the requests in flight). Offline nights need
    no pool."""
    from anima_pipeline.config import get_settings

    return "anthropic" if get_settings().engine == "anthropic" else None


@dg.multi_asset(
    name=NIGHT_OP,
    pool=llm_pool(),
    specs=night_specs(),
    partitions_def=night_partitions,
    can_subset=True,
    backfill_policy=dg.BackfillPolicy.single_run(),
    retry_policy=RETRY_POLICY,
    description="The nightly sleep cycle, one day per partition; a range backfill is one run, days in order.",
)
def night(
    context: dg.AssetExecutionContext,
    config: NightConfig,
    memory_store: MemoryStoreResource,
    anima_engine: EngineResource,
):
    days: list[date] = sorted(partition_day(k) for k in context.partition_keys)
    selected = {step_key(k) for k in context.selected_asset_keys}
    steps = [s.key for s in STEPS if s.key in selected]
    done: list[tuple[dg.AssetKey, str, dict[str, dg.MetadataValue]]] = []

    def on_step(n: Night, key: str, results: list[StepResult]) -> None:
        md = step_metadata(n, results)
        partition = n.day.isoformat()
        context.add_asset_metadata(md, asset_key=asset_key(key), partition_key=partition)
        done.append((asset_key(key), partition, md))
        counts = [
            f"{k} {md[k].value}"
            for k in ("created", "updated", "deprecated", "merged", "split")
            if md[k].value
        ]
        context.log.info(
            f"{partition} {key} ({n.mode}): " + ", ".join([f"{md['animas'].value} anima(s)", *counts])
        )

    try:
        settings = night_settings(memory_store, anima_engine)
        context.log.info(
            f"night over {days[0]}..{days[-1]} ({len(days)} day(s)), {len(steps)} step(s), engine {settings.engine}, "
            f"mode {config.mode}, force {config.force}"
            + (f", animas {config.animas}" if config.animas else "")
        )
        with memory_store.open(settings) as db:
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
            )
    except Exception as exc:
        for key, partition, md in done:  # what finished stays recorded as materialized
            context.log_event(dg.AssetMaterialization(asset_key=key, partition=partition, metadata=md))
        raise dg.Failure(
            description=str(exc),
            metadata=failure_metadata(exc, context.run.run_id),
            allow_retries=runner.is_transient(exc),
        ) from exc

    for key in sorted(context.selected_asset_keys, key=lambda k: steps.index(step_key(k))):
        yield dg.MaterializeResult(asset_key=key)
