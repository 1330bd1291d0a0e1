"""The input rules of every door, defined once.

Import (store/archive.py), the facade (memory/facade.py), HTTP (service/http/app.py), MCP
(service/mcp.py) and API keys use these types, so a value refused by one door is refused by
all of them with the same field and the same words, before PostgreSQL sees it:

- ids: an anima id is at most 64 letters, digits and ``. : @ + - _`` (starting with a letter
  or digit: it ends up in file names, run tags and logs); a conversation or message id is at
  most 200 characters without whitespace or control characters (a host's ``:`` ``/`` ``#``
  are fine);
- text: no NUL (PostgreSQL text cannot hold it) and no lone surrogate (``"\\ud800"`` in JSON
  is not Unicode text and cannot be encoded for the store);
- timestamps: an explicit UTC offset, within what PostgreSQL stores (under 16 hours, whole
  seconds: Python accepts ``+23:59`` and ``+05:30:15.5``, PostgreSQL does not), and for stored
  times the configured years (``ANIMA_TIMESTAMP_MIN_YEAR`` / ``MAX_YEAR``);
- sizes: ``ANIMA_MAX_MESSAGE_CHARS`` for a message (and its metadata), fixed bounds for names;
- numbers and flags: an integer, a number or a flag is a JSON (or Python) number or boolean,
  never a string: ``"budget": "3000"`` and ``"debug": "true"`` are refused at every door
  (`Integer`, `Number`, `Flag`). The one text read as a number is a URL's query string, where
  every value is text (service/http/query_params.py reads its digits, then the same types apply).

The configured limits reach a validator through pydantic's validation context
(``context_of(settings)``, the Settings defaults when it is given None); a validation without
that context (a door's own schema check: FastAPI's, the MCP SDK's) leaves the configured
bounds (message size, years, the window) to the facade, which checks every request with them.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    Strict,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
)
from pydantic_core import PydanticCustomError

from anima_pipeline.core.errors import InputError

if TYPE_CHECKING:  # config.py sits above core: its Settings is a type here, never imported
    from anima_pipeline.config import Settings

# The defaults of the Settings fields that bound an input (config.py takes them from here).
MAX_MESSAGE_CHARS = 256_000
# characters of a message one read returns unless asked (about 2,000 tokens: a model reads all
# it asks for), and at most: a message of the default ANIMA_MAX_MESSAGE_CHARS in one read
READ_DEFAULT = 8_000
READ_MAX = MAX_MESSAGE_CHARS
WINDOW_TOKENS = 200_000  # the model's context window: no working context may ask for more
TIMESTAMP_MIN_YEAR = 1970
TIMESTAMP_MAX_YEAR = 2200

ANIMA_ID_MAX = 64
EXTERNAL_ID_MAX = 200
NAME_MAX = 200  # speaker, platform
TITLE_MAX = 1000
QUERY_MAX = 4000
MEMORY_MAX = 2000  # one memory's content (the memory tools' limit)
METADATA_MAX_DEPTH = 16
# PostgreSQL's limit on a UTC offset (TZDISP_LIMIT in its datetime.h): strictly under 16 hours
OFFSET_LIMIT = timedelta(hours=16)

_ANIMA_ID = re.compile(r"[^\W_][\w.:@+-]*")
_MEMORY_REF = re.compile(r"f-(\d+)")
_MESSAGE_REF = re.compile(r"(?:m-)?(\d+)")
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")
_EXTERNAL_ID = re.compile(r"[^\s\x00-\x1f\x7f\ud800-\udfff]+")
# a lone surrogate: not Unicode text (json.loads joins a valid pair into one character)
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class Limits:
    """The Settings fields that bound an input; the fields' defaults unless given."""

    max_message_chars: int = MAX_MESSAGE_CHARS
    timestamp_min_year: int = TIMESTAMP_MIN_YEAR
    timestamp_max_year: int = TIMESTAMP_MAX_YEAR
    window_tokens: int = WINDOW_TOKENS

    @classmethod
    def from_settings(cls, s: Settings) -> Limits:
        return cls(s.max_message_chars, s.timestamp_min_year, s.timestamp_max_year, s.context.window_tokens)


def context_of(settings: Settings | None) -> dict[str, Any]:
    """The validation context that carries the configured limits to the validators."""
    return {"limits": Limits.from_settings(settings) if settings else Limits()}


