"""The ``renderers`` command line.

Subcommands behave like Unix tools: data on stdout, diagnostics on stderr, exit status 0
on success, 1 on failure, 2 on usage errors.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import importlib
import itertools
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

from renderers.messages import Message, TextPart, ThinkingPart, ToolCallPart, UnparsedToolCallPart
from renderers.registry import describe_renderers, get_renderer

__all__ = ["main"]

_DEMO_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    }
]
_DEMO_CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a concise travel assistant."},
    {"role": "user", "content": "Should I pack an umbrella for Paris tomorrow?"},
]
_DEMO_ANSWER: dict[str, Any] = {
    "role": "assistant",
    "reasoning_content": "The user wants tomorrow's weather in Paris. I should call the "
    "weather tool before answering.",
    "content": "Let me check the forecast for Paris.",
    "tool_calls": [
        {
            "id": "functions.get_weather:0",
            "type": "function",
            "function": {"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}},
        }
    ],
}


# Demo settings where a format's defaults would hide something: DeepSeek-V3's template
# never closes a single tool call and cannot show reasoning (R1-style is an option);
# Kimi-K2-Instruct has no reasoning at all.
_DEMO_OPTIONS: dict[str, dict[str, Any]] = {
    "deepseek_v3": {"render_thinking": True, "fix_tool_format": True},
}
_NO_REASONING = ("kimi_k2",)


class _Style:
    """ANSI styling, enabled only when writing to a terminal."""

    def __init__(self, stream: TextIO, enabled: bool | None) -> None:
        if enabled is None:
            enabled = stream.isatty() and os.environ.get("NO_COLOR") is None
        self.enabled = enabled

    def __call__(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.enabled else text

    def heading(self, text: str) -> str:
        return self(f"== {text} ==", "1")

    def dim(self, text: str) -> str:
        return self(text, "2")


def _indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.splitlines() or [""])


def _demo(args: argparse.Namespace, out: TextIO) -> int:
    style = _Style(out, False if args.no_color else None)
    renderer = get_renderer(args.model)
    options = _DEMO_OPTIONS.get(renderer.name, {})
    if options:
        renderer = get_renderer(renderer.name, renderer.tokenizer, **options)
    answer = dict(_DEMO_ANSWER)
    if renderer.name in _NO_REASONING:
        del answer["reasoning_content"]
    prompt = renderer.build_generation_prompt(_DEMO_CONVERSATION, tools=_DEMO_TOOLS)
    settings = "".join(f"; {k}={v!r}" for k, v in options.items())
    heading = f"Prompt for {args.model} ({renderer.name}{settings}): {len(prompt)} tokens"
    print(style.heading(heading), file=out)
    print(renderer.decode(prompt), file=out)
    print(file=out)

    # A completion made of real token ids: what the model samples for the demo answer.
    example = renderer.build_supervised_example([*_DEMO_CONVERSATION, answer], tools=_DEMO_TOOLS)
    completion = example.tokens[example.weights > 0].tolist()
    print(style.heading(f"Sampled completion: {len(completion)} token ids"), file=out)
    print(style.dim(" ".join(map(str, completion))), file=out)
    print(file=out)

    result = renderer.parse_response(completion)
    print(style.heading(f"Parsed message (termination: {result.termination.value})"), file=out)
    _print_message(result.message, style, out)
    return 0


def _print_message(message: Message, style: _Style, out: TextIO) -> None:
    thinking = [p for p in message.parts if isinstance(p, ThinkingPart)]
    if thinking:
        print(style("Thinking (shown to a person, not passed on):", "35"), file=out)
        for k, block in enumerate(thinking, 1):
            print(style.dim(_indent(f"[{k}] {block.text}")), file=out)
    print(style("Answer parts, in sampled order:", "32"), file=out)
    for part in message.parts:
        if isinstance(part, TextPart):
            print(_indent(f"text: {part.text}"), file=out)
        elif isinstance(part, ToolCallPart):
            print(_indent(f"tool call: {part.name}({part.arguments})"), file=out)
        elif isinstance(part, UnparsedToolCallPart):
            print(_indent(f"unparsed tool call ({part.error}): {part.raw!r}"), file=out)
        else:
            print(style.dim(_indent(f"thinking: {len(part.text)} characters")), file=out)


def _read_text(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    return Path(path).read_text(encoding="utf-8")


def _load_json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what} is not valid JSON: {exc}") from None


def _options(pairs: Sequence[str]) -> dict[str, Any]:
    """``--option key=value`` pairs; values are JSON when they parse as JSON."""
    options: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise _UsageError(f"--option expects key=value, got {pair!r}")
        try:
            options[key] = json.loads(value)
        except json.JSONDecodeError:
            options[key] = value
    return options


class _UsageError(Exception):
    """A command-line usage error (exit status 2)."""


def _render(args: argparse.Namespace, out: TextIO) -> int:
    data = _load_json(_read_text(args.conversation), "the conversation")
    tools = None
    if isinstance(data, dict):
        tools = data.get("tools")
        data = data.get("messages")
    if not isinstance(data, list):
        raise ValueError(
            "the conversation must be a JSON list of messages or "
            '{"messages": [...], "tools": [...]}'
        )
    if args.tools:
        tools = _load_json(_read_text(args.tools), "the tools file")
    renderer = get_renderer(args.model)
    options = _options(args.option)
    payload: Any
    if args.supervised:
        example = renderer.build_supervised_example(
            data, tools=tools, train_on=args.train_on, **options
        )
        ids = example.tokens.tolist()
        payload = {"tokens": ids, "weights": example.weights.tolist()}
    else:
        ids = payload = renderer.build_generation_prompt(data, tools=tools, **options)
    if args.text:
        out.write(renderer.decode(ids))
    else:
        json.dump(payload, out)
        out.write("\n")
    return 0


def _parse_ids(text: str) -> list[int]:
    text = text.strip()
    if text.startswith("["):
        ids = _load_json(text, "the token ids")
        if not isinstance(ids, list) or not all(
            isinstance(t, int) and not isinstance(t, bool) for t in ids
        ):
            raise ValueError("the token ids must be a JSON list of integers")
        return ids
    try:
        return [int(t) for t in text.replace(",", " ").split()]
    except ValueError:
        raise ValueError(
            "expected token ids as a JSON list or whitespace-separated integers"
        ) from None


def _parse(args: argparse.Namespace, out: TextIO) -> int:
    ids = _parse_ids(_read_text(args.input))
    renderer = get_renderer(args.model)
    result = renderer.parse_response(ids, **_options(args.option))
    message = result.message.to_openai() if args.openai else result.message.to_dict()
    report = {
        "message": message,
        "termination": result.termination.value,
        "spans": [list(span) for span in result.spans],
        "stop_token_id": result.stop_token_id,
        "trailing_text": result.trailing_text,
        "issues": [{"position": i.position, "message": i.message} for i in result.issues],
    }
    json.dump(report, out, ensure_ascii=False, indent=2 if args.pretty else None)
    out.write("\n")
    return 0


class _ThinkingWriter:
    """Shows thinking blocks to a person: numbered, indented, dimmed on a terminal."""

    def __init__(self, stream: TextIO, color: bool | None) -> None:
        self.stream = stream
        self.style = _Style(stream, color)
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


def _stdin_chunks() -> Any:
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


def _think(args: argparse.Namespace, out: TextIO) -> int:
    from renderers.parsing import PartFinished, PartStarted, TextDelta
    from renderers.text import ReasoningSplitter, openai_fields

    style: Any = tuple(args.tags) if args.tags else args.style
    try:
        splitter = ReasoningSplitter(style)
    except ValueError as exc:
        raise _UsageError(str(exc)) from None
    with contextlib.ExitStack() as stack:
        if args.thinking_file:
            sink: TextIO = stack.enter_context(open(args.thinking_file, "w", encoding="utf-8"))
            color: bool | None = False
        else:
            sink, color = sys.stderr, (False if args.no_color else None)
        shown = _ThinkingWriter(sink, color)
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


def _bench(args: argparse.Namespace, out: TextIO) -> int:
    """Run the benchmark suite of a source checkout (``python -m benchmarks``)."""
    try:
        bench = importlib.import_module("benchmarks.__main__")
    except ImportError:
        root = Path(__file__).resolve().parents[1]
        if not (root / "benchmarks" / "__main__.py").exists():
            raise ValueError(
                "the benchmarks live in the source checkout; run this from an editable "
                "install (pip install -e .) or use: python -m benchmarks"
            ) from None
        sys.path.insert(0, str(root))
        bench = importlib.import_module("benchmarks.__main__")
    bench_args = args.bench_args[1:] if args.bench_args[:1] == ["--"] else args.bench_args
    status: int = bench.main(bench_args)
    return status


def _parser() -> argparse.ArgumentParser:
    models = describe_renderers()
    parser = argparse.ArgumentParser(
        prog="renderers",
        description="Exact chat-template rendering and token-level parsing for LLM training.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    demo = sub.add_parser(
        "demo",
        help="render a sample conversation, then parse a sample completion",
        description="Render a sample conversation with a tool for MODEL, print the prompt "
        "and its token count, then parse a completion made of real token ids and print its "
        "parts, thinking apart from the answer. Models: " + models,
    )
    demo.add_argument("--model", default="Qwen/Qwen3-8B", help="renderer name or model id")
    demo.add_argument("--no-color", action="store_true", help="never colour the output")
    demo.set_defaults(run=_demo)

    render = sub.add_parser(
        "render",
        help="render a conversation to token ids (or text)",
        description="Render a conversation (a JSON list of OpenAI-style messages, or an "
        'object {"messages": [...], "tools": [...]}) with the official format of MODEL and '
        "print the token ids of the generation prompt as a JSON list. Use - to read stdin.",
    )
    render.add_argument("conversation", help="JSON file with the conversation, or - for stdin")
    render.add_argument("--model", required=True, help="renderer name or model id")
    render.add_argument("--tools", help="JSON file with a list of tool definitions")
    render.add_argument("--text", action="store_true", help="print the rendered text, not ids")
    render.add_argument(
        "--supervised",
        action="store_true",
        help='render the whole conversation as a training example: {"tokens", "weights"}',
    )
    render.add_argument(
        "--train-on",
        default="last_assistant",
        choices=["last_assistant", "all_assistant", "all"],
        help="which tokens get weight 1 with --supervised (default: last_assistant)",
    )
    render.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a format option, e.g. enable_thinking=false (repeatable)",
    )
    render.set_defaults(run=_render)

    parse = sub.add_parser(
        "parse",
        help="parse sampled token ids into a message",
        description="Read sampled token ids (a JSON list or whitespace-separated integers) "
        "and print the parsed message as JSON: its ordered parts, how the sample ended "
        "(termination), the token span of each part and any structural issues.",
    )
    parse.add_argument("input", nargs="?", default="-", help="file with token ids (default: stdin)")
    parse.add_argument("--model", required=True, help="renderer name or model id")
    parse.add_argument(
        "--openai", action="store_true", help="print the message in the OpenAI chat shape"
    )
    parse.add_argument("--pretty", action="store_true", help="indent the JSON output")
    parse.add_argument(
        "--option", action="append", default=[], metavar="KEY=VALUE", help="a format option"
    )
    parse.set_defaults(run=_parse)

    from renderers.text import STYLES

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
        choices=sorted(STYLES),
        help="tag style (default: auto = <think>, <thinking> and ◁think▷ blocks; use forced "
        "when the text starts inside reasoning and only </think> appears)",
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
    think.set_defaults(run=_think)

    bench = sub.add_parser(
        "bench",
        help="run the benchmark suite (python -m benchmarks)",
        description="Run the benchmark suite of the source checkout; arguments are passed "
        "on, e.g. renderers bench --output bench-results --quick. See python -m benchmarks -h.",
        add_help=False,
    )
    bench.add_argument("bench_args", nargs=argparse.REMAINDER)
    bench.set_defaults(run=_bench)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``renderers`` console script."""
    # transformers prints advice about PyTorch on import; this tool never needs PyTorch.
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:
        # Everything after "bench" belongs to the benchmark's own parser (incl. --help).
        argv = ["bench", "--", *argv[1:]]
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        status: int = args.run(args, sys.stdout)
    except _UsageError as exc:
        parser.error(str(exc))  # exits with status 2
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): not an error for a Unix filter.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except (ValueError, OSError) as exc:
        print(f"renderers {args.command}: error: {exc}", file=sys.stderr)
        return 1
    return status


if __name__ == "__main__":
    sys.exit(main())
