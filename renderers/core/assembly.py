"""Part assembly and stream events: the regions a format opens and closes become parts.

A format's parser tells the :class:`PartAssembler` where a text, thinking or tool-call
region opens and closes and what text it holds; the assembler strips the separators the
renderer writes around parts, records each part's token span and, when streaming, emits
:class:`PartStarted`, :class:`TextDelta` and :class:`PartFinished` events. The helpers at
the end read a part's raw text as the renderer wrote it (a separator prefix, a JSON
object kept as sampled).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from renderers.core.messages import Part, TextPart, ThinkingPart

__all__ = [
    "TEXT",
    "THINKING",
    "TOOL_CALL",
    "Event",
    "PartAssembler",
    "PartFinished",
    "PartStarted",
    "TextDelta",
    "ToolCallBuilder",
    "json_object_members",
    "without_prefix",
]

TEXT = "text"
THINKING = "thinking"
TOOL_CALL = "tool_call"


@dataclass(frozen=True, slots=True)
class PartStarted:
    """A part began: ``kind`` is ``"text"``, ``"thinking"`` or ``"tool_call"``."""

    index: int
    kind: str


@dataclass(frozen=True, slots=True)
class TextDelta:
    """More text of part ``index`` (for a tool call: its raw text as sampled)."""

    index: int
    text: str


# A frozen dataclass sets each field through object.__setattr__, which costs more than
# the rest of the one-token streaming path; the assembler sets the slots directly.
_new_object = object.__new__
_set_delta_index = vars(TextDelta)["index"].__set__
_set_delta_text = vars(TextDelta)["text"].__set__


@dataclass(frozen=True, slots=True)
class PartFinished:
    """Part ``index`` is complete; ``part`` is its final value."""

    index: int
    part: Part


Event: TypeAlias = PartStarted | TextDelta | PartFinished
ToolCallBuilder: TypeAlias = Callable[[list[str], bool], Part]
"""Turns a tool-call region's raw segments into a part; the flag says it was cut off."""


# Deltas are immutable, and building one costs more than the rest of a token's path, so
# the deltas of short texts (a token's or two) are kept and returned again, by part index
# and text, across parsers: a stream mostly repeats tokens other streams had. Bounded:
# parts from _KEPT_PARTS on, and texts beyond _KEPT_TEXTS per part index, get new ones.
_SHORT = 64
_KEPT_PARTS = 8
_KEPT_TEXTS = 4096
_KEPT_DELTAS: list[dict[str, TextDelta]] = [{} for _ in range(_KEPT_PARTS)]


