"""The night's asset checks: check specs on the night multi-asset, evaluated by the night's
own body on the connection it already holds, scoped to what the run touched.

Why not one @asset_check per invariant: each ran in its own step process, opened its own
pool, ran migrations and scanned the whole store (three empty days: 19 s of checks for 2 s
of night). Here they cost a few indexed queries per run:

- scope: the animas the run's steps ran for (an invariant of one anima can only break on a
  night that anima ran), and for the light-sleep scope rule the run's days too. A check
  executed alone from the UI looks at the animas recorded in sleep_state for its days.
- `light_sleep_within_scope` is blocking: it is evaluated after each day of the run, and a
  violation stops the run there, before the next day's night builds on it (the run fails
  naming the check and the day).
- Whether last night ran at all is freshness.py's check, on its own morning schedule.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from typing import Any

import dagster as dg

from anima_pipeline.core.steps import LIGHT_SLEEP, StepKey
from anima_pipeline.defs.night.memory_invariants import MemoryInvariants
from anima_pipeline.night.steps.deep.prompt import BATCH_CHARS, REFUSE_CHARS
from anima_pipeline.store import sleep_state
from anima_pipeline.store.db import Connection

SAMPLE = 20  # offending rows listed in the metadata (the count is always complete)

# Deep sleep's message 1 thresholds, defined once in night/steps/deep/step.py.
DEEP_INPUT_WARN_CHARS = BATCH_CHARS
DEEP_INPUT_MAX_CHARS = REFUSE_CHARS


@dataclass(frozen=True)
class CheckScope:
    """What a check looks at: these animas (None = all) and, where the rule allows, these days."""

    days: list[date]
    animas: list[str] | None
    timezone: str

    def invariants(self, conn: Connection) -> MemoryInvariants:
        return MemoryInvariants(conn, self.timezone, self.animas)

    def metadata(self) -> dict[str, dg.MetadataValue]:
        return {
            "scope_days": dg.MetadataValue.text(f"{self.days[0]}..{self.days[-1]}" if self.days else "-"),
            "scope_animas": dg.MetadataValue.int(-1 if self.animas is None else len(self.animas)),
        }


def _rows(rows: list[dict]) -> dg.MetadataValue:
    # ids, never text: Dagster's event log keeps metadata past a forget --purge (metadata.py)
    sample = [{k: v for k, v in r.items() if k not in ("normalized", "content")} for r in rows[:SAMPLE]]
    return dg.MetadataValue.json(json.loads(json.dumps(sample, default=str)))


def _result(name: str, violations: list[dict], what: str, scope: CheckScope) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        check_name=name,
        asset_key=dg.AssetKey(CHECK_ASSET[name].split("/")),
        passed=not violations,
        severity=dg.AssetCheckSeverity.ERROR,
        description=f"{len(violations)} {what}" if violations else None,
        metadata={
            "violations": dg.MetadataValue.int(len(violations)),
            "sample": _rows(violations),
            **scope.metadata(),
        },
    )


def no_duplicate_active_memories(conn: Connection, scope: CheckScope) -> dg.AssetCheckResult:
    groups = scope.invariants(conn).duplicate_active()
    return _result("no_duplicate_active_memories", groups, "group(s) of active duplicates", scope)


def superseded_by_chains_end(conn: Connection, scope: CheckScope) -> dg.AssetCheckResult:
    broken = scope.invariants(conn).broken_supersede_chains()
    return _result("superseded_by_chains_end", broken, "broken superseded_by link(s)", scope)


def deep_sleep_input_within_limits(conn: Connection, scope: CheckScope) -> dg.AssetCheckResult:
    """Warns above 100k characters of message 1 (deep sleep goes by type, past 300k in slices);
    fails only for an anima whose message 1 has a slice that cannot be cut (deep sleep is then
    skipped for it, the night goes on)."""
    inputs = scope.invariants(conn).deep_sleep_input_chars()
    sizes = {a: n for a, (n, _) in inputs.items()}
    largest = max(sizes.values(), default=0)
    over = {a: n for a, n in sizes.items() if n > DEEP_INPUT_WARN_CHARS}
    refused = {a: why for a, (_, why) in inputs.items() if why}
    metadata = {
        "max_chars": dg.MetadataValue.int(largest),
        "animas": dg.MetadataValue.int(len(sizes)),
        "sliced": dg.MetadataValue.int(sum(1 for n in sizes.values() if n > DEEP_INPUT_MAX_CHARS)),
        "chars_by_anima": dg.MetadataValue.json(dict(sorted(sizes.items(), key=lambda kv: -kv[1])[:50])),
        **scope.metadata(),
    }
    common: dict[str, Any] = {
        "check_name": "deep_sleep_input_within_limits",
        "asset_key": dg.AssetKey(CHECK_ASSET["deep_sleep_input_within_limits"].split("/")),
        "metadata": metadata,
    }
    if refused:
        return dg.AssetCheckResult(
            passed=False,
            severity=dg.AssetCheckSeverity.ERROR,
            description=f"deep sleep skipped for {sorted(refused)}: "
            + "; ".join(sorted(refused.values()))[:1000],
            **common,
        )
    if over:
        return dg.AssetCheckResult(
            passed=False,
            severity=dg.AssetCheckSeverity.WARN,
            description=f"message 1 over {DEEP_INPUT_WARN_CHARS:,} chars (by type; past "
            f"{DEEP_INPUT_MAX_CHARS:,} in slices) for {sorted(over)}",
            **common,
        )
    return dg.AssetCheckResult(passed=True, **common)


def light_sleep_within_scope(conn: Connection, scope: CheckScope) -> dg.AssetCheckResult:
    events = scope.invariants(conn).light_scope_violations(scope.days or None)
    return _result("light_sleep_within_scope", events, "light-sleep write(s) outside the step's scope", scope)


def memory_sources_exist(conn: Connection, scope: CheckScope) -> dg.AssetCheckResult:
    orphans = scope.invariants(conn).orphan_sources()
    return _result("memory_sources_exist", orphans, "active memory(ies) citing unknown conversations", scope)


def model_declined(conn: Connection, scope: CheckScope) -> dg.AssetCheckResult:
    """A warning, never an error: the model's restraint is a normal outcome (docs/ordering.md,
    "Restraint"), but a person should see which steps wrote nothing, and why."""
    rows = sleep_state.declined_steps(conn, scope.days, scope.animas)
    return dg.AssetCheckResult(
        check_name="model_declined",
        asset_key=dg.AssetKey(CHECK_ASSET["model_declined"].split("/")),
        passed=not rows,
        severity=dg.AssetCheckSeverity.WARN,
        description=f"the model wrote nothing in {len(rows)} step(s) (declined)" if rows else None,
        metadata={"declined": dg.MetadataValue.int(len(rows)), "sample": _rows(rows), **scope.metadata()},
    )


@dataclass(frozen=True)
class NightCheck:
    name: str
    asset: str  # step key
    description: str
    evaluate: Callable[[Connection, CheckScope], dg.AssetCheckResult]
    blocking: bool = False


CHECKS: tuple[NightCheck, ...] = (
    NightCheck(
        "no_duplicate_active_memories",
        StepKey.MERGED,
        "No two active memories of an anima have the same normalized content "
        "(lowercase, NFKC, punctuation and whitespace folded). Animas the run touched.",
        no_duplicate_active_memories,
    ),
    NightCheck(
        "superseded_by_chains_end",
        StepKey.PINS_REVIEWED,
        "Every superseded_by points at an existing memory of the same anima, only deprecated memories "
        "have one, and chains end (no cycles). Animas the run touched.",
        superseded_by_chains_end,
    ),
    NightCheck(
        "deep_sleep_input_within_limits",
        StepKey.SEMANTIC_EXTRACTED,
        "Deep sleep's message 1 (all active memories as compact JSON) per anima: warns above "
        f"{DEEP_INPUT_WARN_CHARS:,} characters (by type; past {DEEP_INPUT_MAX_CHARS:,} in slices each under "
        "it); fails only when a slice cannot be cut (one memory over the limit): deep sleep is then skipped "
        "for that anima and night, and the night goes on.",
        deep_sleep_input_within_limits,
    ),
    NightCheck(
        "light_sleep_within_scope",
        StepKey.SEMANTIC_EXTRACTED,
        "Blocking: light sleep wrote only inside its scope on the run's days (memory_event): each stage only "
        "its own table; semantic memories created with sources among that day's conversations only, updated "
        "or deprecated only when their sources met them; anchors on that day's conversations. Evaluated after "
        "each day of the run; a violation stops the run before the next day.",
        light_sleep_within_scope,
        blocking=True,
    ),
    NightCheck(
        "memory_sources_exist",
        StepKey.CLEANED,
        "Every active memory's source_sessions exist as conversations, or were deleted by cleanup "
        "(recorded in memory_event, restorable). Animas the run touched.",
        memory_sources_exist,
    ),
    NightCheck(
        "model_declined",
        StepKey.SELF_REFRESHED,
        "Warning only: the steps of the run's days in which the model wrote nothing (a text-only answer, "
        "also after the reminder, or a refusal or cut answer), with its words. A declined step is a normal "
        "outcome and never fails the night; a needed row (the day summary) is then written offline.",
        model_declined,
    ),
)
CHECK_ASSET = {c.name: c.asset for c in CHECKS}
BY_KEY = {dg.AssetCheckKey(dg.AssetKey(c.asset.split("/")), c.name): c for c in CHECKS}
LIGHT_SLEEP_STEPS = LIGHT_SLEEP


def check_specs() -> list[dg.AssetCheckSpec]:
    return [
        dg.AssetCheckSpec(
            c.name, asset=dg.AssetKey(c.asset.split("/")), description=c.description, blocking=c.blocking
        )
        for c in CHECKS
    ]
