"""The LLM engine: runs a step as a tool-use conversation with the Anthropic Messages API.

One step is one conversation: the step's system and user blocks go out with its tool
whitelist, every `tool_use` block that comes back is executed through the same
`ToolRunner` the offline engine uses, and the results go back as one user turn of
`tool_result` blocks until the model ends its turn.

Stop reasons, as the Messages API documents them:
- `tool_use`: execute the calls, send the results, next turn.
- `end_turn` / `stop_sequence`: done; a step that must write (`StepRequest.must_write`) and
  has not written gets one reminder. A conversation that ends without a successful write is
  the model's restraint ("nothing worth recording"): the runner records it as declined with
  the model's words (`DeclineRecorder`); it is not an error (docs/ordering.md, "Restraint").
- `max_tokens`: the answer was cut. Nothing of it is executed (a cut tool call could carry
  half its input); the same turn is asked again once with a larger limit, then the step
  fails with `OutputTruncated`.
- `refusal`: fails with `Refused`; nothing of that answer is executed.
- `pause_turn`: the assistant content goes back as is and the turn continues.
- `model_context_window_exceeded`: fails with `ContextTooLarge`.
All these failures are deterministic for the input, so `is_transient` (night/failure_kinds.py) says no and
Dagster does not retry them. The API's transient failures are retried here and only here
(tenacity below); `RetriesExhausted` after them fails the step, and the night is not retried
on top (one owner per failure kind: docs/decisions.md).

Bounds: retries (429/529/5xx/timeouts) by tenacity around the SDK call with the SDK's own
retries off, each wait the server's `retry-after` (capped at `max_retry_wait`), a 429's
pausing every request of the process (llm/ratelimit.py); the provider's requests and tokens
per minute, paced on our side when set; `max_turns` per step; the run's `Budget`, checked
before every call; and an in-process semaphore (`concurrency`) on requests in flight. In
batch mode each turn is submitted to a `BatchCollector` that sends the turns of all animas of
a night as one Message Batch.

Prompt caching: the step marks its stable blocks (`TextBlock.cache`: the system prompt,
message 1); the engine adds breakpoints at the end of the last two user turns of the tool
conversation so each turn reads the previous one from the cache (at most 4 in all).

The API key stays a `SecretStr` on the engine and is never logged, put in an error
message or shown in a repr; request headers are never logged.

The SDK is imported when the first engine is built, not with this module (llm/anthropic/sdk.py).
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, ClassVar
from zoneinfo import ZoneInfo

import tenacity
from pydantic import SecretStr

from anima_pipeline.config import Settings
from anima_pipeline.llm.anthropic.batches import BatchCollector
from anima_pipeline.llm.anthropic.counting import ClaudeCounter
from anima_pipeline.llm.anthropic.sdk import sdk
from anima_pipeline.llm.anthropic.summary import ClaudeSummarizer
from anima_pipeline.llm.budget import Budget
from anima_pipeline.llm.contract import (
    DeclineRecorder,
    OfflinePlan,
    StepRequest,
    TextBlock,
    ToolRunner,
    Usage,
)
from anima_pipeline.llm.failures import (
    ContextTooLarge,
    EngineConfigError,
    EngineError,
    MaxTurnsExceeded,
    OutputTruncated,
    Refused,
    RequestRejected,
    RetriesExhausted,
)
from anima_pipeline.llm.pricing import cost_usd, price_for
from anima_pipeline.llm.ratelimit import RateLimiter

if TYPE_CHECKING:
    import anthropic

    from anima_pipeline.config import Effort, Thinking

log = logging.getLogger(__name__)

MAX_CACHE_BREAKPOINTS = 4  # the API rejects a request with more cache_control blocks
TURN_BREAKPOINTS = 2  # on the last two user turns of the tool conversation
_EPHEMERAL = {"type": "ephemeral"}
DECLINED_CHARS = 500  # of the model's words kept with a declined step
REMINDER = (
    "This step must record its result with a tool call; a text answer is not stored. "
    "Call the tool now (see the instructions above)."
)


def _is_retryable(err: anthropic.APIStatusError) -> bool:
    # The SDK's own rule, so we can say "retries exhausted".
    hint = err.response.headers.get("x-should-retry")
    if hint in ("true", "false"):
        return hint == "true"
    return err.status_code in (408, 409, 429) or err.status_code >= 500


def _retryable(err: BaseException) -> bool:
    api = sdk()
    if isinstance(err, api.APIStatusError):
        return _is_retryable(err)
    return isinstance(err, api.APITimeoutError | api.APIConnectionError)


def _retry_after(err: BaseException) -> float | None:
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


def _text_blocks(blocks: list[TextBlock], cached: set[int], offset: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i, b in enumerate(blocks):
        block: dict[str, Any] = {"type": "text", "text": b.text}
        if offset + i in cached:
            block["cache_control"] = _EPHEMERAL
        out.append(block)
    return out


def _prompt(request: StepRequest) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """System and user blocks with cache breakpoints where the step asked for them, leaving
    room for the tool conversation's own breakpoints."""
    flagged = [i for i, b in enumerate([*request.system, *request.user]) if b.cache]
    room = MAX_CACHE_BREAKPOINTS - (TURN_BREAKPOINTS if request.cache_turns else 0)
    if len(flagged) > room:
        # The last breakpoint fixes the longest cached prefix; earlier ones only add
        # shorter fallbacks, so dropping the first ones costs least.
        log.warning(
            "step %s asks for %d cache breakpoints; %d are left beside the conversation's, keeping the last ones",
            request.step,
            len(flagged),
            room,
        )
        flagged = flagged[-room:] if room else []
    cached = set(flagged)
    return _text_blocks(request.system, cached, 0), _text_blocks(request.user, cached, len(request.system))


