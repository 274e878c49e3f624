"""Typed format options: one frozen dataclass per format is the signature, the checks,
the command-line parsing and the help text.

A field's annotation says what it accepts: ``bool``, ``int``, ``float``, ``str``, a
``Literal`` of strings (a closed set of choices), ``datetime.date``, ``tuple[str, ...]``,
or a union of these (``str | None``). Python callers get a ``TypeError`` naming the option
for a value of the wrong type (``enable_thinking=None`` is not ``False``) and a
``ValueError`` for a value outside the choices; the command line gets the same checks on
text (``true``/``false`` in any case, ``1``/``0`` for booleans). Value rules beyond the
type (a date's format) live in the dataclass's ``__post_init__``.
"""

from __future__ import annotations

import ast
import dataclasses
import datetime
import inspect
import itertools
import json
import textwrap
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args, get_origin

__all__ = [
    "DraftedCalls",
    "OptionInfo",
    "Reasoning",
    "describe_options",
    "options_from_text",
    "reasoning_error",
    "with_options",
]

Reasoning = Literal["error", "drop"]
"""The ``reasoning`` option every renderer has, one rule for all formats: the reasoning of
a turn that is not trained is rendered exactly as the template does (kept or dropped, as
the model sees it at inference; generation prompts never fail on it); the reasoning of a
*trained* turn that the format cannot write there is a ``ValueError`` naming this option
(``"error"``, the default) or is left out on purpose (``"drop"``)."""


DraftedCalls = Literal["reasoning", "call"]
"""What a tool call opened inside open reasoning (before the closing think marker) parses
to, in the formats whose inference servers read it as a call (Qwen3, Qwen3.5, Qwen3.8):
``"reasoning"`` (the default) keeps it as reasoning text with an issue, since the model
closes its reasoning only with the marker; ``"call"`` reads it as vLLM's Qwen3 parser
does (``vllm/frontend/processing/parser/qwen3.py`` at vllm-project/vllm@761f1975:
``<tool_call>`` in the reasoning state is an implicit end of reasoning), so an environment
runs the calls the server would: the reasoning ends before the call, the call is a tool
call, the text after it is text, and the closing think marker of the block the call ended,
sampled later, is dropped from that text, as the server drops it from the content. The
server's tool parser decides which calls parse (vLLM's ``hermes`` JSON for Qwen3,
``qwen3_xml`` for Qwen3.5/3.8), as the format's own call grammar does here."""


def reasoning_error(owner: str, index: int, why: str) -> ValueError:
    """The one-line error for reasoning of trained message ``index`` that ``owner`` cannot
    write (``why``: the format's reason), naming the ``reasoning`` option."""
    return ValueError(
        f"messages[{index}]: {owner} cannot write the reasoning of this trained turn ({why}); "
        "pass reasoning='drop' to leave it out, or remove it"
    )


_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


@dataclass(frozen=True, slots=True)
class OptionInfo:
    """One option of a format: its name, type as written, default and documentation."""

    name: str
    type: str
    default: Any
    doc: str


def with_options(base: Any, overrides: Mapping[str, Any], owner: str) -> Any:
    """``base`` (an options dataclass instance) with ``overrides`` applied after checking
    each name and type; errors name ``owner`` (the renderer) and the option."""
    if not overrides:
        return base
    cls = type(base)
    hints = _hints(cls)
    unknown = sorted(set(overrides) - set(hints))
    if unknown:
        known = ", ".join(sorted(hints)) or "none"
        raise TypeError(
            f"{owner}: unknown option(s) {', '.join(map(repr, unknown))} (known: {known})"
        )
    for name, value in overrides.items():
        _check(hints[name], value, f"{owner}: option {name}")
    try:
        return dataclasses.replace(base, **overrides)
    except ValueError as exc:
        raise ValueError(f"{owner}: {exc}") from None


def options_from_text(cls: type[Any], pairs: Mapping[str, str], owner: str) -> dict[str, Any]:
    """Typed values for ``KEY=VALUE`` text (the command line): booleans from
    ``true``/``false``/``1``/``0`` in any case, numbers, choices, ``none`` for an optional
    value, comma-separated lists; an error names the option and what it accepts."""
    hints = _hints(cls)
    out: dict[str, Any] = {}
    for name, text in pairs.items():
        if name not in hints:
            known = ", ".join(sorted(hints)) or "none"
            raise ValueError(f"{owner}: unknown option {name!r} (known: {known})")
        out[name] = _from_text(hints[name], text, f"{owner}: option {name}")
    return out