def _limits(info: ValidationInfo | None) -> Limits | None:
    """The configured limits, None when the validation carries none: a door's own schema check
    (FastAPI's of a body or query, the MCP SDK's of a tool's arguments) runs without them and
    leaves the configured bounds to the facade, which validates every request again with them
    (memory/models.py `Request.of`). So a limit raised in the settings is raised at every door,
    and every door refuses in the configured words."""
    return ((info.context if info else None) or {}).get("limits")


def _refuse(kind: str, message: str, **ctx: Any) -> PydanticCustomError:
    return PydanticCustomError(kind, message, ctx or None)


# --- text -------------------------------------------------------------------------------------


def text_problem(value: str) -> PydanticCustomError | None:
    """Why `value` cannot be stored as text (NUL, lone surrogate), or None."""
    if "\x00" in value:
        return _refuse("nul_character", "contains a NUL character (\\u0000), which PostgreSQL cannot store")
    bad = LONE_SURROGATE.search(value)
    if bad:
        return _refuse(
            "lone_surrogate",
            "contains a lone surrogate ({code}) at character {at}, which is not Unicode text",
            code=f"\\u{ord(bad.group()):04x}",
            at=bad.start(),
        )
    return None


def check_text(value: str) -> str:
    problem = text_problem(value)
    if problem:
        raise problem
    return value


def check_not_blank(value: str) -> str:
    if not value.strip():
        raise _refuse("blank", "must not be blank")
    return value


def check_message_size(value: str, info: ValidationInfo) -> str:
    limits = _limits(info)
    if limits is None:
        return value
    limit = limits.max_message_chars
    if len(value) > limit:
        raise _refuse(
            "too_long",
            "is {n} characters long, above the limit of {limit} (ANIMA_MAX_MESSAGE_CHARS); "
            "split the message or raise the limit",
            n=f"{len(value):,}",
            limit=f"{limit:,}",
        )
    return value


# --- ids --------------------------------------------------------------------------------------


def _check_id(value: str, longest: int, pattern: re.Pattern[str], kind: str, words: str) -> str:
    check_text(value)
    check_not_blank(value)
    if len(value) > longest:
        raise _refuse(
            "id_too_long", "is {n} characters long (at most {max})", n=f"{len(value):,}", max=longest
        )
    if not pattern.fullmatch(value):
        raise _refuse(kind, words)
    return value


def check_anima_id(value: str) -> str:
    return _check_id(
        value,
        ANIMA_ID_MAX,
        _ANIMA_ID,
        "anima_id_format",
        "may hold only letters, digits and . : @ + - _ (starting with a letter or digit), "
        "no spaces or path characters",
    )


def check_external_id(value: str) -> str:
    return _check_id(
        value, EXTERNAL_ID_MAX, _EXTERNAL_ID, "id_format", "must not contain whitespace or control characters"
    )


# the largest id a store keeps (PostgreSQL's bigint): a larger number names no row, and would
# reach the database as a statement it refuses
ID_MAX = 2**63 - 1


def _ref_number(pattern: re.Pattern[str], value: str, kind: str, looks: str, prefix: str) -> int:
    """The number of an id `value` of the form `pattern` (its one group), at most ID_MAX, or
    the refusal naming how such ids look."""
    found = pattern.fullmatch(value)
    if not found or not found.group(1).isascii() or int(found.group(1)) > ID_MAX:
        raise _refuse(
            f"{kind}_ref",
            "{v} is not a " + kind + " id; ids look like " + looks + " (at most " + prefix + "{top})",
            v=repr(value[:80]),
            top=ID_MAX,
        )
    return int(found.group(1))


def check_memory_ref(value: str) -> str:
    """A memory's id as the model and the agent see it, ``f-12`` (at most ID_MAX)."""
    _ref_number(_MEMORY_REF, value.strip(), "memory", "'f-12'", "f-")
    return value.strip()


def check_message_ref(value: str) -> str:
    """A message's id as recall shows it, ``m-12`` (or its number, ``12``; at most ID_MAX),
    given back as ``m-12``."""
    number = _ref_number(_MESSAGE_REF, value, "message", "'m-123' or '123'", "m-")
    return f"m-{number}"


