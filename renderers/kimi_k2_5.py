"""Kimi-K2.5 (``moonshotai/Kimi-K2.5``): the Kimi-K2 format with thinking by default, the
caller's tool-call ids and no default system prompt.

The turns, tool-call sections and markers are Kimi-K2-Thinking's (see
:mod:`renderers.kimi_k2`); what K2.5 changes::

    <|im_system|>tool_declare<|im_middle|>{tools, TypeScript-style}<|im_end|>
    <|im_user|>user<|im_middle|>{text}<|im_end|>
    <|im_assistant|>assistant<|im_middle|><think>{reasoning}</think>{text}
      <|tool_calls_section_begin|><|tool_call_begin|>{call id}<|tool_call_argument_begin|>{json}
      <|tool_call_end|><|tool_calls_section_end|><|im_end|>
    <|im_system|>{name or "tool"}<|im_middle|>## Return of {tool_call_id}⏎{result}<|im_end|>
    <|im_assistant|>assistant<|im_middle|><think>

- **No default system prompt**: a system turn is written only for a system message.
- **Generation prompt**: ``<|im_assistant|>assistant<|im_middle|><think>``: the completion
  starts inside the reasoning (the parser starts in the thinking state);
  ``thinking=False`` closes the block in the prompt (``<think></think>``).
- **Tool calls** carry the caller's id (``tool_calls[k].id``, required), written as is;
  a tool result names the call it answers with its ``tool_call_id`` (required). The
  arguments are written as the text given, verbatim, as the template writes a string
  (an object it writes as ``tojson``, which is what a dict given as arguments becomes).
- **Reasoning**: every assistant turn up to and including the conversation's last
  assistant message without tool calls is history, written ``<think></think>{text}``
  (its reasoning dropped); later turns keep theirs. ``preserve_thinking=True`` keeps
  every turn's reasoning; with ``thinking=False`` no turn shows any. A *trained* turn
  whose reasoning is not shown is a ``ValueError`` naming the ``reasoning`` option
  (``"drop"`` trains it without); untrained turns render as the template does.
- **Tools** are declared the way the model repository's tokenizer declares them (its
  ``apply_chat_template`` is remote code that sorts the keys of the tools deeply and
  passes the template a TypeScript-style declaration, ``tools_ts_str``; see
  :mod:`renderers.kimi_k2_5_tools`), falling back, as it does, to JSON for a schema that
  style cannot express. ``tool_declaration="json"`` always writes the JSON (compact
  separators, keys deep-sorted): what the template writes when it is rendered without the
  tokenizer's code, as Rust and other non-Python servers do, and what tml-renderers
  writes.

Prefill: after the generation prompt: the reasoning after its ``<think>``, or with
``thinking=False`` the answer after ``<think></think>`` (as ``continue_final_message``
writes a final answer; the template writes the reasoning of a final plain answer as
history, so ``"reasoning_content"`` renders only a tool-calling final message's).

Degenerate inputs (``content: None``, ``tool_calls: []``, empty and ``None`` tool results)
render as the template renders them.

A supervised example renders the trained (last) turn after the generation prompt of the
messages before it, exactly as the model samples it, reasoning kept; the template would
rewrite a final plain answer as history, dropping the reasoning being trained on (the same
defect :class:`~renderers.kimi_k2.KimiK2ThinkingRenderer` fixes with
``keep_last_reasoning``). Earlier turns keep the rendering of the whole conversation.

Parsing is Kimi-K2's (:mod:`renderers.kimi_k2`), starting inside the reasoning when the
prompt opened it; a call's ``id`` is the id as sampled and its name is read from it
(``functions.NAME:IDX``).

Verified against Moonshot's template (the model repository's ``chat_template.jinja``)
rendered by transformers, with thinking on and off: generation prompts equal it, and
supervised examples except for the trained turn above; the TypeScript-style declaration
against tinker-cookbook 0.6.1's copy of the tokenizer's encoder, also as the template's
``tools_ts_str``. Cross-checked with tml-renderers 0.2.1 (``KimiK25()``,
``KimiK25.disable_thinking()``, ``KimiK25(strip_thinking_from_history=False)``, with
``tool_declaration="json"``, since it declares tools as JSON), the only reference for
``preserve_thinking=True``, which is not a variable of the template; where tml-renderers
writes the role in the header of a named user or assistant message, the template and
this renderer write the ``name``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from renderers.core.engine import StreamParser
from renderers.core.messages import Message, ThinkingPart, ToolCallPart
from renderers.core.options import Reasoning, reasoning_error
from renderers.core.result import ParseResult
from renderers.core.sections import section_parser
from renderers.core.writer import TokenWriter
from renderers.kimi_k2 import (
    _assistant_parts,
    _has_calls,
    _json_declaration,
    _KimiK2Base,
)
from renderers.kimi_k2_5_tools import typescript_declaration
from renderers.kimi_k2_ids import CallIdBook
from renderers.rendering import plain_text
from renderers.rollout import ExtensionProperty

__all__ = ["KimiK25Options", "KimiK25Renderer", "KimiK26Renderer"]


@dataclass(frozen=True, slots=True)
class KimiK25Options:
    """Options of the Kimi-K2.5 format (names follow the template's kwargs)."""

    thinking: bool = True
    """False: the generation prompt closes an empty think block (no reasoning)."""
    preserve_thinking: bool = False
    """True: every assistant turn keeps its reasoning (not a variable of Moonshot's
    template: tml-renderers' ``strip_thinking_from_history=False``). False (the template):
    turns up to the last assistant message without tool calls are written without it."""
    tool_declaration: Literal["typescript", "json"] = "typescript"
    """How tools are declared: ``"typescript"`` as the model repository's tokenizer
    declares them (JSON where that style cannot express a schema), ``"json"`` as the
    template alone writes them (compact JSON; tml-renderers' declaration)."""
    reasoning: Reasoning = "error"
    """What to do with reasoning of a trained turn that the format cannot write
    (``thinking=False``, or a turn whose reasoning the template drops): ``"error"`` raises
    ``ValueError``, ``"drop"`` leaves it out. Reasoning of untrained turns is rendered as
    the template does."""


class KimiK25Renderer(_KimiK2Base):
    """Renderer and parser for Kimi-K2.5."""

    name = "kimi_k2.5"
    default_model = "moonshotai/Kimi-K2.5"
    Options = KimiK25Options
    _has_thinking = True

    def _render(
        self,
        w: TokenWriter,
        messages: list[Message],
        tools: list[Mapping[str, Any]] | None,
        options: KimiK25Options,
        add_generation_prompt: bool,
    ) -> None:
        assert self.think is not None and self.think_end is not None
        trained = not add_generation_prompt and bool(messages) and messages[-1].role == "assistant"
        # The history split (the template's last assistant message without tool calls), on
        # the messages a trained last turn was sampled after.
        considered = messages[:-1] if trained else messages
        split = max(
            (k for k, m in enumerate(considered) if m.role == "assistant" and not _has_calls(m)),
            default=-1,
        )
        self._tool_declaration(w, tools, options)
        ids = CallIdBook(self, numbered=False)  # calls write their own ids (_calls)
        for i, m in enumerate(messages):
            self._header(w, m, i, use_name=True)
            if m.role == "assistant":
                parts = _assistant_parts(m)
                keeps = options.thinking and (options.preserve_thinking or i > split)
                reasoning = any(type(p) is ThinkingPart and p.text for p in parts)
                if w.trains(i) and not keeps and reasoning and options.reasoning == "error":
                    if not options.thinking:
                        raise ValueError(
                            f"messages[{i}]: {self.name} with thinking=False cannot write the "
                            "reasoning of this trained turn (the generation prompt closes an "
                            "empty think block); pass reasoning='drop' to leave it out, or "
                            "remove it"
                        )
                    raise reasoning_error(
                        self.name,
                        i,
                        "its template drops the reasoning of turns up to the last plain "
                        "answer; preserve_thinking=True keeps it",
                    )
                if not keeps:
                    parts = [p for p in parts if type(p) is not ThinkingPart]
                # "<think>" ends the generation prompt; "</think>" is sampled, unless the
                # prompt closed the block itself.
                w.control(self.think, i)
                if parts and type(parts[0]) is ThinkingPart:
                    w.text(parts[0].text, i, True)
                    parts = parts[1:]
                w.control(self.think_end, i, options.thinking)
                self._body(w, parts, i, ids)
                w.control(self.im_end, i, True)
                continue
            if m.role == "tool":
                text = plain_text(m, i, self.name)
                if m.tool_call_id is None:
                    raise ValueError(
                        f"messages[{i}]: {self.name} writes the id of the call a tool result "
                        "answers; this tool message has no tool_call_id"
                    )
                w.text(f"## Return of {m.tool_call_id}\n{text}", i)
            else:
                w.text(plain_text(m, i, self.name), i)
            w.control(self.im_end, i)
        if add_generation_prompt:
            self._generation_prompt(w)
            w.control(self.think)
            if not options.thinking:
                w.control(self.think_end)

    def _declaration(self, tools: list[Any], options: KimiK25Options) -> str:
        if options.tool_declaration == "typescript":
            declaration = typescript_declaration(tools)
            if declaration is not None:
                return declaration
        return _json_declaration(tools, (",", ":"))

    def _call_id(self, part: ToolCallPart, i: int, trained: bool, ids: CallIdBook) -> str:
        """The caller's id, as given."""
        if part.id is None:
            raise ValueError(
                f"messages[{i}]: {self.name} writes each tool call's id; the call to "
                f"{part.name!r} has none"
            )
        return part.id

    # -- parsing ------------------------------------------------------------------------

    def _new_parser(self, options: KimiK25Options, events: bool) -> StreamParser:
        return section_parser(self.grammar, self.table, events, opens_reasoning=options.thinking)

    # -- multi-turn rollouts ------------------------------------------------------------

    def _parse_after_prompt(
        self, prompt_ids: Sequence[int], completion_ids: list[int], options: Mapping[str, Any]
    ) -> ParseResult:
        # A completion starts inside reasoning exactly when its prompt ends "<think>".
        opened = bool(prompt_ids) and prompt_ids[-1] == self.think
        return self.parse_response(completion_ids, **{**options, "thinking": opened})

    def _continuation_context(
        self, prompt_ids: Sequence[int], options: Mapping[str, Any]
    ) -> list[Message]:
        return [Message("user", "")]  # call ids are the caller's: nothing is counted

    @property
    def extension_property(self) -> ExtensionProperty:
        reasons = [
            "text is re-tokenized (a sampled tokenization may differ from encoding it)",
        ]
        if not self.options.preserve_thinking:
            reasons.insert(
                0,
                "reasoning of turns up to the last answer without tool calls is dropped",
            )
        return ExtensionProperty(False, "; ".join(reasons))


class KimiK26Renderer(KimiK25Renderer):
    """Kimi-K2.6 (``moonshotai/Kimi-K2.6``): Kimi-K2.5's format and options.

    K2.6's tokenizer is K2.5's (tml-renderers 0.2.1's ``KimiK26Tokenizer`` and
    ``KimiK25Tokenizer``: the same 256 control tokens at the same ids, and all 163,840 ids
    decode to the same bytes), and its template is K2.5's with ``preserve_thinking`` as a
    template variable (tinker-cookbook 0.6.1, ``tinker_cookbook/renderers/kimi_k26.py``: K2.6's
    ``preserve_thinking=true`` is byte-equivalent to K2.5's renderer keeping the reasoning
    of history, which this renderer's ``preserve_thinking=True`` does). K2.6's own template
    is not available here; the oracles are Moonshot's K2.5 template rendered by
    transformers and encoded with the K2.6 tokenizer (thinking on and off), tml-renderers'
    ``KimiK25()``, ``KimiK25(strip_thinking_from_history=False)`` and
    ``KimiK25.disable_thinking()`` (whose ids are the K2.6 tokenizer's) and
    tinker-cookbook's source. Agreement over the shared corpus: the template 122 of 122
    generation prompts and 66 of 66 supervised examples (thinking on and off), tml-renderers
    186 of 186 prompts, 102 of 102 supervised examples and every parse
    (``tests/test_kimi_k2_6.py``).
    """

    name = "kimi_k2.6"
    default_model = "moonshotai/Kimi-K2.6"
    tokenizer_source = "tml_renderers.tokenizers:KimiK26Tokenizer"
