"""``renderers parse``: sampled token ids, or a completion's text (``--text``: control-token
spellings are control tokens), to a parsed message as JSON."""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from renderers.cli.common import add_model_argument, add_option_argument, load_json, read_text
from renderers.cli.models import renderer_from_args

__all__ = ["add_parser", "parse_ids"]


def add_parser(sub: Any) -> None:
    parse = sub.add_parser(
        "parse",
        help="parse sampled token ids into a message",
        description="Read sampled token ids (a JSON list or whitespace-separated integers), "
        "or with --text a completion as text, and print the parsed message as JSON: its "
        "ordered parts, how the sample ended (termination), the token span of each part and "
        "any structural issues.",
    )
    parse.add_argument(
        "input", nargs="?", default="-", help="file with token ids or text (default: stdin)"
    )
    parse.add_argument(
        "--text",
        action="store_true",
        help="the input is the completion's text (e.g. an API's raw completion); control-token "
        "spellings in it are the model's control tokens",
    )
    add_model_argument(parse)
    parse.add_argument(
        "--openai", action="store_true", help="print the message in the OpenAI chat shape"
    )
    parse.add_argument("--pretty", action="store_true", help="indent the JSON output")
    add_option_argument(parse)
    parse.set_defaults(run=run)


def parse_ids(text: str) -> list[int]:
    """Token ids from text: a JSON list or whitespace/comma-separated integers."""
    text = text.strip()
    if text.startswith("["):
        ids = load_json(text, "the token ids")
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


def run(args: argparse.Namespace, out: TextIO) -> int:
    source = read_text(args.input)
    ids = None if args.text else parse_ids(source)
    renderer = renderer_from_args(args)
    result = renderer.parse_text(source) if ids is None else renderer.parse_response(ids)
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
