"""Fact extraction for one day: each message's sentences to semantic-memory candidates."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace
from datetime import date

from anima_pipeline.night.steps.light.dedup import dedup_against
from anima_pipeline.night.steps.light.fact_context import Context
from anima_pipeline.night.steps.light.facts_en import en_fact
from anima_pipeline.night.steps.light.facts_zh import zh_fact
from anima_pipeline.night.steps.light.records import FactCandidate, Utterance
from anima_pipeline.night.steps.light.small_talk import is_informative, is_small_talk
from anima_pipeline.text import lexicon as lx
from anima_pipeline.text.dates import resolve_relative_dates
from anima_pipeline.text.rewrite_en import FIRST_PERSON, strip_en, third_person
from anima_pipeline.text.sentences import split_sentences
from anima_pipeline.text.words import WORD, clean_text, is_chinese, normalize_key

_ISO_DATE = re.compile(r"(?<!\d)(?:19|20)\d{2}(?!\d)")  # any year, so also any ISO date
_MAX_CHARS = 240  # a memory is one fact, not a paragraph
# A message that yields more facts than this is a pasted document, not talk: the first ones are
# kept and the rest of the message is not read, so one huge message costs no more than this.
MAX_FACTS_PER_MESSAGE = 100
_ROLE_LABELS = {  # (language, role) -> (default name, label used when the name itself is the fact)
    ("en", "user"): ("the user", "The user's"),
    ("en", "assistant"): ("the assistant", "The assistant's"),
    ("zh", "user"): ("用户", "用户"),
    ("zh", "assistant"): ("助手", "助手"),
}


def _participants(utterances: Sequence[Utterance]) -> dict[str, dict[str, str]]:
    """Per conversation, the first speaker name seen for each role."""
    out: dict[str, dict[str, str]] = {}
    for u in utterances:
        if u.speaker:
            out.setdefault(u.conversation_id, {}).setdefault(u.role, u.speaker)
    return out


def _finish(content: str, zh: bool) -> str:
    content = re.sub(r"\s{2,}", " ", content).strip(" ,;-—")
    if len(content) > _MAX_CHARS:
        cut = max(content.rfind(p, 0, _MAX_CHARS) for p in (", ", "; ", " - ", "，", "；"))
        content = content[: cut if cut > _MAX_CHARS // 2 else _MAX_CHARS].rstrip(" ,;，；")
    content = content[:1].upper() + content[1:]
    if zh:
        return content if content.endswith(("。", "）")) else content.rstrip("!！.") + "。"
    return content if content.endswith((".", ")", '"')) else content.rstrip("!") + "."


def _stamp(content: str, ftype: str, said_on: date, zh: bool) -> str:
    """Give experiences a date when the sentence carried none: a memory is read long after."""
    if ftype not in ("experience", "imprint") or _ISO_DATE.search(content):
        return content
    body = content.rstrip("。.!！")
    return f"{body}（{said_on.isoformat()}）。" if zh else f"{body} ({said_on.isoformat()})."


def _pet_name(sentence: str, previous: str, ctx: Context) -> str | None:
    """'I got a puppy. Her name's Coco, she's two.' -> "<speaker>'s puppy is named Coco; she is two"."""
    m = lx.NAME_CLAUSE.match(sentence)
    noun = lx.PET_OR_PERSON_NOUN.search(previous)
    if not m or not noun or not FIRST_PERSON.search(previous):
        return None
    named = f"{ctx.speaker}'s {noun.group(1)} is named {m.group(1)}"
    rest = sentence[m.end() :].strip(" ,;.!-")
    if rest.lower().startswith(("and ", "but ")):
        rest = rest.split(" ", 1)[1]
    if len(WORD.findall(rest)) < 2:
        return named
    rest = re.sub(r"\b([Ss]he|[Hh]e|[Ii]t)'s\b(?!\s+(?:been|got|gotten|had)\b)", r"\1 is", rest)
    return f"{named}; {third_person(rest, ctx.speaker, ctx.other, mentioned=True)}"


def _continues(sentence: str, following: str) -> bool:
    """Is `following` a short elaboration of a short, vague `sentence`?"""
    return (
        bool(following)
        and not following.rstrip().endswith("?")
        and not sentence.rstrip().endswith("?")
        and bool(lx.PRONOUN_CONTINUATION.match(following))
        and len(WORD.findall(sentence)) <= 10
    )


def _facts_of(utt: Utterance, ctx: Context) -> list[FactCandidate]:
    text = clean_text(utt.text)
    zh = is_chinese(text)
    out: list[FactCandidate] = []
    previous, previous_kept = "", False
    raw_sentences = split_sentences(text, message=True)
    resolved: dict[int, str] = {}

    def sentence_at(i: int) -> str:  # resolved on demand: reading stops at MAX_FACTS_PER_MESSAGE
        if i not in resolved:
            resolved[i] = resolve_relative_dates(raw_sentences[i], ctx.said_on)
        return resolved[i]

    skip = False
    for i in range(len(raw_sentences)):
        if len(out) >= MAX_FACTS_PER_MESSAGE:
            break
        sentence = sentence_at(i)
        if skip:
            skip = False
            continue
        named = None if zh else _pet_name(strip_en(sentence, ctx.names), previous, ctx)
        fact = (
            ("world", named, 0.85)
            if named
            else zh_fact(sentence, utt, ctx)
            if zh
            else en_fact(sentence, utt, ctx)
        )
        following = sentence_at(i + 1) if i + 1 < len(raw_sentences) else ""
        if (
            fact is None
            and not zh
            and _continues(sentence, following)
            and not lx.NAME_CLAUSE.match(strip_en(following, ctx.names))
        ):
            # "I like this podcast. It has great guests." is one fact, said in two sentences.
            fact = en_fact(sentence.rstrip(".! ") + "; " + following[:1].lower() + following[1:], utt, ctx)
            skip = fact is not None
        if fact is None and not zh:
            if previous_kept and lx.PRONOUN_CONTINUATION.match(sentence) and is_informative(sentence):
                tail = third_person(strip_en(sentence, ctx.names), ctx.speaker, ctx.other, mentioned=True)
                last = out[-1]
                merged = last.content.rstrip(".") + "; " + tail[:1].lower() + tail[1:]
                if len(merged) <= _MAX_CHARS and not tail.endswith("?"):
                    content = _finish(merged, zh)
                    out[-1] = replace(last, content=content, key=normalize_key(content))
        if fact is not None:
            ftype, content, confidence = fact
            content = _finish(_stamp(_finish(content, zh), ftype, ctx.said_on, zh), zh)
            out.append(
                FactCandidate(
                    ftype, content, utt.created_at, utt.conversation_id, confidence, normalize_key(content)
                )
            )
        previous, previous_kept = sentence, fact is not None
    return out


def extract_facts(utterances: list[Utterance]) -> list[FactCandidate]:
    """Semantic-stage candidates for one day: first-person facts, preferences, plans and events.

    Each candidate names its person (first person -> speaker, and for the assistant
    role second person -> the user), carries resolved absolute dates and stays in
    the language it was said in. A small-talk day yields nothing; twins within the
    day (same key) are kept once.
    """
    utterances = sorted(utterances, key=lambda u: u.created_at)
    if not utterances or is_small_talk(utterances):
        return []
    utterances = [u for u in utterances if u.role in ("user", "assistant")]  # tool / system output is no talk
    people = _participants(utterances)
    lower_words = frozenset(w for u in utterances for w in re.findall(r"\b[a-z][a-z'-]+\b", u.text))
    narrators = {
        (u.conversation_id, u.role)
        for u in utterances
        if u.role == "user" or lx.EN_SELF_NARRATION.search(clean_text(u.text))
    }
    seen: set[str] = set()
    facts: list[FactCandidate] = []
    for utt in utterances:
        roles = people.get(utt.conversation_id, {})
        lang = "zh" if is_chinese(utt.text) else "en"
        other_role = "assistant" if utt.role == "user" else "user"
        default, label = _ROLE_LABELS.get((lang, utt.role), _ROLE_LABELS[(lang, "user")])
        speaker = utt.speaker or default
        other = roles.get(other_role) or _ROLE_LABELS[(lang, other_role)][0]
        ctx = Context(
            speaker,
            other,
            label,
            utt.role,
            tuple(roles.values()),
            utt.created_at.date(),
            lower_words,
            (utt.conversation_id, utt.role) in narrators,
        )
        for fact in _facts_of(utt, ctx):
            if fact.key and fact.key not in seen:
                seen.add(fact.key)
                facts.append(fact)
    # Near-twins of the same day (the assistant echoing the user) collapse into the fuller one.
    return [d.candidate for d in dedup_against(facts, []) if d.action == "create"]
