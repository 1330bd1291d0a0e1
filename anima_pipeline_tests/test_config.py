"""Settings from the environment (pydantic-settings) and the step registry."""

from __future__ import annotations

from pathlib import Path

import pytest

from anima_pipeline.config import DEFAULT_TIMEZONE, Settings, env_name, get_settings


def test_every_field_is_read_from_its_prefixed_variable_except_the_sdk_names() -> None:
    names = {field: env_name(field) for field in Settings.model_fields}
    assert names["anthropic_api_key"] == "ANTHROPIC_API_KEY"
    assert names["anthropic_base_url"] == "ANTHROPIC_BASE_URL"
    others = {f: n for f, n in names.items() if not f.startswith("anthropic_")}
    assert others == {f: "ANIMA_" + f.upper() for f in others}
    s = Settings.from_env(
        {
            "ANIMA_DATABASE_URL": "postgresql://x@h/db",
            "ANIMA_HOME": "~/anima-test-home",
            "ANIMA_MODEL": "m-1",
            "ANIMA_START_DATE": "2024-02-29",
            "ANIMA_BUDGET_TOKENS": "1000",
            "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
            "ANIMA_BUDGET_USD": "",  # empty = unset, as before
        }
    )
    assert s.database_url == "postgresql://x@h/db" and s.model == "m-1" and s.budget_tokens == 1000
    assert s.home == Path("~/anima-test-home").expanduser() and str(s.start_date) == "2024-02-29"
    assert s.anthropic_base_url == "http://127.0.0.1:9" and s.budget_usd is None
    assert s.timezone == DEFAULT_TIMEZONE


def test_direct_construction_ignores_the_environment_and_from_env_reads_it(monkeypatch) -> None:
    monkeypatch.setenv("ANIMA_ENGINE", "anthropic")
    monkeypatch.setenv("ANIMA_TIMEZONE", "Europe/Paris")
    assert Settings().engine == "offline" and Settings().timezone == DEFAULT_TIMEZONE
    s = Settings.from_env()
    assert (s.engine, s.timezone) == ("anthropic", "Europe/Paris")
    assert Settings.from_env({}).engine == "offline"  # a given mapping replaces os.environ
    get_settings.cache_clear()
    try:
        assert get_settings().timezone == "Europe/Paris"
    finally:
        get_settings.cache_clear()


def test_a_bad_value_names_its_variable_and_never_shows_a_key() -> None:
    with pytest.raises(ValueError, match=r"^ANIMA_BUDGET_TOKENS='many': "):
        Settings.from_env({"ANIMA_BUDGET_TOKENS": "many", "ANTHROPIC_API_KEY": "sk-ant-never-shown"})
    with pytest.raises(ValueError) as err:
        Settings.from_env({"ANIMA_ENGINE": "gpt", "ANTHROPIC_API_KEY": "sk-ant-never-shown"})
    assert "ANIMA_ENGINE" in str(err.value) and "sk-ant-never-shown" not in str(err.value)


def test_the_step_registry_holds_the_step_functions_themselves() -> None:
    from anima_pipeline.sleep import cycle

    for step in cycle.STEPS:
        assert callable(step.run) and step.run.__module__ == f"anima_pipeline.sleep.{step.module}"
        assert getattr(__import__(step.run.__module__, fromlist=[step.fn]), step.fn) is step.run
    keys = cycle.memory_step_keys()
    assert (
        len(keys) == 8
        and keys[0] == "semantic_memory/extracted"
        and keys[-1] == "semantic_memory/pins_reviewed"
    )