def _with_turn_breakpoints(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of the history with breakpoints on the last block of the last two user turns
    after the first (the first turn's stable blocks carry the step's own breakpoints)."""
    out = [dict(m) for m in messages]
    user_turns = [i for i, m in enumerate(out) if m["role"] == "user"][1:][-TURN_BREAKPOINTS:]
    for i in user_turns:
        content = [dict(b) for b in out[i]["content"]]
        content[-1]["cache_control"] = _EPHEMERAL
        out[i]["content"] = content
    return out


def _echo(block: Any) -> dict[str, Any]:
    """An assistant content block as it must be sent back in the history."""
    if block.type == "text":
        return {"type": "text", "text": block.text}
    if block.type == "tool_use":
        # A non-object input cannot be sent back (the API would answer 400); the model
        # learns what went wrong from the error tool_result instead.
        data = block.input if isinstance(block.input, dict) else {}
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": data}
    return block.to_dict(mode="json", exclude_none=True)  # thinking blocks, verbatim with signature


def _texts(response: Any) -> str:
    return " ".join(b.text for b in response.content if b.type == "text").strip()


class AnthropicEngine:
    name: ClassVar[str] = "anthropic"
    # the nights calling the API share one Dagster pool named after the provider
    pool: ClassVar[str | None] = "anthropic"
    priced: ClassVar[bool] = True
    worker_processes: ClassVar[bool] = False  # it waits on the network: threads suffice

    def __init__(
        self,
        model: str,
        api_key: SecretStr,
        base_url: str | None = None,
        budget: Budget | None = None,
        timeout: float = 120,
        max_retries: int = 4,
        max_retry_wait: float = 60.0,
        *,
        settings: Settings | None = None,
        concurrency: int | None = None,
        collector: BatchCollector | None = None,
        limiter: RateLimiter | None = None,
    ) -> None:
        price_for(model)  # an unpriced model would make the budget meaningless: fail now
        # (the per-step models of the settings were priced when the settings were built)
        if not 0 <= max_retries <= 10:
            raise EngineConfigError(f"max_retries must be between 0 and 10, got {max_retries}")
        if max_retry_wait < 0:
            raise EngineConfigError(f"max_retry_wait must be >= 0 seconds, got {max_retry_wait}")
        if timeout <= 0:
            raise EngineConfigError(f"timeout must be > 0 seconds, got {timeout}")
        key = api_key.get_secret_value()
        if not key.strip():
            raise EngineConfigError("the Anthropic API key is empty (set ANTHROPIC_API_KEY)")
        self.model = model
        self.base_url = base_url
        self.budget = budget
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait
        self.settings = settings or Settings()
        self.collector = collector
        self._slots = threading.BoundedSemaphore(concurrency or self.settings.llm.in_flight)
        s = self.settings
        self.limiter = limiter or RateLimiter(
            s.llm.requests_per_minute,
            s.llm.input_tokens_per_minute,
            s.llm.output_tokens_per_minute,
            shares=s.llm.rate_shares,
        )
        self._api_key = api_key
        self._counter = ClaudeCounter(self)  # one per engine: its cache serves every turn
        api = sdk()
        self._client = api.Anthropic(
            api_key=key,
            base_url=base_url,
            max_retries=0,  # retried by tenacity in _create, with each wait capped
            timeout=timeout,
            # SDK 2.x sends `api_key` as `Authorization: Bearer`; the Messages API
            # documents `x-api-key` for API keys, so send it there and only there.
            default_headers={"x-api-key": key, "Authorization": api.omit},
        )

    @classmethod
    def from_settings(cls, settings: Settings, budget: Budget | None = None) -> AnthropicEngine:
        """Refuses to start without a key rather than failing at the first step. Without an
        explicit `budget`, one from ANIMA_BUDGET_USD / ANIMA_BUDGET_TOKENS (unlimited if
        neither is set)."""
        key = settings.anthropic_api_key
        if key is None or not key.get_secret_value().strip():
            raise EngineConfigError(
                "ANIMA_ENGINE=anthropic needs an Anthropic API key in the ANTHROPIC_API_KEY environment "
                "variable, and it is not set (or empty); set it, or use ANIMA_ENGINE=offline"
            )
        collector = None
        if settings.llm.mode == "batch":
            collector = BatchCollector(
                window_s=settings.llm.batch_window_s,
                poll_s=settings.llm.batch_poll_s,
                max_attempts=settings.llm.max_retries + 1,  # the same retries as a synchronous request
            )
        return cls(
            model=settings.model,
            api_key=key,
            base_url=settings.anthropic_base_url,
            budget=budget if budget is not None else Budget.from_settings(settings),
            timeout=settings.llm.request_timeout_s,
            max_retries=settings.llm.max_retries,
            max_retry_wait=settings.llm.max_retry_wait_s,
            settings=settings,
            collector=collector,
        )

    @classmethod
    def default_workers(cls, settings: Settings) -> int:
        """The animas wait on the network: as many as requests may be in flight
        (ANIMA_LLM_CONCURRENCY, or what the provider's limits allow)."""
        return settings.llm.in_flight

    @property
    def client(self) -> anthropic.Anthropic:
        return self._client

    def __repr__(self) -> str:
        mode = "batch" if self.collector is not None else "sync"
        return (
            f"AnthropicEngine(model={self.model!r}, base_url={self.base_url!r}, timeout={self.timeout}, "
            f"max_retries={self.max_retries}, mode={mode}, budget={self.budget!r})"
        )

    def close(self) -> None:
        self._client.close()

    def summarizer(self, identity: Callable[[], str], tz: ZoneInfo) -> ClaudeSummarizer:
        return ClaudeSummarizer(self, identity(), tz)  # read now: the prefix every cycle caches

    def token_counter(self) -> ClaudeCounter:
        return self._counter

    def batch_member(self) -> AbstractContextManager[None]:
        return self.collector.member() if self.collector is not None else contextlib.nullcontext()

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

    def model_for(self, step: str) -> str:
        """The step's model (ANIMA_LLM_STEP_MODELS, docs/cost.md); "main" is this engine's model.
        Caches are per model: steps meant to share a cached prefix run on the same one."""
        return self.settings.step_model(step, self.model)

    def limits(self, request: StepRequest) -> tuple[int, Thinking, Effort | None]:
        max_tokens, thinking, effort = self.settings.step_limits(request.step)
        return request.max_tokens or max_tokens, thinking, effort

    def _params(self, request: StepRequest, system: list[dict[str, Any]], max_tokens: int) -> dict[str, Any]:
        _, thinking, effort = self.limits(request)
        params: dict[str, Any] = {"model": self.model_for(request.step), "max_tokens": max_tokens}
        if system:
            params["system"] = system
        if request.tools:
            params["tools"] = [t.model_dump() for t in request.tools]
        if thinking == "adaptive":
            params["thinking"] = {"type": "adaptive"}
        elif thinking == "disabled":
            params["thinking"] = {"type": "disabled"}
        if effort is not None:
            params["output_config"] = {"effort": effort}
        return params

    def complete(
        self,
        step: str,
        system: str | list[TextBlock],
        prompt: str | list[TextBlock],
        *,
        max_tokens: int = 1024,
    ) -> tuple[str, Usage]:
        """One plain text answer (no tools): the evaluation's answer and judge calls, the
        session summary. Same retries, budget, batch mode and accounting as a step; a refusal
        or a cut answer raises like in a step. Blocks given as TextBlock keep their cache
        breakpoints."""
        if self.budget is not None:
            self.budget.check(step)
        if isinstance(system, list) or isinstance(prompt, list):
            blocks = StepRequest(
                step=step,
                system=system if isinstance(system, list) else [TextBlock(text=system)],
                user=prompt if isinstance(prompt, list) else [TextBlock(text=prompt)],
                tools=[],
                cache_turns=False,
            )
            system, prompt = _prompt(blocks)  # type: ignore[assignment]
        params: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens,
            "system": system,
            "messages": [{"role": "user", "content": prompt}],
        }
        if self.settings.llm.effort is not None:
            params["output_config"] = {"effort": self.settings.llm.effort}
        response = self._create(step, params)
        usage = self._usage(response, self.model, first=True)
        if self.budget is not None:
            self.budget.charge(usage)
        said = _texts(response)
        if response.stop_reason == "refusal":
            raise Refused(f"step {step!r}: the model declined (stop_reason=refusal)", step=step, usage=usage)
        if response.stop_reason == "max_tokens" and not said:
            raise OutputTruncated(
                f"step {step!r}: no answer within max_tokens={max_tokens}", step=step, usage=usage
            )
        return said, usage

    def count_tokens(self, text: str) -> int:
        """Input tokens of one user message holding `text` (`messages.count_tokens`): the
        working context's estimate. Same retries as a request; not charged to the budget
        (the endpoint is free)."""
        try:
            with self._slots:
                retrying = tenacity.Retrying(
                    stop=tenacity.stop_after_attempt(self.max_retries + 1),
                    wait=self._wait,
                    retry=tenacity.retry_if_exception(_retryable),
                    reraise=True,
                )
                result = retrying(
                    self._client.messages.count_tokens,
                    model=self.model,
                    messages=[{"role": "user", "content": text}],
                )
        except sdk().AnthropicError as err:
            leaked = self._api_key.get_secret_value() in str(err)
            raise self.translate("agent/count_tokens", err) from (None if leaked else err)
        return int(result.input_tokens)

    def _conversation(self, request: StepRequest, runner: ToolRunner) -> Iterator[Usage]:
        """Yields each call's usage as it is spent, so `run` still knows the total if a
        later call fails."""
        step = request.step
        if not request.user:
            raise EngineError(f"step {step!r} has no user blocks to send", step=step)
        system, user = _prompt(request)
        max_tokens = self.limits(request)[0]
        messages: list[dict[str, Any]] = [{"role": "user", "content": user}]
        params = self._params(request, system, max_tokens)
        done: list[str] = []  # tool calls executed, for the error of a step that stops
        written = 0  # successful tool calls
        grown = reminded = False
        first = True
        turn = 0
        while True:
            turn += 1
            if turn > request.max_turns:
                raise MaxTurnsExceeded(
                    f"step {step!r} hit its bound of max_turns={request.max_turns} API calls while the model "
                    f"was still working; executed before the stop: {_summary(done)}; the step's writes "
                    "were rolled back (raise the bound or shorten the input)",
                    step=step,
                )
            if self.budget is not None:
                self.budget.check(step)
            params["messages"] = _with_turn_breakpoints(messages) if request.cache_turns else messages
            response = self._create(step, params)
            usage = self._usage(response, params["model"], first=first)
            first = False
            if self.budget is not None:
                self.budget.charge(usage)
            yield usage
            stop = response.stop_reason
            calls = [b for b in response.content if b.type == "tool_use"]
            log.info(
                "step %s turn %d: stop=%s tool_calls=%d in=%d out=%d cache_read=%d cache_write=%d $%.6f",
                step,
                turn,
                stop,
                len(calls),
                usage.input_tokens,
                usage.output_tokens,
                usage.cache_read_tokens,
                usage.cache_write_tokens,
                usage.cost_usd,
            )
            if stop == "max_tokens":
                ceiling = self.settings.llm.max_tokens_ceiling
                larger = min(int(params["max_tokens"] * self.settings.llm.max_tokens_retry_factor), ceiling)
                cut = f" (a cut {calls[-1].name} call was not executed)" if calls else ""
                if grown or larger <= params["max_tokens"]:
                    raise OutputTruncated(
                        f"step {step!r}: the answer stopped at max_tokens={params['max_tokens']}{cut}, also "
                        f"after one retry with a larger limit; executed before: {_summary(done)}; the step's "
                        "writes were rolled back. Raise ANIMA_LLM_MAX_TOKENS (or this step's limit in "
                        "ANIMA_LLM_STEP_LIMITS), or lower the effort",
                        step=step,
                    )
                log.warning(
                    "step %s: answer cut at max_tokens=%d%s; asking again with %d",
                    step,
                    params["max_tokens"],
                    cut,
                    larger,
                )
                params["max_tokens"], grown = larger, True
                turn -= 1  # the same turn again, not a new one
                continue
            if stop == "refusal":
                said = _texts(response)[:300]
                raise Refused(
                    f"step {step!r}: the model declined (stop_reason=refusal)"
                    + (f": {said!r}" if said else "")
                    + f"; executed before: {_summary(done)}; the step's writes were rolled back",
                    step=step,
                )
            if stop == "model_context_window_exceeded":
                raise ContextTooLarge(
                    f"step {step!r}: the request exceeded the model's context window; shorten the input",
                    step=step,
                )
            if stop == "pause_turn":
                # A paused long turn: send the content back as is and let the model go on.
                messages.append({"role": "assistant", "content": [_echo(b) for b in response.content]})
                continue
            if stop == "tool_use" and calls:
                if turn == request.max_turns:
                    raise MaxTurnsExceeded(
                        f"step {step!r} hit its bound of max_turns={request.max_turns} API calls while the "
                        f"model was still calling tools; the last {len(calls)} tool call(s) were not executed; "
                        f"executed before: {_summary(done)}; the step's writes were rolled back (raise the "
                        "bound or shorten the input)",
                        step=step,
                    )
                messages.append({"role": "assistant", "content": [_echo(b) for b in response.content]})
                results = [self._execute(step, b, runner) for b in calls]
                done += [b.name for b in calls]
                written += sum(1 for r in results if not r.get("is_error"))
                messages.append({"role": "user", "content": results})
                continue
            if calls:
                log.warning(
                    "step %s: stop=%s with %d tool_use block(s); not executed", step, stop, len(calls)
                )
            if request.must_write and not written and not reminded:
                reminded = True
                content = [_echo(b) for b in response.content] or [{"type": "text", "text": "(no answer)"}]
                messages.append({"role": "assistant", "content": content})
                messages.append({"role": "user", "content": [{"type": "text", "text": REMINDER}]})
                continue
            if not written:
                said = _texts(response)[:DECLINED_CHARS] or "(no answer)"
                log.warning("step %s: the model wrote nothing (declined): %r", step, said)
                if isinstance(runner, DeclineRecorder):
                    runner.declined(said)
            return

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
        if self.collector is not None:
            return self.collector.submit(self, step, params)
        try:
            with self._slots:
                return self._retrying(params)
        except sdk().AnthropicError as err:
            # The SDK's own message quotes the response body; if a proxy echoed the key
            # there, keep that exception out of the chain (and so out of tracebacks).
            leaked = self._api_key.get_secret_value() in str(err)
            raise self.translate(step, err) from (None if leaked else err)

    def _wait(self, state: tenacity.RetryCallState) -> float:
        err = state.outcome.exception() if state.outcome else None
        asked = _retry_after(err) if err is not None else None
        if asked is None:
            # the SDK's backoff: 0.5 s doubling to 8 s, minus up to a quarter of jitter
            asked = min(0.5 * 2 ** (state.attempt_number - 1), 8.0) * (1 - 0.25 * random.random())
        return min(asked, self.max_retry_wait)

    def _retrying(self, params: dict[str, Any]) -> Any:
        retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(self.max_retries + 1),
            wait=self._wait,
            retry=tenacity.retry_if_exception(_retryable),
            reraise=True,
        )
        return retrying(self._send, params)

    def _send(self, params: dict[str, Any]) -> Any:
        """One attempt, paced by the provider's limits (llm/ratelimit.py); a 429 pauses every
        request of the process for the server's retry-after."""
        model = params["model"]
        self.limiter.acquire(model)  # also waits out a 429's pause when no limit is set
        try:
            response = self._client.messages.create(**params)
        except sdk().RateLimitError as err:
            self.limiter.pause(min(_retry_after(err) or 1.0, self.max_retry_wait))
            raise
        if self.limiter.active:
            self.limiter.record(model, self._usage(response, model))
        return response

    def translate(self, step: str, err: anthropic.AnthropicError) -> EngineError:
        """An SDK error (raised after the SDK's own retries) as an EngineError naming the step."""
        attempts = f"{self.max_retries + 1} attempt(s) (max_retries={self.max_retries})"
        api = sdk()
        if isinstance(err, api.APIStatusError):
            status = err.status_code
            detail = self._scrub(f"HTTP {status} {err.type or 'error'}: {err.api_message or ''}".strip())
            if _is_retryable(err):
                msg = f"step {step!r}: Anthropic API still failing after {attempts}: {detail}"
                return RetriesExhausted(msg, step=step, status=status)
            msg = f"step {step!r}: Anthropic API rejected the request: {detail}"
            return RequestRejected(msg, step=step, status=status)
        if isinstance(err, api.APITimeoutError):
            msg = f"step {step!r}: Anthropic API timed out ({self.timeout}s per attempt) on all {attempts}"
            return RetriesExhausted(msg, step=step)
        if isinstance(err, api.APIConnectionError):
            msg = f"step {step!r}: could not reach the Anthropic API in {attempts}: {self._scrub(str(err))}"
            return RetriesExhausted(msg, step=step)
        return EngineError(
            f"step {step!r}: Anthropic SDK error {type(err).__name__}: {self._scrub(str(err))}", step=step
        )

    def _usage(self, response: Any, model: str, *, first: bool = False, batch: bool = False) -> Usage:
        u = response.usage
        inp, out = u.input_tokens or 0, u.output_tokens or 0
        read, write = u.cache_read_input_tokens or 0, u.cache_creation_input_tokens or 0
        batch = batch or self.collector is not None
        return Usage(
            calls=1,
            input_tokens=inp,
            output_tokens=out,
            cache_read_tokens=read,
            cache_write_tokens=write,
            cost_usd=cost_usd(model, inp, out, read, write, batch=batch),
            one_pass_tokens=inp + read + write if first else 0,
            batched_calls=1 if batch else 0,
        )

    def _scrub(self, text: str) -> str:
        # Server text is not ours to trust; never let it echo the key into an error.
        return text.replace(self._api_key.get_secret_value(), "[redacted]")


def _summary(names: list[str]) -> str:
    if not names:
        return "no tool call"
    counts: dict[str, int] = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    return ", ".join(f"{n} x{c}" for n, c in counts.items())
