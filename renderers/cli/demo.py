"""``renderers demo``: render a sample conversation with a tool, then parse a completion."""

from __future__ import annotations

import argparse
from typing import Any, TextIO

from renderers.cli.common import Style, add_model_argument, add_option_argument, indent
from renderers.cli.models import renderer_from_args
from renderers.core.messages import (
    Message,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UnparsedToolCallPart,
)

__all__ = ["add_parser"]

_TOOLS = [
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
_CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a concise travel assistant."},
    {"role": "user", "content": "Should I pack an umbrella for Paris tomorrow?"},
]
_ANSWER: dict[str, Any] = {
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

# Settings where a format's defaults would hide something: DeepSeek-V3's template never
# closes a single tool call and cannot show reasoning (R1-style is an option); V3.1 and
# K2-Thinking drop the reasoning of a final turn unless asked to keep it. Options given
# with --option override these.
_OPTIONS: dict[str, dict[str, Any]] = {
    "deepseek_v3": {"render_thinking": True, "fix_tool_format": True},
    "deepseek_v3.1": {"thinking": True, "keep_thinking": True},
    "kimi_k2_thinking": {"keep_last_reasoning": True},
}
# The formats with no reasoning at all.
_NO_REASONING = (
    "kimi_k2",
    "llama3",
    "llama4",
    "mistral",
    "mistral_v7",
    "qwen2.5",
    "qwen3_instruct_2507",
    "qwen3_vl",
)
_CALLS_ALONE = ("llama3", "mistral")  # a call turn holds the calls only (no text)


def add_parser(sub: Any) -> None:
    demo = sub.add_parser(
        "demo",
        help="render a sample conversation, then parse a sample completion",
        description="Render a sample conversation with a tool for MODEL, print the prompt "
        "and its token count, then parse a completion made of real token ids and print its "
        "parts, thinking apart from the answer.",
    )
    add_model_argument(demo, required=False, default="Qwen/Qwen3-8B")
    add_option_argument(demo)
    demo.add_argument("--no-color", action="store_true", help="never colour the output")
    demo.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO) -> int:
    style = Style(out, False if args.no_color else None)
    renderer = renderer_from_args(args, defaults=_OPTIONS)
    answer = dict(_ANSWER)
    if renderer.name in _NO_REASONING:
        del answer["reasoning_content"]
    if renderer.name in _CALLS_ALONE:
        answer["content"] = ""
    prompt = renderer.build_generation_prompt(_CONVERSATION, tools=_TOOLS)
    settings = "".join(f"; {k}={v!r}" for k, v in renderer.changed_options().items())
    heading = f"Prompt for {args.model} ({renderer.name}{settings}): {len(prompt)} tokens"
    print(style.heading(heading), file=out)
    print(renderer.decode(prompt), file=out)
    print(file=out)

    # A completion made of real token ids: what the model samples for the demo answer.
    example = renderer.build_supervised_example([*_CONVERSATION, answer], tools=_TOOLS)
    completion = example.tokens[example.weights > 0].tolist()
    print(style.heading(f"Sampled completion: {len(completion)} token ids"), file=out)
    print(style.dim(" ".join(map(str, completion))), file=out)
    print(file=out)

    result = renderer.parse_response(completion)
    print(style.heading(f"Parsed message (termination: {result.termination.value})"), file=out)
    print_message(result.message, style, out)
    return 0


def print_message(message: Message, style: Style, out: TextIO) -> None:
    """A parsed message for a person: thinking apart, then every part in sampled order."""
    thinking = [p for p in message.parts if isinstance(p, ThinkingPart)]
    if thinking:
        print(style("Thinking (shown to a person, not passed on):", "35"), file=out)
        for k, block in enumerate(thinking, 1):
            print(style.dim(indent(f"[{k}] {block.text}")), file=out)
    print(style("Answer parts, in sampled order:", "32"), file=out)
    for part in message.parts:
        if isinstance(part, TextPart):
            print(indent(f"text: {part.text}"), file=out)
        elif isinstance(part, ToolCallPart):
            print(indent(f"tool call: {part.name}({part.arguments})"), file=out)
        elif isinstance(part, UnparsedToolCallPart):
            print(indent(f"unparsed tool call ({part.error}): {part.raw!r}"), file=out)
        else:
            print(style.dim(indent(f"thinking: {len(part.text)} characters")), file=out)
