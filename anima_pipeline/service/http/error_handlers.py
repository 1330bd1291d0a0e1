"""Every error of the HTTP service, answered one way: `{"error": {status, code, message, field,
errors}}` (memory/models.py ErrorResponse), the status and code the error's own
(core/errors.py). The routes raise what the facade raises; the handlers below only turn what
is not yet an AnimaError into one (a refused body, a route or method the service does not
have, a driver failure, a bug) and answer it with `error_response`.
"""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from anima_pipeline.core.errors import AnimaError, InternalError, ServiceError
from anima_pipeline.core.validation import field_name
from anima_pipeline.memory.models import ErrorInfo, ErrorResponse, FieldError
from anima_pipeline.store.driver_errors import store_failure

log = logging.getLogger(__name__)

# the codes of the statuses Starlette answers by itself (a path or a method no route has)
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}
_WHEN = {
    401: "missing, unknown or revoked key",
    403: "the key is not valid for this anima",
    404: "not found (an id this anima does not have, or erased)",
    405: "the route does not take this method",
    409: "conflicts with what is stored (a message or conversation field, a decided proposal); nothing was written",
    413: "request body too large",
    422: "invalid request: `field` names the place",
    500: "the store refused the request, or the service failed; nothing was written",
    503: "the store could not be reached; nothing was written: retry",
}
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": when} for status, when in _WHEN.items()
}


def respond(info: ErrorInfo, headers: dict[str, str] | None = None) -> JSONResponse:
    if info.status == 401:
        headers = {**(headers or {}), "WWW-Authenticate": "Bearer"}
    body = ErrorResponse(error=info).model_dump(mode="json")
    return JSONResponse(body, status_code=info.status, headers=headers)


def error_response(exc: AnimaError) -> JSONResponse:
    """The answer to an error of the package, by its own http_status and code."""
    if exc.http_status >= 500:
        log.error("%s (%s), request rolled back", exc.code, type(exc).__name__, exc_info=exc)
    return respond(ErrorInfo.of(exc))


def invalid_request(exc: RequestValidationError) -> JSONResponse:
    """A body, query or path that the request models refuse: every field at fault, the first
    named in the message."""
    errors = [
        FieldError(field="body", message=_not_json(e, exc.body), type=e["type"])
        if e["type"] == "json_invalid"
        else FieldError(field=_field(e["loc"]), message=e["msg"], type=e["type"])
        for e in exc.errors()
    ]
    first = errors[0] if errors else FieldError(field=None, message="invalid request")
    return respond(
        ErrorInfo(
            status=422,
            code="invalid_request",
            message=f"{first.field}: {first.message}" if first.field else first.message,
            field=first.field,
            errors=errors,
        )
    )


def _not_json(error: dict[str, Any], body: Any) -> str:
    """A body that is not JSON, where: FastAPI gives the decoder's character offset as the
    location (("body", 14)), which reads like an array index; the caller gets line and column."""
    pos, why = error["loc"][-1], (error.get("ctx") or {}).get("error", "JSON decode error")
    if not isinstance(pos, int) or not isinstance(body, str | bytes):
        return f"not valid JSON ({why})"
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    line = text.count("\n", 0, pos) + 1
    column = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return f"not valid JSON: {why} at line {line}, column {column}"


def _field(loc: tuple[Any, ...] | list[Any]) -> str:
    """("body", "messages", 3, "created_at") -> "messages[3].created_at"."""
    inner = list(loc[1:]) if loc and loc[0] in ("body", "query", "path", "header") else list(loc)
    return field_name(inner) or str(loc[0] if loc else "body")


def install(app: FastAPI) -> None:
    """The handlers of `app`: each turns its exception into an AnimaError, answered alike."""

    @app.exception_handler(AnimaError)
    async def _anima(_: Request, exc: AnimaError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        return invalid_request(exc)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        response = error_response(ServiceError(str(exc.detail), status=exc.status_code, code=code))
        response.headers.update(exc.headers or {})
        return response

    @app.exception_handler(psycopg.Error)
    async def _store(_: Request, exc: psycopg.Error) -> JSONResponse:
        failure = store_failure(exc)
        assert failure is not None  # every driver error is one
        return error_response(failure)

    @app.exception_handler(Exception)
    async def _crash(_: Request, exc: Exception) -> JSONResponse:
        # a bug, not the caller's fault: the traceback goes to the log, JSON to the caller
        failure = InternalError("the service failed on this request; nothing was written")
        log.error("unexpected error, request rolled back", exc_info=exc)
        return respond(ErrorInfo.of(failure))
