"""The contract between a step, its engine and the tool executor.

A step builds a `StepRequest` (what an LLM would read) and an offline plan (what the
heuristic baseline would do); the engine turns either into tool calls, and every call
goes through the same `ToolRunner` (the executor), so validation, scope and audit do not
depend on which engine planned the call.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable
from zoneinfo import ZoneInfo

from pydantic import BaseModel, Field

if TYPE_CHECKING:
    # annotations only: the budget imports this module, the settings and the store reach it
    # through the settings' price and rate checks, so importing them here would close a circle
    from anima_pipeline.config import Settings
    from anima_pipeline.llm.budget import Budget
    from anima_pipeline.store.session_rows import Turn


class TextBlock(BaseModel):
    """One text block of a system prompt or user message.

    `cache=True` puts a prompt-cache breakpoint (cache_control ephemeral) after this block.
    """

    text: str
    cache: bool = False


class ToolSpec(BaseModel):
    """A tool as the Messages API wants it."""

    name: str
    description: str
    input_schema: dict[str, Any]


class StepRequest(BaseModel):
    """What one LLM call sequence of a step sees: system blocks, one user turn made of
    several text blocks (message 1, the day or the store; 1.5, the night's changes so far; 2,
    what the step compares with; 3, the round's task), and the tool whitelist."""

    step: str
    system: list[TextBlock]
    user: list[TextBlock]
    tools: list[ToolSpec]
    max_turns: int = 8
    # None: the engine's configured limit for this step (Settings.step_limits).
    max_tokens: int | None = None
    # The step exists to write (a summary, the dream entry, 3b): a text-only answer gets one
    # reminder; a text-only answer after it is the model's restraint, recorded as declined
    # (`DeclineRecorder`), and the step decides what the product still needs (night/frame.py).
    must_write: bool = False
    # Cache breakpoints on the growing tool conversation (the last two user turns), so each
    # turn reads the previous one from the cache.
    cache_turns: bool = True
    # The model makes all its calls in one answer (the night's steps: each call writes on ids
    # its input shows, and what comes back is only a confirmation): a tool turn whose calls all
    # succeed ends the conversation, with no request more that would re-send the whole prompt
    # for a "done"; a failed call gets its results back and another turn (llm/tool_loop.py,
    # docs/cost.md). Such a conversation leaves off the turn breakpoints: the turn after a
    # failed call is most often its last, and a cache write no request reads costs 1.25 times
    # the input.
    one_answer: bool = False

    @property
    def turn_breakpoints(self) -> bool:
        """Whether the engine puts cache breakpoints on the tool conversation's turns."""
        return self.cache_turns and not self.one_answer


class ToolCall(BaseModel):
    name: str
    input: dict[str, Any] = Field(default_factory=dict)
    id: str | None = None


class ToolResult(BaseModel):
    """What the model gets back for one call. `data` carries structured results
    (for example {"id": "f-12"}) that offline plans read."""

    content: str
    is_error: bool = False
    data: dict[str, Any] = Field(default_factory=dict)


class ToolBatch(BaseModel):
    """Calls that do not read each other's results, in order: a runner may apply them together
    (one round trip for a run of creations, `ToolExecutor.call_many`) with the same outcome,
    call by call, as applying them one at a time."""

    calls: list[ToolCall]


class ToolRunner(Protocol):
    def call(self, name: str, input: dict[str, Any]) -> ToolResult: ...


@runtime_checkable
class BatchRunner(Protocol):
    """A runner that applies a `ToolBatch` at once."""

    def call_many(self, calls: Sequence[ToolCall]) -> list[ToolResult]: ...


def call_all(runner: ToolRunner, calls: Sequence[ToolCall]) -> list[ToolResult]:
    """Each call's result, in order: together where the runner can, else one at a time."""
    if isinstance(runner, BatchRunner):
        return runner.call_many(calls)
    return [runner.call(c.name, c.input) for c in calls]


@runtime_checkable
class DeclineRecorder(Protocol):
    """A runner that records the model's restraint: a step's conversation that ended with text
    only and no successful write ("nothing worth recording"), with the model's words."""

    def declined(self, said: str) -> None: ...


# An offline plan is a generator: it yields tool calls and receives each call's result,
# so a later call can use an id created by an earlier one; or it yields a `ToolBatch` of
# calls that need no result of each other and receives their results, a list in order.
OfflinePlan = Callable[[], Generator[ToolCall | ToolBatch, Any, None]]


class Usage(BaseModel):
    """Token and cost accounting; adds up across calls, steps and runs."""

    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float = 0.0
    # One pass of the input: the full prompt of each conversation's first call (cached or
    # not), so a step's billed-equivalent input can be compared with reading it once.
    one_pass_tokens: int = 0
    batched_calls: int = 0

    @property
    def billed_equiv_tokens(self) -> float:
        """Input as billed, in plain-input tokens: cache writes at 1.25x, reads at 0.1x."""
        return self.input_tokens + 1.25 * self.cache_write_tokens + 0.1 * self.cache_read_tokens

    @property
    def billed_equiv_ratio(self) -> float:
        return round(self.billed_equiv_tokens / self.one_pass_tokens, 3) if self.one_pass_tokens else 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            one_pass_tokens=self.one_pass_tokens + other.one_pass_tokens,
            batched_calls=self.batched_calls + other.batched_calls,
            calls=self.calls + other.calls,
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
            cost_usd=round(self.cost_usd + other.cost_usd, 6),
        )


