"""Qwen3-2507 Instruct and Thinking, and Qwen3-VL Instruct (text): Qwen3's ChatML turns and
``<tool_call>`` JSON, with the 2507 split of thinking and non-thinking models.

Each format is Qwen3's (:mod:`renderers.qwen3`, whose writer and grammar they share) with
these differences::

    Instruct-2507, VL   <|im_start|>assistant⏎{text}⏎<tool_call>⏎{...}⏎</tool_call><|im_end|>⏎
    Thinking-2507       ... <|im_start|>assistant⏎<think>⏎        (the generation prompt)

- **Qwen3-2507 Instruct** (``Qwen/Qwen3-4B-Instruct-2507``...; ``qwen3_instruct_2507.jinja``):
  no think blocks anywhere (no ``enable_thinking``, no inline ``</think>`` convention:
  text holding ``</think>`` is written as is). Reasoning of a trained turn, which the
  format has no place for, is refused (or left out with ``reasoning="drop"``); untrained
  turns' reasoning is dropped, as the template drops it.
- **Qwen3-2507 Thinking** (``Qwen/Qwen3-235B-A22B-Thinking-2507``...): Qwen3's template
  with the generation prompt ``<|im_start|>assistant⏎<think>⏎`` (always: no
  ``enable_thinking``). The completion starts inside the reasoning (the model samples
  ``reasoning</think>⏎⏎answer``) and the parser starts in the thinking state. Training keeps
  the untrained prefix equal to that prompt: a trained turn is written after ``<think>⏎``
  (its reasoning encoded on its own, as sampled; the template's text tokenized whole merges
  that newline with an empty reasoning's into one ``⏎⏎`` token), and a turn the template
  writes without a think block (before the last user query) cannot be trained: a
  ``ValueError`` (``strip_thinking_history=False`` keeps the block of turns with reasoning).
  A prefill continues the reasoning.
- **Qwen3-VL Instruct** (``Qwen/Qwen3-VL-8B-Instruct``...; ``qwen3_vl.jinja``), text only:
  Instruct-2507's format, where content may be a list of parts: the template writes its
  text parts joined, as every renderer here does. Images and videos are out of scope (a
  part of another type is a ``ValueError`` naming it). The template silently drops a
  system message after the first; here that is a ``ValueError``.

The three share Qwen3's vocabulary (the tokenizer of ``Qwen/Qwen3-8B`` is the default:
the special tokens these templates write, ``<|im_start|>`` 151644, ``<|im_end|>`` 151645,
``<|endoftext|>`` 151643, ``<tool_call>`` 151657, ``</tool_call>`` 151658,
``<tool_response>`` 151665, ``</tool_response>`` 151666, ``<think>`` 151667,
``</think>`` 151668, have these ids in it). Sampling stops at ``<|im_end|>``.

Oracles (``tests/test_qwen_line.py``): TRL's byte-exact copies of the official templates
(``trl/chat_templates/qwen3_instruct_2507.jinja``, ``qwen3_vl.jinja``) rendered by
transformers' sandbox and tokenized by the Qwen3-8B tokenizer. Neither TRL nor the stored
sources searched here have Qwen3-Thinking-2507's own template; its oracle is Qwen3's
official template (``Qwen/Qwen3-8B``, the one :mod:`renderers.qwen3` follows) with the
documented delta applied (the generation prompt's ``enable_thinking`` branch replaced by
``<think>⏎``), which is how the Thinking-2507 model cards describe it. Second oracle:
tml-renderers 0.2.1's ``Qwen3.instruct()`` and ``Qwen3.vision_instruct()`` agree on 60 of
the 61 prompts (VL 59 of 60); the other spells the same text, but tml encodes an
assistant text ``⏎`` before a call apart from the header's newline, where the template's
text tokenized whole merges them (we follow the template). tml has no Thinking-2507.

Agreement over the 44 conversations of ``tests/corpus.py`` (43 without the one that
spells control tokens; Qwen3-VL refuses the one with a later system message): each format
agrees with its oracle on all 61 generation prompts (VL 60), all 43 conversations
rendered whole (VL 42) and all 33 supervised examples of a last answer (VL 32; Instruct
and VL: 9 of them with the trained turn's reasoning dropped on request, as the template
drops it), and each of those trained turns parses back, with no issue, to a message that
renders back to the same ids.

Degenerate inputs: ``content: None`` is empty text, ``tool_calls: []`` no calls and a
``None`` tool result an empty one (what vLLM hands a template). The 2507 templates render
them so whether transformers passes the ``None`` (5.0 to 5.22) or drops the key (5.23 and
later); Qwen3-VL's fails on a ``None`` content under 5.0 to 5.22 (it iterates over it).

Divergences from the templates, on purpose (as in :mod:`renderers.qwen3`):

- message text that spells a control token is encoded as ordinary text;
- a trained turn after the last user query is encoded apart from the generation prompt
  (``assistant⏎``), as sampled (an answer starting with whitespace would merge with that
  newline in the template's text tokenized whole); in a turn a later user message
  follows (its history form) such a merged token is refused;
- list-of-parts content is its text parts joined (the 2507 templates render it as ``''``);
- tool-call arguments are written as the text given (the template writes a string as is,
  an object as ``tojson``: the same text whenever the given text is in that form).
"""

