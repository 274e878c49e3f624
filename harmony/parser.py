"""Harmony's grammar as one token-level state machine, batch and incremental.

Structure comes from control-token ids; only the header between ``<|start|>`` and
``<|message|>`` is read as text (role, ``to=`` recipient, content type)::

    EXPECT_START --<|start|>--> HEADER --<|message|>--> BODY --<|end|>, <|return|>, <|call|>
         ^                       <|channel|>, <|constrain|>                             |
         +-------------------------------------------------------------------------------+

:class:`HarmonyMachine` is fed decoded text runs and control tokens and reports to a
:class:`MessageSink` (``begin(header)``, ``body(text)``, ``close(...)``). It is the one
description of the grammar: the same transitions read a whole completion and one fed in
pieces. It drives :class:`HarmonyStreamParser` (a sink collecting :class:`HarmonyMessage`
objects) and :class:`harmony.parts.HarmonyPartsParser` (a sink building message parts:
gpt-oss and Harmony chat templates). Decoding, id validation and how ids are fed come
from :class:`renderers.core.engine.StreamParser`.

Lenient (default) parsing accepts what models sample and repairs what they break; strict
parsing accepts only the canonical form the renderer writes and raises
:class:`HarmonyError` naming what was expected at which token. Accepted silently in
lenient mode: the recipient after the channel (``<|channel|>commentary to=functions.x``),
``<|constrain|>`` glued to the preceding word, a truncated body (marked ``truncated``).
Repaired and reported as issues: a missing ``<|message|>`` before an end token, a
``<|start|>`` or the end of the tokens (the header's trailing text that a header cannot
hold becomes the body: no sampled text is lost), a stray or repeated ``<|start|>``, an unknown
channel (kept), an assistant message without a channel, control tokens inside a body
(``<|channel|>`` or ``<|start|>`` start a new message, others are dropped), text between
messages (kept as a message without a header unless it is only whitespace).

Unlike openai-harmony, a control token inside a body is never returned as body text.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol, TypeAlias

import numpy as np

from harmony.messages import CHANNELS, CONSTRAIN, ROLES, HarmonyMessage, HarmonyTokens
from renderers.core.engine import StreamParser
from renderers.core.result import ParseIssue
from renderers.core.tokens import TokenTable

__all__ = [
    "ContentDelta",
    "HarmonyError",
    "HarmonyEvent",
    "HarmonyMachine",
    "HarmonyParseResult",
    "HarmonyStreamParser",
    "Header",
    "MessageFinished",
    "MessageSink",
    "MessageStarted",
]


class HarmonyError(ValueError):
    """A strict-mode parse error at token ``position``."""

    def __init__(self, position: int, message: str) -> None:
        super().__init__(f"token {position}: {message}")
        self.position = position


@dataclass(frozen=True, slots=True)
class Header:
    """A parsed message header; ``start`` is the token where the message begins."""

    role: str
    name: str | None
    channel: str | None
    recipient: str | None
    content_type: str | None
    start: int
    stray: tuple[tuple[int, str], ...] = ()
    """Words sampled in the header that are none of its fields (reported as an issue),
    as sampled, per header segment with the segment's token position: a parser keeps
    them as text so that no sampled character is lost."""
    body_start: int = 0
    """With ``stray`` words: the token where the body's text begins (its ``<|message|>``,
    or the last header segment when the header ran into the body)."""


class MessageSink(Protocol):
    """What the machine reports to: one ``begin``, some ``body`` texts, one ``close`` per
    message. ``close`` gets the end position (exclusive), the end token's name
    (``"end"``, ``"return"``, ``"call"``, or ``None``) and whether the tokens ran out."""

    def begin(self, header: Header) -> None: ...

    def body(self, text: str) -> None: ...

    def close(self, end: int, end_token: str | None, truncated: bool) -> None: ...


# -- header parsing --------------------------------------------------------------------

_ROLE, _CHANNEL, _CONSTRAIN = 0, 1, 2
_SEGMENT_TOKEN = {_CHANNEL: "<|channel|>", _CONSTRAIN: CONSTRAIN}
_WORD = re.compile(r"\S+")
_IDENTIFIER = re.compile(r"[\w.+/-]*")

Problem: TypeAlias = tuple[int, bool, str]
"""(token position, silent in lenient mode, message)."""


def _author(word: str) -> tuple[str, str | None]:
    """Role and name of a header's author word (``user``, ``user:bob``, ``functions.x``)."""
    if word in ROLES:
        return word, None
    role, sep, name = word.partition(":")
    if sep and role in ROLES:
        return role, name
    return "tool", word


