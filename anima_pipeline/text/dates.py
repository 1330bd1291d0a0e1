"""Turn relative time expressions into absolute ISO dates (English and Chinese).

A memory is read weeks later, when "yesterday" no longer means anything, so light
sleep rewrites every relative expression against the day it was said. The output
keeps the preposition and states only what the phrase really says: a day becomes
``on 2023-05-07``, a month ``in 2023-04``, a year ``in 2022``; a week or weekend,
which has no single date, stays anchored to the speaking day (``in the week
before 2023-06-27``) instead of guessing one. Absolute dates are left untouched.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, timedelta
from typing import NamedTuple

from anima_pipeline.text.lexicon import NOT_PAST_ED, zh_number
from anima_pipeline.text.vocab import (
    IRREGULAR_PAST,
    MONTH_NAMES,
    MONTH_NUMBER,
    MONTHS,
    NUMBER_WORDS,
    WEEKDAYS,
)
from anima_pipeline.text.words import CJK

__all__ = ["iso_month", "resolve_relative_dates", "shift_month"]

_ZH_WEEKDAYS = {"一": 0, "二": 1, "三": 2, "四": 3, "五": 4, "六": 5, "日": 6, "天": 6}
_SEASONS = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}
_ZH_YEARS = {"前年": -2, "去年": -1, "今年": 0, "明年": 1, "后年": 2}
_ZH_STEP = {"上": -1, "这": 0, "本": 0, "下": 1}
_NUM = r"(?:\d+|" + "|".join(NUMBER_WORDS) + r"|a|an|a couple of|couple of|a few|few|several)"
_PREP = r"(?:\b(?P<prep>on|in|during|over|since|until|till|by|from|before|after|of)\s+)?"
_WHICH = r"(?:(?:the\s+)?(?P<which>last|this\s+past|past|this|next|coming)\s+)"
_KEEP_PREP = ("since", "until", "till", "by", "from", "before", "after", "of")  # "the end of last month"
_PAST = re.compile(
    r"\b(?:\w{2,}ed|" + "|".join(sorted(IRREGULAR_PAST)) + r"|ago|last|past)\b|'ve\b|\bhave been\b", re.I
)
_FUTURE = re.compile(
    r"\b(?:will|'ll|gonna|going to|plan(?:ning)?|next|coming|upcoming|tomorrow|hope to|want to|can't wait)\b",
    re.I,
)
# Cheap gate: most sentences hold no time expression at all.
_ANY_EN = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|ago|last|this|next|past|coming|morning|evening|afternoon|other day|"
    r"weekend|in\s+\S+\s+(?:day|week|month|year)s?|\S+\s+(?:month|year)s?\s+now|"
    + "|".join(MONTHS)
    + "|"
    + "|".join(WEEKDAYS)
    + r"|mon|tues?|wed|thur?s?|fri|sat|sun)\b",
    re.I,
)
_ANY_ZH = re.compile(r"[天晚早日周星期礼拜月年]")
_SENTENCE_END = re.compile(r"(?<=[.!?。！？；;\n])")


@dataclass(frozen=True)
class _Said:
    """The speaking day and the sentence's tense, which orients bare weekdays (guessed only
    when a rule asks: most phrases, "yesterday", "two weeks ago", need no tense)."""

    day: date
    sentence: str

    @functools.cached_property
    def past(self) -> bool:
        return "了" in self.sentence or "过" in self.sentence or _is_past(self.sentence)


class Rule(NamedTuple):
    """A time phrase's pattern, what it means seen from the day said, and the words (lowercased)
    one of which the phrase must hold: a sentence with none of them is not searched with it when
    annotating (`needs` empty: always searched)."""

    pattern: re.Pattern[str]
    handler: Callable[[re.Match[str], _Said], str]
    needs: frozenset[str] = frozenset()


def iso_month(d: date) -> str:
    return f"{d.year:04d}-{d.month:02d}"


def shift_month(d: date, months: int) -> date:
    """First day of the month `months` away from d's month."""
    index = d.year * 12 + d.month - 1 + months
    return date(index // 12, index % 12 + 1, 1)


def _is_past(sentence: str) -> bool:
    """Crude tense guess (past unless a future cue is present)."""
    if _FUTURE.search(sentence):
        return False
    return any(m.group(0).lower() not in NOT_PAST_ED for m in _PAST.finditer(sentence))


def _count(word: str) -> int | None:
    """Number of units in '3', 'two', 'a', 'a couple of'; None for vague amounts ('a few')."""
    word = word.lower()
    if word.isdigit():
        return int(word)
    if word in ("a", "an"):
        return 1
    if "couple" in word:
        return 2
    return NUMBER_WORDS.get(word)


# A time phrase used as a noun takes no preposition: "Tomorrow looks rainy", "tonight's dinner",
# "a day like today" -> "2023-05-09 looks rainy", "2023-05-08's dinner", "a day like 2023-05-08".
_NOUN_AFTER = re.compile(
    r"^(?:'s\b|\s+(?:is|was|looks|looked|seems|seemed|sounds|proved|has|had|will|would|feels|felt|"
    r"went|could|can|might|must)\b)",
    re.I,
)


def _as_noun(m: re.Match[str]) -> bool:
    """Does the matched time phrase stand as a noun (subject, possessive, object of 'like')?"""
    before, after = m.string[: m.start()], m.string[m.end() :]
    if _NOUN_AFTER.match(after):
        return True
    return bool(
        re.search(r"\b(?:like|than|as|it's|it is|is|was)\s+(?:(?:\w+ly|now|already)\s+)*$", before, re.I)
    )


def _with_prep(m: re.Match[str], default: str, phrase: str) -> str:
    """Keep a meaningful preposition of the original ('since last year' -> 'since 2022')."""
    prep = (m.groupdict().get("prep") or "").lower()
    if prep in _KEEP_PREP:
        return f"{m.group('prep')} {phrase}"
    if not prep and default in ("on", "in") and _as_noun(m):
        return phrase
    return f"{default} {phrase}" if default else phrase


def _season_year(said: date, start: int, step: int) -> int:
    """Year a season starts in: 'last summer' said in August is the previous year's."""
    current = said.year - (1 if start == 12 and said.month <= 2 else 0)
    if step < 0:
        return current if said.month >= start + 3 else current - 1
    if step > 0:
        return current if said.month < start else current + 1
    return current


def _weekday(d: date, target: int, direction: str) -> date:
    if direction == "past":
        return d - timedelta(days=(d.weekday() - target - 1) % 7 + 1)
    if direction == "future":
        return d + timedelta(days=(target - d.weekday() - 1) % 7 + 1)
    return d + timedelta(days=target - d.weekday())  # same Monday-based week


def _weekday_index(word: str) -> int:
    """Index of a weekday from its name or a common abbreviation ('Tues', 'Thurs')."""
    return [d[:3] for d in WEEKDAYS].index(word.lower()[:3])


def _step(which: str | None) -> int:
    which = re.sub(r"\s+", " ", (which or "").lower())
    return -1 if which in ("last", "this past", "past") else 1 if which in ("next", "coming") else 0


# --- English handlers ------------------------------------------------------------------


def _day(offset: int, prefix: str = "on") -> Callable[[re.Match[str], _Said], str]:
    return lambda m, s: _with_prep(m, prefix, (s.day + timedelta(days=offset)).isoformat())


def _ago(m: re.Match[str], s: _Said) -> str:
    """'two weeks ago' / 'in 3 days'; an approximator is kept ('about a year ago' -> 'around 2022')."""
    n, unit = _count(m.group("n")), m.group("unit").lower()
    sign = -1 if m.group("dir").lower() == "ago" else 1
    if n is None:
        anchor = str(s.day.year) if unit == "year" else s.day.isoformat()
        return f"a few {unit}s {'before' if sign < 0 else 'after'} {anchor}"
    if unit == "weekend":
        return f"{n} weekends {'before' if sign < 0 else 'after'} {s.day.isoformat()}"
    if unit == "day":
        prefix, phrase = "on", (s.day + timedelta(days=sign * n)).isoformat()
    elif unit == "week":
        prefix, phrase = "around", (s.day + timedelta(days=sign * 7 * n)).isoformat()
    elif unit == "month":
        prefix, phrase = "in", iso_month(shift_month(s.day, sign * n))
    else:
        prefix, phrase = "in", str(s.day.year + sign * n)
    if (m.groupdict().get("approx") or "").strip():
        return f"around {phrase}"
    return _with_prep(m, prefix, phrase)


def _duration_now(m: re.Match[str], s: _Said) -> str:
    """'(for) seven years now' keeps the duration and adds its start: '... now (since 2016)'."""
    n = _count(m.group("n"))
    if n is None or n <= 0:
        return m.group(0)
    if m.group("unit").lower() == "year":
        return f"{m.group(0)} (since {s.day.year - n})"
    return f"{m.group(0)} (since {iso_month(shift_month(s.day, -n))})"


def _in_future(m: re.Match[str], s: _Said) -> str:
    return m.group(0) if s.past else _ago(m, s)  # "read it in one day" is a duration, not a date


def _relative(m: re.Match[str], s: _Said) -> str:
    unit, step = m.group("unit").lower(), _step(m.group("which"))
    if unit == "month":
        return _with_prep(m, "in", iso_month(shift_month(s.day, step)))
    if unit == "year":
        return _with_prep(m, "in", str(s.day.year + step))
    if unit in _SEASONS:
        return _with_prep(m, "in", f"{unit} {_season_year(s.day, _SEASONS[unit], step)}")
    if unit == "weekend" and step == 0 and s.past and s.day.weekday() < 5:
        step = -1  # "this weekend we went ..." said on a weekday
    rel = {-1: "before", 0: "of", 1: "after"}[step]
    phrase = f"the {unit} {rel} {s.day.isoformat()}"
    if unit == "week" and step:
        phrase += f" ({week_months(s.day, step)})"
    return _with_prep(m, "on" if unit == "weekend" else "in", phrase)


def week_months(day: date, step: int) -> str:
    """The month(s) of the seven days before (step -1) or after (step 1) `day`, written out.

    "In the week before 2023-06-27" alone cannot answer "in which month?"; the month
    is stated too, and a week that straddles two months says so rather than guessing.
    """
    first = day + timedelta(days=-7 if step < 0 else 1)
    last = day + timedelta(days=-1 if step < 0 else 7)
    if (first.year, first.month) == (last.year, last.month):
        return f"{MONTH_NAMES[first.month - 1]} {first.year}"
    start = f"late {MONTH_NAMES[first.month - 1]}" + ("" if first.year == last.year else f" {first.year}")
    return f"{start} or early {MONTH_NAMES[last.month - 1]} {last.year}"


_BIRTH = re.compile(r"\b(?:born|birthday|birth)\b", re.I)


def _named_month(m: re.Match[str], s: _Said) -> str:
    """A month named without its year: "last May", "this past March", "back in April", "since
    January", "in early May". "last" and "this past" mean the latest such month before the
    speaking one; a bare name the latest up to it in a past sentence, the next from it in one
    about the future, and none in another ("we always go in July" is every July) nor for a
    birth. "early", "mid" and "late" are kept ("in early 2023-05")."""
    month = MONTH_NUMBER[m.group("month").lower()]
    if _BIRTH.search(m.string):  # "born in March", "her birthday in May": any year
        return m.group(0)
    if m.group("which"):
        year = s.day.year if month < s.day.month else s.day.year - 1
    elif s.past:
        year = s.day.year if month <= s.day.month else s.day.year - 1
    elif _FUTURE.search(m.string):
        year = s.day.year if month >= s.day.month else s.day.year + 1
    else:
        return m.group(0)
    part = f"{m.group('part').lower()} " if m.group("part") else ""
    return _with_prep(m, "in", part + iso_month(date(year, month, 1)))


# "it's Thursday", "today is Friday", "officially Monday": the weekday named is today's week.
_PRESENT_WEEKDAY = re.compile(
    r"\b(?:it's|it is|today's|today is|now|officially|already|finally)\s+(?:(?:now|officially|already|finally)\s+)*$",
    re.I,
)


def _day_of_month(said: date, day: int, weekday: int) -> date | None:
    """The date with that day of month nearest to `said` (preferring one on the named weekday)."""
    options = []
    for months in (-1, 0, 1):
        first = shift_month(said, months)
        try:
            options.append(first.replace(day=day))
        except ValueError:
            continue
    if not options:
        return None
    return min(options, key=lambda d: (d.weekday() != weekday, abs((d - said).days)))


def _named_weekday(m: re.Match[str], s: _Said) -> str:
    wd = _weekday_index(m.group("wd"))
    dom = m.groupdict().get("dom")
    if dom:  # "Thursday the 19th": the day of month decides, the weekday only confirms
        exact = _day_of_month(s.day, int(dom), wd)
        return _with_prep(m, "on", exact.isoformat()) if exact else m.group(0)
    which = re.sub(r"\s+", " ", (m.group("which") or "").lower())
    step = _step(which)
    direction = "past" if step < 0 else "future" if step > 0 else "same" if which == "this" else None
    if direction is None and _PRESENT_WEEKDAY.search(m.string[: m.start()]):
        direction = "same"
    direction = direction or ("past" if s.past else "future")
    return _with_prep(m, "on", _weekday(s.day, wd, direction).isoformat())


_EN_RULES: list[Rule] = [
    Rule(p, h, frozenset(w.split()))
    for p, h, w in (
        (re.compile(_PREP + r"\b(?:the\s+)?day\s+before\s+yesterday\b", re.I), _day(-2), "yesterday"),
        (re.compile(_PREP + r"\b(?:the\s+)?day\s+after\s+tomorrow\b", re.I), _day(2), "tomorrow"),
        (re.compile(_PREP + r"\blast\s+night\b", re.I), _day(-1, "on the night of"), "night"),
        (
            re.compile(_PREP + r"\byesterday(?:\s+(?:morning|afternoon|evening|night))?\b", re.I),
            _day(-1),
            "yesterday",
        ),
        (
            re.compile(_PREP + r"\btomorrow(?:\s+(?:morning|afternoon|evening|night))?\b", re.I),
            _day(1),
            "tomorrow",
        ),
        (
            re.compile(
                _PREP + r"\b(?:earlier\s+)?today\b|\bthis\s+(?:morning|afternoon|evening)\b|\btonight\b", re.I
            ),
            _day(0),
            "today morning afternoon evening tonight",
        ),
        (
            re.compile(r"\bthe\s+other\s+day\b", re.I),
            lambda m, s: f"a few days before {s.day.isoformat()}",
            "other",
        ),
        (
            re.compile(
                _PREP
                + r"(?P<approx>\b(?:around|about|roughly|almost|nearly|over|some|like)\s+)?\b(?P<n>"
                + _NUM
                + r")\s+(?P<unit>day|weekend|week|month|year)s?\s+(?P<dir>ago)\b",
                re.I,
            ),
            _ago,
            "ago",
        ),
        (
            re.compile(r"\b(?P<n>" + _NUM + r")\s+(?P<unit>month|year)s?\s+now\b", re.I),
            _duration_now,
            "now",
        ),
        (
            re.compile(
                r"\b(?P<prep>in)\s+(?P<n>"
                + _NUM
                + r")\s+(?P<unit>day|week|month|year)s?(?P<dir>)(?:'?\s*time)?\b",
                re.I,
            ),
            _in_future,
            "day days week weeks month months year years",
        ),
        (
            re.compile(
                _PREP + _WHICH + r"(?P<unit>weekend|week|month|year|summer|winter|spring|fall|autumn)\b", re.I
            ),
            _relative,
            "weekend week month year summer winter spring fall autumn",
        ),
        (
            re.compile(
                r"\b(?P<prep>over|on|during)\s+(?P<which>)the\s+(?P<unit>weekend)\b(?!\s+(?:before|of|after)\s+\d)",
                re.I,
            ),
            _relative,
            "weekend",
        ),
        (
            re.compile(
                _PREP
                + _WHICH
                + r"?(?P<wd>"
                + "|".join(WEEKDAYS)
                + r")\b(?!s)(?:,?\s+(?:the\s+)?(?P<dom>[12]?\d|3[01])(?:st|nd|rd|th)\b)?",
                re.I,
            ),
            _named_weekday,
            " ".join(WEEKDAYS),
        ),
        (
            re.compile(_PREP + _WHICH + r"(?P<wd>mon|tues?|wed|thur?s?|fri|sat|sun)\b", re.I),
            _named_weekday,
            "mon tue tues wed thu thur thurs thus fri sat sun",
        ),
        # a month named without a day or a year, after "in", "since", "until", "during" or "last" /
        # "this past" only: not "May I", "April said", "a gift from June", "after April left", "the
        # 5th of May"; "May 5", "5 May", "May 2023" are dates already
        (
            re.compile(
                r"(?<!\d\s)(?:\b(?P<prep>in|since|until|till|during)\s+"
                r"|\b(?P<which>last|this\s+past)\s+)(?:(?P<part>early|mid|late)[\s-]+)?"
                r"(?P<month>" + "|".join(MONTHS) + r")\b(?!\s*,?\s*(?:\d|the\s+\d|of\s+\d))",
                re.I,
            ),
            _named_month,
            " ".join(MONTHS),
        ),
    )
]


# a text holding none of these words holds no English time phrase
_EN_NEEDED = frozenset().union(*(rule.needs for rule in _EN_RULES))
_WORD = re.compile(r"[a-z]+")


def _words(text: str) -> frozenset[str]:
    """The words of `text` as a rule's `needs` names them."""
    return frozenset(_WORD.findall(text.lower()))


# --- Chinese handlers --------------------------------------------------------------------


def _zh_day(offset: int, suffix: str = "") -> Callable[[re.Match[str], _Said], str]:
    return lambda m, s: (s.day + timedelta(days=offset)).isoformat() + suffix


def _zh_ago(m: re.Match[str], s: _Said) -> str:
    n, unit = zh_number(m.group("n")), m.group("unit")
    if n is None:
        return m.group(0)
    if unit == "天":
        return (s.day - timedelta(days=n)).isoformat()
    if unit in ("周", "个星期", "星期", "个礼拜"):
        return f"{(s.day - timedelta(days=7 * n)).isoformat()}前后"
    if unit in ("个月", "月"):
        return iso_month(shift_month(s.day, -n))
    return f"{s.day.year - n}年"


def _zh_week(m: re.Match[str], s: _Said) -> str:
    step = _ZH_STEP[m.group("which")]
    if m.group("wd"):
        monday = s.day - timedelta(days=s.day.weekday()) + timedelta(days=7 * step)
        return (monday + timedelta(days=_ZH_WEEKDAYS[m.group("wd")])).isoformat()
    if m.group("weekend"):
        return s.day.isoformat() + ("之前的周末", "所在的周末", "之后的周末")[step + 1]
    return s.day.isoformat() + ("的前一周", "这一周", "的后一周")[step + 1]


_ZH_RULES: list[Rule] = [
    Rule(p, h)
    for p, h in (
        (
            re.compile(
                r"(?<!\d)(?P<n>\d{1,2}|[一二两三四五六七八九十]{1,2})(?P<unit>天|周|个星期|星期|个礼拜|个月|年)(?:以前|之前|前)"
            ),
            _zh_ago,
        ),
        (re.compile(r"大前天"), _zh_day(-3)),
        (re.compile(r"(?<![之以])前天"), _zh_day(-2)),
        (re.compile(r"昨晚|昨天晚上"), _zh_day(-1, "晚上")),
        (re.compile(r"昨天|昨日"), _zh_day(-1)),
        (re.compile(r"今晚|今天晚上"), _zh_day(0, "晚上")),
        (re.compile(r"今天|今日|今早"), _zh_day(0)),
        (re.compile(r"明晚"), _zh_day(1, "晚上")),
        (re.compile(r"明天|明日|明早"), _zh_day(1)),
        (re.compile(r"(?<![先然之以])后天"), _zh_day(2)),
        (
            re.compile(
                r"(?P<which>[上这本下])(?:个)?(?:周|星期|礼拜)(?:(?P<weekend>末)|(?P<wd>[一二三四五六日天]))?(?![围边到全年])"
            ),
            _zh_week,
        ),
        (
            re.compile(r"(?<![上这本下个每])(?:周|星期|礼拜)(?P<wd>[一二三四五六日天])"),
            lambda m, s: _weekday(
                s.day, _ZH_WEEKDAYS[m.group("wd")], "past" if s.past else "future"
            ).isoformat(),
        ),
        (
            re.compile(r"(?P<which>[上这本下])(?:个)?月(?!亮|份的?工资)"),
            lambda m, s: iso_month(shift_month(s.day, _ZH_STEP[m.group("which")])),
        ),
        (
            re.compile(r"(?<![以之过])(?:前年|去年|今年|明年|后年)"),
            lambda m, s: f"{s.day.year + _ZH_YEARS[m.group(0)]}年",
        ),
        (re.compile(r"前几天|几天前"), lambda m, s: f"{s.day.isoformat()}之前几天"),
    )
]


def _keep_case(m: re.Match[str], replacement: str) -> str:
    """Capitalise the replacement when the phrase opened a sentence (not for a capitalised weekday)."""
    opens = not re.search(r"[A-Za-z0-9]", m.string[: m.start()])
    if opens and m.group(0)[:1].isupper() and replacement[:1].islower():
        return replacement[:1].upper() + replacement[1:]
    return replacement


# the preposition a rule puts before the date it writes: an annotation gives the date alone
_ADDED_PREP = re.compile(r"^(?:on|in)\s+")
_INNER = re.compile(r" \(([^()]*)\)")  # a bracket inside the annotation's brackets
_FLAT = r", \1"
_BRACKETS = ("(", "（")
_TITLE = re.compile(r"《[^》]*》")


def _annotation(m: re.Match[str], rewrite: str, day: date) -> str:
    """The phrase `m` as said, then the date its rule's `rewrite` gives, in brackets; the phrase
    alone when the rule left it as it was or it means `day` ("today": its line shows that day);
    a rewrite that keeps the phrase and annotates it ("seven years now (since 2016)") as it is."""
    said_as = m.group(0)
    if rewrite == said_as or rewrite.startswith(said_as):
        return rewrite
    meaning = _INNER.sub(_FLAT, _ADDED_PREP.sub("", rewrite))
    prep = m.groupdict().get("prep")
    if prep and meaning.lower().startswith(prep.lower() + " "):  # "since last year (2022)"
        meaning = meaning[len(prep) + 1 :]
    if meaning == day.isoformat():
        return said_as
    if CJK.match(said_as[-1]):  # a Chinese phrase takes full-width brackets, no space
        return f"{said_as}（{meaning}）"
    return f"{said_as} ({meaning})"


def _annotate(sentence: str, rules: list[Rule], said: _Said) -> str:
    """Each time phrase of `sentence` as said, then what it means as a date: "yesterday
    (2023-05-07)", "last week (the week before 2023-06-09, June 2023)". The rules take the
    phrases in their order, each part of the sentence once ("the day before yesterday" is not
    "yesterday" again)."""
    # a title in book-title marks is a name, not a time ("《明日方舟》"): taken as it is
    taken = [(t.start(), t.end(), t.group(0)) for t in _TITLE.finditer(sentence)]
    for pattern, handler, _ in rules:
        for m in pattern.finditer(sentence):
            if any(m.start() < end and start < m.end() for start, end, _ in taken):
                continue
            if sentence[m.end() :].lstrip().startswith(_BRACKETS):  # dated already: twice adds nothing
                continue
            taken.append((m.start(), m.end(), _annotation(m, handler(m, said), said.day)))
    out, at = [], 0
    for start, end, meaning in sorted(taken):
        out += [sentence[at:start], meaning]
        at = end
    return "".join(out) + sentence[at:]


def resolve_relative_dates(text: str, said_on: date, *, annotate: bool = False) -> str:
    """Rewrite relative time expressions in `text` as absolute dates seen from `said_on`;
    with `annotate` each phrase stays as said and its date follows it in brackets (a message
    quoted as written, readable months later: recall/render.py).

    Works sentence by sentence so that the tense used to orient a bare weekday
    ("on Friday") is that of the sentence that contains it.
    """
    # Annotating, a rule searches a sentence only when it holds one of the rule's words: most
    # texts hold none (a tenth of the search). The night's rewrite searches every rule as it
    # always has: its output stays byte for byte (a word the regex's case folding matches and
    # lower() does not, "FRİDAY", would otherwise go unread).
    if annotate and _words(text).isdisjoint(_EN_NEEDED) and not _ANY_ZH.search(text):
        return text
    out: list[str] = []
    for sentence in _SENTENCE_END.split(text):
        rules: list[Rule] = []
        if _ANY_EN.search(sentence):
            words = _words(sentence) if annotate else None
            rules += [r for r in _EN_RULES if words is None or not words.isdisjoint(r.needs)]
        if _ANY_ZH.search(sentence):
            rules += _ZH_RULES
        if rules:
            said = _Said(said_on, sentence)
            if annotate:
                sentence = _annotate(sentence, rules, said)
            else:
                for pattern, handler, _ in rules:
                    sentence = pattern.sub(lambda m, h=handler, s=said: _keep_case(m, h(m, s)), sentence)
        out.append(sentence)
    return "".join(out)
