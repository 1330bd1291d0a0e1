"""The offline engine: runs a step's heuristic plan instead of asking a model.

This is an honest heuristic baseline (each step's plan lives in its folder under
night/steps/), not a simulation of an LLM: it makes exactly the calls the step's
`offline_plan` yields, feeding each result back so a later call can use an id created by an
earlier one (or a batch of calls that need no result of each other, which the runner may
apply together). It is deterministic, needs no network or key, and costs nothing, which makes it
the default engine and the reference the LLM engine is compared against. Calls still go
through the same `ToolRunner`, so validation and audit apply.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, ClassVar
from zoneinfo import ZoneInfo

from anima_pipeline.llm.contract import (
    OfflinePlan,
    StepRequest,
    TextBlock,
    TokenCounter,
    ToolBatch,
    ToolRunner,
    Usage,
    call_all,
)
from anima_pipeline.llm.failures import EngineConfigError
from anima_pipeline.llm.offline_summary import ExtractiveSummarizer

if TYPE_CHECKING:
    from anima_pipeline.config import Settings
    from anima_pipeline.llm.budget import Budget


class OfflineEngine:
    name: ClassVar[str] = "offline"
    pool: ClassVar[str | None] = None  # nothing is sent: no provider to share
    priced: ClassVar[bool] = False
    # the plans run on the CPU: a busy day's animas in worker processes (night/pool.py)
    worker_processes: ClassVar[bool] = True
    budget: Budget | None = None
    model: str | None = None

    @classmethod
    def from_settings(cls, settings: Settings, budget: Budget | None = None) -> OfflineEngine:
        return cls()  # nothing to configure, nothing to spend

    @classmethod
    def default_workers(cls, settings: Settings) -> int:
        return os.cpu_count() or 1  # the plans are CPU work: one anima per core

    def run(self, request: StepRequest, runner: ToolRunner, offline_plan: OfflinePlan) -> Usage:
        gen = offline_plan()
        try:
            call = next(gen)
            while True:
                if isinstance(call, ToolBatch):
                    call = gen.send(call_all(runner, call.calls))
                else:
                    call = gen.send(runner.call(call.name, call.input))
        except StopIteration:
            pass
        finally:
            # A runner error leaves the plan suspended; close it so its cleanup runs now.
            gen.close()
        return Usage()

    def model_for(self, step: str) -> str | None:
        return None

    def complete(
        self,
        step: str,
        system: str | list[TextBlock],
        prompt: str | list[TextBlock],
        *,
        max_tokens: int = 1024,
    ) -> tuple[str, Usage]:
        raise EngineConfigError(
            f"step {step!r} asks for a free-text answer, which needs a model; the offline engine plans "
            "tool calls only (set ANIMA_ENGINE=anthropic)",
            step=step,
        )

    def summarizer(self, identity: Callable[[], str], tz: ZoneInfo) -> ExtractiveSummarizer:
        return ExtractiveSummarizer(tz)  # what was said, not who the anima is: `identity` unread

    def token_counter(self) -> TokenCounter | None:
        return None  # the working context's ratio estimate is the count

    def batch_member(self) -> AbstractContextManager[None]:
        return contextlib.nullcontext()

    def close(self) -> None:
        pass

    def __repr__(self) -> str:
        return "OfflineEngine()"
