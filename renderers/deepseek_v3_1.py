"""DeepSeek-V3.1 (``deepseek-ai/DeepSeek-V3.1``): renderer ``deepseek_v3.1``, option ``thinking``.

What it shares with DeepSeek-V3 (system messages first, role markers with no newlines
between turns, the stop token, tool outputs, the section grammar it parses by, prefill,
arguments and the divergences from both templates): :mod:`renderers.deepseek_v3`.

``<think>`` and ``</think>`` are control tokens. The turn after a user message starts
with ``<｜Assistant｜></think>`` (non-thinking) and the generation prompt is
``<｜Assistant｜></think>``, or ``<｜Assistant｜><think>`` with ``thinking=True``: the
completion then starts inside the reasoning, ``{reasoning}</think>{answer}``, and the
parser starts in the thinking state. Tool calls and results::

    <｜Assistant｜></think>{text}<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{ARGS}<｜tool▁call▁end｜><｜tool▁call▁begin｜>...<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>
    <｜tool▁output▁begin｜>{result}<｜tool▁output▁end｜><｜tool▁output▁begin｜>{result}<｜tool▁output▁end｜>{answer}<｜end▁of▁sentence｜>

After tool outputs the template adds no ``<｜Assistant｜>`` (neither before a history answer
nor as generation prompt, which is then empty). This is reproduced: it is consistent
(what the prompt ends with is what the history shows), so it does not corrupt training
data. Parse such a completion with ``thinking=False``: the prompt opened no think block.
The same holds for an assistant turn with no user message before it, which follows the
system text directly: the template writes ``{system}{answer}`` with no marker, and the
tokenizer may merge the two texts into one token (``s`` + ``a`` -> ``sa``). Such a turn is
rendered as the template does, but training it is a ``ValueError`` (the model would be
trained on system text it never samples); a trained token never holds untrained text.

Every assistant message is rendered without its reasoning (the template drops
``reasoning_content`` and, for a plain answer, the text up to the first ``</think>``).
So with ``thinking=True`` the template cannot express a training target with reasoning,
and its history turns (``<｜Assistant｜></think>{answer}``) do not extend the thinking
generation prompt. ``keep_thinking=True`` (with ``thinking=True``) renders the *last*
message, when it is an assistant turn right after a user message, as the model samples it
in thinking mode, ``<｜Assistant｜><think>{reasoning}</think>{answer}<｜end▁of▁sentence｜>``.
Every other turn stays as the template writes it, so the untrained prefix is always the
template's generation prompt; to train the reasoning of several turns, build one example
per turn (the conversation cut after it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from renderers.core.engine import StreamParser
from renderers.core.messages import (
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UnparsedToolCallPart,
    join_text,
)
from renderers.core.options import Reasoning, reasoning_error
from renderers.core.result import ParseResult
from renderers.core.sections import SectionGrammar, name_json_call, section_parser
from renderers.core.writer import TokenWriter
from renderers.deepseek_v3 import (
    ASSISTANT,
    CALL_END,
    OUTPUT_BEGIN,
    OUTPUT_END,
    SEP,
    THINK,
    THINK_END,
    USER,
    DeepSeekRenderer,
)
from renderers.rendering import checked_arguments
from renderers.rollout import ExtensionProperty
from renderers.view.model import MessageMarkers

__all__ = ["DeepSeekV31Options", "DeepSeekV31Renderer"]


@dataclass(frozen=True, slots=True)
class DeepSeekV31Options:
    """Options of the DeepSeek-V3.1 format (``thinking`` is the template's kwarg)."""

    thinking: bool = False
    """True: the generation prompt opens a think block and the parser starts in it."""
    keep_thinking: bool = False
    """With ``thinking=True``: the last message, an assistant turn right after a user
    message, keeps its reasoning as the model samples it (the template drops it)."""
    reasoning: Reasoning = "error"
    """What to do with reasoning of a trained turn the format cannot write (every turn but
    the one ``keep_thinking`` keeps): ``"error"`` raises ``ValueError``, ``"drop"`` leaves
    it out (untrained turns: dropped, as the template does)."""


class DeepSeekV31Renderer(DeepSeekRenderer):
    """Renderer and parser for DeepSeek-V3.1 (thinking and non-thinking modes)."""

    name = "deepseek_v3.1"
    default_model = "deepseek-ai/DeepSeek-V3.1"
    Options = DeepSeekV31Options
    message_markers = MessageMarkers(
        starts={USER: "user", ASSISTANT: "assistant", OUTPUT_BEGIN: "tool"},
        after={OUTPUT_END: "assistant"},  # the answer after tool outputs has no marker
        leading="system",
    )
    _call_separator = ""

    def __init__(self, tokenizer: Any = None, **options: Any) -> None:
        super().__init__(tokenizer, **options)
        self.think = self.table.control_id(THINK)
        self.think_end = self.table.control_id(THINK_END)

    def _render(
        self,
        w: TokenWriter,
        messages: list[Message],
        tools: list[Mapping[str, Any]] | None,
        options: DeepSeekV31Options,
        add_generation_prompt: bool,
    ) -> None:
        self._check(messages)
        self._system_prompt(w, messages)
        is_tool = is_last_user = False
        keeping = options.thinking and options.keep_thinking
        for i, m in enumerate(messages):
            if m.role == "user":
                is_tool = False
                is_last_user = True
                w.control(self.user, i)
                w.text(m.text, i)
            elif m.role == "assistant":
                parts = list(m.parts)
                has_calls = any(type(p) in (ToolCallPart, UnparsedToolCallPart) for p in parts)
                if not has_calls and not is_tool:
                    parts = _split_inline_reasoning(parts)
                keep = keeping and is_last_user and i == len(messages) - 1
                if w.trains(i) and not keep and options.reasoning == "error":
                    _reject_trained_reasoning(parts, i, is_tool, is_last_user, keeping)
                if is_last_user:
                    w.control(self.assistant, i)
                    w.control(self.think if keep else self.think_end, i)
                elif w.trains(i):
                    _check_after_system_text(messages, i, w)
                self._v31_body(w, i, parts, keep)
                is_last_user = is_tool = False
            elif m.role == "tool":
                is_last_user = False
                is_tool = True
                self._tool_output(w, i, m.text)
        if add_generation_prompt and is_last_user and not is_tool:
            w.control(self.assistant)
            w.control(self.think if options.thinking else self.think_end)

    def _v31_body(self, w: TokenWriter, i: int, parts: list[Part], keep: bool) -> None:
        """Parts in order (reasoning only when ``keep``), each run of calls in its own
        section, then the stop token. With ``keep`` the header opened a think block."""
        if keep:
            if parts and type(parts[0]) is ThinkingPart:
                w.text(parts[0].text, i, True)
                parts = parts[1:]
            w.control(self.think_end, i, True)
        self._body(w, i, parts if keep else [p for p in parts if type(p) is not ThinkingPart])

    def _write_thinking(self, w: TokenWriter, i: int, text: str) -> None:
        w.control(self.think, i, True)
        w.text(text, i, True)
        w.control(self.think_end, i, True)

    def _call_text(self, part: ToolCallPart, i: int) -> tuple[str, str]:
        return part.name, checked_arguments(part, i)

    @property
    def extension_property(self) -> ExtensionProperty:
        return ExtensionProperty(
            False,
            "history turns are written without reasoning (after <｜Assistant｜></think>), "
            "which thinking-mode prompts (<think>) did not show; tool calls are "
            "re-serialized; text is re-tokenized",
        )

    def _parse_after_prompt(
        self, prompt_ids: Sequence[int], completion_ids: list[int], options: Mapping[str, Any]
    ) -> ParseResult:
        # A completion starts inside reasoning exactly when its prompt opened a think block
        # (after tool outputs the template's generation prompt adds nothing).
        opened = bool(prompt_ids) and prompt_ids[-1] == self.think
        return self.parse_response(completion_ids, **{**options, "thinking": opened})

    def _new_parser(self, options: DeepSeekV31Options, events: bool) -> StreamParser:
        return section_parser(self.grammar, self.table, events, opens_reasoning=options.thinking)

    @cached_property
    def grammar(self) -> SectionGrammar:
        """V3.1's calls ``NAME<sep>ARGS``; ``<think>``/``</think>`` tokens."""
        think = (self.think, self.think_end)
        return self._grammar(build_call=name_json_call(SEP, CALL_END), think=think)


# -- helpers --------------------------------------------------------------------------------


def _reject_trained_reasoning(
    parts: list[Part], i: int, after_tools: bool, after_user: bool, keeping: bool
) -> None:
    """The template drops every turn's reasoning; in a supervised example the trained
    (last) turn would silently lose the reasoning it should teach: a caller error."""
    if any(type(p) is ThinkingPart and p.text for p in parts):
        if after_tools:
            how = "a turn right after tool outputs has no think block in this format"
        elif keeping or not after_user:
            how = "keep_thinking keeps the reasoning of the last turn, right after a user message"
        else:
            how = "pass thinking=True, keep_thinking=True to train on it"
        raise reasoning_error("deepseek_v3.1", i, f"its template drops it; {how}")


def _check_after_system_text(messages: list[Message], i: int, w: TokenWriter) -> None:
    """A trained turn right after the system prompt's text (only system messages before
    it, one not empty, untrained): no marker between them, so a token may hold both."""
    before = messages[:i]
    if (
        all(m.role == "system" for m in before)
        and any(m.text for m in before)
        and not all(w.trains(k) for k in range(i))
    ):
        raise ValueError(
            f"messages[{i}]: deepseek_v3.1's template writes an assistant turn with "
            "no user message before it right after the system text, with no marker "
            "between them, so it cannot be trained; add a user message before it"
        )


def _split_inline_reasoning(parts: list[Part]) -> list[Part]:
    """V3.1's template drops a plain answer's text up to its first ``</think>`` (reasoning
    written inline). That text becomes the reasoning, after any the message has in parts."""
    text = join_text(parts)
    if THINK_END not in text:
        return parts
    before, after = text.split(THINK_END, 1)
    # Reasoning of the message's own parts, then the inline reasoning: neither is dropped.
    own = "".join(p.text for p in parts if type(p) is ThinkingPart)
    reasoning = own + before.removeprefix(THINK)
    return [ThinkingPart(reasoning), *([TextPart(after)] if after else [])]
