"""Word lists and cue patterns shared by the offline light-sleep heuristics.

They live apart from the extraction logic so that tuning what counts as a
preference, a plan or an emotion is a data change, not a code change. Lists are
deliberately generic English and Chinese conversational vocabulary; nothing here
is drawn from an evaluation data set.
"""

from __future__ import annotations

import re

from anima_pipeline.text.vocab import IRREGULAR_PAST

# --- sentence cleanup ---------------------------------------------------------

# Openers stripped from the start of a sentence: they carry no fact and only inflate memory size.
# Interjections and set phrases go whatever follows; evaluative words ("Great!", "Crazy,") only
# when punctuation marks them as an exclamation, so "Crazy ride so far" keeps its subject.
_OPENERS = (
    r"you (?:won't|will not|wouldn't) believe (?:it|this|what happened)|believe it or not|fun fact|"
    r"on another note|besides that|other than that|in other news|funny enough|(?:crazy|funny|cool) thing happened|"
    r"(?:a lot|so much|lots)(?:'s| has) (?:happened|been going on)(?: since (?:we|I) last (?:talked|chatted|spoke))?|"
    r"long time no (?:talk|see|chat)|it's been (?:a while|ages)|since (?:we|I) last (?:talked|chatted|spoke)|"
    r"good news|big news|thanks? (?:you )?(?:so much )?for (?:asking|sharing|the [\w-]+|your [\w-]+|that)|"
    r"wow+|whoa|woah|oh+|ah+|aw+|haha+|hah|hehe|lol|lmao|omg|gosh|yeah+|yea|yep|yup|nope|well|hey+|hi+|hello|"
    r"so|um+|uh+|hmm+|anyway|anyways|btw|by the way|guess what|you know what|you know|i mean|thanks|thank you|"
    r"thx|also|and|but|plus|of course|no problem|no worries|speaking of which|funny you should ask|oh my god|"
    r"same here|me too|good question|congrats|congratulations|then|wait|oh wait|hold on|ha+|ah well|"
    r"(?:a |my )?(?:confession|(?:quick |big |little )?update|news flash|true story|spoiler|fun fact|plot twist)(?=\s*:)|"
    r"to be (?:honest|fair)|tbh|in fact|as it turns out|turns out(?= that\b)|that said|all in all"
)
_EXCLAMATIONS = (
    r"yes|ok|okay|alright|sure|cool|nice|great|awesome|sweet|totally|definitely|absolutely|honestly|"
    r"actually|exactly|right|true|indeed|really|seriously|crazy|man|dude|amazing|wonderful|no|nah|"
    r"oh no|ugh|hmm|sadly|luckily|fortunately|unfortunately|honestly|anyway|okay so|ok so"
)
LEADING_FILLERS = re.compile(
    r"^(?:(?:(?:" + _OPENERS + r")\b[\s,!.:;~\-–—]*)|(?:(?:" + _EXCLAMATIONS + r")\b\s*[,!.:;~\-–—]+\s*))+",
    re.IGNORECASE,
)
INLINE_FILLERS = re.compile(
    r",?\s*\b(?:you know|i mean|like,|kinda|sorta|literally|basically|honestly|actually|"
    r"totally|really|super|truly|definitely|absolutely|seriously|just)\b,?",
    re.IGNORECASE,
)
# "so" / "very" before an adjective after a copula: "it was so powerful" -> "it was powerful".
COPULA_INTENSIFIER = re.compile(
    r"\b(is|was|were|are|am|be|been|feel|felt|feels|'s|'m|'re)\s+(?:so|very|pretty|quite|extremely|incredibly)\s+",
    re.IGNORECASE,
)
EMOJI = re.compile("[\U0001f000-\U0001faff\u2600-\u27bf\ufe0f\u200d]+")
PHOTO_TAG = re.compile(
    r"\[(?:shares?|shared|sends?|sent) (?:a |an )?(?:photo|image|picture|link)[^\]]*\]", re.I
)
URL = re.compile(r"https?://\S+")

