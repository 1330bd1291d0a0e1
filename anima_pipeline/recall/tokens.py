"""Token estimates for the working context.

Offline: a calibrated ratio, per script, because one ratio cannot serve both: English runs
at about 4 characters a token, Chinese at about one token a character. `chars_per_token`
(non-CJK characters per token) and `tokens_per_cjk_char` come from settings; the defaults
were measured with the Claude tokenizer the anthropic SDK shipped up to 0.38 (the last one
published) over LoCoMo dev, MemoryBank en/cn and the repository's sample week
(`benchmarks/token_ratio.py`, figures in docs/benchmarks.md) and rounded to the side that
over-counts English, so a budget packed by the estimate holds.

Claude: Anthropic's token counting endpoint (`messages.count_tokens`), one call per distinct
text (kept in a small cache: self blocks and a stored summary repeat turn after turn), minus
the framing a one-message request always carries.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from typing import Any, Protocol

CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")


class TokenCounter(Protocol):
    name: str

    def count(self, text: str) -> int: ...


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


class ClaudeCounter:
    """`messages.count_tokens` through the engine (its model, retries), cached by text."""

    name = "anthropic"
    CACHE = 4096

    def __init__(self, engine: Any) -> None:
        self.engine = engine
        self._cache: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()
        self._framing: int | None = None

    def _raw(self, text: str) -> int:
        return int(self.engine.count_tokens(text))

    def count(self, text: str) -> int:
        if not text:
            return 0
        key = hashlib.sha256(text.encode()).hexdigest()
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                return self._cache[key]
        if self._framing is None:
            self._framing = max(0, self._raw(".") - 1)
        n = max(1, self._raw(text) - self._framing)
        with self._lock:
            self._cache[key] = n
            while len(self._cache) > self.CACHE:
                self._cache.popitem(last=False)
        return n
