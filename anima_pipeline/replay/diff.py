"""What a replay changed: the shadow store against the live one (docs/replay.md).

Memories are compared as an anima knows them: the active ones, by (type, content). A memory
both stores hold under the same id (it existed before the replayed days) and that differs
(status, content, type) is *changed*; an active memory only the shadow has is *added*, one only
the live store has is *removed*. Each is dated by the night that wrote it (its create event).
Anchors, narratives and summaries are counted; cost is the replayed nights' `cost_usd`.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from datetime import date
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from anima_pipeline.core.errors import InputError
from anima_pipeline.evaluation.locomo import keywords
from anima_pipeline.memory.facade import AnimaMemory
from anima_pipeline.store import as_of as snapshot
from anima_pipeline.store import shadow_reads as queries
from anima_pipeline.store.db import Database, connect

EXAMPLES = 5


class MemoryChange(BaseModel):
    id: int
    anima_id: str
    type: str
    day: date | None
    content: str
    was: str | None = None  # changed: the live store's content / status


class StoreDiff(BaseModel):
    name: str
    first: date
    last: date
    added: list[MemoryChange] = Field(default_factory=list)
    removed: list[MemoryChange] = Field(default_factory=list)
    changed: list[MemoryChange] = Field(default_factory=list)
    counts: dict[str, dict[str, int]] = Field(default_factory=dict)  # table -> {"live": n, "shadow": n}
    cost_usd: dict[str, float] = Field(default_factory=dict)
    # with a question file: the share of answer words found in the context, live and shadow
    recall: dict[str, float] = Field(default_factory=dict)
    live_checksum: str = ""

    def by_type_and_day(self) -> dict[str, Counter[tuple[str, str]]]:
        return {
            kind: Counter((m.type, str(m.day)) for m in getattr(self, kind))
            for kind in ("added", "removed", "changed")
        }

    def markdown(self) -> str:
        lines = [
            f"### Replay `{self.name}`: {self.first} .. {self.last}",
            "",
            f"Memories: **{len(self.added)} added**, **{len(self.removed)} removed**, **{len(self.changed)} changed**.",
            "",
            "| | live | shadow |",
            "|---|--:|--:|",
        ]
        lines += [f"| {t} | {c['live']} | {c['shadow']} |" for t, c in self.counts.items()]
        lines += [
            f"| recall: answer words in the context ({n} questions) | {self.recall.get('live', 0):.3f} | {self.recall.get('shadow', 0):.3f} |"
            for n in [int(self.recall.get("questions", 0))]
            if n
        ]
        lines += [
            f"| cost (USD) of the replayed nights | {self.cost_usd.get('live', 0):.4f} | {self.cost_usd.get('shadow', 0):.4f} |",
            "",
        ]
        for kind, counter in self.by_type_and_day().items():
            if counter:
                lines += [
                    f"**{kind}** by type and night: "
                    + ", ".join(f"{t} {d}: {n}" for (t, d), n in sorted(counter.items())),
                    "",
                ]
            for m in getattr(self, kind)[:EXAMPLES]:
                was = f" (was: {m.was})" if m.was else ""
                lines.append(f"- {kind} f-{m.id} [{m.type}, {m.day}] {m.content}{was}")
            if getattr(self, kind):
                lines.append("")
        return "\n".join(lines)


def diff(live_url: str, shadow_url: str, name: str, first: date, last: date) -> StoreDiff:
    with connect(live_url) as live, connect(shadow_url) as shadow:
        a, b = queries.memories_with_day(live), queries.memories_with_day(shadow)
        key = lambda r: (r["anima_id"], r["type"], " ".join(r["content"].split()).casefold())  # noqa: E731
        live_active = {key(r) for r in a.values() if r["status"] == "active"}
        shadow_active = {key(r) for r in b.values() if r["status"] == "active"}
        out = StoreDiff(name=name, first=first, last=last)
        for mid, r in sorted(b.items()):
            old = a.get(mid)
            if _same_row(old, r):
                assert old is not None
                if (old["content"], old["status"], old["type"]) != (r["content"], r["status"], r["type"]):
                    out.changed.append(_change(r, was=f"{old['status']}: {old['content']}"))
            elif r["status"] == "active" and key(r) not in live_active:
                out.added.append(_change(r))
        for r in sorted(a.values(), key=lambda r: r["id"]):
            if r["status"] == "active" and key(r) not in shadow_active and not _same_row(r, b.get(r["id"])):
                out.removed.append(_change(r))
        live_counts, shadow_counts = queries.layer_counts(live), queries.layer_counts(shadow)
        out.counts = {t: {"live": n, "shadow": shadow_counts[t]} for t, n in live_counts.items()}
        out.cost_usd = {
            "live": queries.nights_cost(live, first, last),
            "shadow": queries.nights_cost(shadow, first, last),
        }
        out.live_checksum = _digest(snapshot.checksums(live))
    return out


def _same_row(a: dict[str, Any] | None, b: dict[str, Any] | None) -> bool:
    """The same memory in both stores: one id, one anima, written by the same night (ids born
    in the shadow start past the live store's, so a shared id is a row both inherited)."""
    return a is not None and b is not None and a["anima_id"] == b["anima_id"] and a["day"] == b["day"]


def _change(r: dict[str, Any], was: str | None = None) -> MemoryChange:
    return MemoryChange(
        id=r["id"], anima_id=r["anima_id"], type=r["type"], day=r["day"], content=r["content"], was=was
    )


def _digest(sums: dict[str, str]) -> str:
    return hashlib.sha256("".join(f"{t}:{s}" for t, s in sorted(sums.items())).encode()).hexdigest()


class Question(BaseModel):
    """One line of a question file: what to ask which anima, and the answer to look for."""

    anima_id: str
    question: str
    answer: str


def load_questions(path: str) -> list[Question]:
    """A JSONL file of {"anima_id", "question", "answer"}; a bad line is named as file:line."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from None
    out = []
    for n, line in enumerate(lines, 1):
        if line.strip():
            try:
                out.append(Question.model_validate(json.loads(line)))
            except (json.JSONDecodeError, ValidationError) as exc:
                raise InputError(f"{path}:{n}: not a question line ({exc})") from None
    return out


def recall_share(db: Database, questions: list[Question]) -> float:
    """Mean share of each answer's key words found in the assembled context (the offline
    measure of docs/benchmarks.md), asked of the store `db`."""
    shares = []
    for q in questions:
        words = keywords(q.answer)
        text = AnimaMemory(db, q.anima_id).context(q.question).rendered.lower()
        shares.append(sum(w in text for w in words) / len(words) if words else 0.0)
    return sum(shares) / len(shares) if shares else 0.0
