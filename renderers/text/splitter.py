"""The streaming splitter: content and reasoning blocks, as the text arrives.

It reads in three modes: content (looking for an opening tag), a block's body (looking
for the tag that ends it) and an attribute style's opening tag
(:class:`~renderers.text.attribute_tag.AttributeTag`). Tags are found by
:mod:`renderers.text.tags`, whitespace is decided by :mod:`renderers.text.whitespace`,
parts and events are built by :mod:`renderers.text.events`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from renderers.core.assembly import TEXT, THINKING, Event
from renderers.core.grammars import json_call_builder
from renderers.core.messages import ThinkingPart, ToolCallPart, UnparsedToolCallPart
from renderers.core.result import ParseIssue
from renderers.text.attribute_tag import BODY, CLOSED, CUT_OFF, NEED_MORE, AttributeTag
from renderers.text.events import PartStream, ReasoningPart
from renderers.text.styles import TOOL_CALL_TAG, StyleSpec, TagStyle, resolve_style
from renderers.text.tags import MATCH, MORE, NO, compile_styles
from renderers.text.thought import attribute_problems
from renderers.text.whitespace import ReasoningTrim, Whitespace, content_whitespace

__all__ = ["ReasoningSplitter", "iter_split", "split_reasoning"]

_CONTENT, _BODY, _TAG = range(3)
_WS_RUN = re.compile(r"[ \t\r\n]*")


def _styles(style: StyleSpec, tool_calls: bool) -> tuple[TagStyle, ...]:
    styles = resolve_style(style)
    if tool_calls and TOOL_CALL_TAG not in styles:
        styles = (*styles, TOOL_CALL_TAG)
    return styles


class ReasoningSplitter:
    """Incremental reasoning splitter: ``feed(chunk) -> events``, ``finish() -> events``.

    Chunks may be split anywhere, even inside a tag; the parts are the same as
    :func:`split_reasoning` on the whole text. After :meth:`finish`, :attr:`parts` holds
    every part and :attr:`issues` the problems seen (stray closing tags, unterminated
    blocks, malformed or dropped attributes), positioned by character offset in the text.

    ``whitespace`` decides the content around a removed block
    (:mod:`renderers.text.whitespace`): ``"tidy"`` (the default) leaves natural text,
    ``"keep"`` leaves the text on both sides exactly as written.

    ``tool_calls=True`` also takes tool calls written as text out of the content,
    ``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` (:data:`TOOL_CALL_TAG`;
    Qwen3 and other Hermes-style models), as a
    :class:`~renderers.core.messages.ToolCallPart` whose ``arguments`` are the JSON text
    as written. A call that does not parse, or that the text cuts off, is an
    :class:`~renderers.core.messages.UnparsedToolCallPart` holding its body verbatim, and
    an issue. Inside reasoning a ``<tool_call>`` is reasoning text.
    """

    __slots__ = (
        "_base",
        "_block",
        "_buf",
        "_call",
        "_call_start",
        "_content",
        "_eof",
        "_finished",
        "_issues",
        "_mode",
        "_out",
        "_start_open",
        "_tag",
        "_tags",
        "_total",
        "_trim",
    )

    def __init__(
        self,
        style: StyleSpec = "auto",
        *,
        whitespace: Whitespace = "tidy",
        tool_calls: bool = False,
    ) -> None:
        self._tags = compile_styles(_styles(style, tool_calls))
        self._content = content_whitespace(whitespace)
        self._buf = ""
        self._base = 0  # offset of _buf[0] in the whole text
        self._total = 0
        self._eof = False
        self._finished = False
        self._issues: list[ParseIssue] = []
        self._out = PartStream()
        self._trim = ReasoningTrim()
        self._tag: AttributeTag | None = None
        self._mode = _CONTENT
        self._block = -1  # the style index of the open block
        self._call: list[str] | None = None  # the body of an open tool call
        self._call_start = 0  # the offset of its opening tag
        self._start_open = False  # forced: a leading opening tag may still come
        if self._tags.forced >= 0:
            self._open_block(self._tags.forced)
            self._mode = _BODY
            self._start_open = True

    # -- public --------------------------------------------------------------------------

    def feed(self, chunk: str) -> list[Event]:
        """Consume more text; returns the events it produced."""
        if self._finished:
            raise RuntimeError("feed() called after finish()")
        if not isinstance(chunk, str):
            raise TypeError(f"chunk: expected str, got {type(chunk).__name__} (decode it first)")
        if chunk:
            self._total += len(chunk)
            self._buf = self._buf + chunk if self._buf else chunk
            self._run()
        return self._out.take_events()

    def finish(self) -> list[Event]:
        """End of the text: release what was held back, close what is open."""
        if self._finished:
            raise RuntimeError("finish() called twice")
        self._finished = True
        self._eof = True
        self._run()
        if self._mode == _BODY and self._total:
            self._close_block(incomplete=True)
        self._write(TEXT, self._content.finish())
        if self._out.kind is not None:
            self._out.finish()
        return self._out.take_events()

    @property
    def parts(self) -> tuple[ReasoningPart, ...]:
        """The finished parts so far (all of them after :meth:`finish`)."""
        return tuple(self._out.parts)

    @property
    def issues(self) -> tuple[ParseIssue, ...]:
        """Problems seen so far; ``position`` is a character offset in the text."""
        return tuple(self._issues)

    @property
    def held(self) -> int:
        """Characters received but not yet turned into events because a tag may start
        there (a tag prefix, an undecided ``<thinking`` tag, the body of an open tool call).
        Whitespace waiting at the end of the content (``whitespace="tidy"``) or of the
        reasoning is not counted."""
        held = len(self._buf) + (self._tag.held if self._tag is not None else 0)
        return held + (sum(map(len, self._call)) if self._call is not None else 0)

    # -- driving -------------------------------------------------------------------------

    def _run(self) -> None:
        buf = self._buf
        pos = 0
        while True:
            if self._mode == _CONTENT:
                pos, stop = self._scan_content(buf, pos)
            elif self._mode == _BODY:
                pos, stop = self._scan_body(buf, pos)
            else:
                buf, pos, stop = self._scan_tag(buf, pos)
            if stop:
                break
        self._buf = buf[pos:]
        self._base += pos

    def _scan_content(self, buf: str, pos: int) -> tuple[int, bool]:
        tags = self._tags
        scan = pos  # buf[pos:scan] is content not yet written
        while True:
            i = tags.next_candidate(buf, scan)
            if i < 0:
                self._write(TEXT, self._content.text(buf[pos:]))
                return len(buf), True
            verdict, style, end = tags.match_at(buf, i, self._eof)
            if verdict == NO:
                scan = i + 1
                continue
            self._write(TEXT, self._content.text(buf[pos:i]))
            if verdict == MORE:
                return i, True
            if style < 0:  # a closing tag with no open block
                tag = buf[i:end]
                hint = (
                    ""
                    if tag == TOOL_CALL_TAG.close
                    else "; text that starts inside reasoning needs a forced style "
                    "('forced', 'deepseek_r1' or 'qwen3_thinking')"
                )
                self._issue(
                    self._base + i,
                    f"closing tag {tag!r} without an opening tag (kept as text){hint}",
                )
                self._write(TEXT, self._content.text(tag))
                pos = scan = end
                continue
            if tags.styles[style].attributes:
                self._tag = AttributeTag(tags.styles[style], self._base + i, buf[i:end])
                self._mode = _TAG
            else:
                self._call_start = self._base + i
                self._open_block(style)
                self._mode = _BODY
            return end, False

    def _scan_body(self, buf: str, pos: int) -> tuple[int, bool]:
        n = len(buf)
        if self._start_open:  # forced: a leading opening tag is accepted and removed
            pos = _WS_RUN.match(buf, pos).end()  # type: ignore[union-attr]
            if pos == n:
                return pos, True
            tag = self._tags.opens[self._block]
            verdict = tag.at(buf, pos, self._eof)
            if verdict == MORE:
                return pos, True
            self._start_open = False
            if verdict == MATCH:
                pos += tag.length
        found = self._tags.find_end(self._block, buf, pos)
        if found is not None:
            start, resume = found
            self._body(buf[pos:start])
            self._close_block(incomplete=False)
            return resume, False
        hold = n if self._eof else self._tags.hold_end(self._block, buf, pos)
        self._body(buf[pos:hold])
        return hold, True

    def _scan_tag(self, buf: str, pos: int) -> tuple[str, int, bool]:
        tag = self._tag
        assert tag is not None
        status, pos = tag.read(buf, pos, self._base, self._eof)
        if tag.committed and self._block < 0:
            self._open_block(self._tags.styles.index(tag.style))
        for piece in tag.take_thought():
            if piece is None:
                self._trim.end_segment()
            else:
                self._reason(piece)
        self._issues += tag.issues
        tag.issues.clear()
        if status == NEED_MORE:
            return buf, pos, True
        if status == BODY:
            self._trim.end_segment()
            self._mode = _BODY
            return buf, pos, False
        if status in (CLOSED, CUT_OFF):
            self._close_block(incomplete=status == CUT_OFF)
            return buf, pos, False
        # not a tag after all: its "<" is content, the rest is read again
        raw = tag.raw
        self._tag = None
        self._mode = _CONTENT
        self._write(TEXT, self._content.text(raw[0]))
        self._base = tag.start + 1
        return raw[1:] + buf[pos:], 0, False

    # -- blocks --------------------------------------------------------------------------

    def _open_block(self, style: int) -> None:
        self._block = style
        self._trim = ReasoningTrim()
        self._call = [] if self._tags.styles[style].tool_call else None
        self._content.block()

    def _close_block(self, incomplete: bool) -> None:
        style = self._tags.styles[self._block]
        if self._call is not None:
            self._close_call(style, incomplete)
            return
        tag = self._tag
        attributes = tuple(tag.attributes) if tag is not None else ()
        if incomplete and self._out.kind != THINKING:
            self._out.start(THINKING)
        if self._out.kind == THINKING:
            part = self._out.finish(incomplete, attributes)
            if tag is not None and isinstance(part, ThinkingPart):
                for problem in attribute_problems(part):
                    self._issue(tag.start, f"{problem} (kept as text)")
        elif tag is not None and attributes:
            listed = ", ".join(f"{k}={v!r}" for k, v in attributes)
            self._issue(
                tag.start,
                f"a {style.open}> block with no reasoning text (no part; attributes "
                f"dropped: {listed})",
            )
        if incomplete:
            self._issue(
                self._total, f"the text ended inside a reasoning block (no {style.close!r})"
            )
        self._end_block()

    def _close_call(self, style: TagStyle, incomplete: bool) -> None:
        assert self._call is not None
        part = json_call_builder(style.close)(["".join(self._call)], incomplete)
        assert isinstance(part, (ToolCallPart, UnparsedToolCallPart))
        self._out.add(part)
        if type(part) is UnparsedToolCallPart:
            self._issue(self._call_start, f"tool call not parsed: {part.error} (kept verbatim)")
        self._end_block()

    def _end_block(self) -> None:
        self._block = -1
        self._tag = None
        self._call = None
        self._start_open = False
        self._mode = _CONTENT

    # -- output --------------------------------------------------------------------------

    def _write(self, kind: str, text: str) -> None:
        if text:
            self._out.write(kind, text)

    def _reason(self, text: str) -> None:
        if text:
            self._write(THINKING, self._trim.write(text))

    def _body(self, text: str) -> None:
        if self._call is None:
            self._reason(text)
        elif text:
            self._call.append(text)

    def _issue(self, offset: int, message: str) -> None:
        self._issues.append(ParseIssue(offset, message))


def split_reasoning(
    text: str,
    style: StyleSpec = "auto",
    *,
    whitespace: Whitespace = "tidy",
    tool_calls: bool = False,
) -> list[ReasoningPart]:
    """Split ``text`` into ordered thinking and text parts (see :mod:`renderers.text`).

    ``"".join`` of the text parts is the clean content; an unterminated block at the end
    is a :class:`~renderers.core.messages.ThinkingPart` with ``incomplete=True``.
    ``whitespace="keep"`` keeps the text around removed blocks exactly; ``tool_calls=True``
    takes ``<tool_call>`` calls out of the content (see :class:`ReasoningSplitter`).
    """
    splitter = ReasoningSplitter(style, whitespace=whitespace, tool_calls=tool_calls)
    splitter.feed(text)
    splitter.finish()
    return list(splitter.parts)


def iter_split(
    chunks: Iterable[str],
    style: StyleSpec = "auto",
    *,
    whitespace: Whitespace = "tidy",
    tool_calls: bool = False,
) -> Iterator[Event]:
    """Events for text arriving in ``chunks`` (e.g. lines or reads of a pipe), ending
    with those of :meth:`ReasoningSplitter.finish`."""
    splitter = ReasoningSplitter(style, whitespace=whitespace, tool_calls=tool_calls)
    for chunk in chunks:
        yield from splitter.feed(chunk)
    yield from splitter.finish()
