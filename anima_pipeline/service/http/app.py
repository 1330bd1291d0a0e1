"""The HTTP service of `anima serve`: the AnimaMemory operations under /v1, per-anima keys.

Every route lives under ``/v1/animas/{anima_id}`` and needs ``Authorization: Bearer KEY``
with a key made by ``anima keys create --anima A``. A key opens its own anima only: any
other anima in the path gets 403 with the same words whether that anima exists or not.
Errors are JSON: ``{"error": {"status", "code", "message", "field", "errors": [...]}}``,
``field`` naming the request field (``messages[3].created_at``). The key is checked before
anything reads the body (a request without a valid key gets 401 even with a broken body);
bodies over ``max_body_bytes`` get 413 before they are read; batches over MAX_BATCH messages
get 422. Ids, text, offsets and sizes follow the rules of every door (anima_pipeline.core.validation):
a refusal is a named 422, a conflict with what is stored a 409, never a 500.
Handlers only translate: the behaviour is AnimaMemory's.
"""

from __future__ import annotations

import logging
import re
from typing import Annotated, Any

import psycopg
from fastapi import APIRouter, Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi_offline import FastAPIOffline
from pydantic import BaseModel, ConfigDict, Field, SkipValidation
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from anima_pipeline.config import Settings
from anima_pipeline.core.errors import ServiceError
from anima_pipeline.core.types import MemoryType
from anima_pipeline.core.validation import (
    MEMORY_MAX,
    AnimaId,
    ExternalId,
    Instant,
    MemoryText,
    Name,
    QueryText,
    Text,
    Title,
)
from anima_pipeline.memory.facade import (
    MAX_BATCH,
    MAX_SEARCH_LIMIT,
    MIN_BUDGET,
    AnimaInputError,
    AnimaMemory,
    AppendResult,
    ConversationInfo,
    Remembered,
    WrongAnimaError,
)
from anima_pipeline.memory.forget import ForgetReport, MemoryInfo, NotFound
from anima_pipeline.recall.sections import AssembledContext, SearchPage
from anima_pipeline.recall.working import WorkingContext
from anima_pipeline.store.api_keys import anima_of_key
from anima_pipeline.store.archive import MessageRecord
from anima_pipeline.store.db import Database

log = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
MAX_BODY_BYTES = 32 * 1024 * 1024  # a full batch of 10,000 chat messages fits with room to spare


class ApiError(ServiceError):
    def __init__(self, status: int, code: str, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.field = status, code, message, field


class FieldError(BaseModel):
    model_config = ConfigDict(extra="forbid")

    field: str | None = Field(description="the request field, e.g. messages[3].created_at")
    message: str
    type: str | None = Field(None, description="the validation rule that failed, when there is one")


class ErrorInfo(BaseModel):
    model_config = ConfigDict(extra="forbid")

    status: int
    code: str = Field(
        description="unauthorized | forbidden | not_found | invalid_request | body_too_large | …"
    )
    message: str
    field: str | None = Field(None, description="the request field at fault, when there is one")
    errors: list[FieldError] | None = Field(None, description="every field at fault (422)")


class ErrorResponse(BaseModel):
    """What every error answers (the OpenAPI document names it, not FastAPI's {"detail": …})."""

    model_config = ConfigDict(extra="forbid")

    error: ErrorInfo


_ERROR_WHEN = {
    401: "missing, unknown or revoked key",
    403: "the key is not valid for this anima",
    404: "not found",
    409: "conflicts with what is stored (a message or conversation field); nothing was written",
    413: "request body too large",
    422: "invalid request: `field` names the place",
    500: "the store refused the request; nothing was written",
    503: "the store could not be reached to check the key",
}
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": when} for status, when in _ERROR_WHEN.items()
}


def _error(status: int, code: str, message: str, field: str | None = None, errors: list | None = None):
    body: dict[str, Any] = {"status": status, "code": code, "message": message, "field": field}
    if errors is not None:
        body["errors"] = errors
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"error": body}, status_code=status, headers=headers)


def _field(loc: tuple | list) -> str:
    """("body", "messages", 3, "created_at") -> "messages[3].created_at"."""
    out = ""
    for part in loc[1:] if loc and loc[0] in ("body", "query", "path", "header") else loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or str(loc[0] if loc else "body")


# --- request bodies -------------------------------------------------------------------------


class AppendBody(BaseModel):
    # The schema is MessageRecord's; the messages themselves are validated by AnimaMemory.append,
    # with the configured limits (ANIMA_MAX_MESSAGE_CHARS, the timestamp years) and its field names.
    messages: list[SkipValidation[MessageRecord]] = Field(
        min_length=1, max_length=MAX_BATCH, description=f"1 to {MAX_BATCH} messages, stored all or nothing"
    )


