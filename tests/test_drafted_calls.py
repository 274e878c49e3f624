"""A tool call drafted inside open reasoning is reasoning, not a call (issue 13 item 3),
unless ``drafted_calls="call"`` asks for what vLLM's Qwen3 parser makes of it (issue 31
item 7).

The closing think marker is what ends reasoning: the draft's text (control tokens spelled
out) stays in the thinking part and one issue reports it, as inference servers' reasoning
parsers keep it. Completions are given as text and encoded with the model's control
tokens (``Renderer.parse_text``), so the ids are those a model samples.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from renderers import (
    ParseResult,
    Renderer,
    Termination,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    get_renderer,
)
from renderers.core.scanning import sampled_text_ids
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


# -- drafted_calls="call": as vLLM's Qwen3 parser reads them --------------------------------
#
# vLLM's Qwen3 parser (vllm/frontend/processing/parser/qwen3.py at vllm-project/vllm
# 761f197523b7a355e0fff3e76d6d2fda81987ad6, the ``qwen3`` reasoning parser and the Qwen3
# tool parsers) moves from the reasoning state to a tool call at ``<tool_call>``
# (``REASONING_END, TOOL_CALL_START``), back to content at ``</tool_call>``, and drops a
# ``</think>`` met in the content state. The expected parts below are that rule applied
# to each completion: reasoning = the text before the call, the call, content = the text
# after it without the ``</think>``; each with the format's separators removed as for any
# part.

QWEN3_CALL = '<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>'
QWEN35_CALL = "<tool_call>\n<function=f>\n<parameter=x>\n1\n</parameter>\n</function>\n</tool_call>"

# (renderer name, model id, generic, options, completion text, reasoning, content)
SERVER_CASES = [
    (
        "qwen3",
        "Qwen/Qwen3-8B",
        False,
        {},
        f"<think>\nplan: {QWEN3_CALL}\nok\n</think>\n\nDone.<|im_end|>",
        "plan: ",
        "\nok\n\n\nDone.",
    ),
    (
        "qwen3",
        "Qwen/Qwen3-8B",
        False,
        {},
        f"<think>\nI will call f.\n{QWEN3_CALL}<|im_end|>",
        "I will call f.",
        None,
    ),
    (
        "template",
        "Qwen/Qwen3-8B",
        True,
        {},
        f"<think>\nplan: {QWEN3_CALL}\nok\n</think>\n\nDone.<|im_end|>",
        "plan: ",
        "\nok\n\n\nDone.",
    ),
    (
        "qwen3.5",
        "Qwen/Qwen3.5-27B",
        False,
        {},
        f"plan: {QWEN35_CALL}\nok\n</think>\n\nDone.<|im_end|>",
        "plan: ",
        "ok\n\n\nDone.",
    ),
    (
        "qwen3.8",
        "Qwen/Qwen3.8-27B",
        False,
        {},
        f"I will call f.\n{QWEN35_CALL}<|im_end|>",
        "I will call f.",
        None,
    ),
]


def _renderer(name: str, model_id: str, generic: bool, options: dict[str, object]) -> Renderer:
    target = model_id if generic else name
    return get_renderer(target, tokenizer_for(model_id), generic=generic, **options)


def _parsed_every_way(r: Renderer, ids: list[int], **options: object) -> ParseResult:
    """The parse of ``ids`` in one go, token by token and split at every point (equal)."""
    result = r.parse_response(ids, **options)
    one_by_one = r.stream_parser(**options)
    for t in ids:
        one_by_one.feed([t])
    assert one_by_one.finish() == result
    for cut in range(len(ids) + 1):
        parser = r.stream_parser(**options)
        parser.feed(ids[:cut])
        parser.feed(ids[cut:])
        assert parser.finish() == result, cut
    return result


@pytest.mark.parametrize(
    ("name", "model_id", "generic", "options", "text", "reasoning", "content"),
    SERVER_CASES,
    ids=[f"{c[0]}-{k}" for k, c in enumerate(SERVER_CASES)],
)
def test_drafted_calls_call_reads_a_drafted_call_as_the_server_does(
    name: str,
    model_id: str,
    generic: bool,
    options: dict[str, object],
    text: str,
    reasoning: str,
    content: str | None,
) -> None:
    r = _renderer(name, model_id, generic, options)
    ids = sampled_text_ids(r.table, text)
    result = _parsed_every_way(r, ids, drafted_calls="call")
    parts = result.message.parts
    assert parts[0] == ThinkingPart(reasoning)
    assert parts[1] == ToolCallPart("f", '{"x": 1}')
    assert [p.text for p in parts[2:]] == ([] if content is None else [content])
    assert result.issues == ()
    assert result.termination is Termination.STOP
    # The spans tile the completion up to its stop token (the dropped </think> included).
    assert result.spans[0][0] == 0 and result.spans[-1][1] == len(ids) - 1
    assert all(a[1] == b[0] for a, b in itertools.pairwise(result.spans))
    # The default keeps it as reasoning, reported.
    default = r.parse_response(ids)
    assert default.message.tool_calls == ()
    assert "drafted inside open reasoning" in default.issues[0].message


@pytest.mark.parametrize("name", ["qwen3", "qwen3.5"])
def test_drafted_calls_call_keeps_a_later_stray_think_end_as_text(name: str) -> None:
    """Only the closing marker of the block the call ended is dropped; another is kept
    as text, reported, as any marker out of place."""
    model = {"qwen3": "Qwen/Qwen3-8B", "qwen3.5": "Qwen/Qwen3.5-27B"}[name]
    r = _renderer(name, model, False, {})
    call = QWEN3_CALL if name == "qwen3" else QWEN35_CALL
    head = "<think>\n" if name == "qwen3" else ""
    text = f"{head}a {call}b</think>c</think>d<|im_end|>"
    result = _parsed_every_way(r, sampled_text_ids(r.table, text), drafted_calls="call")
    assert result.message.parts[-1].text.endswith("bc</think>d")
    assert [i.message for i in result.issues] == [
        "</think> without an open think block (kept as text)"
    ]


@pytest.mark.parametrize(
    ("target", "model_id", "generic"),
    [
        ("deepseek_v3", "deepseek-ai/DeepSeek-V3", False),
        ("deepseek_v3.1", "deepseek-ai/DeepSeek-V3.1", False),
        ("kimi_k2_thinking", "moonshotai/Kimi-K2-Thinking", False),
    ],
)
def test_drafted_calls_is_an_option_of_the_qwen_formats_only(
    target: str, model_id: str, generic: bool
) -> None:
    """vLLM's DeepSeek reasoning parsers end reasoning only at ``</think>``: those formats
    have no such option."""
    r = _renderer(target, model_id, generic, {})
    with pytest.raises(TypeError, match=r"unknown option.*'drafted_calls'"):
        r.parse_response([], drafted_calls="call")


def test_the_template_renderer_refuses_drafted_calls_for_a_delegated_grammar() -> None:
    r = _renderer("template", "deepseek-ai/DeepSeek-V3", True, {})
    with pytest.raises(ValueError, match="drafted_calls='call' reads Qwen3-style calls"):
        r.parse_response([], drafted_calls="call")


_SOUP_TEXT = st.sampled_from(["plan ", "\n", "\n\n", "<function=f>\n", "</function>\n", "x"])


@pytest.mark.parametrize(
    ("name", "model_id"), [("qwen3", "Qwen/Qwen3-8B"), ("qwen3.5", "Qwen/Qwen3.5-27B")]
)
@given(data=st.data())
def test_drafted_calls_call_streams_as_it_parses(
    name: str, model_id: str, data: st.DataObject
) -> None:
    """Random sequences of the format's markers and text: one shot, token by token and
    in random chunks give one result, and no sampled text is lost but the dropped
    ``</think>``."""
    r = _renderer(name, model_id, False, {})
    markers = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<|im_end|>"]
    pieces = data.draw(st.lists(st.one_of(st.sampled_from(markers), _SOUP_TEXT), max_size=16))
    ids = sampled_text_ids(r.table, "".join(pieces))
    result = r.parse_response(ids, drafted_calls="call")
    parser = r.stream_parser(drafted_calls="call")
    for t in ids:
        parser.feed([t])
    assert parser.finish() == result
    cuts = sorted(data.draw(st.lists(st.integers(0, len(ids)), max_size=4)))
    parser = r.stream_parser(drafted_calls="call")
    previous = 0
    for cut in [*cuts, len(ids)]:
        parser.feed(ids[previous:cut])
        previous = cut
    assert parser.finish() == result
