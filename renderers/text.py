"""Reasoning written inline in plain text: split it from the content, in batch or streaming.

Many APIs and local models return one string with the reasoning inline. This module turns
it into ordered :class:`~renderers.core.messages.ThinkingPart` /
:class:`~renderers.core.messages.TextPart` parts, so the thinking can be shown to a person
and the clean content passed on.

Styles (``style=``; tag names match case-insensitively unless a :class:`TagStyle` says
otherwise)::

    "think"     <think>…</think>                       several blocks, any position
    "thinking"  <thinking>…</thinking>
                <thinking thought="…" thought_type="…" confidence="0.7">…</thinking>
                <thinking thought="…" … />              self-closing
    "kimi"      ◁think▷…◁/think▷                       Kimi's text-level markers
    "forced"    …</think>…                             the text starts inside reasoning
                                                       (DeepSeek-R1); a leading <think> is
                                                       accepted and removed
    ("<r>", "</r>") or TagStyle(...)                   a custom pair
    "auto"      the default: <think>, <thinking …> and ◁think▷ blocks, whichever appears

Parsing rules, the same in batch and streaming (batch is the streaming engine fed one
chunk, so the two agree for every way of splitting the text):

- A block starts at an opening tag and ends at the closing tag of the *same* style; inside
  a block other tags are plain reasoning text. A closing tag with no open block is kept
  in the content verbatim and reported in :attr:`ReasoningSplitter.issues`.
- Reasoning text is the block's body with leading and trailing whitespace (space, tab,
  CR, LF) removed. A block with an empty body yields no part, except a block of an
  attribute style (its attributes are information) and an unterminated one.
- Attribute styles (``<thinking``): the tag name must be followed by whitespace, ``>`` or
  ``/``; attributes are ``name="v"``, ``name='v'``, ``name=v`` or a bare ``name``, values
  may hold ``>``, ``/`` and newlines inside quotes, and HTML character references ending
  in ``;`` (``&quot;``, ``&#10;``, ``&#x27;``, any HTML5 name) are decoded. Attributes are
  kept in source order as the part's ``attributes``; unknown ones are kept, missing
  defaults are appended (``confidence="0.5"``). The ``thought`` attribute is the
  reasoning text: when the element also has a body, the text is the thought, a blank
  line, then the body. Until the first quoted value or the closing ``>`` the tag is
  checked strictly, so prose such as ``I'm <thinking about it, …`` stays content; once
  committed, malformed attribute syntax is skipped and reported, never an error.
- An unterminated block (or a committed ``<thinking`` tag cut off) at the end of the text
  is a thinking part marked ``incomplete``; a cut-off tag prefix (``<thi``) is content.
- Forced reasoning (``"forced"``, or a :class:`TagStyle` with ``forced=True``): the text
  is inside a block from its first character until the first closing tag; later blocks
  are recognised normally. Empty input yields no parts.

Removing a block leaves natural text. Let ``C`` be the content produced so far and ``W``
the run of whitespace right after the removed block (up to the next other character,
the next block or the end):

- ``C`` ends with a non-whitespace character: ``W`` is kept unchanged (``a<think>x</think> b``
  gives ``a b``);
- ``C`` is empty (the block opens the content): ``W`` is removed;
- otherwise ``C`` ends with whitespace holding ``k`` line breaks: if ``W`` holds more than
  ``k`` line breaks it is kept from its (k+1)-th line break on, else it is removed — except
  that what follows ``W``'s last line break (or all of a ``W`` without one) is kept when
  ``C`` ends with a line break and text follows (it indents that line).

  So ``a <think>x</think> b`` gives ``a b``, ``p1\\n\\n<think>x</think>\\n\\np2`` gives
  ``p1\\n\\np2``, ``p1\\n<think>x</think>\\n\\np2`` gives ``p1\\n\\np2``, and
  ``<think>x</think>\\n\\nAnswer`` gives ``Answer``.

Nothing else in the content changes: text without tags comes back identical.

Streaming (:class:`ReasoningSplitter`): ``feed(chunk)`` returns the events the chunk made
(:class:`~renderers.core.parsing.PartStarted`, :class:`~renderers.core.parsing.TextDelta`,
:class:`~renderers.core.parsing.PartFinished` with the final part). Content is emitted as soon
as it cannot be the start of a tag: what is held back is a possible tag prefix (at most
one tag's length), an undecided ``<thinking …`` tag before it commits, and the whitespace
directly after a removed block until the next character shows how much of it is a
separator. Reasoning text streams the same way, less its trailing whitespace (and a
possible unfinished character reference in a ``thought`` value). Work is linear in the
input: nothing is rescanned per chunk beyond what was held back, and an undecided
``<thinking …`` that turns out to be prose is scanned once more as content.

``"auto"`` in streaming recognises every known opening tag as it arrives. It cannot
recognise forced reasoning — that needs to see a ``</think>`` that may come megabytes
later, after the text was already emitted as content — so it treats such a ``</think>``
as stray: it stays in the content and :attr:`ReasoningSplitter.issues` says to use
``style="forced"``.
"""

