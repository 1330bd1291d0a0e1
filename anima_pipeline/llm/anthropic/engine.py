"""The Anthropic engine: runs a step as a tool-use conversation with the Anthropic Messages API.

The conversation itself (what each stop means, the reminder of a step that must write, the
restraint rule, the bounds) is llm/tool_loop.py's, shared with every chat API; this module is
the Messages API's shape of it (`MessagesChat`): the step's system and user blocks go out with
its tool whitelist, each `tool_use` block comes back as a call, and the results go back as one
user turn of `tool_result` blocks. Stop reasons, as the Messages API documents them:
`tool_use` (execute), `end_turn` / `stop_sequence` (done), `max_tokens` (cut), `refusal`
(refused), `pause_turn` (the assistant content goes back as is and the turn continues) and
`model_context_window_exceeded` (too large).

Bounds: retries (429/529/5xx/timeouts), the provider's rate limits and the requests in flight
are llm/retry.py's (`ApiCalls`), shared with every engine; `max_turns` per step; the run's
`Budget`, checked before every call. In batch mode each turn is submitted to a
`BatchCollector` that sends the turns of all animas of a night as one Message Batch.

Prompt caching: the step marks its stable blocks (`TextBlock.cache`: the system prompt,
message 1); the engine adds breakpoints at the end of the last two user turns of the tool
conversation so each turn reads the previous one from the cache (at most 4 in all), unless the
step answers once (`StepRequest.one_answer`: no later turn is expected to read them).

The API key stays a `SecretStr` on the engine and is never logged, put in an error
message or shown in a repr; request headers are never logged.

The SDK is imported when the first engine is built, not with this module (llm/anthropic/sdk.py).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, ClassVar
from zoneinfo import ZoneInfo

from pydantic import SecretStr

from anima_pipeline.config import Settings
from anima_pipeline.llm.anthropic.batches import BatchCollector
from anima_pipeline.llm.anthropic.counting import ClaudeCounter
from anima_pipeline.llm.anthropic.sdk import sdk
from anima_pipeline.llm.api_engine import ApiEngine
from anima_pipeline.llm.budget import Budget
from anima_pipeline.llm.contract import OfflinePlan, StepRequest, TextBlock, ToolResult, ToolRunner, Usage
from anima_pipeline.llm.failures import EngineConfigError, EngineError, OutputTruncated, Refused
from anima_pipeline.llm.pricing import cost_usd
from anima_pipeline.llm.ratelimit import RateLimiter
from anima_pipeline.llm.summary import ModelSummarizer
from anima_pipeline.llm.tool_loop import Answer, Call, Stop, converse

if TYPE_CHECKING:
    import anthropic

    from anima_pipeline.config import Effort, Thinking

log = logging.getLogger(__name__)

MAX_CACHE_BREAKPOINTS = 4  # the API rejects a request with more cache_control blocks
TURN_BREAKPOINTS = 2  # on the last two user turns of the tool conversation
_EPHEMERAL = {"type": "ephemeral"}
# The Messages API's stop reasons, in the tool loop's words (anything else ends the turn).
STOPS = {
    "tool_use": Stop.TOOLS,
    "end_turn": Stop.END,
    "stop_sequence": Stop.END,
    "max_tokens": Stop.CUT,
    "refusal": Stop.REFUSED,
    "pause_turn": Stop.PAUSED,
    "model_context_window_exceeded": Stop.TOO_LARGE,
}


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
    room = MAX_CACHE_BREAKPOINTS - (TURN_BREAKPOINTS if request.turn_breakpoints else 0)
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


class AnthropicEngine(ApiEngine):
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
        # (the per-step models of the settings were priced when the settings were built)
        self._check(
            model, settings=settings, timeout=timeout, max_retries=max_retries, max_retry_wait=max_retry_wait
        )
        key = api_key.get_secret_value()
        if not key.strip():
            raise EngineConfigError("the Anthropic API key is empty (set ANTHROPIC_API_KEY)")
        self.collector = collector
        self._api_key = api_key
        api = sdk()
        self.calls = self._connect(
            api,
            base_error=api.AnthropicError,
            provider="Anthropic API",
            secret=key,
            model=model,
            base_url=base_url,
            budget=budget,
            timeout=timeout,
            max_retries=max_retries,
            max_retry_wait=max_retry_wait,
            concurrency=concurrency,
            limiter=limiter,
        )
        self._counter = ClaudeCounter(self)  # one per engine: its cache serves every turn
        self._client = api.Anthropic(
            api_key=key,
            base_url=base_url,
            max_retries=0,  # retried by llm/retry.py, with each wait capped
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

    def summarizer(self, identity: Callable[[], str], tz: ZoneInfo) -> ModelSummarizer:
        return ModelSummarizer(self, identity(), tz)  # read now: the prefix every cycle caches

    def token_counter(self) -> ClaudeCounter:
        return self._counter

    def batch_member(self) -> AbstractContextManager[None]:
        return self.collector.member() if self.collector is not None else contextlib.nullcontext()

    def run(self, request: StepRequest, runner: ToolRunner, offline_plan: OfflinePlan) -> Usage:
        total = Usage()
        try:
            for usage in converse(request, MessagesChat(self, request), runner, self.settings, self.budget):
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
        result = self.calls.call(
            "agent/count_tokens",
            self._client.messages.count_tokens,
            model=self.model,
            messages=[{"role": "user", "content": text}],
        )
        return int(result.input_tokens)

    def _create(self, step: str, params: dict[str, Any]) -> Any:
        if self.collector is not None:
            return self.collector.submit(self, step, params)
        model = params["model"]
        return self.calls.send(
            step, model, self._client.messages.create, params, lambda r: self._usage(r, model)
        )

    def translate(self, step: str, err: anthropic.AnthropicError) -> EngineError:
        """An SDK error (raised after the retries) as an EngineError naming the step."""
        return self.calls.translate(step, err)

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
            cost_usd=cost_usd(model, inp, out, read, write, batch=batch, unpriced=self.unpriced),
            one_pass_tokens=inp + read + write if first else 0,
            batched_calls=1 if batch else 0,
        )


class MessagesChat:
    """One step's conversation in the Messages API's shape (llm/tool_loop.py's `Chat`)."""

    def __init__(self, engine: AnthropicEngine, request: StepRequest) -> None:
        system, user = _prompt(request)
        self.engine = engine
        self.step = request.step
        self.max_tokens = engine.limits(request)[0]
        self.params = engine._params(request, system, self.max_tokens)
        self.model: str = self.params["model"]
        self.cache_turns = request.turn_breakpoints
        self.messages: list[dict[str, Any]] = [{"role": "user", "content": user}]

    def send(self, first: bool) -> Answer:
        history = _with_turn_breakpoints(self.messages) if self.cache_turns else self.messages
        response = self.engine._create(
            self.step, {**self.params, "max_tokens": self.max_tokens, "messages": history}
        )
        calls = [
            Call(
                id=b.id,
                name=b.name,
                input=b.input if isinstance(b.input, dict) else {},
                problem=None
                if isinstance(b.input, dict)
                else f"not a JSON object (got {type(b.input).__name__})",
            )
            for b in response.content
            if b.type == "tool_use"
        ]
        stop = response.stop_reason
        return Answer(
            stop=STOPS.get(stop, Stop.END),
            reason=f"stop_reason={stop}",
            text=_texts(response),
            calls=calls,
            usage=self.engine._usage(response, self.model, first=first),
            raw=response,
        )

    def keep(self, answer: Answer) -> None:
        content = [_echo(b) for b in answer.raw.content] or [{"type": "text", "text": "(no answer)"}]
        self.messages.append({"role": "assistant", "content": content})

    def results(self, answer: Answer, results: list[tuple[Call, ToolResult]]) -> None:
        blocks = [
            {
                "type": "tool_result",
                "tool_use_id": call.id,
                "content": result.content or "(no output)",  # the API rejects an empty error result
                "is_error": result.is_error,
            }
            for call, result in results
        ]
        self.messages.append({"role": "user", "content": blocks})

    def remind(self, text: str) -> None:
        self.messages.append({"role": "user", "content": [{"type": "text", "text": text}]})
