"""Reasoning written inline in plain text: split it from the content, in batch or streaming.

Many APIs and local models return one string with the reasoning inline. This package
turns it into ordered :class:`~renderers.core.messages.ThinkingPart` /
:class:`~renderers.core.messages.TextPart` parts, so the thinking can be shown to a
person and the clean content passed on::

    split_reasoning("<think>r</think>\\n\\nAnswer")   # [ThinkingPart("r"), TextPart("Answer")]

Styles (``style=``, see :mod:`renderers.text.styles`): ``"auto"`` (``<think>``,
``<thinking …>`` and ``◁think▷`` blocks), ``"think"``, ``"thinking"``, ``"kimi"``,
``"forced"`` (the text starts inside reasoning, as DeepSeek-R1's does), the
reasoning-parser names of vLLM and SGLang (``"deepseek_r1"``, ``"qwen3"``,
``"qwen3_thinking"``, ``"kimi_k2"``), an ``(open, close)`` pair or :class:`TagStyle`
objects.

Rules, the same in batch and streaming (batch is the streaming engine fed one chunk, so
the two agree for every way of splitting the text):

- A block starts at an opening tag and ends at the closing tag of the *same* style (or
  one of its ``implicit_close`` markers, which stay in the content); inside a block other
  tags are plain reasoning text. A closing tag with no open block is kept in the content
  verbatim and reported in :attr:`ReasoningSplitter.issues`.
- Reasoning text is the block's text without leading and trailing whitespace. A block
  without reasoning text yields no part, unless it is unterminated.
- Attribute styles (``<thinking …>``, :mod:`renderers.text.attribute_tag`): the
  ``thought`` attribute is reasoning text (with a body as well: the thought, a blank
  line, the body); the other attributes are kept as written, in source order, as the
  part's ``attributes``. :class:`Thought` (:func:`thoughts`) is the typed view:
  ``thought_type`` (no default) and ``confidence`` (a number, 0.5 when absent).
- An unterminated block (or a committed ``<thinking`` tag cut off) at the end of the text
  is a thinking part marked ``incomplete``; a cut-off tag prefix (``<thi``) is content.
- Forced styles: the text is inside a block from its first character until the first
  closing tag; later blocks are recognised normally. Empty input yields no parts.
- Tool calls written as text (``tool_calls=True``): ``<tool_call>{"name": …,
  "arguments": …}</tool_call>`` outside reasoning is taken out of the content as a
  :class:`~renderers.core.messages.ToolCallPart` (arguments as written), or kept whole as
  an :class:`~renderers.core.messages.UnparsedToolCallPart` when it does not parse or is
  cut off. By default such a call stays in the content.
- Whitespace (``whitespace=``, :mod:`renderers.text.whitespace`): by default
  (``"tidy"``) a block at the start or the end of the content takes the whitespace
  between it and that edge along; between content a gap leaves the whitespace run with
  the most line breaks. ``"keep"`` leaves the text on both sides of a block exactly as
  written (``"a <think>x</think> b"`` gives ``"a  b"``). Text without blocks comes back
  identical.

Streaming (:class:`ReasoningSplitter`): ``feed(chunk)`` returns the events the chunk made
(:class:`~renderers.core.assembly.PartStarted`, :class:`~renderers.core.assembly.TextDelta`,
:class:`~renderers.core.assembly.PartFinished` with the final part). Text is emitted as
soon as it cannot change: held back are a possible tag prefix (at most one tag's length),
an undecided ``<thinking …`` tag, and whitespace at the end of the reasoning, or of the
content in ``"tidy"`` mode, until the next character decides it. Work is linear in the
input.

``"auto"`` in streaming cannot recognise forced reasoning — that needs to see a
``</think>`` that may come megabytes later, after the text was already emitted as
content — so it treats such a ``</think>`` as stray: it stays in the content and
:attr:`ReasoningSplitter.issues` names the forced styles.

Modules: :mod:`~renderers.text.styles` (tag styles and names),
:mod:`~renderers.text.tags` (finding tags in text that may stop mid-tag),
:mod:`~renderers.text.attribute_tag` (``<thinking …>`` opening tags),
:mod:`~renderers.text.entities` (character references),
:mod:`~renderers.text.whitespace` (what whitespace stays),
:mod:`~renderers.text.events` (parts and events), :mod:`~renderers.text.splitter` (the
engine), :mod:`~renderers.text.thought` (typed attributes),
:mod:`~renderers.text.thought_stream` (an agent loop's ``thought-stream``,
``content-delta`` and ``content-complete`` events),
:mod:`~renderers.text.openai_view` (OpenAI's ``content``/``reasoning_content``).
"""

from __future__ import annotations

from renderers.text.entities import decode_entities
from renderers.text.events import ReasoningPart
from renderers.text.openai_view import openai_fields, split_reasoning_openai
from renderers.text.splitter import ReasoningSplitter, iter_split, split_reasoning
from renderers.text.styles import (
    KIMI,
    STYLES,
    THINK,
    THINK_FORCED,
    THINK_KIMI_K2,
    THINKING_TAG,
    TOOL_CALL_TAG,
    StyleSpec,
    TagStyle,
    resolve_style,
)
from renderers.text.thought import DEFAULT_CONFIDENCE, Thought, confidence, thought_type, thoughts
from renderers.text.thought_stream import (
    AgentEvent,
    ContentCompleteEvent,
    ContentDeltaEvent,
    ThoughtStream,
    ThoughtStreamEvent,
    iter_thought_events,
)
from renderers.text.whitespace import WHITESPACE, Whitespace

__all__ = [
    "DEFAULT_CONFIDENCE",
    "KIMI",
    "STYLES",
    "THINK",
    "THINKING_TAG",
    "THINK_FORCED",
    "THINK_KIMI_K2",
    "TOOL_CALL_TAG",
    "WHITESPACE",
    "AgentEvent",
    "ContentCompleteEvent",
    "ContentDeltaEvent",
    "ReasoningPart",
    "ReasoningSplitter",
    "StyleSpec",
    "TagStyle",
    "Thought",
    "ThoughtStream",
    "ThoughtStreamEvent",
    "Whitespace",
    "confidence",
    "decode_entities",
    "iter_split",
    "iter_thought_events",
    "openai_fields",
    "resolve_style",
    "split_reasoning",
    "split_reasoning_openai",
    "thought_type",
    "thoughts",
]
