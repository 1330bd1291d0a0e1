"""Launching the night through Dagster from Python (the CLI's `anima sleep`, tests).

`materialize_night` runs the night asset in-process against a Dagster instance, so the run
lands in that instance's run history exactly like a UI launch: one day is a partition run,
a range is ONE run over the partition range (the single-run backfill shape), steps are an
asset subset, and the checks of the selected steps run after it.
"""

from collections.abc import Sequence
from datetime import date

import dagster as dg
from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

from anima_pipeline.defs.night import assets as night_assets
from anima_pipeline.defs.night import checks as night_checks
from anima_pipeline.defs.night.partitions import START_DATE, TIMEZONE
from anima_pipeline.sleep.cycle import STEP_KEYS


def night_checks_defs() -> list[dg.AssetChecksDefinition]:
    return [v for v in vars(night_checks).values() if isinstance(v, dg.AssetChecksDefinition)]


def night_run_config(mode: str = "full", force: bool = False, animas: Sequence[str] = ()) -> dict:
    return {
        "ops": {night_assets.NIGHT_OP: {"config": {"mode": mode, "force": force, "animas": list(animas)}}}
    }


def materialize_night(
    first: date,
    last: date | None = None,
    *,
    steps: Sequence[str] | None = None,
    mode: str = "full",
    force: bool = False,
    animas: Sequence[str] = (),
    instance: dg.DagsterInstance | None = None,
    resources: dict | None = None,
    with_checks: bool = True,
    raise_on_error: bool = True,
    tags: dict[str, str] | None = None,
    log_level: str | None = None,
) -> dg.ExecuteInProcessResult:
    """Materialize the night for `first` (or the range first..last, one run, days in order).

    `resources` defaults to the environment's (resources.build_resources); `instance` to the
    persistent one from anima_pipeline.defs.instance.get_instance()."""
    from anima_pipeline.defs.night.resources import build_resources

    last = last or first
    if last < first:
        raise ValueError(f"--to {last} is before --from {first}")
    parts = night_assets.night.partitions_def
    newest = parts.get_last_partition_key() if parts is not None else None
    if newest is None or last.isoformat() > newest:
        raise ValueError(
            f"{last} is not over yet in {TIMEZONE}: the latest day that can sleep is {newest} "
            "(a partition is a whole local day)"
        )
    if first < START_DATE:
        raise ValueError(f"{first} is before ANIMA_START_DATE ({START_DATE})")
    unknown = sorted(set(steps or ()) - set(STEP_KEYS))
    if unknown:
        raise ValueError(f"unknown step(s) {unknown}; the steps are: {', '.join(STEP_KEYS)}")
    keys = [night_assets.asset_key(k) for k in (steps or STEP_KEYS)]
    selection = dg.AssetSelection.assets(*keys)
    if not with_checks:
        selection = selection.without_checks()
    run_tags = dict(tags or {})
    partition_key: str | None = first.isoformat()
    if last != first:
        partition_key = None
        run_tags[ASSET_PARTITION_RANGE_START_TAG] = first.isoformat()
        run_tags[ASSET_PARTITION_RANGE_END_TAG] = last.isoformat()
    if instance is None:
        from anima_pipeline.defs.instance import get_instance

        instance = get_instance()
    run_config = night_run_config(mode, force, animas)
    if log_level:  # the CLI draws its own progress; the full log stays in the run history
        run_config["loggers"] = {"console": {"config": {"log_level": log_level}}}
    return dg.materialize(
        [night_assets.night, *night_checks_defs()],
        run_config=run_config,
        instance=instance,
        resources=resources if resources is not None else build_resources(),
        partition_key=partition_key,
        tags=run_tags,
        selection=selection,
        raise_on_error=raise_on_error,
    )
