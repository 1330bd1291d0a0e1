"""The agent API's requests and responses, defined once.

Every operation of `AnimaMemoryAPI` (memory/api.py) takes its parameters through a request
model here, with their limits: the facade validates its arguments with it (a Python caller is
refused exactly as a remote one), the HTTP routes take it as their body or query string
(service/http/routes.py) and the MCP tools' input schemas are made from its fields
(service/mcp.py). So one limit has one field name and one set of words at every door, by
construction. The input types themselves (ids, text, times, numbers: never strings) are
core/validation.py's.

The responses the facade returns are the models below (appends, conversations, remembered
facts, corrections, forget reports) and recall's own (`recall.sections.AssembledContext`,
`ContextItem`, `SearchPage`; `recall.working.WorkingContext`), which recall builds; every
door and the client return those same models. `ErrorResponse` is what every HTTP error
answers, and what the client reads back.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import date, datetime
from typing import Annotated, Any, Self

from pydantic import BaseModel, ConfigDict, Field, SkipValidation, ValidationError

from anima_pipeline.config import Settings
from anima_pipeline.core.errors import AnimaError, InputError
from anima_pipeline.core.types import MemoryType, TargetKind
from anima_pipeline.core.validation import (
    READ_DEFAULT,
    READ_MAX,
    ExternalId,
    Flag,
    Instant,
    Integer,
    MemoryRef,
    MemoryText,
    MessageRef,
    MessageText,
    Name,
    Number,
    QueryText,
    Text,
    Title,
    TokenBudget,
    context_of,
    field_name,
)
from anima_pipeline.store.archive import MessageRecord
from anima_pipeline.store.memories import SemanticMemory

MAX_BATCH = 10_000  # messages per append call: one transaction, all or nothing
MAX_SEARCH_LIMIT = 100
MIN_BUDGET = 500  # tokens: below this a working context cannot hold a turn and its self
REASON_MAX = 500
TEXT_OFFSET_MAX = 2**30  # characters: no PostgreSQL text is longer (1 GB)

Reason = Annotated[Text, Field(min_length=1, max_length=REASON_MAX, description="why, in the user's terms")]
Limit = Annotated[Integer, Field(ge=1, le=MAX_SEARCH_LIMIT, description="results per page")]
Offset = Annotated[Integer, Field(ge=0, description="skip this many results (the previous offset + limit)")]


# --- requests ---------------------------------------------------------------------------------


class Request(BaseModel):
    """One operation's parameters. Unknown fields are refused, so a typo is answered instead
    of ignored."""

    model_config = ConfigDict(extra="forbid")

    @classmethod
    def of(cls, settings: Settings | None = None, /, **values: Any) -> Self:
        """The request validated with the configured limits (`settings`), or InputError naming
        the first field at fault in the words every door uses."""
        try:
            return cls.model_validate(values, context=context_of(settings))
        except ValidationError as exc:
            err = exc.errors()[0]
            raise InputError(err["msg"], field=field_name(err["loc"]) or None) from None


class MessagesRequest(Request):
    """A batch of messages (append, validate_messages). Each message is checked afterwards
    with the configured limits and its own field names (`AnimaMemory.validate_messages`): here
    only the batch's size."""

    messages: list[SkipValidation[MessageRecord]] = Field(
        min_length=1, max_length=MAX_BATCH, description=f"1 to {MAX_BATCH} messages, stored all or nothing"
    )


class ConversationFields(Request):
    """What a conversation may be given when it is opened (PUT conversations/{id}'s body)."""

    title: Title | None = None
    platform: Name | None = Field(None, description="e.g. chat, telegram; 'cron' = scheduled job")
    debug: Flag | None = Field(None, description="debug conversations are never consolidated")


class OpenConversationRequest(ConversationFields):
    conversation_id: ExternalId


class ConversationRequest(Request):
    conversation_id: ExternalId


class RememberRequest(Request):
    content: MemoryText = Field(description="one self-contained fact")
    type: MemoryType = Field(
        "world", description="world (facts about people and things), experience, preference, opinion, imprint"
    )
    session_id: ExternalId | None = Field(None, description="the conversation the fact comes from")


class ContextRequest(Request):
    query: QueryText = Field(description="the user's message or topic")
    session_id: ExternalId | None = Field(
        None, description="the current conversation's id, if the host has one"
    )


