"""What every engine that calls a model's HTTP API holds, whatever the provider: its settings,
its model (priced, or named unpriced: docs/cost.md), its request bounds, its rate limiter and
its retry layer (llm/retry.py). The Anthropic and the OpenAI-compatible engines both set it up
here, so a bound or a price is checked the same way for each."""

from __future__ import annotations

from types import ModuleType

from anima_pipeline.config import Settings
from anima_pipeline.llm.budget import Budget
from anima_pipeline.llm.pricing import price_for
from anima_pipeline.llm.ratelimit import RateLimiter
from anima_pipeline.llm.retry import ApiCalls, check_bounds


class ApiEngine:
    """The part of an engine's state that does not depend on its provider's API shape."""

    settings: Settings
    unpriced: list[str]
    model: str
    base_url: str | None
    budget: Budget | None
    timeout: float
    max_retries: int
    max_retry_wait: float
    limiter: RateLimiter

    def _check(
        self,
        model: str,
        *,
        settings: Settings | None,
        timeout: float,
        max_retries: int,
        max_retry_wait: float,
    ) -> None:
        """Refused at construction rather than at the first request: a model without a price
        (the budget would mean nothing) and request bounds out of range."""
        self.settings = settings or Settings()
        self.unpriced = self.settings.llm.unpriced
        price_for(model, self.unpriced)
        check_bounds(timeout, max_retries, max_retry_wait)

    def _connect(
        self,
        api: ModuleType,
        *,
        base_error: type[Exception],
        provider: str,
        secret: str,
        model: str,
        base_url: str | None,
        budget: Budget | None,
        timeout: float,
        max_retries: int,
        max_retry_wait: float,
        concurrency: int | None,
        limiter: RateLimiter | None,
    ) -> ApiCalls:
        """Keep the connection's settings and build the retry layer every request goes through."""
        self.model = model
        self.base_url = base_url
        self.budget = budget
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_retry_wait = max_retry_wait
        self.limiter = limiter or RateLimiter.from_settings(self.settings)
        return ApiCalls(
            api,
            base_error=base_error,
            provider=provider,
            secret=secret,
            timeout=timeout,
            max_retries=max_retries,
            max_retry_wait=max_retry_wait,
            concurrency=concurrency or self.settings.llm.in_flight,
            limiter=self.limiter,
        )
