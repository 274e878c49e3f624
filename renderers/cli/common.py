"""What every subcommand shares: usage errors, reading inputs, options, terminal styling."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

__all__ = [
    "Style",
    "UsageError",
    "add_model_argument",
    "add_option_argument",
    "indent",
    "load_json",
    "option_pairs",
    "read_text",
]


class UsageError(Exception):
    """A command-line usage error: the subcommand's usage and this message, exit status 2."""


class Style:
    """ANSI styling, enabled only on a terminal and when ``NO_COLOR`` is not set."""

    def __init__(self, stream: TextIO, enabled: bool | None) -> None:
        if enabled is None:
            enabled = stream.isatty() and not os.environ.get("NO_COLOR")
        self.enabled = enabled

    def __call__(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.enabled else text

    def heading(self, text: str) -> str:
        return self(f"== {text} ==", "1")

    def dim(self, text: str) -> str:
        return self(text, "2")


def indent(text: str, prefix: str = "    ") -> str:
    return "\n".join(prefix + line for line in text.splitlines() or [""])


def read_text(path: str) -> str:
    """The UTF-8 text of ``path`` (``-`` is stdin); errors name the file."""
    if path == "-":
        data = sys.stdin.buffer.read()
        name = "stdin"
    else:
        try:
            data = Path(path).read_bytes()
        except IsADirectoryError:
            raise ValueError(f"{path}: is a directory, expected a file") from None
        except FileNotFoundError:
            raise ValueError(f"{path}: no such file") from None
        name = path
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{name}: not UTF-8 text (byte {exc.start}: {data[exc.start : exc.start + 1]!r})"
        ) from None


def load_json(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what} is not valid JSON: {exc}") from None


def option_pairs(pairs: Sequence[str]) -> dict[str, str]:
    """``--option key=value`` pairs as strings; the renderer types them (see
    :meth:`renderers.Renderer.parse_option`)."""
    options: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--option expects KEY=VALUE, got {pair!r}")
        options[key.strip()] = value
    return options


def add_model_argument(
    parser: argparse.ArgumentParser, *, required: bool = True, default: str | None = None
) -> None:
    parser.add_argument(
        "--model",
        required=required,
        default=default,
        help="renderer name, model id or local model directory (see `renderers models`; a "
        "model without a specialised renderer uses its chat template)"
        + (f" (default: {default})" if default else ""),
    )
    parser.add_argument(
        "--tokenizer",
        metavar="SOURCE",
        help="where the tokenizer comes from, instead of the model's hub repository: a hub "
        "id, a local directory, or MODULE:CLASS naming a tokenizer class built without "
        "arguments (e.g. tml_renderers.tokenizers:Qwen35Tokenizer)",
    )
    parser.add_argument(
        "--generic",
        action="store_true",
        help="use the template renderer (the model's own chat template) even for a model "
        "with a specialised renderer",
    )


def add_option_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a format option, e.g. enable_thinking=false (repeatable; `renderers models` "
        "lists each model's options)",
    )
