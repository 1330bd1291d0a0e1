"""Text utilities of the light-sleep heuristics: language test, cleanup, content words, keys
(sentences: text/sentences.py, `split_sentences(text, message=True)`)."""

from __future__ import annotations

import re
import unicodedata

from anima_pipeline.text import lexicon as lx
from anima_pipeline.text.vocab import STOPWORDS

CJK = re.compile(r"[\u3400-\u9fff]")
WORD = re.compile(r"[A-Za-z][A-Za-z'-]*|\d+")


def is_chinese(text: str) -> bool:
    """Chinese when CJK characters weigh at least as much as Latin letters (one CJK ~ two letters)."""
    cjk = len(CJK.findall(text))
    return cjk > 0 and 2 * cjk >= len(re.findall(r"[A-Za-z]", text))


def normalize_key(text: str) -> str:
    """Lowercase, punctuation-free, whitespace-folded form used to spot twins."""
    kept = [" " if unicodedata.category(c)[0] in "PSZ" else c for c in text.lower()]
    return " ".join("".join(kept).split())


_TOOL_MARKUP = re.compile(r"<(tool_call|tool_result|function_call)>.*?</\1>", re.S)


def clean_text(text: str) -> str:
    text = _TOOL_MARKUP.sub(" ", text)
    text = lx.EMOJI.sub(" ", lx.PHOTO_TAG.sub(" ", lx.URL.sub(" ", text)))
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\u201c", '"').replace("\u201d", '"')
    return re.sub(r"[ \t]+", " ", text).strip()


def content_words(text: str) -> list[str]:
    """The informative words of a chat sentence, as written and in order, repeats kept (a
    sentence's weight counts them): longer than two letters, not a stopword, small talk or a
    vague word. Deep sleep compares memories by `memory_terms` (night/steps/deep/merges.py) instead."""
    return [
        w
        for w in WORD.findall(text)
        if len(w) > 2
        and w.lower() not in STOPWORDS
        and w.lower() not in lx.SMALL_TALK_WORDS
        and w.lower() not in lx.VAGUE_WORDS
    ]


def zh_content_chars(text: str) -> int:
    return len(
        re.findall(r"[\u3400-\u9fff]", re.sub(r"[我你他她它的了是很也都吗呢吧啊呀哦嗯好就在有和]", "", text))
    )


def quoted_titles(text: str) -> list[str]:
    return [a or b for a, b in re.findall(r'"([^"]{2,60})"|《([^》]{1,40})》', text)]
