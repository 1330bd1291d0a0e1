"""The OpenAI-compatible engine: runs a step as a tool-use conversation with the chat-completions
API, OpenAI's own or any server that speaks it (vLLM, Ollama, llama.cpp's server, LiteLLM).

The conversation (what each stop means, the reminder of a step that must write, the restraint
rule, the bounds) is llm/tool_loop.py's, the same as the Anthropic engine's; so are the prompts,
the tool contract and its executor, the guards and the audit. This module is the API's shape of
it (`CompletionsChat`): the step's system blocks are one `system` message and its user blocks
one `user` message (joined, in order, so a server's automatic prefix cache sees the same prefix
every turn); its tools go out as `tools` with `tool_choice: "auto"` (a step may rightly write
nothing: docs/ordering.md, "Restraint"); each `tool_calls` entry comes back as a call, its
`arguments` parsed from JSON; each result goes back as a `tool` message (the API has no
is_error: an error result says so in its text).

`finish_reason`, in the loop's words: `tool_calls` → execute; `stop` → done (with tool calls,
execute: local servers report `stop` for a tool-calling answer); `length` → cut (asked again
once with a larger limit, then declined); `content_filter`, or a `refusal` in the message →
refused. A prompt larger than the model's window is an error status on this API
(`context_length_exceeded`), taken as too large, like Claude's stop reason.

Requests, retries (429 with retry-after, 5xx, timeouts), rate limits and the requests in flight
go through llm/retry.py, the same layer as Claude's. Cost comes from `usage`: `prompt_tokens`
less `prompt_tokens_details.cached_tokens` (where the server reports it) as input, those as
cache reads, `completion_tokens` as output, at the model's row of core/prices.py; a local
model named in ANIMA_LLM_UNPRICED costs 0 with its tokens counted. No batch mode (that is the
Message Batches API) and no token count of the engine's own (the working context's ratio
estimate counts: recall/tokens.py).

The key (OPENAI_API_KEY) stays a `SecretStr` and is never logged, put in an error or shown in a
repr. A local server needs none: with OPENAI_BASE_URL set and no key, a placeholder is sent.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, ClassVar
from zoneinfo import ZoneInfo

from pydantic import SecretStr

from anima_pipeline.config import Effort, Settings
from anima_pipeline.llm.api_engine import ApiEngine
from anima_pipeline.llm.budget import Budget
from anima_pipeline.llm.contract import OfflinePlan, StepRequest, TextBlock, ToolResult, ToolRunner, Usage
from anima_pipeline.llm.failures import (
    ContextTooLarge,
    EngineConfigError,
    EngineError,
    OutputTruncated,
    Refused,
)
from anima_pipeline.llm.openai.sdk import sdk
from anima_pipeline.llm.pricing import cost_usd
from anima_pipeline.llm.ratelimit import RateLimiter
from anima_pipeline.llm.summary import ModelSummarizer
from anima_pipeline.llm.tool_loop import Answer, Call, Stop, converse

if TYPE_CHECKING:
    import openai

PROVIDER = "OpenAI-compatible API"
NO_KEY = "unused"  # a local server reads no key; the SDK insists on one
# ANIMA_LLM_EFFORT as `reasoning_effort` (the API has no "max": its highest is "xhigh")
EFFORTS: dict[Effort, str] = {
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "xhigh",
    "max": "xhigh",
}


def _joined(blocks: list[TextBlock]) -> str:
    return "\n\n".join(b.text for b in blocks)


def _arguments(raw: str | None) -> tuple[dict[str, Any], str | None]:
    """A tool call's `arguments` as an object, or why it is not one. No arguments at all (some
    servers send "" for a call without parameters) is the empty object."""
    if raw is None or not raw.strip():
        return {}, None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        return {}, f"not valid JSON ({exc.msg} at character {exc.pos})"
    if not isinstance(value, dict):
        return {}, f"not a JSON object (got {type(value).__name__})"
    return value, None


class OpenAIEngine(ApiEngine):
    name: ClassVar[str] = "openai"
    # the nights calling one provider share one Dagster pool named after it
    pool: ClassVar[str | None] = "openai"
    priced: ClassVar[bool] = True  # tokens and cost in the metadata (a local model's cost is 0)
    worker_processes: ClassVar[bool] = False  # it waits on the network: threads suffice

    def __init__(
        self,
        model: str,
        api_key: SecretStr | None = None,
        base_url: str | None = None,
        budget: Budget | None = None,
        timeout: float = 120,
        max_retries: int = 4,
        max_retry_wait: float = 60.0,
        *,
        settings: Settings | None = None,
        concurrency: int | None = None,
        limiter: RateLimiter | None = None,
    ) -> None:
        self._check(
            model, settings=settings, timeout=timeout, max_retries=max_retries, max_retry_wait=max_retry_wait
        )
        key = api_key.get_secret_value().strip() if api_key is not None else ""
        if not key and base_url is None:
            raise EngineConfigError(
                "ANIMA_ENGINE=openai needs an API key in OPENAI_API_KEY for OpenAI's API, or "
                "OPENAI_BASE_URL pointing at a server that needs none (Ollama, vLLM, llama.cpp)"
            )
        api = sdk()
        self.calls = self._connect(
            api,
            base_error=api.OpenAIError,
            provider=PROVIDER,
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
        self._client = api.OpenAI(
            api_key=key or NO_KEY,
            base_url=base_url,
            max_retries=0,  # retried by llm/retry.py, with each wait capped
            timeout=timeout,
        )

    @classmethod
    def from_settings(cls, settings: Settings, budget: Budget | None = None) -> OpenAIEngine:
        """Refuses to start without a model named for the server, or in batch mode, rather than
        failing at the first step."""
        if "model" not in settings.model_fields_set:
            raise EngineConfigError(
                "ANIMA_ENGINE=openai needs ANIMA_MODEL set to a model the server serves (gpt-4.1, "
                'llama3.1:8b, ...): the default is a Claude model (README, "Any model")'
            )
        if settings.llm.mode == "batch":
            raise EngineConfigError(
                "ANIMA_LLM_MODE=batch is the Anthropic Message Batches API; ANIMA_ENGINE=openai sends "
                "each request on its own (unset ANIMA_LLM_MODE)"
            )
        return cls(
            model=settings.model,
            api_key=settings.openai_api_key,
            base_url=settings.openai_base_url,
            budget=budget if budget is not None else Budget.from_settings(settings),
            timeout=settings.llm.request_timeout_s,
            max_retries=settings.llm.max_retries,
            max_retry_wait=settings.llm.max_retry_wait_s,
            settings=settings,
        )

    @classmethod
    def default_workers(cls, settings: Settings) -> int:
        """The animas wait on the network: as many as requests may be in flight."""
        return settings.llm.in_flight

    @property
    def client(self) -> openai.OpenAI:
        return self._client

    def __repr__(self) -> str:
        return (
            f"OpenAIEngine(model={self.model!r}, base_url={self.base_url!r}, timeout={self.timeout}, "
            f"max_retries={self.max_retries}, budget={self.budget!r})"
        )

    def close(self) -> None:
        self._client.close()

    def summarizer(self, identity: Callable[[], str], tz: ZoneInfo) -> ModelSummarizer:
        return ModelSummarizer(self, identity(), tz)

    def token_counter(self) -> None:
        return None  # no counting endpoint on this API: the ratio estimate counts

    def batch_member(self) -> AbstractContextManager[None]:
        return contextlib.nullcontext()

    def model_for(self, step: str) -> str:
        """The step's model (ANIMA_LLM_STEP_MODELS, docs/cost.md); "main" is this engine's model."""
        return self.settings.step_model(step, self.model)

    def run(self, request: StepRequest, runner: ToolRunner, offline_plan: OfflinePlan) -> Usage:
        total = Usage()
        try:
            for usage in converse(
                request, CompletionsChat(self, request), runner, self.settings, self.budget
            ):
                total = total + usage
            return total
        except EngineError as err:
            err.step = err.step or request.step
            err.usage = total
            raise

    def params(self, step: str, model: str, max_tokens: int, effort: Effort | None) -> dict[str, Any]:
        params: dict[str, Any] = {"model": model, self.settings.llm.max_tokens_field: max_tokens}
        if effort is not None:
            params["reasoning_effort"] = EFFORTS[effort]
        return params

    def complete(
        self,
        step: str,
        system: str | list[TextBlock],
        prompt: str | list[TextBlock],
        *,
        max_tokens: int = 1024,
    ) -> tuple[str, Usage]:
        """One plain text answer (no tools): the session summary, the evaluation's answer and
        judge calls. Same retries, budget and accounting as a step; a refusal or a cut answer
        without text raises like in a step."""
        if self.budget is not None:
            self.budget.check(step)
        messages = [
            {"role": "system", "content": system if isinstance(system, str) else _joined(system)},
            {"role": "user", "content": prompt if isinstance(prompt, str) else _joined(prompt)},
        ]
        params = {**self.params(step, self.model, max_tokens, self.settings.llm.effort), "messages": messages}
        response = self.create(step, params)
        usage = self.usage(response, self.model, first=True)
        if self.budget is not None:
            self.budget.charge(usage)
        choice = _choice(step, response)
        said = (choice.message.content or "").strip()
        if choice.finish_reason == "content_filter" or choice.message.refusal:
            raise Refused(
                f"step {step!r}: the model declined (finish_reason={choice.finish_reason})",
                step=step,
                usage=usage,
            )
        if choice.finish_reason == "length" and not said:
            raise OutputTruncated(
                f"step {step!r}: no answer within max_tokens={max_tokens}", step=step, usage=usage
            )
        return said, usage

    def create(self, step: str, params: dict[str, Any]) -> Any:
        model = params["model"]
        create = self._client.chat.completions.create
        return self.calls.send(step, model, create, params, lambda r: self.usage(r, model), self.translate)

    def translate(self, step: str, err: openai.OpenAIError) -> EngineError:
        """An SDK error (after the retries) as an EngineError naming the step; a prompt over the
        model's window is this API's 400 `context_length_exceeded`: too large, as on Claude."""
        if isinstance(err, sdk().BadRequestError) and err.code == "context_length_exceeded":
            return ContextTooLarge(
                f"step {step!r}: the request exceeded the model's context window "
                f"({self.calls.scrub(str(err.body))[:300]}); shorten the input or raise the server's context",
                step=step,
            )
        return self.calls.translate(step, err)

    def usage(self, response: Any, model: str, *, first: bool = False) -> Usage:
        u = response.usage
        if u is None:  # a server that reports none: the call is counted, its tokens are not known
            return Usage(calls=1)
        prompt, out = u.prompt_tokens or 0, u.completion_tokens or 0
        details = u.prompt_tokens_details
        cached = min((details.cached_tokens or 0) if details is not None else 0, prompt)
        return Usage(
            calls=1,
            input_tokens=prompt - cached,
            output_tokens=out,
            cache_read_tokens=cached,
            cost_usd=cost_usd(model, prompt - cached, out, cached, unpriced=self.unpriced),
            one_pass_tokens=prompt if first else 0,
        )


def _choice(step: str, response: Any) -> Any:
    if not response.choices:
        raise EngineError(f"step {step!r}: the {PROVIDER} answered without a choice", step=step)
    return response.choices[0]


class CompletionsChat:
    """One step's conversation in the chat-completions shape (llm/tool_loop.py's `Chat`)."""

    def __init__(self, engine: OpenAIEngine, request: StepRequest) -> None:
        max_tokens, _thinking, effort = engine.settings.step_limits(request.step)
        self.engine = engine
        self.step = request.step
        self.model = engine.model_for(request.step)
        self.max_tokens = request.max_tokens or max_tokens
        self.effort = effort
        self.messages: list[dict[str, Any]] = []
        if request.system:
            self.messages.append({"role": "system", "content": _joined(request.system)})
        self.messages.append({"role": "user", "content": _joined(request.user)})
        self.tools = [
            {
                "type": "function",
                "function": {"name": t.name, "description": t.description, "parameters": t.input_schema},
            }
            for t in request.tools
        ]
        self._ids = itertools.count(1)
        self._sent_args: dict[str, str] = {}  # call id -> the arguments to send back

    def send(self, first: bool) -> Answer:
        params = {**self.engine.params(self.step, self.model, self.max_tokens, self.effort)}
        params["messages"] = self.messages
        if self.tools:
            params["tools"] = self.tools
            params["tool_choice"] = "auto"
        response = self.engine.create(self.step, params)
        usage = self.engine.usage(response, self.model, first=first)
        choice = _choice(self.step, response)
        message, finish = choice.message, choice.finish_reason
        calls = [self._call(tc) for tc in message.tool_calls or []]
        text = (message.content or "").strip()
        if message.refusal or finish == "content_filter":
            stop = Stop.REFUSED
            text = (message.refusal or text).strip()
        elif finish == "length":
            stop = Stop.CUT
        elif calls:
            stop = Stop.TOOLS
        else:
            stop = Stop.END
        return Answer(
            stop=stop, reason=f"finish_reason={finish}", text=text, calls=calls, usage=usage, raw=message
        )

    def _call(self, tc: Any) -> Call:
        # a server that sends no id still needs one to pair the result with the call
        call_id = tc.id or f"call_{next(self._ids)}"
        function = getattr(tc, "function", None)
        if function is None:  # a custom (free-form) tool call: the step offered none
            name = getattr(getattr(tc, "custom", None), "name", "?")
            self._sent_args[call_id] = "{}"
            return Call(id=call_id, name=name, input={}, problem="not a function call")
        args, problem = _arguments(function.arguments)
        # a malformed input cannot go back as it came (a server may parse it): the object it became
        self._sent_args[call_id] = function.arguments if problem is None and function.arguments else "{}"
        return Call(id=call_id, name=function.name, input=args, problem=problem)

    def keep(self, answer: Answer) -> None:
        message: dict[str, Any] = {"role": "assistant", "content": answer.text or None}
        if answer.calls:
            message["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": self._sent_args[c.id]},
                }
                for c in answer.calls
            ]
        elif not answer.text:
            message["content"] = "(no answer)"
        self.messages.append(message)

    def results(self, answer: Answer, results: list[tuple[Call, ToolResult]]) -> None:
        for call, result in results:
            content = result.content or "(no output)"
            if result.is_error and not content.startswith("Error"):
                content = f"Error: {content}"  # the API has no is_error: the text says it
            self.messages.append({"role": "tool", "tool_call_id": call.id, "content": content})

    def remind(self, text: str) -> None:
        self.messages.append({"role": "user", "content": text})
