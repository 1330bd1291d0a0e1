"""A typed HTTP client for `anima serve`: the facade's methods (AnimaMemory) over the network.

    from anima_pipeline.service.client import AnimaClient

    with AnimaClient("http://127.0.0.1:8765", "aria", api_key=KEY) as memory:
        ctx = memory.context("Where did Lena move?", session_id="c-42")
        memory.append([{"conversation_id": "c-42", "message_id": "u-7", "role": "user",
                        "content": "Where did Lena move?", "created_at": "2026-11-30T10:00:00+08:00"}])

Answers are the same pydantic models the facade returns (AppendResult, AssembledContext,
WorkingContext, SearchPage, Remembered, ConversationInfo, MemoryInfo, ForgetReport). An error answer raises AnimaApiError carrying the
server's `{"error": {status, code, message, field, errors}}` (service/http/app.py ErrorResponse).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any
from urllib.parse import quote

import httpx2 as httpx
from pydantic import BaseModel, ValidationError
from pydantic_core import to_jsonable_python

from anima_pipeline.core.errors import ServiceError
from anima_pipeline.core.types import MemoryType
from anima_pipeline.core.validation import AnimaInputError
from anima_pipeline.memory.facade import AppendResult, ConversationInfo, Remembered
from anima_pipeline.memory.forget import ForgetReport, MemoryInfo
from anima_pipeline.recall.sections import AssembledContext, SearchPage
from anima_pipeline.recall.working import WorkingContext
from anima_pipeline.store.archive import MessageRecord


class AnimaApiError(ServiceError):
    """The server refused the request: `status` (HTTP), `code` (e.g. invalid_request,
    forbidden), `field` (the request field at fault, e.g. messages[3].created_at), `errors`."""

    def __init__(
        self, status: int, code: str, message: str, field: str | None = None, errors: list | None = None
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.field = status, code, message, field
        self.errors = errors or []


def _error_of(response: httpx.Response) -> AnimaApiError:
    from anima_pipeline.service.http.app import ErrorResponse

    try:
        info = ErrorResponse.model_validate_json(response.content).error
    except ValidationError:  # not the service's answer (a proxy in between, say)
        return AnimaApiError(
            response.status_code, "http_error", response.text[:500] or response.reason_phrase
        )
    return AnimaApiError(
        info.status, info.code, info.message, info.field, [e.model_dump() for e in info.errors or []]
    )


class AnimaClient:
    """One anima's memory through `anima serve`, with a key from `anima keys create --anima A`."""

    def __init__(
        self,
        base_url: str,
        anima_id: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        http: httpx.Client | None = None,
    ) -> None:
        self.anima_id = anima_id
        self._owns_http = http is None
        self._http = http or httpx.Client(timeout=timeout)
        self._base = f"{base_url.rstrip('/')}/v1/animas/{quote(anima_id, safe='')}"
        self._headers = {"Authorization": f"Bearer {api_key}"}

    def close(self) -> None:
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> AnimaClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, *, params: dict | None = None, body: Any = None) -> Any:
        query = {k: v for k, v in (params or {}).items() if v is not None}
        response = self._http.request(
            method,
            self._base + path,
            params=to_jsonable_python(query),
            json=None if body is None else to_jsonable_python(body),
            headers=self._headers,
        )
        if response.is_error:
            raise _error_of(response)
        return response.json()

    # --- writing (the facade's append, remember, open / close a conversation) ---

    def append(self, messages: MessageRecord | Mapping[str, Any] | Iterable[Any]) -> AppendResult:
        """Store messages all or nothing (idempotent by message_id), validated by the server."""
        batch = [messages] if isinstance(messages, BaseModel | Mapping) else list(messages)
        body = [m.model_dump(exclude_unset=True) if isinstance(m, BaseModel) else dict(m) for m in batch]
        return AppendResult.model_validate(self._call("POST", "/messages", body={"messages": body}))

    def remember(self, content: str, type: MemoryType = "world", session_id: str | None = None) -> Remembered:
        body = {"content": content, "type": type, "session_id": session_id}
        return Remembered.model_validate(self._call("POST", "/memories", body=body))

    def open_conversation(
        self,
        conversation_id: str,
        *,
        title: str | None = None,
        platform: str | None = None,
        debug: bool | None = None,
    ) -> ConversationInfo:
        body = {"title": title, "platform": platform, "debug": debug}
        path = f"/conversations/{quote(conversation_id, safe='')}"
        return ConversationInfo.model_validate(self._call("PUT", path, body=body))

    def close_conversation(self, conversation_id: str) -> ConversationInfo:
        path = f"/conversations/{quote(conversation_id, safe='')}/close"
        return ConversationInfo.model_validate(self._call("POST", path))

    # --- reading ---

    def context(self, query: str, session_id: str | None = None) -> AssembledContext:
        params = {"query": query, "session_id": session_id}
        return AssembledContext.model_validate(self._call("GET", "/context", params=params))

    def working_context(self, session_id: str, message: str, *, budget: int | None = None) -> WorkingContext:
        """The whole turn's context (self layer, resident, recall, the session) within `budget` tokens."""
        body = {"session_id": session_id, "message": message, "budget": budget}
        return WorkingContext.model_validate(self._call("POST", "/working_context", body=body))

    def search(
        self,
        query: str,
        *,
        types: list[MemoryType] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 20,
        offset: int = 0,
    ) -> SearchPage:
        params = {
            "query": query,
            "type": types,
            "since": since,
            "until": until,
            "limit": limit,
            "offset": offset,
        }
        return SearchPage.model_validate(self._call("GET", "/search", params=params))

    def search_messages(
        self,
        query: str,
        *,
        conversation_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 20,
        offset: int = 0,
    ) -> SearchPage:
        params = {
            "query": query,
            "conversation_id": conversation_id,
            "since": since,
            "until": until,
            "limit": limit,
            "offset": offset,
        }
        return SearchPage.model_validate(self._call("GET", "/messages/search", params=params))

    def status(self) -> dict[str, Any]:
        return self._call("GET", "/status")

    # --- corrections and forgetting (docs/forget.md) ---

    def memory(self, ref: str) -> MemoryInfo:
        return MemoryInfo.model_validate(self._call("GET", f"/memories/{quote(ref, safe='')}"))

    def update(self, ref: str, **fields: Any) -> MemoryInfo:
        """Only the fields given change; the memory is settled (the nights leave it as it is)."""
        return MemoryInfo.model_validate(self._call("PATCH", f"/memories/{quote(ref, safe='')}", body=fields))

    def deprecate(self, ref: str, reason: str, *, superseded_by: str | None = None) -> MemoryInfo:
        body = {"reason": reason, "superseded_by": superseded_by}
        return MemoryInfo.model_validate(
            self._call("POST", f"/memories/{quote(ref, safe='')}/deprecate", body=body)
        )

    def pin(self, ref: str, reason: str | None = None) -> MemoryInfo:
        body = {"reason": reason}
        return MemoryInfo.model_validate(
            self._call("POST", f"/memories/{quote(ref, safe='')}/pin", body=body)
        )

    def unpin(self, ref: str, reason: str) -> MemoryInfo:
        body = {"reason": reason}
        return MemoryInfo.model_validate(
            self._call("POST", f"/memories/{quote(ref, safe='')}/unpin", body=body)
        )

    def delete(self, ref: str) -> ForgetReport:
        return ForgetReport.model_validate(self._call("DELETE", f"/memories/{quote(ref, safe='')}"))

    def forget(self, kind: str, target_id: str, *, purge: bool = False) -> ForgetReport:
        """kind: conversation, message (m-N) or anima (this client's own)."""
        if kind == "anima" and target_id != self.anima_id:  # the route forgets the client's anima,
            # whatever target_id says: refused as the facade refuses it, not applied to this one
            raise AnimaInputError(
                f"this forget is bound to anima {self.anima_id!r}, not {target_id!r}", field="anima_id"
            )
        paths = {
            "conversation": f"/conversations/{quote(target_id, safe='')}",
            "message": f"/messages/{quote(target_id, safe='')}",
            "anima": "",
        }
        if kind not in paths:
            raise AnimaInputError(
                f"{kind!r} is not forgotten over HTTP this way; a memory: delete() or deprecate()",
                field="kind",
            )
        return ForgetReport.model_validate(self._call("DELETE", paths[kind], params={"purge": purge}))
