"""Multi-turn rollouts keep the exact sampled ids: the next prompt is the previous prompt
and the sampled completion byte for byte, then what the template renders after the turn.

Expected continuations come from the official template: the ids it renders for the whole
conversation, after the sampled assistant turn's end token.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from renderers import Message, TextPart, ThinkingPart, ToolCallPart, get_renderer
from tests.conftest import tokenizer_for
from tests.oracle import hf_template_ids
from tests.tml_oracle import CONFIGS, prompt_ids

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
START = [
    {"role": "system", "content": "You are a weather bot."},
    {"role": "user", "content": "Weather in Paris and Rome?"},
]


@pytest.fixture(scope="module")
def qwen3() -> Any:
    return get_renderer("qwen3", tokenizer_for("Qwen/Qwen3-8B"))


def pieces(r: Any, *items: str | list[int]) -> list[int]:
    """Completion ids: control-token names, ordinary text, or explicit id lists (to sample
    a tokenization that differs from what encoding the text gives)."""
    out: list[int] = []
    for item in items:
        if isinstance(item, list):
            out += item
        elif item in r.table.control_tokens:
            out.append(r.table.control_id(item))
        else:
            out += r.table.encode(item)
    return out


def split_tokens(r: Any, text: str) -> list[int]:
    """``text`` sampled one character per token: a tokenization encoding never gives."""
    return [t for ch in text for t in r.table.encode(ch)]


def qwen3_completion(r: Any) -> list[int]:
    # Compact JSON and a per-character tokenization: a re-render would give other ids.
    return pieces(
        r,
        "<think>",
        "\nI need the weather for two cities.\n",
        "</think>",
        "\n\n",
        split_tokens(r, "Checking"),
        ".\n",
        "<tool_call>",
        '\n{"name":"get_weather","arguments":{"city":"Paris"}}\n',
        "</tool_call>",
        "<|im_end|>",
    )


def test_next_prompt_keeps_the_sampled_ids_and_renders_the_tool_result_like_the_template(
    qwen3: Any,
) -> None:
    tok = qwen3.tokenizer
    rollout = qwen3.rollout(START, tools=TOOLS)
    prompt = rollout.prompt_ids
    assert prompt == hf_template_ids(tok, START, TOOLS, add_generation_prompt=True)
    completion = qwen3_completion(qwen3)
    result = rollout.add_completion(completion)
    assert result.message.tool_calls == (ToolCallPart("get_weather", '{"city":"Paris"}'),)
    tool = {"role": "tool", "tool_call_id": "c1", "content": '{"temp": 21}'}
    next_prompt = rollout.add_messages([tool])
    assert next_prompt[: len(prompt) + len(completion)] == prompt + completion
    # What the template writes after the assistant turn: from its full rendering.
    parsed = result.message.to_openai()
    full = hf_template_ids(tok, [*START, parsed, tool], TOOLS, add_generation_prompt=True)
    im_end = qwen3.im_end
    after_turn = [k for k, t in enumerate(full) if t == im_end][2]  # system, user, assistant
    assert next_prompt[len(prompt) + len(completion) :] == full[after_turn + 1 :]
    # Re-rendering the conversation does not reproduce what the model saw.
    assert qwen3.build_generation_prompt([*START, result.message, tool], tools=TOOLS) != next_prompt
    assert not qwen3.extension_property.holds


def test_loss_mask_covers_exactly_the_sampled_ids_of_every_turn(qwen3: Any) -> None:
    rollout = qwen3.rollout(START, tools=TOOLS)
    lengths = []
    first = qwen3_completion(qwen3)
    rollout.add_completion(first)
    rollout.add_messages([{"role": "tool", "tool_call_id": "c1", "content": "21C"}])
    second = pieces(qwen3, "<think>", "\nDone.\n", "</think>", "\n\nParis: 21C.", "<|im_end|>")
    before_second = len(rollout.prompt_ids)
    rollout.add_completion(second)
    lengths = (len(first), len(second))
    tokens, weights = rollout.tokens, rollout.weights
    assert tokens.dtype == np.int64 and weights.shape == tokens.shape
    expected = np.zeros(len(tokens), dtype=np.float32)
    start1 = len(qwen3.build_generation_prompt(START, tools=TOOLS))
    expected[start1 : start1 + lengths[0]] = 1
    expected[before_second : before_second + lengths[1]] = 1
    assert (weights == expected).all()
    assert tokens[before_second:].tolist() == second


@pytest.mark.parametrize(
    ("completion", "closing"),
    [
        (["Paris is sunny."], ["<|im_end|>"]),  # the sampler dropped the stop token
        (["<think>", "\nStill thinking about"], ["</think>", "<|im_end|>"]),
        (
            ["Let me check.\n", "<tool_call>", '\n{"name": "get_weather", "argu'],
            ["</tool_call>", "<|im_end|>"],
        ),
    ],
    ids=["stop-token-dropped", "cut-in-thinking", "cut-in-tool-call"],
)
def test_turns_that_stopped_without_stop_token_are_closed(
    qwen3: Any, completion: list[str], closing: list[str]
) -> None:
    prompt = qwen3.build_generation_prompt(START, tools=TOOLS)
    ids = pieces(qwen3, *completion)
    user = {"role": "user", "content": "Go on."}
    got = qwen3.next_turn_prompt(prompt, ids, [user], tools=TOOLS)
    closing_ids = pieces(qwen3, *closing)
    assert got[: len(prompt) + len(ids) + len(closing_ids)] == prompt + ids + closing_ids
    # Then the template's own text after a turn, the user turn and the generation prompt.
    tail = hf_template_ids(qwen3.tokenizer, [user], add_generation_prompt=True)
    assert got[len(prompt) + len(ids) + len(closing_ids) :] == pieces(qwen3, "\n") + tail


def test_tokens_after_the_stop_token_are_not_kept(qwen3: Any) -> None:
    prompt = qwen3.build_generation_prompt(START)
    ids = pieces(qwen3, "Sunny.", "<|im_end|>", "\n", "<|im_start|>", "user\nextra")
    got = qwen3.next_turn_prompt(prompt, ids, [{"role": "user", "content": "Thanks"}])
    stop = ids.index(qwen3.im_end)
    assert got[: len(prompt) + stop + 1] == prompt + ids[: stop + 1]
    assert got[len(prompt) + stop + 1 :] == pieces(qwen3, "\n") + hf_template_ids(
        qwen3.tokenizer, [{"role": "user", "content": "Thanks"}], add_generation_prompt=True
    )


def test_stateless_form_equals_the_rollout(qwen3: Any) -> None:
    rollout = qwen3.rollout(START, tools=TOOLS)
    prompt = rollout.prompt_ids
    completion = qwen3_completion(qwen3)
    rollout.add_completion(completion)
    tool = [{"role": "tool", "tool_call_id": "c1", "content": "21C"}]
    assert rollout.add_messages(tool) == qwen3.next_turn_prompt(prompt, completion, tool, TOOLS)
    assert rollout.prompt_ids == qwen3.next_turn_prompt(
        prompt, completion, tool, TOOLS, messages=START
    )


def test_rollout_enforces_turn_order(qwen3: Any) -> None:
    rollout = qwen3.rollout(START)
    with pytest.raises(RuntimeError, match="add_completion"):
        rollout.add_messages([{"role": "user", "content": "x"}])
    rollout.add_completion(pieces(qwen3, "Hi.", "<|im_end|>"))
    with pytest.raises(RuntimeError, match="twice"):
        rollout.add_completion(pieces(qwen3, "Hi.", "<|im_end|>"))
    with pytest.raises(RuntimeError, match="waits for new messages"):
        _ = rollout.prompt_ids


def test_parsed_messages_are_kept_in_the_history(qwen3: Any) -> None:
    rollout = qwen3.rollout(START)
    rollout.add_completion(pieces(qwen3, "<think>", "\nr\n", "</think>", "\n\nA.", "<|im_end|>"))
    assert rollout.messages[-1] == Message("assistant", [ThinkingPart("r"), TextPart("A.")])


# -- gpt-oss ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def gpt_oss() -> Any:
    return get_renderer("gpt_oss", tokenizer_for("openai/gpt-oss-20b"), date="2025-06-28")


def harmony(r: Any, text: str) -> list[int]:
    """Ids of Harmony text as the model samples it (control-token spellings are tokens)."""
    ids: list[int] = r.tokenizer.encode(text, add_special_tokens=False)
    return ids


GPT_OSS_CALL = (
    "<|channel|>analysis<|message|>I need the weather.<|end|>"
    "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
    '<|message|>{"city":"Paris"}<|call|>'
)


@pytest.mark.usefixtures("fixed_clock")
def test_gpt_oss_tool_call_turn_continues_like_the_template(gpt_oss: Any) -> None:
    tok = gpt_oss.tokenizer
    rollout = gpt_oss.rollout(START, tools=TOOLS)
    prompt = rollout.prompt_ids
    assert prompt == hf_template_ids(tok, START, TOOLS, add_generation_prompt=True)
    completion = harmony(gpt_oss, GPT_OSS_CALL)
    result = rollout.add_completion(completion)
    assert [c.name for c in result.message.tool_calls] == ["get_weather"]
    tool = {"role": "tool", "content": '{"temp": 21}'}
    next_prompt = rollout.add_messages([tool])
    assert next_prompt[: len(prompt) + len(completion)] == prompt + completion
    call = {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}
    full = hf_template_ids(
        tok,
        [*START, {"role": "assistant", "content": "", "tool_calls": [call]}, tool],
        TOOLS,
        add_generation_prompt=True,
    )
    after_call = full.index(gpt_oss.tokens.call) + 1
    assert next_prompt[len(prompt) + len(completion) :] == full[after_call:]
    # The model sampled the recipient after the channel; history writes it before.
    assert not gpt_oss.extension_property.holds


@pytest.mark.usefixtures("fixed_clock")
def test_gpt_oss_final_answer_is_closed_with_end_like_history(gpt_oss: Any) -> None:
    tok = gpt_oss.tokenizer
    rollout = gpt_oss.rollout(START)
    prompt = rollout.prompt_ids
    completion = harmony(gpt_oss, "<|channel|>final<|message|>Sunny, 21C.<|return|>")
    rollout.add_completion(completion)
    user = {"role": "user", "content": "Thanks!"}
    next_prompt = rollout.add_messages([user])
    kept = len(prompt) + len(completion) - 1
    assert next_prompt[:kept] == prompt + completion[:-1]
    assert next_prompt[kept] == gpt_oss.tokens.end
    full = hf_template_ids(
        tok,
        [*START, {"role": "assistant", "content": "Sunny, 21C."}, user],
        add_generation_prompt=True,
    )
    assert next_prompt == full  # here the template's history is exactly what was sampled
    weights = rollout.weights.tolist()
    assert weights[len(prompt) : kept] == [1.0] * (len(completion) - 1)
    assert weights[kept:] == [0.0] * (len(next_prompt) - kept)


@pytest.mark.parametrize(
    ("completion", "closing"),
    [
        ("<|channel|>final<|message|>Sunny", "<|end|>"),
        ("<|channel|>analysis<|message|>Thinking", "<|end|>"),
        (
            '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"ci',
            "<|call|>",
        ),
    ],
    ids=["cut-in-final", "cut-in-analysis", "cut-in-call"],
)
def test_gpt_oss_cut_off_turns_are_closed(gpt_oss: Any, completion: str, closing: str) -> None:
    prompt = gpt_oss.build_generation_prompt(START, tools=TOOLS)
    ids = harmony(gpt_oss, completion)
    got = gpt_oss.next_turn_prompt(prompt, ids, [{"role": "user", "content": "Go on."}], TOOLS)
    assert got[: len(prompt) + len(ids) + 1] == prompt + ids + harmony(gpt_oss, closing)
    assert gpt_oss.decode(got[len(prompt) + len(ids) + 1 :]) == (
        "<|start|>user<|message|>Go on.<|end|><|start|>assistant"
    )


# -- DeepSeek-V3.1 ------------------------------------------------------------------------


def _template_suffix(full: list[int], prompt_len: int, end_id: int) -> list[int]:
    """What the template writes after the sampled turn: everything after the first end
    token of that turn (the turn starts where the generation prompt ended)."""
    return full[full.index(end_id, prompt_len) + 1 :]


def test_deepseek_v31_tool_turn_continues_like_the_template() -> None:
    from tests.test_deepseek_v3 import V31, oracle

    r = get_renderer("deepseek_v3.1", tokenizer_for(V31))
    rollout = r.rollout(START, tools=TOOLS)
    prompt = rollout.prompt_ids
    assert prompt == oracle(V31, START, True)
    completion = harmony(
        r,
        "Checking.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>"
        '{"city":"Paris"}<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>',
    )
    result = rollout.add_completion(completion)
    assert [(c.name, c.arguments) for c in result.message.tool_calls] == [
        ("get_weather", '{"city":"Paris"}')
    ]
    tool = {"role": "tool", "tool_call_id": "c1", "content": '{"temp": 21}'}
    next_prompt = rollout.add_messages([tool])
    assert next_prompt[: len(prompt) + len(completion)] == prompt + completion
    full = oracle(V31, [*START, result.message.to_openai(), tool], True)
    assert next_prompt[len(prompt) + len(completion) :] == _template_suffix(
        full, len(prompt), r.eos
    )


def test_deepseek_v31_thinking_completions_start_where_the_prompt_left_them() -> None:
    from tests.test_deepseek_v3 import V31, oracle

    r = get_renderer("deepseek_v3.1", tokenizer_for(V31), thinking=True)
    rollout = r.rollout(START, tools=TOOLS)
    assert rollout.prompt_ids[-1] == r.think  # the completion starts inside reasoning
    first = rollout.add_completion(
        harmony(
            r,
            "Need data.</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather"
            '<｜tool▁sep｜>{"city":"Rome"}<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>',
        )
    )
    assert first.message.thinking == "Need data."
    tool = {"role": "tool", "tool_call_id": "c1", "content": "sunny"}
    prompt = rollout.add_messages([tool])
    assert prompt[-1] == r.output_end  # after tool outputs the template adds nothing
    second = rollout.add_completion(harmony(r, "Rome is sunny.<｜end▁of▁sentence｜>"))
    assert second.message.content == "Rome is sunny."  # not reasoning: no <think> opened
    user = {"role": "user", "content": "Thanks"}
    final = rollout.add_messages([user])
    assert r.decode(final).endswith("<｜User｜>Thanks<｜Assistant｜><think>")
    assert oracle(V31, [user], True, thinking=True)[-3:] == final[-3:]


@pytest.mark.parametrize(
    ("completion", "closing"),
    [
        ("Still thinking", "</think><｜end▁of▁sentence｜>"),
        (
            'Plan.</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{"ci',
            "<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜>",
        ),
        (
            "Plan.</think><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{}"
            "<｜tool▁call▁end｜>",
            "<｜tool▁calls▁end｜><｜end▁of▁sentence｜>",
        ),
        ("Plan.</think>Done.", "<｜end▁of▁sentence｜>"),
    ],
    ids=["cut-in-thinking", "cut-in-call", "cut-between-calls", "stop-token-dropped"],
)
def test_deepseek_v31_cut_off_turns_are_closed(completion: str, closing: str) -> None:
    r = get_renderer("deepseek_v3.1", tokenizer_for("deepseek-ai/DeepSeek-V3.1"), thinking=True)
    prompt = r.build_generation_prompt(START, tools=TOOLS)
    ids = harmony(r, completion)
    got = r.next_turn_prompt(prompt, ids, [{"role": "user", "content": "Go on."}], TOOLS)
    closing_ids = harmony(r, closing)
    assert got[: len(prompt) + len(ids) + len(closing_ids)] == prompt + ids + closing_ids
    assert r.decode(got[len(prompt) + len(ids) + len(closing_ids) :]) == (
        "<｜User｜>Go on.<｜Assistant｜><think>"
    )


# -- Kimi-K2 --------------------------------------------------------------------------------


KIMI_CALL = (
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:{idx}"
    '<|tool_call_argument_begin|>{{"city": "Paris"}}<|tool_call_end|><|tool_calls_section_end|>'
    "<|im_end|>"
)


@pytest.mark.parametrize("variant_id", ["instruct", "thinking"])
def test_kimi_tool_turn_continues_like_the_template(variant_id: str) -> None:
    from tests.test_kimi_k2 import K2, K2_THINKING

    variant = K2 if variant_id == "instruct" else K2_THINKING
    r = variant.renderer
    rollout = r.rollout(START, tools=TOOLS)
    prompt = rollout.prompt_ids
    assert prompt == variant.template_ids(START, TOOLS, True)
    opening = "<think>I should check.</think>" if variant.thinking else ""
    completion = harmony(r, opening + "Checking." + KIMI_CALL.format(idx=0))
    result = rollout.add_completion(completion)
    assert [c.id for c in result.message.tool_calls] == ["functions.get_weather:0"]
    tool = {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "21C"}
    next_prompt = rollout.add_messages([tool])
    assert next_prompt[: len(prompt) + len(completion)] == prompt + completion
    call = {
        "id": "functions.get_weather:0",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
    }
    full = variant.template_ids(
        [*START, {"role": "assistant", "content": "Checking.", "tool_calls": [call]}, tool],
        TOOLS,
        True,
    )
    assert next_prompt[len(prompt) + len(completion) :] == _template_suffix(
        full, len(prompt), r.im_end
    )


@pytest.mark.parametrize(
    "variant_id", ["instruct", "thinking", "instruct_numbered", "thinking_numbered"]
)
def test_kimi_call_ids_continue_without_the_conversation(variant_id: str) -> None:
    """Stateless, the renderer infers what its ids need from the prompt: numbered ids count
    the calls the prompt holds (K2-Thinking's sampled call is the third of the
    conversation), the caller's ids need nothing. The tool result is headed as with the
    whole conversation, and as the template heads it. (Arguments as dicts: K2-Instruct's
    template JSON-quotes a string again.)"""
    from tests.test_kimi_k2 import VARIANTS

    variant = next(v for v in VARIANTS if v.id == variant_id)
    r = variant.renderer
    earlier = [
        {
            "id": f"functions.get_weather:{k}",
            "type": "function",
            "function": {"name": "get_weather", "arguments": {"city": "Oslo"}},
        }
        for k in range(2)
    ]
    history = [
        *START,
        {"role": "assistant", "content": "", "tool_calls": earlier},
        {"role": "tool", "tool_call_id": "functions.get_weather:1", "content": "cold"},
        {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "cold"},
        {"role": "user", "content": "And Paris?"},
    ]
    prompt = r.build_generation_prompt(history, tools=TOOLS)
    assert prompt == variant.template_ids(history, TOOLS, True)
    opening = "<think></think>" if variant.thinking else ""
    completion = harmony(r, opening + KIMI_CALL.format(idx=2))
    tool = {"role": "tool", "tool_call_id": "functions.get_weather:2", "content": "21C"}
    got = r.next_turn_prompt(prompt, completion, [tool], TOOLS)
    assert got == r.next_turn_prompt(prompt, completion, [tool], TOOLS, messages=history)
    sampled = {**earlier[0], "id": "functions.get_weather:2"}
    sampled["function"] = {**sampled["function"], "arguments": {"city": "Paris"}}
    full = [*history, {"role": "assistant", "content": "", "tool_calls": [sampled]}, tool]
    result = variant.template_text(full, TOOLS, True).rsplit("<|im_system|>", 1)[1]
    assert r.decode(got[len(prompt) + len(completion) :]).startswith("<|im_system|>" + result)
    # K2-Instruct's template numbers the calls of each message: the sampled call is its
    # message's first (the rollout keeps the sampled ids).
    numbered_per_message = variant_id == "instruct_numbered"
    answered = "functions.get_weather:0" if numbered_per_message else tool["tool_call_id"]
    assert f"## Return of {answered}" in result


@pytest.mark.parametrize(
    ("completion", "closing"),
    [
        ("<think>Still thinking", "</think><|im_end|>"),
        (
            "<think>x</think><|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
            '<|tool_call_argument_begin|>{"a',
            "<|tool_call_end|><|tool_calls_section_end|><|im_end|>",
        ),
        (
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
            "<|tool_call_argument_begin|>{}<|tool_call_end|>",
            "<|tool_calls_section_end|><|im_end|>",
        ),
    ],
    ids=["cut-in-thinking", "cut-in-call", "cut-between-calls"],
)
def test_kimi_cut_off_turns_are_closed(completion: str, closing: str) -> None:
    from tests.test_kimi_k2 import K2_THINKING

    r = K2_THINKING.renderer
    prompt = r.build_generation_prompt(START, tools=TOOLS)
    ids = harmony(r, completion)
    got = r.next_turn_prompt(prompt, ids, [{"role": "user", "content": "Go on."}], TOOLS)
    closing_ids = harmony(r, closing)
    assert got[: len(prompt) + len(ids) + len(closing_ids)] == prompt + ids + closing_ids


@pytest.mark.parametrize(
    "name", ["qwen3", "deepseek_v3", "deepseek_v3.1", "kimi_k2", "kimi_k2_thinking", "gpt_oss"]
)
def test_every_renderer_reports_why_rerendering_is_not_an_extension(name: str) -> None:
    from renderers.registry import renderer_class

    r = get_renderer(name, tokenizer_for(renderer_class(name).default_model))
    report = r.extension_property
    assert report.holds is False
    assert "re-tokenized" in report.explanation or "re-serialized" in report.explanation


# -- the 2026 families (oracle: tml-renderers; Kimi-K2.5: Moonshot's template) -------------


# The first oracle configuration of each renderer (its default options, Kimi-K2.5's with the
# oracle's JSON tool declaration).
_FIRST_CONFIGS = list({c.name: c for c in reversed(CONFIGS)}.values())


@pytest.mark.parametrize("config", _FIRST_CONFIGS, ids=repr)
def test_2026_families_keep_sampled_ids_and_continue_like_the_oracle(config: Any) -> None:
    """A sampled call turn, with a tokenization encoding would not give, is kept byte for
    byte; the tool result and the next generation prompt are what the oracle renders after
    that turn's stop token; a turn cut off inside its reasoning is closed first."""
    r = get_renderer(config.name, tokenizer_for(config.model_id), **config.options)

    def oracle(messages: list[dict[str, Any]]) -> list[int]:
        if config.name == "kimi_k2.5":
            from tests import test_kimi_k2_5 as k25

            return k25.official_ids(k25.official_text(config, messages, TOOLS, True))
        return prompt_ids(config, messages, TOOLS)

    rollout = r.rollout(START, tools=TOOLS)
    prompt = rollout.prompt_ids
    assert prompt == oracle(START)
    call = {"id": "functions.get_weather:0", "type": "function"}
    call["function"] = {"name": "get_weather", "arguments": {"city": "Paris"}}
    answer = {
        "role": "assistant",
        "content": "Checking.",
        "reasoning_content": "Need the weather.",
        "tool_calls": [call],
    }
    example = r.build_supervised_example([*START, answer], tools=TOOLS)
    sampled = example.tokens[example.weights > 0].tolist()
    checking = r.table.encode("Checking")
    k = next(i for i in range(len(sampled)) if sampled[i : i + len(checking)] == checking)
    completion = [*sampled[:k], *split_tokens(r, "Checking"), *sampled[k + len(checking) :]]
    result = rollout.add_completion(completion)
    assert result.message.thinking == "Need the weather."
    assert [c.name for c in result.message.tool_calls] == ["get_weather"]
    tool = {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "21C"}
    tool["name"] = "get_weather"
    next_prompt = rollout.add_messages([tool])
    assert next_prompt[: len(prompt) + len(completion)] == prompt + completion
    full = oracle([*START, answer, tool])
    # The call turn's stop (GLM ends a call turn with <|observation|>, an answer <|user|>).
    call_stop = completion[-1]
    assert call_stop in r.stop_token_ids
    end = [i for i, t in enumerate(full) if t == call_stop][prompt.count(call_stop)]
    assert next_prompt[len(prompt) + len(completion) :] == full[end + 1 :]
    stop = r.stop_token_ids[0]
    # Cut off inside the reasoning: the next prompt closes it, then the turn.
    cut = r.table.encode("Still thinking")
    closed = r.next_turn_prompt(prompt, cut, [{"role": "user", "content": "Go on."}], TOOLS)
    assert closed[len(prompt) : len(prompt) + len(cut) + 2] == [*cut, r.think_end, stop]