class PartAssembler:
    """Builds the ordered parts of one message from regions of text.

    A format opens a region (text, thinking or tool call) at a token position, writes its
    text, and closes it at another position. Separators the renderer adds around a part are
    removed here: ``strip_prefix`` at the start, and a suffix given at close time for which
    a tail matching ``holdback`` is held back until the region's end is known. A text or
    thinking part starts only when it gets its first character, so an empty region yields
    no part.
    """

    __slots__ = (
        "_channel",
        "_chunks",
        "_deltas",
        "_explicit",
        "_held",
        "_holdback",
        "_index",
        "_prefix",
        "_segments",
        "_sink",
        "_start",
        "events",
        "kind",
        "parts",
        "spans",
    )

    def __init__(self, events: bool) -> None:
        self.parts: list[Part | None] = []
        self.spans: list[tuple[int, int]] = []
        self.events: list[Event] | None = [] if events else None
        self.kind: str | None = None
        self._channel: str | None = None
        self._start = 0
        self._index = -1
        self._explicit = False
        self._prefix = ""
        self._holdback = ""
        self._held = ""
        self._chunks: list[str] = []
        self._segments: list[str] = []
        # The open part's chunks while a write of text that does not end in a holdback
        # character only appends to them (the part began, no prefix to strip, nothing
        # held back), else None: the one check of the streaming fast path.
        self._sink: list[str] | None = None
        # The kept deltas of the open part's index (see _KEPT_DELTAS).
        self._deltas: dict[str, TextDelta] = _KEPT_DELTAS[0]

    def _update_sink(self) -> None:
        if self.kind is not None and self._index >= 0 and not self._prefix and not self._held:
            self._sink = self._chunks
        else:
            self._sink = None

    def open(
        self,
        kind: str,
        start: int,
        *,
        strip_prefix: str = "",
        holdback: str = "",
        channel: str | None = None,
        explicit: bool = False,
    ) -> None:
        """Open a region of ``kind`` whose span starts at token ``start``.

        ``explicit`` regions (opened by a marker) still yield an empty, incomplete part
        when the completion is cut off inside them. Tool-call regions always yield a part.
        """
        self.kind = kind
        self._start = start
        self._channel = channel
        self._explicit = explicit or kind == TOOL_CALL
        self._prefix = strip_prefix
        self._holdback = holdback
        self._held = ""
        self._chunks = []
        self._segments = []
        self._index = -1
        self._sink = None
        if kind == TOOL_CALL:
            self._begin()

    @property
    def start(self) -> int:
        """The token position where the open (or last) region started."""
        return self._start

    def _begin(self) -> None:
        index = self._index = len(self.parts)
        self.parts.append(None)
        self.spans.append((self._start, self._start))
        kind = self.kind
        # (what _update_sink sets, inlined: once per part)
        self._sink = None if kind is None or self._prefix or self._held else self._chunks
        events = self.events
        if events is not None:
            self._deltas = _KEPT_DELTAS[index] if index < _KEPT_PARTS else {}
            events.append(PartStarted(index, kind or TEXT))

    def _emit(self, text: str) -> None:
        if self._index < 0:
            self._begin()
        self._chunks.append(text)
        events = self.events
        if events is not None:
            delta = _new_object(TextDelta)
            _set_delta_index(delta, self._index)
            _set_delta_text(delta, text)
            events.append(delta)

    def write(self, text: str) -> None:
        """Add text to the open region."""
        if not text:
            return
        sink = self._sink
        if sink is None:
            held = self._held
            if held and self._index >= 0:
                text = held + text  # the part began; only text held back goes first
                self._held = ""
                sink = self._sink = self._chunks
            elif held or self._prefix or self.kind is None or text[-1] in self._holdback:
                # (text is held only once a prefix is stripped; a part begins with text
                # that is not held back)
                self._write(text)
                self._update_sink()
                return
            else:  # nothing to strip or release: a region's first text begins its part
                if self._index < 0:
                    self._begin()
                sink = self._sink = self._chunks
        holdback = self._holdback
        if text[-1] in holdback:
            # The longest tail of the text that begins the holdback (a one-character
            # holdback: that character).
            if len(holdback) == 1:
                k = 1
            else:
                k = min(len(text), len(holdback))
                while k and not holdback.startswith(text[-k:]):
                    k -= 1
            if k:
                self._held = text[-k:]
                self._sink = None
                text = text[:-k]
                if not text:
                    return
        sink.append(text)
        events = self.events
        if events is not None:
            if len(text) <= _SHORT:
                events.append(self._deltas.get(text) or self._delta(text))
            else:
                delta = _new_object(TextDelta)
                _set_delta_index(delta, self._index)
                _set_delta_text(delta, text)
                events.append(delta)

    def _delta(self, text: str) -> TextDelta:
        """A new delta of the open part's ``text``, kept (see _KEPT_DELTAS)."""
        delta = _new_object(TextDelta)
        _set_delta_index(delta, self._index)
        _set_delta_text(delta, text)
        deltas = self._deltas
        if len(deltas) < _KEPT_TEXTS:
            deltas[text] = delta
        return delta

    def _write(self, text: str) -> None:
        prefix = self._prefix
        if prefix:
            if text.startswith(prefix):
                n = len(prefix)
            else:
                n = 0
                limit = min(len(prefix), len(text))
                while n < limit and text[n] == prefix[n]:
                    n += 1
            if n == len(text) and n < len(prefix):
                self._prefix = prefix[n:]
                return
            self._prefix = ""
            text = text[n:]
            if not text:
                return
        holdback = self._holdback
        if holdback and (self._held or text[-1] in holdback):
            if self._held:
                text = self._held + text
                self._held = ""
            k = min(len(text), len(holdback))
            while k and not holdback.startswith(text[-k:]):
                k -= 1
            if k:
                self._held = text[-k:]
                text = text[:-k]
                if not text:
                    return
        self._emit(text)

    def next_segment(self, separator: str = "") -> None:
        """Start a new raw segment of the open tool-call region (e.g. name, then args).

        ``separator`` is the marker's spelling that the call's raw text joins segments
        with: it is streamed as a delta too, so a part's deltas spell its raw text.
        """
        if self._held:
            self._flush_held("")
        self._segments.append("".join(self._chunks))
        chunks = self._chunks = []
        plain = self.kind is not None and self._index >= 0 and not self._prefix
        self._sink = chunks if plain else None  # (what _update_sink sets, inlined)
        if separator and self.events is not None:
            if self._index < 0:
                self._begin()
            self.events.append(TextDelta(self._index, separator))

    def _flush_held(self, strip_suffix: str) -> None:
        held = self._held
        if held:
            self._held = ""
            if strip_suffix and held.endswith(strip_suffix):
                held = held[: -len(strip_suffix)]
            if held:
                self._emit(held)
            self._update_sink()

    def close(
        self,
        end: int,
        *,
        strip_suffix: str = "",
        incomplete: bool = False,
        build: ToolCallBuilder | None = None,
    ) -> Part | None:
        """Close the open region at token ``end`` (exclusive); returns the part it made.

        ``strip_suffix`` is removed if the held-back tail ends with it (the separator the
        renderer puts before the next marker). ``build`` turns a tool call's raw segments
        into its part.
        """
        kind = self.kind
        if kind is None:
            return None
        self.kind = None
        if self._held:
            self._flush_held(strip_suffix)
        self._sink = None
        part: Part | None
        chunks = self._chunks
        self._chunks = []  # not kept alive with the part's text
        if kind == TOOL_CALL:
            segments = [*self._segments, "".join(chunks)]
            self._segments = []
            assert build is not None, "closing a tool-call region needs a builder"
            part = build(segments, incomplete)
        elif self._index >= 0:
            text = "".join(chunks)
            del chunks
            if kind == THINKING:
                part = ThinkingPart(text, self._channel, incomplete)
            else:
                part = TextPart(text, self._channel, incomplete)
        elif incomplete and self._explicit:
            self._begin()
            part = (
                ThinkingPart("", self._channel, True)
                if kind == THINKING
                else TextPart("", self._channel, True)
            )
        else:
            return None
        self.parts[self._index] = part
        self.spans[self._index] = (self._start, end)
        if self.events is not None:
            self.events.append(PartFinished(self._index, part))
        return part

    def add(self, part: Part, start: int, end: int, raw: str = "") -> None:
        """Append a whole part (no open region may be pending); ``raw`` is its text as
        sampled, given to event listeners as one delta."""
        assert self.kind is None, "add() while a region is open"
        index = len(self.parts)
        self.parts.append(part)
        self.spans.append((start, end))
        if self.events is not None:
            self.events.append(PartStarted(index, _kind_of(part)))
            if raw:
                self.events.append(TextDelta(index, raw))
            self.events.append(PartFinished(index, part))


