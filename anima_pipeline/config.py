"""Configuration from environment variables, with safe defaults (DESIGN §1).

Read once per process through `get_settings()`; tests build `Settings(...)` directly.
The Anthropic key is a SecretStr so that it never renders in a repr, a log or an error.
"""

from __future__ import annotations

import os
from datetime import date
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, Field, SecretStr, ValidationError, field_validator

DEFAULT_MODEL = "claude-sonnet-5-5"
Thinking = Literal["adaptive", "disabled", "model_default"]
Effort = Literal["low", "medium", "high", "xhigh", "max"]
LlmMode = Literal["sync", "batch"]


class StepLimits(BaseModel):
    """Output limit and thinking settings of one step (any field left None: the global one)."""

    max_tokens: int | None = Field(None, ge=256)
    thinking: Thinking | None = None
    effort: Effort | None = None


class Settings(BaseModel):
    database_url: str | None = None
    home: Path = Path("~/.anima").expanduser()
    engine: str = "offline"
    model: str = DEFAULT_MODEL
    anthropic_api_key: SecretStr | None = None
    anthropic_base_url: str | None = None
    timezone: str = "Asia/Shanghai"
    # None: the first day recorded by `anima import` (store/calendar.py), else yesterday
    start_date: date | None = None
    budget_usd: float | None = None
    budget_tokens: int | None = None
    # Dagster runs per scheduled night: the day's animas split by a stable hash (docs/deploy.md)
    night_shards: int = 1
    # LLM output limits. Thinking tokens count against max_tokens, so the default leaves
    # room for a model that thinks before its tool calls; a max_tokens stop is retried
    # once with the limit times llm_max_tokens_retry_factor (capped at the ceiling).
    llm_max_tokens: int = Field(16_000, ge=256)
    llm_max_tokens_retry_factor: float = Field(2.0, ge=1.0)
    llm_max_tokens_ceiling: int = Field(64_000, ge=256)
    llm_thinking: Thinking = "model_default"  # model_default: send no `thinking` field
    llm_effort: Effort | None = None  # None: send no output_config.effort
    # Per step (the step key, e.g. "semantic_memory/extracted"), JSON in ANIMA_LLM_STEP_LIMITS.
    llm_step_limits: dict[str, StepLimits] = Field(default_factory=dict)
    # Request timeout per attempt; None derives it from the output ceiling (a non-streaming
    # request must be allowed to produce its largest answer).
    llm_timeout_s: float | None = Field(None, gt=0)
    llm_max_retries: int = Field(4, ge=0, le=10)
    llm_max_retry_wait_s: float = Field(60.0, ge=0)
    # How many LLM requests may be in flight at once in one process (threads of a night's
    # pool); across runs Dagster's pool named after the provider bounds the runs.
    llm_concurrency: int = Field(8, ge=1)
    # sync: one request at a time per anima; batch: every anima's current turn goes out in
    # one Message Batches API request (half price, latency of minutes to hours).
    llm_mode: LlmMode = "sync"
    llm_batch_window_s: float = Field(2.0, ge=0)
    llm_batch_poll_s: float = Field(30.0, gt=0)

    @field_validator("engine")
    @classmethod
    def _engine(cls, v: str) -> str:
        if v not in ("offline", "anthropic"):
            raise ValueError(f"ANIMA_ENGINE must be 'offline' or 'anthropic', got {v!r}")
        return v

    @field_validator("night_shards")
    @classmethod
    def _shards(cls, v: int) -> int:
        if v < 1:
            raise ValueError(f"ANIMA_NIGHT_SHARDS must be at least 1, got {v}")
        return v

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str) -> str:
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {v!r} (an IANA name such as Asia/Shanghai)") from None
        return v

    @field_validator("llm_step_limits", mode="before")
    @classmethod
    def _step_limits(cls, v: Any) -> Any:
        if isinstance(v, str):
            import json

            try:
                v = json.loads(v)
            except json.JSONDecodeError as exc:
                raise ValueError(f"must be a JSON object of step -> limits: {exc}") from None
        if isinstance(v, dict):
            from anima_pipeline.sleep.cycle import STEP_KEYS

            unknown = sorted(set(v) - set(STEP_KEYS))
            if unknown:
                raise ValueError(f"unknown step(s) {unknown}; the steps are: {', '.join(STEP_KEYS)}")
        return v

    def step_limits(self, step: str) -> tuple[int, Thinking, Effort | None]:
        """max_tokens, thinking and effort for one step: its override, else the global."""
        own = self.llm_step_limits.get(step) or StepLimits()
        return (
            own.max_tokens or self.llm_max_tokens,
            own.thinking or self.llm_thinking,
            own.effort or self.llm_effort,
        )

    @property
    def llm_request_timeout_s(self) -> float:
        """Per attempt: the configured timeout, else long enough for the output ceiling at
        a slow ~40 tokens/s plus a minute (a 64k ceiling gives 27 minutes)."""
        if self.llm_timeout_s is not None:
            return self.llm_timeout_s
        return max(120.0, 60.0 + self.llm_max_tokens_ceiling / 40)

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    @property
    def log_dir(self) -> Path:
        return self.home / "logs"

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        """Settings from ANIMA_* variables; a bad value raises ValueError naming the variable."""
        e = os.environ if env is None else env
        values: dict = {"home": Path(e.get("ANIMA_HOME") or "~/.anima").expanduser()}
        for var, field in _ENV.items():
            raw = e.get(var)
            if raw not in (None, ""):
                values[field] = raw
        try:
            return cls(**values)
        except ValidationError as exc:
            err = exc.errors()[0]
            field = str(err["loc"][0]) if err["loc"] else ""
            var = next((v for v, f in _ENV.items() if f == field), field)
            msg = err["msg"].removeprefix("Value error, ")
            shown = "(hidden)" if "KEY" in var else repr(values.get(field))
            raise ValueError(f"{var}={shown}: {msg}") from None


