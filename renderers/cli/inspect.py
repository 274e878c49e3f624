"""``renderers inspect MODEL``: what the library knows about a model.

The renderer chosen for it, its control tokens and stop tokens, the parse spec the
template renderer infers from the model's chat template (and how), and whether the
template keeps the untrained-prefix invariant (the tokens before a trained turn are its
generation prompt) on a few probe conversations, each with and without reasoning.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, TextIO

from renderers.cli.common import Style, add_option_argument, indent, option_pairs
from renderers.cli.models import describe_choice, typed_options
from renderers.core.messages import Message, TextPart, ThinkingPart, ToolCallPart
from renderers.registry import get_renderer, renderer_class
from renderers.rendering import Renderer
from renderers.template import TemplateRenderer
from renderers.template.spec import PROBE_TOOL

__all__ = ["add_parser", "report"]

_REASONING = ThinkingPart("Let me think.")
_CALL = ToolCallPart("probe_tool", '{"probe_arg": "x"}')
_USER = Message("user", "A question?")
_RESULT = Message("tool", "A result.", tool_call_id="call_0")


def _answer(reasoning: bool, text: str = "An answer.") -> Message:
    return Message("assistant", [*([_REASONING] if reasoning else []), TextPart(text)])


def _call(reasoning: bool) -> Message:
    return Message("assistant", [*([_REASONING] if reasoning else []), _CALL])


PROBES: dict[str, Any] = {
    "an answer": lambda r: [_USER, _answer(r)],
    "a second answer": lambda r: [_USER, _answer(r), Message("user", "And then?"), _answer(r)],
    "a tool call": lambda r: [_USER, _call(r)],
    "an answer after a tool result": lambda r: [_USER, _call(r), _RESULT, _answer(r)],
}
"""Conversations whose last assistant turn is trained, with and without reasoning."""


def add_parser(sub: Any) -> None:
    inspect = sub.add_parser(
        "inspect",
        help="show what the library knows about a model",
        description="Show the renderer chosen for MODEL (a renderer name, hub model id or "
        "local model directory), its control and stop tokens, the parse spec inferred from "
        "its chat template, and whether the template keeps the untrained-prefix invariant "
        "(the tokens before a trained turn are its generation prompt) on probe "
        "conversations.",
    )
    inspect.add_argument("model", help="renderer name, model id or local model directory")
    inspect.add_argument(
        "--generic", action="store_true", help="inspect the template renderer as the one chosen"
    )
    inspect.add_argument("--json", action="store_true", help="print the report as JSON")
    inspect.add_argument(
        "--color",
        choices=["auto", "always", "never"],
        default="auto",
        help="colour headings (default: on a terminal)",
    )
    add_option_argument(inspect)
    inspect.set_defaults(run=run)


def run(args: argparse.Namespace, out: TextIO) -> int:
    pairs = option_pairs(args.option)
    try:
        cls: type[Renderer] | None = renderer_class(args.model)
    except ValueError:
        cls = None
    if cls is None or args.generic:
        chosen: Renderer = get_renderer(
            args.model, generic=True, **typed_options(TemplateRenderer, pairs)
        )
    else:
        chosen = get_renderer(args.model, **typed_options(cls, pairs))
    template = (
        chosen
        if isinstance(chosen, TemplateRenderer)
        else _template_renderer(chosen, typed_options(TemplateRenderer, pairs))
    )
    data = report(chosen, template, bool(args.generic))
    if args.json:
        json.dump(data, out, ensure_ascii=False, indent=2)
        out.write("\n")
        return 0
    enabled = {"auto": None, "always": True, "never": False}[args.color]
    _print(data, out, Style(out, enabled))
    return 0


def _template_renderer(chosen: Renderer, options: dict[str, Any]) -> TemplateRenderer | None:
    """The template renderer of the chosen renderer's tokenizer (``None``: no template)."""
    try:
        return TemplateRenderer(chosen.tokenizer, **options)
    except (ValueError, TypeError):
        return None


def report(chosen: Renderer, template: TemplateRenderer | None, generic: bool) -> dict[str, Any]:
    """What :func:`run` prints, as data."""
    table = chosen.table
    spell = table.control_text
    data: dict[str, Any] = {
        "model": getattr(chosen, "model_id", None) or chosen.default_model,
        "renderer": chosen.name,
        "choice": describe_choice(chosen, generic),
        "control_tokens": sorted(table.control_tokens, key=table.control_tokens.__getitem__),
        "stop_tokens": {spell(t): t for t in chosen.stop_token_ids},
    }
    if template is None:
        data["template"] = "the tokenizer has no chat template"
        return data
    data["template"] = {
        "options": list(template.option_names),
        "spec_origin": template.spec_origin,
        "spec": template.spec.describe() if template.spec is not None else None,
        "notes": list(template.spec_notes),
    }
    data["untrained_prefix"] = {name: _invariant(template, make) for name, make in PROBES.items()}
    return data


CASES = {"reasoning": True, "no reasoning": False}
"""The probe's assistant turns with reasoning, and without (templates write them apart:
Qwen3.5 an empty think block, Nemotron-3 ``<think></think>``)."""


def _invariant(renderer: TemplateRenderer, make: Any) -> dict[str, str]:
    """Per case (the probe's turns with and without reasoning): whether training on its
    last turn keeps the untrained-prefix invariant."""
    return {case: _train(renderer, make(reasoning)) for case, reasoning in CASES.items()}


def _train(renderer: TemplateRenderer, messages: list[Message]) -> str:
    tools = [PROBE_TOOL] if any(m.tool_calls for m in messages) else None
    try:
        example = renderer.build_supervised_example(messages, tools=tools)
        prompt = renderer.build_generation_prompt(messages[:-1], tools=tools)
    except ValueError as exc:
        return f"no: {exc}"
    first = int(example.weights.nonzero()[0][0]) if example.weights.any() else len(prompt)
    if example.tokens[:first].tolist() != prompt[:first]:
        return "no: the tokens before the trained turn are not its generation prompt"
    return "yes"


def _print(data: dict[str, Any], out: TextIO, style: Style) -> None:
    out.write(style.heading(f"{data['model']}") + "\n")
    out.write(f"renderer: {data['choice']}\n")
    controls = data["control_tokens"]
    shown = " ".join(controls[:40]) + (f" … (+{len(controls) - 40})" if len(controls) > 40 else "")
    out.write(f"control tokens ({len(controls)}): {shown}\n")
    stops = ", ".join(f"{name} ({token})" for name, token in data["stop_tokens"].items())
    out.write(f"stop tokens: {stops or 'none'}\n")
    template = data["template"]
    if isinstance(template, str):
        out.write(f"chat template: {template}\n")
        return
    out.write(f"template options: {', '.join(template['options']) or 'none'}\n")
    out.write(style.heading(f"parse spec ({template['spec_origin']})") + "\n")
    out.write(indent("\n".join(template["spec"] or ["none: pass a FormatSpec to parse"])) + "\n")
    out.write("  how it was found:\n")
    out.write(indent("\n".join(template["notes"]), "    ") + "\n")
    out.write(style.heading("untrained prefix is the generation prompt (template)") + "\n")
    for name, cases in data["untrained_prefix"].items():
        out.write(f"  {name}:\n")
        for case, outcome in cases.items():
            out.write(f"    {case}: {outcome}\n")
