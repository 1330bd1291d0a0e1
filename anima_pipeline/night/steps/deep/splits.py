"""Round 2 of deep sleep, offline: `split_parts`, which entries pack several independent
facts and the self-contained parts; `is_split_candidate`, the cheap pre-filter."""

from __future__ import annotations

import re

from anima_pipeline.night.steps.deep.memory_view import MemoryView
from anima_pipeline.text.attributes import guess_subject, resolve_pronoun
from anima_pipeline.text.sentences import is_long, is_tiny, split_sentences
from anima_pipeline.text.similarity import has_cjk, normalize_content

# A later sentence that leans on an earlier one cannot stand alone as a memory.
_DEPENDENT_START_EN = re.compile(
    r"^(?:it|its|this|that|these|those|such|which|then|however|but|so|because|therefore|thus|"
    r"hence|they|them|their|afterwards|meanwhile|as\s+a\s+result|in\s+that\s+case)\b",
    re.IGNORECASE,
)
_DEPENDENT_START_CN = re.compile(
    r"^(?:它|这|那|此|该|其|但|不过|然而|所以|因此|因为|于是|然后|而且|并且|他们|她们|后来|同时)"
)
# Anaphora inside a later sentence ("She found it inspiring"): also dependent. Errs on
# the side of not splitting, since a wrong split produces two broken memories.
# "this summer" / 这周 point at the time of the memory, not back at a sentence.
_TIME_WORDS_EN = r"year|month|week|weekend|summer|winter|spring|fall|autumn|morning|evening|time"
_ANAPHORA_EN = re.compile(
    rf"\b(?:it|them|there|the\s+same|these|those|(?:this|that)(?!\s+(?:{_TIME_WORDS_EN})\b))\b",
    re.IGNORECASE,
)
_ANAPHORA_CN = re.compile(r"它|这(?!周|个月|次|学期|段时间|天|年)|那(?!么)|此|其中|该")
_PRONOUN_EN = re.compile(r"^(?P<p>she|he)\b", re.IGNORECASE)
_POSSESSIVE_EN = re.compile(r"^(?P<p>her|his)\s+", re.IGNORECASE)
_PRONOUN_CN = re.compile(r"^(?P<p>[她他])(?![们])")
_NO_SUBJECT_EN = re.compile(r"^also\s+")
_NO_SUBJECT_CN = re.compile(r"^[也还]")
_GENDER = {"she": "f", "her": "f", "he": "m", "his": "m", "她": "f", "他": "m"}
_GENDER.update(
    dict.fromkeys(("sister", "daughter", "mother", "mom", "mum", "wife", "girlfriend", "aunt", "niece"), "f")
)
_GENDER.update(
    dict.fromkeys(("brother", "son", "father", "dad", "husband", "boyfriend", "uncle", "nephew"), "m")
)


def _with_subject(sentence: str, subject: str | None) -> str | None:
    """The sentence with a leading pronoun (or a missing subject) replaced by the person
    it refers to; None when it needs a subject we do not know."""
    if m := _PRONOUN_EN.match(sentence) or _PRONOUN_CN.match(sentence):
        if subject is None or sentence[m.end() : m.end() + 1] in ("'", "\u2019"):
            return None  # "She's" is "she is" or "she has": not worth guessing
        return resolve_pronoun(_GENDER[m["p"].lower()], subject) + sentence[m.end() :]
    if m := _POSSESSIVE_EN.match(sentence):
        if subject is None:
            return None
        return f"{resolve_pronoun(_GENDER[m['p'].lower()], subject)}'s " + sentence[m.end() :]
    if _NO_SUBJECT_EN.match(sentence):
        return None if subject is None else f"{subject} {sentence}"
    if _NO_SUBJECT_CN.match(sentence):
        return None if subject is None else f"{subject}{sentence}"
    return sentence


def _finish(sentence: str) -> str:
    sentence = sentence.strip()
    if sentence[:1].islower() and sentence[:1].isascii():
        sentence = sentence[0].upper() + sentence[1:]
    cjk_tail = has_cjk(sentence[-1:]) or sentence.endswith(("；", "，"))
    sentence = sentence.rstrip(";；,，")
    if sentence.endswith((".", "!", "?", "。", "！", "？", '"', "”", "」")):
        return sentence
    return sentence + ("。" if cjk_tail else ".")


