"""The contract between a step, its engine and the tool executor.

A step builds a `StepRequest` (what an LLM would read) and an offline plan (what the
heuristic baseline would do); the engine turns either into tool calls, and every call
goes through the same `ToolRunner` (the executor), so validation, scope and audit do not
depend on which engine planned the call.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field


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
    several text blocks (message 1, 1.5, 2, 3 of the seeds), and the tool whitelist."""

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


class ToolRunner(Protocol):
    def call(self, name: str, input: dict[str, Any]) -> ToolResult: ...


@runtime_checkable
class DeclineRecorder(Protocol):
    """A runner that records the model's restraint: a step's conversation that ended with text
    only and no successful write ("nothing worth recording"), with the model's words."""

    def declined(self, said: str) -> None: ...


# An offline plan is a generator: it yields tool calls and receives each call's result,
# so a later call can use an id created by an earlier one.
OfflinePlan = Callable[[], Generator[ToolCall, ToolResult, None]]


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


class Engine(Protocol):
    """Plans a step's tool calls and feeds them through the runner.

    The Anthropic engine sends `request` to the Messages API and loops over tool_use
    blocks; the offline engine ignores `request` and drives `offline_plan`.
    Returns the usage of this step (zero tokens for the offline engine).
    """

    name: str

    def run(self, request: StepRequest, runner: ToolRunner, offline_plan: OfflinePlan) -> Usage: ...
