"""Message text through placeholders: how a template's output is split into template text
(where control-token spellings are control tokens) and message text (never control tokens).

Every string a caller gives (message text, tool-call names and arguments, tool
definitions, template options) reaches the template with **protection markers**: private-use
characters around each control-token spelling it holds, and around a head or tail that
could join the template's neighbouring text into a control-token spelling. When weights
are needed, message fields also get **attribution markers** around their text (leading
and trailing whitespace left outside, so ``strip``/``trim`` in a template behave as
without them): they say which field of which message each piece of the output came from,
and which fields the template wrote at all. A template that tests message text in a way
the markers change (``startswith``, equality) renders differently with them; the renderer
compares with the unmarked rendering and does without attribution then.

The output is then read back: protected text is ordinary text; template text is split
into control tokens and text; markers themselves are dropped, but never let text on their
two sides join into a control token. This is transformers' ``sanitize_control_tokens``
(transformers 5.x ``mark_control_tokens``/``encode_marked_chat``) extended to fragments and
to attribution.

**Where the ids can differ from the raw template** (each case is reported as a
:class:`TemplateDifference`): a control-token spelling inside message text (the raw
template's tokenizer call would make it the control token), and a spelling formed across
a boundary between message text and its neighbour (text merging across a placeholder
boundary). Text on both sides of a boundary is still encoded together, as the template's
output is, so BPE merges across boundaries are the same as the raw template's.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from renderers.core.tokens import TokenTable
from renderers.core.writer import TokenWriter

__all__ = [
    "Field",
    "MarkerClash",
    "Marks",
    "Piece",
    "Rendering",
    "TemplateDifference",
    "marker_base",
    "marker_pattern",
    "private_use",
    "read_rendering",
]

_FIRST = 0xF0000  # the supplementary private-use planes 15 and 16
_LAST = 0x10FFFD
_SPAN = 0x7FF0  # characters of one rendering's markers
_MAX_FIELDS = _SPAN // 4
_CACHE_SIZE = 8192
_PRIVATE_USE = re.compile("[\U000f0000-\U0010ffff]")


def marker_base(avoid: Iterable[int] = ()) -> int:
    """The first marker range (``_SPAN`` characters of the private-use planes) holding none
    of the characters ``avoid`` (which caller text or the template holds)."""
    used = sorted(c for c in set(avoid) if _FIRST <= c <= _LAST)
    start = _FIRST
    for c in used:
        if c >= start + _SPAN:
            break
        if c >= start:
            start = c + 1
    if start + _SPAN > _LAST:
        raise ValueError(
            "the conversation holds too many private-use characters (U+F0000..U+10FFFD) for "
            "the template renderer to mark its text"
        )
    return start


def private_use(text: str) -> set[int]:
    """The characters of ``text`` in the private-use planes the markers come from."""
    return {ord(c) for c in _PRIVATE_USE.findall(text)}


@functools.lru_cache(maxsize=32)
def marker_pattern(base: int) -> re.Pattern[str]:
    """The characters of the markers starting at ``base``."""
    return re.compile(f"[{chr(base)}-{chr(base + _SPAN - 1)}]")


class MarkerClash(Exception):
    """Caller text holds a character of the markers' range (render with another base)."""

    def __init__(self, text: str) -> None:
        super().__init__("caller text holds a marker character")
        self.characters = private_use(text)


# Marker kinds: the offset of a field's four characters.
_OPEN, _CLOSE, _PROTECT, _UNPROTECT = 0, 1, 2, 3


@dataclass(frozen=True, slots=True)
class Field:
    """A string a caller gave: ``message`` is its message's index (-1: tools, options) and
    ``path`` names it (``content``, ``reasoning_content``, ``tool_calls[0].function.name``)."""

    message: int
    path: str

    def __str__(self) -> str:
        return f"messages[{self.message}].{self.path}" if self.message >= 0 else self.path


@dataclass(frozen=True, slots=True)
class TemplateDifference:
    """A place where the ids differ from tokenizing the raw template's output: ``text``
    (a control-token spelling) is ordinary text here, where the raw template's tokenizer
    call would make it a control token. ``where`` is ``"in message text"`` or
    ``"across a boundary"`` (message text joined with the text next to it); for
    ``"template logic"`` the template took another branch because of the protection
    markers (it tested message text that spells control tokens)."""

    field: Field | None
    text: str
    where: str

    def __str__(self) -> str:
        at = f" ({self.field})" if self.field is not None else ""
        return f"{self.where}{at}: {self.text!r}"


