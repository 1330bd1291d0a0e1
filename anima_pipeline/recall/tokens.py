"""Token estimates for the working context, without an engine.

A calibrated ratio, per script, because one ratio cannot serve both: English runs at about 4
characters a token, Chinese at about one token a character. `chars_per_token` (non-CJK
characters per token) and `tokens_per_cjk_char` come from settings; the defaults were measured
with the Claude tokenizer the anthropic SDK shipped up to 0.38 (the last one published) over
LoCoMo dev, MemoryBank en/cn and the repository's sample week (`benchmarks/token_ratio.py`,
figures in docs/benchmarks.md) and rounded to the side that over-counts English, so a budget
packed by the estimate holds. The working context packs by this estimate item by item; an
engine with a count of its own (`Engine.token_counter`, llm/contract.py) measures the result.
"""

from __future__ import annotations

import re

CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")


class RatioCounter:
    """tokens ≈ non-CJK characters / chars_per_token + CJK characters × tokens_per_cjk_char."""

    name = "ratio"

    def __init__(self, chars_per_token: float = 4.0, tokens_per_cjk_char: float = 1.1) -> None:
        self.chars_per_token, self.tokens_per_cjk_char = chars_per_token, tokens_per_cjk_char

    def count(self, text: str) -> int:
        if not text:
            return 0
        cjk = len(CJK.findall(text))
        return round((len(text) - cjk) / self.chars_per_token + cjk * self.tokens_per_cjk_char)
