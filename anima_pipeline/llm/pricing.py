"""Cost accounting over the price table (core/prices.py): the cost of one call, the batch
discount, the shortest prefix the API caches.

The Message Batches API bills every token class at half the table's prices (BATCH_DISCOUNT);
prompt caching still applies inside a batch. Not modelled: 1-hour cache writes (we only
send the default 5-minute `ephemeral`), `inference_geo` surcharges, fast mode, and
prompt-length tiers other than Haiku 5.5's (core/prices.py). An unknown model raises
UnknownModelError, which is better than a silently wrong cost; a model ANIMA_LLM_UNPRICED names
(`unpriced`, a local server's) costs 0 with its tokens counted.
"""

from __future__ import annotations

from collections.abc import Sequence

from anima_pipeline.core.prices import ModelPrice, price_row, row_for, unknown_model
from anima_pipeline.llm.failures import UnknownModelError

BATCH_DISCOUNT = 0.5  # Message Batches API: 50 % of the standard price, every token class

# The shortest prefix the API caches at a breakpoint; shorter prefixes are billed as plain
# input without an error. Same prefix matching as PRICES; unknown models assume 1,024.
MIN_CACHE_TOKENS: dict[str, int] = {
    "claude-opus-4": 1024,
    "claude-opus-4-1": 1024,
    "claude-opus-4-5": 4096,
    "claude-opus-4-6": 4096,
    "claude-opus-4-7": 4096,
    "claude-opus-4-8": 1024,
    "claude-sonnet-4": 1024,
    "claude-haiku-4-5": 4096,
    # not published for Haiku 5.5 when this row was written: assume Haiku 4.5's (a shorter
    # real minimum only makes the small model's steps cheaper than estimated)
    "claude-haiku-5-5": 4096,
    "claude-opus-5": 512,
    "claude-sonnet-5": 1024,
    "claude-fable-5": 512,
    "claude-mythos-5": 512,
}


def min_cache_tokens(model: str) -> int:
    found = row_for(MIN_CACHE_TOKENS, model)
    return 1024 if found is None else found


def price_for(model: str, unpriced: Sequence[str] = ()) -> ModelPrice:
    """The price row for `model` (UNPRICED when `unpriced` names it); raises
    `UnknownModelError` naming the known models."""
    found = price_row(model, unpriced)
    if found is None:
        raise UnknownModelError(unknown_model(model))
    return found


def cost_usd(
    model: str,
    input: int,
    output: int,
    cache_read: int = 0,
    cache_write: int = 0,
    *,
    batch: bool = False,
    unpriced: Sequence[str] = (),
) -> float:
    """Cost of one call. `input` is the uncached input (the API's `input_tokens`, which
    already excludes cache reads and writes); `batch` applies the batch discount."""
    p = price_for(model, unpriced).for_prompt(input + cache_read + cache_write)
    total = input * p.input + output * p.output + cache_read * p.cache_read + cache_write * p.cache_write
    if batch:
        total *= BATCH_DISCOUNT
    return round(total / 1_000_000, 6)
