"""Exact chat-template rendering and token-level parsing for LLM training.

Quick use::

    import renderers
    r = renderers.get_renderer("Qwen/Qwen3-8B")
    prompt_ids = r.build_generation_prompt(messages, tools=tools)
    result = r.parse_response(sampled_ids)
    result.message.parts  # ThinkingPart / TextPart / ToolCallPart, in sampled order
"""

from __future__ import annotations

from renderers.core.loading import load_tokenizer
from renderers.core.messages import (
    Message,
    Part,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    UnparsedToolCallPart,
)
from renderers.core.parsing import (
    Event,
    ParseIssue,
    ParseResult,
    PartFinished,
    PartStarted,
    StreamParser,
    Termination,
    TextDelta,
)
from renderers.core.tokens import TokenTable, token_table
from renderers.example import SupervisedExample
from renderers.registry import get_renderer, renderer_names
from renderers.rendering import Renderer, TrainOn

__all__ = [
    "Event",
    "Message",
    "ParseIssue",
    "ParseResult",
    "Part",
    "PartFinished",
    "PartStarted",
    "Renderer",
    "StreamParser",
    "SupervisedExample",
    "Termination",
    "TextDelta",
    "TextPart",
    "ThinkingPart",
    "TokenTable",
    "ToolCallPart",
    "TrainOn",
    "UnparsedToolCallPart",
    "get_renderer",
    "load_tokenizer",
    "renderer_names",
    "token_table",
]

__version__ = "0.1.0"
