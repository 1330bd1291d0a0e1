"""The LLM engine: runs a step as a tool-use conversation with the Anthropic Messages API.

One step is one conversation: the step's system and user blocks go out with its tool
whitelist, every `tool_use` block that comes back is executed through the same
`ToolRunner` the offline engine uses, and the results go back as one user turn of
`tool_result` blocks until the model ends its turn. Three bounds keep a night's run
finite: the SDK's retries (429/529/5xx/timeouts, exponential backoff, `retry-after`
honoured up to `max_retry_wait`), `max_turns` per step, and the run's `Budget`, checked
before every call.

The API key stays a `SecretStr` on the engine and is never logged, put in an error
message or shown in a repr; request headers are never logged.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import anthropic
from pydantic import SecretStr

from anima_pipeline.llm.budget import Budget
from anima_pipeline.llm.errors import (
    EngineConfigError,
    EngineError,
    MaxTurnsExceeded,
    RequestRejected,
    RetriesExhausted,
)
from anima_pipeline.llm.pricing import cost_usd, price_for
from anima_pipeline.llm.types import OfflinePlan, StepRequest, TextBlock, ToolRunner, Usage

log = logging.getLogger(__name__)

MAX_CACHE_BREAKPOINTS = 4  # the API rejects a request with more cache_control blocks
_EPHEMERAL = {"type": "ephemeral"}


class _Client(anthropic.Anthropic):
    """The SDK client with a ceiling on each retry's wait.

    SDK 2.x honours any `retry-after` (up to ~49 days; older SDKs ignored values over
    60 s), so one header could stall a night's run for hours. Waiting less than asked
    may earn another 429, which only spends a retry: the step then fails clearly.
    """

    max_retry_wait: float = 60.0

    def _calculate_retry_timeout(self, *args: Any, **kwargs: Any) -> float:
        return min(super()._calculate_retry_timeout(*args, **kwargs), self.max_retry_wait)


def _is_retryable(err: anthropic.APIStatusError) -> bool:
    # The SDK's own rule (it already retried these), so we can say "retries exhausted".
    hint = err.response.headers.get("x-should-retry")
    if hint in ("true", "false"):
        return hint == "true"
    return err.status_code in (408, 409, 429) or err.status_code >= 500


def _text_blocks(blocks: list[TextBlock], cached: set[int], offset: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, b in enumerate(blocks):
        block: dict[str, Any] = {"type": "text", "text": b.text}
        if offset + i in cached:
            block["cache_control"] = _EPHEMERAL
        out.append(block)
    return out


def _prompt(request: StepRequest) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """System and user blocks with cache breakpoints where the step asked for them."""
    flagged = [i for i, b in enumerate([*request.system, *request.user]) if b.cache]
    if len(flagged) > MAX_CACHE_BREAKPOINTS:
        # The last breakpoint fixes the longest cached prefix; earlier ones only add
        # shorter fallbacks, so dropping the first ones costs least.
        log.warning(
            "step %s asks for %d cache breakpoints; the API allows %d, keeping the last ones",
            request.step,
            len(flagged),
            MAX_CACHE_BREAKPOINTS,
        )
        flagged = flagged[-MAX_CACHE_BREAKPOINTS:]
    cached = set(flagged)
    return _text_blocks(request.system, cached, 0), _text_blocks(request.user, cached, len(request.system))


def _echo(block: Any) -> dict[str, Any]:
    """An assistant content block as it must be sent back in the history."""
    if block.type == "text":
        return {"type": "text", "text": block.text}
    if block.type == "tool_use":
        # A non-object input cannot be sent back (the API would answer 400); the model
        # learns what went wrong from the error tool_result instead.
        data = block.input if isinstance(block.input, dict) else {}
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": data}
    return block.to_dict(mode="json", exclude_none=True)  # e.g. thinking blocks, verbatim


class AnthropicEngine:
    name = "anthropic"

    def __init__(
        self,
        model: str,
        api_key: SecretStr,
        base_url: str | None = None,
        budget: Budget | None = None,
        timeout: float = 120,
        max_retries: int = 4,
        max_retry_wait: float = 60.0,
    ) -> None:
        price_for(model)  # an unpriced model would make the budget meaningless: fail now
        if not 0 <= max_retries <= 10:
            raise ValueError(f"max_retries must be between 0 and 10, got {max_retries}")
        if max_retry_wait < 0:
            raise ValueError(f"max_retry_wait must be >= 0 seconds, got {max_retry_wait}")
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0 seconds, got {timeout}")
        key = api_key.get_secret_value()
        if not key.strip():
            raise EngineConfigError("the Anthropic API key is empty (set ANTHROPIC_API_KEY)")
        self.model = model
        self.base_url = base_url
        self.budget = budget
        self.timeout = timeout
        self.max_retries = max_retries
        self._api_key = api_key
        self._client = _Client(
            api_key=key,
            base_url=base_url,
            max_retries=max_retries,
            timeout=timeout,
            # SDK 2.x sends `api_key` as `Authorization: Bearer`; the Messages API
            # documents `x-api-key` for API keys, so send it there and only there.
            default_headers={"x-api-key": key, "Authorization": anthropic.omit},
        )
        self._client.max_retry_wait = max_retry_wait

    def __repr__(self) -> str:
        return (
            f"AnthropicEngine(model={self.model!r}, base_url={self.base_url!r}, timeout={self.timeout}, "
            f"max_retries={self.max_retries}, budget={self.budget!r})"
        )

    def close(self) -> None:
        self._client.close()

    def run(self, request: StepRequest, runner: ToolRunner, offline_plan: OfflinePlan) -> Usage:
        total = Usage()
        try:
            for usage in self._conversation(request, runner):
                total = total + usage
            return total
        except EngineError as err:
            err.step = err.step or request.step
            err.usage = total
            raise

    def _conversation(self, request: StepRequest, runner: ToolRunner) -> Iterator[Usage]:
        """Yields each call's usage as it is spent, so `run` still knows the total if a
        later call fails."""
        step = request.step
        if not request.user:
            raise EngineError(f"step {step!r} has no user blocks to send", step=step)
        system, user = _prompt(request)
        messages: list[dict[str, Any]] = [{"role": "user", "content": user}]
        params: dict[str, Any] = {"model": self.model, "max_tokens": request.max_tokens, "messages": messages}
        if system:
            params["system"] = system
        if request.tools:
            params["tools"] = [t.model_dump() for t in request.tools]

        for turn in range(1, request.max_turns + 1):
            if self.budget is not None:
                self.budget.check(step)
            response = self._create(step, params)
            usage = self._usage(response)
            if self.budget is not None:
                self.budget.charge(usage)
            yield usage
            calls = [b for b in response.content if b.type == "tool_use"]
            log.info(
                "step %s turn %d: stop=%s tool_calls=%d in=%d out=%d cache_read=%d cache_write=%d $%.6f",
                step,
                turn,
                response.stop_reason,
                len(calls),
                usage.input_tokens,
                usage.output_tokens,
                usage.cache_read_tokens,
                usage.cache_write_tokens,
                usage.cost_usd,
            )
            if response.stop_reason == "end_turn" or not calls:
                if response.stop_reason not in ("end_turn", "tool_use"):
                    log.warning("step %s ended with stop_reason=%s", step, response.stop_reason)
                if calls:
                    log.warning("step %s: end_turn with %d tool_use block(s); not executed", step, len(calls))
                return
            if turn == request.max_turns:
                raise MaxTurnsExceeded(
                    f"step {step!r} hit its bound of max_turns={request.max_turns} API calls while the model "
                    f"was still calling tools; the last {len(calls)} tool call(s) were not executed",
                    step=step,
                )
            messages.append({"role": "assistant", "content": [_echo(b) for b in response.content]})
            messages.append({"role": "user", "content": [self._execute(step, b, runner) for b in calls]})

    def _execute(self, step: str, block: Any, runner: ToolRunner) -> dict[str, Any]:
        if not isinstance(block.input, dict):
            log.warning(
                "step %s: tool_use %s for %s has a non-object input; answered with an error",
                step,
                block.id,
                block.name,
            )
            content = (
                f"Error: the input for tool {block.name!r} was not a JSON object "
                f"(got {type(block.input).__name__}). Call the tool again with a JSON object."
            )
            return {"type": "tool_result", "tool_use_id": block.id, "content": content, "is_error": True}
        result = runner.call(block.name, block.input)
        log.debug("step %s: tool %s -> is_error=%s", step, block.name, result.is_error)
        return {
            "type": "tool_result",
            "tool_use_id": block.id,
            "content": result.content or "(no output)",  # the API rejects an empty error result
            "is_error": result.is_error,
        }

    def _create(self, step: str, params: dict[str, Any]) -> Any:
        try:
            return self._client.messages.create(**params)
        except anthropic.AnthropicError as err:
            # The SDK's own message quotes the response body; if a proxy echoed the key
            # there, keep that exception out of the chain (and so out of tracebacks).
            leaked = self._api_key.get_secret_value() in str(err)
            raise self._translate(step, err) from (None if leaked else err)

    def _translate(self, step: str, err: anthropic.AnthropicError) -> EngineError:
        """An SDK error (raised after the SDK's own retries) as an EngineError naming the step."""
        attempts = f"{self.max_retries + 1} attempt(s) (max_retries={self.max_retries})"
        if isinstance(err, anthropic.APIStatusError):
            status = err.status_code
            detail = self._scrub(f"HTTP {status} {err.type or 'error'}: {err.api_message or ''}".strip())
            if _is_retryable(err):
                msg = f"step {step!r}: Anthropic API still failing after {attempts}: {detail}"
                return RetriesExhausted(msg, step=step, status=status)
            msg = f"step {step!r}: Anthropic API rejected the request: {detail}"
            return RequestRejected(msg, step=step, status=status)
        if isinstance(err, anthropic.APITimeoutError):
            msg = f"step {step!r}: Anthropic API timed out ({self.timeout}s per attempt) on all {attempts}"
            return RetriesExhausted(msg, step=step)
        if isinstance(err, anthropic.APIConnectionError):
            msg = f"step {step!r}: could not reach the Anthropic API in {attempts}: {self._scrub(str(err))}"
            return RetriesExhausted(msg, step=step)
        return EngineError(
            f"step {step!r}: Anthropic SDK error {type(err).__name__}: {self._scrub(str(err))}", step=step
        )

    def _usage(self, response: Any) -> Usage:
        u = response.usage
        inp, out = u.input_tokens or 0, u.output_tokens or 0
        read, write = u.cache_read_input_tokens or 0, u.cache_creation_input_tokens or 0
        return Usage(
            calls=1,
            input_tokens=inp,
            output_tokens=out,
            cache_read_tokens=read,
            cache_write_tokens=write,
            cost_usd=cost_usd(self.model, inp, out, read, write),
        )

    def _scrub(self, text: str) -> str:
        # Server text is not ours to trust; never let it echo the key into an error.
        return text.replace(self._api_key.get_secret_value(), "[redacted]")
