"""The opening tag of an attribute style (``<thinking a="v" …>`` or ``<thinking … />``),
read as it arrives.

Attributes are ``name="v"``, ``name='v'``, ``name=v`` or a bare ``name``; quoted values
may hold ``>``, ``/`` and newlines, and their character references are decoded
(:mod:`renderers.text.entities`). The style's ``text_attribute`` (``thought``) is
reasoning text: it streams out as it is read. Until the first quoted value or the
closing ``>`` the tag is checked strictly, so prose such as ``I'm <thinking about it, …``
is not a tag; once *committed*, malformed attribute syntax is skipped and reported,
never an error.
"""

from __future__ import annotations

import re

from renderers.core.result import ParseIssue
from renderers.text.entities import EntityStream, decode_entities
from renderers.text.styles import TagStyle
from renderers.text.whitespace import WS

__all__ = ["BODY", "CLOSED", "CUT_OFF", "NEED_MORE", "NOT_A_TAG", "AttributeTag"]

NEED_MORE, BODY, CLOSED, NOT_A_TAG, CUT_OFF = range(5)
"""What :meth:`AttributeTag.read` found: the chunk ended inside the tag; the tag ended
with ``>`` (a body follows); it ended with ``/>``; it is not a tag (prose); the text
ended inside a committed tag."""

# where the reader is inside the tag
_BETWEEN, _NAME, _AFTER_NAME, _BEFORE_VALUE, _QUOTED, _UNQUOTED, _SLASH = range(7)

_WS_RUN = re.compile(r"[ \t\r\n]*")
_NAME_START = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_:")
_NAME_CHARS = re.compile(r"[-A-Za-z0-9_:.]*")
_UNQUOTED_CHARS = re.compile(r"[^ \t\r\n\"'=<>`/]*")


