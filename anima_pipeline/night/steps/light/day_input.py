"""Light sleep's input: the day's conversations, rendered as message 1.

Message 1 is one section per conversation (id, title, times), user and assistant only, tool
blocks stripped; cron conversations never enter. Over about 120,000 characters the day is cut
into several calls rather than truncated: newest conversations first, none dropped.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import date, datetime, time
from zoneinfo import ZoneInfo

from anima_pipeline.store.archive import DayConversation, DayMessage, day_conversations
from anima_pipeline.store.db import Connection
from anima_pipeline.store.memories import SemanticMemory

CHUNK_CHARS = 120_000

# Tool-use blocks an agent host may leave inside assistant text.
_TOOL_BLOCK = re.compile(
    r"<(tool_use|tool_call|tool_result|function_calls|function_results|antml:function_calls)\b[^>]*>.*?</\1>",
    re.DOTALL,
)
_TOOL_FENCE = re.compile(r"```(?:tool|tool_code|tool_call|tool_result)\b.*?```", re.DOTALL)


def strip_tool_blocks(text: str) -> str:
    text = _TOOL_FENCE.sub("", _TOOL_BLOCK.sub("", text))
    return re.sub(r"\n{3,}", "\n\n", text).strip()


def load_day(conn: Connection, anima_id: str, start: datetime, end: datetime) -> list[DayConversation]:
    """The day's conversations, tool messages and tool blocks removed, empty messages dropped."""
    out = []
    for conv in day_conversations(conn, anima_id, start, end):
        msgs = tuple(
            replace(m, content=cleaned) for m in conv.messages if (cleaned := strip_tool_blocks(m.content))
        )
        if msgs:
            out.append(replace(conv, messages=msgs))
    return out


def render_conversation(conv: DayConversation, tz: ZoneInfo) -> str:
    start, end = conv.started_at.astimezone(tz), conv.ended_at.astimezone(tz)
    title = f' — "{conv.title}"' if conv.title else ""
    head = f"## Conversation {conv.id}{title} ({start:%Y-%m-%d %H:%M}–{end:%H:%M})"
    return "\n".join([head, *(_render_message(m, tz) for m in conv.messages)])


def _render_message(m: DayMessage, tz: ZoneInfo) -> str:
    who = f"{m.role} ({m.speaker})" if m.speaker else m.role
    return f"[{m.created_at.astimezone(tz):%H:%M}] {who}: {m.content}"


def day_header(day: date, tz: ZoneInfo) -> str:
    """ "2026-11-17, Tuesday (Asia/Shanghai, UTC+08:00)": date, weekday and offset that day."""
    noon = datetime.combine(day, time(12), tzinfo=tz)
    offset = noon.strftime("%z")
    return f"{day.isoformat()}, {noon:%A} ({tz.key}, UTC{offset[:3]}:{offset[3:]})"


def render_day(convs: list[DayConversation], tz: ZoneInfo, day_label: str) -> str:
    """The day's conversations inside <conversations> (data, never instructions)."""
    try:
        label = day_header(date.fromisoformat(day_label), tz)
    except ValueError:  # a label that is not a date (a chunk name) is shown as given
        label = f"{day_label} ({tz.key})"
    head = f"# Conversations of {label}"
    body = "\n\n".join([head, *(render_conversation(c, tz) for c in convs)])
    return f'<conversations day="{day_label}">\n{body}\n</conversations>'


def chunk_conversations(
    convs: list[DayConversation], tz: ZoneInfo, limit: int = CHUNK_CHARS
) -> list[list[DayConversation]]:
    """Pack conversations into calls of at most `limit` rendered characters, newest first.
    A single conversation longer than the limit is cut into consecutive parts; nothing is dropped."""
    pieces: list[DayConversation] = []
    for conv in sorted(convs, key=lambda c: (c.ended_at, c.id), reverse=True):
        pieces.extend(_cut(conv, tz, limit))
    chunks: list[list[DayConversation]] = []
    size = 0
    for piece in pieces:
        n = len(render_conversation(piece, tz)) + 2
        if chunks and size + n <= limit:
            chunks[-1].append(piece)
            size += n
        else:
            chunks.append([piece])
            size = n
    return chunks


def _cut(conv: DayConversation, tz: ZoneInfo, limit: int) -> list[DayConversation]:
    if len(render_conversation(conv, tz)) <= limit:
        return [conv]
    parts: list[DayConversation] = []
    current: list = []
    size = 200
    for m in conv.messages:
        n = len(_render_message(m, tz)) + 1
        if current and size + n > limit:
            parts.append(replace(conv, messages=tuple(current)))
            current, size = [], 200
        current.append(m)
        size += n
    if current:
        parts.append(replace(conv, messages=tuple(current)))
    return parts


def render_memories(mems: list[SemanticMemory], heading: str) -> str:
    """Memories with id, type, confidence, sources and dates, inside <memories>."""
    lines = [heading]
    if not mems:
        lines.append("(none)")
    for m in mems:
        observed = f" observed={m.observed_at.isoformat()}" if m.observed_at else ""
        valid = f" valid_until={m.valid_until.isoformat()}" if m.valid_until else ""
        lines.append(
            f'- {m.ref} ({m.type}, c={m.confidence:.2f}) "{m.content}" '
            f"sources=[{', '.join(m.source_sessions)}]{observed}{valid}"
        )
    return "<memories>\n" + "\n".join(lines) + "\n</memories>"
