"""DeepSeek-V4.1 (``deepseek-ai/DeepSeek-V4.1-Flash``, ``-Flash-1017``): DeepSeek-V4's
format (:mod:`renderers.deepseek_v4`) with a system role marker, a numeric reasoning
effort and renamed DSML tags.

The chat template and reference encoder (``chat_template.jinja`` and
``encoding/encoding.py`` of ``deepseek-ai/DeepSeek-V4.1-Flash``, as tinker-cookbook 0.6.1
describes them; neither is available offline) write::

    <｜begin▁of▁sentence｜><｜System｜>Reasoning Effort: 75 (range 1-100, the higher the
        value, the more thorough the reasoning)⏎⏎{system}⏎⏎## Tools ... {schema}⏎⏎You MUST ...⏎
    <｜User｜>{text}<｜Assistant｜><think>{reasoning}</think>{text}⏎⏎<｜DSML｜ calls>⏎
        <｜DSML｜ invoke name="NAME">⏎
        <｜DSML｜ parameter name="KEY" string="true">VALUE</｜DSML｜ parameter>⏎
        </｜DSML｜ invoke>⏎
        </｜DSML｜ calls><｜end▁of▁sentence｜>
    <｜User｜><tool_result>{result}</tool_result><｜Assistant｜><think>

(``⏎`` is a newline; the turns follow each other without one.) Everything DeepSeek-V4's
docstring says holds (messages, user turns and tool results, history reasoning, tools,
calls and their arguments, prefill, degenerate inputs, parsing), except:

- **System messages** each begin with the ``<｜System｜>`` control token. A system
  message after the first message is a turn of its own that the assistant answers: it
  is followed by the transition (``<｜Assistant｜>`` and ``<think>`` or ``</think>``) when
  an assistant turn or the generation prompt follows, and counts as a user turn for the
  history reasoning that is dropped.
- **Reasoning effort** is a budget from 1 to 100 (``"low"`` 50, ``"high"`` 75, the
  template's default, ``"max"`` 100, or a number). In thinking mode the conversation
  always starts ``<｜System｜>Reasoning Effort: {budget} (range 1-100, ...)⏎⏎``, before
  the first system message's text or, without one, before the first turn; chat mode
  writes no effort line (``<｜System｜>`` then only before a system message, or the empty
  one tools create).
- **DSML tags** have a space after ``｜DSML｜`` and the section is ``calls``:
  ``<｜DSML｜ calls>``, ``<｜DSML｜ invoke name=...>``, ``<｜DSML｜ parameter ...>`` (the
  tool instructions spell them the same way). ``" calls"``, ``" invoke"`` and
  ``" parameter"`` are single text tokens.
- **Tool results** are always put in the order of the calls they answer, stably; a
  result naming no call of the turn before sorts as the first call (the encoder's
  ``sort_tool_results_by_call_order``).

Parsing is the DSML grammar of :mod:`renderers.core.dsml` with these tag names;
``<｜System｜>`` also ends a message.

Verified against tml-renderers 0.2.1 (``DeepSeekV41()``, ``DeepSeekV41(reasoning_effort=
"max")``, ``DeepSeekV41(reasoning_effort=33)``, ``DeepSeekV41.chat()`` with its
``DeepSeekV41Tokenizer``; the template and encoder are not available offline) on the shared
corpus (``tests/test_deepseek_v4_1.py``): 248 of 248 generation prompts (62 per option
set), 136 of 136 supervised examples (tokens and weights), and the parses of the 132 trained
turns the oracle parses (it raises on an empty message) equal; each of the 136 streams as
it parses. tinker-cookbook 0.6.1 (``renderers/deepseek_v4_1.py``, which follows the
template) is the second opinion; run once from a scratch directory with the oracle's
tokenizer behind it (default, low and max effort, chat mode), it gave the same ids for 244
of 248 prompts and 132 of 136 examples, the rest being the corpus's text that spells
``<think>``, which its ``encode`` reads as control tokens (below). Where the oracle differs
from the template, this renderer follows the template and the cookbook: consecutive user
messages are joined by a blank line (the oracle joins two user texts directly, though
it puts the blank line between a user text and a tool result); both agree with this
renderer on the result order, unknown ids included, and on later system messages.

Deliberate divergences are DeepSeek-V4's (message text spelling a control token is
ordinary text; list content, a trailing user turn, part order, the encoder's extensions
and ``None`` tool results as there), and: tool-call arguments given as JSON text of JSON
text (which the encoder decodes twice) are a caller error, as any arguments that are not a
JSON object (``""`` is the encoder's one ``arguments`` parameter, as in V4); the template's
``"medium"`` effort, whose budget no oracle gives, is not offered.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Literal

from renderers.core.dsml import DSMLGrammar, DSMLTags
from renderers.core.options import Reasoning
from renderers.core.writer import NO_MESSAGE, TokenWriter
from renderers.deepseek_v4 import DeepSeekV4Renderer, _Turn

__all__ = ["DeepSeekV41Options", "DeepSeekV41Renderer"]

SYSTEM = "<｜System｜>"
_BUDGETS = {"low": 50, "high": 75, "max": 100}


@dataclass(frozen=True, slots=True)
class DeepSeekV41Options:
    """Options of the DeepSeek-V4.1 format (names follow the template's variables)."""

    thinking_mode: Literal["thinking", "chat"] = "thinking"
    """``"thinking"``: the generation prompt opens a think block and the parser starts in
    it. ``"chat"``: it ends ``</think>``; reasoning is not written."""
    reasoning_effort: Literal["low", "high", "max"] | int = "high"
    """Thinking mode: the budget of the effort line, ``"low"`` (50), ``"high"`` (75, the
    template's default), ``"max"`` (100) or a number from 1 to 100."""
    drop_thinking: bool = True
    """True (template default): the reasoning of assistant turns before the last user
    turn is dropped, unless tools are declared. False: every turn keeps it."""
    reasoning: Reasoning = "error"
    """What to do with reasoning of a trained turn that the format cannot write (chat
    mode): ``"error"`` raises ``ValueError``, ``"drop"`` leaves it out. Reasoning of
    untrained turns is rendered as the template does."""
    verbatim_arguments: bool = False
    """False (as the encoder renders them): a call's arguments text is parsed and each
    non-string value written as ``json.dumps`` writes it. True: as given."""

    def __post_init__(self) -> None:
        effort = self.reasoning_effort
        if isinstance(effort, int) and not 1 <= effort <= 100:
            raise ValueError(
                f"option reasoning_effort: expected a budget from 1 to 100, got {effort}"
            )


class DeepSeekV41Renderer(DeepSeekV4Renderer):
    """Renderer and parser for DeepSeek-V4.1 (thinking and chat modes)."""

    name = "deepseek_v4.1"
    default_model = "deepseek-ai/DeepSeek-V4.1-Flash"
    model_ids = ("deepseek-ai/DeepSeek-V4.1-Flash", "deepseek-ai/DeepSeek-V4.1-Flash-1017")
    tokenizer_source = "tml_renderers.tokenizers:DeepSeekV41Tokenizer"
    Options = DeepSeekV41Options
    tags = DSMLTags(section=" calls", invoke=" invoke", parameter=" parameter")

    def __init__(self, tokenizer: Any = None, **options: Any) -> None:
        super().__init__(tokenizer, **options)
        self.system = self.table.control_id(SYSTEM)

    def _opening(self, w: TokenWriter, k: int, turn: _Turn, options: Any) -> None:
        """``<｜System｜>`` before each system message and, in thinking mode, the effort
        line first (after its own ``<｜System｜>`` when no system message starts)."""
        thinking = options.thinking_mode == "thinking"
        if turn.role == "system" or (k == 0 and thinking):
            w.control(self.system, turn.index if turn.role == "system" else NO_MESSAGE)
        if k == 0 and thinking:
            effort = options.reasoning_effort
            budget = _BUDGETS[effort] if isinstance(effort, str) else effort
            w.text(
                f"Reasoning Effort: {budget} (range 1-100, the higher the value, the more "
                "thorough the reasoning)\n\n",
                NO_MESSAGE,
            )

    def _asks(self, k: int, turn: _Turn) -> bool:
        """User turns and system messages after the first turn."""
        return turn.role == "user" or (turn.role == "system" and k > 0)

    def _order(self, blocks: list[tuple[int, str, str | None]], calls: tuple[str, ...]) -> None:
        """Tool results stably sorted by the call they answer; unknown ids as the first."""
        order = {call: n for n, call in enumerate(calls) if call}
        results = iter(
            sorted((b for b in blocks if b[2] is not None), key=lambda b: order.get(b[2] or "", 0))
        )
        blocks[:] = [next(results) if b[2] is not None else b for b in blocks]

    def grammar(self, options: Any) -> DSMLGrammar:
        """DeepSeek-V4's grammar with V4.1's tags; ``<｜System｜>`` also ends a message."""
        g = super().grammar(options)
        return dataclasses.replace(g, ends_message=(*g.ends_message, self.system))
