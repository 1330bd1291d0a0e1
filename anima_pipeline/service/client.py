"""A typed HTTP client for `anima serve`: the agent API (memory/api.py) over the network.

    from anima_pipeline.service.client import AnimaClient

    with AnimaClient("http://127.0.0.1:8765", "aria", api_key=KEY) as memory:
        ctx = memory.context("Where did Lena move?", session_id="c-42")
        memory.append([{"conversation_id": "c-42", "message_id": "u-7", "role": "user",
                        "content": "Where did Lena move?", "created_at": "2026-11-30T10:00:00+08:00"}])

`AnimaClient` implements `AnimaMemoryAPI` as `AnimaMemory` does, with the same methods and
parameters; answers are the same pydantic models the facade returns (memory/models.py and
recall's). An error answer raises AnimaApiError carrying the server's
`{"error": {status, code, message, field, errors}}` (memory/models.py ErrorResponse).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Self
from urllib.parse import quote

import httpx2 as httpx
from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic_core import to_jsonable_python

from anima_pipeline.core.errors import AnimaError, InputError
from anima_pipeline.core.types import MemoryType, TargetKind
from anima_pipeline.core.validation import field_name, text_problem
from anima_pipeline.memory.models import (
    READ_DEFAULT,
    AppendResult,
    ConversationInfo,
    ErrorResponse,
    ForgetReport,
    ForgetRequest,
    MemoryInfo,
    Remembered,
    batch,
)
from anima_pipeline.recall.sections import AssembledContext, ContextItem, MessagePart, SearchPage
from anima_pipeline.recall.working import WorkingContext
from anima_pipeline.store.archive import ArchiveRecord, MessageRecord

_RECORDS = TypeAdapter(list[ArchiveRecord])
_ITEMS = TypeAdapter(list[ContextItem])


class AnimaApiError(AnimaError):
    """The server refused the request: `status` (HTTP), `code` (e.g. invalid_request,
    forbidden), `field` (the request field at fault, e.g. messages[3].created_at), `errors`."""

    def __init__(
        self, status: int, code: str, message: str, field: str | None = None, errors: list | None = None
    ) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status, self.code, self.message, self.field = status, code, message, field
        self.http_status = status
        self.errors = errors or []


def _error_of(response: httpx.Response) -> AnimaApiError:
    try:
        info = ErrorResponse.model_validate_json(response.content).error
    except ValidationError:  # not the service's answer (a proxy in between, say)
        return AnimaApiError(
            response.status_code, "http_error", response.text[:500] or response.reason_phrase
        )
    return AnimaApiError(
        info.status, info.code, info.message, info.field, [e.model_dump() for e in info.errors]
    )


def _refuse_unsendable(*values: Any) -> None:
    """AnimaApiError, as the server would answer it (422 naming the field, its words), for a text
    that cannot be sent at all: a lone surrogate has no UTF-8 encoding, so no request can
    carry it (httpx would raise UnicodeEncodeError naming nothing)."""

    def walk(value: Any, loc: tuple[int | str, ...]) -> tuple[tuple[int | str, ...], Any] | None:
        if isinstance(value, str):
            problem = text_problem(value)
            return (loc, problem) if problem is not None and problem.type == "lone_surrogate" else None
        items = (
            value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        )
        for key, item in items:
            found = walk(key, loc) if isinstance(key, str) else None
            found = found or walk(item, (*loc, key))
            if found:
                return found
        return None

    for value in values:
        found = walk(value, ())
        if found:
            loc, problem = found
            field = field_name(loc) or None
            words = problem.message()
            raise AnimaApiError(
                422,
                "invalid_request",
                f"{field}: {words}" if field else words,
                field,
                [{"field": field, "message": words, "type": problem.type}],
            )


class AnimaClient:
    """One anima's memory through `anima serve`, with a key from `anima keys create --anima A`.
    The operations are AnimaMemory's: see its docstrings."""

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

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, path: str, *, params: dict | None = None, body: Any = None) -> Any:
        query = {k: v for k, v in (params or {}).items() if v is not None}
        _refuse_unsendable(to_jsonable_python(query), to_jsonable_python(body))
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

    @staticmethod
    def _messages(messages: Any) -> dict[str, list[Any]]:
        return {
            "messages": [
                m.model_dump(exclude_unset=True) if isinstance(m, BaseModel) else m for m in batch(messages)
            ]
        }

    @staticmethod
    def _segment(value: str, field: str) -> str:
        """`value` as one segment of a path, or the server's refusal of what no URL can carry."""
        _refuse_unsendable({field: value})
        return quote(value, safe="")

    @classmethod
    def _memory_path(cls, ref: str, action: str = "") -> str:
        return f"/memories/{cls._segment(ref, 'id')}{action}"

    # --- writing

    def validate_messages(self, messages: Iterable[MessageRecord | Mapping[str, Any]]) -> list[ArchiveRecord]:
        return _RECORDS.validate_python(
            self._call("POST", "/messages/validate", body=self._messages(messages))
        )

    def append(self, messages: MessageRecord | Mapping[str, Any] | Iterable[Any]) -> AppendResult:
        return AppendResult.model_validate(self._call("POST", "/messages", body=self._messages(messages)))

    def open_conversation(
        self,
        conversation_id: str,
        *,
        title: str | None = None,
        platform: str | None = None,
        debug: bool | None = None,
    ) -> ConversationInfo:
        body = {"title": title, "platform": platform, "debug": debug}
        path = f"/conversations/{self._segment(conversation_id, 'conversation_id')}"
        return ConversationInfo.model_validate(self._call("PUT", path, body=body))

    def close_conversation(self, conversation_id: str) -> ConversationInfo:
        path = f"/conversations/{self._segment(conversation_id, 'conversation_id')}/close"
        return ConversationInfo.model_validate(self._call("POST", path))

    def remember(self, content: str, type: MemoryType = "world", session_id: str | None = None) -> Remembered:
        body = {"content": content, "type": type, "session_id": session_id}
        return Remembered.model_validate(self._call("POST", "/memories", body=body))

    # --- corrections and forgetting (docs/forget.md)

    def memory(self, ref: str) -> MemoryInfo:
        return MemoryInfo.model_validate(self._call("GET", self._memory_path(ref)))

    def deprecate(self, ref: str, reason: str, *, superseded_by: str | None = None) -> MemoryInfo:
        body = {"reason": reason, "superseded_by": superseded_by}
        return MemoryInfo.model_validate(self._call("POST", self._memory_path(ref, "/deprecate"), body=body))

    def update(self, ref: str, **fields: Any) -> MemoryInfo:
        return MemoryInfo.model_validate(self._call("PATCH", self._memory_path(ref), body=fields))

    def pin(self, ref: str, reason: str | None = None) -> MemoryInfo:
        body = {"reason": reason}
        return MemoryInfo.model_validate(self._call("POST", self._memory_path(ref, "/pin"), body=body))

    def unpin(self, ref: str, reason: str) -> MemoryInfo:
        body = {"reason": reason}
        return MemoryInfo.model_validate(self._call("POST", self._memory_path(ref, "/unpin"), body=body))

    def delete(self, ref: str, *, requested_by: str | None = None) -> ForgetReport:
        return self.forget("memory", ref, purge=True, requested_by=requested_by)

    def forget(
        self, kind: TargetKind, target_id: str, *, purge: bool = False, requested_by: str | None = None
    ) -> ForgetReport:
        req = ForgetRequest.of(kind=kind, target_id=target_id, purge=purge, requested_by=requested_by)
        if req.kind == "anima" and req.target_id != self.anima_id:  # the route forgets the key's anima:
            # another one is refused in the facade's words, never applied to this one
            raise InputError(
                f"this forget is bound to anima {self.anima_id!r}, not {req.target_id!r}", field="anima_id"
            )
        field = {"memory": "id", "conversation": "conversation_id", "message": "message"}.get(
            req.kind, "anima_id"
        )
        target = self._segment(str(req.target_id), field)
        path = {
            "memory": f"/memories/{target}",
            "conversation": f"/conversations/{target}",
            "message": f"/messages/{target}",
            "anima": "",
        }[req.kind]
        params = {"purge": req.purge, "requested_by": req.requested_by}
        return ForgetReport.model_validate(self._call("DELETE", path, params=params))

    # --- reading

    def context(self, query: str, session_id: str | None = None) -> AssembledContext:
        params = {"query": query, "session_id": session_id}
        return AssembledContext.model_validate(self._call("GET", "/context", params=params))

    def search(
        self,
        query: str,
        *,
        types: Sequence[MemoryType] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 20,
        offset: int = 0,
    ) -> SearchPage:
        params = {
            "query": query,
            "type": None if types is None else list(types),
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

    def message(self, ref: str, *, offset: int = 0, limit: int = READ_DEFAULT) -> MessagePart:
        params = {"offset": offset, "limit": limit}
        path = f"/messages/{self._segment(ref, 'id')}"
        return MessagePart.model_validate(self._call("GET", path, params=params))

    def working_context(self, session_id: str, message: str, *, budget: int | None = None) -> WorkingContext:
        body = {"session_id": session_id, "message": message, "budget": budget}
        return WorkingContext.model_validate(self._call("POST", "/working_context", body=body))

    def self_blocks(self) -> dict[str, str]:
        return self._call("GET", "/self_blocks")

    def resident(self) -> list[ContextItem]:
        return _ITEMS.validate_python(self._call("GET", "/resident"))

    def status(self) -> dict[str, Any]:
        return self._call("GET", "/status")
