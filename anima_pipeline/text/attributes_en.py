"""English attribute patterns: "<subject> <adverbs> <construction> <value>" per attribute,
in the order they are tried (the first that matches a clause wins within an attribute).
"""

from __future__ import annotations

from anima_pipeline.text.attribute_patterns import ANIMALS, SIGNS, changed, patterns
from anima_pipeline.text.vocab import MONTH_NUMBER

EN_ADVERBS = (
    r"also|still|now|currently|really|actually|definitely|certainly|truly|genuinely|"
    r"absolutely|always|originally|apparently|reportedly|recently|just|even|too"
)
_S_EN = r"(?P<subj>[^\W\d_][^,;:]{0,60}?)"
_A_EN = rf"(?:(?:{EN_ADVERBS})\s+)*"
_ANIMALS_EN = "|".join(k for k in ANIMALS if k.isascii())
SIGNS_EN = "|".join(k for k in SIGNS if k.isascii())
_MONTHS_EN = "|".join(MONTH_NUMBER)
_LIKE_EN = (
    r"(?:does\s*n[o']?t|do\s*n[o']?t|did\s*n[o']?t|no\s+longer|never)\s+(?:really\s+|particularly\s+|much\s+)?"
    r"(?:like|love|enjoy|care\s+for)s?"
    r"|(?:is|are)\s*(?:n[o']?t|\s+no\s+longer)\s+(?:a\s+(?:big\s+)?fan\s+of|fond\s+of|into|keen\s+on)"
    r"|dislikes?|hates?|detests?|can'?t\s+stand|cannot\s+stand"
    r"|(?:is|are)\s+(?:a\s+(?:big\s+|huge\s+)?fan\s+of|(?:very\s+|really\s+)?fond\s+of|really\s+into|keen\s+on)"
    r"|likes?|loves?|enjoys?|adores?"
)
_EN_QUIT_JOB = r"(?:quit|left|resigned\s+from)\s+(?:his|her|their|my|the|a)\s+(?:old\s+|previous\s+)?(?:job|position|post)"


