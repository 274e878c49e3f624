"""Whitespace around removed reasoning: what the content keeps, what the reasoning sheds.

Content (``whitespace="tidy"``, the default). Removing a block must leave natural text,
so the whitespace that touches a removed block is decided together with the block. A
*gap* is a maximal stretch of the text made of removed blocks and whitespace (at least
one block); its whitespace comes in *runs*: before the first block, between blocks, after
the last one.

- A gap at the start of the text (no content before it) or at its end (none after it)
  leaves nothing: content never starts or ends with whitespace a block left behind.
- A gap between content leaves the run with the most line breaks (the first such run),
  up to and including its last line break, then the indentation of the next line (what
  follows the last line break of the last run). Without line breaks it leaves the first
  non-empty run. So ``a <think>x</think> b`` gives ``a b``, ``Intro. <think>x</think>\\n\\nNext``
  gives ``Intro.\\n\\nNext`` and ``A\\n<think>x</think>  - item`` gives ``A\\n  - item``.

Whitespace that touches no block is content like any other: text without blocks comes
back unchanged. In streaming the whitespace at the end of the content is held until the
next character decides it (:class:`ContentWhitespace`); all else is emitted at once.

Kept exactly (``whitespace="keep"``, :class:`KeptWhitespace`): the content is the text
with the blocks cut out and nothing else changed, so ``a <think>x</think> b`` gives
``a  b`` (two spaces), as the thought-stream documents specify; in streaming nothing is
held but a possible tag.

Reasoning. A block's text loses its leading and trailing whitespace; when it has two
segments (a ``thought`` attribute and a body) they are joined by a blank line
(:class:`ReasoningTrim`). This holds in both modes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypeAlias

__all__ = [
    "WHITESPACE",
    "WS",
    "ContentWhitespace",
    "KeptWhitespace",
    "ReasoningTrim",
    "Whitespace",
    "content_whitespace",
    "gap_separator",
]

WS = " \t\r\n"
"""The whitespace characters of the rules above (XML's S production)."""

Whitespace: TypeAlias = Literal["tidy", "keep"]
WHITESPACE: tuple[Whitespace, ...] = ("tidy", "keep")
"""The ``whitespace=`` modes: ``"tidy"`` (the default: the rules above) and ``"keep"``."""


def gap_separator(runs: Sequence[str]) -> str:
    """The whitespace a gap between content leaves, from its whitespace ``runs``."""
    breaks = [run.count("\n") for run in runs]
    most = max(breaks, default=0)
    if most == 0:
        return next((run for run in runs if run), "")
    widest = runs[breaks.index(most)]
    last = runs[-1]
    return widest[: widest.rindex("\n") + 1] + last[last.rfind("\n") + 1 :]


class ContentWhitespace:
    """Streams content, holding the whitespace at its end until the next character shows
    whether a gap ends there (see the module docstring).

    Feed content with :meth:`text` and say where a block was removed with :meth:`block`;
    each returns nothing or the content that is now certain.
    """

    __slots__ = ("_blocks", "_runs", "_started")

    def __init__(self) -> None:
        self._started = False  # content other than whitespace was emitted
        self._blocks = 0  # blocks removed since that content's last non-whitespace
        self._runs: list[list[str]] = [[]]  # the held whitespace, one run per block + 1

    def text(self, s: str) -> str:
        """Content ``s`` arrived: what can be emitted now."""
        core = s.lstrip(WS)
        if not core:
            if s:
                self._runs[-1].append(s)
            return ""
        self._runs[-1].append(s[: len(s) - len(core)])
        body = core.rstrip(WS)
        out = self._resolve() + body
        self._runs = [[core[len(body) :]]]
        self._blocks = 0
        self._started = True
        return out

    def block(self) -> None:
        """A block was removed here."""
        self._blocks += 1
        self._runs.append([])

    def finish(self) -> str:
        """The text ended: the held whitespace, unless a block was removed in it."""
        out = "" if self._blocks else "".join(self._runs[0])
        self._runs = [[]]
        self._blocks = 0
        return out

    @property
    def held(self) -> int:
        """Characters held back."""
        return sum(len(piece) for run in self._runs for piece in run)

    def _resolve(self) -> str:
        runs = ["".join(run) for run in self._runs]
        if not self._blocks:
            return runs[0]
        return gap_separator(runs) if self._started else ""


class KeptWhitespace:
    """Streams content exactly as it arrives (``whitespace="keep"``): the same interface
    as :class:`ContentWhitespace`, holding nothing."""

    __slots__ = ()

    def text(self, s: str) -> str:
        """Content ``s`` arrived: all of it can be emitted now."""
        return s

    def block(self) -> None:
        """A block was removed here: nothing to decide."""

    def finish(self) -> str:
        """The text ended: nothing was held."""
        return ""

    @property
    def held(self) -> int:
        """Characters held back: none."""
        return 0


def content_whitespace(mode: str) -> ContentWhitespace | KeptWhitespace:
    """The content filter of a ``whitespace=`` mode (raises ``ValueError`` if unknown)."""
    if mode == "tidy":
        return ContentWhitespace()
    if mode == "keep":
        return KeptWhitespace()
    raise ValueError(f"whitespace: expected 'tidy' or 'keep', got {mode!r}")


class ReasoningTrim:
    """Streams a block's reasoning text without leading and trailing whitespace.

    Text comes in segments (a ``thought`` attribute, then the body); non-empty segments
    are joined by a blank line.
    """

    __slots__ = ("_held", "_segment_start", "_started")

    def __init__(self) -> None:
        self._started = False
        self._segment_start = True
        self._held: list[str] = []

    def write(self, s: str) -> str:
        """Reasoning text ``s`` arrived: what can be emitted now."""
        if self._segment_start:
            s = s.lstrip(WS)
            if not s:
                return ""
            self._segment_start = False
            lead = "\n\n" if self._started else ""
        else:
            lead = ""
        core = s.rstrip(WS)
        if not core:
            self._held.append(s)
            return ""
        if self._held:
            lead += "".join(self._held)
        self._held = [s[len(core) :]] if len(core) < len(s) else []
        self._started = True
        return lead + core

    def end_segment(self) -> None:
        """The current segment is complete: its trailing whitespace is dropped."""
        self._held = []
        self._segment_start = True