class ConversationBody(BaseModel):
    title: Title | None = None
    platform: Name | None = Field(None, description="e.g. chat, telegram; 'cron' = scheduled job")
    debug: bool | None = Field(None, description="debug conversations are never consolidated")


class RememberBody(BaseModel):
    content: MemoryText = Field(description="one self-contained fact")
    type: MemoryType = "world"
    session_id: ExternalId | None = Field(None, description="the conversation it comes from")


Reason = Annotated[Text, Field(min_length=1, max_length=500)]


class DeprecateBody(BaseModel):
    reason: Reason = Field(description="why it is no longer true")
    superseded_by: str | None = Field(None, description="the memory that replaces it, e.g. f-12")


class UpdateBody(BaseModel):
    """Only the fields sent change (the seed's update rule); `source_sessions: []` clears them."""

    model_config = ConfigDict(extra="forbid")
    content: MemoryText | None = None
    type: MemoryType | None = None
    confidence: float | None = Field(None, ge=0, le=1)
    source_sessions: list[ExternalId] | None = None
    observed_at: Instant | None = None
    valid_from: Instant | None = None
    valid_until: Instant | None = None


class PinBody(BaseModel):
    reason: Reason | None = None


class UnpinBody(BaseModel):
    reason: Reason


# --- auth -------------------------------------------------------------------------------------

_bearer = HTTPBearer(auto_error=False, description="a key from `anima keys create --anima A`")
_ANIMA_ROUTE = re.compile(r"^/v1/animas/([^/]+)(?:/|$)")


class KeyAuth:
    """The key of every /v1/animas/{anima_id}/… request, checked before any route reads the
    body: 401 without a live key, 403 when the key is another anima's (the same words whether
    that anima exists or not). The anima the key opens goes on to the route in scope state."""

    def __init__(self, app: ASGIApp, db: Database) -> None:
        self.app, self.db = app, db

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = _ANIMA_ROUTE.match(scope["path"]) if scope["type"] == "http" else None
        if route is None:
            await self.app(scope, receive, send)
            return
        scheme, _, key = Headers(scope=scope).get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            refusal = _error(
                401, "unauthorized", "send Authorization: Bearer <key> (anima keys create --anima A)"
            )
        else:
            try:
                owner = await run_in_threadpool(self._owner, key.strip())
            except psycopg.Error as exc:
                log.error("store error while checking an API key: %s", exc, exc_info=exc)
                refusal = _error(503, "store_unavailable", "the store could not check the API key; retry")
            else:
                if owner is None:
                    refusal = _error(401, "unauthorized", "unknown or revoked API key")
                elif owner != route.group(1):
                    refusal = _error(403, "forbidden", "this API key is not valid for the requested anima")
                else:
                    scope.setdefault("state", {})["anima_id"] = owner
                    await self.app(scope, receive, send)
                    return
        await refusal(scope, receive, send)

    def _owner(self, key: str) -> str | None:
        with self.db.transaction() as conn:
            return anima_of_key(conn, key)


def _memory(
    request: Request,
    anima_id: Annotated[AnimaId, Path()],
    _: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],  # for the OpenAPI security scheme
) -> AnimaMemory:
    if getattr(request.state, "anima_id", None) != anima_id:  # KeyAuth let it through only for its anima
        raise ApiError(403, "forbidden", "this API key is not valid for the requested anima")
    return AnimaMemory(request.app.state.db, anima_id, settings=request.app.state.settings)


Memory = Annotated[AnimaMemory, Depends(_memory)]


# --- routes -----------------------------------------------------------------------------------

router = APIRouter(prefix="/v1/animas/{anima_id}", tags=["memory"])


@router.post("/messages", response_model=AppendResult, summary="Append messages (idempotent by message_id)")
def append_messages(body: AppendBody, memory: Memory) -> AppendResult:
    """Store messages in one transaction, all or nothing, validated like `anima import`.
    Keep `[[anima:f-N]]` markers in assistant messages: the night counts them as citations."""
    return memory.append(body.messages)


@router.put(
    "/conversations/{conversation_id}", response_model=ConversationInfo, summary="Open a conversation"
)
def open_conversation(
    conversation_id: Annotated[ExternalId, Path()], body: ConversationBody, memory: Memory
) -> ConversationInfo:
    return memory.open_conversation(
        conversation_id, title=body.title, platform=body.platform, debug=body.debug
    )


@router.post(
    "/conversations/{conversation_id}/close", response_model=ConversationInfo, summary="Close a conversation"
)
def close_conversation(conversation_id: Annotated[ExternalId, Path()], memory: Memory) -> ConversationInfo:
    try:
        return memory.close_conversation(conversation_id)
    except LookupError as exc:
        raise ApiError(404, "not_found", str(exc), "conversation_id") from None


