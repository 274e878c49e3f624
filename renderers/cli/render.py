"""``renderers render``: a conversation to token ids (or text) in a model's format."""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from renderers.cli.common import add_model_argument, add_option_argument, load_json, read_text
from renderers.cli.models import options_help, renderer_from_args
from renderers.registry import renderer_classes
from renderers.rendering import TrainOn

__all__ = ["add_parser", "read_conversation", "split_conversation"]


def _options_epilog() -> str:
    return "options per model:\n" + "\n".join(
        f"{cls.name}:\n{options_help(cls)}" for cls in renderer_classes()
    )


def add_parser(sub: Any) -> None:
    render = sub.add_parser(
        "render",
        help="render a conversation to token ids (or text)",
        description="Render a conversation (a JSON list of OpenAI-style messages, or an "
        'object {"messages": [...], "tools": [...]}) with the official format of MODEL and '
        "print the token ids of the generation prompt as a JSON list. Use - to read stdin.",
        epilog=_options_epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    render.add_argument("conversation", help="JSON file with the conversation, or - for stdin")
    add_model_argument(render)
    render.add_argument("--tools", help="JSON file with a list of tool definitions")
    render.add_argument("--text", action="store_true", help="print the rendered text, not ids")
    render.add_argument(
        "--supervised",
        action="store_true",
        help='render the whole conversation as a training example: {"tokens", "weights"}',
    )
    render.add_argument(
        "--train-on",
        default=TrainOn.LAST_ASSISTANT.value,
        choices=[t.value for t in TrainOn],
        help="which tokens get weight 1 with --supervised (default: last_assistant)",
    )
    add_option_argument(render)
    render.set_defaults(run=run)


def read_conversation(path: str) -> tuple[list[Any], list[Any] | None]:
    """Messages and tools from a JSON file: a list of messages, or an object with
    ``messages`` and optional ``tools``."""
    return split_conversation(load_json(read_text(path), f"{path if path != '-' else 'stdin'}"))


def split_conversation(data: Any) -> tuple[list[Any], list[Any] | None]:
    """Messages and tools from a conversation's JSON value (see :func:`read_conversation`)."""
    tools = None
    if isinstance(data, dict):
        tools = data.get("tools")
        data = data.get("messages")
    if not isinstance(data, list):
        raise ValueError(
            "the conversation must be a JSON list of messages or "
            '{"messages": [...], "tools": [...]}'
        )
    return data, tools


def run(args: argparse.Namespace, out: TextIO) -> int:
    messages, tools = read_conversation(args.conversation)
    if args.tools:
        tools = load_json(read_text(args.tools), args.tools)
    renderer = renderer_from_args(args)
    payload: Any
    if args.supervised:
        example = renderer.build_supervised_example(messages, tools=tools, train_on=args.train_on)
        ids = example.tokens.tolist()
        payload = {"tokens": ids, "weights": example.weights.tolist()}
    else:
        ids = payload = renderer.build_generation_prompt(messages, tools=tools)
    if args.text:
        out.write(renderer.decode(ids))
    else:
        json.dump(payload, out)
        out.write("\n")
    return 0
