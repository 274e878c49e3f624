"""Finding tags in text that may stop in the middle of one.

Every question has three answers: the tag is there (:data:`MATCH`), the buffer ends
with a proper prefix of it so more text must decide (:data:`MORE`), or not (:data:`NO`).
At the end of the text (``eof``) a prefix is a no.
"""

from __future__ import annotations

import re
from functools import lru_cache

from renderers.text.styles import TagStyle

__all__ = ["MATCH", "MORE", "NO", "Tag", "TagSet", "compile_styles"]

MATCH, MORE, NO = 1, 0, -1

_AFTER_TAG_NAME = frozenset(" \t\r\n>/")


class Tag:
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
            return MATCH
        n = len(buf) - pos
        if not eof and n < self.length and self.prefixes[n].fullmatch(buf, pos):
            return MORE
        return NO

    def hold_from(self, buf: str, start: int) -> int:
        """Where the longest proper prefix of the tag ending the buffer starts (or len)."""
        n = len(buf)
        for i in range(max(start, n - self.length + 1), n):
            if self.prefixes[n - i].fullmatch(buf, i):
                return i
        return n


class TagSet:
    """The tags of a tuple of styles, compiled once (see :func:`compile_styles`).

    Outside a block, the first tag in order (openers, then closers) that matches or might
    still match decides, so the answer never depends on where the text was split.
    """

    __slots__ = ("_candidates", "_ends", "_maybe", "closes", "ends", "forced", "opens", "styles")

    def __init__(self, styles: tuple[TagStyle, ...]) -> None:
        self.styles = styles
        self.opens = [Tag(s.open, s.case_sensitive) for s in styles]
        self.closes = [Tag(s.close, s.case_sensitive) for s in styles]
        self.ends = [
            [close, *(Tag(t, s.case_sensitive) for t in s.implicit_close)]
            for s, close in zip(styles, self.closes, strict=True)
        ]  # per style: the tags that end a block, its closing tag first
        self.forced = next((i for i, s in enumerate(styles) if s.forced), -1)
        self._ends = [
            re.compile(
                "|".join(f"({re.escape(t.text)})" for t in tags),
                0 if s.case_sensitive else re.IGNORECASE,
            )
            for s, tags in zip(styles, self.ends, strict=True)
        ]
        texts = sorted({t.text for t in (*self.opens, *self.closes)})
        self._candidates = re.compile(
            "[" + "".join(sorted({re.escape(t[0]) for t in texts})) + "]", re.IGNORECASE
        )
        # a fast filter: a tag, or a proper prefix of one ending the buffer
        self._maybe = re.compile(
            "|".join(
                [re.escape(t) for t in texts]
                + [re.escape(t[:k]) + r"\Z" for t in texts for k in range(1, len(t))]
            ),
            re.IGNORECASE,
        )

    def next_candidate(self, buf: str, pos: int) -> int:
        """The first position from ``pos`` where a tag could start, or -1."""
        m = self._candidates.search(buf, pos)
        return -1 if m is None else m.start()

    def match_at(self, buf: str, i: int, eof: bool) -> tuple[int, int, int]:
        """Outside a block, at position ``i``: ``(verdict, style, end)``.

        ``style`` is the index of the style whose opening tag is there, or -1 for a
        closing tag (which has no block to close); ``end`` is where the tag ends (for an
        attribute style: where its name ends).
        """
        if not self._maybe.match(buf, i):
            return NO, -1, i + 1
        n = len(buf)
        for k, tag in enumerate(self.opens):
            if self.styles[k].attributes:
                if tag.full.match(buf, i):
                    j = i + tag.length
                    if j == n:
                        if not eof:
                            return MORE, k, j
                    elif buf[j] in _AFTER_TAG_NAME:
                        return MATCH, k, j
                    continue
                if not eof and n - i < tag.length and tag.prefixes[n - i].fullmatch(buf, i):
                    return MORE, k, n
                continue
            v = tag.at(buf, i, eof)
            if v != NO:
                return v, k, i + tag.length
        for tag in self.closes:
            v = tag.at(buf, i, eof)
            if v != NO:
                return v, -1, i + tag.length
        return NO, -1, i + 1

    def find_end(self, style: int, buf: str, pos: int) -> tuple[int, int] | None:
        """Inside a block of ``style``: the first tag from ``pos`` that ends it, as
        ``(start, resume)``: the text resumes after a closing tag, at an implicit one."""
        m = self._ends[style].search(buf, pos)
        if m is None:
            return None
        return m.start(), (m.end() if m.group(1) is not None else m.start())

    def hold_end(self, style: int, buf: str, pos: int) -> int:
        """Inside a block of ``style``: where an end tag the buffer may stop in begins
        (``len(buf)`` when none)."""
        return min(tag.hold_from(buf, pos) for tag in self.ends[style])


@lru_cache(maxsize=64)
def compile_styles(styles: tuple[TagStyle, ...]) -> TagSet:
    """The compiled :class:`TagSet` of ``styles`` (cached: splitters are cheap to create)."""
    return TagSet(styles)