# Clause-level splits: "X is a nurse in Chengdu, she has two kids, and she loves hiking".
_VERB_EN = (
    r"(?:(?:also|still|now|really|actually|just|recently|often|usually|always|never|even)\s+)*"
    r"(?:is|was|are|were|has|had|does|did|can|could|will|would|may|might|must|"
    r"went|got|made|took|came|saw|met|left|found|felt|bought|taught|won|ran|gave|began|became|"
    r"built|wrote|drove|flew|kept|lost|paid|sold|spent|[a-z]{2,}(?:s|ed))\b"
)
_CLAUSE_CUT_EN = re.compile(r",\s+(?:and\s+)?(?=(?:she|he)\s|[A-Z])")
_CLAUSE_CUT_CN = re.compile(r"[，,]\s*(?:而且|并且)?(?=[她他](?!们))")
# Reported speech or another person in the first clause: a later "she" may not be the subject.
_REPORTED = re.compile(
    r"\b(?:said|says|told|tells|thinks?|thought|mentioned|believes?|according|asked|hopes?|wants?)\b|说|觉得|认为|表示|希望|告诉"
)
_PEOPLE_EN = re.compile(
    r"\b(?:son|daughter|brother|sister|mother|mom|mum|father|dad|husband|wife|boyfriend|girlfriend|"
    r"partner|friend|friends|kid|kids|child|children|boss|colleague|coworker|manager|teacher|"
    r"grandma|grandpa|grandmother|grandfather|aunt|uncle|cousin|niece|nephew|baby|neighbou?r|"
    r"him|her|his|she|he|they|them|their|who)\b"
)
_PEOPLE_CN = re.compile(
    r"儿子|女儿|哥哥|弟弟|姐姐|妹妹|爸|妈|父亲|母亲|丈夫|妻子|老公|老婆|男朋友|女朋友|朋友|孩子|同事|"
    r"老板|领导|经理|老师|爷爷|奶奶|外公|外婆|叔叔|阿姨|舅舅|姑姑|表|堂|邻居|他|她|谁"
)
_PLACE_PREP = re.compile(r"\b(?:in|at|from|to|near|of|on)\s+$")
# A piece that itself holds a subordinate clause, or a first piece that only introduces
# the next one, does not stand alone.
_INNER_CLAUSE = re.compile(
    r"[,，;；]|^(?:if|when|while|because|since|although|though|as|after|before|through|once|unless)\b|"
    r"\b(?:but|because|although|though|so|whereas|unless)\b|但|因为|所以|如果|虽然|不过"
)
_INTRODUCTORY = re.compile(r"\b(?:say|said|think|know|guess|admit|believe|bet|hope|feel|mean|agree|tell)$")
# Definite descriptions that point back at the previous clause ("the process").
_BACK_REFERENCE = re.compile(r"\bthe\s+(?:process|experience|idea|thing|whole\s+thing|result|same)\b")


def _appositive(sentence: str, subject: str) -> str | None:
    """The name right after a relation subject: Mei in "Lin Wei's sister Mei is …"."""
    if "'s " not in subject:
        return None
    m = re.match(rf"\s*{re.escape(subject)}\s+(?P<name>[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?)\b", sentence)
    return m["name"] if m else None


def _first_clause_unambiguous(clause: str, subject: str, name: str | None) -> bool:
    """No other person a later pronoun could point at: no relation noun, pronoun or
    capitalised word (but places after in/at/from …) besides the subject itself."""
    rest = clause.strip()
    lead = subject + (f" {name}" if name else "")
    if rest.startswith(lead):
        rest = rest[len(lead) :]
    if has_cjk(clause):
        return not _PEOPLE_CN.search(rest[1:] if rest.startswith("的") else rest)
    if _PEOPLE_EN.search(rest.lower()):
        return False
    for m in re.finditer(r"\b[A-Z][\w-]*", rest):
        if not _PLACE_PREP.search(rest[: m.start()]):
            return False
    return True