def _header_cut(kind: int, text: str, need_role: bool, recipient_seen: bool) -> int:
    """Where the header ends inside the last header segment when no ``<|message|>``
    followed: after the words a header can hold, before the first that it cannot."""
    if kind == _CONSTRAIN:
        lead = len(text) - len(text.lstrip())
        match = _IDENTIFIER.match(text, lead)
        return match.end() if match else lead
    end = 0
    content_type_taken = False
    for k, match in enumerate(_WORD.finditer(text)):
        word = match.group()
        if k == 0 and (kind == _CHANNEL or need_role):
            pass
        elif word.startswith("to="):
            recipient_seen = True
        elif (
            kind == _CHANNEL
            and recipient_seen
            and not content_type_taken
            and _IDENTIFIER.fullmatch(word)
        ):
            content_type_taken = True
        else:
            return match.start()
        end = match.end()
    return end


def parse_header(
    kinds: Sequence[int],
    texts: list[str],
    marks: Sequence[int],
    *,
    role: str | None,
    default_role: str,
    valid_channels: Sequence[str] | None,
    missing_message: bool,
) -> tuple[Header, str | None, list[Problem]]:
    """Read a header from its segments: the text after ``<|start|>`` (``kinds[0]``), then
    one segment per ``<|channel|>`` or ``<|constrain|>`` with the text that follows it.
    ``marks`` are the segments' token positions. ``role`` is the author when it is already
    known (the completion of a generation prompt ending ``<|start|>assistant``).

    With ``missing_message`` the header was ended by an end token; the trailing text that
    cannot belong to a header is returned as the body.
    """
    problems: list[Problem] = []
    body: str | None = None
    last = len(kinds) - 1
    if missing_message:
        seen = any("to=" in t for t in texts[:last])
        text = texts[last]
        cut = _header_cut(kinds[last], text, role is None and last == 0, seen)
        texts = [*texts[:last], text[:cut]]
        body = text[cut:].lstrip()
    name: str | None = None
    channel: str | None = None
    recipient: str | None = None
    channel_at = marks[0]
    content_types: list[tuple[str, int, int]] = []
    """Content-type candidates: the word, its segment and its character offset there."""

    def word(w: str, i: int, at: int, after_channel: bool) -> None:
        nonlocal recipient
        if w.startswith("to="):
            if recipient is not None:
                problems.append((marks[i], False, f"a second recipient {w!r} (ignored)"))
                return
            recipient = w[3:]
            if not recipient:
                problems.append((marks[i], False, "an empty recipient 'to='"))
                recipient = None
            elif after_channel:
                problems.append(
                    (marks[i], True, "expected the recipient before <|channel|>, found it after")
                )
        else:
            content_types.append((w, i, at))

    words = _words(texts[0])
    if role is None:
        if words:
            role, name = _author(words.pop(0)[0])
            if role == "tool" and "." not in (name or "") and not words:
                problems.append((marks[0], False, f"unknown role {name!r} (read as a tool name)"))
        else:
            problems.append((marks[0], False, "expected a role after <|start|>"))
            role = default_role
    elif words and words[0][0] == role:
        words.pop(0)
    for w, at in words:
        word(w, 0, at, False)
    for i in range(1, last + 1):
        text = texts[i]
        words = _words(text)
        token = _SEGMENT_TOKEN[kinds[i]]
        if words and text[0].isspace():
            problems.append((marks[i], True, f"expected no whitespace after {token}"))
        if kinds[i] == _CHANNEL:
            if not words:
                problems.append((marks[i], False, "expected a channel name after <|channel|>"))
                continue
            if channel is not None:
                problems.append(
                    (marks[i], False, f"a second <|channel|> {words[0][0]!r} (ignored)")
                )
            else:
                channel, channel_at = words[0][0], marks[i]
            for w, at in words[1:]:
                word(w, i, at, True)
        else:
            before = texts[i - 1]
            if not before or not before[-1].isspace():
                problems.append((marks[i], True, "expected a space before <|constrain|>"))
            if not words:
                problems.append((marks[i], False, "expected a content type after <|constrain|>"))
                continue
            content_types.append((CONSTRAIN + words[0][0], i, words[0][1]))
            for w, at in words[1:]:
                word(w, i, at, True)
    content_type = None
    stray: tuple[tuple[int, str], ...] = ()
    if content_types:
        constrained = [c for c in content_types if c[0].startswith(CONSTRAIN)]
        chosen = (constrained or content_types)[-1]
        content_type, where, _ = chosen
        others = [c for c in content_types if c is not chosen]
        if others:
            problems.append(
                (marks[where], False, f"unexpected words in the header: {[c[0] for c in others]}")
            )
            stray = _stray_text(texts, marks, others)
        if where == 0 and last > 0:
            problems.append(
                (marks[0], True, "expected the content type after the channel, found it before")
            )
    if channel is None and role == "assistant" and _CHANNEL not in kinds:
        problems.append((marks[0], False, "expected <|channel|> in an assistant message header"))
    elif channel is not None and valid_channels is not None and channel not in valid_channels:
        problems.append(
            (
                channel_at,
                False,
                f"unknown channel {channel!r} (expected one of {', '.join(valid_channels)}; kept)",
            )
        )
    header = Header(role, name, channel, recipient, content_type, marks[0], stray)
    return header, body, problems


