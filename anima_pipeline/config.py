"""Configuration from environment variables, with safe defaults (DESIGN §1).

Read once per process through `get_settings()`; tests build `Settings(...)` directly.
The Anthropic key is a SecretStr so that it never renders in a repr, a log or an error.
"""

from __future__ import annotations

import os
from datetime import date
from functools import lru_cache
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, SecretStr, ValidationError, field_validator

DEFAULT_MODEL = "claude-sonnet-5-5"


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
}


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings.from_env()