from __future__ import annotations

from dataclasses import dataclass

from renderers.core.options import DraftedCalls, Reasoning
from renderers.qwen3 import Qwen3Renderer

__all__ = [
    "Qwen3Instruct2507Renderer",
    "Qwen3InstructOptions",
    "Qwen3Thinking2507Options",
    "Qwen3Thinking2507Renderer",
    "Qwen3VLRenderer",
]


@dataclass(frozen=True, slots=True)
class Qwen3InstructOptions:
    """Options of the Qwen3-2507 Instruct and Qwen3-VL Instruct formats (no think blocks)."""

    reasoning: Reasoning = "error"
    """What to do with reasoning of a trained turn (the format has no place for it):
    ``"error"`` raises ``ValueError``, ``"drop"`` leaves it out. Reasoning of untrained
    turns is dropped, as the template drops it."""


@dataclass(frozen=True, slots=True)
class Qwen3Thinking2507Options:
    """Options of the Qwen3-2507 Thinking format (its template has no kwargs)."""

    strip_thinking_history: bool = True
    """True (template behaviour): reasoning of turns before the last user query is dropped.
    False: every assistant turn keeps its reasoning."""
    reasoning: Reasoning = "error"
    """What to do with reasoning of a trained turn that the format cannot write (a turn
    before the last user query, whose reasoning the template drops): ``"error"`` raises
    ``ValueError``, ``"drop"`` leaves it out. Reasoning of untrained turns is rendered as
    the template does."""
    drafted_calls: DraftedCalls = "reasoning"
    """Parsing: a ``<tool_call>`` sampled inside open reasoning stays reasoning text with
    an issue (``"reasoning"``) or ends the reasoning and is a call, as vLLM's Qwen3 parser
    reads it (``"call"``; see :data:`~renderers.core.options.DraftedCalls`)."""


class Qwen3Instruct2507Renderer(Qwen3Renderer):
    """Renderer and parser for Qwen3-2507 Instruct (no think blocks)."""

    name = "qwen3_instruct_2507"
    default_model = "Qwen/Qwen3-4B-Instruct-2507"
    model_ids = (
        "Qwen/Qwen3-4B-Instruct-2507",
        "Qwen/Qwen3-30B-A3B-Instruct-2507",
        "Qwen/Qwen3-235B-A22B-Instruct-2507",
    )
    tokenizer_source = "Qwen/Qwen3-8B"
    Options = Qwen3InstructOptions
    _thinking = False


class Qwen3Thinking2507Renderer(Qwen3Renderer):
    """Renderer and parser for Qwen3-2507 Thinking (every prompt opens a think block)."""

    name = "qwen3_thinking_2507"
    default_model = "Qwen/Qwen3-4B-Thinking-2507"
    model_ids = (
        "Qwen/Qwen3-4B-Thinking-2507",
        "Qwen/Qwen3-30B-A3B-Thinking-2507",
        "Qwen/Qwen3-235B-A22B-Thinking-2507",
    )
    tokenizer_source = "Qwen/Qwen3-8B"
    Options = Qwen3Thinking2507Options
    _opens_think = True


class Qwen3VLRenderer(Qwen3Renderer):
    """Renderer and parser for Qwen3-VL Instruct, text only (no think blocks)."""

    name = "qwen3_vl"
    default_model = "Qwen/Qwen3-VL-8B-Instruct"
    model_ids = (
        "Qwen/Qwen3-VL-8B-Instruct",
        "Qwen/Qwen3-VL-2B-Instruct",
        "Qwen/Qwen3-VL-4B-Instruct",
        "Qwen/Qwen3-VL-32B-Instruct",
        "Qwen/Qwen3-VL-30B-A3B-Instruct",
        "Qwen/Qwen3-VL-235B-A22B-Instruct",
    )
    tokenizer_source = "Qwen/Qwen3-8B"
    Options = Qwen3InstructOptions
    _thinking = False
    _late_system = False
