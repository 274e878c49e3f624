"""The sandbox chat templates run in: the globals, filters and extensions transformers
provides (``transformers.utils.chat_template_utils._cached_compile_jinja_template``,
transformers 5.x), with two differences:

- jinja2's mutable ``SandboxedEnvironment`` instead of transformers' immutable one:
  llama.cpp's edited copies of the Kimi-K2 templates (which a hub cache may hold as
  ``chat_template.jinja``) call ``list.append``/``pop`` on a namespace's list, which the
  immutable sandbox refuses once a tool-call history is rendered;
- tool-call arguments reach a template as :class:`Arguments`, their JSON text, which the
  ``tojson`` filter writes unchanged and the ``items`` filter (and ``.items()``) reads as
  the object it encodes.

The ``{% generation %}`` tag transformers adds for assistant masks renders its body.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

import jinja2
import jinja2.ext
import jinja2.nodes
import jinja2.sandbox
import jinja2.utils
from jinja2 import meta
from jinja2.parser import Parser

__all__ = ["Arguments", "TemplateError", "compile_template", "template_variables"]

TemplateError = jinja2.TemplateError


class Arguments(str):
    """Tool-call arguments as a template sees them: their JSON text (a string, so templates
    that concatenate it or test ``is string`` write it as given). ``tojson`` writes it
    unchanged; ``items`` and ``.items()`` give the members of the object it encodes, each
    key and string value passed through ``mark`` (the renderer's placeholders)."""

    source: str
    mark: Callable[[str], str]

    def __new__(cls, text: str, source: str, mark: Callable[[str], str]) -> Arguments:
        self = super().__new__(cls, text)
        self.source = source
        self.mark = mark
        return self

    def items(self) -> list[tuple[str, Any]]:
        """The members of the JSON object (``[]`` if the arguments are not an object)."""
        try:
            value = json.loads(self.source)
        except ValueError:
            return []
        if not isinstance(value, dict):
            return []
        return [(self.mark(k), _marked(v, self.mark)) for k, v in value.items()]


def _marked(value: Any, mark: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return mark(value)
    if isinstance(value, dict):
        return {k: _marked(v, mark) for k, v in value.items()}
    if isinstance(value, list):
        return [_marked(v, mark) for v in value]
    return value


def _tojson(
    x: Any,
    ensure_ascii: bool = False,
    indent: Any = None,
    separators: Any = None,
    sort_keys: bool = False,
) -> str:
    """transformers' ``tojson`` (jinja's own escapes HTML characters); :class:`Arguments`
    with default formatting are written as they are."""
    if isinstance(x, Arguments):
        if not (ensure_ascii or indent is not None or separators is not None or sort_keys):
            return str.__str__(x)
        x = dict(x.items())
    return json.dumps(
        x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _items(value: Any) -> Iterable[tuple[Any, Any]]:
    """jinja's ``items`` filter, also for :class:`Arguments`."""
    if isinstance(value, jinja2.Undefined):
        return []
    if isinstance(value, Arguments):
        return value.items()
    if not isinstance(value, Mapping):
        raise TypeError("Can only get item pairs from a mapping.")
    return list(value.items())


def _raise_exception(message: str) -> None:
    raise jinja2.exceptions.TemplateError(message)


def _strftime_now(format: str) -> str:
    return datetime.now().strftime(format)


class _TemplateDict:
    """``dict`` for templates without attribute access to the type (transformers')."""

    def __call__(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict(*args, **kwargs)

    def fromkeys(self, *args: Any, **kwargs: Any) -> dict[Any, Any]:
        return dict.fromkeys(*args, **kwargs)


class _Namespace(jinja2.utils.Namespace):
    """``namespace`` rejecting underscore-prefixed attributes (transformers')."""

    def __init__(*args: Any, **kwargs: Any) -> None:
        self, args = args[0], args[1:]
        attrs = dict(*args, **kwargs)
        for name in attrs:
            _Namespace._check_name(name)
        jinja2.utils.Namespace.__init__(self, attrs)

    def __setitem__(self, name: str, value: Any) -> None:
        _Namespace._check_name(name)
        jinja2.utils.Namespace.__setitem__(self, name, value)

    @staticmethod
    def _check_name(name: Any) -> None:
        if isinstance(name, str) and name.startswith("_"):
            raise jinja2.exceptions.SecurityError(
                f"chat templates cannot store underscore-prefixed attributes, got {name!r}"
            )


class _GenerationBlock(jinja2.ext.Extension):
    """``{% generation %}...{% endgeneration %}`` (transformers' assistant-mask tag)."""

    tags = {"generation"}  # noqa: RUF012  (jinja's declaration)

    def parse(self, parser: Parser) -> list[jinja2.nodes.Node]:
        next(parser.stream)
        return parser.parse_statements(("name:endgeneration",), drop_needle=True)


@functools.cache
def _environment() -> jinja2.sandbox.SandboxedEnvironment:
    env = jinja2.sandbox.SandboxedEnvironment(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[_GenerationBlock, jinja2.ext.loopcontrols],
    )
    env.filters["tojson"] = _tojson
    env.filters["items"] = _items
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["dict"] = _TemplateDict()
    env.globals["namespace"] = _Namespace
    return env


@functools.lru_cache(maxsize=64)
def compile_template(source: str) -> jinja2.Template:
    """The compiled template (cached per source text); a syntax error is a ``ValueError``."""
    try:
        return _environment().from_string(source)
    except jinja2.TemplateSyntaxError as exc:
        raise ValueError(f"the chat template does not compile: {exc} (line {exc.lineno})") from None


@functools.lru_cache(maxsize=64)
def template_variables(source: str) -> frozenset[str]:
    """The variables a caller can give the template (``messages``, ``tools``,
    ``add_generation_prompt``, its keyword options...): those it reads before setting
    them, except names it only sets itself (a name it also tests with ``is defined`` is an
    option with a default; a macro testing its own parameter, Qwen3.5's ``content is
    undefined``, is not)."""
    tree = _environment().parse(source)
    stored = {n.name for n in tree.find_all(jinja2.nodes.Name) if n.ctx in ("store", "param")}
    own = {
        id(t)
        for macro in tree.find_all(jinja2.nodes.Macro)
        for t in macro.find_all(jinja2.nodes.Test)
        if isinstance(t.node, jinja2.nodes.Name) and t.node.name in {a.name for a in macro.args}
    }
    tested = {
        t.node.name
        for t in tree.find_all(jinja2.nodes.Test)
        if t.name in ("defined", "undefined")
        and isinstance(t.node, jinja2.nodes.Name)
        and id(t) not in own
    }
    return frozenset(meta.find_undeclared_variables(tree)) - (stored - tested)
