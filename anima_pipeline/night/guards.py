"""Loss guards: one limit on how much of an anima's memory a step, and a whole night, may retire.

Every step runs in `night.run_step`, which calls `check_step` inside the step's transaction
after the step's body, so the same guard covers light sleep, the deep-sleep rounds, dreams and
any future step, whatever engine planned the tool calls. What counts as *lost*: a semantic
memory that was active when the step (the night) began and that is now deprecated (deprecate,
split, expiry) or holds other content (update); k memories merged into one (still active) count
k - 1. Created memories, pins, confidence and source changes are not losses. The limit, of the
N memories active at the start, is

    allowed = max(floor(share * N), minimum)

with `share` = `guards.step_share` (default 25 %) per step and `guards.night_share` (40 %) for
the night, and `minimum` = `guards.min` (3): a store of 17 memories may lose 4 in one step and 6
in one night; a tiny store can still merge a pair and retire one contradiction. And a step that
would leave an anima which had two or more active memories with none at all always trips. All
are the settings' `guards` group (ANIMA_GUARD_*).

The night's figure comes from the memory_event rows of that (anima, day): the first event of a
memory that night gives its state at the start, the last one its state now, so a forced re-run
or a revert of that day is counted as it really left the memory. A tripped guard raises
`LossGuardTripped`; the step's transaction rolls back. When it is the night guard, the frame
also undoes the earlier steps of that night for that anima (`undo_night`, the audit-log replay
of `anima revert`), so the anima's memories are as they were before the night (docs/guards.md).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from datetime import date, datetime
from typing import Literal

from anima_pipeline.config import GuardSettings, Settings
from anima_pipeline.core.errors import NightError
from anima_pipeline.night.revert import revert_events
from anima_pipeline.store.archive import day_chars
from anima_pipeline.store.db import Connection
from anima_pipeline.store.events import Audit, status_changes_of_night, status_changes_of_step, step_growth
from anima_pipeline.store.memories import active_counts

GuardKind = Literal["step", "night"]
_DEFAULTS = GuardSettings.model_fields  # the defaults, without reading the environment


@dataclass(frozen=True)
class LossLimits:
    step_share: float = _DEFAULTS["step_share"].default
    night_share: float = _DEFAULTS["night_share"].default
    minimum: int = _DEFAULTS["min"].default

    @classmethod
    def from_settings(cls, settings: Settings) -> LossLimits:
        return cls(settings.guards.step_share, settings.guards.night_share, settings.guards.min)

    def allowed(self, kind: GuardKind, base: int) -> int:
        share = self.step_share if kind == "step" else self.night_share
        return max(math.floor(share * base), self.minimum)

    def trips(self, kind: GuardKind, loss: Loss) -> int | None:
        """The allowance `loss` exceeds, or None. Besides the share, a step never leaves an
        anima that had two or more memories with none active (a small store is not wiped)."""
        allowed = self.allowed(kind, loss.base)
        if loss.count > allowed:
            return allowed
        if loss.count and loss.base >= 2 and loss.active_now == 0:
            return loss.base - 1
        return None


@dataclass(frozen=True)
class Loss:
    base: int  # memories active at the start
    lost: tuple[int, ...]  # ids of those now deprecated or rewritten
    active_now: int = 0  # active memories of the anima now, created ones included
    merges: int = 0  # merge groups among `lost` whose merged memory is active: each counts k - 1

    @property
    def count(self) -> int:
        return len(self.lost) - self.merges


class LossGuardTripped(NightError):
    """A step or a night would retire more of an anima's memories than its loss guard allows.
    Answered as a refusal where a person asked for the change (`anima review approve`: exit
    2, HTTP 409)."""

    code = "loss_guard"
    http_status = 409
    exit_code = 2

    def __init__(
        self, kind: GuardKind, anima_id: str, step: str, day: date, loss: Loss, allowed: int
    ) -> None:
        self.kind, self.anima_id, self.step, self.day = kind, anima_id, step, day
        self.loss, self.allowed = loss, allowed
        self.guard = f"loss guard per {kind}"
        share = loss.count / loss.base if loss.base else 1.0
        sample = ", ".join(f"f-{i}" for i in loss.lost[:8]) + (", …" if len(loss.lost) > 8 else "")
        scope = "this step" if kind == "step" else f"the night of {day} so far"
        setting = "ANIMA_GUARD_STEP_SHARE" if kind == "step" else "ANIMA_GUARD_NIGHT_SHARE"
        super().__init__(
            f"{self.guard} tripped: {scope} would deprecate or rewrite {loss.count} of the "
            f"{loss.base} memories anima {anima_id} had active ({share:.0%}; allowed {allowed}) "
            f"[{sample}]; rolled back. Check the input for instructions aimed at the memory system, "
            f"or raise {setting} / ANIMA_GUARD_MIN for this run."
        )

    @property
    def metadata(self) -> dict[str, int | str]:
        return {
            "guard": self.guard,
            "anima": self.anima_id,
            "step": self.step,
            "lost": self.loss.count,
            "active_at_start": self.loss.base,
            "allowed": self.allowed,
        }


def _loss(conn: Connection, anima_id: str, events: list[dict]) -> Loss:
    first: dict[int, dict] = {}
    last: dict[int, dict] = {}
    for e in events:
        mid = int(e["memory_id"])
        first.setdefault(mid, e)
        last[mid] = e
    at_start = {m for m, e in first.items() if e["before_status"] == "active"}
    counts = active_counts(conn, anima_id, list(first))
    lost = tuple(
        sorted(
            m
            for m in at_start
            if last[m]["after_status"] != "active" or last[m]["after_content"] != first[m]["before_content"]
        )
    )
    # k memories merged into one new memory that is still active lose k - 1 entries, not k
    groups = {
        int(last[m]["superseded_by"])
        for m in lost
        if last[m]["op"] == "merge" and last[m]["after_status"] != "active" and last[m]["superseded_by"]
    }
    merges = sum(1 for g in groups if g in last and last[g]["after_status"] == "active")
    return Loss(
        base=counts["untouched"] + len(at_start),
        lost=lost,
        active_now=counts["active"],
        merges=merges,
    )


def step_loss(conn: Connection, audit: Audit, after_id: int) -> Loss:
    """What this execution of the step (events after `after_id`) retired."""
    events = status_changes_of_step(conn, audit, after_id)
    return _loss(conn, audit.anima_id, events)


def night_loss(conn: Connection, anima_id: str, day: date) -> Loss:
    """What the night of `day` retired so far, over every run of that day (reverts included)."""
    events = status_changes_of_night(conn, anima_id, day)
    return _loss(conn, anima_id, events)


def check_step(conn: Connection, audit: Audit, limits: LossLimits, after_id: int) -> dict[str, int]:
    """Raise LossGuardTripped when this step, or the night with it, retires too much; else
    return the figures for the step's stats."""
    if audit.day is None:
        return {}
    step = step_loss(conn, audit, after_id)
    allowed = limits.trips("step", step)
    if allowed is not None:
        raise LossGuardTripped("step", audit.anima_id, audit.step, audit.day, step, allowed)
    if not step.count:
        return {"guard_lost": 0}
    night = night_loss(conn, audit.anima_id, audit.day)
    allowed = limits.trips("night", night)
    if allowed is not None:
        raise LossGuardTripped("night", audit.anima_id, audit.step, audit.day, night, allowed)
    return {"guard_lost": step.count, "guard_night_lost": night.count}