@router.get("/context", response_model=AssembledContext, summary="Chat-time context for a query")
def context(
    memory: Memory,
    query: Annotated[QueryText, Query(description="what the user just said")],
    session_id: Annotated[ExternalId | None, Query(description="the current conversation")] = None,
) -> AssembledContext:
    return memory.context(query, session_id)


class WorkingContextBody(BaseModel):
    session_id: ExternalId = Field(description="the current conversation")
    message: Text = Field(max_length=MEMORY_MAX * 4, description="what the user just said (not stored)")
    budget: int | None = Field(
        None, ge=MIN_BUDGET, description="tokens for the whole context; default: the window less the reserve"
    )


@router.post("/working_context", response_model=WorkingContext, summary="The whole working context of a turn")
def working_context(body: WorkingContextBody, memory: Memory) -> WorkingContext:
    """The self layer, resident memories, temporal segment and recall sections (`system`), the
    session as summary | slim | raw (`messages`) and the `segments` report, within `budget`
    tokens: what `AnimaMemory.working_context` returns. A POST because a turn may compact the
    session (its rolling summary, and the flush of the turns it covers, are written)."""
    return memory.working_context(body.session_id, body.message, budget=body.budget)


@router.get("/search", response_model=SearchPage, summary="Active search over memories")
def search(
    memory: Memory,
    query: Annotated[QueryText, Query()],
    type: Annotated[list[MemoryType] | None, Query(description="repeat to allow several types")] = None,
    since: Annotated[Instant | None, Query(description="observed at or after (ISO-8601)")] = None,
    until: Annotated[Instant | None, Query(description="observed before (ISO-8601)")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_SEARCH_LIMIT)] = 20,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> SearchPage:
    return memory.search(query, types=type, since=since, until=until, limit=limit, offset=offset)


@router.get("/messages/search", response_model=SearchPage, summary="Active search over past messages")
def search_messages(
    memory: Memory,
    query: Annotated[QueryText, Query()],
    conversation_id: Annotated[ExternalId | None, Query(description="only this conversation")] = None,
    since: Annotated[Instant | None, Query(description="sent at or after (ISO-8601)")] = None,
    until: Annotated[Instant | None, Query(description="sent before (ISO-8601)")] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_SEARCH_LIMIT)] = 20,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> SearchPage:
    return memory.search_messages(
        query, conversation_id=conversation_id, since=since, until=until, limit=limit, offset=offset
    )


@router.post("/memories", response_model=Remembered, status_code=201, summary="Remember a fact explicitly")
def remember(body: RememberBody, memory: Memory) -> Remembered:
    return memory.remember(body.content, body.type, body.session_id)


MemoryRef = Annotated[str, Path(pattern=r"^f-\d+$", description="a memory id, e.g. f-12")]
Purge = Annotated[bool, Query(description="erase for good (a tombstone stays) instead of the soft forget")]


@router.get("/memories/{ref}", response_model=MemoryInfo, summary="One memory (404 when erased)")
def get_memory(ref: MemoryRef, memory: Memory) -> MemoryInfo:
    return memory.memory(ref)


@router.patch("/memories/{ref}", response_model=MemoryInfo, summary="Correct a memory (only the fields sent)")
def update_memory(ref: MemoryRef, body: UpdateBody, memory: Memory) -> MemoryInfo:
    """The correction is settled: the nights neither merge it back nor learn the old wording again."""
    return memory.update(ref, **body.model_dump(exclude_unset=True))


@router.post("/memories/{ref}/deprecate", response_model=MemoryInfo, summary="Retire a memory, with a reason")
def deprecate_memory(ref: MemoryRef, body: DeprecateBody, memory: Memory) -> MemoryInfo:
    return memory.deprecate(ref, body.reason, superseded_by=body.superseded_by)


@router.post("/memories/{ref}/pin", response_model=MemoryInfo, summary="Keep a memory resident")
def pin_memory(ref: MemoryRef, body: PinBody, memory: Memory) -> MemoryInfo:
    return memory.pin(ref, body.reason)


@router.post("/memories/{ref}/unpin", response_model=MemoryInfo, summary="Stop keeping a memory resident")
def unpin_memory(ref: MemoryRef, body: UnpinBody, memory: Memory) -> MemoryInfo:
    return memory.unpin(ref, body.reason)


@router.delete("/memories/{ref}", response_model=ForgetReport, summary="Erase a memory for good")
def delete_memory(ref: MemoryRef, memory: Memory) -> ForgetReport:
    """Physical delete (with what was merged into it); the audit log keeps a tombstone only."""
    return memory.delete(ref, requested_by="agent (HTTP)")


