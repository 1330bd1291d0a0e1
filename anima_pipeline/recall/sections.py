"""The shape of what chat-time recall hands back: sections of items, each within its budget.

The public result of `anima_pipeline.recall.assemble.assemble_context` and of the active
search functions; the agent facade, the HTTP service and the evaluation read these models.
Section order: resident → temporal summaries (only when
the question is about a time) → passive recall of memories → episodic recall of messages.
No fused cross-type list: every section keeps its own items, ranking and budget.
"""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import BaseModel, Field

from anima_pipeline.config import RecallSettings

SectionName = Literal["resident", "summaries", "memories", "episodic"]
ItemKind = Literal["memory", "message", "summary"]
SECTION_TITLES: dict[str, str] = {
    "resident": "Resident memories",
    "summaries": "Summaries of the period asked about",
    "memories": "Recalled memories",
    "episodic": "Past messages",
}
TRUNCATION_MARK = " …"


class ContextItem(BaseModel):
    """One memory, message or summary as placed in the context.

    `ref` is how the model sees it: ``f-<id>`` a semantic memory (citable as
    ``[[anima:f-<id>]]``), ``m-<id>`` a message, ``t-<id>`` a temporal summary.
    `text` is the content as placed (cut with TRUNCATION_MARK when `truncated`);
    `line` is the rendered line and `chars` its length, what the budget counts."""

    id: int
    ref: str
    kind: ItemKind
    text: str
    line: str
    chars: int
    score: float = 0.0
    date: dt.date | None = None  # local day: observed (memory), said (message), period start (summary)
    at: dt.datetime | None = None  # the exact time behind `date`, when there is one
    type: str | None = None  # memory type, or summary level
    sources: list[str] = Field(default_factory=list)  # a memory's source conversations
    speaker: str | None = None
    conversation_id: str | None = None
    title: str | None = None
    pinned: bool = False
    truncated: bool = False
    why: str = ""


class ContextSection(BaseModel):
    name: SectionName
    title: str
    items: list[ContextItem] = Field(default_factory=list)
    chars_used: int = 0
    budget: int = 0

    def render(self) -> str:
        return "\n".join([f"# {self.title}", *(i.line for i in self.items)])


class AssembledContext(BaseModel):
    anima_id: str
    query: str
    session_id: str | None = None
    sections: list[ContextSection]
    rendered: str
    chars: int
    resident_overflow: int = 0
    asks_time: bool = False
    periods: list[str] = Field(default_factory=list)  # the periods the question names, as ISO ranges
    # recall by meaning: "hybrid" (each section fuses its lexical and dense lists) or "lexical",
    # with the reason (no embedder, no pgvector, no vectors yet, the embedder failed)
    recall_mode: Literal["hybrid", "lexical"] = "lexical"
    lexical_reason: str | None = None
    dense_model: str | None = None
    embed_ms: float | None = None  # the question's embedding alone

    def section(self, name: SectionName) -> ContextSection:
        return next(s for s in self.sections if s.name == name)

    def items(self) -> list[ContextItem]:
        return [i for s in self.sections for i in s.items]


def _default(field: str):
    return RecallSettings.model_fields[field].default  # the defaults are the configuration's, defined once


class Budgets(BaseModel):
    """Characters per section. `recall` is passive memories + episodic messages + summaries
    together; `memory_share` is the part of it memories may take first (what they leave
    flows to messages, and back); summaries may take up to `summaries` of it when the
    question is about a time; `item_max` cuts a single long item."""

    resident: int = Field(default=_default("resident_chars"), ge=0)
    recall: int = Field(default=_default("budget_chars"), ge=0)
    memory_share: float = Field(default=_default("memory_share"), ge=0, le=1)
    summaries: int = Field(default=_default("summary_chars"), ge=0)
    item_max: int = Field(default=_default("item_max_chars"), ge=40)
    dense: int = Field(default=_default("dense_chars"), ge=0)  # kept for the nearest items not placed


class SearchPage(BaseModel):
    """A page of active search: items ranked best first, `offset` into the full ranking."""

    query: str
    items: list[ContextItem]
    offset: int
    limit: int
    has_more: bool
    # as for a context: "hybrid" when the nearest items by meaning were fused in, else why not
    recall_mode: Literal["hybrid", "lexical"] = "lexical"
    lexical_reason: str | None = None


class MessagePart(BaseModel):
    """A past message read by its ref (`AnimaMemory.message`): `content`, its text from
    character `offset`, as stored (not fenced: a caller places it as it sees fit), and
    `total_chars` in all; `next_offset` reads on when `has_more`."""

    id: str = Field(description="m-N, as a context or search_messages shows it")
    conversation_id: str
    title: str | None
    role: str
    speaker: str | None
    created_at: dt.datetime
    content: str
    offset: int
    total_chars: int
    has_more: bool
    next_offset: int | None = None
