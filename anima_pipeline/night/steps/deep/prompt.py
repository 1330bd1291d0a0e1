"""What deep sleep tells the model and the messages it sends: the framing of its shared
prefix (every round's rules), each round's task, message 1 (the active memories, one line
each, in slices under the size limit) and message 1.5 (the changes of earlier rounds).

Message 1 is most of every deep-sleep prompt and the same bytes in every round, the dream
and the self refresh (one cached prefix per model, night/prefix.py; docs/cost.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from anima_pipeline.config import DEFAULT_TIMEZONE
from anima_pipeline.core.errors import NightError
from anima_pipeline.core.steps import DEEP_SLEEP
from anima_pipeline.core.types import MEMORY_TYPES
from anima_pipeline.night.steps.framing import RESTRAINT_RULE

if TYPE_CHECKING:
    from anima_pipeline.store.memories import SemanticMemory

# The rounds in order, each its own step: (step, round name); the names key the rules, the
# tasks and the tools.
ROUNDS: tuple[tuple[str, str], ...] = tuple(
    zip(DEEP_SLEEP, ("contradiction", "split", "merge", "pin_review"), strict=True)
)

# Size thresholds on message 1, in characters; past REFUSE_CHARS deep sleep goes on in slices
# each under it (`slices`).
WARN_CHARS = 10_000
BATCH_CHARS = 100_000
REFUSE_CHARS = 300_000

_TZ = ZoneInfo(DEFAULT_TIMEZONE)


class DeepSleepTooLarge(NightError):
    """A slice of message 1 that cannot be cut (one memory over the limit)."""


# ---- the framing and the tasks ------------------------------------------------------------

DEEP_HEAD = """\
You are the deep sleep of a digital life's memory: four rounds over {store}the
user's active semantic memories, in this order — 1 contradiction and expiry, 2 split, 3 merge,
4 pin review — each round sees the store as the earlier rounds left it.

{message_one}: one memory a line —
id, type, observed date, "[pinned]", "[settled]" and "c=<confidence>" when it is not 0.8, then the content.
Message 1.5 lists the changes of earlier rounds: it overrides message 1. Message 2 is a
program pre-filter: candidates to look at first (not a verdict). Message 3 names this round.
Act only in the current round, with its tool. When in doubt, do nothing: a wrong change
costs more than a missed one. A memory marked "[settled]" was corrected by the user: leave
it as it is (no merge, split, rewrite or pin change); only a memory learned after it may
supersede it."""

MESSAGE_ONE = {
    False: "Message 1 is the full list of active memories, identical in every round",
    # an incremental night's rounds 1 and 3 (night/steps/deep/candidates.py)
    True: "Message 1 lists the memories that changed since the last deep sleep and their nearest\n"
    "neighbours in the store (the rest was checked on earlier nights)",
}

DEEP_RULES = {
    "contradiction": """\
Round 1 — contradiction and expiry (tool: deprecate_semantic_memory).
A contradiction is exclusive: two memories negate each other and the difference cannot be
explained by change over time.
- Contradiction: "daughter born in the Year of the Tiger" vs "daughter born in the Year of the
  Goat" (one zodiac sign); "不喜欢吃辣" vs "喜欢吃辣" (a direct negation).
- Not a contradiction: "likes apples" vs "likes cherries" (they coexist).
- Not a contradiction (change over time): "likes Python" vs "now prefers TypeScript" — both
  can be true; keep both.
Expiry: only a mutually exclusive state that was replaced — employer, city of residence,
relationship status, a plan whose date has passed — expires: deprecate the older memory
with a reason, superseded_by the newer one, and valid_until when it stopped. The memory
with the later observed date wins; if the dates do not tell, do nothing. Paraphrases of the
same fact are not contradictions: leave them to round 3.""",
    "split": """\
Round 2 — split (tool: split_semantic_memory).
An entry holding several independent facts becomes one memory per fact, each self-contained
(repeat the subject). Sentences that depend on each other stay together. Sources and
observed_at are inherited; the original is deprecated.""",
    "merge": """\
Round 3 — merge (tool: merge_semantic_memories).
Duplicates and paraphrases of the same fact become one memory with the fullest content (in
the user's language). The program stitches the fields: sources union, earliest observed_at,
the sources deprecated and superseded by the new memory. Do not merge facts that merely share
a topic or a person.""",
    "pin_review": """\
Round 4 — pin review (tools: unpin_semantic_memory, pin_semantic_memory).
Pinned memories stay in the agent's context always (at most 40 are read). Unpin pins that are
stale — not cited for a long time, no longer true or no longer important — with a reason; pin
a memory only if it is essential to who the user is.""",
}

DEEP_AFTER = """\
After the rounds, two more passes read the same store: the dream and the self-layer refresh;
their task is in their message 3."""


def deep_system(rounds: tuple[str, ...] | list[str], after: bool, candidates: bool = False) -> str:
    """The framing of deep sleep's shared prefix: the rules of the rounds that send it (the
    steps on one model share one cached prefix; docs/cost.md), and the note on the dream and
    the self refresh when they send it too; `candidates`: message 1 holds an incremental
    night's candidates, not the whole store."""
    head = DEEP_HEAD.format(
        store="" if candidates else "the whole store of ", message_one=MESSAGE_ONE[candidates]
    )
    parts = [head, *(DEEP_RULES[r] for r in DEEP_RULES if r in rounds)]
    return "\n\n".join([*parts, *([DEEP_AFTER] if after else []), RESTRAINT_RULE])