def _words(text: str) -> list[tuple[str, int]]:
    """The whitespace-separated words of ``text`` with their offsets."""
    return [(m.group(), m.start()) for m in _WORD.finditer(text)]


def _stray_text(
    texts: Sequence[str], marks: Sequence[int], words: Sequence[tuple[str, int, int]]
) -> tuple[tuple[int, str], ...]:
    """The sampled text of stray header words per segment (with the segment's position):
    from the first word's start to the last word's end, the whitespace between as sampled."""
    spans: dict[int, tuple[int, int]] = {}
    for w, i, at in words:
        if w.startswith(CONSTRAIN):
            w = w[len(CONSTRAIN) :]
        first, end = spans.get(i, (at, at))
        spans[i] = (min(first, at), max(end, at + len(w)))
    return tuple((marks[i], texts[i][a:b]) for i, (a, b) in sorted(spans.items()))


def read_header(
    kinds: Sequence[int],
    texts: list[str],
    marks: Sequence[int],
    *,
    role: str | None,
    default_role: str,
    valid_channels: tuple[str, ...] | None,
    missing_message: bool,
) -> tuple[Header, str | None, list[Problem]]:
    """:func:`parse_header`, reading each header once: headers repeat
    (``assistant<|channel|>analysis``, the same tool's recipient), so a header read is kept
    with segment indexes for its token positions and placed at ``marks`` on every use."""
    if sum(map(len, texts)) > _KEPT_HEADER_TEXT:  # a header that ran into its body
        return parse_header(
            kinds,
            texts,
            marks,
            role=role,
            default_role=default_role,
            valid_channels=valid_channels,
            missing_message=missing_message,
        )
    key = (tuple(kinds), tuple(texts), role, default_role, valid_channels, missing_message)
    read = _KEPT_HEADERS.get(key)
    if read is None:
        header, body, found = parse_header(
            kinds,
            texts,
            range(len(texts)),
            role=role,
            default_role=default_role,
            valid_channels=valid_channels,
            missing_message=missing_message,
        )
        read = header, body, tuple(found)
        if len(_KEPT_HEADERS) >= _KEPT_HEADERS_MAX:
            _KEPT_HEADERS.clear()
        _KEPT_HEADERS[key] = read
    header, body, problems = read
    stray = header.stray
    placed = Header(
        header.role,
        header.name,
        header.channel,
        header.recipient,
        header.content_type,
        marks[header.start],
        tuple((marks[i], text) for i, text in stray) if stray else stray,
    )
    if not problems:
        return placed, body, []
    return placed, body, [(marks[i], silent, message) for i, silent, message in problems]


