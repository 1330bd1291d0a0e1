"""What a planned set of conversations will cost, before anything is sent: the same price
table (core/prices.py, through llm/pricing.py) and the same cache rules the engine's requests
meet (a breakpoint caches the prefix before it once it is at least the model's minimum; caches
are per model; a later request reads the longest prefix already written; the engine's turn
breakpoints make each turn read the previous one). `anima sleep --estimate` and the budget guard price the
night with it (night/estimate.py); benchmarks/night_cost.py prints it beside the measured cost.

Output is assumed, not known: each call of a step answers what STEP_OUTPUT says a real model
writes there (its words and its tool calls; docs/cost.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from anima_pipeline.core.steps import DEFAULT_STEP_OUTPUT, END_OUTPUT, STEP_OUTPUT
from anima_pipeline.llm.contract import Usage
from anima_pipeline.llm.pricing import cost_usd, min_cache_tokens

CHARS_PER_TOKEN = 4  # the fake's count and about what English text costs; Chinese costs more
RESULT = 20  # tokens of the tool results sent back after a tool turn


def tokens(chars: int) -> int:
    return -(-max(chars, 0) // CHARS_PER_TOKEN)


@dataclass(frozen=True)
class Conversation:
    """One step's conversation as planned: `prefix` tokens up to its last cached block (shared
    by every conversation with the same `key` on the same model), then `tail` tokens of
    uncached blocks, over `turns` API calls of which the first `turns - 1` call tools."""

    step: str
    model: str
    key: str | None  # None: a prefix of this conversation alone
    prefix: int
    tail: int
    turns: int = 1
    cached: bool = True  # False: no breakpoint on the prefix (no later request reads it)


def price(
    conversations: Iterable[Conversation], *, batch: bool = False, unpriced: Sequence[str] = ()
) -> dict[str, Usage]:
    """Expected usage per step, in the order given (the first reader of a prefix writes it);
    a model `unpriced` names (ANIMA_LLM_UNPRICED) costs 0, its tokens counted."""
    written: set[tuple[str, str]] = set()
    out: dict[str, Usage] = {}
    for i, c in enumerate(conversations):
        key = (c.model, c.key or f"#{i}")
        floor = min_cache_tokens(c.model)
        seen: list[int] = []  # this conversation's own cached prefixes (its turn breakpoints)
        total, grown, turns = Usage(), 0, max(c.turns, 1)
        for turn in range(1, turns + 1):
            out_tokens = turn_output(c.step, turn, turns)
            last = c.prefix if turn == 1 else c.prefix + c.tail + grown  # the last breakpoint
            prompt = c.prefix + c.tail + grown
            if last < floor or (turn == 1 and not c.cached):
                inp, read, write = prompt, 0, 0
            else:
                shared = c.prefix if key in written and c.prefix >= floor else 0
                read = max([shared, *(n for n in seen if n <= last)])
                write, inp = last - read, prompt - last
                if c.prefix >= floor:
                    written.add(key)
                seen.append(last)
            if turn < turns:
                grown += out_tokens + RESULT
            total = total + Usage(
                calls=1,
                input_tokens=inp,
                output_tokens=out_tokens,
                cache_read_tokens=read,
                cache_write_tokens=write,
                cost_usd=cost_usd(c.model, inp, out_tokens, read, write, batch=batch, unpriced=unpriced),
                batched_calls=int(batch),
            )
        out[c.step] = out.get(c.step, Usage()) + total
    return out


def expected_output(step: str, calls: int = 1) -> int:
    """Output tokens a real model writes in `step` over `calls` API calls: the sum of
    `turn_output` over them, so that the estimate and the measured night count alike."""
    calls = max(calls, 1)
    return sum(turn_output(step, turn, calls) for turn in range(1, calls + 1))


def turn_output(step: str, turn: int, turns: int) -> int:
    """What call `turn` of `turns` writes: the step's answer spread over its tool turns, the
    last of several turns only ends the conversation."""
    if turns > 1 and turn == turns:
        return END_OUTPUT
    return STEP_OUTPUT.get(step, DEFAULT_STEP_OUTPUT) // max(turns - 1, 1)


def with_expected_output(
    model: str, step: str, used: Usage, *, batch: bool = False, unpriced: Sequence[str] = ()
) -> float:
    """The dollars of `used` (a step's measured usage on `model`) had its calls written what a
    real model writes there (`expected_output`) when they wrote less: what a fake's terse
    answers cost with realistic output (benchmarks/night_cost.py, the estimate's test)."""
    out = max(used.output_tokens, expected_output(step, used.calls))
    return cost_usd(
        model,
        used.input_tokens,
        out,
        used.cache_read_tokens,
        used.cache_write_tokens,
        batch=batch,
        unpriced=unpriced,
    )
