"""Per-anima keys: every /v1/animas/{anima_id}/… request needs ``Authorization: Bearer KEY``
with a key made by ``anima keys create --anima A``, checked before any route reads the body."""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import Depends, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from anima_pipeline.core.errors import AccessError, Unauthorized
from anima_pipeline.core.validation import AnimaId
from anima_pipeline.memory.facade import AnimaMemory
from anima_pipeline.service.http.error_handlers import error_response
from anima_pipeline.store.api_keys import anima_of_key
from anima_pipeline.store.db import Database
from anima_pipeline.store.driver_errors import store_failure

_bearer = HTTPBearer(auto_error=False, description="a key from `anima keys create --anima A`")
_ANIMA_ROUTE = re.compile(r"^/v1/animas/([^/]+)(?:/|$)")
FORBIDDEN = "this API key is not valid for the requested anima"


class KeyAuth:
    """The key of every /v1/animas/{anima_id}/… request, checked before any route reads the
    body: 401 without a live key, 403 when the key is another anima's (the same words whether
    that anima exists or not), 503 when the store cannot say. The anima the key opens goes on
    to the route in scope state."""

    def __init__(self, app: ASGIApp, db: Database) -> None:
        self.app, self.db = app, db

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = _ANIMA_ROUTE.match(scope["path"]) if scope["type"] == "http" else None
        if route is None:
            await self.app(scope, receive, send)
            return
        scheme, _, key = Headers(scope=scope).get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            refusal = error_response(
                Unauthorized("send Authorization: Bearer <key> (anima keys create --anima A)")
            )
        else:
            try:
                owner = await run_in_threadpool(self._owner, key.strip())
            except Exception as exc:
                failure = store_failure(exc)
                if failure is None:
                    raise
                refusal = error_response(failure)
            else:
                if owner is None:
                    refusal = error_response(Unauthorized("unknown or revoked API key"))
                elif owner != route.group(1):
                    refusal = error_response(AccessError(FORBIDDEN))
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
        raise AccessError(FORBIDDEN)
    return AnimaMemory(request.app.state.db, anima_id, settings=request.app.state.settings)


# the facade of the anima the request's key opens
Memory = Annotated[AnimaMemory, Depends(_memory)]
