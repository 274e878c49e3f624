"""A tool call the model made but that cannot be parsed is never invisible (issue 13 item 7).

It is an issue of the parse, counts in ``Message.called_tool`` / ``attempted_tool_calls``,
and ``to_openai()`` reports it as OpenAI reports a call with invalid JSON: the arguments'
text as sampled (the raw call when the format does not set arguments apart) and the name
if readable, else ``""``. Completions are given as text with control tokens spelled out.
"""

from __future__ import annotations

from typing import Any

import pytest

from renderers import Message, Termination, TextPart, UnparsedToolCallPart, get_renderer
from tests.conftest import tokenizer_for

# (renderer, model id, generic, options, completion, name, arguments or None for the raw text)
CASES: list[tuple[str, str, bool, dict[str, Any], str, str, str | None]] = [
    (
        "qwen3",
        "Qwen/Qwen3-8B",
        False,
        {},
        'Sure.\n<tool_call>\n{"name": "f", "arguments": {city: Paris}}\n</tool_call><|im_end|>',
        "f",
        "{city: Paris}",
    ),
    (
        "template",
        "Qwen/Qwen3-8B",
        True,
        {},
        'Sure.\n<tool_call>\n{"name": "f", "arguments": {city: Paris}}\n</tool_call><|im_end|>',
        "f",
        "{city: Paris}",
    ),
    (
        "qwen3",
        "Qwen/Qwen3-8B",
        False,
        {},
        "Sure.\n<tool_call>\nnot json at all\n</tool_call><|im_end|>",
        "",
        None,
    ),
    (
        "kimi_k2",
        "moonshotai/Kimi-K2-Instruct",
        False,
        {},
        "Sure.<|tool_calls_section_begin|><|tool_call_begin|>functions.bad:0"
        '<|tool_call_argument_begin|>{"city": "Beijing"<|tool_call_end|>'
        "<|tool_calls_section_end|><|im_end|>",
        "bad",
        '{"city": "Beijing"',
    ),
    (
        "deepseek_v3.1",
        "deepseek-ai/DeepSeek-V3.1",
        False,
        {},
        "Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{city: Paris}"
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>",
        "f",
        "{city: Paris}",
    ),
    (
        "deepseek_v3",
        "deepseek-ai/DeepSeek-V3",
        False,
        {},
        "Sure.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n"
        "{city: Paris}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>",
        "f",
        "{city: Paris}",
    ),
    (
        "gpt_oss",
        "openai/gpt-oss-20b",
        False,
        {"date": "2025-06-01"},
        "<|channel|>final<|message|>Sure.<|end|><|start|>assistant<|channel|>commentary "
        "to=functions.f <|constrain|>json<|message|>{city: Paris}<|call|>",
        "f",
        "{city: Paris}",
    ),
]


@pytest.mark.parametrize(
    ("name", "model_id", "generic", "options", "text", "call_name", "arguments"),
    CASES,
    ids=[f"{c[0]}-{k}" for k, c in enumerate(CASES)],
)
def test_an_unparsed_call_is_reported_and_in_the_openai_view(
    name: str,
    model_id: str,
    generic: bool,
    options: dict[str, Any],
    text: str,
    call_name: str,
    arguments: str | None,
) -> None:
    target = model_id if generic else name
    r = get_renderer(target, tokenizer_for(model_id), generic=generic, **options)
    result = r.parse_text(text)
    message = result.message
    (call,) = message.attempted_tool_calls
    assert isinstance(call, UnparsedToolCallPart)
    assert message.tool_calls == ()
    assert message.called_tool
    assert result.termination is Termination.MALFORMED
    assert any("tool call not parsed" in issue.message for issue in result.issues)
    openai = message.to_openai()
    assert openai["content"] == "Sure."
    (function,) = [c["function"] for c in openai["tool_calls"]]
    expected = call.raw if arguments is None else arguments
    assert function == {"name": call_name, "arguments": expected}


def test_a_message_without_calls_did_not_call_a_tool() -> None:
    assert not Message("assistant", "Hi.").called_tool
    assert Message("assistant", "Hi.").attempted_tool_calls == ()


def test_unparsed_arguments_survive_to_dict() -> None:
    part = UnparsedToolCallPart("{bad", "invalid JSON", name="f", arguments="{bad")
    message = Message("assistant", [TextPart("x"), part])
    assert Message.from_dict(message.to_dict()) == message
