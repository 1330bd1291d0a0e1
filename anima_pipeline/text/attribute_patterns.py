"""What the attribute patterns of every language share: the pattern record, and the value
vocabularies written in both languages (zodiac animals and signs) that a matched value is
normalised through.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

ANIMALS = {
    "rat": "rat", "mouse": "rat", "ox": "ox", "cow": "ox", "buffalo": "ox", "tiger": "tiger",
    "rabbit": "rabbit", "hare": "rabbit", "dragon": "dragon", "snake": "snake",
    "horse": "horse", "goat": "goat", "sheep": "goat", "ram": "goat", "monkey": "monkey",
    "rooster": "rooster", "chicken": "rooster", "dog": "dog", "pig": "pig", "boar": "pig",
    "鼠": "rat", "牛": "ox", "虎": "tiger", "兔": "rabbit", "龙": "dragon", "蛇": "snake",
    "马": "horse", "羊": "goat", "猴": "monkey", "鸡": "rooster", "狗": "dog", "猪": "pig",
}  # fmt: skip
SIGNS = {
    "aries": "aries", "taurus": "taurus", "gemini": "gemini", "cancer": "cancer", "leo": "leo",
    "virgo": "virgo", "libra": "libra", "scorpio": "scorpio", "sagittarius": "sagittarius",
    "capricorn": "capricorn", "aquarius": "aquarius", "pisces": "pisces",
    "白羊": "aries", "金牛": "taurus", "双子": "gemini", "巨蟹": "cancer", "狮子": "leo",
    "处女": "virgo", "天秤": "libra", "天平": "libra", "天蝎": "scorpio", "射手": "sagittarius",
    "人马": "sagittarius", "摩羯": "capricorn", "山羊": "capricorn", "水瓶": "aquarius",
    "宝瓶": "aquarius", "双鱼": "pisces",
}  # fmt: skip


@dataclass(frozen=True)
class Pattern:
    attribute: str
    regex: re.Pattern[str]
    changed: bool = False  # the construction itself announces a change ("moved to", 搬到)
    polarity: int | None = None  # fixed by the construction ("quit his job", 不喝…了)
    org: bool = False  # the value must name an organisation (see attributes._ORG_NOUN)


class Changed(NamedTuple):
    """A construction that itself announces a change ("moved to", 搬到), and what else it fixes."""

    regex: str
    polarity: int | None = None
    org: bool = False


def changed(regex: str, *, polarity: int | None = None, org: bool = False) -> Changed:
    return Changed(regex, polarity, org)


def patterns(subject: str, **constructions: tuple[str | Changed, ...]) -> tuple[Pattern, ...]:
    """One language's patterns: per attribute (in the order given), its constructions in the
    order they are tried, each matched right after the language's `subject` group."""
    out = []
    for attribute, rows in constructions.items():
        for row in rows:
            if isinstance(row, Changed):
                out.append(Pattern(attribute, re.compile(subject + row.regex), True, row.polarity, row.org))
            else:
                out.append(Pattern(attribute, re.compile(subject + row)))
    return tuple(out)