from __future__ import annotations

import html.entities
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TypeAlias

from renderers.core.messages import TextPart, ThinkingPart
from renderers.core.parsing import (
    TEXT,
    THINKING,
    Event,
    ParseIssue,
    PartFinished,
    PartStarted,
    TextDelta,
)

__all__ = [
    "KIMI",
    "STYLES",
    "THINK",
    "THINKING_TAG",
    "THINK_FORCED",
    "ReasoningPart",
    "ReasoningSplitter",
    "StyleSpec",
    "TagStyle",
    "decode_entities",
    "iter_split",
    "openai_fields",
    "resolve_style",
    "split_reasoning",
    "split_reasoning_openai",
]

_WS = " \t\r\n"
_TAG_NAME = re.compile(r"<[A-Za-z_][-A-Za-z0-9_:.]*\Z")


@dataclass(frozen=True, slots=True)
class TagStyle:
    """One kind of reasoning block.

    ``open``/``close`` are the tags. With ``attributes`` the opening tag is XML-like:
    ``open`` is ``"<" + name`` and attributes, then ``>`` or ``/>`` follow;
    ``text_attribute`` names the attribute holding reasoning text and ``defaults`` are
    ``(name, value)`` pairs added when absent. ``forced`` means the text starts inside a
    block of this style. Tags match case-insensitively unless ``case_sensitive``.
    """

    open: str
    close: str
    attributes: bool = False
    forced: bool = False
    case_sensitive: bool = False
    text_attribute: str | None = None
    defaults: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        for field in ("open", "close"):
            value = getattr(self, field)
            if not isinstance(value, str) or not value:
                raise ValueError(f"{field}: expected a non-empty string, got {value!r}")
            if value[0] in _WS:
                raise ValueError(f"{field}: a tag cannot start with whitespace ({value!r})")
        if self.attributes and not _TAG_NAME.match(self.open):
            raise ValueError(
                f"open: an attribute style needs '<' and a tag name, like '<thinking', "
                f"got {self.open!r}"
            )
        if self.attributes and self.forced:
            raise ValueError("forced: an attribute style cannot be forced")


THINK = TagStyle("<think>", "</think>")
"""``<think>…</think>`` (Qwen3, DeepSeek, most open models writing reasoning inline)."""
THINKING_TAG = TagStyle(
    "<thinking",
    "</thinking>",
    attributes=True,
    text_attribute="thought",
    defaults=(("confidence", "0.5"),),
)
"""``<thinking …>…</thinking>`` and ``<thinking thought="…" … />``."""
KIMI = TagStyle("◁think▷", "◁/think▷")
"""Kimi's ``◁think▷…◁/think▷``."""
THINK_FORCED = TagStyle("<think>", "</think>", forced=True)
"""DeepSeek-R1: the text starts inside reasoning and only ``</think>`` appears."""

STYLES: dict[str, tuple[TagStyle, ...]] = {
    "auto": (THINK, THINKING_TAG, KIMI),
    "think": (THINK,),
    "thinking": (THINKING_TAG,),
    "kimi": (KIMI,),
    "forced": (THINK_FORCED,),
}
"""The named styles accepted by ``style=`` (the CLI's ``--style`` choices)."""

StyleSpec: TypeAlias = str | tuple[str, str] | TagStyle | Sequence[TagStyle]
ReasoningPart: TypeAlias = ThinkingPart | TextPart


