"""Chinese attribute patterns: "<subject><adverbs><construction><value>" per attribute, in
the order they are tried (the first that matches a clause wins within an attribute).
"""

from __future__ import annotations

from anima_pipeline.text.attribute_patterns import ANIMALS, SIGNS, changed, patterns

CN_ADVERBS = (
    "也|还是|还|都|很|非常|特别|最|一直|现在|目前|如今|已经|今年|本来|其实|真的|确实|更|原本|"
    "仍然|依然|从小|周末|每天|每周|平时|平常|经常|常常|总是|通常|有时|偶尔|晚上|早上"
)  # no 正/则/就: common last characters of given names, and the subject match is lazy
CN_NUM = "零〇一二两三四五六七八九十百"

# A Latin name may sit in Chinese text ("Lin Wei喜欢…"): up to two spaced words before it.
_S_CN = r"(?P<subj>(?:[a-z][a-z.'-]* ){0,2}[^\s,;:!?。、]{1,12}?)"
_A_CN = rf"(?:{CN_ADVERBS})*"
_ANIMALS_CN = "".join(k for k in ANIMALS if not k.isascii())
_SIGNS_CN = "|".join(k for k in SIGNS if not k.isascii())
# Strict numeral shapes, so that the lazy subject cannot swallow or lend a digit-like
# character: in "张三三十岁" the age must be 三十, not 三三十 with subject "张".
_CN_AGE = "一百(?:零[一二三四五六七八九]|[一二]十[一二三四五六七八九]?)?|[二三四五六七八九]?十[一二三四五六七八九]?|[一二两三四五六七八九]"
_CN_MONTH = "1[0-2]|0?[1-9]|十[一二]?|[一二三四五六七八九]"
_CN_DAY = "[12][0-9]|3[01]|0?[1-9]|[二三]?十[一二三四五六七八九]?|三十一?|[一二三四五六七八九]"
_DATE_CN = rf"(?:\d{{4}}|[〇零一二三四五六七八九]{{4}})?年?(?:{_CN_MONTH})月(?:{_CN_DAY})[日号]"
_LIKE_CN = (
    "不再喜欢|不再爱|不太喜欢|不怎么喜欢|不喜欢|不爱(?![人好情国心])|讨厌|厌恶|受不了|"
    "喜欢|热爱|偏爱|爱(?![人好情国心])"
)


PATTERNS_ZH = patterns(
    _S_CN,
    chinese_zodiac=(
        rf"{_A_CN}是?属(?P<val>[{_ANIMALS_CN}])(?!于)",
        rf"{_A_CN}(?:是|在)?(?P<val>[{_ANIMALS_CN}])年(?:出生|生)",
        rf"的?生肖(?:是|为)?属?(?P<val>[{_ANIMALS_CN}])",
    ),
    zodiac_sign=(
        rf"的?星座(?:是|为)(?P<val>{_SIGNS_CN})座?",
        rf"{_A_CN}是(?P<val>{_SIGNS_CN})座",
    ),
    birthday=(
        r"的?生日(?:是|在|为)?(?P<val>.+)$",
        rf"{_A_CN}(?:出生于|生于|出生在|是)(?P<val>{_DATE_CN})",
        rf"{_A_CN}(?P<val>{_DATE_CN})(?:出生|生)",
    ),
    hometown=(
        rf"{_A_CN}(?:来自|出身于?)(?P<val>.+)$",
        r"的?(?:老家|家乡|故乡|籍贯|出生地)(?:是|在|为)(?P<val>.+)$",
        rf"{_A_CN}(?:出生在|出生于|生于|生在)(?![\d{CN_NUM}]|[{_ANIMALS_CN}]年)(?P<val>.+)$",
    ),
    occupation=(
        r"的?(?:职业|工作)是(?P<val>.+)$",
        rf"{_A_CN}是一(?:名|位)(?P<val>.+)$",
        changed(rf"{_A_CN}(?:当上了?|成为了?一(?:名|位))(?P<val>.+)$"),
    ),
    age=(
        rf"{_A_CN}(?P<val>\d{{1,3}}|{_CN_AGE})周?岁",
    ),
    likes=(
        r"(?:一直|还是|也|都)?最(?:喜欢|爱)的(?:[^是，,]{0,6}?)(?:还|仍然|依然|一直)?是(?P<val>.+)$",
        changed(r"(?:现在|已经|决定|从此|以后)*(?:不再|不|戒掉了|戒了)(?P<val>[喝吃].+?)了$", polarity=-1),
        changed(r"(?:现在|已经|决定|从此|以后)*(?:从.{0,16}?开始)?改(?P<val>[喝吃].+?)了?$"),
        rf"{_A_CN}(?:更喜欢|更爱|偏好)(?P<val>.+?)(?:而不是|而非|胜过|多过)(?P<over>.+)$",
        rf"{_A_CN}(?P<verb>{_LIKE_CN})(?P<val>.+)$",
        r"的?爱好是(?P<val>.+)$",
    ),
    residence=(
        rf"{_A_CN}(?P<neg>不再)?{_A_CN}(?:住在|居住在|居住于|生活在|现居于?|定居在|定居于)(?P<val>.+)$",
        changed(rf"{_A_CN}(?:搬到了|搬到|搬去了|搬去|搬回了?|迁居到?|移居到?|移民到?)(?P<val>.+)$"),
    ),
    employer=(
        changed(rf"{_A_CN}开始在(?P<val>[^在]+?)(?:工作|上班|任职|就职|打工)"),
        rf"{_A_CN}(?P<neg>不再)?{_A_CN}在(?P<val>[^在]+?)(?:工作|上班|任职|就职|打工)",
        changed(rf"{_A_CN}从(?P<val>.+?)(?:辞职|离职)了?", polarity=-1),
        changed(r"(?:已经|刚刚?|上个月|上周|今年|去年)*(?:辞职了?|离职了?|辞掉了?[^，,]{0,8}工作|辞去了?[^，,]{0,8}(?:工作|职务)|换了(?:一份)?新?工作|换工作了)", polarity=-1),
        rf"{_A_CN}(?P<neg>不再)?(?:就职于|任职于|供职于|受雇于)(?P<val>.+)$",
        changed(rf"{_A_CN}(?:入职了?|跳槽到了?|跳槽去了?)(?P<val>.+)$"),
    ),
    relationship=(
        rf"{_A_CN}是?(?P<val>单身|已婚|离异|丧偶)",
        changed(rf"{_A_CN}(?P<val>结婚|离婚|订婚|分手)了"),
        rf"{_A_CN}(?:有|交了)(?:一个|个)?(?P<val>女朋友|男朋友|对象|伴侣)",
        rf"{_A_CN}在?(?P<val>谈恋爱)",
    ),
)  # fmt: skip
