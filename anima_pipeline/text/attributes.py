"""Pattern extraction of (subject, attribute, value, polarity) facts, English and Chinese.

Deep sleep round 1 needs to know when two memories talk about the *same* exclusive
attribute of the *same* person. The offline engine cannot understand language, so it
recognises a small, explicit set of sentence shapes and nothing else; a sentence it does
not recognise yields no fact, which means "never flagged" — the safe direction for a step
that deprecates memories.

Attributes and how a newer differing value is judged (see `ATTRIBUTE_CLASS`):

- immutable: chinese_zodiac (属虎 / "born in the Year of the Tiger"), zodiac_sign,
  birthday, hometown ("is from", 老家, 来自) — two values cannot both be true.
- exclusive: occupation ("works as", 职业是, 是一名), age — a contradiction unless the
  newer statement marks a change ("now", 现在, "turned", ...) or, for age, the years
  elapsed between the observations explain the difference.
- changeable: residence ("lives in", "moved to", 住在, 搬到), employer ("works at",
  在…工作), relationship (single / married / dating, 单身 / 结婚了) — a newer value simply
  supersedes the older one.
- preference: likes ("likes / doesn't like X", 喜欢 / 不喜欢 X). Only the *same* object
  with opposite polarity collides; "likes apples" and "likes cherries" coexist.
  "now prefers A over B" (更喜欢A而不是B + a change marker) also denies B, which is how
  "likes Python" expires against "now prefers TypeScript over Python"; a bare "now
  prefers TypeScript" says nothing about Python and never collides with it.

The subject is the named person the clause is about ("caroline's daughter", "张三"),
lower-cased; "she"/"他" are resolved to the person named earlier in the same memory, and a
clause whose subject cannot be named yields no fact, so different people never collide.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from anima_pipeline.text.attribute_patterns import ANIMALS, SIGNS, Pattern
from anima_pipeline.text.attributes_en import EN_ADVERBS, PATTERNS_EN, SIGNS_EN
from anima_pipeline.text.attributes_zh import CN_ADVERBS, CN_NUM, PATTERNS_ZH
from anima_pipeline.text.lexicon import zh_number
from anima_pipeline.text.sentences import split_sentences
from anima_pipeline.text.similarity import has_cjk
from anima_pipeline.text.vocab import MONTH_NUMBER, WEEKDAYS

ATTRIBUTE_CLASS: dict[str, str] = {
    "chinese_zodiac": "immutable",
    "zodiac_sign": "immutable",
    "birthday": "immutable",
    "hometown": "immutable",
    "occupation": "exclusive",
    "age": "exclusive",
    "residence": "changeable",
    "employer": "changeable",
    "relationship": "changeable",
    "likes": "preference",
}


@dataclass(frozen=True)
class Fact:
    """One recognised statement. `polarity` is +1 (asserted) or -1 (denied, e.g. "doesn't
    like", "no longer lives in"); `changed` says the clause itself announces a change of
    state ("now", "no longer", "moved", 现在, 不再), which turns a clash into an expiry.
    `unnamed` marks an employer or residence described without a name ("works at a bank",
    "在一家银行工作"): such a fact only ever loses to a newer *announced change*.
    `value` ANY_VALUE with polarity -1 ("quit his job", 辞职了) denies whatever value
    was held before."""

    subject: str
    attribute: str
    value: str
    polarity: int
    changed: bool
    unnamed: bool = False  # "a bank", "一家银行": a place described, not named (see facts_conflict)


# --- vocabularies -----------------------------------------------------------------------

_RELATIONSHIP = {
    "single": "single", "married": "married", "divorced": "divorced", "engaged": "engaged",
    "widowed": "widowed", "separated": "separated", "dating": "in a relationship",
    "in a relationship": "in a relationship", "seeing someone": "in a relationship",
    "boyfriend": "in a relationship", "girlfriend": "in a relationship",
    "partner": "in a relationship", "broke up": "single",
    "单身": "single", "已婚": "married", "离异": "divorced", "丧偶": "widowed",
    "结婚": "married", "离婚": "divorced", "订婚": "engaged", "分手": "single",
    "女朋友": "in a relationship", "男朋友": "in a relationship", "对象": "in a relationship",
    "伴侣": "in a relationship", "谈恋爱": "in a relationship",
}  # fmt: skip

# Gendered relation nouns let "she" after "Ruth's son" resolve to Ruth, and after
# "Ruth's daughter" to the daughter.
_MALE = {
    "son", "brother", "father", "dad", "husband", "boyfriend", "grandfather", "grandpa",
    "uncle", "nephew", "grandson", "stepson", "儿子", "哥哥", "弟弟", "爸爸", "父亲", "丈夫",
    "老公", "男朋友", "爷爷", "外公", "叔叔", "舅舅", "侄子", "孙子",
}  # fmt: skip
_FEMALE = {
    "daughter", "sister", "mother", "mom", "mum", "wife", "girlfriend", "grandmother",
    "grandma", "aunt", "niece", "granddaughter", "stepdaughter", "女儿", "姐姐", "妹妹",
    "妈妈", "母亲", "妻子", "老婆", "女朋友", "奶奶", "外婆", "阿姨", "姑姑", "侄女", "孙女",
}  # fmt: skip

_EN_PRONOUNS = {"he": "m", "she": "f", "him": "m", "her": "f", "his": "m"}
_CN_PRONOUNS = {"他": "m", "她": "f"}
# Subjects that cannot name anyone on their own: never compared across memories.
_UNRESOLVABLE = {
    "it", "they", "them", "their", "its", "we", "you", "this", "that", "these", "those",
    "someone", "somebody", "everyone", "everybody", "people", "who", "which", "there",
    "它", "他们", "她们", "它们", "这", "那", "这个", "那个", "大家", "有人", "别人",
}  # fmt: skip
# A "subject" containing one of these is a mis-parse (reported speech, a modal, a clause).
_EN_SUBJECT_STOP = re.compile(
    r"\b(?:is|was|are|were|be|been|has|have|had|and|or|but|who|which|that|said|says|say|"
    r"thinks?|believes?|feels?|felt|feeling|looks?|seems?|sounds?|acts?|would|will|should|could|can|"
    r"might|may|must|wants?|not|to|if|when|because|so|than|like|likes|by|with|about|do|does|did|"
    r"you|your|what|where|how|why)\b|'(?:d|ll|m|re|ve)\b"
)
_CN_SUBJECT_STOP = re.compile(r"[有说是在和跟把被给对觉认想要会个为]|以为|知道")
_USER_ALIASES = {"user", "the user", "用户", "该用户", "这位用户"}

# A clause that announces a change of state: its fact supersedes rather than contradicts.
_CHANGE_EN = re.compile(
    r"\b(?:now|no\s+longer|not\s+any\s*more|any\s*more|currently|these\s+days|nowadays|"
    r"recently|moved|relocated|switched|changed|turned|since\s+then|has\s+become|became)\b"
)
_CHANGE_CN = re.compile(
    r"现在|如今|目前|最近|不再|已经不|搬到|搬去|搬回|换了|改为|转而|后来|当上|入职|跳槽|结婚了|离婚了|分手了|订婚了"
)

ANY_VALUE = "*"  # "quit his job" / 辞职了: denies the employer, whatever it was

# --- clause text ------------------------------------------------------------------------


def _clause_text(text: str) -> str:
    """NFKC, straight apostrophes, lowercase, single spaces: the form patterns see."""
    text = unicodedata.normalize("NFKC", text).replace("\u2019", "'").replace("\u2018", "'")
    return re.sub(r"\s+", " ", text.lower()).strip()


_CLAUSE_SPLIT = re.compile(r"[,，、:：]|\s+(?:and|but|while|whereas)\s+|而且|并且|但是|不过|(?<!不)但|同时")
_LEADING_CONNECTOR = re.compile(r"^(?:(?:and|also|but|so|then|plus)\s+|也|还|并且|而且)+")


def _clauses(text: str) -> list[str]:
    out: list[str] = []
    for sentence in split_sentences(unicodedata.normalize("NFKC", text)):
        for clause in _CLAUSE_SPLIT.split(_clause_text(sentence)):
            clause = clause.strip(" .!?;。！？；\"'()[]“”「」『』（）")
            if clause:
                out.append(clause)
    return out


# --- subjects ---------------------------------------------------------------------------

_POSSESSIVE_EN = re.compile(r"^(?P<owner>.+?)(?:'s|s')\s+(?P<rel>.+)$")
_POSSESSIVE_CN = re.compile(r"^(?P<owner>.+?)的(?P<rel>.+)$")


def _relation_gender(relation: str) -> str | None:
    head = relation.strip().split(" ")[-1].lower()
    if head in _MALE:
        return "m"
    if head in _FEMALE:
        return "f"
    return None


def resolve_pronoun(gender: str | None, antecedent: str) -> str:
    """Who "she"/"he" (gender 'f'/'m') means after `antecedent`: the relation in
    "Ruth's daughter" when the gender fits it (or is unknown), else its owner."""
    for pattern in (_POSSESSIVE_EN, _POSSESSIVE_CN):
        m = pattern.match(antecedent)
        if m:
            rel_gender = _relation_gender(m["rel"])
            if gender is not None and rel_gender is not None and rel_gender != gender:
                return m["owner"]
            return antecedent
    return antecedent


def _clean_subject(raw: str, context: str | None) -> str | None:
    """Canonical subject, or None when the clause does not name anyone we can identify."""
    subject = _LEADING_CONNECTOR.sub("", raw.strip())
    subject = re.sub(rf"(?:\s+(?:{EN_ADVERBS}))+$", "", subject)
    subject = subject.strip()
    if not subject:
        return None
    words = subject.split(" ")
    first = words[0]
    if "'" in first and not (first.endswith("'s") and first[:-2] not in _EN_PRONOUNS.keys() | _UNRESOLVABLE):
        return None  # a contraction ("it's", "i'd", "they'll"), not a name
    if first in _EN_PRONOUNS or first in _UNRESOLVABLE:
        gender = _EN_PRONOUNS.get(first)
        if gender is None or context is None:
            return None
        target = resolve_pronoun(gender, context)
        subject = f"{target}'s {' '.join(words[1:])}" if len(words) > 1 else target
    elif subject[0] in _CN_PRONOUNS and not subject.startswith(("他们", "她们")):
        if context is None:
            return None
        target = resolve_pronoun(_CN_PRONOUNS[subject[0]], context)
        subject = target + subject[1:]
    elif subject in _UNRESOLVABLE or subject.startswith(("他们", "她们", "它")):
        return None
    if subject.startswith("the ") and subject != "the user":
        subject = subject[4:]
    if subject in _USER_ALIASES:
        return "user"
    if re.search(r"\d", subject):
        return None
    if re.search(r"[a-z]", subject):
        if len(subject.split(" ")) > 5 or _EN_SUBJECT_STOP.search(subject):
            return None
    elif len(subject) > 12 or _CN_SUBJECT_STOP.search(subject[1:]):
        return None
    return subject


_EN_NAME = re.compile(
    r"^\s*(?P<name>(?:[Tt]he\s+)?[Uu]ser|[A-Z][^\W_\u3400-\u9fff.-]*(?:[.-][^\W\u3400-\u9fff]*)*(?:['\u2019][A-Z][\w-]*)?(?:\s+[A-Z][^\W\u3400-\u9fff-]*(?:-[^\W\u3400-\u9fff]*)*){0,2})"
    r"(?:(?:'s|\u2019s)\s+(?P<rel>(?:(?:younger|older|elder|eldest|youngest|oldest|little|big|"
    r"baby|best|new|late)\s+)?[a-z]+(?:-in-law)?))?(?=[\s,.;!?\u3400-\u9fff]|$)"
)
_EN_NOT_NAMES = {
    "the", "a", "an", "in", "on", "at", "last", "next", "this", "that", "these", "those", "it",
    "he", "she", "they", "we", "you", "i", "when", "after", "before", "during", "since",
    "yesterday", "today", "tomorrow", "recently", "also", "and", "but", "so", "her", "his",
    "their", "its", "my", "our", "your", "there", "here", "then", "if", "as", "while", "once",
    "every", "each", "some", "many", "most", "both", "all", "one", "for", "from", "with",
    "however", "although", "because", "now", "later", "earlier", "sometimes", "often",
    "wow", "yeah", "yes", "no", "oh", "hey", "hi", "hello", "thanks", "thank", "ok", "okay",
    "yup", "well", "sure", "great", "cool", "nice", "love", "like", "what", "how", "why",
    "year", *WEEKDAYS,
}  # fmt: skip
_EN_NOT_NAMES |= set(MONTH_NUMBER)  # "May was hard. She …" names a month, not a person
# What may follow a Chinese name: an adverb, a verb, a number (age, date) or 的+attribute.
_CN_VERB_ANCHOR = (
    rf"(?:{CN_ADVERBS}|是|在|有|喜欢|不|爱|讨厌|住|属|来自|出生|生于|会|要|想|觉得|认为|说|曾|和|跟|从|把|"
    rf"被|刚|正在|每|总|对|给|常|经常|养|学|做|当|搬|结婚|离婚|单身|已婚|去|"
    rf"的(?:生日|老家|家乡|星座|生肖|职业|工作|爱好))"
)
_CN_NAME = re.compile(
    rf"^\s*(?P<subj>我们?|[^\s，。；！？,.;!?]{{2,12}}?)(?={_CN_VERB_ANCHOR}|[\d{CN_NUM}]|\s*[，,])"
)
# Sentence openers that look like a topic before a comma but name no one.
_CN_NOT_NAMES = {
    "昨天", "今天", "明天", "前天", "后天", "去年", "今年", "明年", "上周", "下周", "周末", "最近",
    "以前", "之前", "之后", "后来", "然后", "现在", "当时", "那天", "早上", "晚上", "另外", "此外",
}  # fmt: skip


def guess_subject(sentence: str) -> str | None:
    """The person a sentence opens with, in its original casing ("Ruth",
    "Ruth's daughter", "The user", "张三", "张三的女儿"), or None.

    Deliberately narrow: a capitalised name or "the user" in English, a short run of
    characters before a verb/adverb in Chinese. A wrong guess would put the wrong name
    into a rewritten memory, so anything unclear is None.
    """
    m = _EN_NAME.match(sentence)
    if m and re.match(r"\s+(?:and|&)\s+[A-Z]", sentence[m.end() :]):
        return None  # "Ruth and Edna …": a later "she" could be either
    if m and has_cjk(sentence[m.end() : m.end() + 1]) and not re.match(_CN_VERB_ANCHOR, sentence[m.end() :]):
        return None  # "Lin Wei妈妈叫…" is his mother: a Latin name in Chinese needs a verb next
    if m and m["name"].split()[0].lower() not in _EN_NOT_NAMES - {"the"}:
        name = m["name"]
        if name.split()[0].lower() == "the" and not name.lower().endswith("user"):
            return None
        return f"{name}'s {m['rel']}" if m["rel"] else name
    m = _CN_NAME.match(unicodedata.normalize("NFKC", sentence))
    if m:
        subject = m["subj"]
        if (
            subject in _CN_NOT_NAMES
            or subject.startswith(("他", "她", "它", "这", "那"))
            or (len(subject) > 1 and re.search(_CN_VERB_ANCHOR, subject[1:]))
        ):
            return None
        return subject
    return None


# --- values -----------------------------------------------------------------------------

_EN_VALUE_TAIL = re.compile(
    r"(?:\s+(?:now|currently|these\s+days|nowadays|any\s*more|a\s+lot|very\s+much|so\s+much|"
    r"too|as\s+well|either|again))+$"
)
# Circumstances that do not change *which* place or job it is: "lives in Paris with her
# husband since 2020" is still Paris. Not applied to likes: "tea with milk" is not "tea".
_EN_CIRCUMSTANCE_TAIL = re.compile(
    r"(?:\s+(?:since\s+.+|for\s+(?:\d+|many|several|a\s+few|the\s+past)\s+.+|with\s+.+|"
    r"in\s+\d{4}.*|last\s+\w+|this\s+\w+|on\s+\d{4}-\d{2}-\d{2}.*|(?:today|yesterday)\b.*))+$"
)
_CN_VALUE_TAIL = re.compile(r"(?:去了|去|了|啦|呢|的|居住|生活|工作|上班|住)+$")
_PLACE_LIKE = {"hometown", "residence", "employer", "occupation"}
# "lives in an apartment", "works at his own studio", "在一家公司工作" describe a place
# without naming it; two such descriptions cannot be told apart or against a real name.
_UNNAMED_PLACE = re.compile(r"^(?:an?|his|her|their|my|our|some|one)\s|^(?:一|某)[家个所间座]")
_PLACE_ATTRIBUTES = {"hometown", "residence", "employer"}
_CN_NOT_A_PLACE = re.compile(r"考虑|是否|寻找|找一|想|打算|准备|计划")
# Unnamed places kept (as `Fact.unnamed`) where a newer announced change can expire them:
# where someone works or lives changes; a hometown never does.
_UNNAMED_COMPARABLE = {"residence", "employer"}
_UNNAMED_DETERMINER = re.compile(
    r"^(?:(?:an?|his|her|their|my|our|some|one)\s+(?:own\s+)?|(?:一|某)[家个所间座])"
)
_STAMPED_DATE = re.compile(r"\s*[(（]\s*\d{4}-\d{2}(?:-\d{2})?\s*[)）]\s*$")


def _clean_text_value(value: str, place_like: bool = False) -> str | None:
    value = _STAMPED_DATE.sub("", value.strip(" .\"'")).strip(" .\"'")
    value = _EN_VALUE_TAIL.sub("", value)
    if place_like:
        value = _EN_CIRCUMSTANCE_TAIL.sub("", value)
        value = _EN_VALUE_TAIL.sub("", value)
    value = re.sub(r"^(?:the|a|an)\s+", "", value)
    value = _CN_VALUE_TAIL.sub("", value).lstrip("了").strip()
    if not value or len(value) > 60 or value.startswith("的"):
        return None
    return value


def _parse_birthday(value: str) -> str | None:
    """Month and day as "MM-DD": the year is often omitted, and only month/day are
    exclusive for a birthday ("May 3" and "3 May 1990" agree)."""
    value = value.strip()
    m = re.search(rf"([\d{CN_NUM}]+)月([\d{CN_NUM}]+)[日号]", value)
    if m:
        month, day = zh_number(m[1]), zh_number(m[2])
    elif m := re.search(r"\b\d{4}-(\d{1,2})-(\d{1,2})\b", value):
        month, day = int(m[1]), int(m[2])
    else:
        names = "|".join(sorted(MONTH_NUMBER, key=len, reverse=True))
        m1 = re.search(rf"\b({names})\.?\s+(\d{{1,2}})(?:st|nd|rd|th)?\b", value)
        m2 = re.search(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?({names})\b", value)
        if m1:
            month, day = MONTH_NUMBER[m1[1]], int(m1[2])
        elif m2:
            month, day = MONTH_NUMBER[m2[2]], int(m2[1])
        else:
            return None
    if month is None or day is None or not (1 <= month <= 12 and 1 <= day <= 31):
        return None
    return f"{month:02d}-{day:02d}"


def _parse_age(value: str) -> str | None:
    n = zh_number(value)
    return str(n) if n is not None and 0 < n < 130 else None


def _value(attribute: str, raw: str) -> str | None:
    raw = raw.strip()
    if attribute == "chinese_zodiac":
        return ANIMALS.get(raw)
    if attribute == "zodiac_sign":
        return SIGNS.get(raw.removesuffix("座"))
    if attribute == "birthday":
        return _parse_birthday(raw)
    if attribute == "age":
        return _parse_age(raw)
    if attribute == "relationship":
        return _RELATIONSHIP.get(re.sub(r"\s+", " ", raw))
    if attribute in _PLACE_ATTRIBUTES and _CN_NOT_A_PLACE.search(raw):
        return None  # "在想要不要换一份工作" is a thought, not a workplace
    if attribute in _PLACE_ATTRIBUTES and _UNNAMED_PLACE.match(raw):
        if attribute not in _UNNAMED_COMPARABLE:
            return None
        return _clean_text_value(_UNNAMED_DETERMINER.sub("", raw), place_like=True)
    if attribute == "likes":
        raw = re.split(r"\s+(?:because|since|when|so that|as long as)\s+|因为|因此|所以", raw)[0]
    return _clean_text_value(raw, place_like=attribute in _PLACE_LIKE)


# --- patterns ---------------------------------------------------------------------------

_NEGATIVE_VERB = re.compile(r"n[o']?t\b|never|no longer|dislike|hate|detest|stand|^不|讨厌|厌恶|受不了")
_TIMELESS_OCCUPATION_TAIL = re.compile(r"\s+(?:at|for|in|with|since)\s+.*$")
# "started at" / "joined" name an employer only when the object is an organisation: people
# also start at 9am and join gyms, clubs, groups and programs.
_ORG_NOUN = re.compile(
    r"\b(?:bank|company|startup|start-up|firm|agency|studio|hospital|clinic|lab|laboratory|"
    r"corporation|corp|inc|ltd|llc|store|shop|restaurant|cafe|café|bakery|factory|office|"
    r"nonprofit|non-profit|ngo|consultancy|publisher|newspaper|magazine|institute|hotel|"
    r"gallery|museum|library|warehouse|robotics|technologies|tech|labs|systems|airline|"
    r"insurer|retailer|manufacturer|fund)\b"
)
_NOT_EMPLOYER = re.compile(
    r"\b(?:group|club|gym|class|course|program|programme|team|church|band|league|community)\b"
)


# Order matters within an attribute: the first pattern that matches a clause wins.
_PATTERNS: tuple[Pattern, ...] = PATTERNS_EN + PATTERNS_ZH


# A literal every pattern of the attribute needs: most clauses mention none of these, and
# skipping ~60 lazily-anchored regexes for them keeps a full-store pass cheap.
_TRIGGERS: dict[str, re.Pattern[str]] = {
    attribute: re.compile(trigger)
    for attribute, trigger in {
        "chinese_zodiac": r"year of|zodiac|属|生肖|年",
        "zodiac_sign": rf"sign|{SIGNS_EN}|座",
        "birthday": r"birthday|born on|生日|月",
        "hometown": r"from|home\s*town|birthplace|place of birth|born|来自|出身|老家|家乡|故乡|籍贯|出生|生于|生在",
        "occupation": r"work|job|occupation|profession|trade|职业|工作|是一名|是一位|当上|成为",
        "age": r"\d|岁|age",
        "likes": r"lik|lov|enjoy|ador|prefer|hate|detest|stand|fan of|fond of|into|keen on|favou?rite|stopped|quit|gave up|"
        r"cut out|switched|喜欢|爱|讨厌|厌恶|受不了|偏好|不再|不[喝吃]|戒|改[喝吃]",
        "residence": r"live|living|reside|based|settled|moved|relocated|emigrated|住|居|生活在|搬|迁|移",
        "employer": r"work|employed|job|started|began|joined|resign|quit|left|工作|上班|任职|就职|打工|供职|受雇|入职|跳槽|辞|离职",
        "relationship": r"single|married|divorced|engaged|widowed|separated|dating|relationship|seeing|friend|"
        r"partner|broke up|单身|已婚|离异|丧偶|结婚|离婚|订婚|分手|朋友|对象|伴侣|恋爱",
    }.items()
}
# Base verb forms ("like", "love", "don't like") belong to "I"; after any other subject
# they are a preposition or a noun ("stuff like canned food", "unconditional love is").
_BASE_FORM_VERB = re.compile(
    r"^(?:(?:do\s*n[o']?t|did\s*n[o']?t|do\s+not)\s+.*|like|love|enjoy|adore|prefer|hate|detest)$"
)


def _match_clause(clause: str, context: str | None) -> list[Fact]:
    facts: list[Fact] = []
    seen: set[str] = set()
    clause_changed = bool(_CHANGE_EN.search(clause) or _CHANGE_CN.search(clause))
    triggered = {a for a, trigger in _TRIGGERS.items() if trigger.search(clause)}
    for pattern in _PATTERNS:
        if pattern.attribute in seen or pattern.attribute not in triggered:
            continue
        m = pattern.regex.match(clause)
        if not m:
            continue
        subject = _clean_subject(m["subj"], context)
        if subject is None:
            continue
        verb = (m.groupdict().get("verb") or m.groupdict().get("pverb") or "").strip()
        if subject != "i" and _BASE_FORM_VERB.match(re.sub(r"\s+", " ", verb)):
            continue
        raw = m.groupdict().get("val")
        if raw is None:
            if pattern.polarity != -1:
                continue
            value: str | None = ANY_VALUE  # "quit his job", 辞职了: whatever it was
        else:
            value = _value(pattern.attribute, raw)
        if pattern.attribute == "occupation" and value is not None:
            value = _TIMELESS_OCCUPATION_TAIL.sub("", value) or None
        if value is None:
            continue
        if pattern.org and not (_ORG_NOUN.search(value) and not _NOT_EMPLOYER.search(value)):
            continue
        unnamed = (
            raw is not None
            and pattern.attribute in _UNNAMED_COMPARABLE
            and bool(_UNNAMED_PLACE.match(raw.strip()))
        )
        groups = m.groupdict()
        polarity = pattern.polarity or (
            -1 if groups.get("neg") or (groups.get("verb") and _NEGATIVE_VERB.search(groups["verb"])) else 1
        )
        changed = pattern.changed or clause_changed
        seen.add(pattern.attribute)
        facts.append(Fact(subject, pattern.attribute, value, polarity, changed, unnamed))
        over = groups.get("over")
        if over and changed:
            # "now prefers A over B" denies B as of now — only with a change marker, since
            # preferring A over B does not stop anyone liking B.
            over_value = _clean_text_value(over)
            if over_value:
                facts.append(Fact(subject, "likes", over_value, -1, True))
    return facts


def extract_attributes(content: str) -> list[Fact]:
    """Every recognised fact of a memory, in reading order (a memory can hold several).

    A clause with no subject of its own ("…, and loves horses", "30岁") borrows the last
    person named in the memory; pronouns resolve the same way."""
    facts: list[Fact] = []
    sentences = split_sentences(unicodedata.normalize("NFKC", content))
    guessed = guess_subject(sentences[0]) if sentences else None
    context = _clean_subject(_clause_text(guessed), None) if guessed else None
    for clause in _clauses(content):
        clause = _LEADING_CONNECTOR.sub("", clause).strip()
        if not clause:
            continue
        found = _match_clause(clause, context)
        if not found and context is not None:
            sep = "" if has_cjk(context[-1] + clause[0]) else " "
            found = _match_clause(f"{context}{sep}{clause}", context)
        for fact in found:
            if fact not in facts:
                facts.append(fact)
        if found:
            context = found[0].subject
    return facts


def extract_attribute(content: str) -> tuple[str, str, str, int] | None:
    """The first recognised (subject, attribute, value, polarity) of a memory, or None.

    Cheap enough for a program pre-filter over the whole store (message 2 of round 1):
    memories that return None can never be part of a flagged pair."""
    facts = extract_attributes(content)
    if not facts:
        return None
    f = facts[0]
    return (f.subject, f.attribute, f.value, f.polarity)


def values_compatible(a: str, b: str) -> bool:
    """Same value, or one refines the other ("paris" / "paris with her husband",
    "四川" / "四川成都"), so it is not a different value."""
    if a == b:
        return True
    short, long = sorted((a, b), key=len)
    if long.startswith(short):
        rest = long[len(short) :]
        return rest.startswith(" ") or not re.match(r"[a-z0-9]", rest)
    return False


_LIKE_VERB = re.compile(r"^(?:(?:drinking|eating|having|drinks|eats|to\s+(?:drink|eat))\s+|[吃喝](?=.))")


def like_key(value: str) -> str:
    """The object of a preference without the verb: "喝咖啡" / "drinking coffee" → coffee."""
    return _LIKE_VERB.sub("", value).strip() or value


def _words(value: str) -> set[str] | None:
    return None if has_cjk(value) else set(value.split())


def _refines(a: str, b: str) -> bool:
    """One unnamed place description contains the other ("bank" / "big bank in pudong",
    "银行" / "一家大银行"): they may well be the same place."""
    if values_compatible(a, b):
        return True
    short, long = sorted((a, b), key=len)
    wa, wb = _words(short), _words(long)
    if wa is None or wb is None:
        return short in long
    return wa <= wb


def facts_conflict(older: Fact, newer: Fact) -> bool:
    """Whether `newer` makes `older` false (same subject and attribute assumed).

    An unnamed place ("works at a bank") is only ever beaten by a newer announced change
    (`newer.changed`) to a place that does not refine it; ANY_VALUE denials ("quit his
    job") beat every older asserted value and are never beaten themselves."""
    if older.attribute == "likes":
        return like_key(older.value) == like_key(newer.value) and older.polarity != newer.polarity
    if older.value == ANY_VALUE:
        return False
    if newer.value == ANY_VALUE:
        return older.polarity > 0 and newer.polarity < 0
    if older.unnamed or newer.unnamed:
        if not newer.changed:
            return False
        compatible = _refines(older.value, newer.value)
    else:
        compatible = values_compatible(older.value, newer.value)
    if older.polarity > 0 and newer.polarity > 0:
        return not compatible
    if older.polarity != newer.polarity:
        return compatible
    return False
