"""What the attribute patterns of every language share: the pattern record, and the value
vocabularies written in both languages (zodiac animals and signs) that a matched value is
normalised through.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

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


def p(
    attribute: str, regex: str, changed: bool = False, polarity: int | None = None, org: bool = False
) -> Pattern:
    return Pattern(attribute, re.compile(regex), changed, polarity, org)
