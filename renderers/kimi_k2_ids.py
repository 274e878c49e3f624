"""The call ids of a Kimi-K2 rendering (see :mod:`renderers.kimi_k2`): what each call is
written with, and what each tool result is headed with.

A call is written with the caller's id (``call_ids="given"``, the templates) or as
``functions.NAME:IDX`` (``"numbered"``; K2-Instruct's template always numbers the calls of
each message). Kimi models sample ``functions.NAME:IDX``: an id of another form is written
as given with one ``UserWarning``, and a *trained* call whose id does not name its function
is an error (the model would learn a call to no function).
"""

from __future__ import annotations

import re
from typing import Protocol

from renderers.core.messages import Message, ToolCallPart, UnparsedToolCallPart
from renderers.core.sections import tool_name_from_id

__all__ = ["CallIdBook", "IdWriter"]


class IdWriter(Protocol):
    """The renderer a :class:`CallIdBook` writes for."""

    _warned: set[str]

    @property
    def name(self) -> str: ...

    @property
    def _per_message_ids(self) -> bool: ...

    def _warn_once(self, situation: str, message: str) -> None: ...


_KIMI_ID = re.compile(r"functions\.(.+):\d+\Z", re.DOTALL)


class CallIdBook:
    """The call ids of one rendering: what each call is written with and what each tool
    result is headed with (see the module docs)."""

    __slots__ = ("count", "in_message", "numbered", "renderer", "unanswered", "written")

    def __init__(self, renderer: IdWriter, *, numbered: bool) -> None:
        self.renderer = renderer
        self.numbered = numbered
        self.count = 0  # calls of the conversation so far
        self.in_message = 0  # calls of the current message so far
        self.written: dict[str, str] = {}  # the caller's id -> the id written (numbered)
        self.unanswered: list[str] = []  # ids written, not yet answered (numbered)

    def new_message(self) -> None:
        self.in_message = 0

    def call(self, part: ToolCallPart, i: int, trained: bool) -> str:
        """The id written for the call ``part`` of message ``i`` (``trained``: a trained
        turn, whose calls must name their function)."""
        per_message = self.renderer._per_message_ids
        if per_message or self.numbered:
            index = self.in_message if per_message else self.count
            call_id = f"functions.{part.name}:{index}"
        else:
            if part.id is None:
                raise ValueError(
                    f"messages[{i}]: {self.renderer.name} writes each tool call's id, which "
                    f"names its function; the call to {part.name!r} has none (give ids, "
                    "or pass call_ids='numbered' to number the calls functions.NAME:IDX)"
                )
            call_id = part.id
            match = _KIMI_ID.match(call_id)
            if match is None or match.group(1) != part.name:
                if trained and tool_name_from_id(call_id) != part.name:
                    raise ValueError(
                        f"messages[{i}]: {self.renderer.name} writes a tool call's id, not its "
                        f"name, and the id {call_id!r} of this trained call to {part.name!r} "
                        "does not name it: the model would learn a call to no function (give "
                        "ids functions.NAME:IDX, or pass call_ids='numbered')"
                    )
                self._foreign(call_id, i)
        self._count(part.id, call_id)
        return call_id

    def unparsed_call(self, part: UnparsedToolCallPart) -> None:
        """An unparsed call (written as sampled, its id inside): counted like a call."""
        self._count(part.id, part.id or "")

    def _count(self, given: str | None, written: str) -> None:
        self.count += 1
        self.in_message += 1
        if self.numbered:
            if given is not None:
                self.written[given] = written
            self.unanswered.append(written)

    def result(self, m: Message, i: int) -> str:
        """The id heading the tool result ``m`` (message ``i``)."""
        given = m.tool_call_id
        if not self.numbered:
            if given is None:
                raise ValueError(
                    f"messages[{i}]: {self.renderer.name} heads a tool result with the id of "
                    "the call it answers; this tool message has no tool_call_id (give it, or "
                    "pass call_ids='numbered' to answer the calls in order)"
                )
            if _KIMI_ID.match(given) is None:
                self._foreign(given, i)
            return given
        if given is None:
            if not self.unanswered:
                raise ValueError(
                    f"messages[{i}]: this tool message has no tool_call_id and every earlier "
                    "tool call is answered (call_ids='numbered' answers calls in order)"
                )
            return self.unanswered.pop(0)
        written = self.written.get(given)
        if written is None:
            raise ValueError(
                f"messages[{i}]: tool_call_id {given!r} names no earlier tool call "
                "(call_ids='numbered' heads a result with the id written for its call)"
            )
        if written in self.unanswered:
            self.unanswered.remove(written)
        return written

    def _foreign(self, call_id: str, i: int) -> None:
        r = self.renderer
        if "foreign ids" in r._warned:  # every render of a history meets its ids again
            return
        r._warn_once(
            "foreign ids",
            f"{r.name}: tool-call ids not of the form functions.NAME:IDX, the form Kimi "
            f"models were trained on (messages[{i}]: {call_id!r}), are written as given, as "
            "the template does; call_ids='numbered' writes functions.NAME:IDX ids",
        )
