"""Deep sleep: four rounds over the whole store of an anima's active semantic memories.

1 contradiction + expiry, 2 split, 3 merge, 4 pin review — each its own step (its own
transaction and Dagster key), in that order: clean problems first, then refine, then merge,
then review what stays resident.

Message 1 (all active memories as compact JSON) must be byte-identical in every round of a
night so the provider serves it from the prompt cache. Rounds can run in separate processes
(a re-run of one round from the UI), so message 1 is not kept in memory: it is rebuilt from
the store as it was before the night's first deep-sleep write, by replaying that night's
deep-sleep events backwards. Message 1.5 is the same events, forwards, in the seed's format.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import threading
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo

from anima_pipeline.config import DEFAULT_TIMEZONE
from anima_pipeline.core.errors import NightError
from anima_pipeline.core.steps import STEP_ORDER, StepKey
from anima_pipeline.llm.contract import StepRequest, TextBlock, ToolSpec, Usage
from anima_pipeline.night import guards, prefix, prompts
from anima_pipeline.night.frame import Night, StepOutcome, StepResult, run_step
from anima_pipeline.night.steps.deep.pins import RESIDENT_CAP
from anima_pipeline.night.steps.deep.plan import attribute_pairs, merge_candidates, round_plan
from anima_pipeline.night.steps.deep.splits import is_split_candidate
from anima_pipeline.night.steps.light.step import LIGHT_STEPS
from anima_pipeline.recall.identity import identity_context
from anima_pipeline.store.db import Connection, Database
from anima_pipeline.store.events import (
    Audit,
    deprecations_since,
    event_watermark,
    events_of_steps,
    memories_changed_outside,
    semantic_writes,
)
from anima_pipeline.store.layers import SelfBlockRepo
from anima_pipeline.store.memories import (
    MEMORY_TYPES,
    MemoryRepo,
    SemanticMemory,
    active_before,
    similar_memory_pairs,
)
from anima_pipeline.tools.executor import ToolExecutor
from anima_pipeline.tools.schemas import tool_specs
from anima_pipeline.tools.scope import Scope

log = logging.getLogger(__name__)

ROUNDS: tuple[tuple[StepKey, str], ...] = (
    (StepKey.DECONFLICTED, "contradiction"),
    (StepKey.SPLIT, "split"),
    (StepKey.MERGED, "merge"),
    (StepKey.PINS_REVIEWED, "pin_review"),
)
DEEP_STEPS = tuple(step for step, _ in ROUNDS)
# The steps that finish before deep sleep starts (DAG order); every later write of the night
# is undone when the rounds rebuild their shared prompt.
BEFORE_DEEP_SLEEP = (StepKey.CLEANED, *LIGHT_STEPS)
ROUND_TOOLS = {
    "contradiction": ("deprecate_semantic_memory",),
    "split": ("split_semantic_memory",),
    "merge": ("merge_semantic_memories",),
    "pin_review": ("unpin_semantic_memory", "pin_semantic_memory"),
}
# Every round sends the same tool list: tools come first in the provider's cache prefix, so a
# per-round list would invalidate the cached system + message 1 in each round. What a round
# may call is still limited by its executor scope (ROUND_TOOLS); its instruction names it.
DEEP_TOOLS: tuple[str, ...] = tuple(dict.fromkeys(t for tools in ROUND_TOOLS.values() for t in tools))
# The dream and the self refresh read the same store after the rounds: they send the rounds'
# prefix (tools, system, message 1) byte for byte and read it from the cache (docs/cost.md).
# Caches are per model: the members on one model send the union of their tools and rules
# (night/prefix.py); each step's scope still allows only its own tools.
DREAM_STEP, SELF_STEP = StepKey.DREAM, StepKey.SELF_REFRESHED
FAMILY: tuple[str, ...] = (*DEEP_STEPS, DREAM_STEP, SELF_STEP)
FAMILY_TOOLS: dict[str, tuple[str, ...]] = {
    **{step: ROUND_TOOLS[name] for step, name in ROUNDS},
    DREAM_STEP: ("write_dream_entry",),
    SELF_STEP: ("write_self_block",),
}
ROUND_PROMPTS = prompts.DEEP_ROUND_TASK  # short: every round's rules are in the shared system prompt

# Size thresholds on message 1 (the seeds' table), in characters; past REFUSE_CHARS deep sleep
# goes on in slices each under it (`slices`).
WARN_CHARS = 10_000
BATCH_CHARS = 100_000
REFUSE_CHARS = 300_000
MAX_PREFILTER_LINES = 30  # message 2 stays small beside message 1 (the cached prefix)
MAX_PREFILTER_IDS = 40
EVERY_PAIR_IDS = 250  # past this many memories the trigram pairs come from content-order neighbours
SORTED_NEIGHBOURS = 8


_TZ = ZoneInfo(DEFAULT_TIMEZONE)


class DeepSleepTooLarge(NightError):
    """A slice of message 1 that cannot be cut (one memory over the limit)."""


@dataclass(frozen=True)
class Settings:
    """Deep sleep's own knobs. How much a round may retire is the shared loss guard
    (night/guards.py), checked by the step frame for every step."""

    merge_threshold: float = 0.75
    stale_pin_days: int = 30
    trgm_threshold: float = 0.35

    @classmethod
    def from_night(cls, night: Night) -> Settings:
        known = {k: v for k, v in night.settings.items() if k in cls.__dataclass_fields__}
        return cls(**known)


# ---- message 1: the snapshot before the night's first deep-sleep write --------------------


def _events(conn: Connection, anima_id: str, night: Night) -> list[dict]:
    return semantic_writes(conn, anima_id, night.day, list(DEEP_STEPS))


def _after_light_sleep(conn: Connection, anima_id: str, night: Night, table: str) -> list[dict]:
    """This night's writes to `table` by the steps that run from deep sleep on (the rounds
    themselves, the dream, the self refresh, reference sync): undone, they give the store as
    deep sleep found it, which every round shows the same (one cached prompt prefix). An
    agent's own writes of that day (remember) are part of what deep sleep finds, not undone;
    nor are a revert's (`anima revert`, the night guard's undo), and the writes of a run
    that was reverted are undone already: undoing either again would bring back what the
    revert retired (a reverted flood of 5,000 memories in message 1)."""
    return events_of_steps(
        conn, anima_id, night.day, table, [k for k in STEP_ORDER if k not in BEFORE_DEEP_SLEEP]
    )


def self_blocks_snapshot(conn: Connection, anima_id: str, night: Night) -> dict[str, str]:
    """The self blocks as they were when deep sleep started this night."""
    blocks = SelfBlockRepo(conn).all(anima_id)
    for e in reversed(_after_light_sleep(conn, anima_id, night, "self_block")):
        if e["memory_id"] in blocks:
            blocks[e["memory_id"]] = (e["before"] or {}).get("content", "")
    return blocks


MESSAGE_ONE_FORMAT = (
    "one memory a line: id, type, observed date (local), [pinned] and c=<confidence> when it is not "
    "0.8, then the content"
)


def compact(m: SemanticMemory, tz: ZoneInfo | None = None) -> str:
    """One memory as one line of message 1. Sources are left out (the program stitches them on
    split and merge) and the observed time is a date: message 1 is most of every deep-sleep
    prompt, and JSON keys, quotes and full timestamps on every memory cost as many tokens as
    the contents themselves (docs/cost.md)."""
    parts = [m.ref, m.type]
    if m.observed_at:
        parts.append(m.observed_at.astimezone(tz or _TZ).date().isoformat())
    if m.pinned:
        parts.append("[pinned]")
    if m.settled_at is not None:
        parts.append("[settled]")  # corrected by the user: leave it as it is
    if m.confidence != 0.8:
        parts.append(f"c={m.confidence:.2f}")
    return " ".join(parts) + " " + " ".join(m.content.split())


def message_one(memories: list[SemanticMemory], tz: ZoneInfo | None = None) -> str:
    return "\n".join(compact(m, tz) for m in memories)


def size_band(chars: int) -> str:
    """The seeds' ladder for the whole message 1; past the limit it goes on in slices."""
    if chars > REFUSE_CHARS:
        return "sliced"
    if chars > BATCH_CHARS:
        return "batched"
    if chars > WARN_CHARS:
        return "warn"
    return "normal"