def resolve_style(style: StyleSpec) -> tuple[TagStyle, ...]:
    """The tag styles a ``style=`` value stands for (raises ``ValueError`` if unknown).

    Accepts a name from :data:`STYLES` (case-insensitive), an ``(open, close)`` pair of
    strings, a :class:`TagStyle`, or a sequence of them (at most one forced).
    """
    if isinstance(style, str):
        found = STYLES.get(style.strip().lower())
        if found is None:
            raise ValueError(
                f"style: unknown style {style!r}; expected one of {', '.join(STYLES)}, "
                "or an (open, close) pair of tags"
            )
        return found
    if isinstance(style, TagStyle):
        return (style,)
    if isinstance(style, tuple) and len(style) == 2 and all(isinstance(t, str) for t in style):
        return (TagStyle(style[0], style[1]),)  # type: ignore[arg-type]
    if isinstance(style, Sequence) and style:
        styles = tuple(s for s in style if isinstance(s, TagStyle))
        if len(styles) == len(style):
            if sum(s.forced for s in styles) > 1:
                raise ValueError("style: at most one style can be forced")
            return styles
    raise ValueError(
        f"style: expected a style name, an (open, close) pair of strings or TagStyle "
        f"objects, got {style!r}"
    )


# -- tag matching ----------------------------------------------------------------------------

_MATCH, _MORE, _NO = 1, 0, -1


class _Tag:
    """A compiled tag: full match, search, and proper-prefix tests at a buffer's end."""

    __slots__ = ("full", "length", "prefixes", "text")

    def __init__(self, text: str, case_sensitive: bool) -> None:
        flags = 0 if case_sensitive else re.IGNORECASE
        self.text = text
        self.length = len(text)
        self.full = re.compile(re.escape(text), flags)
        self.prefixes = [re.compile(re.escape(text[:k]), flags) for k in range(len(text))]

    def at(self, buf: str, pos: int, eof: bool) -> int:
        """Whether the tag is at ``pos``: yes, not yet decidable, or no."""
        if self.full.match(buf, pos):
            return _MATCH
        n = len(buf) - pos
        if not eof and n < self.length and self.prefixes[n].fullmatch(buf, pos):
            return _MORE
        return _NO

    def hold_from(self, buf: str, start: int) -> int:
        """Where the longest proper prefix of the tag ending the buffer starts (or len)."""
        n = len(buf)
        for i in range(max(start, n - self.length + 1), n):
            if self.prefixes[n - i].fullmatch(buf, i):
                return i
        return n


class _Styles:
    """The compiled form of a tuple of styles (cached: splitters are cheap to create)."""

    __slots__ = ("candidates", "closes", "forced", "maybe", "opens", "styles")

    def __init__(self, styles: tuple[TagStyle, ...]) -> None:
        self.styles = styles
        self.opens = [_Tag(s.open, s.case_sensitive) for s in styles]
        self.closes = [_Tag(s.close, s.case_sensitive) for s in styles]
        self.forced = next((i for i, s in enumerate(styles) if s.forced), -1)
        tags = sorted({t.text for t in (*self.opens, *self.closes)})
        self.candidates = re.compile(
            "[" + "".join(sorted({re.escape(t[0]) for t in tags})) + "]", re.IGNORECASE
        )
        # a fast filter: a tag, or a proper prefix of one ending the buffer
        self.maybe = re.compile(
            "|".join(
                [re.escape(t) for t in tags]
                + [re.escape(t[:k]) + r"\Z" for t in tags for k in range(1, len(t))]
            ),
            re.IGNORECASE,
        )


@lru_cache(maxsize=64)
def _compiled(styles: tuple[TagStyle, ...]) -> _Styles:
    return _Styles(styles)


# -- attribute values ------------------------------------------------------------------------

_REF = re.compile(r"&(?:#([0-9]{1,7})|#[xX]([0-9a-fA-F]{1,6})|([A-Za-z][A-Za-z0-9]{0,31}));")
_REF_BODY = re.compile(r"[#A-Za-z0-9]*")
_REF_MAX = 33  # "&" + 32 name characters; a ";" after that cannot end a reference


def _ref(m: re.Match[str]) -> str:
    dec, hexa, name = m.groups()
    if name is not None:
        return html.entities.html5.get(name + ";", m.group(0))
    cp = int(dec) if dec is not None else int(hexa, 16)
    if cp == 0 or 0xD800 <= cp <= 0xDFFF or cp > 0x10FFFF:
        return m.group(0)
    return chr(cp)


def decode_entities(value: str) -> str:
    """Decode HTML character references that end in ``;`` (named, decimal, hex).

    Anything else — a bare ``&``, an unknown name, ``&amp`` without ``;``, a code point
    that is not a character — is kept verbatim, so decoding can be done chunk by chunk.
    """
    return _REF.sub(_ref, value) if "&" in value else value


