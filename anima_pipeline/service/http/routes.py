"""The agent API's routes, under ``/v1/animas/{anima_id}``: one per operation of
AnimaMemoryAPI (memory/api.py). Their bodies and query strings are the request models of
memory/models.py, their answers its response models, so every limit is the facade's; each
handler only translates to the facade (`Memory`, the anima of the request's key).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query

from anima_pipeline.core.validation import ExternalId, MemoryRef, MessageRef
from anima_pipeline.memory.models import (
    AppendResult,
    ContextRequest,
    ConversationFields,
    ConversationInfo,
    DeprecateFields,
    EraseOptions,
    ForgetOptions,
    ForgetReport,
    MemoryInfo,
    MessageReadOptions,
    MessageSearchRequest,
    MessagesRequest,
    PinFields,
    Remembered,
    RememberRequest,
    SearchRequest,
    UnpinFields,
    UpdateFields,
    WorkingContextRequest,
)
from anima_pipeline.recall.sections import AssembledContext, ContextItem, MessagePart, SearchPage
from anima_pipeline.recall.working import WorkingContext
from anima_pipeline.service.http.auth import Memory
from anima_pipeline.service.http.query_params import query_string
from anima_pipeline.store.archive import ArchiveRecord

HTTP = "agent (HTTP)"  # who asked, in the audit log, when a request does not say

router = APIRouter(prefix="/v1/animas/{anima_id}", tags=["memory"])

ConversationId = Annotated[ExternalId, Path(description="the conversation's id")]
MemoryId = Annotated[MemoryRef, Path(description="a memory id, e.g. f-12")]
MessageId = Annotated[MessageRef, Path(description="m-N as a context or search_messages shows it")]


# the request models read from the query string (service/http/query_params.py)
@query_string()
class ContextQuery(ContextRequest):
    pass


@query_string({"types": "type"})
class SearchQuery(SearchRequest):
    """`type` repeated allows several memory types."""


@query_string()
class MessageSearchQuery(MessageSearchRequest):
    pass


@query_string()
class MessageReadQuery(MessageReadOptions):
    pass


@query_string()
class ForgetQuery(ForgetOptions):
    pass


@query_string()
class EraseQuery(EraseOptions):
    pass


# --- writing ----------------------------------------------------------------------------------


@router.post("/messages", response_model=AppendResult, summary="Append messages (idempotent by message_id)")
def append_messages(body: MessagesRequest, memory: Memory) -> AppendResult:
    """Store messages in one transaction, all or nothing, validated like `anima import`.
    Keep `[[anima:f-N]]` markers in assistant messages: the night counts them as citations."""
    return memory.append(body.messages)


@router.post(
    "/messages/validate", response_model=list[ArchiveRecord], summary="Validate messages without storing them"
)
def validate_messages(body: MessagesRequest, memory: Memory) -> list[ArchiveRecord]:
    """The messages as `POST messages` would store them, or the 422 it would answer; nothing is written."""
    return memory.validate_messages(body.messages)


@router.put(
    "/conversations/{conversation_id}", response_model=ConversationInfo, summary="Open a conversation"
)
def open_conversation(
    conversation_id: ConversationId, body: ConversationFields, memory: Memory
) -> ConversationInfo:
    return memory.open_conversation(
        conversation_id, title=body.title, platform=body.platform, debug=body.debug
    )


@router.post(
    "/conversations/{conversation_id}/close", response_model=ConversationInfo, summary="Close a conversation"
)
def close_conversation(conversation_id: ConversationId, memory: Memory) -> ConversationInfo:
    return memory.close_conversation(conversation_id)


@router.post("/memories", response_model=Remembered, status_code=201, summary="Remember a fact explicitly")
def remember(body: RememberRequest, memory: Memory) -> Remembered:
    return memory.remember(body.content, body.type, body.session_id)


# --- reading ----------------------------------------------------------------------------------


@router.get("/context", response_model=AssembledContext, summary="Chat-time context for a query")
def context(memory: Memory, q: Annotated[ContextQuery, Query()]) -> AssembledContext:
    return memory.context(q.query, q.session_id)


@router.post("/working_context", response_model=WorkingContext, summary="The whole working context of a turn")
def working_context(body: WorkingContextRequest, memory: Memory) -> WorkingContext:
    """The self layer, resident memories, temporal segment and recall sections (`system`), the
    session as summary | slim | raw (`messages`) and the `segments` report, within `budget`
    tokens: what `AnimaMemory.working_context` returns. A POST because a turn may compact the
    session (its rolling summary, and the flush of the turns it covers, are written)."""
    return memory.working_context(body.session_id, body.message, budget=body.budget)


@router.get("/search", response_model=SearchPage, summary="Active search over memories")
def search(memory: Memory, q: Annotated[SearchQuery, Query()]) -> SearchPage:
    """`type` is repeated to allow several memory types (`types` of the facade)."""
    return memory.search(q.query, types=q.types, since=q.since, until=q.until, limit=q.limit, offset=q.offset)


@router.get("/messages/search", response_model=SearchPage, summary="Active search over past messages")
def search_messages(memory: Memory, q: Annotated[MessageSearchQuery, Query()]) -> SearchPage:
    return memory.search_messages(
        q.query,
        conversation_id=q.conversation_id,
        since=q.since,
        until=q.until,
        limit=q.limit,
        offset=q.offset,
    )


@router.get("/messages/{id}", response_model=MessagePart, summary="Read one past message, whole or in parts")
def read_message(id: MessageId, memory: Memory, q: Annotated[MessageReadQuery, Query()]) -> MessagePart:
    """`limit` characters of its text from `offset`; `next_offset` reads on while `has_more`.
    A context or a search page shows a long message in part (`truncated`): this reads the rest."""
    return memory.message(id, offset=q.offset, limit=q.limit)


@router.get("/self_blocks", response_model=dict[str, str], summary="The six self blocks")
def self_blocks(memory: Memory) -> dict[str, str]:
    """As the night last wrote them (empty when never written)."""
    return memory.self_blocks()


@router.get("/resident", response_model=list[ContextItem], summary="The resident memories")
def resident(memory: Memory) -> list[ContextItem]:
    """Pinned memories, then the most cited: what every turn carries."""
    return memory.resident()


@router.get("/status", summary="Counts and recent nights of this anima")
def status(memory: Memory) -> dict[str, Any]:
    return memory.status()


# --- corrections and forgetting (docs/forget.md) ----------------------------------------------


@router.get("/memories/{id}", response_model=MemoryInfo, summary="One memory (404 when erased)")
def get_memory(id: MemoryId, memory: Memory) -> MemoryInfo:
    return memory.memory(id)


@router.patch("/memories/{id}", response_model=MemoryInfo, summary="Correct a memory (only the fields sent)")
def update_memory(id: MemoryId, body: UpdateFields, memory: Memory) -> MemoryInfo:
    """The correction is settled: the nights neither merge it back nor learn the old wording again."""
    return memory.update(id, **body.model_dump(exclude_unset=True))


@router.post("/memories/{id}/deprecate", response_model=MemoryInfo, summary="Retire a memory, with a reason")
def deprecate_memory(id: MemoryId, body: DeprecateFields, memory: Memory) -> MemoryInfo:
    return memory.deprecate(id, body.reason, superseded_by=body.superseded_by)


@router.post("/memories/{id}/pin", response_model=MemoryInfo, summary="Keep a memory resident")
def pin_memory(id: MemoryId, body: PinFields, memory: Memory) -> MemoryInfo:
    return memory.pin(id, body.reason)


@router.post("/memories/{id}/unpin", response_model=MemoryInfo, summary="Stop keeping a memory resident")
def unpin_memory(id: MemoryId, body: UnpinFields, memory: Memory) -> MemoryInfo:
    return memory.unpin(id, body.reason)


@router.delete("/memories/{id}", response_model=ForgetReport, summary="Erase a memory for good")
def delete_memory(id: MemoryId, memory: Memory, q: Annotated[EraseQuery, Query()]) -> ForgetReport:
    """Physical delete (with what was merged into it); the audit log keeps a tombstone only.
    `purge=false` forgets it softly instead (deprecated, out of recall)."""
    return memory.forget("memory", id, purge=q.purge, requested_by=q.requested_by or HTTP)


@router.delete(
    "/conversations/{conversation_id}", response_model=ForgetReport, summary="Forget a conversation"
)
def forget_conversation(
    conversation_id: ConversationId, memory: Memory, q: Annotated[ForgetQuery, Query()]
) -> ForgetReport:
    """Soft: its messages are hidden and what derives only from it is deprecated; purge: erased."""
    return memory.forget("conversation", conversation_id, purge=q.purge, requested_by=q.requested_by or HTTP)


@router.delete("/messages/{id}", response_model=ForgetReport, summary="Forget one message")
def forget_message(id: MessageId, memory: Memory, q: Annotated[ForgetQuery, Query()]) -> ForgetReport:
    return memory.forget("message", id, purge=q.purge, requested_by=q.requested_by or HTTP)


@router.delete("", response_model=ForgetReport, summary="Forget this whole anima")
def forget_anima(memory: Memory, q: Annotated[ForgetQuery, Query()]) -> ForgetReport:
    """Purge erases every row of the anima and revokes its keys; soft deprecates and hides all."""
    return memory.forget("anima", memory.anima_id, purge=q.purge, requested_by=q.requested_by or HTTP)
