"""Settings from the environment (pydantic-settings, by prefix) and the step registry."""

from __future__ import annotations

from pathlib import Path

import pytest

from anima_pipeline.config import DEFAULT_TIMEZONE, Settings, env_name, get_settings
from anima_pipeline.core.errors import ConfigError, InputError
from anima_pipeline.core.steps import MEMORY_STEPS, STEP_ORDER, StepKey, UnknownStepError, parse_steps


def setenv(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)


def test_every_field_is_read_from_its_prefixed_variable_except_the_sdk_names(monkeypatch) -> None:
    names = {field: env_name(field) for field in Settings.model_fields}
    assert names["anthropic_api_key"] == "ANTHROPIC_API_KEY"
    assert names["anthropic_base_url"] == "ANTHROPIC_BASE_URL"
    others = {f: n for f, n in names.items() if not f.startswith("anthropic_")}
    assert others == {f: "ANIMA_" + f.upper() for f in others}
    monkeypatch.delenv("ANIMA_TIMEZONE", raising=False)
    setenv(
        monkeypatch,
        {
            "ANIMA_DATABASE_URL": "postgresql://x@h/db",
            "ANIMA_HOME": "~/anima-test-home",
            "ANIMA_MODEL": "m-1",
            "ANIMA_START_DATE": "2024-02-29",
            "ANIMA_BUDGET_TOKENS": "1000",
            "ANTHROPIC_BASE_URL": "http://127.0.0.1:9",
            "ANIMA_BUDGET_USD": "",  # empty = unset, as before
        },
    )
    s = Settings()
    assert s.database_url == "postgresql://x@h/db" and s.model == "m-1" and s.budget_tokens == 1000
    assert s.home == Path("~/anima-test-home").expanduser() and str(s.start_date) == "2024-02-29"
    assert s.anthropic_base_url == "http://127.0.0.1:9" and s.budget_usd is None
    assert s.timezone == DEFAULT_TIMEZONE


def test_settings_and_the_environment_agree(monkeypatch) -> None:
    """One way to build settings: Settings() reads the environment, arguments override it, and
    the process's cached settings (the CLI's) are the same reading."""
    setenv(
        monkeypatch,
        {"ANIMA_ENGINE": "anthropic", "ANIMA_TIMEZONE": "UTC", "ANIMA_RECALL_RESIDENT_TOP_N": "7"},
    )
    s = Settings()
    assert (s.engine, s.timezone, s.recall_resident_top_n) == ("anthropic", "UTC", 7)
    assert Settings(timezone="Europe/Paris").timezone == "Europe/Paris"  # an argument wins
    assert Settings(timezone="Europe/Paris").engine == "anthropic"  # the rest still from the environment
    get_settings.cache_clear()
    try:
        assert get_settings().model_dump() == s.model_dump()
    finally:
        get_settings.cache_clear()
    monkeypatch.delenv("ANIMA_TIMEZONE")
    assert Settings().timezone == DEFAULT_TIMEZONE


def test_a_bad_value_names_its_variable_and_never_shows_a_key(monkeypatch) -> None:
    setenv(monkeypatch, {"ANIMA_BUDGET_TOKENS": "many", "ANTHROPIC_API_KEY": "sk-ant-never-shown"})
    with pytest.raises(ConfigError, match=r"^ANIMA_BUDGET_TOKENS='many': "):
        Settings()
    setenv(monkeypatch, {"ANIMA_BUDGET_TOKENS": "1", "ANIMA_ENGINE": "gpt"})
    with pytest.raises(ValueError) as err:
        Settings()
    assert "ANIMA_ENGINE" in str(err.value) and "sk-ant-never-shown" not in str(err.value)
    setenv(
        monkeypatch, {"ANIMA_ENGINE": "offline", "ANIMA_LLM_STEP_LIMITS": '{"semantic_memory/extractd": {}}'}
    )
    with pytest.raises(
        ConfigError, match=r"ANIMA_LLM_STEP_LIMITS=.*unknown step\(s\) \['semantic_memory/extractd'\]"
    ):
        Settings()


def test_the_environment_is_read_in_any_case_json_per_step_and_arguments_win(monkeypatch) -> None:
    """The rules pydantic-settings applies here (kept by a test, since the CLI and the
    definitions rely on them): any case, an empty variable unset, JSON for the per-step dicts, the SDK's names
    for the Anthropic fields, an argument (by field name or by the SDK's name) over a variable."""
    setenv(
        monkeypatch,
        {
            "anima_review_mode": "true",
            "Anima_Workers": "3",
            "ANIMA_MODEL": "",
            "ANIMA_LLM_STEP_MODELS": '{"dreams/journal": "small"}',
            "ANIMA_LLM_STEP_LIMITS": '{"dreams/journal": {"max_tokens": 4096}}',
            "ANTHROPIC_API_KEY": "sk-from-env",
        },
    )
    s = Settings()
    assert s.review_mode is True and s.workers == 3 and s.model == Settings.model_fields["model"].default
    assert s.llm_step_models == {"dreams/journal": "small"}
    assert s.step_limits("dreams/journal")[0] == 4096
    assert s.anthropic_api_key is not None and s.anthropic_api_key.get_secret_value() == "sk-from-env"
    for argument in ("anthropic_api_key", "ANTHROPIC_API_KEY"):
        key = Settings(**{argument: "sk-given"}).anthropic_api_key
        assert key is not None and key.get_secret_value() == "sk-given", argument
    assert Settings(workers=5, unknown_field=1).workers == 5  # unknown arguments are ignored
    assert {"review_mode", "workers"} <= Settings().model_fields_set  # what the environment set


def test_the_step_registry_holds_the_step_functions_themselves() -> None:
    from anima_pipeline.night import registry as cycle

    for step in cycle.STEPS:
        assert callable(step.run) and step.run.__module__ == f"anima_pipeline.{step.module}"
        assert getattr(__import__(step.run.__module__, fromlist=[step.fn]), step.fn) is step.run
    # the registry runs in the one DAG order of core/steps.py, and its groups agree with core/steps.py's
    assert tuple(s.key for s in cycle.STEPS) == STEP_ORDER
    assert MEMORY_STEPS == tuple(s.key for s in cycle.STEPS if s.group in ("light_sleep", "deep_sleep"))
    assert len(MEMORY_STEPS) == 8 and MEMORY_STEPS[0] == "semantic_memory/extracted"


def test_unknown_steps_are_refused_once_naming_every_step() -> None:
    assert parse_steps(["dreams/journal", "conversations/cleaned"]) == [StepKey.CLEANED, StepKey.DREAM]
    with pytest.raises(
        UnknownStepError, match=r"unknown step\(s\) \['nope'\]; the steps are: conversations/cleaned, "
    ):
        parse_steps(["nope", "dreams/journal"])
    assert issubclass(UnknownStepError, InputError) and issubclass(UnknownStepError, ValueError)
