"""One provider's requests, whichever SDK sends them: bounded in flight, paced by the provider's
limits, retried on what is transient, and every failure turned into an EngineError that names
the step and never the key.

Both engines' SDKs (anthropic, openai) are generated from one template and raise the same error
family: `APIStatusError` (with the HTTP response), `RateLimitError`, `APITimeoutError`,
`APIConnectionError`. So one layer serves both (docs/decisions.md, "one owner per failure kind"):

- Retries (408/409/429/5xx, the server's `x-should-retry`, timeouts, connection errors) by
  tenacity around the SDK call, with the SDK's own retries off; each wait is the server's
  `retry-after-ms` / `retry-after` when it sent one, else the SDK's backoff, always capped at
  `max_retry_wait`. `RetriesExhausted` after them fails the step; nothing retries on top.
- A 429 pauses every request of the process for its retry-after (llm/ratelimit.py); the
  provider's requests and tokens per minute are paced on our side when set.
- At most `concurrency` requests in flight in this process (a semaphore).
- The key: the SDK's message quotes the response body, and a proxy may echo the key there, so
  every text that reaches an error is scrubbed, and an exception that carried the key is kept
  out of the chain (and so out of tracebacks).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

import tenacity

from anima_pipeline.llm.contract import Usage
from anima_pipeline.llm.failures import EngineConfigError, EngineError, RequestRejected, RetriesExhausted
from anima_pipeline.llm.ratelimit import RateLimiter


def check_bounds(timeout: float, max_retries: int, max_retry_wait: float) -> None:
    """An engine's request bounds, refused at construction rather than at the first request."""
    if not 0 <= max_retries <= 10:
        raise EngineConfigError(f"max_retries must be between 0 and 10, got {max_retries}")
    if max_retry_wait < 0:
        raise EngineConfigError(f"max_retry_wait must be >= 0 seconds, got {max_retry_wait}")
    if timeout <= 0:
        raise EngineConfigError(f"timeout must be > 0 seconds, got {timeout}")


def retry_after(err: BaseException) -> float | None:
    """The server's `retry-after-ms` / `retry-after` (seconds) if it sent one."""
    response = getattr(err, "response", None)
    if response is None:
        return None
    headers = response.headers
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        raw = headers.get(name)
        if raw:
            try:
                return max(float(raw) / scale, 0.0)
            except ValueError:
                continue  # an HTTP date: fall back to our own backoff
    return None


def status_retryable(err: Any) -> bool:
    """An API status error worth another attempt: the SDKs' own rule, so we can say "retries
    exhausted" when it keeps failing."""
    hint = err.response.headers.get("x-should-retry")
    if hint in ("true", "false"):
        return hint == "true"
    return err.status_code in (408, 409, 429) or err.status_code >= 500


class ApiCalls:
    """The requests of one engine to one provider (`api` is its SDK module, `base_error` the
    root of its errors; `provider` names it in errors: "Anthropic API", "OpenAI-compatible API")."""

    def __init__(
        self,
        api: ModuleType,
        *,
        base_error: type[Exception],
        provider: str,
        secret: str,
        timeout: float,
        max_retries: int,
        max_retry_wait: float,
        concurrency: int,
        limiter: RateLimiter,
    ) -> None:
        self.api = api
        self.base_error = base_error
        self.provider = provider
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait
        self.limiter = limiter
        self._secret = secret
        self._slots = threading.BoundedSemaphore(concurrency)

    def retryable(self, err: BaseException) -> bool:
        if isinstance(err, self.api.APIStatusError):
            return status_retryable(err)
        return isinstance(err, self.api.APITimeoutError | self.api.APIConnectionError)

    def wait(self, state: tenacity.RetryCallState) -> float:
        err = state.outcome.exception() if state.outcome else None
        asked = retry_after(err) if err is not None else None
        if asked is None:
            # the SDKs' backoff: 0.5 s doubling to 8 s, minus up to a quarter of jitter
            asked = min(0.5 * 2 ** (state.attempt_number - 1), 8.0) * (1 - 0.25 * random.random())
        return min(asked, self.max_retry_wait)

    def _retrying(self) -> tenacity.Retrying:
        return tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.max_retries + 1),
            wait=self.wait,
            retry=tenacity.retry_if_exception(self.retryable),
            reraise=True,
        )

    def call(self, step: str, fn: Callable[..., Any], **params: Any) -> Any:
        """`fn(**params)` retried, in a slot, not paced (a free endpoint: token counting)."""
        try:
            with self._slots:
                return self._retrying()(fn, **params)
        except self.base_error as err:
            raise self.translate(step, err) from (None if self._leaks(err) else err)

    def send(
        self,
        step: str,
        model: str,
        fn: Callable[..., Any],
        params: dict[str, Any],
        usage: Callable[[Any], Usage],
        translate: Callable[[str, Any], EngineError] | None = None,
    ) -> Any:
        """One request `fn(**params)` to `model`: in a slot, each attempt paced by the provider's
        limits (`usage` reads what an answer spent, for the token buckets), retried; a failure
        raised as `translate(step, err)` (default: `translate`)."""
        try:
            with self._slots:
                return self._retrying()(self._attempt, model, fn, params, usage)
        except self.base_error as err:
            raise (translate or self.translate)(step, err) from (None if self._leaks(err) else err)

    def _attempt(
        self, model: str, fn: Callable[..., Any], params: dict[str, Any], usage: Callable[[Any], Usage]
    ) -> Any:
        self.limiter.acquire(model)  # also waits out a 429's pause when no limit is set
        try:
            response = fn(**params)
        except self.api.RateLimitError as err:
            self.limiter.pause(min(retry_after(err) or 1.0, self.max_retry_wait))
            raise
        if self.limiter.active:
            self.limiter.record(model, usage(response))
        return response

    def _leaks(self, err: BaseException) -> bool:
        return bool(self._secret) and self._secret in str(err)

    def translate(self, step: str, err: Any) -> EngineError:
        """An SDK error (after our retries) as an EngineError naming the step and the provider."""
        attempts = f"{self.max_retries + 1} attempt(s) (max_retries={self.max_retries})"
        api, provider = self.api, self.provider
        if isinstance(err, api.APIStatusError):
            status = err.status_code
            detail = self.scrub(f"HTTP {status} {err.type or 'error'}: {api_message(err)}".strip())
            if status_retryable(err):
                msg = f"step {step!r}: {provider} still failing after {attempts}: {detail}"
                return RetriesExhausted(msg, step=step, status=status)
            return RequestRejected(
                f"step {step!r}: {provider} rejected the request: {detail}", step=step, status=status
            )
        if isinstance(err, api.APITimeoutError):
            msg = f"step {step!r}: {provider} timed out ({self.timeout}s per attempt) on all {attempts}"
            return RetriesExhausted(msg, step=step)
        if isinstance(err, api.APIConnectionError):
            msg = f"step {step!r}: could not reach the {provider} in {attempts}: {self.scrub(str(err))}"
            return RetriesExhausted(msg, step=step)
        return EngineError(
            f"step {step!r}: {provider} SDK error {type(err).__name__}: {self.scrub(str(err))}", step=step
        )

    def scrub(self, text: str) -> str:
        # Server text is not ours to trust; never let it echo the key into an error.
        return text.replace(self._secret, "[redacted]") if self._secret else text


def api_message(err: Any) -> str:
    """The error's own message: the Anthropic SDK parses it (`api_message`); the OpenAI SDK
    keeps the body's `error` object (`body["message"]`)."""
    said = getattr(err, "api_message", None)
    if said is None and isinstance(err.body, dict):
        said = err.body.get("message")
    return str(said or "")
