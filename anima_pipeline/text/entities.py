"""Named entities, content words and plans in memory texts: the cues the offline dream and
self-layer refresh work from (capitalised runs in Latin script, "叫X" names in Chinese).

Pure functions over text and memories: no database.
"""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from collections.abc import Iterator, Sequence
from datetime import date
from typing import TYPE_CHECKING, TypeVar

from anima_pipeline.text.lexicon import ADVERBS
from anima_pipeline.text.vocab import MONTHS, STOPWORDS, WEEKDAYS

if TYPE_CHECKING:
    from anima_pipeline.store.memories import SemanticMemory

K = TypeVar("K")
_NOT_NAMES = (
    frozenset(
        """the a an i he she they we it his her their my our its this that these those there here
    user assistant on in at for with from to by and but or if when after before during since until
    as also then so yes no not mr mrs ms dr today tomorrow yesterday tonight""".split()
    )
    | frozenset(WEEKDAYS)
    | frozenset(MONTHS)
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


def _trusted(raw: list[tuple[K, str, bool]]) -> Iterator[tuple[K, str]]:
    """(key, name) for each (key, name, at_sentence_start) of `raw` that reads as a name across
    all of them: a capitalised run at a sentence start is trusted only when it also appears
    mid-sentence somewhere or has several words; "Because Lin Wei" becomes "Lin Wei" when that
    is a known name, and a lone "Running" stays out."""
    mid = {name for _, name, initial in raw if not initial}
    known = {name for _, name, _ in raw}
    for key, name, initial in raw:
        if initial and name not in mid:
            tail = name.partition(" ")[2]
            if tail in known:
                name = tail
            elif not tail:
                continue
        yield key, name


def entity_index(mems: list[SemanticMemory], exclude: frozenset[str] = frozenset()) -> dict[str, set[int]]:
    """Entity -> ids of the memories naming it (`_trusted`'s rule over all of them); names in
    `exclude` (lower case: the anima's own name) are left out."""
    found: dict[str, set[int]] = defaultdict(set)
    raw = [(m.id, name, initial) for m in mems for name, initial in entities(m.content)]
    for mid_id, name in _trusted(raw):
        if name.lower() not in exclude:
            found[name].add(mid_id)
    return dict(found)


def names_in(texts: Sequence[str]) -> list[str]:
    """The names the `texts` hold (`_trusted`'s rule over all of them), each once, in the order
    they first appear (the texts in their order)."""
    raw = [(i, name, initial) for i, text in enumerate(texts) for name, initial in entities(text)]
    return list(dict.fromkeys(name for _, name in _trusted(raw)))


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