def slices(
    memories: list[SemanticMemory], tz: ZoneInfo | None = None
) -> list[tuple[str, list[SemanticMemory]]]:
    """How message 1 goes out: one slice up to 100k characters; by type above; a type whose
    own message 1 is over 300k is cut into consecutive time windows (observed, else created,
    then id), each packed up to 300k. Every slice is a pure function of the memories, so each
    round rebuilds it byte for byte (its cached prefix). Only a memory that alone is over the
    limit cannot be cut: DeepSleepTooLarge, and deep sleep is skipped for the anima tonight."""
    if len(message_one(memories, tz)) <= BATCH_CHARS:
        return [("all", memories)]
    out: list[tuple[str, list[SemanticMemory]]] = []
    for t in MEMORY_TYPES:
        group = [m for m in memories if m.type == t]
        if not group:
            continue
        if len(message_one(group, tz)) <= REFUSE_CHARS:
            out.append((t, group))
        else:
            out += _time_windows(t, group, tz)
    return out


def _time_windows(
    label: str, group: list[SemanticMemory], tz: ZoneInfo | None
) -> list[tuple[str, list[SemanticMemory]]]:
    windows: list[list[SemanticMemory]] = [[]]
    size = 0
    for m in sorted(group, key=lambda m: (m.observed_at or m.created_at, m.id)):
        n = len(compact(m, tz))
        if n > REFUSE_CHARS:
            raise DeepSleepTooLarge(
                f"deep sleep refused: memory f-{m.id} alone is {n:,} characters of message 1 (limit "
                f"{REFUSE_CHARS:,}), a slice that cannot be cut; deep sleep is skipped for this anima "
                "tonight and nothing was changed. Split or shorten that memory."
            )
        if windows[-1] and size + 1 + n > REFUSE_CHARS:
            windows.append([])
            size = 0
        size += n + (1 if windows[-1] else 0)  # one line each, newline-separated
        windows[-1].append(m)
    return [(f"{label}, {_when(w[0])} to {_when(w[-1])}", w) for w in windows]


