"""Qwen2.5 Instruct (``Qwen/Qwen2.5-7B-Instruct``...): ChatML turns, ``<tool_call>`` JSON,
a default system prompt, no reasoning.

What the official template renders (``qwen2_5.jinja``; ``⏎`` is a newline)::

    <|im_start|>system⏎{system, or the default}⏎⏎# Tools ... <tools>⏎{tool JSON per line}⏎
        </tools> ...<|im_end|>⏎
    <|im_start|>user⏎{text}<|im_end|>⏎
    <|im_start|>assistant⏎{text}⏎<tool_call>⏎{"name": NAME, "arguments": ARGS}⏎</tool_call>
        <|im_end|>⏎
    <|im_start|>user⏎<tool_response>⏎{result}⏎</tool_response>⏎<tool_response>...<|im_end|>⏎
    <|im_start|>assistant⏎

It is Qwen3-2507 Instruct's format (:mod:`renderers.qwen3_2507`, on :mod:`renderers.qwen3`'s
writer and grammar) but for two things:

- without a system message the system turn is ``You are Qwen, created by Alibaba Cloud.
  You are a helpful assistant.`` (before the tools too);
- ``<tool_response>`` and ``</tool_response>`` are not in Qwen2.5's vocabulary: they are
  ordinary text, encoded with the result between them (Qwen3 made them tokens).

Qwen2.5's vocabulary is Qwen3's without the four tokens Qwen3 added (``<tool_response>``,
``</tool_response>``, ``<think>``, ``</think>``, ids 151665 to 151668): the same
byte-level BPE and the 22 special tokens from ``<|endoftext|>`` 151643 to ``<|file_sep|>``
151664 with the same ids (``QWEN2_5_SPECIAL_TOKENS`` in torchtune's
``torchtune/models/qwen2_5/_tokenizer.py``, pytorch/torchtune@c85f46fe). Nothing this
renderer writes is one of the four (it writes ``<tool_response>`` as text, message text
is always text, and there are no think blocks), so the Qwen3-8B tokenizer, the default
here (Qwen2.5's is not in this hub cache), gives the ids Qwen2.5's tokenizer gives; a
real Qwen2.5 tokenizer can be passed as well. Parsing has no think markers: a ``<think>``
a Qwen3 tokenizer decodes is text. Sampling stops at ``<|im_end|>``.

Tool-call arguments are written as the text given: the template writes ``tojson`` of the
arguments, which is that text whenever the server parsed it into an object first (vLLM
does) and the text is in ``tojson``'s form; given a string, the template would write it
as a quoted JSON string, which no server hands it.

Oracles (``tests/test_qwen_line.py``): TRL's byte-exact ``qwen2_5.jinja`` rendered by
transformers' sandbox and tokenized by the Qwen3-8B tokenizer with the four tokens
Qwen2.5 lacks removed (Qwen2.5's own tokenizer files are not available offline; the
tests check that the unmodified Qwen3 tokenizer gives the same ids for everything this
renderer writes). Agreement over the 43 conversations of ``tests/corpus.py`` that do not
spell control tokens: all 61 generation prompts, all 43 conversations rendered whole,
all 33 supervised examples of a last answer (9 with the trained turn's reasoning dropped
on request, as the template drops it), each trained turn parsing back to a message that
renders back to the same ids; the Qwen3-8B tokenizer gives the same ids throughout.
tml-renderers 0.2.1 has no Qwen2.5 renderer.

Degenerate inputs: ``content: None`` is empty text, ``tool_calls: []`` no calls and a
``None`` tool result an empty one (what vLLM hands a template). The template fails on a
turn without calls whose content is ``None`` or missing (``'⏎' + content``), and writes a
``None`` result as ``None`` under transformers 5.0 to 5.22 (5.23 and later drop the key).

Divergences from the template, on purpose (as in :mod:`renderers.qwen3`):

- message text that spells a control token is encoded as ordinary text;
- a trained turn after the last user query is encoded apart from the generation prompt
  (``assistant⏎``), as sampled (an answer starting with whitespace would merge with that
  newline in the template's text tokenized whole); in a turn a later user message
  follows (its history form) such a merged token is refused;
- list-of-parts content is its text parts joined (the template fails on it);
- reasoning of a trained turn (the format has no place for it) is refused, or left out
  with ``reasoning="drop"``; untrained turns' reasoning is dropped as the template drops it.
"""

from __future__ import annotations

from dataclasses import dataclass

from renderers.core.options import Reasoning
from renderers.qwen3 import Qwen3Renderer

__all__ = ["Qwen25Options", "Qwen25Renderer"]


@dataclass(frozen=True, slots=True)
class Qwen25Options:
    """Options of the Qwen2.5 format (its template has no kwargs)."""

    reasoning: Reasoning = "error"
    """What to do with reasoning of a trained turn (the format has no place for it):
    ``"error"`` raises ``ValueError``, ``"drop"`` leaves it out. Reasoning of untrained
    turns is dropped, as the template drops it."""


class Qwen25Renderer(Qwen3Renderer):
    """Renderer and parser for Qwen2.5 Instruct."""

    name = "qwen2.5"
    default_model = "Qwen/Qwen2.5-7B-Instruct"
    model_ids = (
        "Qwen/Qwen2.5-7B-Instruct",
        "Qwen/Qwen2.5-0.5B-Instruct",
        "Qwen/Qwen2.5-1.5B-Instruct",
        "Qwen/Qwen2.5-3B-Instruct",
        "Qwen/Qwen2.5-14B-Instruct",
        "Qwen/Qwen2.5-32B-Instruct",
        "Qwen/Qwen2.5-72B-Instruct",
    )
    tokenizer_source = "Qwen/Qwen3-8B"
    Options = Qwen25Options
    _thinking = False
    _default_system = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant."
    _text_tool_response = True
