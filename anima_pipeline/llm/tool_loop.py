"""A step as a tool-use conversation, whichever chat API carries it.

One step is one conversation: the step's system and user blocks go out with its tool
whitelist, every tool call that comes back is executed through the same `ToolRunner` the
offline engine uses, and the results go back until the model ends its turn. What differs
between APIs (the request's shape, how a call and a result are written, what a stop reason is
called) is a `Chat`; what a stop means is decided here, once:

- `TOOLS`: execute the calls, send the results, next turn; a step that answers once
  (`StepRequest.one_answer`, the night's steps) is done when every call succeeded: the next
  turn would re-send the whole prompt for a "done" (docs/cost.md), and only a failed call's
  result tells the model something it must act on.
- `END`: done; a step that must write (`StepRequest.must_write`) and has not written gets one
  reminder. A conversation that ends without a successful write is the model's restraint
  ("nothing worth recording"): the runner records it as declined with the model's words
  (`DeclineRecorder`); it is not an error (docs/ordering.md, "Restraint").
- `CUT` (the output limit): nothing of that answer is executed (a cut tool call could carry
  half its input); the same turn is asked again once with a larger limit, then the step stops
  with `OutputTruncated`.
- `REFUSED`: `Refused`; nothing of that answer is executed.
- `PAUSED`: the answer goes back as it is and the turn continues.
- `TOO_LARGE`: `ContextTooLarge`.
A tool call whose input is not a JSON object is answered with an error result without reaching
the runner (a wrong schema is the executor's to answer, tools/executor.py), and the model gets
one more turn to call again; a second turn in a row with only such calls stops the step with
`MalformedToolInput`. All these failures are deterministic for the input, so the step records
them as declined (night/frame.py) and nothing retries them; the API's transient failures are
retried below, in llm/retry.py, and only there.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

from anima_pipeline.config import Settings
from anima_pipeline.llm.budget import Budget
from anima_pipeline.llm.contract import (
    DeclineRecorder,
    StepRequest,
    ToolCall,
    ToolResult,
    ToolRunner,
    Usage,
    call_all,
)
from anima_pipeline.llm.failures import (
    ContextTooLarge,
    EngineError,
    MalformedToolInput,
    MaxTurnsExceeded,
    OutputTruncated,
    Refused,
)

log = logging.getLogger(__name__)

DECLINED_CHARS = 500  # of the model's words kept with a declined step
REMINDER = (
    "This step must record its result with a tool call; a text answer is not stored. "
    "Call the tool now (see the instructions above)."
)


class Stop(StrEnum):
    TOOLS = "tools"
    END = "end"
    CUT = "cut"
    REFUSED = "refused"
    PAUSED = "paused"
    TOO_LARGE = "too_large"


@dataclass(frozen=True)
class Call:
    """One tool call as the model made it; `problem` says why its input cannot be used."""

    id: str
    name: str
    input: dict[str, Any]
    problem: str | None = None


@dataclass
class Answer:
    """One API answer, in the loop's words: `reason` is the API's own stop reason, as the
    errors quote it ("stop_reason=refusal", "finish_reason=length")."""

    stop: Stop
    reason: str
    text: str
    calls: list[Call] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    raw: Any = None  # the SDK's response, for the chat that sends it back


class Chat(Protocol):
    """One step's conversation in one API's shape, built by its engine from the request."""

    step: str
    max_tokens: int  # the output limit of the next request (the loop raises it after a cut)

    def send(self, first: bool) -> Answer:
        """One request of the history so far (retried, paced); `first`: the conversation's first."""
        ...

    def keep(self, answer: Answer) -> None:
        """The answer into the history, as the API wants it sent back."""
        ...

    def results(self, answer: Answer, results: list[tuple[Call, ToolResult]]) -> None:
        """The results of the answer's calls into the history (after `keep`)."""
        ...

    def remind(self, text: str) -> None:
        """A user turn of `text` into the history (after `keep`)."""
        ...