ZH_LEADING_FILLERS = re.compile(
    r"^(?:(?:哈+|呵+|嘿+|嗯+|啊+|哇塞?|哦+|噢+|呃+|唉+|嗨|对了|其实|那个|好的|好吧|是的|当然|确实|"
    r"没错|没问题|谢谢你?|真的|说起来|话说|可以|你好[啊呀]?|您好|是啊|对啊?|嗯嗯|还有|另外|说到这个|说到这儿|"
    r"不过|然后|那么|所以|坦白说|老实说|说实话|跟你说|告诉你|不是|对了对了)[\s，,！!。~、：:]+)+"
)
# Requests and meta remarks addressed to the other person: they steer the chat, they state nothing.
ZH_REQUEST = re.compile(
    r"^(?:你|请你?|麻烦你)?(?:给我|帮我|替我|跟我|和我)(?:推荐|讲讲?|说说?|找|查|介绍|想想|看看|出出主意)"
    r"|^(?:我)?(?:跟|和|给|对)(?:你|[A-Za-z\u3400-\u9fff]{1,8})(?:说说|讲讲|聊聊|介绍一下|汇报一下)"
    r"|^(?:你|请你?)(?:推荐|说说|讲讲|介绍|猜猜|想想)"
    r"|(?:说说|讲讲|聊聊)[^，,]{0,12}吧[。！!]*$"
)
# Greetings, farewells, apologies and well-wishes: small talk even when they name people.
# Announcements that only introduce the news ("I wanted to let you know that I ..."): the news stays.
EN_ANNOUNCEMENT = re.compile(
    r"^(?:I\s+)?(?:just\s+|really\s+|also\s+)?(?:(?:wanted|want|had|have|needed|need)\s+to|"
    r"(?:I'm|I am)\s+(?:so\s+|really\s+)?(?:excited|happy|glad|thrilled)\s+to)\s+"
    r"(?:let you know|tell you|share (?:some(?:thing|\s+news)[\w\s]{0,20}?\s+)?with you|"
    r"give you (?:the|a) heads[- ]up[^-–—:]{0,50}?)\s*(?:that\s+)?[-–—:,]?\s*(?=(?:I|I'm|I've|we|we're|my|our)\b)"
    r"|^here's (?:some|the|my) (?:good|great|big|exciting) news\s*[-–—:,]+\s*",
    re.IGNORECASE,
)
EN_PLEASANTRY = re.compile(
    r"^(?:good ?(?:night|morning|evening|afternoon|luck)|night night|sleep (?:well|tight)|sweet dreams|"
    r"take care|see you|talk (?:soon|later|to you)|catch you|bye|goodbye|have (?:a|fun)\b|say hi|"
    r"(?:I'm |I am )?(?:so |really |very )?sorry\b|welcome|happy (?:birthday|new year|holidays)|congrat|"
    r"cheers|enjoy|rest (?:well|up|those)|get some rest|sounds (?:good|great|like)|(?:that|it)(?:'s| is) "
    r"(?:okay|ok|fine|alright|great|wonderful|amazing|awesome|lovely)\b[.!]*$|"
    r"(?:my|our) pleasure|any ?time|no worries|you're welcome|glad to)",
    re.IGNORECASE,
)
# A speaker telling their own life story ("I went", "my husband"): an assistant-role speaker who does
# this is a person in the conversation, not an AI making remarks, and their statements are kept.
EN_SELF_NARRATION = re.compile(
    r"\b(?:I|we)\s+(?:\w+\s+)?(?:went|got|had|was|were|visited|started|finished|bought|took|made|\w{3,}ed)\b"
    r"|\bmy (?:husband|wife|kids?|son|daughter|mom|dad|family|sister|brother|job|dog|cat|partner)\b",
    re.IGNORECASE,
)
# Past-tense narration in a third-person statement ("the trip was wild", "7 people attended").
EN_NARRATED = re.compile(r"\b(?:was|were|had|did|\w{3,}ed)\b", re.IGNORECASE)
# Remarks about the conversation itself ("wait, it's past midnight"), not about anybody's life.
EN_META = re.compile(
    r"\b(?:it's|it is) (?:already |now |just )?(?:past|almost|nearly|after) (?:midnight|\d|one|two|three)"
    r"|\bso it's (?:on )?(?:\d{4}-\d{2}-\d{2}|tomorrow|today) (?:now|already)\b|\bit's late\b"
    r"|\b(?:this|our) (?:chat|conversation)\b|\bwhere was I\b|\bas I (?:said|was saying)\b",
    re.IGNORECASE,
)
ZH_SMALL_TALK_CLAUSE = re.compile(
    r"^(?:你好啊?|您好|嗨|早上好|晚上好|下午好|晚安|再见|拜拜|很高兴认识你|很高兴和你聊天|谢谢你?的?\S{0,6}|"
    r"不客气|不用谢|没关系|好的|好吧|嗯+|哈+|AI伴侣|我的朋友)$"
)