_KEPT_HEADER_TEXT = 256
_KEPT_HEADERS_MAX = 4096
_KEPT_HEADERS: dict[tuple[Any, ...], tuple[Header, str | None, tuple[Problem, ...]]] = {}


# -- the state machine -------------------------------------------------------------------


_EXPECT_START, _HEADER, _BODY, _HALTED = 0, 1, 2, 3


class HarmonyMachine:
    """The Harmony state machine. Feed it decoded text (:meth:`text`), control tokens
    (:meth:`token`) and the end of the input (:meth:`end`); it reports messages to its
    sink. ``role`` given: the input starts inside a header whose author is known."""

    __slots__ = (
        "_after",
        "_default_role",
        "_ends",
        "_given",
        "_kinds",
        "_marks",
        "_report",
        "_role",
        "_sink",
        "_spell",
        "_state",
        "_stray",
        "_strict",
        "_texts",
        "_tk",
        "_valid",
        "_valid_key",
        "_write",
        "at",
    )

    def __init__(
        self,
        tokens: HarmonyTokens,
        sink: MessageSink,
        *,
        role: str | None,
        strict: bool,
        report: Callable[[int, str], None],
        spell: Callable[[int], str | None],
        valid_channels: Sequence[str] | None = CHANNELS,
        default_role: str = "assistant",
    ) -> None:
        self._tk = tokens
        self._spell = spell
        self._ends = tokens.ends
        self._sink = sink
        self._write = sink.body
        self._strict = strict
        self._report = report
        self._valid = valid_channels
        self._valid_key = None if valid_channels is None else tuple(valid_channels)
        self._default_role = role or default_role
        self._role = self._default_role
        self._stray: list[str] = []
        self._after = 0  # the position after the last control token
        self.at = 0
        """The position of the control token (or of the end) being read."""
        self._given: str | None = None
        self._kinds: list[int] = []
        self._texts: list[list[str]] = []
        self._marks: list[int] = []
        self._state = _EXPECT_START
        if role is not None:
            self._begin(0, role)

    # -- inspection ------------------------------------------------------------------------

    @property
    def in_header(self) -> bool:
        return self._state == _HEADER

    @property
    def in_body(self) -> bool:
        """Whether text now is message body (it goes to the sink's ``body`` unchanged)."""
        return self._state == _BODY

    @property
    def header_start(self) -> int:
        """The token where the current (or last) header began."""
        return self._marks[0] if self._marks else 0

    @property
    def pending_header(self) -> str | None:
        """The header read so far when the input stops inside one (control tokens spelled
        out), else ``None``."""
        if self._state != _HEADER:
            return None
        out = "".join(self._texts[0])
        for kind, chunks in zip(self._kinds[1:], self._texts[1:], strict=True):
            out += _SEGMENT_TOKEN[kind] + "".join(chunks)
        return out

    def halt(self) -> None:
        """Ignore all further input (the driver stopped reading)."""
        self._state = _HALTED

    # -- input -------------------------------------------------------------------------------

    def text(self, text: str) -> None:
        """Decoded ordinary text."""
        state = self._state
        if state == _BODY:
            self._write(text)
        elif state == _HEADER:
            self._texts[-1].append(text)
        elif state == _EXPECT_START:
            self._stray.append(text)

    def token(self, t: int, pos: int) -> None:
        """A control token at position ``pos``."""
        self.at = pos
        if self._stray:
            self._resolve_stray(pos)
        self._after = pos + 1
        state = self._state
        tk = self._tk
        end_name = self._ends.get(t)
        if end_name is not None:
            if state == _BODY:
                self._close(pos + 1, end_name)
            elif state == _HEADER:
                self._header_without_message(pos, end_name)
            elif state == _EXPECT_START:
                self._problem(pos, False, f"<|{end_name}|> outside a message (ignored)")
        elif t == tk.message:
            if state == _HEADER:
                self._open_body(pos, missing_message=False)
            elif state == _BODY:
                self._keep(t, pos, "<|message|> inside a message body")
            elif state == _EXPECT_START:
                self._problem(pos, False, "expected <|start|> before <|message|>")
                self._begin(pos, self._default_role)
                self._open_body(pos, missing_message=False)
        elif t == tk.start:
            if state == _BODY:
                self._problem(
                    pos, False, "expected <|end|>, <|return|> or <|call|> before <|start|>"
                )
                self._close(pos, None)
            elif state == _HEADER:
                header = self.pending_header or ""
                if not header.strip():
                    self._problem(pos, False, "a repeated <|start|> (ignored)")
                    return
                if self._header_body():
                    # Text sampled where a header belongs (e.g. an answer without a header,
                    # then a real message): a message of its own, nothing lost.
                    self._problem(
                        pos, False, "expected <|message|> before <|start|> (the text is kept)"
                    )
                    body = self._open_body(pos, missing_message=True)
                    if self._state == _BODY:
                        if body:
                            self._write(body)
                        self._close(pos, None)
                else:
                    self._problem(
                        pos, False, f"<|start|> inside a header: the header {header!r} is dropped"
                    )
            elif state == _HALTED:
                return
            self._begin(pos, None)
        elif t == tk.channel or t == tk.constrain:
            kind = _CHANNEL if t == tk.channel else _CONSTRAIN
            if state in (_BODY, _EXPECT_START):
                if kind == _CONSTRAIN:
                    self._keep(t, pos, "<|constrain|> outside a message header")
                    return
                if state == _BODY:
                    self._problem(
                        pos,
                        False,
                        "expected <|end|>, <|return|> or <|call|> before <|channel|>: "
                        "a new message starts here",
                    )
                    self._close(pos, None)
                else:
                    self._problem(pos, False, "expected <|start|> before <|channel|>")
                self._begin(pos, self._role)
            elif state == _HALTED:
                return
            self._kinds.append(kind)
            self._texts.append([])
            self._marks.append(pos)
        elif state != _HALTED:
            self._keep(t, pos, f"unexpected control token {self._spell(t) or t}")

    def end(self, pos: int, stop: int | None) -> None:
        """The input ends at ``pos``: at the stop token ``stop`` (an end token, or an
        end-of-sequence token that closes what is open), or cut off when ``None``."""
        if stop is not None and stop in self._ends:
            self.token(stop, pos)
            return
        self.at = pos
        if self._stray:
            self._resolve_stray(pos)
        state = self._state
        if stop is not None:
            if state == _BODY:
                self._close(pos + 1, None)
            elif state == _HEADER:
                self._header_without_message(pos, None)
        elif state == _BODY:
            if self._strict:
                raise HarmonyError(
                    pos, "expected <|end|>, <|return|> or <|call|> before the end of the tokens"
                )
            self._close(pos, None, truncated=True)
        elif state == _HEADER and self._strict:
            raise HarmonyError(pos, "expected <|message|> before the end of the tokens")
        elif state == _HEADER and self._header_body():
            # Cut off where a header belongs, after text a header cannot hold (a completion
            # that is only an answer): that text is the body of a truncated message.
            self._problem(pos, False, "expected <|message|> before the end of the tokens")
            body = self._open_body(pos, missing_message=True)
            if self._state == _BODY:
                if body:
                    self._write(body)
                self._close(pos, None, truncated=True)

    # -- transitions -------------------------------------------------------------------------

    def _keep(self, t: int, pos: int, what: str) -> None:
        """A control token the format has no place for here: text the model sampled, kept
        where it was sampled (body, header or between messages) and reported."""
        self._problem(pos, False, f"{what} (kept as text)")
        if self._state == _EXPECT_START and not self._stray:
            self._after = pos
        self.text(self._spell(t) or "")

    def _problem(self, pos: int, silent: bool, message: str) -> None:
        if self._strict:
            raise HarmonyError(pos, message)
        if not silent:
            self._report(pos, message)

    def _begin(self, pos: int, role: str | None) -> None:
        self._state = _HEADER
        self._given = role
        self._kinds = [_ROLE]
        self._texts = [[]]
        self._marks = [pos]

    def _read_header(self, missing_message: bool) -> tuple[Header, str | None, list[Problem]]:
        return read_header(
            self._kinds,
            list(map("".join, self._texts)),
            self._marks,
            role=self._given,
            default_role=self._default_role,
            valid_channels=self._valid_key,
            missing_message=missing_message,
        )

    def _header_body(self) -> str:
        """The text of the open header that a header cannot hold (the body it ran into)."""
        return self._read_header(missing_message=True)[1] or ""

    def _open_body(self, pos: int, missing_message: bool) -> str | None:
        """End the header at the control token at ``pos`` and start the body; returns body
        text the header ran into (it was sampled after the last header segment's mark)."""
        header, body, problems = self._read_header(missing_message)
        for at, silent, message in problems:
            self._problem(at, silent, message)
        if header.stray:
            header = replace(header, body_start=self._marks[-1] if missing_message else pos)
        self._state = _BODY
        self._role = header.role
        self._sink.begin(header)
        return body

    def _header_without_message(self, pos: int, end_name: str | None) -> None:
        spelled = f"<|{end_name}|>" if end_name else "the end-of-sequence token"
        self._problem(pos, False, f"expected <|message|> before {spelled}")
        body = self._open_body(pos, missing_message=True)
        if self._state != _BODY:
            return
        if body:
            self._write(body)
        self._close(pos + 1, end_name)

    def _close(self, end: int, end_name: str | None, truncated: bool = False) -> None:
        self._state = _EXPECT_START
        self._sink.close(end, end_name, truncated)

    def _resolve_stray(self, pos: int) -> None:
        text = "".join(self._stray)
        self._stray = []
        if not text.strip():
            self._problem(pos, False, f"whitespace {text!r} between messages (dropped)")
            return
        # Text outside a message starts right after the last control token: decoding may
        # deliver it a token later (a character split across tokens), so that is its start.
        start = self._after
        self._problem(start, False, "text outside a message (kept as a message without a header)")
        self._state = _BODY
        self._sink.begin(Header(self._default_role, None, None, None, None, start))
        if self._state == _BODY:
            self._write(text)