@dataclass(frozen=True, slots=True)
class Piece:
    """A control token id, or text; ``field`` is the index of the field it came from (-1:
    template text) and ``protected`` says it is message text (never a control token)."""

    value: int | str
    field: int = -1
    protected: bool = False


class _Protector:
    """Finds control-token spellings in text, and heads/tails that could join neighbouring
    text into one."""

    def __init__(self, table: TokenTable) -> None:
        names = sorted(table.control_tokens, key=len, reverse=True)
        self.pattern = re.compile("|".join(map(re.escape, names))) if names else None
        self.prefixes = {n[:k] for n in names for k in range(1, len(n))}
        self.suffixes = {n[k:] for n in names for k in range(1, len(n))}
        # The lengths worth trying, by the character a head starts / a tail ends with.
        self._heads = _lengths_by(self.suffixes, 0)
        self._tails = _lengths_by(self.prefixes, -1)
        self._ids = table.control_tokens
        self._splits: dict[str, tuple[int | str, ...]] = {}
        self._protected: dict[str, tuple[tuple[int, int], ...]] = {}

    def wraps(self, text: str) -> bool:
        """Whether :meth:`protect` puts ``text`` between markers."""
        return self.pattern is not None and (
            self.pattern.fullmatch(text) is not None
            or text in self.prefixes
            or text in self.suffixes
        )

    def protect(self, text: str, open_: str, close: str) -> str:
        """``text`` with every spelling, and a joinable head and tail, between markers."""
        spans = self._spans(text)
        if not spans:
            return text
        out: list[str] = []
        last = 0
        for start, end in spans:
            out += (text[last:start], open_, text[start:end], close)
            last = end
        out.append(text[last:])
        return "".join(out)

    def split(self, text: str) -> tuple[int | str, ...]:
        """Template text as control token ids and text (cached: templates repeat theirs)."""
        pieces = self._splits.get(text)
        if pieces is None:
            out: list[int | str] = []
            last = 0
            if self.pattern is not None:
                for match in self.pattern.finditer(text):
                    if match.start() > last:
                        out.append(text[last : match.start()])
                    out.append(self._ids[match.group()])
                    last = match.end()
            if last < len(text):
                out.append(text[last:])
            pieces = tuple(out)
            if len(self._splits) >= _CACHE_SIZE:
                self._splits.clear()
            self._splits[text] = pieces
        return pieces

    def _spans(self, text: str) -> tuple[tuple[int, int], ...]:
        """The ``[start, end)`` ranges of ``text`` to protect (cached)."""
        spans = self._protected.get(text)
        if spans is None:
            found: list[tuple[int, int]] = []
            last = 0
            if self.pattern is not None:
                for match in self.pattern.finditer(text):
                    if match.start() > last and last == 0:
                        found += self._edges(text, 0, match.start(), head=True, tail=False)
                    found.append(match.span())
                    last = match.end()
                if last < len(text):
                    found += self._edges(text, last, len(text), head=last == 0, tail=True)
            spans = tuple(found)
            if len(self._protected) >= _CACHE_SIZE:
                self._protected.clear()
            self._protected[text] = spans
        return spans

    def _edges(
        self, text: str, start: int, end: int, *, head: bool, tail: bool
    ) -> list[tuple[int, int]]:
        """A joinable head and tail of ``text[start:end]`` (text between spellings)."""
        found: list[tuple[int, int]] = []
        if head:
            for k in self._heads.get(text[start], ()):
                if k <= end - start and text[start : start + k] in self.suffixes:
                    found.append((start, start + k))
                    start += k
                    break
        if tail and end > start:
            for k in self._tails.get(text[end - 1], ()):
                if k <= end - start and text[end - k : end] in self.prefixes:
                    found.append((end - k, end))
                    break
        return found


