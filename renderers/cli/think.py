"""``renderers think``: split inline reasoning from text on stdin, as it arrives."""

from __future__ import annotations

import argparse
import codecs
import contextlib
import itertools
import json
import os
import sys
from collections.abc import Iterator
from typing import Any, TextIO

from renderers.cli.common import Style, UsageError, check_output_path
from renderers.core.messages import ThinkingPart
from renderers.core.parsing import PartFinished, PartStarted, TextDelta
from renderers.text import STYLES, ReasoningSplitter, openai_fields

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    think = sub.add_parser(
        "think",
        help="split inline reasoning from text on stdin",
        description="Read text on stdin as it arrives and split the reasoning written inline "
        "(<think>...</think>, <thinking ...>, ◁think▷...◁/think▷, ...) from the content. Clean "
        "content goes to stdout as soon as it is known; thinking is shown on stderr (numbered, "
        "indented, coloured on a terminal) or written to --thinking-file. With --json, one "
        'JSON object {"content": ..., "reasoning_content": ...} is printed at the end.',
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
    think.add_argument("--thinking-file", metavar="PATH", help="write thinking here, not to stderr")
    think.add_argument("--json", action="store_true", help="print OpenAI-style JSON at the end")
    think.add_argument("--no-color", action="store_true", help="never colour the thinking")
    think.set_defaults(run=run)


class ThinkingWriter:
    """Shows thinking blocks to a person: numbered, indented, dimmed on a terminal."""

    def __init__(self, stream: TextIO, color: bool | None) -> None:
        self.stream = stream
        self.style = Style(stream, color)
        self.blocks = 0
        self.at_line_start = True

    def start(self) -> None:
        self.blocks += 1
        self.stream.write(self.style(f"[thinking {self.blocks}]", "35") + "\n")
        self.at_line_start = True

    def write(self, text: str) -> None:
        out = []
        for line in text.splitlines(keepends=True):
            if self.at_line_start:
                out.append("  ")
            out.append(line)
            self.at_line_start = line.endswith(("\n", "\r"))
        self.stream.write(self.style.dim("".join(out)))
        self.stream.flush()

    def end(self, part: ThinkingPart) -> None:
        if not self.at_line_start:
            self.stream.write("\n")
            self.at_line_start = True
        notes = [f"{k}={v}" for k, v in part.attributes]
        if part.incomplete:
            notes.append("incomplete")
        if notes:
            self.stream.write(self.style.dim("  (" + ", ".join(notes) + ")") + "\n")
        self.stream.flush()


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


def run(args: argparse.Namespace, out: TextIO) -> int:
    style: Any = tuple(args.tags) if args.tags else args.style
    try:
        splitter = ReasoningSplitter(style)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.thinking_file:
        check_output_path(args.thinking_file, "--thinking-file")
    with contextlib.ExitStack() as stack:
        if args.thinking_file:
            sink: TextIO = stack.enter_context(open(args.thinking_file, "w", encoding="utf-8"))
            color: bool | None = False
        else:
            sink, color = sys.stderr, (False if args.no_color else None)
        shown = ThinkingWriter(sink, color)
        kinds: dict[int, str] = {}
        for chunk in itertools.chain(_stdin_chunks(), [None]):
            events = splitter.finish() if chunk is None else splitter.feed(chunk)
            if args.json:
                continue
            for event in events:
                if isinstance(event, PartStarted):
                    kinds[event.index] = event.kind
                    if event.kind == "thinking":
                        shown.start()
                elif isinstance(event, TextDelta):
                    if kinds[event.index] == "thinking":
                        shown.write(event.text)
                    else:
                        out.write(event.text)
                        out.flush()
                elif isinstance(event, PartFinished) and isinstance(event.part, ThinkingPart):
                    shown.end(event.part)
    if args.json:
        json.dump(openai_fields(splitter.parts), out, ensure_ascii=False)
        out.write("\n")
    for issue in splitter.issues:
        note = f"{issue.message} (character {issue.position})"
        print(f"renderers think: note: {note}", file=sys.stderr)
    return 0