# -- the standalone parser -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MessageStarted:
    """Message ``index`` began; its header is known."""

    index: int
    header: Header


@dataclass(frozen=True, slots=True)
class ContentDelta:
    """More body text of message ``index``."""

    index: int
    text: str


@dataclass(frozen=True, slots=True)
class MessageFinished:
    """Message ``index`` is complete."""

    index: int
    message: HarmonyMessage


HarmonyEvent: TypeAlias = MessageStarted | ContentDelta | MessageFinished


@dataclass(frozen=True, slots=True)
class HarmonyParseResult:
    """Parsed messages in order, the issues lenient parsing repaired, and the header text
    read so far if the tokens ended inside a header (``None`` otherwise)."""

    messages: tuple[HarmonyMessage, ...]
    issues: tuple[ParseIssue, ...] = ()
    pending_header: str | None = None


class _Collector:
    """A sink that builds :class:`HarmonyMessage` objects and events."""

    __slots__ = ("_chunks", "_header", "events", "messages")

    def __init__(self, events: bool) -> None:
        self.messages: list[HarmonyMessage] = []
        self.events: list[HarmonyEvent] | None = [] if events else None
        self._header: Header | None = None
        self._chunks: list[str] = []

    def begin(self, header: Header) -> None:
        self._header = header
        self._chunks = []
        if self.events is not None:
            self.events.append(MessageStarted(len(self.messages), header))

    def body(self, text: str) -> None:
        self._chunks.append(text)
        if self.events is not None:
            self.events.append(ContentDelta(len(self.messages), text))

    def close(self, end: int, end_token: str | None, truncated: bool) -> None:
        h = self._header
        assert h is not None
        message = HarmonyMessage(
            h.role,
            "".join(self._chunks),
            name=h.name,
            channel=h.channel,
            recipient=h.recipient,
            content_type=h.content_type,
            span=(h.start, end),
            end=end_token,
            truncated=truncated,
        )
        if self.events is not None:
            self.events.append(MessageFinished(len(self.messages), message))
        self.messages.append(message)


