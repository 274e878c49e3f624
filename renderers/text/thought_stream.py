"""An agent loop's events over the splitter: ``thought-stream`` for each thought,
``content-delta`` and ``content-complete`` for the clean content.

This is the event protocol of the thought-extraction documents (an agent loop that takes
``<thinking>`` blocks out of the model's text and emits them as thought events). Per
chunk of text, as they emit them: the chunk's completed thoughts in order, then one
``content-delta`` with the chunk's clean content; at the end, ``content-complete`` with
the whole clean content. A thought event carries::

    thoughtId     thought-{timestamp}-{random}, unique
    thoughtType   "reasoning" (the default; planning, reflection, decision, observation,
                  strategy can be chosen)
    verbosity     "normal" (the default; brief, detailed)
    content       the thought (also under "thought", the other document's name)
    index         0, 1, ... in order of the thoughts
    timestamp     ISO 8601, UTC, milliseconds
    metadata      the typed attributes (renderers.text.thought.Thought): thoughtType
                  (the tag's thought_type, when given), confidence (a number, 0.5 when
                  absent), and verbosity again, where the attribute format puts it

Field names are the documents' in :meth:`to_dict` (camelCase); the dataclasses use
Python's. A thought cut off by the end of the text is a thought with ``incomplete`` in its
metadata; a block without text makes no event.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeAlias

from renderers.core.assembly import TEXT, PartFinished, PartStarted, TextDelta
from renderers.core.messages import ThinkingPart
from renderers.core.result import ParseIssue
from renderers.text.events import ReasoningPart
from renderers.text.splitter import ReasoningSplitter
from renderers.text.styles import StyleSpec
from renderers.text.thought import Thought
from renderers.text.whitespace import Whitespace

__all__ = [
    "THOUGHT_TYPES",
    "VERBOSITIES",
    "AgentEvent",
    "ContentCompleteEvent",
    "ContentDeltaEvent",
    "ThoughtStream",
    "ThoughtStreamEvent",
    "iter_thought_events",
]

THOUGHT_TYPES = ("planning", "reasoning", "reflection", "decision", "observation", "strategy")
"""The thought types of the agent loop's events (``ThoughtType``)."""
VERBOSITIES = ("brief", "normal", "detailed")
"""Its verbosity levels (``ThoughtVerbosity``)."""

_ID_CHARS = "0123456789abcdefghijklmnopqrstuvwxyz"


def _ids(task_id: str | None, context_id: str | None) -> dict[str, str]:
    out = {}
    if task_id is not None:
        out["taskId"] = task_id
    if context_id is not None:
        out["contextId"] = context_id
    return out


@dataclass(frozen=True, slots=True)
class ThoughtStreamEvent:
    """A completed thought (``kind: 'thought-stream'``); ``thought`` is its typed view."""

    kind: ClassVar[str] = "thought-stream"
    thought_id: str
    content: str
    index: int
    timestamp: str
    thought: Thought
    thought_type: str = "reasoning"
    verbosity: str = "normal"
    task_id: str | None = None
    context_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The event as the documents write it (camelCase; ids only when given)."""
        metadata: dict[str, Any] = {"verbosity": self.verbosity}
        metadata.update(self.thought.to_dict())
        del metadata["thought"]
        return {
            "kind": self.kind,
            **_ids(self.task_id, self.context_id),
            "thoughtId": self.thought_id,
            "thoughtType": self.thought_type,
            "verbosity": self.verbosity,
            "content": self.content,
            "thought": self.content,
            "index": self.index,
            "timestamp": self.timestamp,
            "metadata": metadata,
        }


@dataclass(frozen=True, slots=True)
class ContentDeltaEvent:
    """Clean content of one chunk (``kind: 'content-delta'``); ``index`` numbers the
    chunks fed, from 0 (the end of the text is one more)."""

    kind: ClassVar[str] = "content-delta"
    delta: str
    index: int
    timestamp: str
    task_id: str | None = None
    context_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The event as the documents write it (camelCase; ids only when given)."""
        return {
            "kind": self.kind,
            **_ids(self.task_id, self.context_id),
            "delta": self.delta,
            "index": self.index,
            "timestamp": self.timestamp,
        }