# ---- growth guards -----------------------------------------------------------------------


@dataclass(frozen=True)
class GrowthLimits:
    """How much one step may add to an anima's active memories, relative to what it read:
    at most max(floor(per_kchar * day_chars / 1000), min_memories) memories and
    max(floor(share * day_chars), min_chars) characters, both net (created and still active,
    less what the step retired: a split adds its parts minus one, a merge adds nothing)."""

    per_kchar: float = _DEFAULTS["growth_per_kchar"].default
    share: float = _DEFAULTS["growth_share"].default
    min_memories: int = _DEFAULTS["growth_min_memories"].default
    min_chars: int = _DEFAULTS["growth_min_chars"].default

    @classmethod
    def from_settings(cls, settings: Settings) -> GrowthLimits:
        return cls(
            settings.guards.growth_per_kchar,
            settings.guards.growth_share,
            settings.guards.growth_min_memories,
            settings.guards.growth_min_chars,
        )

    def allowed(self, day_chars: int) -> tuple[int, int]:
        """(memories, characters) a step may add on a day whose messages hold `day_chars`."""
        return (
            max(math.floor(self.per_kchar * day_chars / 1000), self.min_memories),
            max(math.floor(self.share * day_chars), self.min_chars),
        )


@dataclass(frozen=True)
class Growth:
    memories: int  # net memories added
    chars: int  # net characters of memory added
    day_chars: int  # the characters of the day's messages (the step's input)


