"""Reading a question: the words recall searches on, and the time it names or asks for.

Stemming and stop words are PostgreSQL's (the 'english' text search configuration does them
on both sides, in `anima_search_vector` and `plainto_tsquery`); what is left here is what no
text search configuration knows: the question words of a chat ("when did", "tell", "kind
of"), CJK bigrams with Chinese question words removed, and written or relative dates turned
into periods ("7 May 2023", "in May 2023", "last week", "上个月").
"""

from __future__ import annotations

import calendar
import functools
import re
from dataclasses import dataclass, field
from datetime import date, timedelta

from anima_pipeline.text.vocab import MONTHS, WEEKDAYS

# Words a question is made of that carry nothing to search on; the 'english' configuration
# drops the grammatical ones itself (the, did, what, when ...), these are the rest.
QUESTION_WORDS = frozenset(
    """many much long often would could should likely ever also kind type sort some any anything something
    someone thing things go goes went gone going tell think know happen happens happened really
    whats whens wheres whos hows yes""".split()
)
_MONTH_RE = r"(jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|dec)[a-z]*"
_EN_ASKS_TIME = re.compile(
    r"\bwhen\b|\b(what|which)\s+(date|day|year|month|week|time)\b|\bhow\s+long\b|\bsince\s+when\b"
)
_ZH_QUESTION = sorted(
    """什么时候 什么 为什么 怎么样 怎么 怎样 如何 哪里 哪儿 哪些 哪个 哪天 哪一天 哪年 哪个月 几月 几号 几时 何时
    多少 多久 是不是 有没有 是否 可以 请问 一下""".split(),
    key=len,
    reverse=True,
)
_ZH_STOP_CHARS = set(
    "的了吗呢吧啊呀嘛谁哪几是在我你他她它们和与及或过也都就还又被把给对这那个么？?，,。！!、：:；;"
)
_ZH_ASKS_TIME = re.compile(r"什么时候|何时|哪天|哪一天|哪年|哪个月|几月|几号|几时|多久|日期")
CJK = r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af"
_CJK_RUN = re.compile(f"[{CJK}]+")
# What "carries a date" means for a memory (PostgreSQL regex, matched case-insensitively).
DATED_RE = (
    r"\m(1[89]|20)\d\d\M|\m" + _MONTH_RE + r"\M\.?\s*\d|\d\s+" + _MONTH_RE + r"\M"
    r"|\d+\s*[年月日号]|\m(yesterday|today|tomorrow|tonight)\M|\m(last|next|this)\s+(week|weekend|month|year"
    r"|night|" + "|".join(WEEKDAYS) + r")\M|\mago\M"
)


@dataclass(frozen=True)
class Period:
    """[start, end) in local days, and how the question named it."""

    start: date
    end: date
    label: str

    @property
    def iso(self) -> str:
        return f"{self.start.isoformat()}/{self.end.isoformat()}"


@dataclass
class QueryPlan:
    words: list[str] = field(default_factory=list)  # latin words, for plainto_tsquery('english', …)
    grams: list[str] = field(default_factory=list)  # CJK bigrams
    periods: list[Period] = field(default_factory=list)
    asks_time: bool = False
    # filled by recall.ranking once per question, shared by the sections' searches
    corrections: dict[str, tuple[str, str] | None] = field(default_factory=dict)

    @property
    def terms(self) -> list[str]:
        return [*self.grams, *self.words]

    @property
    def about_time(self) -> bool:
        return self.asks_time or bool(self.periods)


def _safely(safe, period, m: re.Match) -> str:
    """A written date's period, through `safe` (a bad one leaves the text as it was)."""
    return safe(lambda: period(m))


def _month(name: str) -> int:
    return next(i for i, m in enumerate(MONTHS, 1) if m.startswith(name[:3]))


def _month_of(m: re.Match) -> int:
    """The month a match names, by name (group `mon`) or by number (group `m`)."""
    return _month(m["mon"]) if m.groupdict().get("mon") else int(m["m"])


def _month_period(year: int, month: int, label: str) -> Period:
    last = calendar.monthrange(year, month)[1]
    return Period(date(year, month, 1), date(year, month, last) + timedelta(1), label)


def _day(d: date, label: str) -> Period:
    return Period(d, d + timedelta(1), label)


