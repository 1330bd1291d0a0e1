"""The provider's rate limits, kept on our side so a night of 10,000 animas runs at the pace
the organisation's limits allow instead of at the pace of 429s (docs/deploy.md, "Throughput").

Anthropic limits requests per minute (RPM), input tokens per minute (ITPM: uncached input and
cache writes; cache reads do not count) and output tokens per minute (OTPM), per model, as
token buckets that refill continuously. This is the same bucket on the client: a request waits
until the request bucket has a token and neither token bucket is in debt; its real usage is
debited when the answer comes back (a request's size is only known then), so a bucket can run
into debt by one request and the next ones wait it off. A 429 pauses every request of the
process for its `retry-after` (the server knows better than our buckets).

The limits are the deployment's; the runs that may call the provider at once share them:
each takes 1/`shares` of each limit (the Dagster pool's slot count, defs/night/assets.py).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from anima_pipeline.config import Settings
from anima_pipeline.core.errors import ConfigError
from anima_pipeline.llm.contract import Usage


class Bucket:
    """A continuously refilled bucket of `per_minute` units, at most one minute's worth."""

    def __init__(self, per_minute: float, now: float) -> None:
        self.rate = per_minute / 60.0
        self.capacity = float(per_minute)
        self.level = self.capacity
        self.at = now

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.at) * self.rate)
        self.at = now

    def wait_for(self, need: float) -> float:
        """Seconds until the level reaches `need` (0 when it has)."""
        return max(0.0, (need - self.level) / self.rate) if self.rate else math.inf


class RateLimiter:
    """Thread-safe limits of one process, per model (every model has its own buckets)."""

    def __init__(
        self,
        requests_per_minute: int | None = None,
        input_tokens_per_minute: int | None = None,
        output_tokens_per_minute: int | None = None,
        *,
        shares: int = 1,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if shares < 1:
            raise ConfigError(f"shares must be >= 1, got {shares}")
        self.limits = {
            "requests": requests_per_minute,
            "input": input_tokens_per_minute,
            "output": output_tokens_per_minute,
        }
        self.shares = shares
        self.clock, self.sleep = clock, sleep
        self._buckets: dict[str, dict[str, Bucket]] = {}
        self._paused_until = 0.0
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> RateLimiter:
        """The limits of ANIMA_LLM_*_PER_MINUTE, this run's share of them."""
        llm = settings.llm
        return cls(
            llm.requests_per_minute,
            llm.input_tokens_per_minute,
            llm.output_tokens_per_minute,
            shares=llm.rate_shares,
        )

    @property
    def active(self) -> bool:
        return any(v for v in self.limits.values())

    def _of(self, model: str, now: float) -> dict[str, Bucket]:
        if model not in self._buckets:
            self._buckets[model] = {
                name: Bucket(limit / self.shares, now) for name, limit in self.limits.items() if limit
            }
        return self._buckets[model]

    def acquire(self, model: str) -> None:
        """Block until a request to `model` may go out; take its request token."""
        while True:
            with self._lock:
                now = self.clock()
                buckets = self._of(model, now)
                for b in buckets.values():
                    b.refill(now)
                wait = max(
                    [self._paused_until - now]
                    + [b.wait_for(1.0 if name == "requests" else 0.0) for name, b in buckets.items()]
                )
                if wait <= 0:
                    if "requests" in buckets:
                        buckets["requests"].level -= 1
                    return
            self.sleep(wait)

    def record(self, model: str, usage: Usage) -> None:
        """Debit what a request used: uncached input and cache writes, and its output."""
        with self._lock:
            buckets = self._of(model, self.clock())
            if "input" in buckets:
                buckets["input"].level -= usage.input_tokens + usage.cache_write_tokens
            if "output" in buckets:
                buckets["output"].level -= usage.output_tokens

    def pause(self, seconds: float) -> None:
        """The server said 429 with `retry-after`: no request of this process before then."""
        with self._lock:
            self._paused_until = max(self._paused_until, self.clock() + max(seconds, 0.0))