class Summarizer(Protocol):
    """The rolling summary of a session (recall/session_view.py): the summary so far extended
    with the turns that leave the view, thinned until `fits` says it does. `name` is stored
    with each summary and flush (sql/0013)."""

    name: str

    def extend(self, previous: str, turns: Sequence[Turn], fits: Callable[[str], bool]) -> str: ...


class TokenCounter(Protocol):
    """Tokens of a text as a model reads them. `name` is the working context's `counter`."""

    name: str

    def count(self, text: str) -> int: ...


class Engine(Protocol):
    """What every caller needs of an engine, so that none asks which engine it has.

    It plans a step's tool calls and feeds them through the runner: the Anthropic engine
    sends `request` to the Messages API and loops over tool_use blocks; the offline engine
    ignores `request` and drives `offline_plan`. `run` returns the usage of this step (zero
    tokens for the offline engine).

    The class variables describe the engine before one is built (the Dagster definitions and
    the night's pool read them from the class llm/factory.py maps ANIMA_ENGINE to).
    """

    name: ClassVar[str]  # ANIMA_ENGINE's value; recorded in run tags and reports
    # The Dagster concurrency pool the nights calling this engine share (`dagster instance
    # concurrency set <pool> N`, docs/deploy.md "Throughput"); None: no pool, nothing to share.
    pool: ClassVar[str | None]
    # Its calls cost money: the steps' materializations carry tokens and cost, and a run whose
    # estimate is over the budget is refused before anything is sent (docs/cost.md).
    priced: ClassVar[bool]
    # It plans on this machine's CPU: a busy day's animas run in worker processes; an engine
    # that waits on the network runs them in threads of the run's process.
    worker_processes: ClassVar[bool]

    @classmethod
    def from_settings(cls, settings: Settings, budget: Budget | None = None) -> Engine:
        """The engine of `settings`; `budget` shared by the run (None: one from the settings)."""
        ...

    @classmethod
    def default_workers(cls, settings: Settings) -> int:
        """How many animas a night runs at once when ANIMA_WORKERS is unset."""
        ...

    @property
    def budget(self) -> Budget | None:
        """The run's spending limit, None when nothing costs."""
        ...

    @property
    def model(self) -> str | None:
        """The main model, None for an engine without one (no free-text answers)."""
        ...

    def run(self, request: StepRequest, runner: ToolRunner, offline_plan: OfflinePlan) -> Usage: ...

    def model_for(self, step: str) -> str | None:
        """The model `step` runs on (prompt caches are per model: night/prefix.py); None
        without models."""
        ...

    def complete(
        self,
        step: str,
        system: str | list[TextBlock],
        prompt: str | list[TextBlock],
        *,
        max_tokens: int = 1024,
    ) -> tuple[str, Usage]:
        """One plain text answer (no tools); an engine without a model refuses."""
        ...

    def summarizer(self, identity: Callable[[], str], tz: ZoneInfo) -> Summarizer:
        """The session summarizer (recall/session_view.py). `identity` gives the anima's identity
        context; an engine whose summary does not read it never calls it."""
        ...

    def token_counter(self) -> TokenCounter | None:
        """The engine's own count of a text's tokens, None when the ratio estimate is all
        there is (recall/tokens.py)."""
        ...

    def batch_member(self) -> AbstractContextManager[None]:
        """Counts the calling thread as one of the night's animas while it runs (batch mode
        sends a batch as soon as every member waits: llm/anthropic/batches.py)."""
        ...

    def close(self) -> None: ...
