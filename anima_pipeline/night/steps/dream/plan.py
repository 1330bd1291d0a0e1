"""The offline dream: the write_dream_entry input built from today's memories and the
long-term store, deterministically (creative connections, aha moments, confidence updates,
next-session actions, bank page suggestions). Pure: the step (night/steps/dream/step.py) reads the
store and passes the memories in.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING

from anima_pipeline.text.entities import clip, entity_index, plan_of_memory, slug, words
from anima_pipeline.tools.schemas import MAX_CONTENT_CHARS

if TYPE_CHECKING:
    from anima_pipeline.store.memories import SemanticMemory

MAX_CONNECTIONS = 5
MAX_AHA = 3
MAX_ACTIONS = 5
MAX_ENTITY_PAGES = 5
MAX_CONCEPT_PAGES = 3
RECUR = 3  # a bank page only for a topic that recurred 3+ times (the dream's task, prompt.py)
CONFIDENCE_STEP = 0.05


@dataclass
class DayMemories:
    today: list[SemanticMemory]  # active memories created or changed today
    reconfirmed: dict[int, str]  # id -> why (updated or merged today, not new today)
    dream_base: dict[int, float]  # confidence before this step's own earlier run


def synthesize(day: date, dm: DayMemories, store: list[SemanticMemory], anima_id: str = "") -> dict:
    """The write_dream_entry input of the offline baseline (deterministic). The anima's own
    name is not a topic of its dreams: it is in everything it says about itself."""
    today_ids = {m.id for m in dm.today}
    by_id = {m.id: m for m in store}
    me = frozenset({anima_id.lower()}) if anima_id else frozenset()
    index = entity_index(store, me)
    n = max(len(store), 1)
    ubiquitous = {e for e, ids in index.items() if n >= 5 and len(ids) > 0.6 * n}  # the user's own name
    return {
        "creative_connections": _connections(dm.today, store, today_ids, index, ubiquitous),
        "aha_moments": _aha(index, today_ids, ubiquitous, by_id),
        "confidence_updates": _confidence(dm, by_id),
        "next_session_actions": list(
            dict.fromkeys(a for m in dm.today if (a := plan_of_memory(m.content, day, me)))
        )[:MAX_ACTIONS],
        "bank_suggestions": _bank(index, today_ids, store, by_id),
    }


def _connections(
    today: list[SemanticMemory],
    store: list[SemanticMemory],
    today_ids: set[int],
    index: dict[str, set[int]],
    ubiquitous: set[str],
) -> list[dict]:
    """Pairs (today, older) sharing an entity or a rare word, strongest first: a shared
    feature weighs log(N / how many memories have it), so rare links beat common ones."""
    n = max(len(store), 1)
    ents = {m.id: {e for e, ids in index.items() if m.id in ids and e not in ubiquitous} for m in store}
    entity_words = {w.lower() for e in index for w in e.split()}
    vocab = {m.id: words(m.content) - entity_words for m in store}
    df: dict[str, int] = defaultdict(int)
    for ws in vocab.values():
        for w in ws:
            df[w] += 1
    rare_limit = max(2, int(0.05 * n))
    older = [m for m in store if m.id not in today_ids]
    pairs = []
    for t in today:
        for o in older:
            shared_e = sorted(ents.get(t.id, set()) & ents[o.id])
            shared_w = sorted(w for w in vocab.get(t.id, set()) & vocab[o.id] if df[w] <= rare_limit)
            if not (shared_e or shared_w):
                continue
            score = sum(math.log(1 + n / len(index[e])) * 2 for e in shared_e)
            score += sum(math.log(1 + n / df[w]) for w in shared_w)
            pairs.append((score, t, o, shared_e, shared_w))
    out, used_older = [], set()
    per_today: defaultdict[int, int] = defaultdict(int)
    for _, t, o, shared_e, shared_w in sorted(pairs, key=lambda p: (-p[0], p[1].id, p[2].id)):
        if o.id in used_older or per_today[t.id] >= 2:
            continue
        what = shared_e[:2] + [f"“{w}”" for w in shared_w[:2]]
        out.append(
            {
                "link": f"{t.ref} {clip(t.content, 70)} ↔ {o.ref} {clip(o.content, 70)}",
                "why": f"both mention {' and '.join(what)}; today's memory meets one from before",
            }
        )
        used_older.add(o.id)
        per_today[t.id] += 1
        if len(out) == MAX_CONNECTIONS:
            break
    return out


def _aha(
    index: dict[str, set[int]], today_ids: set[int], ubiquitous: set[str], by_id: dict[int, SemanticMemory]
) -> list[str]:
    recurring = sorted(
        (e for e, ids in index.items() if len(ids) >= RECUR and ids & today_ids and e not in ubiquitous),
        key=lambda e: (-len(index[e]), e),
    )
    out = []
    for e in recurring[:MAX_AHA]:
        ids = sorted(index[e])
        new = by_id[min(index[e] & today_ids)]
        old = by_id[ids[0]] if ids[0] != new.id else by_id[ids[-1]]
        out.append(
            f"{e} runs through {len(ids)} memories: today “{clip(new.content, 80)}”, "
            f"earlier “{clip(old.content, 80)}”"
        )
    return out


def _confidence(dm: DayMemories, by_id: dict[int, SemanticMemory]) -> list[dict]:
    """+0.05 (capped at 1.0) for memories re-confirmed today. The base is the value before
    this step's own earlier run, so a forced re-run does not add a second step."""
    out = []
    for mid in sorted(dm.reconfirmed):
        mem = by_id.get(mid)
        if mem is None:
            continue
        base = dm.dream_base.get(mid, mem.confidence)
        new = round(min(1.0, base + CONFIDENCE_STEP), 4)
        if abs(new - mem.confidence) > 1e-6:
            out.append({"id": mem.ref, "new_confidence": new, "reason": dm.reconfirmed[mid]})
    return out