def anima_id_problem(value: str) -> str | None:
    """Why `value` cannot be an anima id, in words, or None when it can."""
    try:
        check_anima_id(value)
    except PydanticCustomError as exc:
        return exc.message()
    return None


# --- timestamps -------------------------------------------------------------------------------


def parse_day(value: Any) -> date:
    """A local day as ISO-8601 ``YYYY-MM-DD`` (or a date); never a number (pydantic would read
    ``0`` as 1970-01-01) nor a timestamp."""
    if isinstance(value, date) and not isinstance(value, datetime):
        return value
    if isinstance(value, str) and _DAY.fullmatch(value):
        try:
            return date.fromisoformat(value)
        except ValueError:
            pass
    raise _refuse(
        "day_format", "must be a day as YYYY-MM-DD, e.g. 2026-11-30; got {v}", v=repr(str(value)[:80])
    )


def parse_timestamp(value: Any) -> datetime:
    """An ISO-8601 string (or a datetime) with its UTC offset; a number would be a guess
    between epoch seconds and milliseconds."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        check_text(value)
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise _refuse("timestamp_format", "not an ISO-8601 timestamp: {v}", v=repr(value[:80])) from None
    else:
        raise _refuse(
            "timestamp_format", "must be an ISO-8601 string with a UTC offset, e.g. 2023-05-08T13:56:00+08:00"
        )
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        shown = value if isinstance(value, str) else parsed.isoformat()
        raise _refuse(
            "timestamp_offset",
            "timestamp {v} has no UTC offset (write e.g. {s}+08:00)",
            v=repr(shown),
            s=shown,
        )
    return parsed


def check_offset(value: datetime) -> datetime:
    offset = value.utcoffset()
    if offset is not None and (abs(offset) >= OFFSET_LIMIT or offset.microseconds):
        raise _refuse(
            "utc_offset",
            "UTC offset {off} is not one PostgreSQL stores (under 16 hours, whole seconds: "
            "-15:59:59 to +15:59:59)",
            off=_offset_text(offset),
        )
    return value


def _offset_text(offset: timedelta) -> str:
    sign, rest = ("-", -offset) if offset < timedelta(0) else ("+", offset)
    minutes, seconds = divmod(rest.total_seconds(), 60)
    text = f"{sign}{int(minutes) // 60:02d}:{int(minutes) % 60:02d}"
    return text + (f":{seconds:09.6f}".rstrip("0").rstrip(".") if seconds else "")


def check_years(value: datetime, info: ValidationInfo) -> datetime:
    s = _limits(info)
    if s is None:
        return value
    # compared as instants: 0001-01-01T00:00:00+14:00 is in year 0 (1 BC) in UTC, which
    # PostgreSQL stores but later date arithmetic refuses ("timestamp too small")
    try:
        inside = (
            datetime(s.timestamp_min_year, 1, 1, tzinfo=UTC)
            <= value
            < datetime(s.timestamp_max_year + 1, 1, 1, tzinfo=UTC)
        )
    except OverflowError:  # the instant is outside what Python's datetime can hold in UTC
        inside = False
    if not inside:
        raise _refuse(
            "timestamp_range",
            "{v} is outside the years {lo}-{hi} (ANIMA_TIMESTAMP_MIN_YEAR / ANIMA_TIMESTAMP_MAX_YEAR)",
            v=value.isoformat(),
            lo=s.timestamp_min_year,
            hi=s.timestamp_max_year,
        )
    return value


# --- JSON metadata ----------------------------------------------------------------------------


def check_json_object(value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
    """Bounded depth and size, and storable text in every key and string (named by its path)."""
    stack: list[tuple[Any, str, int]] = [(value, "", 1)]
    while stack:  # no recursion: a hostile line may nest thousands deep
        v, path, depth = stack.pop()
        if isinstance(v, dict | list):
            if depth > METADATA_MAX_DEPTH:
                raise _refuse("too_deep", "is nested more than {max} levels deep", max=METADATA_MAX_DEPTH)
            items = v.items() if isinstance(v, dict) else enumerate(v)
            for k, x in items:
                inner = f"{path}[{k}]" if isinstance(k, int) else (f"{path}.{k}" if path else str(k))
                if isinstance(k, str) and (problem := text_problem(k)):
                    raise _refuse(problem.type, "a key " + problem.message())
                stack.append((x, inner, depth + 1))
        elif isinstance(v, str) and (problem := text_problem(v)):
            raise _refuse(problem.type, "{path} " + problem.message(), path=path or "a value")
        elif isinstance(v, float) and not math.isfinite(v):  # JSON's NaN / Infinity: not JSON to PostgreSQL
            raise _refuse(
                "not_finite", "{path} is {v}, which is not a JSON number", path=path or "a value", v=v
            )
    limits = _limits(info)
    if limits is None:
        return value
    size = len(json.dumps(value, ensure_ascii=False))
    limit = limits.max_message_chars
    if size > limit:
        raise _refuse(
            "too_long",
            "is {n} characters of JSON, above the limit of {limit} (ANIMA_MAX_MESSAGE_CHARS)",
            n=f"{size:,}",
            limit=f"{limit:,}",
        )
    return value


# --- the types every door uses ----------------------------------------------------------------


def _storable_input(value: Any) -> Any:
    # before pydantic's own str check, which refuses a lone surrogate without saying so
    return check_text(value) if isinstance(value, str) else value


_Storable = BeforeValidator(_storable_input)

# (Field constraints before _Storable: pydantic then words them as string constraints)
AnimaId = Annotated[str, Field(min_length=1), _Storable, AfterValidator(check_anima_id)]
ExternalId = Annotated[str, Field(min_length=1), _Storable, AfterValidator(check_external_id)]
Text = Annotated[str, _Storable]
Name = Annotated[str, Field(min_length=1, max_length=NAME_MAX), _Storable]
Title = Annotated[str, Field(min_length=1, max_length=TITLE_MAX), _Storable]
QueryText = Annotated[str, Field(min_length=1, max_length=QUERY_MAX), _Storable]
MemoryText = Annotated[str, Field(min_length=1, max_length=MEMORY_MAX), _Storable]
MessageText = Annotated[
    str, Field(min_length=1), _Storable, AfterValidator(check_not_blank), AfterValidator(check_message_size)
]
# a local day (a night's): ISO-8601 only
Day = Annotated[date, BeforeValidator(parse_day)]
# a time a query compares with (search bounds): offset rules only
Instant = Annotated[datetime, BeforeValidator(parse_timestamp), AfterValidator(check_offset)]
# a time the store keeps (a message's created_at): offset rules and the configured years
Timestamp = Annotated[
    datetime, BeforeValidator(parse_timestamp), AfterValidator(check_offset), AfterValidator(check_years)
]
JsonObject = Annotated[dict[str, Any], AfterValidator(check_json_object)]
MemoryRef = Annotated[
    str, _Storable, AfterValidator(check_memory_ref), Field(json_schema_extra={"pattern": r"^f-\d+$"})
]
MessageRef = Annotated[
    str, _Storable, AfterValidator(check_message_ref), Field(json_schema_extra={"pattern": r"^(m-)?\d+$"})
]
# numbers and flags are never read from strings (the module docstring)
Integer = Annotated[int, Strict()]


def check_window(value: int, info: ValidationInfo) -> int:
    """A token budget within the model's window (ANIMA_CONTEXT_WINDOW_TOKENS): a context larger
    than the window cannot be sent, whatever it holds."""
    limits = _limits(info)
    if limits is None:
        return value
    window = limits.window_tokens
    if value > window:
        raise _refuse(
            "above_window",
            "is {n} tokens, above the model's window of {window} (ANIMA_CONTEXT_WINDOW_TOKENS)",
            n=f"{value:,}",
            window=f"{window:,}",
        )
    return value


# a budget of tokens for one model call: an integer, at most the configured window
TokenBudget = Annotated[int, Strict(), AfterValidator(check_window)]
Number = Annotated[float, Strict()]
Flag = Annotated[bool, Strict()]


@cache
def _adapter(kind: Any) -> TypeAdapter:
    return TypeAdapter(kind)


def field_name(loc: tuple[int | str, ...] | list[int | str]) -> str:
    """A pydantic error location as the doors name a field: ("messages", 3, "created_at") ->
    "messages[3].created_at"."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def check(kind: Any, value: Any, field: str, *, settings: Settings | None = None) -> Any:
    """`value` validated as `kind` (one of the types above); InputError naming `field`
    with the same words the other doors use."""
    try:
        return _adapter(kind).validate_python(value, context=context_of(settings))
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(err["msg"], field=field) from None
