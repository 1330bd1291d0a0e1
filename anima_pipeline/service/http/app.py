"""The HTTP service of `anima serve`: the agent API under /v1, per-anima keys.

Every route lives under ``/v1/animas/{anima_id}`` (service/http/routes.py, review mode in
review_routes.py) and needs ``Authorization: Bearer KEY`` with a key made by ``anima keys
create --anima A`` (auth.py): a key opens its own anima only, and any other anima in the path
gets 403 with the same words whether that anima exists or not. The key is checked before
anything reads the body (a request without a valid key gets 401 even with a broken body);
bodies over ``max_body_bytes`` get 413 before they are read; a path, query string or body that
is not UTF-8 gets 422 naming the field (utf8.py). Every error, whatever its
status, answers ``{"error": {"status", "code", "message", "field", "errors": [...]}}``
(error_handlers.py): ``field`` names the request field (``messages[3].created_at``). Handlers only
translate: the behaviour, and every limit, is AnimaMemory's (memory/models.py).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html
from fastapi_offline import FastAPIOffline
from starlette.responses import HTMLResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from anima_pipeline.config import Settings
from anima_pipeline.core.errors import ServiceError
from anima_pipeline.service.http import error_handlers
from anima_pipeline.service.http.auth import KeyAuth
from anima_pipeline.service.http.review_routes import router as review_router
from anima_pipeline.service.http.routes import router
from anima_pipeline.service.http.utf8 import Utf8Guard
from anima_pipeline.store.db import Database

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
MAX_BODY_BYTES = 32 * 1024 * 1024  # a full batch of 10,000 chat messages fits with room to spare


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
        refusal = ServiceError(f"request body over {self.limit} bytes", status=413, code="body_too_large")
        await error_handlers.error_response(refusal)(scope, receive, send)


# ReDoc's bundle draws its footer's "API docs by Redocly" logo from this CDN address; served
# with the address replaced by an empty image, /redoc asks nothing of the network (README)
REDOC_CDN_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"
_NO_IMAGE = "data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg'/%3E"
REDOC_JS_PATH = "/redoc-offline/redoc.standalone.js"


@cache
def redoc_bundle() -> bytes:
    """fastapi-offline's ReDoc bundle with its one CDN address replaced (read once)."""
    bundle = Path(fastapi_offline.__file__).parent / "static" / "redoc.standalone.js"
    return bundle.read_bytes().replace(REDOC_CDN_LOGO.encode(), _NO_IMAGE.encode())


def _offline_redoc(app: FastAPI) -> None:
    @app.get("/redoc", include_in_schema=False)
    async def redoc_html(request: Request) -> HTMLResponse:
        root = request.scope.get("root_path", "")
        return get_redoc_html(
            openapi_url=f"{root}{app.openapi_url}",
            title=app.title + " - ReDoc",
            redoc_js_url=f"{root}{REDOC_JS_PATH}",
            with_google_fonts=False,
            redoc_favicon_url=f"{root}/static-offline-docs/favicon.png",
        )

    @app.get(REDOC_JS_PATH, include_in_schema=False)
    async def redoc_js() -> Response:
        return Response(redoc_bundle(), media_type="text/javascript")


def create_app(db: Database, settings: Settings, *, max_body_bytes: int = MAX_BODY_BYTES) -> FastAPI:
    """The FastAPI app over an open store (the caller owns and closes `db`). /docs and /redoc
    load Swagger UI and ReDoc from the fastapi-offline package, so they work without a network
    (ReDoc's bundle served without its one CDN address, redoc_bundle)."""
    app = FastAPIOffline(
        redoc_url=None,
        title="anima memory",
        version="1",
        description=(
            "Hand in an agent's conversations and get its memory back. Every route needs "
            "`Authorization: Bearer KEY` (`anima keys create --anima A`); a key opens its own anima only."
        ),
    )
    _offline_redoc(app)
    app.state.db = db
    app.state.settings = settings
    app.include_router(router, responses=error_handlers.ERROR_RESPONSES)
    app.include_router(review_router, responses=error_handlers.ERROR_RESPONSES)

    @app.get("/healthz", tags=["service"], summary="Liveness (no key needed)")
    def healthz() -> dict[str, str]:
        return {"status": "ok"}

    error_handlers.install(app)
    # innermost: after the key and the body's size; the routes' templates name a path's field
    app.add_middleware(Utf8Guard, paths=lambda: app.openapi()["paths"])
    app.add_middleware(BodyLimit, limit=max_body_bytes)
    app.add_middleware(KeyAuth, db=db)  # outermost: no body is read for a request without a key
    return app
