"""Builds the engine a run uses from its settings.

Offline is the default so that a run without configuration (CI, a fresh checkout) never
spends money or needs a network; the Anthropic engine is opt-in and refuses to start
without a key rather than failing at the first step.
"""

from __future__ import annotations

from anima_pipeline.config import Settings
from anima_pipeline.llm.budget import Budget
from anima_pipeline.llm.contract import Engine
from anima_pipeline.llm.failures import EngineConfigError
from anima_pipeline.llm.offline import OfflineEngine


def make_engine(settings: Settings, budget: Budget | None = None) -> Engine:
    """The run's engine. Without an explicit `budget`, the Anthropic engine gets one from
    ANIMA_BUDGET_USD / ANIMA_BUDGET_TOKENS (unlimited if neither is set); pass the run's
    shared `Budget` when several engines must draw on one limit."""
    if settings.engine == "offline":
        return OfflineEngine()
    if settings.engine != "anthropic":
        raise EngineConfigError(
            f"unknown engine {settings.engine!r} (ANIMA_ENGINE must be offline or anthropic)"
        )
    key = settings.anthropic_api_key
    if key is None or not key.get_secret_value().strip():
        raise EngineConfigError(
            "ANIMA_ENGINE=anthropic needs an Anthropic API key in the ANTHROPIC_API_KEY environment "
            "variable, and it is not set (or empty); set it, or use ANIMA_ENGINE=offline"
        )
    from anima_pipeline.llm.anthropic.engine import AnthropicEngine  # the SDK loads only when used

    collector = None
    if settings.llm_mode == "batch":
        from anima_pipeline.llm.anthropic.batches import BatchCollector

        collector = BatchCollector(
            window_s=settings.llm_batch_window_s,
            poll_s=settings.llm_batch_poll_s,
            max_attempts=settings.llm_max_retries + 1,  # the same retries as a synchronous request
        )
    return AnthropicEngine(
        model=settings.model,
        api_key=key,
        base_url=settings.anthropic_base_url,
        budget=budget if budget is not None else Budget.from_settings(settings),
        timeout=settings.llm_request_timeout_s,
        max_retries=settings.llm_max_retries,
        max_retry_wait=settings.llm_max_retry_wait_s,
        settings=settings,
        collector=collector,
    )