def converse(
    request: StepRequest, chat: Chat, runner: ToolRunner, settings: Settings, budget: Budget | None
) -> Iterator[Usage]:
    """Runs the step's conversation; yields each call's usage as it is spent, so the engine
    still knows the total if a later call fails."""
    step = request.step
    if not request.user:
        raise EngineError(f"step {step!r} has no user blocks to send", step=step)
    done: list[str] = []  # tool calls executed, for the error of a step that stops
    written = 0  # successful tool calls
    grown = reminded = malformed = False
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
        if budget is not None:
            budget.check(step)
        answer = chat.send(first)
        usage = answer.usage
        first = False
        if budget is not None:
            budget.charge(usage)
        yield usage
        calls = answer.calls
        log.info(
            "step %s turn %d: stop=%s tool_calls=%d in=%d out=%d cache_read=%d cache_write=%d $%.6f",
            step,
            turn,
            answer.reason,
            len(calls),
            usage.input_tokens,
            usage.output_tokens,
            usage.cache_read_tokens,
            usage.cache_write_tokens,
            usage.cost_usd,
        )
        if answer.stop is Stop.CUT:
            ceiling = settings.llm.max_tokens_ceiling
            larger = min(int(chat.max_tokens * settings.llm.max_tokens_retry_factor), ceiling)
            cut = f" (a cut {calls[-1].name} call was not executed)" if calls else ""
            if grown or larger <= chat.max_tokens:
                raise OutputTruncated(
                    f"step {step!r}: the answer stopped at max_tokens={chat.max_tokens}{cut}, also "
                    f"after one retry with a larger limit; executed before: {_summary(done)}; the step's "
                    "writes were rolled back. Raise ANIMA_LLM_MAX_TOKENS (or this step's limit in "
                    "ANIMA_LLM_STEP_LIMITS), or lower the effort",
                    step=step,
                )
            log.warning(
                "step %s: answer cut at max_tokens=%d%s; asking again with %d",
                step,
                chat.max_tokens,
                cut,
                larger,
            )
            chat.max_tokens, grown = larger, True
            turn -= 1  # the same turn again, not a new one
            continue
        if answer.stop is Stop.REFUSED:
            said = answer.text[:300]
            raise Refused(
                f"step {step!r}: the model declined ({answer.reason})"
                + (f": {said!r}" if said else "")
                + f"; executed before: {_summary(done)}; the step's writes were rolled back",
                step=step,
            )
        if answer.stop is Stop.TOO_LARGE:
            raise ContextTooLarge(
                f"step {step!r}: the request exceeded the model's context window; shorten the input",
                step=step,
            )
        if answer.stop is Stop.PAUSED:
            # A paused long turn: send the content back as is and let the model go on.
            chat.keep(answer)
            continue
        if answer.stop is Stop.TOOLS and calls:
            if turn == request.max_turns:
                raise MaxTurnsExceeded(
                    f"step {step!r} hit its bound of max_turns={request.max_turns} API calls while the "
                    f"model was still calling tools; the last {len(calls)} tool call(s) were not executed; "
                    f"executed before: {_summary(done)}; the step's writes were rolled back (raise the "
                    "bound or shorten the input)",
                    step=step,
                )
            unusable = all(c.problem for c in calls)
            if unusable and malformed:
                raise MalformedToolInput(
                    f"step {step!r}: the model's tool input was not a JSON object twice in a row "
                    f"({calls[0].problem}); executed before: {_summary(done)}; the step's writes were "
                    "rolled back",
                    step=step,
                )
            malformed = unusable
            chat.keep(answer)
            results = _execute(step, calls, runner)
            done += [c.name for c in calls]
            written += sum(1 for _, r in results if not r.is_error)
            if request.one_answer and not any(r.is_error for _, r in results):
                return
            chat.results(answer, results)
            continue
        if calls:
            log.warning("step %s: %s with %d tool call(s); not executed", step, answer.reason, len(calls))
        if request.must_write and not written and not reminded:
            reminded = True
            chat.keep(answer)
            chat.remind(REMINDER)
            continue
        if not written:
            said = answer.text[:DECLINED_CHARS] or "(no answer)"
            log.warning("step %s: the model wrote nothing (declined): %r", step, said)
            if isinstance(runner, DeclineRecorder):
                runner.declined(said)
        return


def _execute(step: str, calls: list[Call], runner: ToolRunner) -> list[tuple[Call, ToolResult]]:
    """Each call of one answer with its result, in order. The model made them without seeing
    each other's results, so they go to the runner together (`call_all`: a run of creations
    written at once); a call whose input is unusable is answered with an error instead."""
    usable = [c for c in calls if c.problem is None]
    ran = iter(call_all(runner, [ToolCall(name=c.name, input=c.input) for c in usable]))
    out = []
    for c in calls:
        if c.problem is None:
            result = next(ran)
            log.debug("step %s: tool %s -> is_error=%s", step, c.name, result.is_error)
        else:
            log.warning(
                "step %s: tool call %s for %s: %s; answered with an error", step, c.id, c.name, c.problem
            )
            result = ToolResult(
                content=f"Error: the input for tool {c.name!r} was {c.problem}. "
                "Call the tool again with a JSON object.",
                is_error=True,
            )
        out.append((c, result))
    return out


def _summary(names: list[str]) -> str:
    if not names:
        return "no tool call"
    counts: dict[str, int] = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    return ", ".join(f"{n} x{c}" for n, c in counts.items())
