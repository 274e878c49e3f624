"""DeepSeek-V4.1 against its oracle (tml-renderers 0.2.1 ``DeepSeekV41``, the template and
encoder not being available offline) on the shared corpus, and the format's own behaviour.

Where the oracle differs from the template (tinker-cookbook 0.6.1's
``renderers/deepseek_v4_1.py``, which follows it, as the second opinion), the tests below
say so and assert the difference exactly.
"""

from __future__ import annotations

from typing import Any

import pytest

from renderers import Renderer, Termination, ToolCallPart, UnparsedToolCallPart, get_renderer
from tests.conftest import tokenizer_for
from tests.corpus import CORPUS, Conversation, prompts_of
from tests.one_shot import parsed_both_ways
from tests.tml_oracle import (
    CONFIGS,
    OracleConfig,
    decode,
    expected_example,
    our_items,
    parsed_items,
    prompt_ids,
    template_ids,
    without_reasoning,
)

MODEL = "deepseek-ai/DeepSeek-V4.1-Flash"
V41 = [c for c in CONFIGS if c.name == "deepseek_v4.1"]
CASES = [pytest.param(c, conv, id=f"{c!r}-{conv.id}") for c in V41 for conv in CORPUS]
ANSWERED = [
    pytest.param(c, conv, id=f"{c!r}-{conv.id}")
    for c in V41
    for conv in CORPUS
    if conv.messages[-1]["role"] == "assistant"
]
"""The conversations that end with an answer: a supervised example trains it."""

DSML = "｜DSML｜"
EFFORT = "Reasoning Effort: {} (range 1-100, the higher the value, the more thorough the reasoning)"


def renderer(config: OracleConfig | None = None, **options: Any) -> Renderer:
    base = dict(config.options) if config else {}
    return get_renderer("deepseek_v4.1", tokenizer_for(MODEL), **{**base, **options})


