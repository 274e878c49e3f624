"""Parts and the events that describe them as they grow, one part open at a time."""

from __future__ import annotations

from typing import TypeAlias

from renderers.core.assembly import THINKING, TOOL_CALL, Event, PartFinished, PartStarted, TextDelta
from renderers.core.messages import TextPart, ThinkingPart, ToolCallPart, UnparsedToolCallPart

__all__ = ["PartStream", "ReasoningPart"]

ReasoningPart: TypeAlias = ThinkingPart | TextPart | ToolCallPart | UnparsedToolCallPart
"""A part of split text: text, thinking, or (with ``tool_calls=True``) a tool call."""


class PartStream:
    """Builds ordered text and thinking parts from deltas, recording
    :class:`~renderers.core.assembly.PartStarted`, :class:`~renderers.core.assembly.TextDelta`
    and :class:`~renderers.core.assembly.PartFinished` events.

    Writing text of another kind finishes the open part and starts a new one.
    """

    __slots__ = ("_chunks", "_events", "_index", "kind", "parts")

    def __init__(self) -> None:
        self.parts: list[ReasoningPart] = []
        self.kind: str | None = None  # of the open part: "text", "thinking" or None
        self._index = -1
        self._chunks: list[str] = []
        self._events: list[Event] = []

    def write(self, kind: str, text: str) -> None:
        """Append ``text`` (non-empty) to the open part of ``kind``, starting one if needed."""
        if self.kind != kind:
            self.start(kind)
        self._chunks.append(text)
        self._events.append(TextDelta(self._index, text))

    def start(self, kind: str) -> None:
        """Start a part of ``kind`` (finishing the open one)."""
        if self.kind is not None:
            self.finish()
        self.kind = kind
        self._index = len(self.parts)
        self._chunks = []
        self._events.append(PartStarted(self._index, kind))

    def finish(
        self, incomplete: bool = False, attributes: tuple[tuple[str, str], ...] = ()
    ) -> ReasoningPart:
        """Finish the open part (a thinking part gets ``incomplete`` and ``attributes``)."""
        text = "".join(self._chunks)
        part: ReasoningPart
        if self.kind == THINKING:
            part = ThinkingPart(text, incomplete=incomplete, attributes=attributes)
        else:
            part = TextPart(text)
        self.parts.append(part)
        self._events.append(PartFinished(self._index, part))
        self.kind = None
        self._chunks = []
        return part

    def add(self, part: ToolCallPart | UnparsedToolCallPart) -> None:
        """Append a whole tool call (finishing the open part)."""
        if self.kind is not None:
            self.finish()
        index = len(self.parts)
        self.parts.append(part)
        self._events.append(PartStarted(index, TOOL_CALL))
        self._events.append(PartFinished(index, part))

    def take_events(self) -> list[Event]:
        """The events recorded since the last call."""
        events, self._events = self._events, []
        return events
