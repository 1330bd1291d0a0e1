"""Errors an engine raises when a step cannot complete.

They all derive from `EngineError` so a step (or the Dagster op around it) can catch one
type and fail cleanly. Messages name the step and the bound that was hit; they never
carry the API key, request headers or request bodies. `usage` holds what the step had
already spent when it failed, so a failed step still reports its cost.
"""

from __future__ import annotations

from anima_pipeline.core.errors import AnimaError
from anima_pipeline.llm.contract import Usage


class EngineError(AnimaError, RuntimeError):
    """A step's engine could not finish the step: the engine area of anima_pipeline.core.errors."""

    code = "engine_error"
    http_status = 502

    def __init__(self, message: str, *, step: str | None = None, usage: Usage | None = None) -> None:
        super().__init__(message)
        self.step = step
        self.usage = usage if usage is not None else Usage()


class EngineConfigError(EngineError):
    """The engine cannot be built from the settings (e.g. a missing API key)."""


class UnknownModelError(EngineError, ValueError):
    """The model has no entry in the price table, so its cost cannot be accounted."""


class BudgetExceeded(EngineError):
    """The run's budget is spent; the step stopped before its next API call."""


class ApiStatusError(EngineError):
    """An error the API answered with: `status` is its HTTP status (None for a timeout)."""

    def __init__(
        self, message: str, *, step: str | None = None, status: int | None = None, usage: Usage | None = None
    ) -> None:
        super().__init__(message, step=step, usage=usage)
        self.status = status


class RetriesExhausted(ApiStatusError):
    """The API kept failing with a retryable error (429/529/5xx/timeout) after all retries."""


class RequestRejected(ApiStatusError):
    """The API refused the request with a non-retryable status (400/401/403/404/413...)."""


class ModelAnswerError(EngineError):
    """What the model answered for this input (a refusal, a cut answer, a conversation that
    would not end, a prompt too large for it): deterministic, so a re-run fails the same way.
    A step records it as declined instead of failing the night (night/frame.py)."""


class MaxTurnsExceeded(ModelAnswerError):
    """The model was still calling tools when the step's `max_turns` bound was reached."""


class OutputTruncated(ModelAnswerError):
    """The answer stopped on `max_tokens` even after one retry with a larger limit; a cut
    tool call is never executed. Deterministic for this input: not worth a blind retry."""


class Refused(ModelAnswerError):
    """The model declined (stop_reason `refusal`); nothing of that answer was executed."""


class ContextTooLarge(ModelAnswerError):
    """The request did not fit the model's context window."""


class MalformedToolInput(ModelAnswerError):
    """The model's tool input was not a JSON object, again after the error result that asked
    for one: its one retry is spent (llm/tool_loop.py)."""
