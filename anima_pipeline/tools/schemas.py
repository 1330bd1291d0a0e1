"""Every memory tool as a pydantic model; the models are the JSON schemas the LLM sees.

Ids cross this boundary as short strings ("f-12" semantic, "a-3" narrative) and never as
internal keys, so the model can only name what it was shown (Mem0's lesson).
Unknown fields are refused (extra="forbid") so a typo is answered instead of ignored.
Times are `validation.Instant`: an explicit UTC offset that PostgreSQL stores, as at every door.
"""

from __future__ import annotations

import re
from datetime import date
from functools import cache
from typing import Annotated, Any, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, field_validator

from anima_pipeline.core.errors import InputError
from anima_pipeline.core.types import Level, MemoryType, Significance, WritableBlock
from anima_pipeline.core.validation import MEMORY_MAX, Instant
from anima_pipeline.llm.contract import ToolSpec

MAX_CONTENT_CHARS = MEMORY_MAX

_FACT_ID = re.compile(r"^f-(\d+)$")
_NARRATIVE_ID = re.compile(r"^a-(\d+)$")

Content = Annotated[str, Field(min_length=1, max_length=MAX_CONTENT_CHARS)]
FactId = Annotated[str, Field(description="memory id as shown, e.g. f-12")]


def parse_fact_id(value: str) -> int:
    m = _FACT_ID.match(value.strip()) if isinstance(value, str) else None
    if not m:
        raise InputError(f"{value!r} is not a memory id; ids look like 'f-12'")
    return int(m.group(1))


def parse_narrative_id(value: str) -> int:
    m = _NARRATIVE_ID.match(value.strip()) if isinstance(value, str) else None
    if not m:
        raise InputError(f"{value!r} is not a narrative id; ids look like 'a-3'")
    return int(m.group(1))


