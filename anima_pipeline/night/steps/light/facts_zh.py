"""Chinese fact extraction: one sentence to (type, content, confidence), or None; 我/你 rewritten to names."""

from __future__ import annotations

import re

from anima_pipeline.night.steps.light.fact_context import CONFIDENCE, IMPRINT_FEELING, Context
from anima_pipeline.night.steps.light.records import Utterance
from anima_pipeline.night.steps.light.significance import narrative_significance
from anima_pipeline.text import lexicon as lx
from anima_pipeline.text.emotion import utterance_feeling
from anima_pipeline.text.words import quoted_titles, zh_content_chars

_MIN_SCORE_ZH = 2.5  # Chinese sentences are scored on their own scale (cue + content characters)


def _zh_type(sentence: str, significance: str | None, feeling: float) -> str:
    if significance in ("milestone", "turning_point") and feeling >= IMPRINT_FEELING:
        return "imprint"
    if lx.ZH_PREFERENCE.search(sentence):
        return "preference"
    if lx.ZH_STRONG_WORLD.search(sentence):
        return "world"
    if lx.ZH_OPINION.search(sentence):
        return "opinion"
    if lx.ZH_PLAN.search(sentence):
        return "experience"
    if lx.ZH_WORLD.search(sentence) and not re.search(r"了|过", sentence):
        return "world"
    return "experience"


_ZH_QUOTED = re.compile(r"(《[^》]*》|「[^」]*」|『[^』]*』|“[^”]*”)")
_ZH_LEADING_DATE = r"(^|[，。；！：])(\d{4}-\d{2}(?:-\d{2})?(?:晚上)?)(?=[A-Za-z]|NAMES)"


def _zh_rewrite(sentence: str, speaker: str, other: str) -> str:
    """我 -> speaker, 你 -> other, outside titles and quotes (《当我谈跑步时我谈些什么》 stays whole)."""
    parts = _ZH_QUOTED.split(sentence)
    for i in range(0, len(parts), 2):
        part = re.sub(r"(?<![自忘])我们", f"{speaker}他们", parts[i])
        part = re.sub(r"(?<![自忘])我", speaker, part)  # 自我 / 忘我 are words, not the speaker
        parts[i] = part.replace("你们", f"{other}他们").replace("您", other).replace("你", other)
    out = "".join(parts)
    # A date opening a clause reads as its own phrase: "2026-11-16，Lin Wei去了…", not "2026-11-16Lin Wei去了…".
    names = "|".join(re.escape(n) for n in (speaker, other) if n)
    return re.sub(_ZH_LEADING_DATE.replace("NAMES", names or "$^"), r"\1\2，", out)


def zh_fact(sentence: str, utt: Utterance, ctx: Context) -> tuple[str, str, float] | None:
    if lx.ZH_QUESTION.search(sentence):
        return None
    clauses = [c.strip() for c in re.split(r"[，,]", sentence.rstrip("。！!；;"))]
    clauses = [
        lx.ZH_LEADING_FILLERS.sub("", c + "，").rstrip("，")
        for c in clauses
        if c and not lx.ZH_SMALL_TALK_CLAUSE.match(c)
    ]
    clauses = [c for c in clauses if c and c not in ctx.names]
    if clauses and lx.ZH_REQUEST.search(clauses[0]):
        return None  # "给我推荐一本书" / "跟你说说我家吧" asks or announces; it states no fact
    text = "，".join(clauses)
    intro = re.search(r"我(?:叫|的名字是|的名字叫)([\u3400-\u9fffA-Za-z·]{1,8})", text)
    if intro and intro.group(1) == ctx.speaker:
        return "world", f"{ctx.label}的名字是{ctx.speaker}", 0.9
    if zh_content_chars(text) < 4:
        return None
    titles = quoted_titles(text)
    if titles and re.search(r"推荐|建议你?(?:看|读|听)", text):
        return (
            "experience",
            f"{ctx.speaker}向{ctx.other}推荐了{'、'.join('《' + t + '》' for t in titles)}",
            0.7,
        )
    you_mode = False
    if "我" not in text:
        if utt.role != "assistant" or not lx.ZH_YOU_FACT.match(text) or lx.ZH_YOU_NOT_FACT.match(text):
            return None
        you_mode = True
    elif (utt.role == "assistant" and lx.ZH_SERVICE.search(text)) or lx.ZH_REACTION.search(text):
        return None
    significance = narrative_significance(text)
    cues = (lx.ZH_PREFERENCE, lx.ZH_PLAN, lx.ZH_WORLD, lx.ZH_OPINION, lx.ZH_EVENT)
    score = (1.5 if any(c.search(text) for c in cues) else 0.0) + 0.25 * min(zh_content_chars(text), 10)
    score += 1.0 if significance else 0.0
    if score < _MIN_SCORE_ZH:
        return None
    ftype = _zh_type(
        text.replace("你", "我") if you_mode else text, significance, utterance_feeling(utt.text)
    )
    confidence = CONFIDENCE[ftype]
    return (
        ftype,
        _zh_rewrite(text, ctx.speaker, ctx.other),
        round(confidence - (0.1 if you_mode else 0), 2),
    )