# --- small talk ---------------------------------------------------------------

SMALL_TALK_WORDS = frozenset(
    """hi hello hey hiya morning evening afternoon night good great fine okay ok alright well thanks
    thank appreciate welcome bye goodbye later see soon talk chat nice meet glad happy awesome cool
    wow haha lol how doing going things everything anything much new up weather day today sure yes
    yeah yep no nope take care catch time long hope doing pretty busy same too also lot lots
    amazing wonderful fantastic sounds sound love glad miss missed tired""".split()
)

# Evaluative and generic words: frequent in chat, they say how something felt, not what it was.
# They do not count towards a sentence's informativeness.
VAGUE_WORDS = frozenset(
    """amazing awesome great good nice cool fun happy glad excited proud lovely beautiful wonderful fantastic
    incredible super pretty tough hard difficult easy sure thing things stuff something anything everything nothing
    much many way time times life journey experience moment moments feel feeling feelings felt make made keep
    keeping kept getting know knew think thought want wanted need needed try trying tried seeing saw look looking
    looked hope hoping support supportive help helping helped share sharing shared people others someone everyone
    anyone part kind sort whole big small little best better worst bad important special meaningful rewarding
    inspiring inspired motivated hear heard tell told talk talking said say saying mean means remind reminds
    reminder cause because though although maybe probably perhaps still even always never often sometimes lately
    recently now right wow yes totally definitely blast crazy wild insane cute sweet grateful thankful thrilled
    stoked joy passion passionate dream dreams goal goals progress positive believe happen happened happening
    done doing""".split()
)

ZH_SMALL_TALK = re.compile(
    r"^(?:你好|您好|嗨|哈喽|早上好|早安|晚上好|下午好|晚安|再见|拜拜|谢谢|感谢|不客气|不用谢|好的|嗯|哈|"
    r"最近怎么样|你怎么样|还好|挺好|不错|很高兴认识你|回头聊|下次聊|明天见)"
)

# --- grammar helpers ----------------------------------------------------------

ADVERBS = frozenset(
    """really just also still always never usually often sometimes actually totally definitely
    finally recently already even absolutely truly honestly kinda sorta currently personally
    mostly generally seriously literally basically only first ever somehow probably maybe
    almost nearly barely hardly""".split()
)
MODALS = frozenset("can could will would shall should may might must cannot can't won't".split())
NOT_PAST_ED = frozenset(
    "need feed seed speed bed red shed indeed proceed succeed exceed weed breed bleed".split()
)

# --- fact cues (English; applied to the original first-person sentence) -------------