DEEP_ROUND_TASK = {
    "contradiction": "Message 3 — this is round 1: contradiction and expiry. Follow the round-1 rules.",
    "split": "Message 3 — this is round 2: split. Follow the round-2 rules.",
    "merge": "Message 3 — this is round 3: merge. Follow the round-3 rules.",
    "pin_review": "Message 3 — this is round 4: pin review. Follow the round-4 rules.",
}


# ---- message 1: the active memories -------------------------------------------------------


def compact(m: SemanticMemory, tz: ZoneInfo | None = None) -> str:
    """One memory as one line of message 1. Sources are left out (the program stitches them on
    split and merge) and the observed time is a date: message 1 is most of every deep-sleep
    prompt, and JSON keys, quotes and full timestamps on every memory cost as many tokens as
    the contents themselves (docs/cost.md)."""
    parts = [m.ref, m.type]
    if m.observed_at:
        parts.append(m.observed_at.astimezone(tz or _TZ).date().isoformat())
    if m.pinned:
        parts.append("[pinned]")
    if m.settled_at is not None:
        parts.append("[settled]")  # corrected by the user: leave it as it is
    if m.confidence != 0.8:
        parts.append(f"c={m.confidence:.2f}")
    return " ".join(parts) + " " + " ".join(m.content.split())


def message_one(memories: list[SemanticMemory], tz: ZoneInfo | None = None) -> str:
    return "\n".join(compact(m, tz) for m in memories)


def size_band(chars: int) -> str:
    """The size ladder of the whole message 1 (normal, warn, batched by type); past the limit
    it goes on in slices."""
    if chars > REFUSE_CHARS:
        return "sliced"
    if chars > BATCH_CHARS:
        return "batched"
    if chars > WARN_CHARS:
        return "warn"
    return "normal"


def slices(
    memories: list[SemanticMemory], tz: ZoneInfo | None = None
) -> list[tuple[str, list[SemanticMemory]]]:
    """How message 1 goes out: one slice up to 100k characters; by type above; a type whose
    own message 1 is over 300k is cut into consecutive time windows (observed, else created,
    then id), each packed up to 300k. Every slice is a pure function of the memories, so each
    round rebuilds it byte for byte (its cached prefix). Only a memory that alone is over the
    limit cannot be cut: DeepSleepTooLarge, and deep sleep is skipped for the anima tonight."""
    if len(message_one(memories, tz)) <= BATCH_CHARS:
        return [("all", memories)]
    out: list[tuple[str, list[SemanticMemory]]] = []
    for t in MEMORY_TYPES:
        group = [m for m in memories if m.type == t]
        if not group:
            continue
        if len(message_one(group, tz)) <= REFUSE_CHARS:
            out.append((t, group))
        else:
            out += _time_windows(t, group, tz)
    return out


def _time_windows(
    label: str, group: list[SemanticMemory], tz: ZoneInfo | None
) -> list[tuple[str, list[SemanticMemory]]]:
    windows: list[list[SemanticMemory]] = [[]]
    size = 0
    for m in sorted(group, key=lambda m: (m.observed_at or m.created_at, m.id)):
        n = len(compact(m, tz))
        if n > REFUSE_CHARS:
            raise DeepSleepTooLarge(
                f"deep sleep refused: memory f-{m.id} alone is {n:,} characters of message 1 (limit "
                f"{REFUSE_CHARS:,}), a slice that cannot be cut; deep sleep is skipped for this anima "
                "tonight and nothing was changed. Split or shorten that memory."
            )
        if windows[-1] and size + 1 + n > REFUSE_CHARS:
            windows.append([])
            size = 0
        size += n + (1 if windows[-1] else 0)  # one line each, newline-separated
        windows[-1].append(m)
    return [(f"{label}, {_when(w[0])} to {_when(w[-1])}", w) for w in windows]


def _when(m: SemanticMemory) -> str:
    return f"{m.observed_at or m.created_at:%Y-%m-%d}"


# ---- message 1.5: the changes of earlier rounds --------------------------------------------


def message_one_five(events: list[dict]) -> str:
    processed, new, modified = [], [], []
    created_ids = {e["memory_id"] for e in events if e["before"] is None}
    for e in events:
        ref = f"f-{e['memory_id']}"
        after = e["after"] or {}
        if e["before"] is None:
            new.append(
                f'{ref} ({after.get("type")}) "{after.get("content")}" '
                f"sources=[{','.join(after.get('source_sessions') or [])}] observed={after.get('observed_at')}"
            )
        elif after.get("status") == "deprecated" and (e["before"] or {}).get("status") == "active":
            succ = after.get("superseded_by")
            if e["op"] == "merge":
                processed.append(f"{ref} — merged into f-{succ}")
            elif e["op"] == "split":
                processed.append(f"{ref} — split (first part f-{succ})")
            else:
                why = after.get("deprecated_reason") or "deprecated"
                processed.append(
                    f"{ref} — deprecated: {why}" + (f" (superseded by f-{succ})" if succ else "")
                )
        elif e["memory_id"] not in created_ids:
            fields = sorted(
                k for k in after if k not in ("updated_at",) and after.get(k) != (e["before"] or {}).get(k)
            )
            detail = (
                f'content updated to "{after.get("content")}"' if "content" in fields else ", ".join(fields)
            )
            modified.append(f"{ref} — modified: {detail}")
    if not (processed or new or modified):
        return "# Changes of earlier rounds (these override message 1)\n(none yet)"
    parts = ["# Changes of earlier rounds (these override message 1)"]
    parts += ["## Processed (ignore these entries of message 1)", *(processed or ["(none)"])]
    parts += ["## New entries (not in message 1)", *(new or ["(none)"])]
    parts += ["## Modified entries (these override message 1)", *(modified or ["(none)"])]
    return "\n".join(parts)