def _named_periods(text: str, today: date) -> tuple[str, list[Period]]:
    """Dates written in the question, cut out of the text, as periods."""
    found: list[Period] = []

    def safe(make) -> str:
        try:
            found.append(make())
        except (ValueError, OverflowError):  # "31 February"; "9999-12-31", whose end is past year 9999
            pass
        return " "

    def full_day(m: re.Match) -> Period:
        return _day(date(int(m["y"]), _month_of(m), int(m["d"])), m[0].strip())

    def full_month(m: re.Match) -> Period:
        return _month_period(int(m["y"]), _month_of(m), m[0].strip())

    # whole dates first, so that a month with its year does not take the month of a date
    written = [
        (r"\b(?P<d>\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<mon>" + _MONTH_RE + r")[\s,]+(?P<y>\d{4})\b", full_day),
        (r"\b(?P<mon>" + _MONTH_RE + r")\s+(?P<d>\d{1,2})(?:st|nd|rd|th)?,?\s+(?P<y>\d{4})\b", full_day),
        (r"(?P<y>\d{4})\s*年\s*(?P<m>\d{1,2})\s*月\s*(?P<d>\d{1,2})\s*[日号]", full_day),
        (r"\b(?P<y>\d{4})-(?P<m>\d{2})-(?P<d>\d{2})\b", full_day),
        (r"\b(?P<mon>" + _MONTH_RE + r")[\s,]+(?:of\s+)?(?P<y>\d{4})\b", full_month),
        (r"(?P<y>\d{4})\s*年\s*(?P<m>\d{1,2})\s*月", full_month),
        (r"\b(?P<y>\d{4})-(?P<m>\d{2})\b", full_month),
    ]  # fmt: skip
    for pattern, period in written:
        text = re.sub(pattern, functools.partial(_safely, safe, period), text)

    def day_alone(m: re.Match) -> str:  # "on May 4th", "5月4日": the latest such day not after today
        month = _month_of(m)
        try:
            d = date(today.year, month, int(m["d"]))
            if d > today:
                d = date(today.year - 1, month, int(m["d"]))
        except ValueError:
            return m[0]
        found.append(_day(d, m[0].strip()))
        return " "

    text = re.sub(r"\b(?P<mon>" + _MONTH_RE + r")\s+(?P<d>\d{1,2})(?:st|nd|rd|th)?\b", day_alone, text)
    text = re.sub(
        r"\b(?P<d>\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<mon>" + _MONTH_RE + r")\b", day_alone, text
    )
    text = re.sub(r"(?<!\d)(?P<m>\d{1,2})\s*月\s*(?P<d>\d{1,2})\s*[日号]", day_alone, text)

    def month_alone(m: re.Match) -> str:  # "in May": the latest May not after today
        month = _month_of(m)
        if not 1 <= month <= 12:
            return m[0]
        year = today.year if month <= today.month else today.year - 1
        found.append(_month_period(year, month, m[0].strip()))
        return " "

    text = re.sub(r"\b(?:in|during|since)\s+(?P<mon>" + _MONTH_RE + r")\b", month_alone, text)
    text = re.sub(r"(?<!\d)(?P<m>\d{1,2})\s*月份?(?!\s*\d)", month_alone, text)

    def whole_year(m: re.Match) -> str:  # "in 2023", "2023年"
        return safe(lambda: Period(date(int(m["y"]), 1, 1), date(int(m["y"]) + 1, 1, 1), m[0]))

    text = re.sub(r"\b(?:in|during|since)\s+(?P<y>(?:19|20)\d\d)\b", whole_year, text)
    text = re.sub(r"(?P<y>(?:19|20)\d\d)\s*年", whole_year, text)
    return text, found


def _relative_periods(text: str, today: date) -> tuple[str, list[Period]]:
    """'yesterday', 'last week', '上个月' … relative to today (local)."""
    monday = today - timedelta(today.weekday())
    month_start = today.replace(day=1)
    prev_month_end = month_start - timedelta(1)
    table: list[tuple[str, Period]] = [
        (r"\bday before yesterday\b|前天", _day(today - timedelta(2), "day before yesterday")),
        (r"\byesterday\b|昨天|昨日", _day(today - timedelta(1), "yesterday")),
        (r"\btoday\b|今天", _day(today, "today")),
        (r"\blast weekend\b|上个?周末", Period(monday - timedelta(2), monday, "last weekend")),
        (r"\blast week\b|上个?(?:周|星期|礼拜)", Period(monday - timedelta(7), monday, "last week")),
        (r"\bthis week\b|(?:这|本)(?:周|星期|礼拜)", Period(monday, monday + timedelta(7), "this week")),
        (
            r"\blast month\b|上个?月",
            _month_period(prev_month_end.year, prev_month_end.month, "last month"),
        ),
        (r"\bthis month\b|(?:这个|本)月", _month_period(today.year, today.month, "this month")),
        (
            r"\blast year\b|去年",
            Period(date(today.year - 1, 1, 1), date(today.year, 1, 1), "last year"),
        ),
        (r"\bthis year\b|今年", Period(date(today.year, 1, 1), date(today.year + 1, 1, 1), "this year")),
    ]
    found = []
    for pattern, period in table:
        text, n = re.subn(pattern, " ", text)
        if n:
            found.append(period)
    return text, found


def plan_query(query: str, today: date | None = None) -> QueryPlan:
    """The words and bigrams recall searches on, the periods named, whether a time is asked."""
    today = today or date.today()
    text = query.lower()
    plan = QueryPlan(asks_time=bool(_EN_ASKS_TIME.search(text) or _ZH_ASKS_TIME.search(text)))
    text, named = _named_periods(text, today)
    text, relative = _relative_periods(text, today)
    plan.periods = [*named, *relative]
    seen: set[str] = set()
    for run in _CJK_RUN.findall(text):
        for word in _ZH_QUESTION:
            run = run.replace(word, " ")
        for segment in re.split(r"\s+", "".join(" " if ch in _ZH_STOP_CHARS else ch for ch in run)):
            # bigrams only: that is what anima_search_vector indexes (a lone character is too common)
            for gram in (segment[i : i + 2] for i in range(len(segment) - 1)):
                if gram and gram not in seen:
                    seen.add(gram)
                    plan.grams.append(gram)
    for word in re.findall(r"[a-z0-9]+(?:'[a-z]+)?", _CJK_RUN.sub(" ", text)):
        word = word.split("'")[0]
        if word in QUESTION_WORDS or word in seen or (len(word) == 1 and not word.isdigit()):
            continue
        seen.add(word)
        plan.words.append(word)
    return plan
