"""Small-talk detection: a day of greetings, thanks and questions must write nothing."""

from __future__ import annotations

import re
from collections.abc import Iterable

from anima_pipeline.night.steps.light.records import Utterance
from anima_pipeline.text import lexicon as lx
from anima_pipeline.text.sentences import split_sentences
from anima_pipeline.text.words import clean_text, content_words, is_chinese, zh_content_chars


def is_informative(sentence: str) -> bool:
    sentence = sentence.strip()
    if not sentence:
        return False
    if lx.SELF_INTRO.search(sentence):
        return True
    if is_chinese(sentence):
        if lx.ZH_QUESTION.search(sentence):
            return False
        clauses = [c for c in re.split(r"[，,、]", sentence) if c and not lx.ZH_SMALL_TALK.match(c.strip())]
        return zh_content_chars("".join(clauses)) >= 4
    if sentence.endswith("?"):
        return False
    return len(content_words(lx.LEADING_FILLERS.sub("", sentence))) >= 2


def is_small_talk(utterances: Iterable[Utterance]) -> bool:
    """True when nothing said is more than greetings, thanks, pleasantries or questions.

    Restraint principle: such a day must write nothing, so extraction stops here.
    """
    return not any(
        is_informative(s) for u in utterances for s in split_sentences(clean_text(u.text), message=True)
    )