class AttributeTag:
    """Reads one opening tag from the end of its name (``start`` is the offset of its
    ``<`` in the text, ``name`` the characters matched so far).

    After each :meth:`read`, :meth:`take_thought` gives the reasoning text read (``None``
    marks the end of the ``thought`` value) and :attr:`issues` what was skipped;
    :attr:`attributes` are the other attributes in source order, values decoded.
    """

    __slots__ = (
        "_entities",
        "_name",
        "_pending_text",
        "_quote",
        "_raw",
        "_state",
        "_text_seen",
        "_thought",
        "_to_text",
        "_value",
        "_warned",
        "attributes",
        "committed",
        "issues",
        "start",
        "style",
    )

    def __init__(self, style: TagStyle, start: int, name: str) -> None:
        self.style = style
        self.start = start
        self.committed = False
        self.attributes: list[tuple[str, str]] = []
        self.issues: list[ParseIssue] = []
        self._state = _BETWEEN
        self._raw = [name]  # what was read before the commit, for a tag that is prose
        self._name: list[str] = []
        self._value: list[str] = []
        self._quote = '"'
        self._to_text = False  # the value being read is the reasoning text
        self._text_seen = False
        self._pending_text: str | None = None  # an unquoted thought read before the commit
        self._thought: list[str | None] = []
        self._entities = EntityStream()
        self._warned = False

    @property
    def raw(self) -> str:
        """The tag's text read so far, while it is not committed."""
        return "".join(self._raw)

    @property
    def held(self) -> int:
        """Characters read that are neither events nor decided (see ``raw``)."""
        return sum(map(len, self._raw)) + len(self._entities.held)

    def take_thought(self) -> list[str | None]:
        """The reasoning text read since the last call (``None``: the value ended)."""
        out, self._thought = self._thought, []
        return out

    def read(self, buf: str, pos: int, offset: int, eof: bool) -> tuple[int, int]:
        """Read from ``buf[pos:]`` (``offset``: the text offset of ``buf[0]``):
        ``(status, position)``, the position after what was used."""
        n = len(buf)
        while pos < n:
            st = self._state
            ch = buf[pos]
            if st == _QUOTED:
                j = buf.find(self._quote, pos)
                end = n if j < 0 else j
                if end > pos:
                    self._value_text(buf[pos:end])
                if j < 0:
                    pos = n
                    break
                pos = j + 1
                self._end_attribute()
                self._state = _BETWEEN
                continue
            if st in (_BETWEEN, _AFTER_NAME, _BEFORE_VALUE):
                end = _WS_RUN.match(buf, pos).end()  # type: ignore[union-attr]
                if end > pos:
                    pos = self._eat(buf, pos, end)
                    continue
            if st == _BETWEEN:
                if ch == ">":
                    self._commit()
                    return BODY, pos + 1
                if ch == "/":
                    pos = self._eat(buf, pos, pos + 1)
                    self._state = _SLASH
                    continue
                if ch in _NAME_START:
                    self._name = []
                    self._state = _NAME
                    continue
            elif st == _NAME:
                end = _NAME_CHARS.match(buf, pos).end()  # type: ignore[union-attr]
                if end > pos:
                    self._name.append(buf[pos:end])
                    pos = self._eat(buf, pos, end)
                    continue
                if ch == "=":
                    pos = self._eat(buf, pos, pos + 1)
                    self._begin_value()
                    continue
                if ch in WS:
                    self._state = _AFTER_NAME
                    continue
                self._end_attribute()
                self._state = _BETWEEN
                continue
            elif st == _AFTER_NAME:
                if ch == "=":
                    pos = self._eat(buf, pos, pos + 1)
                    self._begin_value()
                    continue
                self._end_attribute()
                self._state = _BETWEEN
                continue
            elif st == _BEFORE_VALUE:
                if ch == '"' or ch == "'":
                    if not self.committed:
                        self._raw.append(ch)
                        self._commit()
                    pos += 1
                    self._quote = ch
                    self._to_text = self._is_text_attribute()
                    self._state = _QUOTED
                    continue
                if _UNQUOTED_CHARS.match(buf, pos).end() > pos:  # type: ignore[union-attr]
                    self._state = _UNQUOTED
                    continue
                if self.committed:  # name= with no value
                    self._end_attribute()
                    self._state = _BETWEEN
                    continue
            elif st == _UNQUOTED:
                end = _UNQUOTED_CHARS.match(buf, pos).end()  # type: ignore[union-attr]
                if end > pos:
                    self._value.append(buf[pos:end])
                    pos = self._eat(buf, pos, end)
                    continue
                self._end_attribute()
                self._state = _BETWEEN
                continue
            elif st == _SLASH:
                if ch == ">":
                    self._commit()
                    return CLOSED, pos + 1
                if self.committed:
                    self._state = _BETWEEN
                    continue
            # a character that does not fit the tag syntax
            if not self.committed:
                return NOT_A_TAG, pos
            if not self._warned:
                self._warned = True
                self.issues.append(
                    ParseIssue(
                        offset + pos,
                        f"malformed attribute syntax in a {self.style.open} tag "
                        "(characters skipped)",
                    )
                )
            pos += 1
        if not eof:
            return NEED_MORE, pos
        if not self.committed:
            return NOT_A_TAG, pos
        # the text ended inside a committed tag: keep what was read
        if self._state in (_NAME, _AFTER_NAME, _BEFORE_VALUE, _QUOTED, _UNQUOTED):
            self._end_attribute()
        return CUT_OFF, pos

    def _eat(self, buf: str, pos: int, end: int) -> int:
        if not self.committed:
            self._raw.append(buf[pos:end])
        return end

    def _commit(self) -> None:
        """The tag is certainly a reasoning block."""
        if self.committed:
            return
        self.committed = True
        self._raw = []
        if self._pending_text is not None:
            self._thought += [self._pending_text, None]
            self._pending_text = None

    def _is_text_attribute(self) -> bool:
        name = self.style.text_attribute
        if name is None or self._text_seen or "".join(self._name).lower() != name.lower():
            return False
        self._text_seen = True
        return True

    def _begin_value(self) -> None:
        self._value = []
        self._to_text = False
        self._state = _BEFORE_VALUE

    def _value_text(self, s: str) -> None:
        if self._to_text:
            decoded = self._entities.feed(s)
            if decoded:
                self._thought.append(decoded)
        else:
            self._value.append(s)

    def _end_attribute(self) -> None:
        """The current attribute is complete (bare, unquoted or quoted)."""
        name = "".join(self._name)
        if self._state == _QUOTED:
            if self._to_text:
                rest = self._entities.flush()
                self._thought += [rest, None] if rest else [None]
            else:
                self.attributes.append((name, decode_entities("".join(self._value))))
        elif self._is_text_attribute():
            value = decode_entities("".join(self._value)) if self._state == _UNQUOTED else ""
            if self.committed:
                self._thought += [value, None]
            else:
                self._pending_text = value
        else:
            value = "".join(self._value) if self._state in (_UNQUOTED, _BEFORE_VALUE) else ""
            self.attributes.append((name, decode_entities(value)))
        self._name = []
        self._value = []
        self._to_text = False
