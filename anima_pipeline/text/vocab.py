"""Shared English vocabularies: months, weekdays, number words, irregular verbs, stop words.

Defined once here and used by the offline heuristics and the benchmarks' answer judge.
Lists that serve one purpose only (a similarity key's short stop list, the words that are
never a name) stay with the code that needs them, built from these where they overlap.
"""

from __future__ import annotations

MONTHS: tuple[str, ...] = tuple(
    "january february march april may june july august september october november december".split()
)
MONTH_NAMES: tuple[str, ...] = tuple(m.capitalize() for m in MONTHS)  # for writing dates out
# Month names and their abbreviations -> 1..12, each full name before its abbreviations
# (regex alternations built from it in this order prefer the longest spelling).
MONTH_NUMBER: dict[str, int] = {}
for _i, _m in enumerate(MONTHS, 1):
    MONTH_NUMBER[_m] = _i
    for _abbr in {"september": ("sept", "sep")}.get(_m, (_m[:3],)):
        MONTH_NUMBER.setdefault(_abbr, _i)
WEEKDAYS: tuple[str, ...] = tuple("monday tuesday wednesday thursday friday saturday sunday".split())

NUMBER_WORDS: dict[str, int] = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
        "sixteen seventeen eighteen nineteen twenty".split()
    )
}

# Irregular past tenses and participles -> base form.
PAST_TO_BASE: dict[str, str] = dict(
    pair.split(":")
    for pair in """went:go got:get had:have was:be were:be did:do made:make took:take saw:see met:meet
    won:win lost:lose bought:buy began:begin ran:run wrote:write read:read gave:give found:find
    left:leave came:come became:become built:build drew:draw spent:spend sold:sell taught:teach
    told:tell heard:hear felt:feel flew:fly drove:drive rode:ride swam:swim sang:sing caught:catch
    kept:keep brought:bring thought:think fell:fall broke:break chose:choose held:hold lent:lend
    paid:pay sent:send sat:sit stood:stand wore:wear grew:grow knew:know ate:eat drank:drink
    fought:fight forgot:forget hid:hide hurt:hurt led:lead let:let meant:mean put:put quit:quit
    rose:rise said:say set:set shot:shoot shut:shut slept:sleep spoke:speak stuck:stick
    struck:strike swore:swear threw:throw understood:understand woke:wake been:be gone:go done:do
    seen:see known:know taken:take given:give written:write eaten:eat driven:drive ridden:ride
    chosen:choose spoken:speak broken:break forgotten:forget gotten:get begun:begin""".split()
)
# Past forms that mark a past event without an -ed of their own, plus four regular ones that
# the cues want to see even where the -ed rule is not applied.
IRREGULAR_PAST: frozenset[str] = frozenset(PAST_TO_BASE) | {"started", "finished", "visited", "joined"}

STOPWORDS: frozenset[str] = frozenset(
    """a an the and or but if of to in on at for with by from as into onto about over after before
    is are was were be been being am do does did doing have has had having will would can could
    should shall may might must it its it's this that these those there here then than so such very
    too also just really quite pretty i me my mine myself we us our ours you your yours he him his
    she her hers they them their theirs what which who whom whose when where why how all any some
    not no nor only own same more most other each both few up down out off again further once
    i'm i've i'll i'd we're we've you're you've don't didn't can't won't it's that's there's
    one thing things stuff lot lots way gonna going get got since until while during through without
    within upon among across around against along behind beyond toward towards via yet else ever""".split()
)
