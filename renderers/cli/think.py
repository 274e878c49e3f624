"""``renderers think``: split inline reasoning from text on stdin, as it arrives.

Clean content goes to stdout as soon as it is known; the thinking is shown to a person on
stderr (or ``--thinking-file``) in one of three displays::

    numbered (default)   [thinking 1]            (magenta header, dimmed text)
                           Step one.
    blocks               💭 [Thinking 1]         (blue header, cyan text, a blank
                           Step one.              line after each block)

    agent                🧠 reasoning: Step one.  (each thought when complete, and
                         📦 Content completed      a line when the text ends)

Colours only on a terminal (and without ``NO_COLOR``) or with ``--color always``. A
display line starts on a new line when stdout and stderr go to one place (a terminal, or a
pipe with ``2>&1``).
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import io
import itertools
import json
import os
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

from renderers.cli.common import Style, UsageError, check_output_path
from renderers.core.assembly import TEXT, THINKING, Event, PartFinished, PartStarted, TextDelta
from renderers.core.messages import ThinkingPart, ToolCallPart, UnparsedToolCallPart
from renderers.text import (
    STYLES,
    WHITESPACE,
    ReasoningSplitter,
    ThoughtStream,
    openai_fields,
    thoughts,
)

__all__ = ["DISPLAYS", "AgentDisplay", "BlocksDisplay", "Display", "add_parser", "split_and_show"]

DISPLAYS = ("numbered", "blocks", "agent")
"""The ways ``--display`` shows thinking to a person."""


def add_parser(sub: Any) -> None:
    think = sub.add_parser(
        "think",
        help="split inline reasoning from text on stdin",
        description="Read text on stdin as it arrives and split the reasoning written inline "
        "(<think>...</think>, <thinking ...>, ◁think▷...◁/think▷, ...) from the content. Clean "
        "content goes to stdout as soon as it is known; thinking is shown on stderr (numbered, "
        "indented, coloured on a terminal) or written to --thinking-file. With --json, one "
        'JSON object {"content": ..., "reasoning_content": ...} is printed at the end (with '
        "tool_calls and thoughts when there are any); with --events, an agent loop's "
        "thought-stream, content-delta and content-complete events, one JSON object per line.",
        epilog="example: my-llm-client 'question' | renderers think > answer.txt",
    )
    think.add_argument(
        "--style",
        default="auto",
        metavar="NAME",
        help="tag style: one of " + ", ".join(STYLES) + " (default: auto = <think>, "
        "<thinking> and ◁think▷ blocks; forced or deepseek_r1 when the text starts inside "
        "reasoning and only </think> appears; the other names are the reasoning parsers of "
        "vLLM and SGLang)",
    )
    think.add_argument(
        "--tags",
        nargs=2,
        metavar=("OPEN", "CLOSE"),
        help="a custom pair of tags instead of --style",
    )
    think.add_argument(
        "--whitespace",
        choices=WHITESPACE,
        default="tidy",
        help="the content around a removed block: tidy (default: no whitespace left at the "
        "content's edges, between content the separator with the most line breaks) or keep "
        "(the text on both sides exactly as written: 'a <think>x</think> b' gives 'a  b')",
    )
    think.add_argument(
        "--tool-calls",
        action="store_true",
        help='take <tool_call>{"name": ..., "arguments": ...}</tool_call> written as text '
        "(Qwen3 and other Hermes-style models) out of the content: shown with the thinking, "
        "in --json as tool_calls; a call that does not parse is kept verbatim",
    )
    think.add_argument(
        "--display",
        choices=DISPLAYS,
        default="numbered",
        help="how thinking is shown: numbered (default: [thinking 1], indented), blocks "
        "(💭 [Thinking 1], indented, a blank line after each block; blue and cyan) or agent "
        "(🧠 reasoning: ... for each thought, 📦 Content completed at the end)",
    )
    think.add_argument("--thinking-file", metavar="PATH", help="write thinking here, not to stderr")
    output = think.add_mutually_exclusive_group()
    output.add_argument(
        "--json",
        action="store_true",
        help="print OpenAI-style JSON at the end; when the tags carry attributes, also "
        "thoughts: each thought with its typed metadata (thoughtType; confidence, a number, "
        "0.5 when the tag gives none)",
    )
    output.add_argument(
        "--events",
        action="store_true",
        help="print the agent loop's events as JSON lines instead (thought-stream with "
        "thoughtId, thoughtType, verbosity, timestamp; content-delta; content-complete)",
    )
    think.add_argument(
        "--color",
        choices=("auto", "always", "never"),
        default="auto",
        help="colour the thinking (default: auto, on a terminal unless NO_COLOR is set)",
    )
    think.add_argument("--no-color", action="store_true", help="never colour (= --color never)")
    think.set_defaults(run=run)


# -- displays ---------------------------------------------------------------------------


class Display:
    """Shows thinking to a person while the content goes to ``out``: ``[thinking 1]``
    headers, indented text (the default, ``numbered``).

    ``shared``: ``out`` and the display's stream go to one place (a terminal, ``2>&1``),
    so a display line first ends the content's line.
    """

    header_color = "35"
    text_color = "2"

    def __init__(self, stream: TextIO, out: TextIO, color: bool | None, shared: bool) -> None:
        self.stream = stream
        self.out = out
        self.style = Style(stream, color)
        self.shared = shared
        self.blocks = 0
        self.at_line_start = True  # of the thinking being shown
        self.content_at_line_start = True

    # content
    def content(self, text: str) -> None:
        self.out.write(text)
        self.out.flush()
        self.content_at_line_start = text.endswith("\n")

    def _new_line(self) -> None:
        if self.shared and not self.content_at_line_start:
            self.stream.write("\n")
            self.content_at_line_start = True

    # thinking
    def header(self, number: int) -> str:
        return f"[thinking {number}]"

    def start(self) -> None:
        self._new_line()
        self.blocks += 1
        self.stream.write(self.style(self.header(self.blocks), self.header_color) + "\n")
        self.at_line_start = True

    def write(self, text: str) -> None:
        out = []
        for line in text.splitlines(keepends=True):
            body = line.rstrip("\r\n")
            if self.at_line_start:
                body = "  " + body
            if body:  # coloured line by line: a pager or a cut-off line stays readable
                out.append(self.style(body, self.text_color))
            out.append(line[len(line.rstrip("\r\n")) :])
            self.at_line_start = line.endswith(("\n", "\r"))
        self.stream.write("".join(out))
        self.stream.flush()

    def end(self, part: ThinkingPart) -> None:
        if not self.at_line_start:
            self.stream.write("\n")
            self.at_line_start = True
        notes = _notes(part)
        if notes:
            self.stream.write(self.style.dim(f"  ({notes})") + "\n")
        self.stream.flush()

    def tool_call(self, part: ToolCallPart | UnparsedToolCallPart) -> None:
        self._new_line()
        if type(part) is ToolCallPart:
            line = f"[tool call] {part.name} {part.arguments}"
        else:
            assert type(part) is UnparsedToolCallPart
            line = f"[tool call, not parsed: {part.error}] {part.raw}"
        self.stream.write(self.style(line, self.header_color) + "\n")
        self.stream.flush()

    def finish(self) -> None:
        self.stream.flush()


class BlocksDisplay(Display):
    """``💭 [Thinking 1]`` headers in blue, the text indented in cyan, a blank line after
    each block (the SelfAI terminal display)."""

    header_color = "34"
    text_color = "36"

    def header(self, number: int) -> str:
        return f"💭 [Thinking {number}]"

    def end(self, part: ThinkingPart) -> None:
        super().end(part)
        self.stream.write("\n")
        self.stream.flush()


THOUGHT_ICONS = {
    "planning": "📋",
    "reasoning": "🧠",
    "reflection": "🤔",
    "decision": "⚖️",
    "observation": "👁️",
    "strategy": "♟️",
}
"""The agent display's icon of each thought type (``💭`` for any other)."""


