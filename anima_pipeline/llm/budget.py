"""A spending limit shared by all steps of one run.

A nightly run must not turn into an unbounded bill: every engine call is charged here,
and an engine checks the budget before each call so a step stops cleanly between calls
rather than mid-request. The limit is a stop line, not a hard cap: the call that crosses
it has already been paid for, so a run can overshoot by at most one call per step
running at that moment.

The budget lives in memory: steps that run in threads of one process share it, steps in
separate processes each see only their own.
"""

from __future__ import annotations

import threading

from anima_pipeline.config import Settings
from anima_pipeline.core.errors import ConfigError
from anima_pipeline.llm.contract import Usage
from anima_pipeline.llm.failures import BudgetExceeded


def _tokens(u: Usage) -> int:
    # Cache reads are cheap but still tokens the model processed; a token limit that
    # ignored them would not bound anything.
    return u.input_tokens + u.output_tokens + u.cache_read_tokens + u.cache_write_tokens


class Budget:
    """Tracks spend across steps; `None` for a limit means no limit on that axis."""

    def __init__(self, max_usd: float | None = None, max_tokens: int | None = None) -> None:
        if max_usd is not None and max_usd < 0:
            raise ConfigError(f"max_usd must be >= 0, got {max_usd}")
        if max_tokens is not None and max_tokens < 0:
            raise ConfigError(f"max_tokens must be >= 0, got {max_tokens}")
        self.max_usd = max_usd
        self.max_tokens = max_tokens
        self._spent = Usage()
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> Budget:
        return cls(max_usd=settings.budget_usd, max_tokens=settings.budget_tokens)

    @property
    def spent(self) -> Usage:
        with self._lock:
            return self._spent.model_copy()

    def charge(self, usage: Usage) -> None:
        with self._lock:
            self._spent = self._spent + usage

    def check(self, step: str) -> None:
        """Raise `BudgetExceeded` if a limit is already reached; call before each API call."""
        spent = self.spent
        over: list[str] = []
        if self.max_usd is not None and spent.cost_usd >= self.max_usd:
            over.append(f"${spent.cost_usd:.4f} spent of a ${self.max_usd:.4f} limit")
        if self.max_tokens is not None and _tokens(spent) >= self.max_tokens:
            over.append(f"{_tokens(spent):,} tokens spent of a {self.max_tokens:,} token limit")
        if over:
            raise BudgetExceeded(
                f"budget exhausted, step {step!r} stopped before its next API call: "
                f"{'; '.join(over)} (over {spent.calls} calls this run)",
                step=step,
            )

    def __repr__(self) -> str:
        return f"Budget(max_usd={self.max_usd}, max_tokens={self.max_tokens}, spent={self.spent!r})"
