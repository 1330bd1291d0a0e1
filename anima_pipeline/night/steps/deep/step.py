"""Deep sleep: four rounds over the whole store of an anima's active semantic memories.

1 contradiction + expiry, 2 split, 3 merge, 4 pin review — each its own step (its own
transaction and Dagster key), in that order: clean problems first, then refine, then merge,
then review what stays resident.

Message 1 (all active memories, one line each; prompt.py) must be byte-identical in every
round of a night so the provider serves it from the prompt cache. Rounds can run in separate
processes (a re-run of one round from the UI), so message 1 is not kept in memory: it is
rebuilt from the store as it was before the night's first deep-sleep write, by replaying that
night's deep-sleep events backwards (night/prefix.py). Message 1.5 is the same events,
forwards.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import threading
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

from anima_pipeline.config import DeepSettings
from anima_pipeline.core.steps import StepKey
from anima_pipeline.llm.contract import Usage
from anima_pipeline.night import guards
from anima_pipeline.night.frame import Night, StepOutcome, StepResult, run_step
from anima_pipeline.night.prefix import changed_today, deep_prefix, deep_request, deep_writes, sees_candidates
from anima_pipeline.night.steps.declaration import StepDef
from anima_pipeline.night.steps.deep.candidates import similar_pairs
from anima_pipeline.night.steps.deep.merges import MergeGroup
from anima_pipeline.night.steps.deep.pins import RESIDENT_CAP
from anima_pipeline.night.steps.deep.plan import attribute_pairs, merge_candidates, round_plan
from anima_pipeline.night.steps.deep.preview import ROUND_CHANGES, round_preview
from anima_pipeline.night.steps.deep.prompt import (
    DEEP_ROUND_TASK,
    ROUNDS,
    message_one,
    message_one_five,
    size_band,
)
from anima_pipeline.night.steps.deep.splits import is_split_candidate
from anima_pipeline.night.steps.deep.tools import ROUND_TOOLS
from anima_pipeline.store.db import Connection, Database
from anima_pipeline.store.events import Audit, deprecations_since, event_watermark
from anima_pipeline.store.memories import MemoryRepo, SemanticMemory
from anima_pipeline.tools.executor import ToolExecutor
from anima_pipeline.tools.scope import Scope

log = logging.getLogger(__name__)

MAX_PREFILTER_LINES = 30  # message 2 stays small beside message 1 (the cached prefix)
MAX_PREFILTER_IDS = 40


# ---- message 2: the program pre-filter ---------------------------------------------------


@dataclass
class Prefilter:
    text: str
    ids: set[int]
    count: int
    # round 3's groups, computed once: message 2 shows them and the offline plan merges them
    # (the containment rules look at every pair: seconds on a large slice)
    groups: list[MergeGroup] = field(default_factory=list)


def prefilter(
    conn: Connection,
    round_name: str,
    memories: list[SemanticMemory],
    cfg: DeepSettings,
    changed_ids: set[int] | None,
) -> Prefilter:
    ids = [m.id for m in memories]
    if round_name == "contradiction":
        attr = attribute_pairs(memories)
        sim = similar_pairs(conn, ids, cfg.trgm_threshold, changed_ids)
        # one line a pair: a memory that meets another on two of its facts (or itself, holding
        # two values) tells the model nothing more, and round 1 runs on the main model
        # (docs/cost.md); the ids stay those of every pair (the offline plan's candidates)
        lines = list(
            dict.fromkeys(
                f"- f-{a} vs f-{b}: same subject and attribute ({why})" for a, b, why in attr if a != b
            )
        )
        lines += [f"- f-{a} vs f-{b}: similar {s}" for a, b, s in sim]
        picked = {x for a, b, _ in attr for x in (a, b)} | {x for a, b, _ in sim for x in (a, b)}
        head = "# Pre-filter: pairs that may contradict or supersede each other (similar: trigram similarity)"
    elif round_name == "split":
        cands = [
            m
            for m in memories
            if is_split_candidate(m.content) and (changed_ids is None or m.id in changed_ids)
        ]
        lines = [", ".join(f"f-{m.id}" for m in cands[:MAX_PREFILTER_IDS])] if cands else []
        if len(cands) > MAX_PREFILTER_IDS:
            lines.append(f"(and {len(cands) - MAX_PREFILTER_IDS} more long entries)")
        picked = {m.id for m in cands}
        head = "# Pre-filter: long or multi-sentence entries (split candidates), by id"
    elif round_name == "merge":
        sim = similar_pairs(conn, ids, cfg.trgm_threshold, changed_ids)
        # a settled memory is no merge candidate (only a newer fact may retire it)
        groups = merge_candidates([m for m in memories if m.settled_at is None], cfg.merge_threshold)
        lines = [f"- {' + '.join(f'f-{i}' for i in g.ids)}: {g.reason}" for g in groups]
        lines += [f"- f-{a} ~ f-{b}: {s}" for a, b, s in sim]
        picked = {x for a, b, _ in sim for x in (a, b)} | {i for g in groups for i in g.ids}
        head = "# Pre-filter: possible duplicates (groups found by the program, then similar pairs: trigram similarity)"
    else:
        pins = [m for m in memories if m.pinned]
        lines = [
            f"- f-{m.id}: pinned since {m.pinned_at:%Y-%m-%d}" if m.pinned_at else f"- f-{m.id}: pinned"
            for m in pins
        ]
        lines = [
            line
            + f", reference_count {m.reference_count:.2f}, last cited "
            + (f"{m.last_referenced_at:%Y-%m-%d}" if m.last_referenced_at else "never")
            for line, m in zip(lines, pins, strict=True)
        ]
        lines.append(f"({len(pins)} pinned; the resident read is capped at {RESIDENT_CAP})")
        picked = {m.id for m in pins}
        head = "# Pre-filter: pinned memories"
    if len(lines) > MAX_PREFILTER_LINES:
        # The list grows with pairs (quadratic in a busy subject); message 1 has every memory
        # anyway, so the first lines point the way and the count says how much more there is.
        more = len(lines) - MAX_PREFILTER_LINES
        lines = [*lines[:MAX_PREFILTER_LINES], f"(and {more} more candidates of the same kinds)"]
    return Prefilter(
        text="\n".join([head, *(lines or ["(no candidates)"])]),
        ids=picked,
        count=len(picked),
        groups=groups if round_name == "merge" else [],
    )


# ---- one round ---------------------------------------------------------------------------------


def run_round(db: Database, night: Night, anima_id: str, round_index: int) -> StepResult:
    step, round_name = ROUNDS[round_index - 1]
    cfg = night.deep

    def body(conn: Connection, audit: Audit) -> StepOutcome:
        watermark = event_watermark(conn)
        current = MemoryRepo(conn).active(anima_id)
        changed = changed_today(conn, anima_id, night)
        stats: dict[str, Any] = {
            "round": round_name,
            "round_index": round_index,
            "mode": night.mode,
            "active_count": len(current),
            "skipped_rounds": 0,
        }
        if sees_candidates(step, night.mode) and not changed:
            earlier = [e for e in deep_writes(conn, anima_id, night) if e["step"] != step]
            stats["earlier_changes"] = len(earlier)
            stats["skipped_rounds"] = 1
            _write_log(
                night,
                anima_id,
                round_index,
                round_name,
                {**stats, "summary": "skipped: nothing changed in 24 h"},
                [],
                earlier,
            )
            return StepOutcome(stats=stats)
        if not current:
            return StepOutcome(stats={**stats, "earlier_changes": 0})
        shared = deep_prefix(conn, anima_id, night, step, changed)
        if shared.refused:  # a slice that cannot be cut: deep sleep skipped tonight, never a failed night
            log.error(
                "deep sleep round %d for anima %s on %s: %s", round_index, anima_id, night.day, shared.refused
            )
            stats.update(
                skipped_rounds=1,
                refused=1,
                message1_chars=shared.chars,
                size_band="refused",
                earlier_changes=0,
            )
            stats["summary"] = shared.refused[:500]
            return StepOutcome(stats=stats)
        earlier = [e for e in shared.events if e["step"] != step]
        stats["earlier_changes"] = len(earlier)
        if not any(batch for _, batch, _ in shared.slices) and not any(e["before"] is None for e in earlier):
            # an incremental night whose changed memories are all gone again: no candidate
            stats.update(skipped_rounds=1, message1_memories=0, summary="skipped: no candidate")
            return StepOutcome(stats=stats)
        usage, calls, msg1_chars = Usage(), [], 0
        totals: dict[str, int] = {}
        full_split = night.mode == "full"
        planned = shared.slices
        whole_chars = shared.chars
        band = size_band(whole_chars)  # of the whole message 1, as the thresholds are defined
        stats.update(
            slices=len(planned), slice_max_chars=max(len(message_one(b, night.tz)) for _, b, _ in planned)
        )
        if band != "normal":
            log.warning(
                "deep sleep round %d (%s) for anima %s on %s: message 1 is %d characters (%s%s)",
                round_index,
                round_name,
                anima_id,
                night.day,
                whole_chars,
                band,
                f", {len(planned)} slices" if len(planned) > 1 else "",
            )
        for _label, batch, msg1 in planned:
            msg1_chars += len(message_one(batch, night.tz))
            batch_ids = {m.id for m in batch} | {int(e["memory_id"]) for e in earlier if e["before"] is None}
            live = [m for m in current if m.id in batch_ids]
            scoped_changed = None if night.mode == "full" else changed
            pre = prefilter(conn, round_name, live, cfg, scoped_changed)
            scope = Scope(anima_id=anima_id, tools=ROUND_TOOLS[round_name])
            executor = ToolExecutor(conn, scope, audit)
            # Everything up to message 1 is the same in all four rounds (tools, the framing
            # with every round's rules, the identity snapshot, message 1): one cached prefix.
            request = deep_request(step, shared, msg1, earlier, pre.text, DEEP_ROUND_TASK[round_name])
            usage += night.engine.run(
                request,
                executor,
                functools.partial(
                    round_plan,
                    round_name,
                    # a settled memory is no candidate (only a newer fact may retire it)
                    live if round_name == "contradiction" else [m for m in live if m.settled_at is None],
                    pre.ids,
                    night.end,
                    cfg.stale_pin_days,
                    full_split,
                    pre.groups,
                ),
            )
            calls += executor.log
            for k, v in executor.stats.items():
                totals[k] = totals.get(k, 0) + v
            stats["candidates"] = stats.get("candidates", 0) + pre.count
            stats["message1_memories"] = stats.get("message1_memories", 0) + len(batch)
        # deprecations by this execution of the round only: a forced re-run (or a retry) in the
        # same run must not count what the earlier execution already committed
        lost = deprecations_since(conn, audit, step, watermark)
        stats.update(totals, deprecated_total=lost, message1_chars=msg1_chars, size_band=band)
        guards.check_step(
            conn, audit, night.limits, watermark
        )  # before the log: a tripped round logs nothing
        if round_name == "pin_review":
            stats["pinned_after"] = sum(1 for m in MemoryRepo(conn).active(anima_id) if m.pinned)
            stats["resident_cap"] = RESIDENT_CAP
        summary = ", ".join(f"{k} {totals[k]}" for k in sorted(totals) if k not in ("calls",)) or "no changes"
        stats["summary"] = summary
        _write_log(night, anima_id, round_index, round_name, stats, calls, earlier)
        return StepOutcome(stats=stats, usage=usage, details={"tool_calls": calls})

    return run_step(db, night, anima_id, step, body)


def _write_log(
    night: Night,
    anima_id: str,
    round_index: int,
    round_name: str,
    stats: dict,
    calls: list,
    earlier: list[dict],
) -> None:
    """The per-round operation log, for debugging only (not in the database): one file
    per anima under logs/deep_sleep_<day>_<round index>_<round>/, written whole through a
    temporary file of this writer's own. The animas of a night run at once (night/pool.py):
    they never share a file, and each write stays the size of one anima's round (one shared
    file rewritten per anima grew quadratically and serialized the pool over 1,000 animas)."""
    if night.log_dir is None:
        return
    folder = Path(night.log_dir) / f"deep_sleep_{night.day}_{round_index}_{round_name}"
    folder.mkdir(parents=True, exist_ok=True)
    entry = {
        "day": str(night.day),
        "round": round_name,
        "round_index": round_index,
        "anima_id": anima_id,
        "run_id": night.run_id,
        "active_count": stats.get("active_count"),
        "earlier_changes": stats.get("earlier_changes"),
        "tool_calls": len(calls),
        "summary": stats.get("summary"),
        "stats": stats,
        "calls": calls,
        "change_log": message_one_five(earlier),
        "written_at": datetime.now().astimezone().isoformat(),
    }
    path = folder / f"{quote(anima_id, safe='')}.json"
    tmp = folder / f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp"
    tmp.write_text(json.dumps(entry, ensure_ascii=False, indent=2, default=str))
    tmp.replace(path)


def read_log(log_dir: Path, day: date, round_index: int, round_name: str) -> dict:
    """One round's op log of a night: {"day", "round", "round_index", "animas": {id: entry}}."""
    folder = Path(log_dir) / f"deep_sleep_{day}_{round_index}_{round_name}"
    entries = [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))]
    return {
        "day": str(day),
        "round": round_name,
        "round_index": round_index,
        "animas": {e["anima_id"]: e for e in entries},
    }


