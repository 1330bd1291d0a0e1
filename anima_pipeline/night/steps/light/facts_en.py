"""English fact extraction: one sentence to (type, content, confidence), or None."""

from __future__ import annotations

import re
from collections.abc import Sequence

from anima_pipeline.night.steps.light.fact_context import CONFIDENCE, IMPRINT_FEELING, Context
from anima_pipeline.night.steps.light.records import Utterance
from anima_pipeline.night.steps.light.significance import narrative_significance
from anima_pipeline.text import lexicon as lx
from anima_pipeline.text.emotion import utterance_feeling
from anima_pipeline.text.rewrite_en import FIRST_PERSON_STRICT, is_vocative, strip_en, third_person, you_as_i
from anima_pipeline.text.vocab import IRREGULAR_PAST, STOPWORDS
from anima_pipeline.text.words import WORD, content_words, quoted_titles

_CUE_WEIGHTS = {"preference": 2.0, "world": 2.0}  # stable facts are worth keeping even when short
_MIN_EVENT = 1.8  # the same, for a short first-person event with a concrete object
_MIN_SCORE = 2.6  # informativeness a sentence needs to become a memory (see _en_score)
_MIN_ATTRIBUTED = 2.0  # the same, for a statement without first person (kept as reported speech)
_YOU_SHOULD_TRY = re.compile(
    r"\byou (?:can|should|could|might) (?:go |also )?(?:see|watch|read|try|check out|listen to)\b", re.I
)
_SUBJECTLESS_PREFIX = (
    (re.compile(r"^(?:going to|gonna)\b", re.I), "I'm "),
    (re.compile(r"^(?:planning|thinking of|hoping to|looking forward)\b", re.I), "I'm "),
    (
        re.compile(
            r"^been\b(?!\s+(?:a|an|the|so|such|quite|pretty|busy|crazy|wild|hectic|ages|forever)\b)", re.I
        ),
        "I've ",
    ),
)


def _en_type(sentence: str, significance: str | None, feeling: float) -> str:
    if significance in ("milestone", "turning_point") and feeling >= IMPRINT_FEELING:
        return "imprint"
    if lx.EN_PREFERENCE.search(sentence):
        return "preference"
    past = bool(lx.EN_PAST_EVENT.search(sentence))
    if lx.EN_OPINION.search(sentence) and not past:
        return "opinion"
    if lx.EN_WORLD.search(sentence) and not (past or lx.EN_PLAN.search(sentence)):
        return "world"
    return "experience"


def _en_score(sentence: str, speaker_names: Sequence[str], significance: str | None) -> float:
    cues = (
        (lx.EN_PREFERENCE, _CUE_WEIGHTS["preference"]),
        (lx.EN_WORLD, _CUE_WEIGHTS["world"]),
        (lx.EN_PLAN, 1.5),
        (lx.EN_PAST_EVENT, 1.5),
        (lx.EN_OPINION, 1.0),
    )
    score = max((weight for cue, weight in cues if cue.search(sentence)), default=0.0)
    words = content_words(sentence)
    score += 0.4 * min(len(words), 6)
    tokens = WORD.findall(sentence)
    proper = [w for w in tokens[1:] if w[0].isupper() and w != "I" and not is_vocative(w, speaker_names)]
    if tokens and _looks_like_name(tokens[0]) and not is_vocative(tokens[0], speaker_names):
        proper.append(tokens[0])
    score += 0.7 * min(len(proper), 2)
    if re.search(r"\d", sentence):
        score += 0.8
    if significance:
        score += 1.0
    if re.search(r"\byou(?:r|rs|'re|'ve)?\b", sentence, re.I):
        score -= 1.5 if len(words) < 5 else 0.5  # about the listener, unless rich in its own content
    if lx.EN_REACTION.search(sentence):
        score -= 2.0
    return score


def _looks_like_name(word: str) -> bool:
    """A capitalised sentence opener that is not a common word ('Tilly helps me' vs 'Seeing it')."""
    low = word.lower().split("'", 1)[0]
    return (
        word[:1].isupper()
        and len(low) > 2
        and low not in STOPWORDS | lx.SMALL_TALK_WORDS | lx.VAGUE_WORDS | lx.ADVERBS
        and not low.endswith(("ing", "ed", "ly"))
        and not lx.IMPERATIVE.match(low)
        and not lx.LEADING_FILLERS.match(low)
    )


