"""The agent API: every operation a running agent has on its memory, as one Protocol.

`AnimaMemory` (memory/facade.py, in the agent's process) and `AnimaClient`
(service/client.py, over `anima serve`) both implement it, with the same methods and the same
parameters: names, kinds, defaults and annotations (a unit test compares their signatures with
these). The HTTP routes and the MCP tools translate the same operations; memory/models.py
holds their requests (with the limits every door applies) and their responses.

`requested_by` (delete, forget) is who asked, kept in the audit log; None names the door
("agent" in process, "agent (HTTP)" through `anima serve`, "agent (MCP)").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, Self

from anima_pipeline.core.types import MemoryType, TargetKind
from anima_pipeline.memory.models import (
    READ_DEFAULT,
    AppendResult,
    ConversationInfo,
    ForgetReport,
    MemoryInfo,
    Remembered,
)
from anima_pipeline.recall.sections import AssembledContext, ContextItem, MessagePart, SearchPage
from anima_pipeline.recall.working import WorkingContext
from anima_pipeline.store.archive import ArchiveRecord, MessageRecord


class AnimaMemoryAPI(Protocol):
    """The memory of one anima (`anima_id`), for the agent that is talking right now; the
    facade's docstrings say what each operation does."""

    anima_id: str

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *exc: object) -> None: ...

    # --- writing

    def validate_messages(
        self, messages: Iterable[MessageRecord | Mapping[str, Any]]
    ) -> list[ArchiveRecord]: ...

    def append(self, messages: MessageRecord | Mapping[str, Any] | Iterable[Any]) -> AppendResult: ...

    def open_conversation(
        self,
        conversation_id: str,
        *,
        title: str | None = None,
        platform: str | None = None,
        debug: bool | None = None,
    ) -> ConversationInfo: ...

    def close_conversation(self, conversation_id: str) -> ConversationInfo: ...

    def remember(
        self, content: str, type: MemoryType = "world", session_id: str | None = None
    ) -> Remembered: ...

    # --- corrections and forgetting

    def memory(self, ref: str) -> MemoryInfo: ...

    def deprecate(self, ref: str, reason: str, *, superseded_by: str | None = None) -> MemoryInfo: ...

    def update(self, ref: str, **fields: Any) -> MemoryInfo: ...

    def pin(self, ref: str, reason: str | None = None) -> MemoryInfo: ...

    def unpin(self, ref: str, reason: str) -> MemoryInfo: ...

    def delete(self, ref: str, *, requested_by: str | None = None) -> ForgetReport: ...

    def forget(
        self, kind: TargetKind, target_id: str, *, purge: bool = False, requested_by: str | None = None
    ) -> ForgetReport: ...

    # --- reading

    def context(self, query: str, session_id: str | None = None) -> AssembledContext: ...

    def search(
        self,
        query: str,
        *,
        types: Sequence[MemoryType] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 20,
        offset: int = 0,
    ) -> SearchPage: ...

    def search_messages(
        self,
        query: str,
        *,
        conversation_id: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int = 20,
        offset: int = 0,
    ) -> SearchPage: ...

    def message(self, ref: str, *, offset: int = 0, limit: int = READ_DEFAULT) -> MessagePart: ...

    def working_context(
        self, session_id: str, message: str, *, budget: int | None = None
    ) -> WorkingContext: ...

    def self_blocks(self) -> dict[str, str]: ...

    def resident(self) -> list[ContextItem]: ...

    def status(self) -> dict[str, Any]: ...
