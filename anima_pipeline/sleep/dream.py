"""Dream (REM synthesis, seed sleep-consolidation "Mode 3"): today's memories against the
long-term store, into one dream_journal entry per (anima, day).

The journal holds what consolidation by sorting cannot: links between memories that share
a person, pet, place or a rare word (creative connections), entities that keep coming back
(aha moments), confidence raised where today re-confirmed a memory, concrete next-session
actions from today's plans, and bank page suggestions for topics that recurred 3+ times.

Offline this is a deterministic baseline of exactly those cues; with an LLM, the same two
messages go to prompts.DREAM. Either way the entry is one write_dream_entry call: the
executor applies the confidence updates (audited, op 'confidence') and upserts the entry.
The entity helpers here are shared with the self-layer refresh.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import defaultdict
from dataclasses import dataclass
from datetime import date

from anima_pipeline.llm.types import StepRequest, TextBlock, ToolCall
from anima_pipeline.offline.lexicon import ADVERBS, STOPWORDS
from anima_pipeline.sleep import prompts
from anima_pipeline.sleep.day_input import render_memories
from anima_pipeline.sleep.identity import identity_context
from anima_pipeline.sleep.night import Night, StepOutcome, StepResult, plan_of, run_step
from anima_pipeline.store.db import Connection, Database
from anima_pipeline.store.events import Audit
from anima_pipeline.store.memories import MemoryRepo, SemanticMemory
from anima_pipeline.tools.executor import ToolExecutor
from anima_pipeline.tools.schemas import MAX_CONTENT_CHARS, tool_specs
from anima_pipeline.tools.scope import Scope

STEP = "dreams/journal"
TOOLS = ("write_dream_entry",)
MAX_CONNECTIONS = 5
MAX_AHA = 3
MAX_ACTIONS = 5
MAX_ENTITY_PAGES = 5
MAX_CONCEPT_PAGES = 3
RECUR = 3  # "a topic that recurred 3+ times" (seed)
CONFIDENCE_STEP = 0.05
LONG_TERM_CHARS = 60_000
_ENTRY_KEYS = ("creative_connections", "aha_moments", "next_session_actions", "bank_suggestions")

# ---- text cues shared with self_refresh ------------------------------------------------

_NOT_NAMES = frozenset(
    """the a an i he she they we it his her their my our its this that these those there here
    user assistant on in at for with from to by and but or if when after before during since until
    as also then so yes no not mr mrs ms dr today tomorrow yesterday tonight
    monday tuesday wednesday thursday friday saturday sunday january february march april may june
    july august september october november december""".split()
)
# Proper-case words (not SHOUTING), possibly glued to CJK text on either side ("2026-11-16Lin Wei去了").
_CAPITAL_RUN = re.compile(
    r"(?<![A-Za-z])[A-Z][a-z]+(?:[A-Z][a-z]+)?(?:[’'][a-z]+)?"
    r"(?:\s+[A-Z][a-z]+(?:[A-Z][a-z]+)?(?:[’'][a-z]+)?)*(?![A-Za-z])"
)
_ZH_NAMED = re.compile(r"(?:名叫|叫做|叫|名字是)([\u4e00-\u9fff]{2,3})(?=[，,。.、\s的是]|$)")
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s*")
_WORD = re.compile(r"[a-z][a-z'-]{4,}")
_GENERIC = frozenset(
    """about after again against because before being below between could doing during every
    having other should their there these those through under until where which while would
    really still always never often usually sometimes maybe actually something someone anything
    everything things thing people person works working worked likes liked loves loved wants wanted
    going plans planning planned started starts finished called named since years months weeks
    today tomorrow yesterday night morning evening first second third three later early great
    little makes made takes taken gives given feels felt thinks thought knows known says said
    enjoys enjoyed prefers preferred hates hated lives lived moved visit visited favorite favourite
    recently currently around instead right along among another either enough except however
    inside outside perhaps please quite rather though toward towards unless whether within without
    while whole whose everyone everybody nobody somebody anyone three seven eight needs needed
    keeps tried tries tells asked asks getting become became doing coming comes taking trying
    finally""".split()
)
_PET_WORD = (
    r"(?:cat|dog|puppy|kitten|pet|hamster|rabbit|bunny|parrot|bird|turtle|tortoise|fish|horse|tabby|"
    r"retriever|terrier|poodle|corgi)s?"
)
_PLACE_BEFORE = re.compile(
    r"\b(?:in|at|from|to|near|visit(?:ed|ing)?|around|across|toward|towards)\s+(?:the\s+)?$", re.IGNORECASE
)
_PLACE_WORD = re.compile(
    r"\b(?:City|Park|Street|Road|River|Lake|Mountain|Temple|Island|District|Bay|Beach|Station|Airport|"
    r"Museum|Square|Bund|Province|County)\b"
)
# Events, organisations and works: named, but neither people, pets nor places.
_THING_WORD = re.compile(
    r"\b(?:Marathon|Festival|Race|Cup|Conference|Day|Bank|Robotics|Inc|Ltd|Company|Corp|University|School|"
    r"College|Hospital|Club|Team|Band|Show|Book|Game)\b"
)
_PLAN = re.compile(
    r"\b(?:plan(?:s|ned|ning)?\s+to|(?:is|are|was)\s+going\s+to|will|intends?\s+to|hopes?\s+to|wants?\s+to|"
    r"(?:is|are)\s+about\s+to|would like to)\s+(?P<rest>.+)$|\b(?:signed up for|scheduled|looking forward to|"
    r"upcoming)\b|打算|计划|准备|要去|想去",
    re.IGNORECASE,
)
_ZH_FUNCTION = frozenset("的了是在和与我你他她它们着也都就很还又把被给叫说有这那个不")
_ISO_DATE = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_FUTURE_WORD = re.compile(
    r"\b(?:tomorrow|next (?:week|month|year|weekend))\b|明天|下周|下个月|明年", re.IGNORECASE
)


def _sentence_starts(text: str) -> set[int]:
    return {m.end() for m in _SENTENCE.finditer(text)} | {0}


def entities(text: str) -> list[tuple[str, bool]]:
    """(name, at_sentence_start) for each named-entity cue: capitalised runs in Latin script
    (function words, months and weekdays split them and are dropped) and Chinese "叫X" names."""
    starts = _sentence_starts(text)
    out: list[tuple[str, bool]] = []
    for m in _CAPITAL_RUN.finditer(text):
        run: list[str] = []
        run_start = m.start()
        for w in re.finditer(r"\S+", m.group(0)):
            base = re.sub(r"[’']s$", "", w.group(0))
            if base.lower() in _NOT_NAMES:
                if run:
                    out.append((" ".join(run), run_start in starts))
                run = []
                continue
            if not run:
                run_start = m.start() + w.start()
            run.append(base)
        if run:
            out.append((" ".join(run), run_start in starts))
    out += [(name, False) for name in _ZH_NAMED.findall(text)]
    return out


def entity_index(mems: list[SemanticMemory], exclude: frozenset[str] = frozenset()) -> dict[str, set[int]]:
    """Entity -> ids of the memories naming it; names in `exclude` (lower case: the anima's
    own name) are left out. A capitalised run at a sentence start is trusted only when it
    also appears mid-sentence somewhere or has several words; "Because Lin Wei" becomes
    "Lin Wei" when that is a known name, and a lone "Running" stays out."""
    raw = [(m.id, name, initial) for m in mems for name, initial in entities(m.content)]
    mid = {name for _, name, initial in raw if not initial}
    known = {name for _, name, _ in raw}
    found: dict[str, set[int]] = defaultdict(set)
    for mid_id, name, initial in raw:
        if initial and name not in mid:
            tail = name.partition(" ")[2]
            if tail in known:
                name = tail
            elif not tail:
                continue
        if name.lower() not in exclude:
            found[name].add(mid_id)
    return dict(found)


def _pet_tied(name: str, text: str) -> bool:
    """Is the name tied to a pet word ("cat named Mochi", "Mochi, her cat", "猫叫年糕")?"""
    n = re.escape(name)
    owner = r"(?:(?:a|an|the|his|her|their|my|our|[A-Z]\w*(?:\s[A-Z]\w*)*[’']s)\s+)?"
    return bool(
        re.search(rf"\b{_PET_WORD}\s+(?:named\s+|called\s+)?{n}\b", text, re.IGNORECASE)
        or re.search(rf"\b{n}(?:,|\s+is|\s+was)\s+{owner}(?:[\w-]+\s+){{0,3}}{_PET_WORD}\b", text)
        or re.search(rf"(?:猫|狗|宠物)(?:叫|名叫)?{n}|{n}是.{{0,6}}(?:猫|狗)", text)
    )


def entity_kind(name: str, mems: list[SemanticMemory]) -> str:
    """'pet', 'place', 'thing' (events, organisations) or 'person', from the name and the
    words right around it in the memories that name it."""
    if _PLACE_WORD.search(name):
        return "place"
    if _THING_WORD.search(name):
        return "thing"
    if any(_pet_tied(name, m.content) for m in mems):
        return "pet"
    mentions = place = 0
    for m in mems:
        for hit in re.finditer(re.escape(name), m.content):
            mentions += 1
            place += bool(_PLACE_BEFORE.search(m.content[: hit.start()]))
    return "place" if mentions and place * 2 >= mentions else "person"


# "already", "because", "really" recur everywhere and name no topic
_FUNCTION_WORDS = STOPWORDS | ADVERBS


def words(text: str) -> set[str]:
    """Content words for rarity: Latin words of 5+ letters that say something, and CJK bigrams."""
    latin = {
        w
        for w in _WORD.findall(text.lower().replace("’", "'"))
        if "'" not in w and not w.endswith("ly") and not w.endswith("-")
    }
    cjk = {
        run[i : i + 2]
        for run in re.findall(r"[\u4e00-\u9fff]+", text)
        for i in range(len(run) - 1)
        if not _ZH_FUNCTION.intersection(run[i : i + 2])
    }
    return {w for w in latin if w not in _GENERIC and w not in _NOT_NAMES and w not in _FUNCTION_WORDS} | cjk


_DISCOURSE = re.compile(
    r"^(?:(?:then|so|and|but|now|also|maybe|well|oh|ok|okay|actually)\b[\s,]*)+", re.IGNORECASE
)


def plan_of_memory(content: str, today: date, not_subjects: frozenset[str] = frozenset()) -> str | None:
    """A next-session action when the memory is a plan or names a future date, else None.
    Memories whose subject is in `not_subjects` (lower case: the anima itself, "Aria said
    ...") are what the anima said, not plans to follow up."""
    if content.split(" ", 1)[0].lower().strip(",:") in not_subjects:
        return None
    dates = [date(int(y), int(mo), int(d)) for y, mo, d in _ISO_DATE.findall(content) if _valid(y, mo, d)]
    future = [d for d in dates if d > today]
    m = _PLAN.search(content)
    if not (m or future or _FUTURE_WORD.search(content)):
        return None
    if dates and not future:
        return None  # the plan's date has passed: nothing to follow up
    text = content.rstrip(" .。!！")
    when = f"After {min(future).isoformat()}: ask" if future else "Ask"
    if m and m.group("rest"):
        head = _DISCOURSE.sub("", content[: m.start()]).strip(" ,")
        named = [name for name, _ in entities(head)]
        subject = (
            named[-1]
            if named
            else (re.sub(r"\s+(?:is|are|was)$", "", head) if len(head.split()) <= 5 else "")
        )
        rest = m.group("rest").rstrip(" .。!！")
        return f"{when} {subject or 'them'} how the plan to {rest} went"
    return f"{when} how it went: {text}"


def _valid(y: str, mo: str, d: str) -> bool:
    try:
        date(int(y), int(mo), int(d))
    except ValueError:
        return False
    return True


def slug(name: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:60]
    return s or "entity-" + hashlib.sha1(name.encode()).hexdigest()[:8]


def clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


# ---- the day's input ------------------------------------------------------------------


def _memory_steps() -> list[str]:
    # imported here: the step registry (cycle) imports this module
    from anima_pipeline.sleep.cycle import memory_step_keys

    return memory_step_keys()


@dataclass
class DayMemories:
    today: list[SemanticMemory]  # active memories created or changed today
    reconfirmed: dict[int, str]  # id -> why (updated or merged today, not new today)
    dream_base: dict[int, float]  # confidence before this step's own earlier run


def day_memories(conn: Connection, anima_id: str, day: date) -> DayMemories:
    events = conn.execute(
        """SELECT memory_id, op, step, before, after FROM memory_event
           WHERE anima_id = %s AND day = %s AND table_name = 'semantic_memory'
             AND (step = ANY(%s) OR (step = %s AND op = 'confidence')) ORDER BY id""",
        (anima_id, day, _memory_steps(), STEP),
    ).fetchall()
    created: set[int] = set()
    touched: list[int] = []
    reconfirmed: dict[int, str] = {}
    merged: dict[int, list[str]] = defaultdict(list)
    base: dict[int, float] = {}
    for e in events:
        mid = int(e["memory_id"])
        if e["step"] == STEP:
            base.setdefault(mid, float(e["before"]["confidence"]))
        elif e["op"] == "create":
            created.add(mid)
            touched.append(mid)
        elif e["op"] == "update":
            touched.append(mid)
            if mid not in created:
                reconfirmed.setdefault(mid, "re-confirmed today (updated)")
        elif e["op"] == "merge" and (e["after"] or {}).get("superseded_by"):
            merged[int(e["after"]["superseded_by"])].append(f"f-{mid}")
    for target, sources in merged.items():
        reconfirmed[target] = f"re-confirmed today (merged from {', '.join(sources)})"
    active = {
        m.id: m for m in MemoryRepo(conn).get_many(list(dict.fromkeys(touched))) if m.status == "active"
    }
    return DayMemories(
        today=[active[i] for i in sorted(active)],
        reconfirmed={i: why for i, why in reconfirmed.items() if i in active},
        dream_base=base,
    )


# ---- offline synthesis ----------------------------------------------------------------


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
    out, used_older, per_today = [], set(), defaultdict(int)
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
    return [p for p in pages if not (p["slug"] in seen or seen.add(p["slug"]))]


# ---- the step -------------------------------------------------------------------------


def dream(db: Database, night: Night, anima_id: str) -> StepResult:
    def body(conn: Connection, audit: Audit) -> StepOutcome:
        dm = day_memories(conn, anima_id, night.day)
        if not dm.today:
            return StepOutcome(stats={"today_memories": 0, "dreams": 0, "input_chars": 0})
        store = MemoryRepo(conn).active(anima_id)
        today_ids = {m.id for m in dm.today}
        older = sorted((m for m in store if m.id not in today_ids), key=lambda m: (-m.reference_count, -m.id))
        shown, size = [], 0
        for m in older:  # the most cited first when the store is larger than one message
            size += len(m.content) + 60
            if size > LONG_TERM_CHARS:
                break
            shown.append(m)
        system = identity_context(conn, anima_id)
        msg1 = render_memories(dm.today, f"# Today's new and changed memories ({night.day})")
        msg2 = render_memories(
            sorted(shown, key=lambda m: m.id),
            f"# Long-term store: {len(shown)} of {len(older)} other active memories",
        )
        entry = synthesize(night.day, dm, store, anima_id)
        scope = Scope(anima_id=anima_id, tools=TOOLS, memory_ids=frozenset(today_ids | {m.id for m in shown}))
        executor = ToolExecutor(conn, scope, audit)
        request = StepRequest(
            step=STEP,
            system=prompts.system_blocks(prompts.DREAM_SYSTEM, night.day, night.tz, system),
            user=[TextBlock(text=msg1), TextBlock(text=msg2, cache=True), TextBlock(text=prompts.DREAM)],
            tools=tool_specs(TOOLS),
            must_write=True,
        )
        usage = night.engine.run(request, executor, plan_of(ToolCall(name="write_dream_entry", input=entry)))
        row = conn.execute(
            "SELECT * FROM dream_journal WHERE anima_id = %s AND day = %s", (anima_id, night.day)
        ).fetchone()
        written = {k: len(row[k]) if row else 0 for k in _ENTRY_KEYS}
        return StepOutcome(
            stats={
                "today_memories": len(dm.today),
                "input_chars": len(system) + len(msg1) + len(msg2),
                **written,
                "dreams": 0,
                "confidence_updates": 0,
                **executor.stats,
            },
            usage=usage,
        )

    return run_step(db, night, anima_id, STEP, body)