# environment variable -> Settings field (ANIMA_HOME is handled apart: it is a path with ~)
_ENV: dict[str, str] = {
    "ANIMA_DATABASE_URL": "database_url",
    "ANIMA_ENGINE": "engine",
    "ANIMA_MODEL": "model",
    "ANTHROPIC_API_KEY": "anthropic_api_key",
    "ANTHROPIC_BASE_URL": "anthropic_base_url",
    "ANIMA_TIMEZONE": "timezone",
    "ANIMA_START_DATE": "start_date",
    "ANIMA_BUDGET_USD": "budget_usd",
    "ANIMA_BUDGET_TOKENS": "budget_tokens",
    "ANIMA_NIGHT_SHARDS": "night_shards",
    "ANIMA_LLM_MAX_TOKENS": "llm_max_tokens",
    "ANIMA_LLM_MAX_TOKENS_RETRY_FACTOR": "llm_max_tokens_retry_factor",
    "ANIMA_LLM_MAX_TOKENS_CEILING": "llm_max_tokens_ceiling",
    "ANIMA_LLM_THINKING": "llm_thinking",
    "ANIMA_LLM_EFFORT": "llm_effort",
    "ANIMA_LLM_STEP_LIMITS": "llm_step_limits",
    "ANIMA_LLM_TIMEOUT_S": "llm_timeout_s",
    "ANIMA_LLM_MAX_RETRIES": "llm_max_retries",
    "ANIMA_LLM_MAX_RETRY_WAIT_S": "llm_max_retry_wait_s",
    "ANIMA_LLM_CONCURRENCY": "llm_concurrency",
    "ANIMA_LLM_MODE": "llm_mode",
    "ANIMA_LLM_BATCH_WINDOW_S": "llm_batch_window_s",
    "ANIMA_LLM_BATCH_POLL_S": "llm_batch_poll_s",
}


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings.from_env()
