"""Text normalization and similarity for the offline deep-sleep heuristics.

`normalize_content` is shared by two very different callers: the merge heuristic here and
an asset check that runs in PostgreSQL ("no two active memories with the same normalized
content"). The two must never disagree, so the character classes are written once, as
regex escapes (`\\uXXXX`) that both Python's `re` and PostgreSQL's ARE engine read the same
way (`FOLD_PATTERN`, `CJK_GAP_PATTERN`), and the store's SQL expression of the same rule
(`normalized_content_sql`, store/invariants.py) is built from the very same strings.

`similarity` mimics pg_trgm (Jaccard of padded word trigrams) so that a threshold tuned
here means roughly the same thing as `similarity()` in SQL; CJK text has no spaces, so a
whole sentence would be a single pg_trgm "word" — character bigrams work far better there.
"""

from __future__ import annotations

import re
import unicodedata

# Characters folded to a single space: whitespace (incl. ideographic and zero-width
# space), ASCII punctuation, Latin-1, general, supplemental and CJK punctuation. Symbols
# that carry meaning in a fact (# $ % & + < = > @, currency) are deliberately kept, so
# that "likes C++" and "likes C" do not normalize to the same memory.
FOLD_CLASS = (
    r"\u0009-\u000d\u0020\u0085\u00a0\u1680\u2000-\u200b\u2028\u2029\u202f\u205f\u3000\ufeff"
    r"\u0021-\u0022\u0027-\u002a\u002c-\u002f\u003a-\u003b\u003f\u005b-\u0060\u007b-\u007e"
    r"\u00a1\u00a7\u00ab\u00b6\u00b7\u00bb\u00bf"
    r"\u2010-\u2027\u2030-\u205e\u2e00-\u2e5d"
    r"\u3001-\u3003\u3008-\u3011\u3014-\u301f\u3030\u303d\u30fb"
    r"\ufe10-\ufe1f\ufe30-\ufe6f"
)

# Han, kana and their iteration marks. Hangul is left out on purpose: Korean separates
# words with spaces, so it behaves like Latin text (word trigrams, spaces kept).
CJK_CLASS = (
    r"\u3005-\u3007\u3041-\u3096\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff"
    r"\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff"
)

FOLD_PATTERN = f"[{FOLD_CLASS}]+"
# A space between two CJK characters is noise (a comma folded away, or an extraction
# that tokenized Chinese), so "张三，喜欢吃辣" and "张三喜欢吃辣" normalize the same.
CJK_GAP_PATTERN = f"(?<=[{CJK_CLASS}]) (?=[{CJK_CLASS}])"

_FOLD_RE = re.compile(FOLD_PATTERN)
_CJK_GAP_RE = re.compile(CJK_GAP_PATTERN)
_CJK_RE = re.compile(f"[{CJK_CLASS}]")
_TOKEN_RE = re.compile(f"[{CJK_CLASS}]+|(?:(?![{CJK_CLASS}])[^\\W_])+")


def normalize_content(text: str) -> str:
    """Canonical form of a memory's content for exact-duplicate detection.

    NFKC first (full-width letters and punctuation become ASCII, so they fold like ASCII),
    then lowercase, then every run of punctuation/whitespace becomes one space, spaces
    between CJK characters are dropped and the ends are trimmed.
    """
    folded = _FOLD_RE.sub(" ", unicodedata.normalize("NFKC", text).lower())
    return _CJK_GAP_RE.sub("", folded).strip(" ")


def has_cjk(text: str) -> bool:
    return _CJK_RE.search(text) is not None


def cjk_count(text: str) -> int:
    return len(_CJK_RE.findall(text))


def grams(text: str) -> frozenset[str]:
    """The gram set `similarity` compares: pg_trgm trigrams of each non-CJK word (padded
    with two leading and one trailing space, as pg_trgm does) and character bigrams of
    each CJK run (a lone CJK character counts as its own gram)."""
    out: set[str] = set()
    for token in _TOKEN_RE.findall(normalize_content(text)):
        if _CJK_RE.match(token):
            if len(token) == 1:
                out.add(token)
            else:
                out.update(token[i : i + 2] for i in range(len(token) - 1))
        else:
            padded = f"  {token} "
            out.update(padded[i : i + 3] for i in range(len(padded) - 2))
    return frozenset(out)


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a or not b:
        return 0.0
    shared = len(a & b)
    return shared / (len(a) + len(b) - shared)


def similarity(a: str, b: str) -> float:
    """Similarity in 0..1 like pg_trgm's `similarity()`, with CJK bigrams; 0.0 when
    either side has no word characters (nothing to compare is no evidence of sameness)."""
    return jaccard(grams(a), grams(b))