@dataclass(frozen=True, slots=True)
class ContentCompleteEvent:
    """The whole clean content, at the end of the text (``kind: 'content-complete'``)."""

    kind: ClassVar[str] = "content-complete"
    content: str
    timestamp: str
    task_id: str | None = None
    context_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The event as the documents write it (camelCase; ids only when given)."""
        return {
            "kind": self.kind,
            **_ids(self.task_id, self.context_id),
            "content": self.content,
            "timestamp": self.timestamp,
        }


AgentEvent: TypeAlias = ThoughtStreamEvent | ContentDeltaEvent | ContentCompleteEvent


class ThoughtStream:
    """``feed(chunk) -> events``, ``finish() -> events`` in the agent loop's protocol
    (see the module docstring), over a :class:`~renderers.text.ReasoningSplitter` of
    ``style`` and ``whitespace``.

    ``task_id`` and ``context_id`` are copied into every event; ``thought_type`` and
    ``verbosity`` into every thought. ``clock`` gives the time in seconds since the epoch
    (for the timestamps and ids; tests pass a fixed one).
    """

    __slots__ = (
        "_chunk",
        "_clock",
        "_content",
        "_context_id",
        "_kinds",
        "_splitter",
        "_task_id",
        "_thought_type",
        "_thoughts",
        "_verbosity",
    )

    def __init__(
        self,
        style: StyleSpec = "auto",
        *,
        whitespace: Whitespace = "tidy",
        task_id: str | None = None,
        context_id: str | None = None,
        thought_type: str = "reasoning",
        verbosity: str = "normal",
        clock: Callable[[], float] = time.time,
    ) -> None:
        if thought_type not in THOUGHT_TYPES:
            raise ValueError(
                f"thought_type: expected one of {', '.join(THOUGHT_TYPES)}, got {thought_type!r}"
            )
        if verbosity not in VERBOSITIES:
            raise ValueError(
                f"verbosity: expected one of {', '.join(VERBOSITIES)}, got {verbosity!r}"
            )
        self._splitter = ReasoningSplitter(style, whitespace=whitespace)
        self._task_id = task_id
        self._context_id = context_id
        self._thought_type = thought_type
        self._verbosity = verbosity
        self._clock = clock
        self._chunk = 0
        self._thoughts = 0
        self._kinds: dict[int, str] = {}
        self._content: list[str] = []

    def feed(self, chunk: str) -> list[AgentEvent]:
        """The events of one chunk: its completed thoughts, then its clean content."""
        return self._events(self._splitter.feed(chunk), end=False)

    def finish(self) -> list[AgentEvent]:
        """The end of the text: what was held back, then ``content-complete``."""
        return self._events(self._splitter.finish(), end=True)

    @property
    def parts(self) -> tuple[ReasoningPart, ...]:
        """The splitter's parts so far."""
        return self._splitter.parts

    @property
    def issues(self) -> tuple[ParseIssue, ...]:
        """The splitter's issues so far."""
        return self._splitter.issues

    def _events(self, events: list[Any], end: bool) -> list[AgentEvent]:
        now = self._clock()
        stamp = datetime.fromtimestamp(now, UTC).isoformat(timespec="milliseconds")
        stamp = stamp.replace("+00:00", "Z")
        out: list[AgentEvent] = []
        delta: list[str] = []
        for event in events:
            if type(event) is PartStarted:
                self._kinds[event.index] = event.kind
            elif type(event) is TextDelta:
                if self._kinds[event.index] == TEXT:
                    delta.append(event.text)
            elif type(event) is PartFinished:
                part = event.part
                if type(part) is ThinkingPart and part.text:  # a block without text: none
                    out.append(self._thought(part, now, stamp))
        if delta:
            text = "".join(delta)
            self._content.append(text)
            out.append(ContentDeltaEvent(text, self._chunk, stamp, self._task_id, self._context_id))
        self._chunk += 1
        if end:
            out.append(
                ContentCompleteEvent("".join(self._content), stamp, self._task_id, self._context_id)
            )
        return out

    def _thought(self, part: ThinkingPart, now: float, stamp: str) -> ThoughtStreamEvent:
        random = "".join(secrets.choice(_ID_CHARS) for _ in range(9))
        event = ThoughtStreamEvent(
            f"thought-{int(now * 1000)}-{random}",
            part.text,
            self._thoughts,
            stamp,
            Thought.of(part),
            self._thought_type,
            self._verbosity,
            self._task_id,
            self._context_id,
        )
        self._thoughts += 1
        return event


def iter_thought_events(
    chunks: Iterable[str],
    style: StyleSpec = "auto",
    *,
    whitespace: Whitespace = "tidy",
    task_id: str | None = None,
    context_id: str | None = None,
    thought_type: str = "reasoning",
    verbosity: str = "normal",
) -> Iterator[AgentEvent]:
    """The agent loop's events for text arriving in ``chunks`` (see :class:`ThoughtStream`),
    ending with ``content-complete``."""
    stream = ThoughtStream(
        style,
        whitespace=whitespace,
        task_id=task_id,
        context_id=context_id,
        thought_type=thought_type,
        verbosity=verbosity,
    )
    for chunk in chunks:
        yield from stream.feed(chunk)
    yield from stream.finish()