def describe_options(cls: type[Any]) -> list[OptionInfo]:
    """Every option of ``cls`` with its type, default and documentation (the attribute
    docstring in the source), in declaration order."""
    docs = _attribute_docs(cls)
    hints = _hints(cls)
    return [
        OptionInfo(f.name, _type_name(hints[f.name]), f.default, docs.get(f.name, ""))
        for f in dataclasses.fields(cls)
    ]


_HINTS: dict[type[Any], dict[str, Any]] = {}


def _hints(cls: type[Any]) -> dict[str, Any]:
    """The resolved annotation of every field of ``cls`` (computed once per class)."""
    hints = _HINTS.get(cls)
    if hints is None:
        module = inspect.getmodule(cls)
        resolved = typing.get_type_hints(cls, globalns=vars(module) if module else None)
        hints = _HINTS[cls] = {f.name: resolved[f.name] for f in dataclasses.fields(cls)}
    return hints


def _alternatives(tp: Any) -> tuple[Any, ...]:
    if get_origin(tp) in (typing.Union, types.UnionType):
        return get_args(tp)
    return (tp,)


def _accepts(tp: Any, value: Any) -> bool:
    if tp is type(None):
        return value is None
    if tp is bool:
        return type(value) is bool
    if tp is int:
        return type(value) is int
    if tp is float:
        return type(value) in (int, float)
    if tp is datetime.date:
        return isinstance(value, datetime.date)
    if get_origin(tp) is Literal:
        return isinstance(value, str) and value in get_args(tp)
    if get_origin(tp) is tuple:
        (item, _) = get_args(tp)
        return isinstance(value, (tuple, list)) and all(_accepts(item, v) for v in value)
    if isinstance(tp, type):
        return isinstance(value, tp)
    return True


def _check(tp: Any, value: Any, what: str) -> None:
    alternatives = _alternatives(tp)
    if any(_accepts(t, value) for t in alternatives):
        return
    literals = [t for t in alternatives if get_origin(t) is Literal]
    if literals and isinstance(value, str):
        choices = ", ".join(repr(c) for t in literals for c in get_args(t))
        raise ValueError(f"{what}: expected one of {choices}, got {value!r}")
    raise TypeError(f"{what}: expected {_type_name(tp)}, got {type(value).__name__} {value!r}")


def _from_text(tp: Any, text: str, what: str) -> Any:
    value = text.strip()
    alternatives = _alternatives(tp)
    if type(None) in alternatives and value.lower() in ("none", "null", ""):
        return None
    for alt in alternatives:
        converted = _convert(alt, value)
        if converted is not _NO:
            return converted
    raise ValueError(f"{what}: expected {_type_name(tp)}, got {text!r}")


_NO = object()


def _convert(tp: Any, value: str) -> Any:
    if tp is bool:
        low = value.lower()
        return True if low in _TRUE else False if low in _FALSE else _NO
    if tp in (int, float):
        try:
            return tp(value)
        except ValueError:
            return _NO
    if get_origin(tp) is Literal:
        return value if value in get_args(tp) else _NO
    if get_origin(tp) is tuple:
        (item, _) = get_args(tp)
        if value.startswith("["):
            try:
                items = json.loads(value)
            except json.JSONDecodeError:
                return _NO
        else:
            items = [v.strip() for v in value.split(",") if v.strip()]
        converted = [_convert(item, str(v)) for v in items]
        return _NO if any(c is _NO for c in converted) else tuple(converted)
    if tp is datetime.date:
        try:
            return datetime.date.fromisoformat(value)
        except ValueError:
            return _NO
    if tp is str:
        return value
    return _NO


def _type_name(tp: Any) -> str:
    if get_origin(tp) in (typing.Union, types.UnionType):
        return " | ".join(_type_name(t) for t in get_args(tp))
    if tp is type(None):
        return "None"
    if get_origin(tp) is Literal:
        return " | ".join(repr(c) for c in get_args(tp))
    if get_origin(tp) is tuple:
        return f"list of {_type_name(get_args(tp)[0])}"
    if tp is datetime.date:
        return "date (YYYY-MM-DD)"
    return getattr(tp, "__name__", str(tp))


def _attribute_docs(cls: type[Any]) -> dict[str, str]:
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    body = ast.parse(source).body[0]
    assert isinstance(body, ast.ClassDef)
    docs: dict[str, str] = {}
    statements = body.body
    for stmt, after in itertools.pairwise(statements):
        if (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[stmt.target.id] = " ".join(inspect.cleandoc(after.value.value).split())
    return docs