class AgentDisplay(Display):
    """``🧠 reasoning: …`` for each thought once complete, ``📦 Content completed`` at the
    end (the agent loop's interactive display; its events' ``thoughtType`` is
    ``reasoning``)."""

    thought_type = "reasoning"

    def start(self) -> None:
        pass

    def write(self, text: str) -> None:
        pass

    def end(self, part: ThinkingPart) -> None:
        if not part.text:
            return
        self._new_line()
        icon = THOUGHT_ICONS.get(self.thought_type, "💭")
        notes = _notes(part)
        line = f"{icon} {self.thought_type}: {part.text}" + (f" ({notes})" if notes else "")
        self.stream.write(line + "\n")
        self.stream.flush()

    def finish(self) -> None:
        self._new_line()
        self.stream.write("📦 Content completed\n")
        self.stream.flush()


_DISPLAY_CLASSES: dict[str, type[Display]] = {
    "numbered": Display,
    "blocks": BlocksDisplay,
    "agent": AgentDisplay,
}


def _notes(part: ThinkingPart) -> str:
    notes = [f"{k}={v}" for k, v in part.attributes]
    if part.incomplete:
        notes.append("incomplete")
    return ", ".join(notes)


# -- the loop ---------------------------------------------------------------------------


def split_and_show(
    chunks: Iterable[str], splitter: ReasoningSplitter, display: Display | None
) -> None:
    """Feed ``chunks`` to ``splitter`` and show what each makes on ``display`` (``None``:
    only split, for ``--json``)."""
    kinds: dict[int, str] = {}
    for chunk in itertools.chain(chunks, [None]):
        events: list[Event] = splitter.finish() if chunk is None else splitter.feed(chunk)
        if display is None:
            continue
        for event in events:
            if type(event) is PartStarted:
                kinds[event.index] = event.kind
                if event.kind == THINKING:
                    display.start()
            elif type(event) is TextDelta:
                if kinds[event.index] == TEXT:
                    display.content(event.text)
                else:
                    display.write(event.text)
            elif type(event) is PartFinished:
                part = event.part
                if type(part) is ThinkingPart:
                    display.end(part)
                elif isinstance(part, (ToolCallPart, UnparsedToolCallPart)):
                    display.tool_call(part)
    if display is not None:
        display.finish()