def deconflict(db: Database, night: Night, anima_id: str) -> StepResult:
    return run_round(db, night, anima_id, 1)


def split(db: Database, night: Night, anima_id: str) -> StepResult:
    return run_round(db, night, anima_id, 2)


def merge(db: Database, night: Night, anima_id: str) -> StepResult:
    return run_round(db, night, anima_id, 3)


def review_pins(db: Database, night: Night, anima_id: str) -> StepResult:
    return run_round(db, night, anima_id, 4)


DECLARED = tuple(
    StepDef(step, "deep_sleep", description, run, (after,), ROUND_CHANGES[step], preview=round_preview)
    for step, description, run, after in (
        (
            StepKey.DECONFLICTED,
            "Round 1: exclusive contradictions and expired facts deprecated, superseded_by set.",
            deconflict,
            StepKey.AUTOBIOGRAPHY_SUMMARY,
        ),
        (
            StepKey.SPLIT,
            "Round 2: entries holding several independent facts split into one memory each.",
            split,
            StepKey.DECONFLICTED,
        ),
        (
            StepKey.MERGED,
            "Round 3: duplicates and near-duplicates merged (sources union, earliest observed_at).",
            merge,
            StepKey.SPLIT,
        ),
        (
            StepKey.PINS_REVIEWED,
            "Round 4: stale pins unpinned; the resident read stays capped at 40.",
            review_pins,
            StepKey.MERGED,
        ),
    )
)