class SearchRequest(Request):
    query: QueryText = Field(description="what to look for")
    types: list[MemoryType] | None = Field(None, description="only these memory types")
    since: Instant | None = Field(None, description="observed at or after (ISO-8601)")
    until: Instant | None = Field(None, description="observed before (ISO-8601)")
    limit: Limit = 20
    offset: Offset = 0


class MessageSearchRequest(Request):
    query: QueryText = Field(description="what was said")
    conversation_id: ExternalId | None = Field(None, description="only this conversation")
    since: Instant | None = Field(None, description="sent at or after (ISO-8601)")
    until: Instant | None = Field(None, description="sent before (ISO-8601)")
    limit: Limit = 20
    offset: Offset = 0


class WorkingContextRequest(Request):
    session_id: ExternalId = Field(description="the current conversation's id")
    # appended after the turn as a message: the same rules as a stored message's content
    message: MessageText = Field(description="what the user just said (not stored here)")
    budget: TokenBudget | None = Field(
        None,
        ge=MIN_BUDGET,
        description="tokens for the whole context, the message included, at most the model's window; "
        "default: the window less the reserve",
    )


class MemoryRequest(Request):
    """One memory by its id."""

    id: MemoryRef = Field(description="the memory's id as shown, e.g. f-12")


class MessageReadOptions(Request):
    """How much of a message one read returns (GET messages/{id}'s query string)."""

    offset: Annotated[
        Integer,
        Field(ge=0, le=TEXT_OFFSET_MAX, description="the first character to read (the previous next_offset)"),
    ] = 0
    limit: Annotated[Integer, Field(ge=1, le=READ_MAX, description="characters to read at most")] = (
        READ_DEFAULT
    )


class MessageIdRequest(Request):
    id: MessageRef = Field(description="the message's id as a context or search_messages shows it, e.g. m-12")

    @property
    def number(self) -> int:
        """The message's row id (`id` is always ``m-N`` once validated)."""
        return int(self.id.removeprefix("m-"))


class MessageRequest(MessageReadOptions, MessageIdRequest):
    """One past message by its id, `limit` characters of it from `offset`."""


class DeprecateFields(Request):
    reason: Reason
    superseded_by: MemoryRef | None = Field(None, description="the memory that replaces it, e.g. f-12")


class DeprecateRequest(DeprecateFields, MemoryRequest):
    pass


class UpdateFields(Request):
    """A correction: only the fields given change; `source_sessions: []` clears them."""

    content: MemoryText | None = Field(None, description="the corrected fact")
    type: MemoryType | None = Field(None, description="a new type, if it changes")
    confidence: Number | None = Field(None, ge=0, le=1)
    source_sessions: list[ExternalId] | None = None
    observed_at: Instant | None = None
    valid_from: Instant | None = None
    valid_until: Instant | None = Field(None, description="when it stopped being true (ISO-8601)")


class UpdateRequest(UpdateFields, MemoryRequest):
    pass


class PinFields(Request):
    reason: Reason | None = None


class PinRequest(PinFields, MemoryRequest):
    pass


class UnpinFields(Request):
    reason: Reason


class UnpinRequest(UnpinFields, MemoryRequest):
    pass


class ForgetOptions(Request):
    """How a forget runs (the query string of HTTP's DELETE routes)."""

    purge: Flag = Field(False, description="erase for good (a tombstone stays) instead of the soft forget")
    requested_by: Name | None = Field(None, description="who asked, kept in the audit log; default: the door")


class EraseOptions(ForgetOptions):
    """A memory's DELETE over HTTP: a purge unless `purge=false` asks for the soft forget."""

    purge: Flag = Field(True, description="erase for good (default), or false for the soft forget")


class ForgetRequest(ForgetOptions):
    kind: TargetKind
    # its form depends on the kind: memory/forget.py check_target checks it, naming the field
    # by the kind (conversation_id, message, id, anima_id)
    target_id: Any


def batch(messages: MessageRecord | Any) -> list[Any]:
    """One message or many as the list a MessagesRequest holds: a message or a mapping alone
    is a batch of one; at most MAX_BATCH + 1 are read from an iterable (enough to refuse it)."""
    if isinstance(messages, BaseModel | Mapping) or not isinstance(messages, Iterable):
        return [messages]
    out: list[Any] = []
    for m in messages:
        out.append(m)
        if len(out) > MAX_BATCH:
            break
    return out


