"""``renderers models``: the renderers, their model ids and options; and how every
subcommand builds the renderer a user asked for."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from typing import Any, TextIO

from renderers.cli.common import UsageError, option_pairs
from renderers.core.loading import load_tokenizer
from renderers.core.options import describe_options
from renderers.registry import get_renderer, renderer_class, renderer_classes
from renderers.rendering import Renderer
from renderers.template import TemplateRenderer

__all__ = [
    "add_parser",
    "describe_choice",
    "options_help",
    "renderer_from_args",
    "typed_options",
]


def add_parser(sub: Any) -> None:
    models = sub.add_parser(
        "models",
        help="list the renderers, their model ids and options",
        description="List every renderer: its name, the model ids it answers to, and its "
        "options with their types and defaults (what --option KEY=VALUE accepts).",
    )
    models.add_argument("name", nargs="?", help="show one renderer only")
    models.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO) -> int:
    classes = [renderer_class(args.name)] if args.name else renderer_classes()
    for k, cls in enumerate(classes):
        if k:
            out.write("\n")
        out.write(f"{cls.name}: {', '.join(cls.model_ids)}\n")
        out.write(f"  tokenizer: {cls.tokenizer_source or cls.default_model}\n")
        out.write(options_help(cls) + "\n")
    return 0


def options_help(cls: type[Renderer]) -> str:
    """The options of a renderer, one per line, with type, default and documentation."""
    lines = []
    for info in describe_options(cls.Options):
        lines.append(f"  {info.name}: {info.type} (default: {info.default!r})")
        if info.doc:
            lines.append(f"      {info.doc}")
    return "\n".join(lines) if lines else "  (no options)"


def renderer_from_args(
    args: argparse.Namespace, defaults: Mapping[str, Mapping[str, Any]] | None = None
) -> Renderer:
    """The renderer for ``--model`` with ``--option`` values typed by its options class,
    on top of per-renderer ``defaults`` (what a subcommand prefers for a model), with the
    tokenizer ``--tokenizer`` names. A template renderer (the fallback) is announced on stderr."""
    generic = bool(getattr(args, "generic", False))
    pairs = option_pairs(getattr(args, "option", []))
    source = getattr(args, "tokenizer", None)
    tokenizer = load_tokenizer(source) if source else None
    try:
        cls: type[Renderer] | None = renderer_class(args.model)
    except ValueError:
        cls = None
    if cls is None or generic:
        renderer = get_renderer(
            args.model, tokenizer, generic=True, **typed_options(TemplateRenderer, pairs)
        )
    else:
        options = dict((defaults or {}).get(cls.name, {}))
        options.update(typed_options(cls, pairs))
        renderer = get_renderer(args.model, tokenizer, **options)
    if isinstance(renderer, TemplateRenderer):
        # Only the fallback is news: a specialised renderer is what the user asked for, and a
        # Unix tool is quiet when things go as expected.
        print(f"renderers {args.command}: {describe_choice(renderer, generic)}", file=sys.stderr)
    return renderer


def typed_options(cls: type[Renderer], pairs: Mapping[str, str]) -> dict[str, Any]:
    """``--option`` values typed by ``cls``'s options; a wrong one is a usage error."""
    try:
        return cls.options_from_text(pairs)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"--option: {exc}") from None


def describe_choice(renderer: Renderer, generic: bool = False) -> str:
    """Which renderer serves a model, and why, in a line."""
    if isinstance(renderer, TemplateRenderer):
        why = "--generic" if generic else "no specialised renderer"
        return f"renderer template ({renderer.model_id or 'the'} chat template; {why})"
    return f"renderer {renderer.name} (specialised)"
