"""The vocabularies of the memory, written once: the store's models, the memory tools, the
agent API (facade, HTTP, MCP, client) and the exports import them from here.

Each is a `Literal` (what a field may hold, checked by pydantic and mypy) and a tuple of its
values in their order (what code iterates). The migrations' CHECK constraints (sql/) say the
same in SQL.

This module imports nothing of the package: anything may import it.
"""

from __future__ import annotations

from typing import Literal, get_args

# the kinds of semantic memory (docs/decisions.md: what each holds)
MemoryType = Literal["world", "experience", "preference", "opinion", "imprint"]
MEMORY_TYPES: tuple[str, ...] = get_args(MemoryType)

# who wrote a message of the archive
Role = Literal["user", "assistant", "tool", "system"]
ROLES: tuple[str, ...] = get_args(Role)

# how much an autobiographical narrative weighs, lightest first
Significance = Literal["routine", "notable", "milestone", "turning_point"]
SIGNIFICANCE: tuple[str, ...] = get_args(Significance)

# the levels of the temporal summaries, shortest first
Level = Literal["day", "week", "month", "year"]
LEVELS: tuple[str, ...] = get_args(Level)

# the six self blocks; the night writes every one but identity
WritableBlock = Literal["persona", "values", "relationships", "current_state", "autobiography_summary"]
SelfBlockName = Literal["identity", WritableBlock]
SELF_BLOCKS: tuple[str, ...] = get_args(SelfBlockName)
# what a reader of an empty identity block is told (the MCP self resource, `anima identity`)
IDENTITY_UNSET = (
    'the nights never write who the anima is: its owner sets it with `anima identity --anima A "I am …"`'
)

# a review-mode proposal's state (docs/review.md)
ProposalStatus = Literal["pending", "approved", "rejected", "conflict"]
PROPOSAL_STATUSES: tuple[str, ...] = get_args(ProposalStatus)

# what a forget starts from (docs/forget.md)
TargetKind = Literal["message", "conversation", "memory", "anima"]
TARGET_KINDS: tuple[str, ...] = get_args(TargetKind)