def _messages(config: OracleConfig, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return messages if config.reasoning else without_reasoning(messages)


def _same(text: str) -> str:
    return text


def _oracle_text(config: OracleConfig, messages: list[dict[str, Any]]) -> str:
    return decode(tokenizer_for(MODEL), prompt_ids(config, messages, None))


@pytest.mark.parametrize(("config", "conversation"), CASES)
def test_generation_prompts_equal_the_oracle(
    config: OracleConfig, conversation: Conversation
) -> None:
    r = renderer(config)
    for prompt in prompts_of(conversation):
        messages = _messages(config, prompt)
        expected = prompt_ids(config, messages, conversation.tools)
        assert r.build_generation_prompt(messages, tools=conversation.tools) == expected


@pytest.mark.parametrize(("config", "conversation"), ANSWERED)
def test_supervised_examples_equal_the_oracle(
    config: OracleConfig, conversation: Conversation
) -> None:
    r = renderer(config)
    messages = _messages(config, conversation.messages)
    tokens, weights = expected_example(
        config, tokenizer_for(MODEL), messages, conversation.tools, _same
    )
    example = r.build_supervised_example(messages, tools=conversation.tools)
    assert example.tokens.tolist() == tokens
    assert example.weights.tolist() == weights


@pytest.mark.parametrize(("config", "conversation"), ANSWERED)
def test_parses_of_trained_turns_equal_the_oracle_and_stream_as_they_parse(
    config: OracleConfig, conversation: Conversation
) -> None:
    """The trained completion parses as the oracle parses it, with no issue, and feeding
    it a token at a time gives the same result."""
    r = renderer(config)
    messages = _messages(config, conversation.messages)
    example = r.build_supervised_example(messages, tools=conversation.tools)
    completion = example.tokens[example.weights > 0].tolist()
    result = r.parse_response(completion)
    assert result.termination is Termination.STOP and not result.issues
    parser = r.stream_parser()
    for token in completion:
        parser.feed([token])
    assert parser.finish() == result
    if not result.message.parts:  # the oracle raises on a message without content
        assert conversation.id == "empty_assistant"
        return
    assert our_items(result.message) == parsed_items(
        config, messages[:-1], conversation.tools, completion
    )


# -- where the template and the oracle differ ---------------------------------------------


def test_consecutive_user_messages_are_one_turn_a_blank_line_apart_as_in_the_template() -> None:
    """The template (tinker-cookbook 0.6.1 joins the turn's blocks with ``\\n\\n``) puts a
    blank line between them; the oracle joins them directly."""
    config = V41[0]
    messages = [{"role": "user", "content": "First."}, {"role": "user", "content": "Second."}]
    oracle = _oracle_text(config, messages)
    assert "<｜User｜>First.Second.<｜Assistant｜>" in oracle
    expected = template_ids(
        tokenizer_for(MODEL), oracle.replace("First.Second.", "First.\n\nSecond.")
    )
    assert renderer(config).build_generation_prompt(messages) == expected


# -- the format -----------------------------------------------------------------------------


def _call(id_: str) -> dict[str, Any]:
    return {"id": id_, "type": "function", "function": {"name": "f", "arguments": {"x": 1}}}


@pytest.mark.parametrize(
    "results",
    [["b", "a"], ["b", "unknown", "a"], ["b", None, "a"], ["b", "a", "a"]],
    ids=lambda ids: "-".join(map(str, ids)),
)
def test_tool_results_are_stably_sorted_by_call_as_the_oracle_sorts_them(
    results: list[str | None],
) -> None:
    """A result naming no call of the turn before sorts as the first call."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Go"},
        {"role": "assistant", "content": "", "tool_calls": [_call("a"), _call("b")]},
    ]
    for k, id_ in enumerate(results):
        result: dict[str, Any] = {"role": "tool", "content": f"result {k}"}
        if id_ is not None:
            result["tool_call_id"] = id_
        messages.append(result)
    config = V41[0]
    r = renderer(config)
    assert r.build_generation_prompt(messages) == prompt_ids(config, messages, None)
    assert "\n\n<tool_result>result 0</tool_result><｜Assistant｜>" in r.decode(
        r.build_generation_prompt(messages)
    )


@pytest.mark.parametrize(
    ("effort", "budget"), [("low", 50), ("high", 75), ("max", 100), (1, 1), (100, 100)]
)
def test_thinking_mode_starts_with_the_effort_line_after_a_system_marker(
    effort: str | int, budget: int
) -> None:
    messages = [{"role": "user", "content": "Hi"}]
    config = V41[0]
    oracle = decode(
        tokenizer_for(MODEL), prompt_ids(config, messages, None)
    )  # the default budget, 75
    expected = oracle.replace(EFFORT.format(75), EFFORT.format(budget))
    assert expected.startswith(f"<｜begin▁of▁sentence｜><｜System｜>{EFFORT.format(budget)}\n\n")
    r = renderer(reasoning_effort=effort)
    assert r.decode(r.build_generation_prompt(messages)) == expected
    chat = r.decode(r.build_generation_prompt(messages, thinking_mode="chat"))
    assert chat == "<｜begin▁of▁sentence｜><｜User｜>Hi<｜Assistant｜></think>"


@pytest.mark.parametrize("effort", [0, 101, "medium", 7.5])
def test_an_effort_outside_the_budget_range_is_refused(effort: Any) -> None:
    with pytest.raises(
        (ValueError, TypeError), match=r"^deepseek_v4.1: option reasoning_effort: expected"
    ):
        renderer(reasoning_effort=effort)


@pytest.mark.parametrize("mode", ["thinking", "chat"])
def test_a_later_system_message_is_a_turn_the_assistant_answers(mode: str) -> None:
    """``<｜System｜>`` before it, the transition after it, and earlier reasoning dropped
    as before a user turn (as the oracle writes it)."""
    config = V41[0] if mode == "thinking" else V41[-1]
    r = renderer(config)
    history = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "reasoning_content": "r"},
        {"role": "system", "content": "S2"},
    ]
    if mode == "chat":
        history = without_reasoning(history)
    for messages in (history, [*history, {"role": "user", "content": "q2"}]):
        ids = r.build_generation_prompt(messages)
        assert ids == prompt_ids(config, messages, None)
    opened = "<think>" if mode == "thinking" else "</think>"
    text = r.decode(r.build_generation_prompt(history))
    assert text.endswith(f"</think>a<｜end▁of▁sentence｜><｜System｜>S2<｜Assistant｜>{opened}")
    answered = [*history, {"role": "assistant", "content": "b"}]
    example = r.build_supervised_example(answered)
    trained = r.decode(example.tokens[example.weights > 0].tolist())
    assert trained == ("</think>b" if mode == "thinking" else "b") + "<｜end▁of▁sentence｜>"


def test_calls_are_dsml_invokes_with_v4_1_tag_names() -> None:
    r = renderer()
    arguments = '{"city": "Paris", "days": 3}'
    messages = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": "Checking.",
            "tool_calls": [{"type": "function", "function": {"name": "w", "arguments": arguments}}],
        },
    ]
    example = r.build_supervised_example(messages)
    text = r.decode(example.tokens.tolist())
    assert text.endswith(
        f'</think>Checking.\n\n<{DSML} calls>\n<{DSML} invoke name="w">\n'
        f'<{DSML} parameter name="city" string="true">Paris</{DSML} parameter>\n'
        f'<{DSML} parameter name="days" string="false">3</{DSML} parameter>\n'
        f"</{DSML} invoke>\n</{DSML} calls><｜end▁of▁sentence｜>"
    )
    result = r.parse_response(example.tokens[example.weights > 0].tolist())
    assert result.message.tool_calls == (ToolCallPart("w", arguments),)


def pieces(r: Renderer, text: str) -> list[int]:
    """``text`` as sampled: ``｜DSML｜``, ``<think>`` and ``</think>`` as their tokens."""
    out: list[int] = []
    for k, piece in enumerate(text.split(DSML)):
        if k:
            out.append(r.table.control_id(DSML))
        for j, chunk in enumerate(piece.split("</think>")):
            if j:
                out.append(r.table.control_id("</think>"))
            out += r.table.encode(chunk)
    return out


def test_v4_tag_names_are_not_calls_of_v4_1() -> None:
    """DeepSeek-V4's ``tool_calls`` section, sampled by V4.1, is text with an issue."""
    r = renderer(thinking_mode="chat")
    text = f'\n\n<{DSML}tool_calls>\n<{DSML}invoke name="f">\n</{DSML}invoke>\n</{DSML}tool_calls>'
    result = r.parse_response([*pieces(r, "Hi" + text), r.eos])
    assert not result.message.tool_calls
    assert result.message.content == "Hi" + text
    assert result.termination is Termination.MALFORMED


def test_an_invoke_off_the_grammar_is_kept_verbatim_and_renders_back() -> None:
    r = renderer()
    raw = (
        f'<{DSML} invoke name="f">\n<{DSML} parameter name="n" string="false">not json'
        f"</{DSML} parameter>\n</{DSML} invoke>"
    )
    ids = [*pieces(r, f"</think>\n\n<{DSML} calls>\n{raw}\n</{DSML} calls>"), r.eos]
    part = r.parse_response(ids).message.parts[0]
    assert isinstance(part, UnparsedToolCallPart) and part.raw == raw and part.name == "f"
    example = r.build_supervised_example(
        [{"role": "user", "content": "q"}, {"role": "assistant", "content": [part]}]
    )
    assert example.tokens[example.weights > 0].tolist() == ids


def test_a_system_marker_sampled_ends_the_message() -> None:
    r = renderer(thinking_mode="chat")
    result = r.parse_response([*r.table.encode("Hi"), r.table.control_id("<｜System｜>")])
    assert result.message.content == "Hi"
    assert result.termination is Termination.MALFORMED


def test_a_turn_cut_off_in_a_section_is_closed_for_the_next_prompt() -> None:
    r = renderer()
    prompt = r.build_generation_prompt([{"role": "user", "content": "q"}])
    opened = f'<{DSML} calls>\n<{DSML} invoke name="f">\n<{DSML} parameter name="a" '
    cut = pieces(r, f'</think>\n\n{opened}string="true">x')
    rollout = r.rollout([{"role": "user", "content": "q"}])
    result = rollout.add_completion(cut)
    assert result.termination is Termination.LENGTH
    assert isinstance(result.message.parts[-1], UnparsedToolCallPart)
    after = rollout.add_messages([{"role": "user", "content": "go on"}])
    text = r.decode(after[len(prompt) + len(cut) :])
    closing = f"</{DSML} invoke>\n</{DSML} calls><｜end▁of▁sentence｜>"
    assert text == closing + "<｜User｜>go on<｜Assistant｜><think>"


@pytest.mark.parametrize("kind", ["complete", "malformed", "truncated"])
def test_completions_parse_on_the_one_shot_path_as_fed(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from renderers.bench.workloads import completions
    from renderers.core.dsml import DSMLParser

    r = renderer()
    ids = next(c.ids for c in completions(r, 1000) if c.kind == kind)
    parsed, fed, one_shot = parsed_both_ways(r, DSMLParser, ids, monkeypatch)
    assert parsed == fed
    assert one_shot
    assert len(fed.message.parts) >= 5


def test_empty_arguments_are_one_string_parameter_as_the_cookbook_writes_them() -> None:
    """tinker-cookbook 0.6.1's ``_arguments_dict`` (the encoder's fallback): ``""`` is
    ``{"arguments": ""}``; the oracle refuses it."""
    r = renderer()
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": ""}}
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [call]}]
    text = r.decode(r.build_supervised_example(messages).tokens.tolist())
    assert text.endswith(
        f'<{DSML} invoke name="f">\n<{DSML} parameter name="arguments" string="true">'
        f"</{DSML} parameter>\n</{DSML} invoke>\n</{DSML} calls><｜end▁of▁sentence｜>"
    )