def _when(m: SemanticMemory) -> str:
    return f"{m.observed_at or m.created_at:%Y-%m-%d}"


# ---- message 1.5: the changes of earlier rounds --------------------------------------


def message_one_five(events: list[dict]) -> str:
    processed, new, modified = [], [], []
    created_ids = {e["memory_id"] for e in events if e["before"] is None}
    for e in events:
        ref = f"f-{e['memory_id']}"
        after = e["after"] or {}
        if e["before"] is None:
            new.append(
                f'{ref} ({after.get("type")}) "{after.get("content")}" '
                f"sources=[{','.join(after.get('source_sessions') or [])}] observed={after.get('observed_at')}"
            )
        elif after.get("status") == "deprecated" and (e["before"] or {}).get("status") == "active":
            succ = after.get("superseded_by")
            if e["op"] == "merge":
                processed.append(f"{ref} — merged into f-{succ}")
            elif e["op"] == "split":
                processed.append(f"{ref} — split (first part f-{succ})")
            else:
                why = after.get("deprecated_reason") or "deprecated"
                processed.append(
                    f"{ref} — deprecated: {why}" + (f" (superseded by f-{succ})" if succ else "")
                )
        elif e["memory_id"] not in created_ids:
            fields = sorted(
                k for k in after if k not in ("updated_at",) and after.get(k) != (e["before"] or {}).get(k)
            )
            detail = (
                f'content updated to "{after.get("content")}"' if "content" in fields else ", ".join(fields)
            )
            modified.append(f"{ref} — modified: {detail}")
    if not (processed or new or modified):
        return "# Changes of earlier rounds (these override message 1)\n(none yet)"
    parts = ["# Changes of earlier rounds (these override message 1)"]
    parts += ["## Processed (ignore these entries of message 1)", *(processed or ["(none)"])]
    parts += ["## New entries (not in message 1)", *(new or ["(none)"])]
    parts += ["## Modified entries (these override message 1)", *(modified or ["(none)"])]
    return "\n".join(parts)