class _Driver(StreamParser):
    """Feeds the machine from token ids: every control token is structural, none stops."""

    def __init__(
        self,
        table: TokenTable,
        sink: MessageSink,
        *,
        role: str | None,
        strict: bool,
        valid_channels: Sequence[str] | None,
    ) -> None:
        super().__init__(table, structural=table.control_ids, stop_ids=(), events=False)
        self.machine = HarmonyMachine(
            HarmonyTokens.of(table),
            sink,
            role=role,
            strict=strict,
            report=self._issue,
            spell=table.control_text,
            valid_channels=valid_channels,
        )
        self._on_token = self.machine.token  # type: ignore[method-assign,assignment]
        self._on_text = self.machine.text  # type: ignore[method-assign]

    def _on_end(self, pos: int, stopped: bool) -> None:
        self.machine.end(pos, None)

    @property
    def issues(self) -> tuple[ParseIssue, ...]:
        return tuple(self._issues)


class HarmonyStreamParser:
    """Incremental Harmony parser: ``feed(ids) -> events``, ``finish() -> result``.

    ``role``: the author of the first message when the ids start inside its header (a
    completion after ``<|start|>assistant``); ``None`` when they start at ``<|start|>``.
    End tokens close messages and parsing continues after them, as in openai-harmony's
    ``parse_messages_from_completion_tokens``. Feeding the ids in any split gives the same
    result.
    """

    def __init__(
        self,
        table: TokenTable,
        *,
        role: str | None = None,
        strict: bool = False,
        valid_channels: Sequence[str] | None = CHANNELS,
        events: bool = True,
    ) -> None:
        self._sink = _Collector(events)
        self._driver = _Driver(
            table, self._sink, role=role, strict=strict, valid_channels=valid_channels
        )

    @property
    def messages(self) -> list[HarmonyMessage]:
        """The messages completed so far."""
        return list(self._sink.messages)

    def feed(self, token_ids: Sequence[int] | np.ndarray[Any, Any]) -> list[HarmonyEvent]:
        """Consume more ids; returns the events they produced."""
        sink = self._sink
        if sink.events is not None:
            sink.events = []
        self._driver.feed(token_ids)
        return sink.events if sink.events is not None else []

    def finish(self) -> HarmonyParseResult:
        """End of the ids: close what is open and return the messages."""
        sink = self._sink
        if sink.events is not None:
            sink.events = []
        self._driver.finish()
        return HarmonyParseResult(
            tuple(sink.messages), self._driver.issues, self._driver.machine.pending_header
        )

    @property
    def final_events(self) -> list[HarmonyEvent]:
        """The events :meth:`finish` produced."""
        return self._sink.events or []