class GrowthGuardTripped(NightError):
    """A step would add more memories (or characters of memory) than its input can explain:
    a flood (a model looping on create, an injection asking for it)."""

    guard = "growth guard per step"

    def __init__(self, anima_id: str, step: str, day: date, growth: Growth, allowed: tuple[int, int]) -> None:
        self.anima_id, self.step, self.day, self.growth, self.allowed = anima_id, step, day, growth, allowed
        super().__init__(
            f"{self.guard} tripped: this step would add {growth.memories:,} memories "
            f"({growth.chars:,} characters) to anima {anima_id}, from a day of {growth.day_chars:,} "
            f"characters (allowed {allowed[0]:,} memories, {allowed[1]:,} characters); rolled back. "
            "Check the day's input and the model's calls, or raise ANIMA_GUARD_GROWTH_MIN_MEMORIES / "
            "ANIMA_GUARD_GROWTH_MIN_CHARS (ANIMA_GUARD_GROWTH_PER_KCHAR, ANIMA_GUARD_GROWTH_SHARE) for this run."
        )

    @property
    def metadata(self) -> dict[str, int | str]:
        return {
            "guard": self.guard,
            "anima": self.anima_id,
            "step": self.step,
            "added": self.growth.memories,
            "added_chars": self.growth.chars,
            "day_chars": self.growth.day_chars,
            "allowed": self.allowed[0],
            "allowed_chars": self.allowed[1],
        }


def check_growth(
    conn: Connection, audit: Audit, limits: GrowthLimits, after_id: int, start: datetime, end: datetime
) -> dict[str, int]:
    """Raise GrowthGuardTripped when this step execution (events after `after_id`) added more
    than its day allows; else the figures for the step's stats. The day's characters are read
    only when the floors are passed (the common case costs one indexed query)."""
    if audit.day is None:
        return {}
    g = step_growth(conn, audit, after_id)
    memories, chars = g["added"] - g["retired"], g["added_chars"] - g["retired_chars"]
    if memories > limits.min_memories or chars > limits.min_chars:
        day = day_chars(conn, audit.anima_id, start, end)
        allowed = limits.allowed(day)
        if memories > allowed[0] or chars > allowed[1]:
            raise GrowthGuardTripped(
                audit.anima_id, audit.step, audit.day, Growth(memories, chars, day), allowed
            )
    return {"guard_added": memories} if g["added"] else {}


def undo_night(conn: Connection, anima_id: str, day: date, run_id: str, revert_run_id: str) -> Counter[str]:
    """Undo what `run_id` wrote for (anima, day) — the earlier steps of a night whose loss guard
    tripped — by the audit-log replay of `anima revert`, audited under `revert_run_id`; their
    sleep_state rows go, so re-running the same command redoes them."""
    return revert_events(conn, run_id, revert_run_id, anima_id=anima_id, day=day)
