"""Settings from the environment (pydantic-settings, by prefix) and the step registry."""

from __future__ import annotations

from pathlib import Path

import pytest

from anima_pipeline.config import DEFAULT_TIMEZONE, Group, Settings, env_name, get_settings
from anima_pipeline.core.errors import ConfigError, InputError
from anima_pipeline.core.steps import MEMORY_STEPS, STEP_ORDER, StepKey, UnknownStepError, parse_steps


def setenv(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)


def paths() -> list[str]:
    """Every setting by its path: "home", "llm.max_tokens", …"""
    out = []
    for name, info in Settings.model_fields.items():
        group = info.annotation
        if isinstance(group, type) and issubclass(group, Group):
            out += [f"{name}.{leaf}" for leaf in group.model_fields]
        else:
            out.append(name)
    return out


def test_every_field_is_read_from_its_prefixed_variable_except_the_sdk_names(monkeypatch) -> None:
    names = {path: env_name(path) for path in paths()}
    assert names["anthropic_api_key"] == "ANTHROPIC_API_KEY"
    assert names["anthropic_base_url"] == "ANTHROPIC_BASE_URL"
    assert (names["openai_api_key"], names["openai_base_url"]) == ("OPENAI_API_KEY", "OPENAI_BASE_URL")
    assert (names["llm.max_tokens"], names["guards.min"], names["embedder.kind"]) == (
        "ANIMA_LLM_MAX_TOKENS",
        "ANIMA_GUARD_MIN",
        "ANIMA_EMBEDDER",
    )
    for path, name in names.items():  # a group's fields keep their flat names: ANIMA_<GROUP>_<FIELD>
        head, _, leaf = path.partition(".")
        if not head.startswith(("anthropic_", "openai_")):
            word = {"guards": "GUARD"}.get(head, head.upper())
            assert name == "_".join(p for p in ("ANIMA", word, leaf.upper()) if p and p != "KIND"), path
    assert len(set(names.values())) == len(names)  # no two settings share a variable
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
    assert (s.engine, s.timezone, s.recall.resident_top_n) == ("anthropic", "UTC", 7)
    assert Settings(timezone="Europe/Paris").timezone == "Europe/Paris"  # an argument wins
    assert Settings(timezone="Europe/Paris").engine == "anthropic"  # the rest still from the environment
    get_settings.cache_clear()
    try:
        assert get_settings().model_dump() == s.model_dump()
    finally:
        get_settings.cache_clear()
    monkeypatch.delenv("ANIMA_TIMEZONE")
    assert Settings().timezone == DEFAULT_TIMEZONE


def test_groups_read_their_flat_variables_and_arguments_merge_into_them(monkeypatch) -> None:
    setenv(
        monkeypatch,
        {
            "ANIMA_LLM_MAX_TOKENS": "3000",
            "ANIMA_GUARD_MIN": "5",
            "ANIMA_CONTEXT_SOFT_TOKENS": "100",
            "anima_working_slim_chars": "90",
            "ANIMA_EMBEDDER": "http",
            "ANIMA_EMBEDDER_URL": "http://x",
            # names that were never settings stay ignored: no group is read whole, nor by its field name
            "ANIMA_LLM": '{"mode": "batch"}',
            "ANIMA_GUARDS_MIN": "9",
            "ANIMA_EMBEDDER_KIND": "local",
        },
    )
    s = Settings()
    assert (s.llm.max_tokens, s.llm.mode, s.guards.min, s.context.soft_tokens, s.working.slim_chars) == (
        3000,
        "sync",
        5,
        100,
        90,
    )
    assert (s.embedder.kind, s.embedder.url) == ("http", "http://x")
    assert s.llm.model_fields_set == {"max_tokens"}  # what the environment set, per group
    given = Settings(llm={"concurrency": 3}, embedder={"kind": "none"})  # an argument wins, field by field
    assert (given.llm.concurrency, given.llm.max_tokens, given.embedder.kind, given.embedder.url) == (
        3,
        3000,
        "none",
        "http://x",
    )


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
    monkeypatch.delenv("ANIMA_LLM_STEP_LIMITS")
    setenv(monkeypatch, {"ANIMA_EMBEDDER_API_KEY": "emb-never-shown", "ANIMA_EMBEDDER_BATCH": "0"})
    with pytest.raises(ConfigError, match=r"^ANIMA_EMBEDDER_BATCH='0': "):
        Settings()
    setenv(monkeypatch, {"ANIMA_EMBEDDER_BATCH": "8", "ANIMA_SMALL_MODEL": "no-such-model"})
    with pytest.raises(ConfigError, match=r"^ANIMA_SMALL_MODEL: no price known") as err:
        Settings()  # a rule over several settings: its message, never the values it read
    assert "sk-ant-never-shown" not in str(err.value) and "emb-never-shown" not in str(err.value)


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
    assert s.llm.step_models == {"dreams/journal": "small"}
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


def test_a_local_servers_models_are_unpriced_by_name_and_the_small_model_follows_the_main(
    monkeypatch,
) -> None:
    from anima_pipeline.core.prices import PRICES, UNPRICED, price_row

    setenv(
        monkeypatch,
        {
            "ANIMA_ENGINE": "openai",
            "ANIMA_MODEL": "llama3.1:8b",
            "ANIMA_LLM_UNPRICED": "llama3.1, qwen2.5",
            "ANIMA_LLM_STEP_MODELS": '{"dreams/journal": "qwen2.5:7b-instruct"}',
            "OPENAI_BASE_URL": "http://127.0.0.1:11434/v1",
        },
    )
    s = Settings()
    assert s.llm.unpriced == ["llama3.1", "qwen2.5"] and s.openai_base_url == "http://127.0.0.1:11434/v1"
    # no small model of its own: the steps that allow one run on the server's model
    assert s.step_model(StepKey.ANCHORS_MARKED) == "llama3.1:8b"
    assert s.step_model(StepKey.DREAM) == "qwen2.5:7b-instruct"
    assert Settings(model="claude-sonnet-5-5").step_model(StepKey.ANCHORS_MARKED) == "claude-haiku-5-5"
    assert Settings(small_model="gpt-4.1-mini").step_model(StepKey.ANCHORS_MARKED) == "gpt-4.1-mini"
    # a model that is neither priced nor named unpriced is refused, naming the setting that would allow it
    monkeypatch.setenv("ANIMA_LLM_STEP_MODELS", '{"dreams/journal": "mistral-7b"}')
    with pytest.raises(ConfigError, match=r"dreams/journal: no price known .*ANIMA_LLM_UNPRICED"):
        Settings()
    # names match at an id boundary; "*" covers the models without a row, never a priced one
    assert price_row("llama3.1:8b", ["llama3.1"]) is UNPRICED and price_row("llama3.10", ["llama3.1"]) is None
    assert price_row("mistral-7b", ["*"]) is UNPRICED and price_row("gpt-4o", ["*"]) is not UNPRICED
    assert price_row("gpt-4o", ["gpt-4o"]) is UNPRICED  # named: served for free, whatever its list price
    assert price_row("gpt-5-mini-2025-08-07") is PRICES["gpt-5-mini"] and price_row("gpt-5.2") is None