class _EntityStream:
    """Decodes a value arriving in pieces, holding back a possible unfinished reference."""

    __slots__ = ("held",)

    def __init__(self) -> None:
        self.held = ""

    def feed(self, s: str) -> str:
        if self.held:
            s = self.held + s
            self.held = ""
        i = s.rfind("&")
        if i >= 0 and len(s) - i <= _REF_MAX and _REF_BODY.fullmatch(s, i + 1):
            self.held = s[i:]
            s = s[:i]
        return decode_entities(s)

    def flush(self) -> str:
        s, self.held = self.held, ""
        return decode_entities(s)


class _Trimmer:
    """Streams reasoning text without its leading and trailing whitespace.

    Text comes in segments (a ``thought`` attribute, then the body); non-empty segments
    are joined by a blank line.
    """

    __slots__ = ("held", "segment_start", "started")

    def __init__(self) -> None:
        self.started = False
        self.segment_start = True
        self.held: list[str] = []

    def write(self, s: str) -> str:
        if self.segment_start:
            s = s.lstrip(_WS)
            if not s:
                return ""
            self.segment_start = False
            lead = "\n\n" if self.started else ""
            core = s.rstrip(_WS)
        else:
            core = s.rstrip(_WS)
            if not core:
                self.held.append(s)
                return ""
            lead = "".join(self.held)
        self.held = [s[len(core) :]] if len(core) < len(s) else []
        self.started = True
        return lead + core

    def end_segment(self) -> None:
        self.held = []
        self.segment_start = True


# -- the engine ------------------------------------------------------------------------------

_TEXT_MODE, _BODY_MODE, _TAG_MODE = 0, 1, 2
_J_NONE, _J_ALL, _J_COUNT = 0, 1, 2  # whitespace handling after a removed block
# states of the attribute-tag scanner
_BETWEEN, _NAME, _AFTER_NAME, _BEFORE_VALUE, _QUOTED, _UNQUOTED, _SLASH = range(7)

_WS_RUN = re.compile(r"[ \t\r\n]*")
_NAME_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_:")
_NAME_CHARS = re.compile(r"[-A-Za-z0-9_:.]*")
_UNQUOTED_CHARS = re.compile(r"[^ \t\r\n\"'=<>`/]*")
_AFTER_TAG_NAME = frozenset(" \t\r\n>/")