def _bank(
    index: dict[str, set[int]],
    today_ids: set[int],
    store: list[SemanticMemory],
    by_id: dict[int, SemanticMemory],
) -> list[dict]:
    """Pages for entities and concepts in RECUR+ active memories, today's topics first."""

    def rank(ids: set[int], key: str) -> tuple:
        return (not (ids & today_ids), -len(ids), key)

    def seed(ids: set[int]) -> str:
        lines, size = [], 0
        for i in sorted(ids):
            line = f"- {by_id[i].ref} {clip(by_id[i].content, 200)}"
            if size + len(line) + 1 > MAX_CONTENT_CHARS:
                break
            lines.append(line)
            size += len(line) + 1
        return "\n".join(lines)

    pages = []
    names = sorted((e for e, ids in index.items() if len(ids) >= RECUR), key=lambda e: rank(index[e], e))
    for e in names[:MAX_ENTITY_PAGES]:
        pages.append({"slug": slug(e), "kind": "entity", "seed_content": seed(index[e])})
    n = max(len(store), 1)
    concept_ids: dict[str, set[int]] = defaultdict(set)
    entity_words = {w.lower() for e in index for w in e.split()}
    for m in store:
        for w in words(m.content):
            if w.isascii() and w not in entity_words:
                concept_ids[w].add(m.id)
    concepts = sorted(
        (w for w, ids in concept_ids.items() if len(ids) >= RECUR and len(ids) <= 0.5 * n),
        key=lambda w: rank(concept_ids[w], w),
    )
    for w in concepts[:MAX_CONCEPT_PAGES]:
        pages.append({"slug": slug(w), "kind": "concept", "seed_content": seed(concept_ids[w])})
    seen: set[str] = set()
    out = []
    for p in pages:
        if p["slug"] not in seen:
            seen.add(p["slug"])
            out.append(p)
    return out