def _kind_of(part: Part) -> str:
    if type(part) is TextPart:
        return TEXT
    if type(part) is ThinkingPart:
        return THINKING
    return TOOL_CALL


def without_prefix(text: str, prefix: str) -> str:
    """``text`` without its longest beginning that begins ``prefix`` (what the assembler
    strips of a separator the renderer writes)."""
    if text.startswith(prefix):
        return text[len(prefix) :]
    n = 0
    limit = min(len(prefix), len(text))
    while n < limit and text[n] == prefix[n]:
        n += 1
    return text[n:]


_JSON = json.JSONDecoder()
_WS = " \t\n\r"


def _skip_ws(s: str, i: int) -> int:
    n = len(s)
    while i < n and s[i] in _WS:
        i += 1
    return i


def json_object_members(text: str) -> list[tuple[str, Any, str]]:
    """Parse a JSON object, returning ``(key, value, raw value text)`` per member.

    The raw text is the value exactly as written, so tool-call arguments can be kept as
    sampled instead of re-serialised. Raises ``ValueError`` on anything but one object.
    """
    i = _skip_ws(text, 0)
    if i >= len(text) or text[i] != "{":
        raise ValueError("expected a JSON object")
    i = _skip_ws(text, i + 1)
    members: list[tuple[str, Any, str]] = []
    if i < len(text) and text[i] == "}":
        i += 1
    else:
        while True:
            if i >= len(text) or text[i] != '"':
                raise ValueError(f"expected a string key at character {i}")
            key, i = json.decoder.scanstring(text, i + 1)  # type: ignore[attr-defined]
            i = _skip_ws(text, i)
            if i >= len(text) or text[i] != ":":
                raise ValueError(f"expected ':' at character {i}")
            i = _skip_ws(text, i + 1)
            value, j = _JSON.raw_decode(text, i)
            members.append((key, value, text[i:j]))
            i = _skip_ws(text, j)
            if i < len(text) and text[i] == ",":
                i = _skip_ws(text, i + 1)
                continue
            if i < len(text) and text[i] == "}":
                i += 1
                break
            raise ValueError(f"expected ',' or '}}' at character {i}")
    if _skip_ws(text, i) != len(text):
        raise ValueError(f"extra data after the JSON object at character {i}")
    return members
