"""Asset checks: the invariants the night must keep, over the whole store.

They run after the night in the same run (they depend on the multi-asset's outputs) and can
be executed alone from the UI. They are not partitioned: each one looks at the store as it
is, and the metadata names the offending animas and ids.
"""

import json

import dagster as dg

from anima_pipeline.defs.night.assets import asset_key
from anima_pipeline.defs.night.resources import MemoryStoreResource
from anima_pipeline.defs.night.utils import MemoryInvariants
from anima_pipeline.sleep.deep_sleep import BATCH_CHARS, REFUSE_CHARS

SAMPLE = 20  # offending rows listed in the metadata (the count is always complete)

# Deep sleep's message 1 thresholds, defined once in sleep/deep_sleep.py.
DEEP_INPUT_WARN_CHARS = BATCH_CHARS
DEEP_INPUT_MAX_CHARS = REFUSE_CHARS


def _rows(rows: list[dict]) -> dg.MetadataValue:
    return dg.MetadataValue.json(json.loads(json.dumps(rows[:SAMPLE], default=str)))


def _result(violations: list[dict], what: str) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        passed=not violations,
        severity=dg.AssetCheckSeverity.ERROR,
        description=f"{len(violations)} {what}" if violations else None,
        metadata={"violations": dg.MetadataValue.int(len(violations)), "sample": _rows(violations)},
    )


@dg.asset_check(
    asset=asset_key("semantic_memory/merged"),
    description="No two active memories of an anima have the same normalized content "
    "(lowercase, NFKC, punctuation and whitespace folded).",
)
def no_duplicate_active_memories(memory_store: MemoryStoreResource) -> dg.AssetCheckResult:
    with memory_store.open() as db, db.transaction() as conn:
        groups = MemoryInvariants(conn).duplicate_active()
    return _result(groups, "group(s) of active duplicates")


@dg.asset_check(
    asset=asset_key("semantic_memory/pins_reviewed"),
    description="Every superseded_by points at an existing memory of the same anima, only deprecated "
    "memories have one, and chains end (no cycles) at an active memory or a deprecated one without successor.",
)
def superseded_by_chains_end(memory_store: MemoryStoreResource) -> dg.AssetCheckResult:
    with memory_store.open() as db, db.transaction() as conn:
        broken = MemoryInvariants(conn).broken_supersede_chains()
    return _result(broken, "broken superseded_by link(s)")


@dg.asset_check(
    asset=asset_key("semantic_memory/extracted"),
    description="Deep sleep's message 1 (all active memories as compact JSON) per anima: warns above "
    f"{DEEP_INPUT_WARN_CHARS:,} characters (batched by type), fails above {DEEP_INPUT_MAX_CHARS:,} (refused).",
)
def deep_sleep_input_within_limits(memory_store: MemoryStoreResource) -> dg.AssetCheckResult:
    with memory_store.open() as db, db.transaction() as conn:
        sizes = MemoryInvariants(conn).deep_sleep_input_chars()
    largest = max(sizes.values(), default=0)
    over = {a: n for a, n in sizes.items() if n > DEEP_INPUT_WARN_CHARS}
    refused = {a: n for a, n in over.items() if n > DEEP_INPUT_MAX_CHARS}
    metadata = {
        "max_chars": dg.MetadataValue.int(largest),
        "animas": dg.MetadataValue.int(len(sizes)),
        "chars_by_anima": dg.MetadataValue.json(dict(sorted(sizes.items(), key=lambda kv: -kv[1])[:50])),
    }
    if refused:
        return dg.AssetCheckResult(
            passed=False,
            severity=dg.AssetCheckSeverity.ERROR,
            metadata=metadata,
            description=f"deep sleep would refuse {sorted(refused)}: message 1 over {DEEP_INPUT_MAX_CHARS:,} chars",
        )
    if over:
        return dg.AssetCheckResult(
            passed=False,
            severity=dg.AssetCheckSeverity.WARN,
            metadata=metadata,
            description=f"message 1 over {DEEP_INPUT_WARN_CHARS:,} chars (batched by type) for {sorted(over)}",
        )
    return dg.AssetCheckResult(passed=True, metadata=metadata)


@dg.asset_check(
    asset=asset_key("semantic_memory/extracted"),
    description="Light sleep wrote only inside its scope (from memory_event): each stage only its own table; "
    "semantic memories created with sources among that day's conversations only, updated or deprecated only "
    "when their sources met that day's conversations; anchors on that day's conversations.",
)
def light_sleep_within_scope(memory_store: MemoryStoreResource) -> dg.AssetCheckResult:
    settings = memory_store.settings()
    with memory_store.open(settings) as db, db.transaction() as conn:
        events = MemoryInvariants(conn, settings.timezone).light_scope_violations()
    return _result(events, "light-sleep write(s) outside the step's scope")


@dg.asset_check(
    asset=asset_key("conversations/cleaned"),
    description="Every active memory's source_sessions exist as conversations, or were deleted by "
    "cleanup (recorded in memory_event, restorable).",
)
def memory_sources_exist(memory_store: MemoryStoreResource) -> dg.AssetCheckResult:
    with memory_store.open() as db, db.transaction() as conn:
        orphans = MemoryInvariants(conn).orphan_sources()
    return _result(orphans, "active memory(ies) citing unknown conversations")
