"""What a token view shows: every token with its text and loss weight, the messages the
tokens fall in, and the parsed parts of a completion.

Message boundaries come from the token ids alone (:class:`MessageMarkers`, declared by
each format), so the same view works for a freshly rendered example, a row of a prepared
Parquet file and a saved rollout. They are exact: control tokens only ever come from the
template, never from message text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from renderers.core.messages import Part, TextPart, ThinkingPart, ToolCallPart
from renderers.core.result import ParseResult
from renderers.core.tokens import TokenTable

__all__ = [
    "MessageMarkers",
    "PartSpan",
    "RoleCount",
    "Segment",
    "Summary",
    "TokenFormat",
    "ViewData",
    "message_segments",
    "part_spans",
    "token_text",
]


@dataclass(frozen=True, slots=True)
class MessageMarkers:
    """Where a format's messages begin, as control tokens (spelled as in the tokenizer).

    ``starts`` maps a token to the role of the message it begins, or to ``""`` when the
    role is the text right after it (``<|im_start|>user``); ``after`` maps a token to the
    role of what follows it (DeepSeek's answer after tool outputs has no marker of its
    own); ``leading`` names the tokens before the first marker (DeepSeek's system prompt).
    """

    starts: Mapping[str, str] = field(default_factory=dict)
    after: Mapping[str, str] = field(default_factory=dict)
    leading: str = ""


@dataclass(frozen=True, slots=True)
class TokenFormat:
    """What a view needs of a format: its token table and message markers (a renderer
    has both; this holds them where the renderer is not at hand)."""

    table: TokenTable
    message_markers: MessageMarkers


@dataclass(frozen=True, slots=True)
class Segment:
    """Tokens ``[start, end)`` shown under one header: a message (``role``) and, in a
    packed row, which sequence it belongs to (``label``)."""

    start: int
    end: int
    role: str
    label: str = ""


@dataclass(frozen=True, slots=True)
class PartSpan:
    """The tokens ``[start, end)`` of one parsed part, markers included.

    ``kind`` is ``"thinking"``, ``"text"``, ``"tool_call"`` or ``"unparsed"`` (a tool call
    that could not be decoded); ``label`` says which (a tool's name)."""

    start: int
    end: int
    kind: str
    label: str
    incomplete: bool = False


@dataclass(frozen=True, slots=True)
class RoleCount:
    """How many tokens the messages of one role hold, and how many of them are trained."""

    role: str
    tokens: int
    trained: int


@dataclass(frozen=True, slots=True)
class Summary:
    """Token counts of a view: all, trained (non-zero weight), and per role."""

    tokens: int
    trained: int
    by_role: tuple[RoleCount, ...]


@dataclass(frozen=True, slots=True, eq=False)
class ViewData:
    """Everything a token view shows (formatted by :mod:`renderers.view.terminal` and
    :mod:`renderers.view.html`).

    ``ids`` and ``weights`` are 1-D arrays of equal length; ``segments`` cover the tokens
    in order; ``parts`` are the parsed parts of the completions among the tokens;
    ``notes`` are one-line facts for the summary (how a completion ended); ``issues`` are
    ``(token position, message)`` pairs the parser reported.
    """

    ids: np.ndarray
    weights: np.ndarray
    table: TokenTable
    segments: tuple[Segment, ...]
    parts: tuple[PartSpan, ...] = ()
    title: str = ""
    notes: tuple[str, ...] = ()
    issues: tuple[tuple[int, str], ...] = ()

    def __post_init__(self) -> None:
        if self.ids.ndim != 1 or self.ids.shape != self.weights.shape:
            raise ValueError(
                f"a view needs 1-D token ids and weights of equal length, got shapes "
                f"{self.ids.shape} and {self.weights.shape}"
            )

    def is_control(self) -> np.ndarray:
        """Which tokens are control tokens (a boolean array)."""
        return np.isin(self.ids, np.fromiter(self.table.control_ids, dtype=np.int64))

    def summary(self) -> Summary:
        """Token counts: all, trained and per role (roles in order of appearance)."""
        trained = self.weights != 0
        counts: dict[str, list[int]] = {}
        for seg in self.segments:
            count = counts.setdefault(seg.role, [0, 0])
            count[0] += seg.end - seg.start
            count[1] += int(np.count_nonzero(trained[seg.start : seg.end]))
        return Summary(
            tokens=len(self.ids),
            trained=int(np.count_nonzero(trained)),
            by_role=tuple(RoleCount(role, n, t) for role, (n, t) in counts.items()),
        )


def token_text(table: TokenTable, token_id: int) -> str:
    """The text of one token; bytes that are not complete UTF-8 on their own (a token
    holding part of a character) are shown as ``\\xNN`` escapes."""
    text = table.id_to_str[token_id]
    if text is None:
        text = table.id_to_bytes[token_id].decode("utf-8", "backslashreplace")
    return text


def message_segments(
    ids: np.ndarray,
    table: TokenTable,
    markers: MessageMarkers,
    start: int = 0,
    end: int | None = None,
    leading: str | None = None,
    label: str = "",
) -> list[Segment]:
    """The messages of ``ids[start:end]`` as segments, found by the format's markers.

    A segment that holds nothing but its start marker joins the next one (DeepSeek-V3
    opens tool outputs with two markers); empty segments are dropped.
    """
    end = len(ids) if end is None else end
    starts = _marker_ids(table, markers.starts)
    after = _marker_ids(table, markers.after)
    window = ids[start:end]
    found = np.flatnonzero(np.isin(window, np.fromiter([*starts, *after], dtype=np.int64)))
    first_role = markers.leading if leading is None else leading
    bounds: list[tuple[int, str]] = [(start, first_role or "tokens")]
    for offset in found.tolist():
        pos = start + offset
        token = int(ids[pos])
        if token in starts:
            bounds.append((pos, starts[token] or _role_after(ids, pos + 1, end, table)))
        else:
            bounds.append((pos + 1, after[token]))
    segments: list[Segment] = []
    pending: int | None = None  # start of a marker-only segment waiting for the next one
    for k, (a, role) in enumerate(bounds):
        b = bounds[k + 1][0] if k + 1 < len(bounds) else end
        if b <= a:
            continue
        if b - a == 1 and int(ids[a]) in starts and b < end:
            pending = a if pending is None else pending
            continue
        segments.append(Segment(a if pending is None else pending, b, role, label))
        pending = None
    return segments


def _marker_ids(table: TokenTable, names: Mapping[str, str]) -> dict[int, str]:
    return {
        table.control_tokens[name]: role
        for name, role in names.items()
        if name in table.control_tokens
    }


def _role_after(ids: np.ndarray, pos: int, end: int, table: TokenTable) -> str:
    """The role written as text after a start marker: up to the next control token or
    newline, first word (Harmony writes ``functions.f to=assistant``)."""
    control = table.control_ids
    data = bytearray()
    while pos < end and len(data) < 64 and int(ids[pos]) not in control:
        data += table.id_to_bytes[int(ids[pos])]
        pos += 1
    words = data.decode("utf-8", "replace").split("\n", 1)[0].split()
    return words[0] if words else "message"


def part_spans(result: ParseResult) -> tuple[PartSpan, ...]:
    """The parts of a parsed completion with their token spans."""
    return tuple(
        _part_span(part, start, end)
        for part, (start, end) in zip(result.message.parts, result.spans, strict=True)
    )


def _part_span(part: Part, start: int, end: int) -> PartSpan:
    if isinstance(part, ThinkingPart):
        return PartSpan(start, end, "thinking", _channel("thinking", part), part.incomplete)
    if isinstance(part, TextPart):
        return PartSpan(start, end, "text", _channel("text", part), part.incomplete)
    if isinstance(part, ToolCallPart):
        return PartSpan(start, end, "tool_call", f"tool call {part.name}")
    label = f"unparsed call {part.name or '?'}: {part.error}"
    return PartSpan(start, end, "unparsed", label, part.incomplete)


def _channel(kind: str, part: TextPart | ThinkingPart) -> str:
    return f"{kind} ({part.channel})" if part.channel else kind
