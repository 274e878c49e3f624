"""What every subcommand shares: usage errors, reading inputs, options, terminal styling."""

from __future__ import annotations

import argparse
import difflib
import functools
import json
import os
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

__all__ = [
    "Parser",
    "Style",
    "UsageError",
    "add_model_argument",
    "add_option_argument",
    "check_output_path",
    "cli_advice",
    "describe_os_error",
    "indent",
    "load_json",
    "option_pairs",
    "read_text",
]


class UsageError(Exception):
    """A command-line usage error: the subcommand's usage and this message, exit status 2."""


class Parser(argparse.ArgumentParser):
    """``argparse`` as a user expects it: options are never abbreviated (``--mod`` is not
    ``--model``), and an unknown option is reported as such, before any missing required
    one (``--modle qwen3`` is a misspelt ``--model``, not a missing one). An ``epilog``
    may be a function, called only when the help is shown (the per-model option lists
    import every model module)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def format_help(self) -> str:
        epilog: object = self.epilog
        if callable(epilog):
            self.epilog = epilog()
        return super().format_help()

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        arguments = list(sys.argv[1:] if args is None else args)
        required = [action for action in self._actions if action.required]
        for action in required:
            action.required = False
        try:
            _, extras = super().parse_known_args(list(arguments), argparse.Namespace())
        finally:
            for action in required:
                action.required = True
        unknown = [e for e in extras if e.startswith("-") and e != "-" and e != "--"]
        if unknown:
            option = unknown[0].partition("=")[0]
            close = difflib.get_close_matches(option, list(self._option_string_actions), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            self.error(f"unrecognized option {option}{hint}")
        return super().parse_known_args(arguments, namespace)


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


def check_output_path(path: str | Path, option: str) -> None:
    """A one-line error, before any work, when ``path`` cannot be written as a file: its
    folder does not exist, or it is a folder."""
    target = Path(path)
    if target.is_dir():
        raise ValueError(f"{option} {path}: is a folder, expected a file name")
    folder = target.parent
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "no such folder"
        raise ValueError(f"{option} {path}: {folder}: {what}")


def describe_os_error(exc: OSError) -> str:
    """An ``OSError`` in one line naming the file, without Python's ``[Errno N]``."""
    if exc.filename is not None and exc.strerror:
        reason = exc.strerror[0].lower() + exc.strerror[1:]
        return f"{exc.filename}: {reason}"
    return str(exc)


# Options whose Python spelling library messages use, and their command-line spelling.
_CONFIG_FLAGS = {
    "train_on": "--train-on",
    "max_length": "--max-length",
    "overflow": "--overflow",
    "on_error": "--on-error",
    "weights": "--weights",
    "arrow_structs": "--arrow-structs",
    "max_reject_fraction": "--max-reject-fraction",
    "shape": "--format",
}
_VALUE = r"('(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|True|False|None|-?\d+(?:\.\d+)?|[A-Za-z_][\w,]*)"


@functools.cache
def _advice_pattern() -> re.Pattern[str]:
    names = sorted({*_renderer_option_names(), *_CONFIG_FLAGS}, key=len, reverse=True)
    # Not after "--option " (advice spelt once already: a rejected row's error is spelt
    # for the rejects file, then again in the run's error naming it).
    return re.compile(
        r"(?<![\w.-])(?<!--option )(" + "|".join(map(re.escape, names)) + r")=" + _VALUE
    )


def _renderer_option_names() -> set[str]:
    from renderers.core.options import describe_options
    from renderers.registry import renderer_classes
    from renderers.rendering import Renderer
    from renderers.template import TemplateRenderer

    classes: list[type[Renderer]] = [*renderer_classes(), TemplateRenderer]
    names: set[str] = set()
    for cls in classes:
        names.update(info.name for info in describe_options(cls.Options))
    return names


def cli_advice(text: str) -> str:
    """``text`` with advice in Python syntax spelt as command-line options:
    ``reasoning='drop'`` becomes ``--option reasoning=drop``, ``weights=True``
    ``--weights``, ``train_on='all'`` ``--train-on all``; a ``(Python: ...)`` aside goes."""
    text = re.sub(r" \(Python: [^()]*(?:\([^()]*\)[^()]*)*\)", "", text)

    def spelt(match: re.Match[str]) -> str:
        name, value = match.group(1), match.group(2)
        if value[:1] in "'\"":
            value = value[1:-1]
        elif value in ("True", "False", "None"):
            value = value.lower()
        flag = _CONFIG_FLAGS.get(name)
        if flag is None:
            return f"--option {name}={value}"
        if value == "true" and name == "weights":
            return flag
        return f"{flag} {value}"

    return _advice_pattern().sub(spelt, text)
