"""The price table of the models the project can account for (Claude, and OpenAI's models for
ANIMA_ENGINE=openai), so every call's cost can be accounted and budgeted (llm/pricing.py) and
Settings can refuse a model without a row (config.py, below the engine): the table sits below both.

Prices are USD per million tokens, copied from Anthropic's pricing page
(platform.claude.com/docs/en/about-claude/pricing and the per-model overview pages).
Each row stores all four prices explicitly instead of deriving them from multipliers:
the 4.x models follow the usual 1.25x input (5-minute cache write) and 0.1x input
(cache hit) rule, but some newer models do not (Opus 5.5 reads the cache at 0.05x).

claude-haiku-5-5 (the project's small model, docs/cost.md) is priced by prompt length: a call
whose prompt (input + cache reads + cache writes) is over 100,000 tokens pays its `long` row
on every token of that call, output included (the pricing page, October 2026). An unknown
model is refused by name, which is better than a silently wrong cost.

OpenAI's rows are its standard tier (platform.openai.com/docs/pricing, as published in 2025;
check the page before trusting a bill to them). OpenAI caches a prompt's prefix by itself and
charges no premium for writing it: `cache_write` is the input price, `cache_read` its cached-input
price. A model of a local server (Ollama, vLLM, llama.cpp) costs nothing: ANIMA_LLM_UNPRICED names
such models explicitly and `price_row` gives them UNPRICED (cost 0, tokens still counted).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class ModelPrice:
    input: float
    output: float
    cache_write: float  # 5-minute ephemeral cache write
    cache_read: float  # cache hit / refresh
    # A prompt-length tier: a call whose prompt is over `long_above` tokens pays `long`.
    long: ModelPrice | None = None
    long_above: int = 0

    def for_prompt(self, prompt_tokens: int) -> ModelPrice:
        return self.long if self.long is not None and prompt_tokens > self.long_above else self


_OPUS_45 = ModelPrice(input=5.0, output=25.0, cache_write=6.25, cache_read=0.50)
_OPUS_4 = ModelPrice(input=15.0, output=75.0, cache_write=18.75, cache_read=1.50)
_SONNET_4 = ModelPrice(input=3.0, output=15.0, cache_write=3.75, cache_read=0.30)
_SONNET_5 = ModelPrice(input=2.0, output=10.0, cache_write=2.50, cache_read=0.20)
_FABLE_5 = ModelPrice(input=10.0, output=50.0, cache_write=12.50, cache_read=1.00)

# Keys are model-id prefixes; the longest key that matches at a "-" / "@" boundary wins,
# so dated ids ("claude-sonnet-4-5-20250929") resolve and "claude-opus-4-5" is not
# mistaken for "claude-opus-4".
PRICES: dict[str, ModelPrice] = {
    "claude-opus-4": _OPUS_4,  # claude-opus-4-0, claude-opus-4-20250514
    "claude-opus-4-1": _OPUS_4,
    "claude-opus-4-5": _OPUS_45,
    "claude-opus-4-6": _OPUS_45,
    "claude-opus-4-7": _OPUS_45,
    "claude-opus-4-8": _OPUS_45,
    "claude-sonnet-4": _SONNET_4,  # claude-sonnet-4-0, claude-sonnet-4-20250514
    "claude-sonnet-4-5": _SONNET_4,
    "claude-sonnet-4-6": _SONNET_4,
    "claude-haiku-4-5": ModelPrice(input=1.0, output=5.0, cache_write=1.25, cache_read=0.10),
    "claude-haiku-5-5": ModelPrice(
        input=0.10,
        output=0.50,
        cache_write=0.125,
        cache_read=0.01,
        long=ModelPrice(input=0.50, output=2.50, cache_write=0.625, cache_read=0.05),
        long_above=100_000,
    ),
    "claude-opus-5": _OPUS_45,
    "claude-opus-5-5": ModelPrice(input=4.0, output=20.0, cache_write=5.0, cache_read=0.20),
    "claude-sonnet-5": _SONNET_5,
    "claude-sonnet-5-5": _SONNET_5,
    "claude-fable-5": _FABLE_5,
    "claude-mythos-5": _FABLE_5,
    "claude-fable-5-1": ModelPrice(input=10.0, output=50.0, cache_write=12.50, cache_read=0.25),
    "claude-mythos-5-1": ModelPrice(input=10.0, output=50.0, cache_write=12.50, cache_read=0.25),
    # OpenAI (chat completions): input, output, cache write = input, cache read = cached input
    "gpt-4o": ModelPrice(input=2.50, output=10.0, cache_write=2.50, cache_read=1.25),
    "gpt-4o-mini": ModelPrice(input=0.15, output=0.60, cache_write=0.15, cache_read=0.075),
    "gpt-4.1": ModelPrice(input=2.0, output=8.0, cache_write=2.0, cache_read=0.50),
    "gpt-4.1-mini": ModelPrice(input=0.40, output=1.60, cache_write=0.40, cache_read=0.10),
    "gpt-4.1-nano": ModelPrice(input=0.10, output=0.40, cache_write=0.10, cache_read=0.025),
    "gpt-5": ModelPrice(input=1.25, output=10.0, cache_write=1.25, cache_read=0.125),
    "gpt-5-mini": ModelPrice(input=0.25, output=2.0, cache_write=0.25, cache_read=0.025),
    "gpt-5-nano": ModelPrice(input=0.05, output=0.40, cache_write=0.05, cache_read=0.005),
    "gpt-5.1": ModelPrice(input=1.25, output=10.0, cache_write=1.25, cache_read=0.125),
    "o3": ModelPrice(input=2.0, output=8.0, cache_write=2.0, cache_read=0.50),
    "o4-mini": ModelPrice(input=1.10, output=4.40, cache_write=1.10, cache_read=0.275),
}

# A model ANIMA_LLM_UNPRICED names (a local server's): nothing to pay, tokens still counted.
UNPRICED = ModelPrice(input=0.0, output=0.0, cache_write=0.0, cache_read=0.0)
ANY_MODEL = "*"  # in ANIMA_LLM_UNPRICED: every model the table has no row for


def row_for(table: Mapping[str, T], model: str) -> T | None:
    """The row of `table` whose key is the longest model-id prefix of `model` at a "-" / "@"
    boundary (so dated ids resolve and "claude-opus-4-5" is not "claude-opus-4"); None if none."""
    keys = [k for k in table if model == k or (model.startswith(k) and model[len(k)] in "-@")]
    return table[max(keys, key=len)] if keys else None


def price_row(model: str, unpriced: Sequence[str] = ()) -> ModelPrice | None:
    """The price of `model`: UNPRICED when ANIMA_LLM_UNPRICED (`unpriced`) names it (an id, or
    an id prefix at a "-" / "@" / ":" / "/" boundary: "llama3.1" is "llama3.1:8b"), else its
    row, else UNPRICED under "*", else None. A name wins over the table: a model served for
    free (a local copy, a proxy of one's own) is free whatever its list price."""
    for name in unpriced:
        if name != ANY_MODEL and (model == name or (model.startswith(name) and model[len(name)] in "-@:/")):
            return UNPRICED
    found = row_for(PRICES, model)
    if found is None and ANY_MODEL in unpriced:
        return UNPRICED
    return found


def unknown_model(model: str) -> str:
    """The refusal of a model the table has no row for, naming the known models."""
    known = ", ".join(sorted(PRICES))
    return (
        f"no price known for model {model!r}; known models (a dated id like "
        f"'claude-sonnet-4-5-20250929' also matches): {known}; a model that costs nothing (a "
        "local server's) is named in ANIMA_LLM_UNPRICED"
    )