_ADV = r"(?:(?:\w+ly|really|just|also|still|always|never|absolutely|totally|kinda|even|now)\s+)*"
EN_PREFERENCE = re.compile(
    r"\b(?:I|we)(?:'m|'ve|'re|\s+am|\s+have|\s+are)?\s+(?:(?:always|really|also|just)\s+)*(?:been\s+)?"
    + _ADV
    + r"(?:love[sd]?|like[sd]?|enjoy(?:s|ed)?|adore[sd]?|"
    r"hate[sd]?|prefer(?:s|red)?|dislike[sd]?|can't stand|loving|enjoying|been loving|been into|"
    r"into|a (?:big |huge )?fan of|passionate about|obsessed with|crazy about|addicted to|drawn to|fond of|"
    r"keen on|hooked on)\b"
    r"|\b(?:my|our) (?:\w+ )?(?:favou?rite|fave)\b|\bfavou?rite\b",
    re.IGNORECASE,
)
EN_PLAN = re.compile(
    r"\b(?:I|we)(?:'m|'re|\s+am|\s+are)\s+"
    + _ADV
    + r"(?:going to|gonna|planning|thinking (?:about|of)|hoping|"
    r"about to|looking forward|considering|aiming|trying to|(?!doing|feeling|loving|going\b)\w+ing\b)"
    r"|\b(?:I|we)(?:'ll|'d)\b|\b(?:I|we)\s+" + _ADV + r"(?:plan|want|intend|hope|aim|decided|will|would like|"
    r"can't wait|cannot wait)\b|^(?:going to|gonna|planning|thinking of|hoping to)\b",
    re.IGNORECASE,
)
EN_WORLD = re.compile(
    r"\bmy name(?:'s| is)\b|\b(?:I'm|I am) called\b|\bcall me\b"
    r"|\b(?:I|we)\s+(?:usually|always|often|normally|regularly|typically)\s+\w+|\bI\s+"
    + _ADV
    + r"(?:work|live|study|teach)\b"
    r"|\b(?:I'm|I am) (?:a|an) \w+|\b(?:I'm|I am) from\b|\bI grew up\b|\bI was born\b"
    r"|\b(?:I|we)\s+(?:have|'ve got|own|keep)\s+(?:a|an|two|three|four|\d+)\b"
    r"|\b(?:my|our)\s+(?:\w+\s+)?(?:husband|wife|partner|boyfriend|girlfriend|fianc[eé]e?|son|daughter|"
    r"kids?|children|child|baby|mom|mother|dad|father|brother|sister|parents|family|grandma|grandmother|"
    r"grandpa|grandfather|aunt|uncle|cousin|dog|cat|pet|puppy|kitten|bird|fish|turtles?|hamster|rabbit|"
    r"horse|job|boss|manager|colleague|coworker|co-worker|team|company|office|employer|friend|bff|best friend|"
    r"roommate|neighbou?r|home|house|apartment|niece|nephew|grandson|granddaughter|in-laws?|"
    r"hometown|town|city|country|school|college|university|major|degree|car|studio|shop|business)s?\b"
    r"|\bnamed\b|\bname(?:'s| is)\b",
    re.IGNORECASE,
)
EN_OPINION = re.compile(
    r"\b(?:I|we)\s+" + _ADV + r"(?:think|believe|feel like|feel that|reckon|suppose|agree|disagree)\b"
    r"|\bin my (?:opinion|view)\b|\bto me,",
    re.IGNORECASE,
)
EN_PAST_EVENT = re.compile(
    r"\b(?:I|we|I've|we've|I have|we have)\s+"
    + _ADV
    + r"(?:\w{2,}ed|"
    + "|".join(sorted(IRREGULAR_PAST))
    + r")\b(?!')",  # "I won't" is no past event
    re.IGNORECASE,
)
# Sentences opening on a verb with the subject dropped ("Went hiking yesterday").
EN_SUBJECTLESS = re.compile(
    r"^(?:just\s+|finally\s+|recently\s+|also\s+)*(?:went|got|started|finished|joined|visited|tried|"
    r"made|took|bought|had|saw|met|won|gonna|going to|planning|thinking of|hoping to|looking forward|"
    r"spent|signed up|learned|picked up|painted|baked|cooked|ran|wrote|read|watched|played)\b",
    re.IGNORECASE,
)
# A first-person sentence that only reacts to the other person ("I'm so happy for you").
EN_REACTION = re.compile(
    r"\b(?:happy|glad|proud|sorry|excited|thrilled|stoked|grateful|thankful) (?:for|of|to hear|that) you\b"
    r"|^(?:that|it|this)?\s*(?:sounds|seems|looks)\b|^(?:good|great|nice) (?:idea|point|question|choice)\b"
    r"|\b(?:can't|cannot) wait to (?:see|hear|read|try)\b|\bI hope (?:you|it|that|so|things)\b"
    r"|\bI'm (?:always )?here for you\b|\bI (?:can|could) (?:imagine|tell|see)\b|\bI bet\b"
    r"|\b(?:I|we) (?:totally |really |completely )?(?:get it|understand|know what you mean|hear you|agree)\b"
    r"|\blet me know\b|\bI (?:really )?appreciate (?:it|that|you|this)\b|\bkeep (?:it|me) (?:up|posted)\b"
    r"|\bI(?:'m| am) (?:so |really )?(?:happy|glad) (?:to hear|you)\b|\bI(?:'d| would) love to (?:see|hear)\b"
    r"|\bI (?:love|like) (?:that|it|this|how|hearing|seeing)\s*[!.]?$|\bme too\b",
    re.IGNORECASE,
)
# What a helpful AI says about itself (not a fact about anybody).
EN_SERVICE = re.compile(
    r"\bI(?:\s+(?:can|could|would|will)|'d|'ll)\s+(?:be happy to |gladly |definitely )?"
    r"(?:help|suggest|recommend|assist|try|check|look into|keep that in mind)\b"
    r"|\bI(?: also| really)?(?: want|'d like| would like|'d love| would love) to (?:try|see|read|watch|hear) (?:it|that|this|them)\b"
    r"|\bI(?:'m| am) (?:your|an|a) (?:ai|assistant|companion)\b(?![\s-]+(?:manager|director|coach|editor|"
    r"professor|principal|teacher|producer|to)\b)|\bI(?:'m| am) (?:here|happy|glad) to\b"
    r"|\bI (?:suggest|recommend|understand)\b|\bas an ai\b"
    r"|\bI (?:don't|do not|can't|cannot) (?:have|experience|feel|eat|go|see)\b.{0,20}\b(?:physical|body|real|human)\b",
    re.IGNORECASE,
)
EN_RECOMMENDATION = re.compile(r"\b(?:I\s+)?(?:recommend|suggest)(?:ed|s)?\b", re.IGNORECASE)
EN_YOU_FACT = re.compile(
    r"^(?:(?:so|and|oh|since|as)\s+)?you(?:'re| are| were|'ve| have| had| love| loved| like| liked| enjoy| enjoyed|"
    r" prefer| hate| work| worked| live| lived| mentioned| said| told me| went| got| \w+ed)\b",
    re.IGNORECASE,
)
EN_YOU_NOT_FACT = re.compile(
    r"^(?:so |and )?you(?:'ll|'d| can| could| should| might| may| will| would| must| need to| have to|"
    r" got this| are welcome| 're welcome| deserve| rock)\b|\byou(?:'re| are) (?:welcome|right|so|too)\b"
    # praise and forecasts about the listener ("you're gonna smash it", "you're such a star") are
    # encouragement, not facts about their life
    r"|^(?:so |and )?you(?:'re| are) (?:gonna|going to|such|truly|an inspiration|inspiring|dedicated|"
    r"amazing|awesome|talented|brave|strong|incredible|showing|doing (?:great|amazing|awesome|so))\b"
    r"|^(?:so |and )?you(?:'ve| have) (?:come a long way|got (?:this|tons|so much|a lot|what it takes|talent)|"
    r"put (?:a lot|so much|in))"
    r"|^(?:so |and )?you (?:really |truly )?(?:showed|earned|captured|nailed|killed|rocked|inspired|"
    r"deserved|handled)\b",
    re.IGNORECASE,
)
IMPERATIVE = re.compile(
    r"^(?:build|try|make|keep|take|go|get|do|don't|be|remember|find|check|look|let|give|start|stay|focus|trust|"
    r"follow|practice|consider|use|join|reach|ask|enjoy|have|stop|learn|believe|surround|set|treat|write|read|"
    r"never|always|just|please|imagine|think|listen|watch|drink|eat|spend|talk|tell|show|hang|send|bring|put)\b",
    re.IGNORECASE,
)
PRONOUN_CONTINUATION = re.compile(r"^(?:it|he|she|they|this|that|his|her|their|its|there)\b", re.IGNORECASE)
PET_OR_PERSON_NOUN = re.compile(
    r"\b(?:my|our|a|an|new)\s+(?:\w+\s+)?(dog|cat|pet|puppy|kitten|bird|fish|turtle|hamster|rabbit|horse|"
    r"son|daughter|baby|friend|boyfriend|girlfriend|partner|husband|wife|niece|nephew|book|novel|song|"
    r"album|band|movie|film|show|game|car|painting|project|team|studio|shop|business|restaurant|café|cafe)\b",
    re.IGNORECASE,
)
NAME_CLAUSE = re.compile(
    r"^(?:his|her|its|their|the)\s+name(?:'s| is| was)\s+([A-Z][\w'-]+(?:\s+[A-Z][\w'-]+)?)",
    re.IGNORECASE,
)

