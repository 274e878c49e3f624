"""A tool call drafted inside open reasoning is reasoning, not a call (issue 13 item 3).

The closing think marker is what ends reasoning: the draft's text (control tokens spelled
out) stays in the thinking part and one issue reports it, as inference servers' reasoning
parsers keep it. Completions are given as text and encoded with the model's control
tokens (``Renderer.parse_text``), so the ids are those a model samples.
"""

from __future__ import annotations

import pytest

from renderers import ParseResult, TextPart, ThinkingPart, get_renderer
from renderers.core.parsing import sampled_text_ids
from tests.conftest import tokenizer_for

QWEN_DRAFT = '<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
DEEPSEEK_DRAFT = (
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>f\n```json\n{}\n```"
    "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
)
V31_DRAFT = (
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{}"
    "<｜tool▁call▁end｜><｜tool▁calls▁end｜>"
)

# (renderer name, model id, generic, options, completion text, draft spelled in the reasoning)
CASES = [
    (
        "qwen3",
        "Qwen/Qwen3-8B",
        False,
        {},
        f"<think>\nplan: {QWEN_DRAFT}\nok\n</think>\n\nDone.<|im_end|>",
        QWEN_DRAFT,
    ),
    (
        "template",
        "Qwen/Qwen3-8B",
        True,
        {},
        f"<think>\nplan: {QWEN_DRAFT}\nok\n</think>\n\nDone.<|im_end|>",
        QWEN_DRAFT,
    ),
    (
        "qwen3.5",
        "Qwen/Qwen3.5-27B",
        False,
        {},
        "plan: <tool_call>\n<function=f>\n</function>\n</tool_call>\nok\n</think>\n\n"
        "Done.<|im_end|>",
        "<tool_call>\n<function=f>\n</function>\n</tool_call>",
    ),
    (
        "deepseek_v3",
        "deepseek-ai/DeepSeek-V3",
        False,
        {},
        f"<think>\nplan: {DEEPSEEK_DRAFT}\nok\n</think>\n\nDone.<｜end▁of▁sentence｜>",
        DEEPSEEK_DRAFT,
    ),
    (
        "deepseek_v3.1",
        "deepseek-ai/DeepSeek-V3.1",
        False,
        {"thinking": True},
        f"plan: {V31_DRAFT}\nok</think>Done.<｜end▁of▁sentence｜>",
        V31_DRAFT,
    ),
]


def _parse(
    name: str, model_id: str, generic: bool, options: dict[str, object], text: str
) -> ParseResult:
    target = model_id if generic else name
    r = get_renderer(target, tokenizer_for(model_id), generic=generic, **options)
    result = r.parse_text(text)
    parser = r.stream_parser()
    for t in sampled_text_ids(r.table, text):
        parser.feed([t])
    assert parser.finish() == result
    return result


@pytest.mark.parametrize(
    ("name", "model_id", "generic", "options", "text", "draft"),
    CASES,
    ids=[c[0] for c in CASES],
)
def test_a_call_drafted_in_open_reasoning_stays_reasoning(
    name: str, model_id: str, generic: bool, options: dict[str, object], text: str, draft: str
) -> None:
    result = _parse(name, model_id, generic, options, text)
    parts = result.message.parts
    assert [type(p) for p in parts] == [ThinkingPart, TextPart], parts
    assert draft in parts[0].text
    assert parts[0].text.startswith("plan: ") and parts[0].text.endswith("ok")
    assert parts[1].text == "Done."
    assert result.message.tool_calls == ()
    assert len(result.issues) == 1
    assert "drafted inside open reasoning" in result.issues[0].message
