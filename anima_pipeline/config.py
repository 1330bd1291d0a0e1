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

from pydantic import BaseModel, Field, SecretStr, ValidationError, field_validator, model_validator

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
    # Bounded input at import (docs/guards.md, README "Limits"): a longer message line is refused
    # with its file:line; timestamps outside [min_year, max_year] are refused the same way.
    max_message_chars: int = Field(default=256_000, ge=1)
    timestamp_min_year: int = Field(default=1970, ge=1, le=9998)
    timestamp_max_year: int = Field(default=2200, ge=2, le=9999)
    # Loss guards (sleep/guards.py, docs/guards.md): a step, and a whole night, may deprecate or
    # rewrite at most max(floor(share * N), guard_min) of the N memories the anima had active
    # when the step (the night) began, and never leave it with no active memory.
    guard_step_share: float = Field(default=0.25, gt=0, le=1)
    guard_night_share: float = Field(default=0.4, gt=0, le=1)
    guard_min: int = Field(default=3, ge=0)

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, v: str | None) -> str | None:
        if v is None:
            return v
        import psycopg
        from psycopg.conninfo import conninfo_to_dict

        try:
            conninfo_to_dict(v)
        except psycopg.Error:  # not chained: the text may hold a password
            raise ValueError(
                "not a PostgreSQL connection URL (postgresql://user@host:5432/dbname) or "
                "key=value connection string"
            ) from None
        return v

    @field_validator("engine")
    @classmethod
    def _engine(cls, v: str) -> str:
        if v not in ("offline", "anthropic"):
            raise ValueError(f"ANIMA_ENGINE must be 'offline' or 'anthropic', got {v!r}")
        return v

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str) -> str:
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {v!r} (an IANA name such as Asia/Shanghai)") from None
        return v

    @model_validator(mode="after")
    def _years(self) -> Settings:
        if self.timestamp_min_year >= self.timestamp_max_year:
            raise ValueError("ANIMA_TIMESTAMP_MIN_YEAR must be before ANIMA_TIMESTAMP_MAX_YEAR")
        return self

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
            shown = "(hidden)" if "KEY" in var or "URL" in var else repr(values.get(field))
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
    "ANIMA_MAX_MESSAGE_CHARS": "max_message_chars",
    "ANIMA_TIMESTAMP_MIN_YEAR": "timestamp_min_year",
    "ANIMA_TIMESTAMP_MAX_YEAR": "timestamp_max_year",
    "ANIMA_GUARD_STEP_SHARE": "guard_step_share",
    "ANIMA_GUARD_NIGHT_SHARE": "guard_night_share",
    "ANIMA_GUARD_MIN": "guard_min",
}


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings.from_env()
