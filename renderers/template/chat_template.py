"""A model's chat template run as ``apply_chat_template`` runs it, read back as token ids
through placeholders: what the template renderer renders, probes and attributes with."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from renderers.core.messages import Message, ThinkingPart
from renderers.core.tokens import TokenTable, token_table
from renderers.core.tools import deep_sort
from renderers.template.environment import TemplateError, compile_template, template_variables
from renderers.template.inputs import template_messages, template_value
from renderers.template.placeholders import (
    MarkerClash,
    Marks,
    Rendering,
    TemplateDifference,
    marker_base,
    private_use,
    read_rendering,
)
from renderers.template.spec import PROBE_CALL_ONLY, PROBE_TOOL, PROBE_USER
from renderers.template.weights import Owners, common_prefix, owners_of

__all__ = ["ChatTemplate"]


class ChatTemplate:
    """``templates`` (named, as ``tokenizer.chat_template`` holds them) over ``table``'s
    vocabulary, with the tokenizer's ``special`` tokens as variables; ``sort_tool_keys``
    sorts the keys of every dict in ``tools`` before templating (Kimi-K2's tokenizer)."""

    def __init__(
        self,
        templates: dict[str, str],
        table: TokenTable,
        special: Mapping[str, Any],
        sort_tool_keys: bool = False,
    ) -> None:
        self.templates = templates
        self.table = table
        self.special = dict(special)
        self.sort_tool_keys = sort_tool_keys
        self.variables = frozenset().union(*map(template_variables, templates.values()))
        """What the templates read (besides the conversation)."""
        self._characters = frozenset(private_use("".join(templates.values())))
        self.none_content = self._needs_none_content()
        """Whether a tool-calling message without text must have ``content: None``."""

    @classmethod
    def of(
        cls, tokenizer: Any, chat_template: str | None, sort_tool_keys: bool, name: str | None
    ) -> ChatTemplate:
        """``chat_template`` (text, or named templates), else the tokenizer's own, checked
        for syntax now (a caller's mistake is theirs to know at once)."""
        templates = _templates(chat_template or getattr(tokenizer, "chat_template", None))
        if not templates:
            raise ValueError(
                f"{name or 'the tokenizer'} has no chat template (neither "
                "chat_template.jinja nor tokenizer_config.json's chat_template); pass "
                "chat_template=..."
            )
        for text in templates.values():
            compile_template(text)
        special = getattr(tokenizer, "special_tokens_map", None) or {}
        kept = {k: v for k, v in special.items() if isinstance(v, (str, list))}
        return cls(templates, token_table(tokenizer), kept, sort_tool_keys)

    def differences(
        self,
        messages: list[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        kwargs: tuple[tuple[str, Any], ...],
        add_generation_prompt: bool,
    ) -> tuple[TemplateDifference, ...]:
        """Where the rendering's ids differ from tokenizing the raw template's output."""
        rendering = self.rendering(messages, tools, kwargs, add_generation_prompt)
        found = rendering.differences
        if rendering.protected:
            raw = self.raw_text(messages, tools, kwargs, add_generation_prompt)
            if raw != rendering.text:
                why = _first_difference(raw, rendering.text)
                found += (TemplateDifference(None, why, "template logic"),)
        return found

    def select(self, tools: Sequence[Mapping[str, Any]] | None) -> str:
        """The template ``apply_chat_template`` would use (named templates: ``tool_use``
        when there are tools, else ``default``)."""
        templates = self.templates
        if len(templates) == 1:
            return next(iter(templates.values()))
        if tools and "tool_use" in templates:
            return templates["tool_use"]
        return templates.get("default") or next(iter(templates.values()))

    def text(
        self,
        messages: list[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        kwargs: tuple[tuple[str, Any], ...],
        add_generation_prompt: bool,
        marks: Marks,
        *,
        none_content: bool | None = None,
    ) -> str:
        """The template's output for the conversation (with ``marks``' placeholders)."""
        if tools is not None:
            if isinstance(tools, (str, bytes, Mapping)) or not isinstance(tools, Sequence):
                raise ValueError("tools: expected a list of tool definitions (dicts)")
            for i, tool in enumerate(tools):
                if not isinstance(tool, Mapping):
                    raise ValueError(f"tools[{i}]: expected a dict, got {type(tool).__name__}")
            if self.sort_tool_keys:
                tools = deep_sort(tools)
        empty = none_content if none_content is not None else self.none_content
        inputs = template_messages(messages, marks, none_content=empty)
        variables: dict[str, Any] = dict(self.special)
        variables.update((k, template_value(v, marks, k)) for k, v in kwargs)
        try:
            return compile_template(self.select(tools)).render(
                messages=inputs,
                tools=template_value(list(tools), marks, "tools") if tools is not None else None,
                documents=None,
                add_generation_prompt=add_generation_prompt,
                **variables,
            )
        except (TemplateError, TypeError, ValueError, AttributeError, IndexError, KeyError) as exc:
            raise ValueError(f"the chat template failed: {type(exc).__name__}: {exc}") from None

    def rendering(
        self,
        messages: list[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        kwargs: tuple[tuple[str, Any], ...],
        add_generation_prompt: bool,
        *,
        attribute: bool = False,
    ) -> Rendering:
        """The template's output read back through placeholders (``attribute``: with
        attribution markers), in a marker range no caller text holds."""
        avoid = set(self._characters)
        while True:
            marks = Marks(self.table, attribute=attribute, base=marker_base(avoid))
            try:
                output = self.text(messages, tools, kwargs, add_generation_prompt, marks)
            except MarkerClash as clash:
                avoid |= clash.characters
                continue
            return read_rendering(self.table, output, marks)

    def raw_text(
        self,
        messages: list[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        kwargs: tuple[tuple[str, Any], ...],
        add_generation_prompt: bool,
    ) -> str:
        """The template's output without placeholders (what transformers renders)."""
        marks = Marks(self.table, raw=True)
        return self.text(messages, tools, kwargs, add_generation_prompt, marks)

    def ids(
        self,
        messages: list[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        kwargs: tuple[tuple[str, Any], ...],
        add_generation_prompt: bool,
    ) -> list[int]:
        rendering = self.rendering(messages, tools, kwargs, add_generation_prompt)
        return rendering.writer(self.table).ids()

    def probe(
        self,
        messages: list[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        add_generation_prompt: bool,
    ) -> Rendering:
        """An attributed rendering with the default options (for spec inference)."""
        return self.rendering(messages, tools, (), add_generation_prompt, attribute=True)

    def _needs_none_content(self) -> bool:
        """Whether a tool-calling message without text must have ``content: None`` rather
        than no ``content`` (the DeepSeek templates test ``content is none``; transformers
        5.23 and later drop ``None`` and they fail)."""
        probe = [PROBE_USER, PROBE_CALL_ONLY]
        marks = Marks(self.table, raw=True)
        try:
            self.text(probe, [PROBE_TOOL], (), False, marks, none_content=False)
        except ValueError:
            try:
                self.text(probe, [PROBE_TOOL], (), False, marks, none_content=True)
            except ValueError:
                return False
            return True
        return False

    def attributed(
        self,
        messages: list[Message],
        tools: Sequence[Mapping[str, Any]] | None,
        kwargs: tuple[tuple[str, Any], ...],
        add_generation_prompt: bool,
    ) -> tuple[Rendering, Owners | None]:
        """The conversation's rendering and which message each token holds text of; no
        owners when the attribution markers change what the template renders."""
        gen = add_generation_prompt
        attributed = self.rendering(messages, tools, kwargs, gen, attribute=True)
        # The attribution markers must not change what the template renders: compare with
        # the rendering without them (the unmarked one when nothing needed protection).
        if attributed.protected:
            plain = self.rendering(messages, tools, kwargs, gen)
            if attributed.text != plain.text:
                return plain, None
        elif attributed.text != self.raw_text(messages, tools, kwargs, gen):
            return self.rendering(messages, tools, kwargs, gen), None
        owners = owners_of(attributed, self.table, len(messages))
        return attributed, owners

    def reasoning_lost(
        self,
        messages: list[Message],
        trained: Iterable[int],
        tools: Sequence[Mapping[str, Any]] | None,
        kwargs: tuple[tuple[str, Any], ...],
        rendering: Rendering,
        owners: Owners | None,
    ) -> list[int]:
        """The trained assistant turns whose reasoning the template does not write (the
        ``reasoning`` rule refuses or drops it). Without attribution (or for reasoning of
        whitespace only), a turn's reasoning is lost when a probe reasoning there renders
        the same text as none."""
        lost = []
        for t in trained:
            m = messages[t]
            # Newlines only: no reasoning (templates strip them from reasoning they write).
            if m.role != "assistant" or not (m.thinking and m.thinking.strip("\n")):
                continue
            if owners is not None and m.thinking.strip():
                if "reasoning_content" in rendering.written(t):
                    continue
            else:  # whitespace-only text is not attributed: probe whether the turn's
                # reasoning is written at all (the template may strip what it writes)
                rest = [p for p in m.parts if type(p) is not ThinkingPart]
                plain = Message(m.role, rest, m.name)
                probe = Message(m.role, [ThinkingPart("x"), *rest], m.name)
                before, after = messages[:t], messages[t + 1 :]
                if self.raw_text([*before, probe, *after], tools, kwargs, False) != (
                    self.raw_text([*before, plain, *after], tools, kwargs, False)
                ):
                    continue
            lost.append(t)
        return lost


def _templates(value: Any) -> dict[str, str]:
    """A tokenizer's chat template(s) by name (one template is ``default``)."""
    if isinstance(value, str):
        return {"default": value} if value.strip() else {}
    if isinstance(value, Mapping):
        return {str(k): v for k, v in value.items() if isinstance(v, str)}
    if isinstance(value, list):  # tokenizer_config.json's [{"name", "template"}]
        return {
            str(t["name"]): t["template"]
            for t in value
            if isinstance(t, Mapping) and isinstance(t.get("template"), str)
        }
    return {}


def _first_difference(a: str, b: str) -> str:
    k = common_prefix(a, b)
    return f"at character {k}: raw {a[k : k + 30]!r}, ours {b[k : k + 30]!r}"
