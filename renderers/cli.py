"""The ``renderers`` command line.

Subcommands behave like Unix tools: data on stdout, diagnostics on stderr, exit status 0
on success, 1 on failure, 2 on usage errors.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from renderers.messages import Message, TextPart, ThinkingPart, ToolCallPart, UnparsedToolCallPart
from renderers.registry import RENDERERS, get_renderer

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
    prompt = renderer.build_generation_prompt(_DEMO_CONVERSATION, tools=_DEMO_TOOLS)
    print(
        style.heading(f"Prompt for {args.model} ({renderer.name}): {len(prompt)} tokens"), file=out
    )
    print(renderer.decode(prompt), file=out)
    print(file=out)

    # A completion made of real token ids: what the model samples for the demo answer.
    example = renderer.build_supervised_example(
        [*_DEMO_CONVERSATION, _DEMO_ANSWER], tools=_DEMO_TOOLS
    )
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


def _parser() -> argparse.ArgumentParser:
    models = ", ".join(f"{name} ({model})" for name, (_, _, model) in sorted(RENDERERS.items()))
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``renderers`` console script."""
    # transformers prints advice about PyTorch on import; this tool never needs PyTorch.
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        status: int = args.run(args, sys.stdout)
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