def _stdin_chunks() -> Iterator[str]:
    """Text from stdin as it arrives (not line-buffered), UTF-8 split safely."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    fd = sys.stdin.fileno()
    while True:
        data = os.read(fd, 65536)
        text = decoder.decode(data, final=not data)
        if text:
            yield text
        if not data:
            return


def _shared(a: TextIO, b: TextIO) -> bool:
    """Whether writes to ``a`` and ``b`` end up interleaved in one place (a terminal, or
    one pipe or file as with ``2>&1``)."""
    if a is b:
        return True
    try:
        sa, sb = os.fstat(a.fileno()), os.fstat(b.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        return False
    return (sa.st_dev, sa.st_ino, sa.st_rdev) == (sb.st_dev, sb.st_ino, sb.st_rdev)


def _events(chunks: Iterable[str], stream: ThoughtStream, out: TextIO) -> None:
    for chunk in itertools.chain(chunks, [None]):
        for event in stream.finish() if chunk is None else stream.feed(chunk):
            out.write(json.dumps(event.to_dict(), ensure_ascii=False) + "\n")
        out.flush()


def run(args: argparse.Namespace, out: TextIO) -> int:
    style: Any = tuple(args.tags) if args.tags else args.style
    if args.events and args.tool_calls:
        raise UsageError("--tool-calls: not with --events (the agent loop's events have none)")
    try:
        if args.events:
            stream = ThoughtStream(style, whitespace=args.whitespace)
        else:
            splitter = ReasoningSplitter(
                style, whitespace=args.whitespace, tool_calls=args.tool_calls
            )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.thinking_file:
        check_output_path(args.thinking_file, "--thinking-file")
    if args.events:
        _events(_stdin_chunks(), stream, out)
        _notify(stream.issues)
        return 0
    color = {"always": True, "never": False}.get("never" if args.no_color else args.color)
    with contextlib.ExitStack() as stack:
        if args.thinking_file:
            sink: TextIO = stack.enter_context(open(args.thinking_file, "w", encoding="utf-8"))
            color = bool(color)  # a file is coloured only when asked
        else:
            sink = sys.stderr
        display = None
        if not args.json:
            cls = _DISPLAY_CLASSES[args.display]
            display = cls(sink, out, color, _shared(out, sink))
        split_and_show(_stdin_chunks(), splitter, display)
    if args.json:
        fields = openai_fields(splitter.parts)
        typed = thoughts(splitter.parts)
        if any(p.attributes for p in splitter.parts if type(p) is ThinkingPart):
            fields["thoughts"] = [t.to_dict() for t in typed]
        json.dump(fields, out, ensure_ascii=False)
        out.write("\n")
    _notify(splitter.issues)
    return 0


def _notify(issues: Iterable[Any]) -> None:
    for issue in issues:
        note = f"{issue.message} (character {issue.position})"
        print(f"renderers think: note: {note}", file=sys.stderr)