def _clause_parts(sentence: str) -> list[str] | None:
    """The clauses of one sentence when each has its own subject and verb and a pronoun in
    them can only mean the sentence's subject; None to keep the sentence whole."""
    cjk = has_cjk(sentence)
    cut = _CLAUSE_CUT_CN if cjk else _CLAUSE_CUT_EN
    pieces = [p.strip() for p in cut.split(sentence)]
    if len(pieces) < 2 or _REPORTED.search(sentence):
        return None
    if any(_INNER_CLAUSE.search(p) for p in pieces) or _INTRODUCTORY.search(pieces[0]):
        return None  # "Ivo is tired, but because of …, Ivo …" / "Ruth has to admit, …"
    subject = guess_subject(pieces[0])
    if subject is None:
        return None
    name = None if cjk else _appositive(pieces[0], subject)
    if not _first_clause_unambiguous(pieces[0], subject, name):
        return None
    if not cjk:
        head = pieces[0][len(subject) :].strip()
        if name:
            head = head[len(name) :].strip()
        if not re.match(_VERB_EN, head):
            return None
    known = _GENDER.get(_relation_word(subject)) if re.search(r"'s |的", subject) else None
    parts = [pieces[0]]
    for piece in pieces[1:]:
        if _ANAPHORA_EN.search(piece) or _ANAPHORA_CN.search(piece) or "'" in piece.split(" ")[0]:
            return None
        if _BACK_REFERENCE.search(piece.lower()):
            return None
        m = _PRONOUN_CN.match(piece) if cjk else _PRONOUN_EN.match(piece)
        if m:
            gender = _GENDER[m["p"].lower()]
            if known is not None and gender != known:
                return None  # "X's sister …, he …": someone else
            rest = piece[m.end() :].strip()
            if not cjk and not re.match(_VERB_EN, rest):
                return None
            piece = f"{name or subject}{rest}" if cjk else f"{name or subject} {rest}"
        elif cjk:
            return None
        else:
            other = guess_subject(piece)
            if other is None or not re.match(_VERB_EN, piece[len(other) :].strip()):
                return None
        if is_tiny(piece):
            return None
        parts.append(piece)
    return parts


def _relation_word(subject: str) -> str:
    return subject.rsplit(" ", 1)[-1].lower()


def split_parts(memory: MemoryView) -> list[str] | None:
    """Self-contained sentences when a memory holds several independent facts, else None.

    Boundaries: . ! ? 。！？； ; and "and also". A part that opens with she/he/her/his
    (她/他), or with no subject ("also …", "也…"), gets the person named at the start of
    the memory ("She also …" → "Ruth also …"). None when there is one sentence only,
    when a later sentence depends on an earlier one (opens with It/This/That/But/它/这/但…,
    or refers back with "it"/"there"/这/那), when a pronoun cannot be resolved, or when a
    part would be a fragment (< 12 characters, < 6 for CJK text).
    """
    sentences = []
    for sentence in split_sentences(memory.content):
        sentences += _clause_parts(sentence) or [sentence]
    if len(sentences) < 2:
        return None
    subject = guess_subject(sentences[0])
    if subject is not None and normalize_content(sentences[0]) == normalize_content(subject):
        subject = None  # "Oliver's hilarious.": the 's was "is", not a relation
    if subject is not None and (
        _REPORTED.search(sentences[0]) or not _first_clause_unambiguous(sentences[0], subject, None)
    ):
        subject = None  # "Ruth said it was Ivo, …; his voice …": whose voice?
    parts: list[str] = []
    for i, sentence in enumerate(sentences):
        if is_tiny(sentence):
            return None
        if i > 0:
            if _DEPENDENT_START_EN.match(sentence) or _DEPENDENT_START_CN.match(sentence):
                return None
            if _ANAPHORA_EN.search(sentence) or _ANAPHORA_CN.search(sentence):
                return None
        rewritten = _with_subject(sentence, subject)
        if rewritten is None:
            return None
        parts.append(_finish(rewritten))
    if len({normalize_content(p) for p in parts}) < 2:
        return None  # the same fact twice is a merge, not a split
    return parts


def is_split_candidate(content: str) -> bool:
    """Cheap pre-filter for round 2 (incremental mode splits only candidates): more than
    one sentence, or long enough to probably pack several facts."""
    return is_long(content) or len(split_sentences(content)) > 1