# --- Chinese cues ------------------------------------------------------------------

ZH_PREFERENCE = re.compile(
    r"喜欢|喜爱|热爱|最爱|偏爱|讨厌|爱吃|爱喝|爱看|爱听|爱玩|着迷|迷上|感兴趣|爱好|不爱|受不了"
)
ZH_PLAN = re.compile(r"打算|计划|准备|想要|想去|要去|将要|决定|希望能|期待|下次要|正在考虑")
ZH_WORLD = re.compile(
    r"我叫|我的名字|名字叫|我是(?!说)|在\S{1,12}工作|工作是|我住在|住在|来自|老家|养了|养着|有一(?:只|条|个|位)|"
    r"我(?:的)?(?:家|妈妈|爸爸|父母|老公|老婆|丈夫|妻子|儿子|女儿|孩子|哥哥|姐姐|弟弟|妹妹|男朋友|女朋友|"
    r"朋友|室友|同事|老板|狗|猫|宠物|专业|学校|公司)"
)
ZH_OPINION = re.compile(r"我(?:觉得|认为|相信|感觉|以为|坚信)|在我看来")
ZH_EVENT = re.compile(
    r"(?:去|参加|开始|完成|学会|学|买|看|做|吃|玩|见|遇到|发现|获得|赢|换|搬|认识|报名|加入|参观|逛|听|读|写|画|跑|爬|骑|游|拍|订|租)了"
    r"|了(?:一|个|场|次|趟|部|本|首|家)|(?:去|到)过"
)
ZH_KIN = (
    r"(?:爸爸?|妈妈?|父亲|母亲|父母|老公|老婆|丈夫|妻子|儿子|女儿|孩子|哥哥?|姐姐?|弟弟?|妹妹?|爷爷|奶奶|外公|外婆|"
    r"姥姥|姥爷|男朋友|女朋友|室友|同事|老板|领导|上司|经理|猫|狗|宠物)"
)
ZH_STRONG_WORLD = re.compile(
    r"我叫|名字|养了|养着|在\S{1,12}(?:工作|上班|上学|读书)|住在|来自|老家|我是(?!说)"
    r"|"
    + ZH_KIN
    + r"(?:叫|是|在|住|今年|\d+岁|[一二三四五六七八九十]+岁)|(?:工作|职业|专业)是|当(?:老师|医生|护士|工程师)"
)
SELF_INTRO = re.compile(r"\bmy name(?:'s| is)\b|\bcall me\b|我叫|我的名字", re.I)
TRAILING_FILLERS = re.compile(
    r"(?:[,\s]+(?:haha+|hehe|lol|lmao|:\)|:D|xd|right|you know|though))+\s*([.!]*)$", re.I
)
ZH_SERVICE = re.compile(
    r"我(?:可以|会|能|建议|推荐|理解|明白|很高兴|很乐意|相信你|是你的|一直在|随时|也想|也很想|也喜欢|也很喜欢|没法|无法)"
    r"|作为(?:一个)?(?:AI|ai)|AI伴侣|如果你|祝你|希望你"
)
ZH_REACTION = re.compile(r"随时|欢迎|不客气|没问题|祝你|加油|希望你|谢谢|请教|分享给我")
# Pleasantries that contain emotion words without expressing an emotion.
FORMULAIC_EMOTION = re.compile(
    r"nice to (?:meet|see|hear)|(?:glad|happy) to (?:help|hear|meet|assist)|很高兴(?:认识|和你|见到|为你)|祝你|希望你",
    re.IGNORECASE,
)
ZH_YOU_FACT = re.compile(r"^你(?:喜欢|爱|讨厌|是|在|住|养|有|去了|提到|说过|曾经|最近|之前)")
ZH_YOU_NOT_FACT = re.compile(r"^你(?:可以|应该|可能|不妨|要|需要|得|会|能|试试|也可以|是不是|真|太|好)")
ZH_QUESTION = re.compile(r"[？?]|(?:吗|呢|么|没有)[。！!～~]*$")

