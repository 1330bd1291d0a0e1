"""How much a sentence says, for the extractive summaries: the temporal summaries' offline plan
(night/steps/temporal/plan.py) and the working context's summary of earlier turns
(llm/offline_summary.py). Names, numbers and dates count; questions and greetings do not.
"""

from __future__ import annotations

import re

_SPLIT = re.compile(r"(?<=[.!?。！？])\s+|(?<=[。！？])|\n+")
_GREETING = re.compile(
    r"^(?:hi|hello|hey|good (?:morning|night|evening|afternoon)|thanks|thank you|bye|goodbye|see you|"
    r"ok(?:ay)?|haha+|lol|nice to meet you|you're welcome|no problem|你好|您好|晚安|早安|早上好|晚上好|"
    r"谢谢|拜拜|再见|好的|知道啦|哈哈+)\b[\s,.!~，。！]*",
    re.IGNORECASE,
)
_NUMBER = re.compile(r"\d+(?:[.,:/-]\d+)*|[一二两三四五六七八九十百千万]+(?:个|岁|年|月|日|号|点|公里|天|周)")
_DATE_WORD = re.compile(
    r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b|\b(?:mon|tue|wed|thu|fri|sat|sun)[a-z]*day\b|"
    r"\b(?:tomorrow|yesterday|tonight|next week|last week|weekend)\b|明天|昨天|今天|下周|上周|周末|星期|礼拜",
    re.IGNORECASE,
)
_CAPITAL = re.compile(r"\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*")
_ZH_NAME = re.compile(r"叫[\u4e00-\u9fff]{2,3}")
_CJK = re.compile(r"[\u4e00-\u9fff]")


def _names(text: str) -> int:
    """Capitalised word runs not opening the sentence (a crude, language-light name cue)."""
    return sum(1 for m in _CAPITAL.finditer(text) if m.start() > 0) + len(_ZH_NAME.findall(text))


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SPLIT.split(text) if s and s.strip()]


def informativeness(sentence: str) -> float | None:
    """How much a sentence says: names, numbers and dates count, questions and greetings
    do not. None for sentences not worth keeping at all (greetings, fragments)."""
    rest = _GREETING.sub("", sentence).strip()
    cjk = bool(_CJK.search(rest))
    if (len(rest) < 6) if cjk else (len(rest.split()) < 4):
        return None
    score = 2.0 * _names(rest) + 1.5 * len(_NUMBER.findall(rest)) + 2.0 * len(_DATE_WORD.findall(rest))
    size = len(rest) / 2 if cjk else len(rest.split())
    score += 1.0 if 6 <= size <= 40 else 0.0
    if rest.rstrip().endswith(("?", "？")):
        score -= 2.0
    return score