class ReasoningSplitter:
    """Incremental reasoning splitter: ``feed(chunk) -> events``, ``finish() -> events``.

    Chunks may be split anywhere, even inside a tag; the parts are the same as
    :func:`split_reasoning` on the whole text. After :meth:`finish`, :attr:`parts` holds
    every part and :attr:`issues` the problems seen (stray closing tags, unterminated
    blocks, malformed attributes), positioned by character offset in the text.
    """

    __slots__ = (
        "_aname",
        "_attrs",
        "_aval",
        "_base",
        "_block",
        "_buf",
        "_c_empty",
        "_c_eol",
        "_c_nl",
        "_c_ws",
        "_chunks",
        "_committed",
        "_entities",
        "_eof",
        "_events",
        "_finished",
        "_index",
        "_issues",
        "_jdrop",
        "_jheld",
        "_junction",
        "_junk_reported",
        "_kind",
        "_mode",
        "_parts",
        "_pending_text",
        "_quote",
        "_raw",
        "_start_open",
        "_styles",
        "_tag_start",
        "_text_seen",
        "_to_text",
        "_total",
        "_trim",
        "_tstate",
    )

    def __init__(self, style: StyleSpec = "auto") -> None:
        self._styles = _compiled(resolve_style(style))
        self._buf = ""
        self._base = 0  # offset of _buf[0] in the whole text
        self._eof = False
        self._finished = False
        self._total = 0
        self._events: list[Event] = []
        self._parts: list[ReasoningPart] = []
        self._issues: list[ParseIssue] = []
        # the open part
        self._kind: str | None = None
        self._index = -1
        self._chunks: list[str] = []
        # the content so far: empty? ends with whitespace? line breaks in that whitespace?
        # ends with a line break?
        self._c_empty = True
        self._c_ws = False
        self._c_nl = 0
        self._c_eol = False
        self._junction = _J_NONE
        self._jdrop = 0
        self._jheld: list[str] = []
        # the open block
        self._mode = _TEXT_MODE
        self._block = -1
        self._trim = _Trimmer()
        self._start_open = False
        # the attribute tag being read
        self._tstate = _BETWEEN
        self._committed = False
        self._raw: list[str] = []
        self._tag_start = 0
        self._attrs: list[tuple[str, str]] = []
        self._aname: list[str] = []
        self._aval: list[str] = []
        self._quote = '"'
        self._to_text = False
        self._text_seen = False
        self._pending_text: str | None = None
        self._entities = _EntityStream()
        self._junk_reported = False
        if self._styles.forced >= 0:
            self._mode = _BODY_MODE
            self._block = self._styles.forced
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
        events, self._events = self._events, []
        return events

    def finish(self) -> list[Event]:
        """End of the text: release what was held back, close what is open."""
        if self._finished:
            raise RuntimeError("finish() called twice")
        self._finished = True
        self._eof = True
        self._run()
        if self._mode == _BODY_MODE and self._total:
            self._close_block(incomplete=True)
        self._jheld = []
        self._junction = _J_NONE
        if self._kind is not None:
            self._finish_part(False)
        events, self._events = self._events, []
        return events

    @property
    def parts(self) -> tuple[ReasoningPart, ...]:
        """The finished parts so far (all of them after :meth:`finish`)."""
        return tuple(self._parts)

    @property
    def issues(self) -> tuple[ParseIssue, ...]:
        """Problems seen so far; ``position`` is a character offset in the text."""
        return tuple(self._issues)

    @property
    def held(self) -> int:
        """Characters received but not yet turned into events (a tag prefix, an undecided
        ``<thinking`` tag); reasoning's trailing whitespace is not counted."""
        return len(self._buf) + sum(map(len, self._raw)) + len(self._entities.held)

    # -- parts and events ----------------------------------------------------------------

    def _start_part(self, kind: str) -> None:
        if self._kind is not None:
            self._finish_part(False)
        self._kind = kind
        self._index = len(self._parts)
        self._chunks = []
        self._events.append(PartStarted(self._index, kind))

    def _finish_part(self, incomplete: bool, attributes: tuple[tuple[str, str], ...] = ()) -> None:
        text = "".join(self._chunks)
        part: ReasoningPart
        if self._kind == THINKING:
            part = ThinkingPart(text, incomplete=incomplete, attributes=attributes)
        else:
            part = TextPart(text)
        self._parts.append(part)
        self._events.append(PartFinished(self._index, part))
        self._kind = None
        self._chunks = []

    def _emit_content(self, s: str) -> None:
        if not s:
            return
        if self._kind != TEXT:
            self._start_part(TEXT)
        self._chunks.append(s)
        self._events.append(TextDelta(self._index, s))
        core = s.rstrip(_WS)
        if len(core) == len(s):
            self._c_ws, self._c_nl = False, 0
        elif core:
            self._c_ws, self._c_nl = True, s.count("\n", len(core))
        else:
            self._c_nl = (self._c_nl if self._c_ws else 0) + s.count("\n")
            self._c_ws = True
        self._c_eol = s[-1] == "\n"
        self._c_empty = False

    def _text(self, s: str) -> None:
        """Content found by the scanner (resolves whitespace held after a block)."""
        if self._junction != _J_NONE:
            held = self._jheld
            if self._junction == _J_COUNT and self._c_eol and held:
                self._emit_content("".join(held))
            self._jheld = []
            self._junction = _J_NONE
        self._emit_content(s)

    def _think(self, s: str) -> None:
        out = self._trim.write(s)
        if out:
            if self._kind != THINKING:
                self._start_part(THINKING)
            self._chunks.append(out)
            self._events.append(TextDelta(self._index, out))

    def _issue(self, offset: int, message: str) -> None:
        self._issues.append(ParseIssue(offset, message))

    # -- driving -------------------------------------------------------------------------

    def _run(self) -> None:
        buf = self._buf
        pos = 0
        while True:
            if self._mode == _TEXT_MODE:
                pos, stop = self._scan_text(buf, pos)
            elif self._mode == _BODY_MODE:
                pos, stop = self._scan_body(buf, pos)
            else:
                buf, pos, stop = self._scan_tag(buf, pos)
            if stop:
                break
        self._buf = buf[pos:]
        self._base += pos

    def _scan_text(self, buf: str, pos: int) -> tuple[int, bool]:
        n = len(buf)
        if self._junction != _J_NONE:
            pos = self._junction_ws(buf, pos)
        search = self._styles.candidates.search
        scan = pos  # buf[pos:scan] is content not yet emitted
        while True:
            m = search(buf, scan)
            if m is None:
                if n > pos:
                    self._text(buf[pos:])
                return n, True
            i = m.start()
            verdict, which, end = self._match_at(buf, i)
            if verdict == _NO:
                scan = i + 1
                continue
            if i > pos:
                self._text(buf[pos:i])
            if verdict == _MORE:
                return i, True
            if which < 0:  # a closing tag with no open block
                tag = buf[i:end]
                self._issue(
                    self._base + i,
                    f"closing tag {tag!r} without an opening tag (kept as text); text that "
                    "starts inside reasoning needs a forced style (style='forced' for "
                    "DeepSeek-R1's </think>)",
                )
                self._text(tag)
                pos = scan = end
                continue
            self._block = which
            self._trim = _Trimmer()
            if self._styles.styles[which].attributes:
                self._mode = _TAG_MODE
                self._tstate = _BETWEEN
                self._committed = False
                self._raw = [buf[i:end]]
                self._tag_start = self._base + i
                self._attrs = []
                self._text_seen = False
                self._pending_text = None
                self._junk_reported = False
            else:
                self._jheld = []
                self._junction = _J_NONE
                self._mode = _BODY_MODE
            return end, False

    def _match_at(self, buf: str, i: int) -> tuple[int, int, int]:
        """At a candidate position: (verdict, style index or -1 for a stray closer, end).

        The first tag in order (openers, then closers) that matches or might still match
        decides, so the answer never depends on where the text was split.
        """
        c = self._styles
        if not c.maybe.match(buf, i):
            return _NO, -1, i + 1
        eof = self._eof
        n = len(buf)
        for k, tag in enumerate(c.opens):
            if c.styles[k].attributes:
                if tag.full.match(buf, i):
                    j = i + tag.length
                    if j == n:
                        if not eof:
                            return _MORE, k, j
                    elif buf[j] in _AFTER_TAG_NAME:
                        return _MATCH, k, j
                    continue
                if not eof and n - i < tag.length and tag.prefixes[n - i].fullmatch(buf, i):
                    return _MORE, k, n
                continue
            v = tag.at(buf, i, eof)
            if v != _NO:
                return v, k, i + tag.length
        for tag in c.closes:
            v = tag.at(buf, i, eof)
            if v != _NO:
                return v, -1, i + tag.length
        return _NO, -1, i + 1

    def _junction_ws(self, buf: str, pos: int) -> int:
        """Consume whitespace after a removed block per the module's rule."""
        end = _WS_RUN.match(buf, pos).end()  # type: ignore[union-attr]
        if end == pos or self._junction == _J_ALL:
            return end
        run = buf[pos:end]
        i = 0
        while True:
            j = run.find("\n", i)
            if j < 0:
                if i < len(run):
                    self._jheld.append(run[i:])
                return end
            if self._jdrop > 0:
                self._jdrop -= 1
                self._jheld = []
                i = j + 1
                continue
            if j > i:
                cr = run[j - 1] == "\r"
            else:
                cr = bool(self._jheld) and self._jheld[-1].endswith("\r")
            self._jheld = []
            self._junction = _J_NONE
            self._emit_content(("\r" if cr else "") + run[j:])
            return end

    def _scan_body(self, buf: str, pos: int) -> tuple[int, bool]:
        n = len(buf)
        c = self._styles
        if self._start_open:  # forced: a leading opening tag is accepted and removed
            pos = _WS_RUN.match(buf, pos).end()  # type: ignore[union-attr]
            if pos == n:
                return pos, True
            tag = c.opens[self._block]
            v = tag.at(buf, pos, self._eof)
            if v == _MORE:
                return pos, True
            self._start_open = False
            if v == _MATCH:
                pos += tag.length
        close = c.closes[self._block]
        m = close.full.search(buf, pos)
        if m is not None:
            if m.start() > pos:
                self._think(buf[pos : m.start()])
            self._close_block(incomplete=False)
            self._mode = _TEXT_MODE
            return m.end(), False
        hold = n if self._eof else close.hold_from(buf, pos)
        if hold > pos:
            self._think(buf[pos:hold])
        return hold, True

    def _close_block(self, incomplete: bool) -> None:
        style = self._styles.styles[self._block]
        self._trim.end_segment()
        if self._kind != THINKING and (incomplete or style.attributes):
            self._start_part(THINKING)
        if self._kind == THINKING:
            attributes: tuple[tuple[str, str], ...] = ()
            if style.attributes:
                attrs = self._attrs
                present = {k.lower() for k, _ in attrs}
                attributes = (
                    *attrs,
                    *((k, v) for k, v in style.defaults if k.lower() not in present),
                )
            self._finish_part(incomplete, attributes)
        if incomplete:
            self._issue(
                self._total,
                f"the text ended inside a reasoning block (no {style.close!r})",
            )
        self._block = -1
        self._start_open = False
        self._mode = _TEXT_MODE
        if self._c_empty:
            self._junction = _J_ALL
        elif not self._c_ws:
            self._junction = _J_NONE
        else:
            self._junction = _J_COUNT
            self._jdrop = self._c_nl
        self._jheld = []

    # -- attribute tags (<thinking ...>) -------------------------------------------------

    def _scan_tag(self, buf: str, pos: int) -> tuple[str, int, bool]:
        n = len(buf)
        while pos < n:
            st = self._tstate
            ch = buf[pos]
            if st == _QUOTED:
                j = buf.find(self._quote, pos)
                end = n if j < 0 else j
                if end > pos:
                    self._value(buf[pos:end])
                if j < 0:
                    return buf, n, True
                pos = j + 1
                self._end_attr()
                self._tstate = _BETWEEN
                continue
            if st in (_BETWEEN, _AFTER_NAME, _BEFORE_VALUE):
                end = _WS_RUN.match(buf, pos).end()  # type: ignore[union-attr]
                if end > pos:
                    pos = self._eat(buf, pos, end)
                    continue
            if st == _BETWEEN:
                if ch == ">":
                    return buf, self._tag_end(pos, self_closing=False), False
                if ch == "/":
                    pos = self._eat(buf, pos, pos + 1)
                    self._tstate = _SLASH
                    continue
                if ch in _NAME_START:
                    self._aname = []
                    self._tstate = _NAME
                    continue
            elif st == _NAME:
                end = _NAME_CHARS.match(buf, pos).end()  # type: ignore[union-attr]
                if end > pos:
                    self._aname.append(buf[pos:end])
                    pos = self._eat(buf, pos, end)
                    continue
                if ch == "=":
                    pos = self._eat(buf, pos, pos + 1)
                    self._begin_value()
                    continue
                if ch in _WS:
                    self._tstate = _AFTER_NAME
                    continue
                self._end_attr()
                self._tstate = _BETWEEN
                continue
            elif st == _AFTER_NAME:
                if ch == "=":
                    pos = self._eat(buf, pos, pos + 1)
                    self._begin_value()
                    continue
                self._end_attr()
                self._tstate = _BETWEEN
                continue
            elif st == _BEFORE_VALUE:
                if ch == '"' or ch == "'":
                    if not self._committed:
                        self._raw.append(ch)
                        self._commit()
                    pos += 1
                    self._quote = ch
                    self._to_text = self._is_text_attr()
                    self._tstate = _QUOTED
                    continue
                if _UNQUOTED_CHARS.match(buf, pos).end() > pos:  # type: ignore[union-attr]
                    self._tstate = _UNQUOTED
                    continue
                if self._committed:  # name= with no value
                    self._end_attr()
                    self._tstate = _BETWEEN
                    continue
            elif st == _UNQUOTED:
                end = _UNQUOTED_CHARS.match(buf, pos).end()  # type: ignore[union-attr]
                if end > pos:
                    self._aval.append(buf[pos:end])
                    pos = self._eat(buf, pos, end)
                    continue
                self._end_attr()
                self._tstate = _BETWEEN
                continue
            elif st == _SLASH:
                if ch == ">":
                    return buf, self._tag_end(pos, self_closing=True), False
                if self._committed:
                    self._tstate = _BETWEEN
                    continue
            # a character that does not fit the tag syntax
            if not self._committed:
                return (*self._abort_tag(buf, pos), False)
            if not self._junk_reported:
                self._junk_reported = True
                self._issue(
                    self._base + pos,
                    f"malformed attribute syntax in a {self._styles.styles[self._block].open}"
                    " tag (characters skipped)",
                )
            pos += 1
        if not self._eof:
            return buf, pos, True
        if not self._committed:
            return (*self._abort_tag(buf, pos), False)
        # the text ended inside a committed tag: keep what was read, as unterminated
        if self._tstate in (_NAME, _AFTER_NAME, _BEFORE_VALUE, _QUOTED, _UNQUOTED):
            self._end_attr()
        self._close_block(incomplete=True)
        return buf, pos, False

    def _eat(self, buf: str, pos: int, end: int) -> int:
        if not self._committed:
            self._raw.append(buf[pos:end])
        return end

    def _is_text_attr(self) -> bool:
        name = self._styles.styles[self._block].text_attribute
        if name is None or self._text_seen or "".join(self._aname).lower() != name.lower():
            return False
        self._text_seen = True
        return True

    def _begin_value(self) -> None:
        self._aval = []
        self._to_text = False
        self._tstate = _BEFORE_VALUE

    def _value(self, s: str) -> None:
        if self._to_text:
            self._think(self._entities.feed(s))
        else:
            self._aval.append(s)

    def _end_attr(self) -> None:
        """The current attribute is complete (bare, unquoted or quoted)."""
        name = "".join(self._aname)
        if self._tstate == _QUOTED:
            if self._to_text:
                self._think(self._entities.flush())
                self._trim.end_segment()
            else:
                self._attrs.append((name, decode_entities("".join(self._aval))))
        elif self._is_text_attr():
            value = decode_entities("".join(self._aval)) if self._tstate == _UNQUOTED else ""
            if self._committed:
                self._think(value)
                self._trim.end_segment()
            else:
                self._pending_text = value
        else:
            value = "".join(self._aval) if self._tstate in (_UNQUOTED, _BEFORE_VALUE) else ""
            self._attrs.append((name, decode_entities(value)))
        self._aname = []
        self._aval = []
        self._to_text = False

    def _commit(self) -> None:
        """The tag is certainly a reasoning block: start its part."""
        self._committed = True
        self._raw = []
        self._jheld = []
        self._junction = _J_NONE
        self._start_part(THINKING)
        if self._pending_text is not None:
            self._think(self._pending_text)
            self._trim.end_segment()
            self._pending_text = None

    def _tag_end(self, pos: int, self_closing: bool) -> int:
        if not self._committed:
            self._commit()
        if self_closing:
            self._close_block(incomplete=False)
        else:
            self._trim.end_segment()
            self._mode = _BODY_MODE
        return pos + 1

    def _abort_tag(self, buf: str, pos: int) -> tuple[str, int]:
        """Not a tag after all: its ``<`` is content, the rest is scanned again."""
        raw = "".join(self._raw)
        self._raw = []
        self._attrs = []
        self._aname = []
        self._aval = []
        self._pending_text = None
        self._block = -1
        self._mode = _TEXT_MODE
        self._text(raw[0])
        self._base = self._tag_start + 1
        return raw[1:] + buf[pos:], 0