# --- narrative significance --------------------------------------------------------

MILESTONE = re.compile(
    r"\bfirst time\b|\b(?:my|our|their|his|her|\w+'s) first\b|\bfor the first time\b|\bgraduat(?:ed|ion|ing)\b|\bgot (?:married|engaged)\b"
    r"|\bwedding\b|\bengaged\b|\badopted\b|\bnew job\b|\bgot (?:a|the) job\b|\bgot hired\b|\bhired\b"
    r"|\bpromot(?:ed|ion)\b|\bmoved (?:to|into|in|out|from|back|here)\b|\bbought (?:a|our|my|their|his|her) (?:house|home|car|flat)\b"
    r"|\bwas born\b|\bgave birth\b|\bhad a baby\b|\b(?:baby|son|daughter) (?:is|was) born\b|\bretir(?:ed|ement)\b"
    r"|\bpublished\b|\blaunched\b|\bopened (?:my|our|their|his|her|a|the) (?:own )?\w+|\bwon (?:the|a|my|first)\b"
    r"|\bcompleted\b|\bfinished (?:my|their|his|her|the) (?:first|degree|thesis|book|novel)"
    r"|第一次|首次|毕业|结婚|订婚|婚礼|领养|收养|新工作|找到(?:了)?工作|入职|升职|晋升|搬家|搬到|出生|生了(?:个|一个)?(?:孩子|宝宝|儿子|女儿)"
    r"|退休|买了房|买房|出版|发表|开业|创业|获奖|拿到了?(?:offer|学位|证书)|考上",
    re.IGNORECASE,
)
TURNING_POINT = re.compile(
    r"\bquit\b|\bresign(?:ed)?\b|\bbroke up\b|\bbreak ?up\b|\bdivorc(?:e|ed)\b|\bdiagnos(?:ed|is)\b"
    r"|\blost (?:my|our|his|her|their|\w+'s) (?:job|mom|mother|dad|father|husband|wife|friend|dog|cat|home)\b"
    r"|\b(?:got|was) (?:fired|laid off)\b|\blaid off\b|\bdecided to\b|\bpassed away\b|\bdied\b|\bfuneral\b"
    r"|\baccident\b|\bchang(?:ed|ing) (?:my )?career\b|\bstart(?:ed|ing)? over\b|\bcame out\b|\btransition(?:ed|ing)?\b"
    r"|\bsurgery\b|\bcancer\b|\bmiscarriage\b|\bsober\b"
    r"|辞职|离职|分手|离婚|确诊|被诊断|诊断出|决定|去世|过世|离世|失业|被裁|裁员|转行|出车祸|车祸|手术|重新开始",
    re.IGNORECASE,
)
NOTABLE = re.compile(
    r"\btrip\b|\bbirthday\b|\banniversary\b|\btravel(?:l?ed|ling|ing)?\b|\bvacation\b|\bholiday\b|\bconcert\b|\bfestival\b|\baward\b"
    r"|\bcompetition\b|\btournament\b|\bhospital\b|\bperformance\b|\bexhibition\b|\bconference\b|\binterview\b"
    r"|\bcamping\b|\bhike\b|\broad ?trip\b|\bparade\b|\bmarathon\b|\brace\b|\bshow\b"
    r"|生日|周年|旅行|旅游|出差|演唱会|音乐会|比赛|展览|住院|面试|考试|聚会|露营|爬山|马拉松|演出",
    re.IGNORECASE,
)
NEGATION_BEFORE = re.compile(
    r"\b(?:not|never|n't|no|haven't|hasn't|didn't|won't|don't)\s+(?:\w+\s+){0,2}$", re.I
)
ZH_NEGATION_BEFORE = re.compile(r"(?:没有?|不|未|别)$")