def _lengths_by(pieces: set[str], at: int) -> dict[str, tuple[int, ...]]:
    """The lengths of ``pieces`` (longest first) by their character at ``at``."""
    lengths: dict[str, set[int]] = {}
    for piece in pieces:
        lengths.setdefault(piece[at], set()).add(len(piece))
    return {c: tuple(sorted(ks, reverse=True)) for c, ks in lengths.items()}


@functools.lru_cache(maxsize=16)
def _protector(table: TokenTable) -> _Protector:
    return _Protector(table)


class Marks:
    """The markers of one rendering: each field gets four private-use characters (open and
    close its text; open and close a protected span). ``attribute=False`` gives protection
    markers only; ``raw=True`` no markers at all (the template's unprotected rendering)."""

    __slots__ = ("_pattern", "_protector", "attribute", "base", "fields", "raw")

    def __init__(
        self,
        table: TokenTable,
        *,
        attribute: bool = False,
        raw: bool = False,
        base: int = _FIRST,
    ) -> None:
        self._protector = _protector(table)
        self.base = base
        self._pattern = marker_pattern(base)
        self.attribute = attribute and not raw
        self.raw = raw
        self.fields: list[Field] = []

    def field(self, message: int, path: str) -> int:
        """Register a field; its index picks its marker characters."""
        if len(self.fields) >= _MAX_FIELDS:
            raise ValueError(
                f"the conversation has more than {_MAX_FIELDS} text fields, more than the "
                "template renderer can mark"
            )
        self.fields.append(Field(message, path))
        return len(self.fields) - 1

    def text(self, value: str, field: int, *, attribute: bool = False) -> str:
        """``value`` as the template should see it: protected, and (message fields, when
        this rendering attributes) between attribution markers, its leading and trailing
        whitespace outside them."""
        if self.raw or not value:
            return value
        if self._pattern.search(value):
            raise MarkerClash(value)
        base = self.base + 4 * field
        core = value.strip()
        if not core:
            return value
        lead = value[: len(value) - len(value.lstrip())]
        trail = value[len(lead) + len(core) :]
        protected = self._protector.protect(core, chr(base + _PROTECT), chr(base + _UNPROTECT))
        if attribute and self.attribute:
            protected = chr(base + _OPEN) + protected + chr(base + _CLOSE)
        return lead + protected + trail

    def marker(self, field: int, *, attribute: bool = False) -> Callable[[str], str]:
        """A function marking strings of ``field`` (for values inside tool-call arguments)."""
        return functools.partial(self.text, field=field, attribute=attribute)


@dataclass(frozen=True, slots=True)
class Rendering:
    """A template's output read back: pieces, the fields they came from, the text without
    markers, and where the ids differ from the raw template's."""

    pieces: tuple[Piece, ...]
    fields: tuple[Field, ...]
    text: str
    differences: tuple[TemplateDifference, ...]
    seen: frozenset[tuple[int, int]]
    """The attribution markers in the output: ``(field, 0)`` opens a field's text,
    ``(field, 1)`` closes it."""
    protected: bool
    """Whether any caller text was protected: its markers reached the output, whole or cut
    by the template's logic (only then can they change what the template renders, see
    :class:`TemplateDifference`)."""

    def writer(self, table: TokenTable) -> TokenWriter:
        """The pieces in a token writer; message text is attributed to its message (for
        ``ids_and_weights``: sampled, of that message)."""
        w = TokenWriter(table)
        fields = self.fields
        for p in self.pieces:
            message = fields[p.field].message if p.field >= 0 else -1
            if isinstance(p.value, int):
                w.control(p.value, message, message >= 0)
            else:
                w.text(p.value, message, message >= 0)
        return w

    def after(self, table: TokenTable, offset: int) -> Rendering | None:
        """The rendering of the text from character ``offset`` on, to tokenize apart from
        what precedes it (a turn's text after its generation prompt); ``None`` when a
        control token spans ``offset``."""
        pieces: list[Piece] = []
        at = 0
        for p in self.pieces:
            spelled = table.id_to_bytes[p.value].decode() if isinstance(p.value, int) else p.value
            end = at + len(spelled)
            if at >= offset:
                pieces.append(p)
            elif end > offset:
                if isinstance(p.value, int):
                    return None
                pieces.append(Piece(p.value[offset - at :], p.field, p.protected))
            at = end
        return Rendering(
            tuple(pieces), self.fields, self.text[offset:], (), self.seen, self.protected
        )

    def written(self, message: int) -> frozenset[str]:
        """The paths of the fields of ``message`` the output holds whole: both their
        attribution markers are there (a template that cut a field, ``split`` for example,
        kept one at most)."""
        ends: dict[int, int] = {}
        for field, kind in self.seen:
            if self.fields[field].message == message:
                ends[field] = ends.get(field, 0) | (1 << kind)
        return frozenset(self.fields[f].path for f, both in ends.items() if both == 3)


