"""Claude's token count of a text (the Anthropic engine's `token_counter`).

Anthropic's token counting endpoint (`messages.count_tokens`), one call per distinct text
(kept in a small cache: self blocks and a stored summary repeat turn after turn), minus the
framing a one-message request always carries. The working context packs by the ratio estimate
(recall/tokens.py) and measures with this count.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from anima_pipeline.llm.anthropic.engine import AnthropicEngine


class ClaudeCounter:
    """`messages.count_tokens` through the engine (its model, retries), cached by text."""

    name = "anthropic"
    CACHE = 4096

    def __init__(self, engine: AnthropicEngine) -> None:
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