# ---- message 2: the program pre-filter ---------------------------------------------------


def similar_pairs(
    conn: Connection, ids: list[int], threshold: float, focus: set[int] | None = None
) -> list[tuple[int, int, float]]:
    """Pairs of memories with similar content: pg_trgm similarity (the % operator, served by
    the trigram index) or at least two shared rare full-text terms (a term is rare when it
    occurs in at most 5 % of these memories, so names that are everywhere do not pair all).
    With `focus` (incremental mode: the memories that changed that day) only pairs touching
    them are compared: an unchanged pair was already looked at on an earlier night. Trigram
    similarity of every pair is quadratic (84 s for the 1,822 memories of one 300k slice on
    the 2-core CI machine), so over EVERY_PAIR_IDS memories each is compared with its
    SORTED_NEIGHBOURS next ones in content order (near-duplicates mostly start alike; the
    rare-term pairs catch the rest): linear after the sort."""
    return similar_memory_pairs(
        conn, ids, threshold, focus, every_pair_ids=EVERY_PAIR_IDS, neighbours=SORTED_NEIGHBOURS
    )


@dataclass
class Prefilter:
    text: str
    ids: set[int]
    count: int


def prefilter(
    conn: Connection,
    round_name: str,
    memories: list[SemanticMemory],
    night: Night,
    cfg: Settings,
    changed_ids: set[int] | None,
) -> Prefilter:
    ids = [m.id for m in memories]
    if round_name == "contradiction":
        attr = attribute_pairs(memories)
        sim = similar_pairs(conn, ids, cfg.trgm_threshold, changed_ids)
        lines = [f"- f-{a} vs f-{b}: same subject and attribute ({why})" for a, b, why in attr]
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
        groups = merge_candidates(memories, cfg.merge_threshold)
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
    return Prefilter(text="\n".join([head, *(lines or ["(no candidates)"])]), ids=picked, count=len(picked))


# ---- one round ---------------------------------------------------------------------------------


def _changed_today(conn: Connection, anima_id: str, night: Night) -> set[int]:
    """Memories written in the 24 h before the night's cutoff by anything but deep sleep:
    keyed to the partition day so a backfill skips exactly what the nights it replays would
    have skipped. An audited write belongs to its event's day; updated_at inside the day only
    counts for a write no day-tagged event explains (unaudited), since the wall-clock time of
    a backfill's or of the previous night's writes says nothing about this day."""
    return memories_changed_outside(conn, anima_id, night.day, list(DEEP_STEPS), night.start, night.end)


@dataclass
class Prefix:
    """What every deep-sleep round, the dream and the self refresh of a night send first, byte
    for byte (one cached prefix per model): the system blocks over the identity snapshot, then
    message 1 per slice of the store as deep sleep found it. `events` are the rounds' writes
    so far (message 1.5 is made from them)."""

    system: list[TextBlock]
    tools: list[ToolSpec]
    slices: list[tuple[str, list[SemanticMemory], TextBlock]]
    base: list[SemanticMemory]
    events: list[dict]
    chars: int  # of the whole message 1 (the size thresholds are defined on it)
    refused: str | None = None  # why deep sleep is skipped tonight (a slice that cannot be cut)