class _Tool(BaseModel):
    model_config = ConfigDict(extra="forbid", str_strip_whitespace=True)

    @field_validator("content", "narrative", "title", "reason", check_fields=False)
    @classmethod
    def _not_blank(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("must not be empty")
        return v


# The guide to the memory types, the confidence scale and the dates is said here, once, beside
# the fields it describes: stage 1's framing used to say it again (docs/cost.md, "Said once").
TYPE_HELP = (
    "world: a fact about the user's world (people, places, jobs, things, relations) | experience: "
    "something that happened (to the user, or between the user and this digital life), with its "
    "absolute date | preference: a like, dislike, habit or want of the user | opinion: a belief or "
    "judgement the user holds, which may change | imprint: a moment that shapes who the user is or the "
    "relationship (a first meeting, a loss, a promise, a breakthrough)"
)
CONFIDENCE_HELP = (
    "how sure the memory is: 0.9-1.0 the user said it plainly; 0.6-0.8 implied, or said in passing; "
    "below 0.6 do not record it"
)
SOURCES_HELP = (
    "ids of the conversations the fact was said in, as shown in the input; required when the input has "
    "more than one conversation"
)
OBSERVED_HELP = "when it was said: ISO-8601 with its UTC offset, e.g. 2026-11-17T20:15:00+08:00"
VALID_FROM_HELP = "only when the fact has a known start (ISO-8601 with offset), e.g. a job since March"
VALID_UNTIL_HELP = (
    "only when the fact has a known end (ISO-8601 with offset), e.g. a trip next week ends after it"
)


class CreateSemanticMemory(_Tool):
    """Record one durable fact, preference, experience, opinion or imprint about the user (or the
    user's world)."""  # what qualifies is the task's (light/prompt.py), said there once

    type: MemoryType = Field(description=TYPE_HELP)
    content: Content = Field(description="one self-contained sentence in the user's language")
    confidence: float = Field(0.8, ge=0, le=1, description=CONFIDENCE_HELP)
    source_sessions: list[str] | None = Field(None, description=SOURCES_HELP)
    observed_at: Instant | None = Field(None, description=OBSERVED_HELP)
    valid_from: Instant | None = Field(None, description=VALID_FROM_HELP)
    valid_until: Instant | None = Field(None, description=VALID_UNTIL_HELP)


class UpdateSemanticMemory(_Tool):
    """Change fields of a memory you were shown: only the fields you pass change; omitted fields
    keep their value. source_sessions you pass are ADDED to the memory's sources (the older
    evidence stays cited); pass `source_sessions: []` only to clear them all."""

    id: str = Field(description="memory id as shown, e.g. f-12")
    type: MemoryType | None = Field(None, description=TYPE_HELP)
    content: Content | None = None
    confidence: float | None = Field(None, ge=0, le=1, description=CONFIDENCE_HELP)
    source_sessions: list[str] | None = Field(None, description="today's conversation ids to add; [] clears")
    observed_at: Instant | None = Field(None, description=OBSERVED_HELP)
    valid_from: Instant | None = Field(None, description=VALID_FROM_HELP)
    valid_until: Instant | None = Field(None, description=VALID_UNTIL_HELP)


# a merge or split in review mode waits for a person (docs/review.md), who reads this beside it
REVIEW_REASON_HELP = "why, in one sentence (shown to the person who reviews it)"


class DeprecateSemanticMemory(_Tool):
    """Retire a memory that is wrong, contradicted or superseded. Nothing is deleted."""

    id: FactId
    reason: str = Field(min_length=1, max_length=500)
    superseded_by: str | None = Field(
        None, description="the id of the memory that replaces it, if any, e.g. f-12"
    )
    valid_until: Instant | None = Field(None, description="when it stopped being true (ISO-8601 with offset)")


class MergeSemanticMemories(_Tool):
    """Merge two or more duplicates into one new memory. The program stitches the fields:
    sources are the union, observed_at the earliest; the sources are deprecated, superseded
    by the new memory. You only write the merged content."""

    source_ids: list[str] = Field(description="two or more distinct ids, e.g. ['f-3', 'f-9']")
    content: Content
    type: MemoryType | None = Field(None, description="defaults to the first source's type")
    confidence: float | None = Field(None, ge=0, le=1)
    reason: str | None = Field(None, max_length=500, description=REVIEW_REASON_HELP)


class SplitSemanticMemory(_Tool):
    """Split an entry holding several independent facts into one memory per fact. Sources and
    observed_at are inherited; the original is deprecated, superseded by the first part."""

    id: FactId
    parts: list[Content] = Field(min_length=2, description="self-contained sentences, one fact each")
    reason: str | None = Field(None, max_length=500, description=REVIEW_REASON_HELP)


class PinSemanticMemory(_Tool):
    """Keep a memory resident in the agent's context."""

    id: FactId
    reason: str | None = None


class UnpinSemanticMemory(_Tool):
    """Stop keeping a memory resident (it stays active and searchable)."""

    id: FactId
    reason: str = Field(min_length=1, max_length=500)


class CreateEmotionalAnchor(_Tool):
    """Record the mood of a conversation or an emotional turning point."""

    conversation_id: str
    occurred_at: Instant
    emotion: str = Field(min_length=1, max_length=60)
    valence: float = Field(ge=-1, le=1)
    arousal: float = Field(ge=0, le=1)
    intensity: float = Field(0.5, ge=0, le=1)
    trigger: str | None = Field(None, max_length=500)
    note: str | None = Field(None, max_length=MAX_CONTENT_CHARS)


class CreateAutobiographicalMemory(_Tool):
    """Tell what an experience meant. Only when something is worth telling; writing nothing is normal."""

    title: str = Field(min_length=1, max_length=200)
    narrative: Content
    significance: Significance
    occurred_from: Instant | None = None
    occurred_until: Instant | None = None
    source_memory_ids: list[str] = Field(default_factory=list, description="memory ids, e.g. ['f-3']")
    source_sessions: list[str] | None = None


class DeprecateAutobiographicalMemory(_Tool):
    """Retire a narrative (there is no content update: write a new one instead)."""

    id: str = Field(description="narrative id as shown, e.g. a-3")
    reason: str = Field(min_length=1, max_length=500)


class WriteSelfBlock(_Tool):
    """Replace one self block (the old version is kept in history). identity is never written by sleep."""

    name: WritableBlock
    content: str = Field(min_length=1, max_length=8000)


class WriteTemporalSummary(_Tool):
    """Write (or replace) the summary of a day, week, month or year."""

    level: Level
    period_start: date
    period_end: date
    content: str = Field(min_length=1, max_length=8000)


class Connection_(BaseModel):
    model_config = ConfigDict(extra="forbid")
    link: str = Field(min_length=1, description="A ↔ B")
    why: str = Field(min_length=1)


class ConfidenceUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    id: str = Field(description="memory id, e.g. f-12")
    new_confidence: float = Field(ge=0, le=1)
    reason: str = Field(min_length=1)


class BankSuggestion(BaseModel):
    model_config = ConfigDict(extra="forbid")
    slug: str = Field(min_length=1, max_length=80, pattern=r"^[a-z0-9][a-z0-9-]*$")
    kind: Literal["entity", "concept"]
    seed_content: str = Field(min_length=1, max_length=MAX_CONTENT_CHARS)


class WriteDreamEntry(_Tool):
    """REM synthesis of the night: connections, confidence updates (applied to the memories),
    next-session actions and bank page suggestions."""

    aha_moments: list[str] = Field(default_factory=list)
    creative_connections: list[Connection_] = Field(default_factory=list)
    confidence_updates: list[ConfidenceUpdate] = Field(default_factory=list)
    next_session_actions: list[str] = Field(default_factory=list)
    bank_suggestions: list[BankSuggestion] = Field(default_factory=list)


TOOLS: dict[str, type[_Tool]] = {
    "create_semantic_memory": CreateSemanticMemory,
    "update_semantic_memory": UpdateSemanticMemory,
    "deprecate_semantic_memory": DeprecateSemanticMemory,
    "merge_semantic_memories": MergeSemanticMemories,
    "split_semantic_memory": SplitSemanticMemory,
    "pin_semantic_memory": PinSemanticMemory,
    "unpin_semantic_memory": UnpinSemanticMemory,
    "create_emotional_anchor": CreateEmotionalAnchor,
    "create_autobiographical_memory": CreateAutobiographicalMemory,
    "deprecate_autobiographical_memory": DeprecateAutobiographicalMemory,
    "write_self_block": WriteSelfBlock,
    "write_temporal_summary": WriteTemporalSummary,
    "write_dream_entry": WriteDreamEntry,
}


def tool_specs(names: list[str] | tuple[str, ...]):
    """The Messages API `tools` entries for a step's whitelist. A field described by an earlier
    tool of the list the same way (update's `type`, `confidence` and dates are create's) says
    only where to read it: the tools precede every prompt of a night (docs/cost.md)."""
    specs = [_spec(name).model_copy(deep=True) for name in names]
    seen: dict[tuple[str, str], str] = {}
    for spec in specs:
        for field, prop in (spec.input_schema.get("properties") or {}).items():
            said = prop.get("description") if isinstance(prop, dict) else None
            if not isinstance(said, str) or len(said) <= SAME_AS_MIN:
                continue
            first = seen.setdefault((field, said), spec.name)
            if first != spec.name:
                prop["description"] = f"as in {first}"
    return specs


SAME_AS_MIN = 40  # a description shorter than this is kept: "as in <tool>" saves nothing


@cache
def _spec(name: str):
    """One tool's entry, built once per process: generating a JSON schema costs more than a
    whole idle step (a night asks for the same few tools in every step of every anima)."""
    model = TOOLS[name]
    schema = cast("dict[str, Any]", _slim(model.model_json_schema()))
    schema.pop("description", None)  # already the tool's description
    description = " ".join((model.__doc__ or name).split())
    return ToolSpec(name=name, description=description, input_schema=schema)


def _slim(node: object, *, names: bool = False) -> object:
    """The JSON schema without what only costs tokens: pydantic's generated titles (the field
    name again) and the `anyOf [X, null]` + `default: null` of an optional field, written as
    `type: [X, "null"]` (null still clears where it means that). The tool schemas precede every
    prompt of a night (docs/cost.md); validation is still the pydantic model's."""
    if isinstance(node, list):
        return [_slim(v) for v in node]
    if not isinstance(node, dict):
        return node
    if names:  # a `properties` / `$defs` mapping: the keys are names, not schema keywords
        return {k: _slim(v) for k, v in node.items()}
    out = {k: _slim(v, names=k in ("properties", "$defs")) for k, v in node.items() if k != "title"}
    options = out.get("anyOf")
    if isinstance(options, list) and len(options) == 2 and {"type": "null"} in options:
        (kept,) = [o for o in options if o != {"type": "null"}]
        if isinstance(kept, dict) and isinstance(kept.get("type"), str):
            del out["anyOf"]
            if out.get("default", 0) is None:
                del out["default"]
            out = {**kept, **out, "type": [kept["type"], "null"]}
    return out