# -- entry points ----------------------------------------------------------------------------


def split_reasoning(text: str, style: StyleSpec = "auto") -> list[ReasoningPart]:
    """Split ``text`` into ordered thinking and text parts (see the module docstring).

    ``"".join`` of the text parts is the clean content; an unterminated block at the end
    is a :class:`ThinkingPart` with ``incomplete=True``.
    """
    splitter = ReasoningSplitter(style)
    splitter.feed(text)
    splitter.finish()
    return list(splitter.parts)


def iter_split(chunks: Iterable[str], style: StyleSpec = "auto") -> Iterator[Event]:
    """Events for text arriving in ``chunks`` (e.g. lines or reads of a pipe), ending
    with those of :meth:`ReasoningSplitter.finish`."""
    splitter = ReasoningSplitter(style)
    for chunk in chunks:
        yield from splitter.feed(chunk)
    yield from splitter.finish()


def openai_fields(parts: Iterable[ReasoningPart]) -> dict[str, str | None]:
    """``{"content": ..., "reasoning_content": ...}`` as OpenAI-compatible servers give.

    ``content`` is the text parts joined; ``reasoning_content`` the non-empty thinking
    texts joined by a blank line, or ``None`` when there was no reasoning block.
    """
    content: list[str] = []
    thinking: list[str] = []
    any_thinking = False
    for p in parts:
        if type(p) is ThinkingPart:
            any_thinking = True
            if p.text:
                thinking.append(p.text)
        else:
            content.append(p.text)
    return {
        "content": "".join(content),
        "reasoning_content": "\n\n".join(thinking) if any_thinking else None,
    }


def split_reasoning_openai(text: str, style: StyleSpec = "auto") -> dict[str, str | None]:
    """:func:`openai_fields` of :func:`split_reasoning`."""
    return openai_fields(split_reasoning(text, style))
