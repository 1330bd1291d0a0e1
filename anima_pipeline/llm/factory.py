"""Which engine ANIMA_ENGINE names, and the engine a run uses.

The one place the setting meets the engine classes: adding an engine is its module, a line
in ENGINES and its name in config.EngineName. Offline is the default so that a run without
configuration (CI, a fresh checkout) never spends money or needs a network; the Anthropic and
the OpenAI-compatible engines are opt-in and refuse to start without what they need (a key, a
model the server serves) rather than failing at the first step.
"""

from __future__ import annotations

from anima_pipeline.config import EngineName, Settings
from anima_pipeline.llm.anthropic.engine import AnthropicEngine
from anima_pipeline.llm.budget import Budget
from anima_pipeline.llm.contract import Engine
from anima_pipeline.llm.offline import OfflineEngine
from anima_pipeline.llm.openai.engine import OpenAIEngine

ENGINES: dict[EngineName, type[Engine]] = {
    "offline": OfflineEngine,
    "anthropic": AnthropicEngine,
    "openai": OpenAIEngine,
}


def engine_class(settings: Settings) -> type[Engine]:
    """The engine ANIMA_ENGINE names, as a class: what it is (its pool, whether it is priced,
    how its animas run) is known before one is built."""
    return ENGINES[settings.engine]


def make_engine(settings: Settings, budget: Budget | None = None) -> Engine:
    """The run's engine. Without an explicit `budget`, an engine that spends gets one from
    ANIMA_BUDGET_USD / ANIMA_BUDGET_TOKENS (unlimited if neither is set); pass the run's
    shared `Budget` when several engines must draw on one limit."""
    return engine_class(settings).from_settings(settings, budget)
