"""Parsing by a :class:`~renderers.template.spec.FormatSpec`, with the existing parsers:
:class:`~renderers.core.grammars.TaggedParser` (or its bare-JSON variant) for think blocks
and tool calls in tags, and the parsers of the specialised modules for the DeepSeek, Kimi
and Harmony grammars."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from renderers.core.engine import StreamParser
from renderers.core.grammars import (
    BareJsonParser,
    TaggedParser,
    TagGrammar,
    json_call_builder,
    xml_call_builder,
)
from renderers.core.tokens import TokenTable
from renderers.deepseek_v3 import DeepSeekV3Renderer, DeepSeekV31Options, DeepSeekV31Renderer
from renderers.gpt_oss import GptOssRenderer
from renderers.kimi_k2 import KimiK2Renderer, KimiK2ThinkingRenderer
from renderers.rendering import Renderer
from renderers.template.spec import TAGGED, FormatSpec

__all__ = ["SpecParsing"]


class SpecParsing:
    """A spec resolved against a tokenizer's vocabulary: the parser it runs, its stop ids,
    its think token. Grammars of a format with a specialised module (DeepSeek, Kimi,
    Harmony) run that module's parser."""

    def __init__(self, spec: FormatSpec, tokenizer: Any, table: TokenTable) -> None:
        self.table = table

        def ids(names: Sequence[str], what: str) -> tuple[int, ...]:
            out = []
            for name in names:
                token = table.control_tokens.get(name)
                if token is None:
                    raise ValueError(
                        f"spec.{what}: {name!r} is not a control token of the tokenizer"
                    )
                out.append(token)
            return tuple(out)

        think = ids(spec.think, "think") if spec.think else (None, None)
        self.think = think[0]
        self.delegate: Renderer | None = None
        self.grammar: TagGrammar | None = None
        syntax = spec.tool_calls
        if syntax in ("deepseek_v3", "deepseek_v3.1", "kimi", "harmony"):
            self.delegate = _delegate(syntax, spec, tokenizer)
            self.stop_ids = self.delegate.stop_token_ids
            return
        calls: tuple[int | None, int | None] = (None, None)
        build = None
        if syntax in TAGGED:
            assert spec.call_tags is not None
            calls = ids(spec.call_tags, "call_tags")  # type: ignore[assignment]
            builder = json_call_builder if syntax == "json_in_tags" else xml_call_builder
            build = builder(spec.call_tags[1])
        stop = ids(spec.stop, "stop")
        eos = ids(spec.eos, "eos")
        self.stop_ids = (*stop, *eos)
        self.grammar = TagGrammar(
            stop=stop,
            eos=eos,
            ends_message=ids(spec.ends_message, "ends_message"),
            think=think[0],
            think_end=think[1],
            call=calls[0],
            call_end=calls[1],
            build_call=build,
            think_padding=spec.think_padding,
            after_think=spec.after_think,
            before_call=spec.before_call,
        )
        self._bare = syntax == "bare_json"

    def parser(
        self, events: bool, opens_reasoning: bool, prefix: str, *, calls_end_reasoning: bool = False
    ) -> StreamParser:
        """A parser for a completion that starts inside reasoning when ``opens_reasoning``
        (``prefix``: padding the prompt did not write, removed from the reasoning);
        ``calls_end_reasoning``: a call tag inside open reasoning ends it (tag grammars)."""
        if self.delegate is not None:
            if calls_end_reasoning:
                raise ValueError(
                    "drafted_calls='call' reads Qwen3-style calls in tags; this template's "
                    f"calls follow the {self.delegate.name} grammar, whose parser keeps a "
                    "call drafted in reasoning as reasoning"
                )
            if isinstance(self.delegate, DeepSeekV31Renderer):
                return self.delegate._new_parser(
                    DeepSeekV31Options(thinking=opens_reasoning), events
                )
            return self.delegate._new_parser(self.delegate.options, events)
        assert self.grammar is not None
        cls = BareJsonParser if self._bare else TaggedParser
        return cls(
            self.grammar,
            self.table,
            events,
            opens_reasoning=opens_reasoning,
            reasoning_prefix=prefix,
            calls_end_reasoning=calls_end_reasoning,
        )


def _delegate(syntax: str, spec: FormatSpec, tokenizer: Any) -> Renderer:
    """The specialised renderer whose parser reads this grammar."""
    cls: Callable[..., Renderer]
    if syntax == "deepseek_v3":
        cls = DeepSeekV3Renderer
    elif syntax == "deepseek_v3.1":
        cls = DeepSeekV31Renderer
    elif syntax == "kimi":
        cls = KimiK2ThinkingRenderer if spec.think else KimiK2Renderer
    else:
        cls = GptOssRenderer
    try:
        return cls(tokenizer)
    except KeyError as exc:
        raise ValueError(f"spec.tool_calls={syntax!r}: {exc.args[0]}") from None