# --- responses --------------------------------------------------------------------------------


class AppendResult(BaseModel):
    received: int
    added: int = Field(description="messages new to the store (a repeated message_id adds nothing)")
    conversations_added: int
    skipped_cleaned: int = Field(0, description="messages of conversations the night's cleanup deleted")
    days: list[date] = Field(description="local days (ANIMA_TIMEZONE) the messages belong to")
    stale_days: list[date] = Field(
        default_factory=list,
        description="days whose night already ran or is running: re-run with `anima sleep --day D --force`",
    )


class ConversationInfo(BaseModel):
    id: str
    anima_id: str
    platform: str
    title: str | None
    debug: bool
    created_at: datetime
    updated_at: datetime
    closed_at: datetime | None


class Remembered(BaseModel):
    id: str
    content: str
    type: str
    source_sessions: list[str]


class MemoryInfo(BaseModel):
    """A memory as the agent sees it after a correction."""

    id: str = Field(description="f-N")
    type: str
    content: str
    status: str
    deprecated_reason: str | None
    superseded_by: str | None
    pinned: bool
    source_sessions: list[str]
    observed_at: datetime | None
    settled_at: datetime | None = Field(
        description="when the user last corrected it: the nights leave it as it is"
    )

    @classmethod
    def of(cls, m: SemanticMemory) -> MemoryInfo:
        return cls(
            id=m.ref,
            type=m.type,
            content=m.content,
            status=m.status,
            deprecated_reason=m.deprecated_reason,
            superseded_by=f"f-{m.superseded_by}" if m.superseded_by else None,
            pinned=m.pinned,
            source_sessions=m.source_sessions,
            observed_at=m.observed_at,
            settled_at=m.settled_at,
        )


class TableChanges(BaseModel):
    erased: int = 0
    deprecated: int = 0
    hidden: int = 0
    rewritten: int = 0
    repointed: int = 0
    events_scrubbed: int = 0


class Recompute(BaseModel):
    day: date
    steps: list[str]


class ForgetReport(BaseModel):
    anima_id: str
    target: str = Field(description="what was asked, e.g. conversation:c-12")
    purge: bool
    run_id: str
    requested_by: str
    changed: bool = Field(description="False when there was nothing left to forget (a repeat)")
    note: str = ""
    tables: dict[str, TableChanges] = Field(default_factory=dict)
    memories_erased: list[str] = Field(default_factory=list)
    memories_deprecated: list[str] = Field(default_factory=list)
    memories_rewritten: list[str] = Field(default_factory=list)
    recompute: list[Recompute] = Field(default_factory=list)
    recompute_command: str = ""
    shadows: list[str] = Field(default_factory=list, description="shadow stores purged the same way")

    def table(self, name: str) -> TableChanges:
        return self.tables.setdefault(name, TableChanges())


# --- errors -----------------------------------------------------------------------------------


class FieldError(BaseModel):
    model_config = ConfigDict(extra="forbid")

    field: str | None = Field(description="the request field, e.g. messages[3].created_at")
    message: str
    type: str | None = Field(None, description="the validation rule that failed, when there is one")


class ErrorInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: int
    code: str = Field(
        description="unauthorized | forbidden | not_found | method_not_allowed | conflict | body_too_large | "
        "invalid_request | store_unavailable | store_error | internal_error | …"
    )
    message: str
    field: str | None = Field(None, description="the request field at fault, when there is one")
    errors: list[FieldError] = Field(
        default_factory=list, description="every field at fault (empty when the error is not a field's)"
    )

    @classmethod
    def of(cls, exc: AnimaError) -> ErrorInfo:
        """What an error of the package answers: its own status, code and field; the message
        a remote caller may read."""
        errors = [FieldError(field=exc.field, message=exc.detail)] if isinstance(exc, InputError) else []
        return cls(
            status=exc.http_status,
            code=exc.code,
            message=exc.remote_message or str(exc),
            field=exc.field,
            errors=errors,
        )


class ErrorResponse(BaseModel):
    """What every error answers (the OpenAPI document names it, not FastAPI's {"detail": …})."""

    model_config = ConfigDict(extra="forbid")

    error: ErrorInfo