PATTERNS_EN = patterns(
    _S_EN,
    chinese_zodiac=(
        rf"\s+(?:was\s+|is\s+|were\s+)?born\s+in\s+(?:a|the)\s+year\s+of\s+the\s+(?P<val>{_ANIMALS_EN})\b",
        rf"(?:'s)?\s+chinese\s+zodiac(?:\s+sign|\s+animal)?\s+is\s+(?:the\s+|a\s+|an\s+)?(?P<val>{_ANIMALS_EN})\b",
        rf"\s+(?:is|was)\s+(?:a|an)\s+(?P<val>{_ANIMALS_EN})\s+(?:in|according\s+to)\s+the\s+chinese\s+zodiac",
    ),
    # western zodiac sign
    zodiac_sign=(
        rf"(?:'s)?\s+(?:star|zodiac|sun|astrological)\s+sign\s+is\s+(?:a\s+|an\s+)?(?P<val>{SIGNS_EN})\b",
        rf"\s+is\s+(?:a|an)\s+(?P<val>{SIGNS_EN})$",
    ),
    birthday=(
        r"(?:'s)?\s+birthday\s+is\s+(?:on\s+)?(?P<val>.+)$",
        r"\s+(?:was\s+)?born\s+on\s+(?P<val>.+)$",
    ),
    hometown=(
        rf"\s+{_A_EN}(?:is|comes|came)\s+{_A_EN}from\s+(?P<val>.+)$",
        r"(?:'s)?\s+(?:hometown|home\s+town|birthplace|place\s+of\s+birth)\s+is\s+(?:in\s+)?(?P<val>.+)$",
        rf"\s+(?:was\s+)?born\s+(?:and\s+raised\s+)?in\s+(?!(?:the|a)\s+year\b|\d|(?:{_MONTHS_EN})\b)(?P<val>.+)$",
    ),
    # occupation ("works as"; the employer after "at" is a separate attribute)
    occupation=(
        rf"\s+{_A_EN}works?\s+as\s+(?:a\s+|an\s+|the\s+)?(?P<val>.+)$",
        changed(rf"\s+{_A_EN}(?:started|began)\s+working\s+as\s+(?:a\s+|an\s+)?(?P<val>.+)$"),
        r"(?:'s)?\s+(?:job|occupation|profession)\s+is\s+(?:a\s+|an\s+|the\s+)?(?P<val>.+)$",
        rf"\s+{_A_EN}is\s+(?:a|an)\s+(?P<val>.+?)\s+by\s+(?:profession|trade)\b",
    ),
    age=(
        rf"\s+{_A_EN}is\s+(?P<val>\d{{1,3}})(?:\s+(?:years?|yrs?)(?:\s+old)?)?(?:\s+now)?$",
        rf"\s+{_A_EN}is\s+(?P<val>\d{{1,3}})\s+(?:years?|yrs?)\s+old\b",
        changed(rf"\s+{_A_EN}(?:has\s+|just\s+)?turned\s+(?P<val>\d{{1,3}})\b"),
        r"(?:'s)?\s+age\s+is\s+(?P<val>\d{1,3})\b",
    ),
    # likes / preferences
    likes=(
        rf"(?:'s|s')\s+(?:all-time\s+|absolute\s+)?favou?rite(?:\s+[a-z]+){{0,2}}?\s+(?:is|are)\s+{_A_EN}(?P<val>.+)$",
        changed(rf"\s+{_A_EN}(?:has\s+)?(?:stopped|quit|gave\s+up|cut\s+out)\s+(?P<val>(?:drinking|eating)\s+.+)$", polarity=-1),
        changed(rf"\s+{_A_EN}(?:has\s+)?switched\s+from\s+(?P<over>.+?)\s+to\s+(?P<val>.+)$"),
        rf"\s+{_A_EN}(?P<pverb>prefers?)\s+(?P<val>.+?)(?:\s+(?:over|rather\s+than|instead\s+of|more\s+than)\s+(?P<over>.+))?$",
        rf"\s+{_A_EN}(?P<verb>{_LIKE_EN})\s+(?P<val>.+)$",
    ),
    residence=(
        rf"\s+{_A_EN}(?P<neg>no\s+longer\s+)?{_A_EN}(?:lives|is\s+living|resides|is\s+based|has\s+settled)\s+in\s+(?P<val>.+)$",
        changed(rf"\s+{_A_EN}(?:has\s+)?(?:moved|relocated|emigrated)(?:\s+back)?\s+to\s+(?P<val>.+)$"),
    ),
    employer=(
        rf"\s+{_A_EN}(?P<neg>no\s+longer\s+)?{_A_EN}works\s+(?:as\s+[^,]+?\s+)?(?:at|for)\s+(?P<val>.+)$",
        rf"\s+{_A_EN}(?P<neg>no\s+longer\s+)?{_A_EN}is\s+employed\s+(?:at|by)\s+(?P<val>.+)$",
        changed(rf"\s+{_A_EN}(?:started\s+(?:working|a\s+(?:new\s+)?job)\s+(?:at|for))\s+(?P<val>.+)$"),
        changed(rf"\s+{_A_EN}(?:got|landed|accepted|took)\s+a\s+(?:new\s+)?job\s+(?:at|with)\s+(?P<val>.+)$"),
        changed(rf"\s+{_A_EN}(?:has\s+)?(?:started|began)\s+at\s+(?P<val>.+)$", org=True),
        changed(rf"\s+{_A_EN}(?:has\s+)?joined\s+(?P<val>.+?)\s+as\s+(?:a|an|the|their|its)\s+.+$"),
        changed(rf"\s+{_A_EN}(?:has\s+)?joined\s+(?P<val>.+)$", org=True),
        changed(rf"\s+{_A_EN}(?:has\s+)?{_EN_QUIT_JOB}\s+(?:at|with)\s+(?P<val>.+)$", polarity=-1),
        changed(rf"\s+{_A_EN}(?:has\s+)?(?:{_EN_QUIT_JOB}|resigned)(?:\s+(?:in|on|last|this|yesterday|today)\b.*)?$", polarity=-1),
        changed(rf"\s+{_A_EN}(?:has\s+)?resigned\s+from\s+(?P<val>.+)$", polarity=-1, org=True),
    ),
    # relationship status
    relationship=(
        rf"\s+{_A_EN}(?:is|has\s+been)\s+{_A_EN}(?P<val>single|married|divorced|engaged|widowed|separated)\b",
        changed(rf"\s+{_A_EN}(?:got|became|has\s+gotten|has\s+got)\s+(?P<val>married|divorced|engaged|separated)\b"),
        rf"\s+{_A_EN}(?:is\s+)?(?P<val>dating|in\s+a\s+relationship|seeing\s+someone)\b",
        rf"\s+{_A_EN}has\s+a\s+(?P<val>boyfriend|girlfriend|partner)\b",
        changed(rf"\s+{_A_EN}(?P<val>broke\s+up)\s+with\b"),
    ),
)  # fmt: skip