def read_rendering(table: TokenTable, output: str, marks: Marks) -> Rendering:
    """Split a template's ``output`` (rendered with ``marks``) into pieces."""
    protector = _protector(table)
    pieces: list[Piece] = []
    spans: list[tuple[int, int, int]] = []  # protected text: (start, end, field) in ``text``
    texts: list[str] = []
    length = 0
    protected_field = -1
    protection = False  # protection markers reached the output (whole or cut by a template)
    seen: set[tuple[int, int]] = set()
    previous: tuple[int, int] | None = None  # (kind, field) of the marker before the run
    markers = list(marker_pattern(marks.base).finditer(output))
    at = 0
    for k in range(len(markers) + 1):
        end = markers[k].start() if k < len(markers) else len(output)
        run = output[at:end]
        following = _decode(markers[k].group(), marks.base) if k < len(markers) else None
        if run:
            if protected_field >= 0:
                pieces.append(Piece(run, protected_field, True))
                spans.append((length, length + len(run), protected_field))
                texts.append(run)
                length += len(run)
            else:
                field = -1
                if previous is not None and previous[0] == _OPEN:
                    field = previous[1]
                elif following is not None and following[0] == _CLOSE:
                    field = following[1]
                for piece in protector.split(run):
                    pieces.append(Piece(piece, field))
                    spelled = table.id_to_bytes[piece].decode() if isinstance(piece, int) else piece
                    texts.append(spelled)
                    length += len(spelled)
        if following is None:
            break
        kind, field = following
        if kind in (_OPEN, _CLOSE):
            seen.add((field, kind))
        else:
            protection = True
        if kind == _PROTECT and _protects(protector, output, markers, k, field, marks.base):
            protected_field = field
        else:  # a closing marker, or a lone opening one (a template cut the text there)
            protected_field = -1
        previous = following
        at = markers[k].end()
    text = "".join(texts)
    differences = _differences(protector, text, spans, marks.fields) if spans else ()
    return Rendering(
        tuple(pieces), tuple(marks.fields), text, differences, frozenset(seen), protection
    )


def _protects(
    protector: _Protector,
    output: str,
    markers: list[re.Match[str]],
    k: int,
    field: int,
    base: int,
) -> bool:
    """Whether protection marker ``k`` opens a protected span: its closing marker follows
    and what is between them is what protection wraps (a spelling, a head or a tail).
    Templates that cut text (``split``) leave lone markers, which only break the text."""
    if k + 1 >= len(markers) or _decode(markers[k + 1].group(), base) != (_UNPROTECT, field):
        return False
    text = output[markers[k].end() : markers[k + 1].start()]
    return protector.wraps(text)


def _decode(marker: str, base: int) -> tuple[int, int]:
    k = ord(marker) - base
    return k % 4, k // 4


def _differences(
    protector: _Protector,
    text: str,
    spans: list[tuple[int, int, int]],
    fields: list[Field],
) -> tuple[TemplateDifference, ...]:
    """The control-token spellings of ``text`` (the output without markers) that overlap
    protected text: where the raw template would have had a control token."""
    assert protector.pattern is not None
    out: list[TemplateDifference] = []
    k = 0
    for match in protector.pattern.finditer(text):
        start, end = match.span()
        while k < len(spans) and spans[k][1] <= start:
            k += 1
        j = k
        while j < len(spans) and spans[j][0] < end:
            inside = spans[j][0] <= start and end <= spans[j][1]
            where = "in message text" if inside else "across a boundary"
            field = fields[spans[j][2]] if spans[j][2] < len(fields) else None
            out.append(TemplateDifference(field, match.group(), where))
            break
        # a match overlapping no protected span is a control token of the template's own
    return tuple(out)
