"""Resources of the night: the memory store and the engine.

Defaults come from the environment (Settings(), anima_pipeline/config.py). Values that are secret,
or may carry a password, are passed as dg.EnvVar references, so the UI and the run config
show the variable's name, never its value: ANTHROPIC_API_KEY and OPENAI_API_KEY always,
ANIMA_DATABASE_URL when it is set. Pass a literal key only in tests.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import get_args

import dagster as dg
from pydantic import Field, SecretStr

from anima_pipeline.config import DEFAULT_MODEL, EngineName, Settings
from anima_pipeline.store.db import Database, open_database


class MemoryStoreResource(dg.ConfigurableResource):
    """The memory database (PostgreSQL). Unset database_url means the embedded server under
    `home` (started on first use and reused afterwards), as everywhere else in anima."""

    database_url: str | None = Field(
        default=None, description="PostgreSQL URL of the memory store; unset = embedded server under home."
    )
    home: str | None = Field(default=None, description="ANIMA_HOME: embedded server, logs. Default ~/.anima.")

    def settings(self, base: Settings | None = None) -> Settings:
        base = base or Settings()
        changes: dict = {"database_url": self.database_url or None}
        if self.home:
            changes["home"] = Path(self.home).expanduser()
        return base.model_copy(update=changes)

    @contextmanager
    def open(self, settings: Settings | None = None) -> Iterator[Database]:
        """The store, migrated, for the duration of the block."""
        db = open_database(settings or self.settings())
        try:
            yield db
        finally:
            db.close()


class EngineResource(dg.ConfigurableResource):
    """Which engine plans the tool calls: offline heuristics (default, no network), the
    Anthropic Messages API or an OpenAI-compatible server. The keys are only ever read from
    ANTHROPIC_API_KEY and OPENAI_API_KEY."""

    engine: str = Field(default="offline", description=" | ".join(get_args(EngineName)))
    model: str | None = Field(
        default=None, description=f"The main model id; unset = ANIMA_MODEL, else {DEFAULT_MODEL}."
    )
    anthropic_api_key: str | None = Field(
        default=None, description="Set as EnvVar('ANTHROPIC_API_KEY'); never a literal in config."
    )
    anthropic_base_url: str | None = Field(default=None, description="API base URL override (tests).")
    openai_api_key: str | None = Field(
        default=None, description="Set as EnvVar('OPENAI_API_KEY'); never a literal in config."
    )
    openai_base_url: str | None = Field(
        default=None, description="The OpenAI-compatible server (OPENAI_BASE_URL; unset = OpenAI's API)."
    )
    budget_usd: float | None = Field(default=None, description="Stop the run's LLM calls at this cost.")
    budget_tokens: int | None = Field(
        default=None, description="Stop the run's LLM calls at this many tokens."
    )

    def apply(self, settings: Settings) -> Settings:
        """`settings` with this engine's fields (validated: a bad engine name is named). Only
        what was set is passed on, so a setting left to its default stays unset (the
        OpenAI-compatible engine refuses a model nobody named)."""
        values = settings.model_dump(exclude_unset=True)
        values.update(
            engine=self.engine,
            anthropic_api_key=SecretStr(self.anthropic_api_key) if self.anthropic_api_key else None,
            anthropic_base_url=self.anthropic_base_url,
            openai_api_key=SecretStr(self.openai_api_key) if self.openai_api_key else None,
            openai_base_url=self.openai_base_url,
            budget_usd=self.budget_usd,
            budget_tokens=self.budget_tokens,
        )
        if self.model:
            values["model"] = self.model
        return Settings(**values)


def _env_or_none(name: str) -> dg.EnvVar | None:
    return dg.EnvVar(name) if os.environ.get(name) else None


def build_resources(settings: Settings | None = None) -> dict[str, dg.ConfigurableResource]:
    """The resources from the environment: secrets by reference (EnvVar), the rest by value.
    With explicit `settings` (tests, the CLI), its database URL is passed as is."""
    s = settings or Settings()
    url = (_env_or_none("ANIMA_DATABASE_URL") or s.database_url) if settings is None else s.database_url
    return {
        "memory_store": MemoryStoreResource(
            database_url=url,
            home=str(s.home),
        ),
        "anima_engine": EngineResource(
            engine=s.engine,
            model=s.model if "model" in s.model_fields_set else None,
            anthropic_api_key=_env_or_none("ANTHROPIC_API_KEY"),
            anthropic_base_url=s.anthropic_base_url,
            openai_api_key=_env_or_none("OPENAI_API_KEY"),
            openai_base_url=s.openai_base_url,
            budget_usd=s.budget_usd,
            budget_tokens=s.budget_tokens,
        ),
    }


@dg.definitions
def resources() -> dg.Definitions:
    return dg.Definitions(resources=build_resources())