@router.delete(
    "/conversations/{conversation_id}", response_model=ForgetReport, summary="Forget a conversation"
)
def forget_conversation(
    conversation_id: Annotated[ExternalId, Path()], memory: Memory, purge: Purge = False
) -> ForgetReport:
    """Soft: its messages are hidden and what derives only from it is deprecated; purge: erased."""
    return memory.forget("conversation", conversation_id, purge=purge, requested_by="agent (HTTP)")


@router.delete("/messages/{message_id}", response_model=ForgetReport, summary="Forget one message")
def forget_message(
    message_id: Annotated[str, Path(pattern=r"^(m-)?\d+$", description="m-N as search_messages shows it")],
    memory: Memory,
    purge: Purge = False,
) -> ForgetReport:
    return memory.forget("message", message_id, purge=purge, requested_by="agent (HTTP)")


@router.delete("", response_model=ForgetReport, summary="Forget this whole anima")
def forget_anima(
    anima_id: Annotated[str, Path(min_length=1)], memory: Memory, purge: Purge = False
) -> ForgetReport:
    """Purge erases every row of the anima and revokes its keys; soft deprecates and hides all."""
    return memory.forget("anima", anima_id, purge=purge, requested_by="agent (HTTP)")


@router.get("/status", summary="Counts and recent nights of this anima")
def status(memory: Memory) -> dict[str, Any]:
    return memory.status()


# --- the app ----------------------------------------------------------------------------------


class BodyLimit:
    """Refuse a request body over `limit` bytes with 413: by Content-Length before reading, and
    for a body streamed without one by reading at most `limit` bytes before the app sees it."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None:
            if length.isdigit() and int(length) > self.limit:
                await self._too_large(scope, receive, send)
                return
            await self.app(scope, receive, send)
            return
        body, more = b"", True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.limit:
                await self._too_large(scope, receive, send)
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _too_large(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = _error(413, "body_too_large", f"request body over {self.limit} bytes")
        await response(scope, receive, send)


def create_app(db: Database, settings: Settings, *, max_body_bytes: int = MAX_BODY_BYTES) -> FastAPI:
    """The FastAPI app over an open store (the caller owns and closes `db`). /docs and /redoc
    load Swagger UI and ReDoc from the fastapi-offline package, so they work without a network."""
    app = FastAPIOffline(
        title="anima memory",
        version="1",
        description=(
            "Hand in an agent's conversations and get its memory back. Every route needs "
            "`Authorization: Bearer KEY` (`anima keys create --anima A`); a key opens its own anima only."
        ),
    )
    app.state.db = db
    app.state.settings = settings
    app.include_router(router, responses=ERROR_RESPONSES)
    from anima_pipeline.service.http.review_routes import router as review_router  # it imports this module

    app.include_router(review_router, responses=ERROR_RESPONSES)

    @app.get("/healthz", tags=["service"], summary="Liveness (no key needed)")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.exception_handler(ApiError)
    async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
        return _error(exc.status, exc.code, exc.message, exc.field)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [{"field": _field(e["loc"]), "message": e["msg"], "type": e["type"]} for e in exc.errors()]
        first = errors[0] if errors else {"field": None, "message": "invalid request"}
        return _error(422, "invalid_request", f"{first['field']}: {first['message']}", first["field"], errors)

    @app.exception_handler(AnimaInputError)
    async def _refused(_: Request, exc: AnimaInputError) -> JSONResponse:
        field = exc.field
        errors = [{"field": field, "message": exc.detail}]
        return _error(exc.http_status, exc.code, str(exc), field, errors)  # 422, or 409 for a conflict

    @app.exception_handler(NotFound)
    async def _not_found(_: Request, exc: NotFound) -> JSONResponse:
        return _error(404, "not_found", str(exc), "id")

    @app.exception_handler(WrongAnimaError)
    async def _wrong_anima(_: Request, exc: WrongAnimaError) -> JSONResponse:
        return _error(403, "forbidden", str(exc), "anima_id")

    @app.exception_handler(psycopg.Error)
    async def _store(_: Request, exc: psycopg.Error) -> JSONResponse:
        log.error("store error, request rolled back: %s", exc, exc_info=exc)
        return _error(500, "store_error", "the store refused the request; nothing was written")

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, "http_error", str(exc.detail))

    @app.exception_handler(Exception)
    async def _crash(_: Request, exc: Exception) -> JSONResponse:
        # a bug, not the caller's fault: the traceback goes to the log, JSON to the caller
        log.error("unexpected error, request rolled back", exc_info=exc)
        return _error(500, "internal_error", "the service failed on this request; nothing was written")

    app.add_middleware(BodyLimit, limit=max_body_bytes)
    app.add_middleware(KeyAuth, db=db)  # outermost: no body is read for a request without a key
    return app
