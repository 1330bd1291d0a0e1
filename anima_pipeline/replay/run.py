"""`anima replay`: past days again, into a shadow store, through Dagster (docs/replay.md).

The shadow starts as the live store stood when the night before `first` was over (rebuilt
from the audit log, store/shadows.py), with the same archive; then the nights first..last run
as one run of the nightly_sleep job, exactly as `anima sleep --from --to` runs them, except that
its memory_store resource points at the shadow (run config, for this run only) and, when asked,
its engine and model are other ones. The run is in the run history, tagged `anima/replay`;
the live store is never opened for writing. The diff is then recorded on the asset
`replay/<name>` as Markdown, so the UI shows it beside the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta

import dagster as dg

from anima_pipeline.config import Settings
from anima_pipeline.defs.night.launch import launch_night
from anima_pipeline.llm.factory import ENGINES
from anima_pipeline.replay import diff as diffing
from anima_pipeline.store import shadows as shadow

REPLAY_TAG = "anima/replay"


@dataclass
class ReplayOutcome:
    name: str
    url: str
    run_id: str
    ok: bool
    error: str
    undone: dict[str, int]
    diff: diffing.StoreDiff | None


def replay(
    live_url: str,
    settings: Settings,
    first: date,
    last: date,
    *,
    name: str,
    instance: dg.DagsterInstance,
    engine: str | None = None,
    model: str | None = None,
    mode: str = "scheduled",
    replace: bool = False,
) -> ReplayOutcome:
    if last < first:
        raise shadow.ShadowError(f"--to {last} is before --from {first}")
    url, undone = shadow.create(live_url, name, first - timedelta(days=1), replace=replace, to=last)
    resources: dict[str, dict] = {"memory_store": {"database_url": url}}
    engine_cfg = {k: v for k, v in (("engine", engine), ("model", model)) if v}
    if engine_cfg:
        resources["anima_engine"] = engine_cfg
    outcome = launch_night(
        first,
        last,
        mode=mode,
        instance=instance,
        trigger="replay",
        log_level="ERROR",
        settings=settings,
        resources=resources,
        extra_tags={REPLAY_TAG: name},
    )
    shadow.set_info(
        live_url,
        name,
        {
            "status": "replayed" if outcome.ok else "failed",
            "from": first.isoformat(),
            "to": last.isoformat(),
            "engine": engine or settings.engine,
            # an engine that prices no call (offline) calls no model: ANIMA_MODEL's default
            # would read as if it had
            "model": (model or settings.model) if _calls_a_model(engine or settings.engine) else "",
            "mode": mode,
            "run_id": outcome.run_id,
        },
    )
    found = diffing.diff(live_url, url, name, first, last) if outcome.ok else None
    if found is not None:
        record_diff(instance, found, outcome.run_id)
    return ReplayOutcome(name, url, outcome.run_id, outcome.ok, outcome.error, undone, found)


def record_diff(instance: dg.DagsterInstance, d: diffing.StoreDiff, run_id: str) -> None:
    """The diff as an observation of the asset replay/<name>: Markdown and counts in the UI."""
    instance.report_runless_asset_event(
        dg.AssetObservation(
            asset_key=dg.AssetKey(["replay", d.name]),
            description=f"shadow {d.name} against the live store, {d.first}..{d.last}",
            metadata={
                "diff": dg.MetadataValue.md(d.markdown()),
                "added": dg.MetadataValue.int(len(d.added)),
                "removed": dg.MetadataValue.int(len(d.removed)),
                "changed": dg.MetadataValue.int(len(d.changed)),
                "replay_run": dg.MetadataValue.dagster_run(run_id),
                "shadow_cost_usd": dg.MetadataValue.float(float(d.cost_usd.get("shadow", 0.0))),
            },
        )
    )


def _calls_a_model(engine: str) -> bool:
    known = ENGINES.get(engine)  # type: ignore[call-overload]  # a name from the CLI, checked by Settings
    return known is None or known.priced