_GERUND_NOUNS = frozenset(
    """something nothing anything everything morning evening spring thing king being wedding building meeting
    painting feeling clothing ceiling nothing during according including regarding ring swing string""".split()
)
_SUBJECT_WORD = re.compile(
    r"\b(?:I|we|he|she|they|it|my|our|his|her|their|this|that|there)\b|\b\w+ing\b|^[A-Z][a-z]+\s+[a-z]+s\b",
    re.I,
)


def _drop_subjectless_head(sentence: str) -> str:
    """'Almost four years; it pays okay' -> 'it pays okay': a verbless answer fragment before ';' goes."""
    head, sep, tail = sentence.partition("; ")
    if (
        sep
        and tail
        and not _FINITE.search(head)
        and not _SUBJECT_WORD.search(head)
        and _FINITE.search(tail)
        and len(WORD.findall(tail)) >= 3
    ):
        return tail[:1].upper() + tail[1:]
    return sentence


_CAPS_WORD = re.compile(r"\b[A-Z][A-Z']+\b")


def shouted(sentence: str) -> bool:
    """Typed in capitals ("ARIA I DID IT!!!"): two or more words in capitals, at least half of
    them; a few capitalised words (NASA, BBC) in a sentence are not shouting."""
    words = [w for w in WORD.findall(sentence) if w != "I" and not w.isdigit()]
    caps = [w for w in words if len(w) > 1 and w.isupper()]
    return len(caps) >= 2 and len(caps) * 2 >= len(words)


def unshout(content: str, ctx: Context) -> str:
    """A shouted sentence's memory in the case it would be written in: the words in capitals
    lowered, the chat's people's names capitalised ("ARIA" -> "Aria"), and the name that only
    addressed the other before the speaker's name set off as an address ("Aria, Lin Wei did
    it"). The words are the speaker's, all kept: only the case changes (the sentence was chosen
    and scored as written, and the day's de-duplication sees the same words: dropping the name
    made "Lin Wei did it" a near-twin of a fuller memory, one memory fewer)."""
    parts = {p.lower() for n in ctx.names for p in n.split()}
    content = _CAPS_WORD.sub(
        lambda m: m.group(0).capitalize() if m.group(0).lower() in parts else m.group(0).lower(), content
    )
    head = re.match(r"([A-Z][a-z]+),?\s+(?=" + re.escape(ctx.speaker) + r"\b)", content)
    if head and head.group(1) != ctx.speaker.split()[0] and is_vocative(head.group(1), ctx.names):
        content = f"{head.group(1)}, {content[head.end() :]}"
    return content[:1].upper() + content[1:]


def en_fact(sentence: str, utt: Utterance, ctx: Context) -> tuple[str, str, float] | None:
    """(type, content, confidence) for one English sentence, or None (a shouted one's memory in
    the case it would be written in: unshout)."""
    fact = _en_fact(sentence, utt, ctx)
    if fact is None or not shouted(sentence):
        return fact
    ftype, content, confidence = fact
    return ftype, unshout(content, ctx), confidence