# --- emotions: word -> (emotion, valence, arousal) -----------------------------------

_EN_EMOTIONS: dict[str, tuple[str, float, float]] = {}
for _words, _emotion, _valence, _arousal in (
    ("happy glad joyful joy cheerful delighted delight overjoyed blessed", "joy", 0.8, 0.6),
    ("excited thrilled stoked pumped ecstatic elated", "excitement", 0.8, 0.9),
    ("grateful thankful gratitude", "gratitude", 0.7, 0.4),
    ("proud pride accomplished", "pride", 0.8, 0.6),
    ("hopeful optimistic inspired motivated encouraged", "hope", 0.6, 0.5),
    ("calm peaceful relaxed content serene", "calm", 0.5, 0.1),
    ("relieved relief", "relief", 0.6, 0.3),
    ("loved cherished accepted", "love", 0.8, 0.5),
    (
        "sad unhappy depressed down heartbroken devastated miserable gloomy grief grieving crying cried tears",
        "sadness",
        -0.8,
        0.4,
    ),
    ("lonely alone isolated", "loneliness", -0.7, 0.3),
    ("anxious worried nervous scared afraid terrified frightened fear panic", "anxiety", -0.7, 0.8),
    ("stressed overwhelmed pressure", "stress", -0.6, 0.7),
    ("angry mad furious annoyed irritated outraged", "anger", -0.8, 0.9),
    ("frustrated frustrating frustration", "frustration", -0.6, 0.7),
    ("upset hurt", "distress", -0.7, 0.6),
    ("disappointed disappointing", "disappointment", -0.6, 0.4),
    ("exhausted drained burnt", "exhaustion", -0.5, 0.2),
    ("ashamed embarrassed guilty", "shame", -0.6, 0.5),
    ("shocked stunned", "surprise", -0.1, 0.8),
):
    for _w in _words.split():
        _EN_EMOTIONS[_w] = (_emotion, _valence, _arousal)