def night_prefix(conn: Connection, anima_id: str, night: Night, step: str) -> Prefix:
    """The prefix `step` sends (shared with the family members on its model), message 1 in
    slices each under the limit (`slices`); `refused` says why deep sleep is skipped tonight
    when one slice cannot be cut."""
    members = prefix.sharing(prefix.engine_models(night.engine), step, FAMILY)
    rounds = tuple(name for s, name in ROUNDS if s in members)
    base = active_before(conn, anima_id, _after_light_sleep(conn, anima_id, night, "semantic_memory"))
    system = identity_context(
        conn, anima_id, memories=base, blocks=self_blocks_snapshot(conn, anima_id, night)
    )
    try:
        cut, refused = slices(base, night.tz), None
    except DeepSleepTooLarge as exc:  # the rounds skip; the dream and the self refresh read what fits
        cut, refused = (
            slices([m for m in base if len(compact(m, night.tz)) <= REFUSE_CHARS], night.tz),
            str(exc),
        )
    sliced = [
        (
            label,
            batch,
            TextBlock(
                text=prompts.tagged(
                    "memories",
                    f"# Message 1: active semantic memories ({label})\n{message_one(batch, night.tz)}",
                ),
                cache=True,
            ),
        )
        for label, batch in cut
    ]
    framing = prompts.deep_system(rounds, after=DREAM_STEP in members or SELF_STEP in members)
    return Prefix(
        system=prompts.system_blocks(framing, night.day, night.tz, system),
        tools=tool_specs(prefix.tools_of(members, FAMILY_TOOLS)),
        slices=sliced,
        refused=refused,
        base=base,
        events=_events(conn, anima_id, night),
        chars=len(message_one(base, night.tz)),
    )


def store_changed(conn: Connection, anima_id: str, night: Night) -> bool:
    """Whether the anima's store changed that day: a write by any step (or the agent) other than
    deep sleep, the rule deep sleep's incremental mode skips rounds 1 and 3 by, or a deep-sleep
    write that night. The dream and the self refresh cannot change anything otherwise."""
    return bool(_changed_today(conn, anima_id, night) or _events(conn, anima_id, night))


def run_round(db: Database, night: Night, anima_id: str, round_index: int) -> StepResult:
    step, round_name = ROUNDS[round_index - 1]
    cfg = Settings.from_night(night)

    def body(conn: Connection, audit: Audit) -> StepOutcome:
        watermark = event_watermark(conn)
        current = MemoryRepo(conn).active(anima_id)
        changed = _changed_today(conn, anima_id, night)
        stats: dict[str, Any] = {
            "round": round_name,
            "round_index": round_index,
            "mode": night.mode,
            "active_count": len(current),
            "skipped_rounds": 0,
        }
        if night.mode == "incremental" and round_name in ("contradiction", "merge") and not changed:
            earlier = [e for e in _events(conn, anima_id, night) if e["step"] != step]
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
        shared = night_prefix(conn, anima_id, night, step)
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
        msg15 = message_one_five(earlier)
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
            pre = prefilter(conn, round_name, live, night, cfg, scoped_changed)
            scope = Scope(anima_id=anima_id, tools=ROUND_TOOLS[round_name])
            executor = ToolExecutor(conn, scope, audit)
            # Everything up to message 1 is the same in all four rounds (tools, the framing
            # with every round's rules, the identity snapshot, message 1): one cached prefix.
            request = StepRequest(
                step=step,
                system=shared.system,
                user=[
                    msg1,
                    TextBlock(text=prompts.tagged("changes", msg15)),
                    TextBlock(text=pre.text),
                    TextBlock(text=ROUND_PROMPTS[round_name]),
                ],
                tools=shared.tools,
            )
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
                    cfg.merge_threshold,
                    cfg.stale_pin_days,
                    full_split,
                ),
            )
            calls += executor.log
            for k, v in executor.stats.items():
                totals[k] = totals.get(k, 0) + v
            stats["candidates"] = stats.get("candidates", 0) + pre.count
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
    """The seeds' per-round operation log, for debugging only (not in the database): one file
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