def _en_fact(sentence: str, utt: Utterance, ctx: Context) -> tuple[str, str, float] | None:
    if sentence.endswith("?"):
        return None
    original = strip_en(sentence, ctx.names)
    if len(WORD.findall(original)) < 3:
        return None
    if lx.EN_PLEASANTRY.match(original) or lx.EN_META.search(original):
        return None  # greetings, farewells, apologies and remarks about the chat itself
    original = _drop_subjectless_head(original)
    gerund = re.match(r"([A-Z][a-z]{2,}ing)\s+(?=[a-z])", original)
    if (
        gerund
        and gerund.group(1).lower() not in _GERUND_NOUNS
        and not _FINITE.search(re.split(r"[;,]", original[gerund.end() :], maxsplit=1)[0])
    ):
        original = (
            "I'm " + original[:1].lower() + original[1:]
        )  # "Finishing up a draft" -> "I'm finishing ..."
    for pattern, prefix in _SUBJECTLESS_PREFIX:
        if pattern.match(original):
            original = prefix + original[0].lower() + original[1:]
            break
    else:
        if lx.EN_SUBJECTLESS.match(original) and not FIRST_PERSON_STRICT.match(original):
            original = "I " + original[0].lower() + original[1:]
    titles = quoted_titles(original)
    if titles and (lx.EN_RECOMMENDATION.search(original) or _YOU_SHOULD_TRY.search(original)):
        return (
            "experience",
            f"{ctx.speaker} recommended {', '.join(chr(34) + t + chr(34) for t in titles)} to {ctx.other}",
            0.7,
        )
    intro = re.search(r"\bmy name(?:'s| is) ([A-Z][\w-]+(?: [A-Z][\w-]+)*)", original)
    if intro and ctx.speaker.startswith(intro.group(1)):
        return "world", f"{ctx.label} name is {ctx.speaker}", 0.9
    you_mode = False
    if not FIRST_PERSON_STRICT.search(original):
        if (
            utt.role != "assistant"
            or not lx.EN_YOU_FACT.match(original)
            or lx.EN_YOU_NOT_FACT.search(original)
        ):
            return _attributed(original, ctx)
        you_mode = True
    elif lx.EN_SERVICE.search(original) or re.match(r"let's\b", original, re.I):
        return None  # an AI's offer of help, or a proposal ("Let's make it count"), states no fact
    significance = narrative_significance(original)
    score = _en_score(you_as_i(original) if you_mode else original, ctx.names, significance)
    if score < _MIN_SCORE and not (not you_mode and score >= _MIN_EVENT and _concrete_event(original)):
        return None
    ftype = _en_type(you_as_i(original) if you_mode else original, significance, utterance_feeling(utt.text))
    if ftype == "opinion" and utt.role == "assistant" and not you_mode and not ctx.narrator:
        return None  # an AI's view of the user's news ("a brave move, I think") is no memory
    confidence = CONFIDENCE[ftype]
    if you_mode:
        confidence -= 0.1
    if re.search(r"\b(?:maybe|might|probably|perhaps|thinking (?:about|of))\b", original, re.I):
        confidence -= 0.1
    return ftype, third_person(original, ctx.speaker, ctx.other), round(confidence, 2)


_HABIT = re.compile(
    r"\b(?:once|twice|\w+ times) (?:a|per|every) (?:day|week|month|year)\b|\bevery (?:day|week|weekend|month|"
    r"morning|evening|night|year|summer|winter)\b",
    re.I,
)


def _concrete_event(sentence: str) -> bool:
    """A short first-person event or habit with a concrete object ("We made pizza!", "I see them twice a week").

    Such sentences score low (few words) yet are exactly what is asked about later.
    """
    if not (lx.EN_PAST_EVENT.search(sentence) or _HABIT.search(sentence)):
        return False
    if _EVENT_VAGUE.search(sentence) or re.match(
        r"(?:because|cause|since|if|when|while|though|although)\b", sentence, re.I
    ):
        return False  # a vague event, or a subordinate clause answering a question, states nothing alone
    return any(
        len(w) > 3 and w.lower() not in lx.VAGUE_WORDS and not re.search(r"(?:ed|ing|ly)$", w.lower())
        for w in content_words(sentence.split(";")[0])
    )


_EVENT_VAGUE = re.compile(
    r"\b(?:got it|get it|(?:been|keeping|kept) busy|since (?:we|I) (?:last )?(?:talked|chatted|spoke)|"
    r"something|anything|nothing|a few days|made it|did it|finished it)\b",
    re.I,
)


