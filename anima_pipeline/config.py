"""Configuration from environment variables, with safe defaults (DESIGN §1).

Read once per process through `get_settings()`; tests build `Settings(...)` directly.
The Anthropic key is a SecretStr so that it never renders in a repr, a log or an error.
"""

from __future__ import annotations

import os
from datetime import date
from functools import lru_cache
from pathlib import Path
from zoneinfo import ZoneInfo

from pydantic import BaseModel, SecretStr, field_validator

DEFAULT_MODEL = "claude-sonnet-5-5"


class Settings(BaseModel):
    database_url: str | None = None
    home: Path = Path("~/.anima").expanduser()
    engine: str = "offline"
    model: str = DEFAULT_MODEL
    anthropic_api_key: SecretStr | None = None
    anthropic_base_url: str | None = None
    timezone: str = "Asia/Shanghai"
    start_date: date = date(2020, 1, 1)
    budget_usd: float | None = None
    budget_tokens: int | None = None

    @field_validator("engine")
    @classmethod
    def _engine(cls, v: str) -> str:
        if v not in ("offline", "anthropic"):
            raise ValueError(f"ANIMA_ENGINE must be 'offline' or 'anthropic', got {v!r}")
        return v

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str) -> str:
        ZoneInfo(v)  # raises a clear ZoneInfoNotFoundError naming the zone
        return v

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    @property
    def log_dir(self) -> Path:
        return self.home / "logs"

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        e = os.environ if env is None else env

        def opt(name: str) -> str | None:
            v = e.get(name)
            return v if v not in (None, "") else None

        values: dict = {
            "database_url": opt("ANIMA_DATABASE_URL"),
            "home": Path(opt("ANIMA_HOME") or "~/.anima").expanduser(),
            "engine": opt("ANIMA_ENGINE") or "offline",
            "model": opt("ANIMA_MODEL") or DEFAULT_MODEL,
            "anthropic_api_key": opt("ANTHROPIC_API_KEY"),
            "anthropic_base_url": opt("ANTHROPIC_BASE_URL"),
            "timezone": opt("ANIMA_TIMEZONE") or "Asia/Shanghai",
        }
        if opt("ANIMA_START_DATE"):
            values["start_date"] = opt("ANIMA_START_DATE")
        if opt("ANIMA_BUDGET_USD"):
            values["budget_usd"] = float(opt("ANIMA_BUDGET_USD"))  # type: ignore[arg-type]
        if opt("ANIMA_BUDGET_TOKENS"):
            values["budget_tokens"] = int(opt("ANIMA_BUDGET_TOKENS"))  # type: ignore[arg-type]
        return cls(**values)


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings.from_env()