EN_EMOTIONS = _EN_EMOTIONS

ZH_EMOTIONS: dict[str, tuple[str, float, float]] = {}
for _words, _emotion, _valence, _arousal in (
    ("开心 高兴 快乐 愉快 幸福 欢喜 喜悦", "joy", 0.8, 0.6),
    ("兴奋 激动 期待", "excitement", 0.8, 0.9),
    ("感激 感恩 感谢", "gratitude", 0.7, 0.4),
    ("骄傲 自豪 成就感", "pride", 0.8, 0.6),
    ("充满希望 有信心 受到鼓舞", "hope", 0.6, 0.5),
    ("放松 平静 安心 惬意 舒服", "calm", 0.5, 0.1),
    ("松了一口气 轻松", "relief", 0.6, 0.3),
    ("难过 伤心 悲伤 痛苦 心碎 失落 沮丧 郁闷 哭了 流泪 低落", "sadness", -0.8, 0.4),
    ("孤独 寂寞", "loneliness", -0.7, 0.3),
    ("焦虑 担心 紧张 害怕 恐惧 不安 慌", "anxiety", -0.7, 0.8),
    ("压力 压力大 烦躁 烦恼", "stress", -0.6, 0.7),
    ("生气 愤怒 恼火 气死", "anger", -0.8, 0.9),
    ("失望", "disappointment", -0.6, 0.4),
    ("累 疲惫 疲倦 崩溃", "exhaustion", -0.5, 0.3),
    ("惭愧 尴尬 内疚", "shame", -0.6, 0.5),
):
    for _w in _words.split():
        ZH_EMOTIONS[_w] = (_emotion, _valence, _arousal)

EN_INTENSIFIERS = frozenset(
    "so very really super extremely incredibly totally truly deeply absolutely".split()
)
ZH_INTENSIFIERS = ("非常", "特别", "超级", "十分", "极其", "太", "好", "很", "真的")

# --- numbers -----------------------------------------------------------------------

_ZH_DIGITS = {
    "零": 0,
    "〇": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}


def zh_number(text: str) -> int | None:
    """Small Chinese numerals (一 .. 九百九十九) or digits, enough for ages, dates and counts."""
    if text.isdigit():
        return int(text)
    total, current = 0, 0
    for ch in text:
        if ch in _ZH_DIGITS:
            current = _ZH_DIGITS[ch]
        elif ch == "十":
            total += (current or 1) * 10
            current = 0
        elif ch == "百":
            total += (current or 1) * 100
            current = 0
        else:
            return None
    return total + current if text else None