def _attributed(sentence: str, ctx: Context) -> tuple[str, str, float] | None:
    """A specific third-person statement, kept as reported speech ("Ruth said the bakery is busy again").

    In conversation most such sentences are still about the speaker's own world
    (their shop, their pet, their book); reported speech records that honestly
    without pretending to know whose it is.
    """
    if ctx.role == "assistant" and not (ctx.narrator or lx.EN_NARRATED.search(sentence)):
        return None  # an AI's own remarks, forecasts and pleasantries are not memories
    if re.search(
        r"\byou(?:r|rs|rself|'re|'ve|'ll)?\b|^(?:let's|here's|here is|check|look|thank)", sentence, re.I
    ):
        return None
    if lx.EN_REACTION.search(sentence) or _en_score(sentence, ctx.names, None) < _MIN_ATTRIBUTED:
        return None
    specific = re.search(r"\d|\"", sentence) or any(
        w[0].isupper() for w in WORD.findall(sentence)[1:] if w != "I"
    )
    if ctx.role == "assistant" and not specific and _en_score(sentence, ctx.names, None) < _MIN_SCORE:
        return None  # the assistant's general remark ("reading can change your mood") is not a memory
    if lx.IMPERATIVE.match(sentence):
        return None  # advice to the other person, not a fact
    if _is_fragment(sentence):
        return None  # "Usually alone along the river." answers a question; alone it states nothing
    sentence = _kin_of(sentence, ctx.speaker)
    ftype = "opinion" if re.search(r"\b(?:should|shouldn't|best|worst)\b", sentence, re.I) else "world"
    if re.match(re.escape(ctx.speaker) + r"'s\b", sentence):
        return ftype, sentence, 0.5  # "Dad's tests are fine" -> "Lin Wei's dad's tests are fine"
    first = sentence.split(" ", 1)[0]
    if first != "I" and not first.isupper() and not _proper_opener(first, ctx):
        sentence = sentence[:1].lower() + sentence[1:]
    return ftype, f"{ctx.speaker} said {sentence}", 0.5


_FINITE = re.compile(
    r"\b(?:is|are|was|were|am|be|been|has|have|had|do|does|did|will|would|can|could|should|shall|may|"
    r"might|must|got|get|gets|went|goes|go|made|make|makes|came|comes|took|takes|said|says|told|felt|feels|"
    r"knew|knows|thinks|thought|loves|likes|wants|needs|works|lives|calls|call|keep|keeps|kept|became|left|"
    r"ran|runs|saw|sees|found|put|let|gave|gives|"
    + "|".join(sorted(IRREGULAR_PAST))
    + r")\b|'(?:s|re|ve|ll|d|m)\b|n't\b|\b[a-z]{3,}ed\b|\b[a-z]{2,}(?:es|ts|ks|ps|ns|ls|rs|ys|gs|ds|ms)\b(?=\s+(?:a|an|the|to|in|on|at|with|for|it|him|her|them|me|us|out|up|off|his|their|my|our|your|that|this)\b)",
    re.I,
)
_FRAGMENT_OPENER = re.compile(
    r"^(?:like|usually|mostly|normally|just|only|almost|maybe|probably|perhaps|with|without|because|cause|"
    r"and|but|or|except|unless|hopefully|definitely|mainly|especially|not|nothing|nope)\b(?!,?\s+(?:I|we|he|she|"
    r"they|it|my|our|his|her|their)\b)",
    re.I,
)


def _is_fragment(sentence: str) -> bool:
    """No finite verb, or an opener that makes it the tail of an answer ("Like life's too short ...")."""
    if lx.EN_META.search(sentence):
        return True
    if _FRAGMENT_OPENER.match(sentence):
        return True
    return not _FINITE.search(sentence)


_KIN_NAMES = re.compile(r"\b(Dad|Mom|Mum|Mommy|Daddy|Mama|Papa|Grandma|Grandpa|Granny|Nana)\b(?!\s+[A-Z])")


def _kin_of(sentence: str, speaker: str) -> str:
    """'Dad' used as a name is the speaker's dad: the first mention says whose."""
    m = _KIN_NAMES.search(sentence)
    if not m:
        return sentence
    kin = m.group(1).lower()
    return (
        sentence[: m.start()]
        + f"{speaker}'s {kin}"
        + _KIN_NAMES.sub(lambda k: k.group(1).lower(), sentence[m.end() :])
    )


def _proper_opener(word: str, ctx: Context) -> bool:
    """Is a capitalised sentence opener a name ('Mei', 'Shanghai') rather than a common word ('Real')?"""
    low = word.lower().split("'", 1)[0]
    if low in ctx.lower_words or low in STOPWORDS | lx.SMALL_TALK_WORDS | lx.VAGUE_WORDS | lx.ADVERBS:
        return False
    return _looks_like_name(word) or any(n and n.split()[0] == word for n in ctx.names)
