"""A parsed completion: its message, how it ended, what was repaired, and what came after.

:class:`ParseResult` is what every parser returns; the ids after the end of a message
(often most of a long completion a sampler did not stop) are kept as the parser got them
and made a tuple or decoded only when the field is first read.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, TypeAlias

import numpy as np

from renderers.core.messages import Message, Part, UnparsedToolCallPart
from renderers.core.tokens import TokenTable

__all__ = ["ParseIssue", "ParseResult", "Termination", "TrailingPiece", "finished_result"]


class Termination(StrEnum):
    """How a sampled completion ended."""

    STOP = "stop"
    """Ended at one of the format's stop tokens."""
    EOS = "eos"
    """Ended at the tokenizer's end-of-sequence token."""
    LENGTH = "length"
    """Ran out of tokens without a stop token: the open part is marked incomplete."""
    MALFORMED = "malformed"
    """The parser had to repair the structure (see :attr:`ParseResult.issues`)."""


@dataclass(frozen=True, slots=True)
class ParseIssue:
    """A structural problem the lenient parser repaired, at ``position``: a token index
    for token-level parsers, a character offset for text-level ones."""

    position: int
    message: str


@dataclass(frozen=True, slots=True)
class ParseResult:
    """A parsed completion.

    ``spans[i]`` is the ``[start, end)`` token range of ``message.parts[i]`` in the
    completion, markers included. ``stop_token_id`` is the token that ended the message
    (``None`` if none did); ``trailing_ids`` are the tokens after it, which are not part of
    the message (``trailing_text`` is their text).
    """

    message: Message
    termination: Termination
    spans: tuple[tuple[int, int], ...]
    stop_token_id: int | None = None
    trailing_ids: tuple[int, ...] = ()
    trailing_text: str = ""
    issues: tuple[ParseIssue, ...] = ()


class _Deferred:
    """A :class:`ParseResult` field's value, computed when the field is first read."""

    __slots__ = ()

    def value(self) -> Any:
        raise NotImplementedError


TrailingPiece: TypeAlias = "list[int] | np.ndarray"
"""Ids after the end of a message as a parser got them (an array: its own copy)."""


class _TrailingIds(_Deferred):
    """The ids after a stop token, made a tuple when first read: the tail can be most of
    a long completion (an array's is never a Python int per id unless read)."""

    __slots__ = ("_pieces",)

    def __init__(self, pieces: list[TrailingPiece]) -> None:
        self._pieces = pieces

    def value(self) -> tuple[int, ...]:
        out: list[int] = []
        for piece in self._pieces:
            out += piece.tolist() if isinstance(piece, np.ndarray) else piece
        return tuple(out)


class _TrailingText(_Deferred):
    """The text of the ids after a stop token, decoded when first read."""

    __slots__ = ("_pieces", "_table")

    def __init__(self, table: TokenTable, pieces: list[TrailingPiece]) -> None:
        self._table = table
        self._pieces = pieces

    def value(self) -> str:
        id_bytes = self._table.id_to_bytes
        data = b"".join(
            self._table.join_bytes(piece)
            if isinstance(piece, np.ndarray)
            else b"".join(map(id_bytes.__getitem__, piece))
            for piece in self._pieces
        )
        return data.decode("utf-8", "replace")


class _LazyField:
    """A :class:`ParseResult` field whose slot holds a :class:`_Deferred` until read, then
    its value. Equality, hashing, repr, pickling and ``replace`` read the field, so they
    see the value."""

    def __init__(self, slot: Any) -> None:
        self._slot = slot

    def __get__(self, obj: ParseResult | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        value = self._slot.__get__(obj, owner)
        if isinstance(value, _Deferred):
            value = value.value()
            self._slot.__set__(obj, value)
        return value

    def __set__(self, obj: ParseResult, value: Any) -> None:
        self._slot.__set__(obj, value)


_trailing_ids_slot = vars(ParseResult)["trailing_ids"]
_trailing_text_slot = vars(ParseResult)["trailing_text"]
ParseResult.trailing_ids = _LazyField(_trailing_ids_slot)  # type: ignore[assignment,misc]
ParseResult.trailing_text = _LazyField(_trailing_text_slot)  # type: ignore[assignment,misc]


def finished_result(
    role: str,
    parts: list[Part | None],
    spans: list[tuple[int, int]],
    issues: list[ParseIssue],
    *,
    shift: int,
    stop_id: int | None,
    stop_ids: frozenset[int],
    table: TokenTable,
    trailing: list[int],
    trailing_pieces: list[TrailingPiece],
) -> ParseResult:
    """The result of a finished parse: the assembled ``parts`` (``None`` for a part never
    finished) and their ``spans``, the ``issues`` repaired, ``shift`` ids read before the
    completion (positions count from its first id), the id that ended the message, and the
    ids after it (``trailing_pieces`` then ``trailing``, in order; tupled and decoded when
    read). A tool call that cannot be read is an issue too: an agent must know."""
    issues = list(issues)
    for part, (start, _) in zip(parts, spans, strict=True):
        if type(part) is UnparsedToolCallPart and not part.incomplete:
            issues.append(ParseIssue(start, f"tool call not parsed: {part.error}"))
    issues.sort(key=lambda issue: issue.position)
    if shift:  # count from the completion's first id (see StreamParser.read_before)
        spans = [(max(a - shift, 0), max(b - shift, 0)) for a, b in spans]
        issues = [ParseIssue(max(i.position - shift, 0), i.message) for i in issues]
    message = Message(role, [p for p in parts if p is not None])
    if isinstance(message.content, str) and len(spans) > 1:
        spans = [(spans[0][0], spans[-1][1])]
    if issues:
        termination = Termination.MALFORMED
    elif stop_id is None:
        termination = Termination.LENGTH
    elif stop_id in stop_ids:
        termination = Termination.STOP
    else:
        termination = Termination.EOS
    pieces = trailing_pieces
    ids = tuple(trailing) if not pieces else ()
    result = ParseResult(message, termination, tuple(spans), stop_id, ids, "", tuple(issues))
    if pieces:  # made a tuple when read
        pieces.append(trailing)
        _trailing_ids_slot.__set__(result, _TrailingIds(pieces))
    if ids or pieces:  # decoded when read
        _trailing_text_slot.__set__(result, _TrailingText(table, pieces or [trailing]))
    return result
