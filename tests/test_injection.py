"""Message text that spells control tokens is rendered as ordinary tokens, for every
renderer: system, user and assistant text, reasoning, tool results, tool-call arguments,
tool names, message names and tool declarations holding every control-token string of
the model (``renderer.table.control_tokens``) give the same sequence of control ids as
the same conversation with harmless text, and the same characters in its place.

This deliberately differs from ``apply_chat_template`` (whose tokenizer call turns typed
control strings into control tokens): a user typing ``<|im_end|>`` must not end a turn.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from renderers import Message, Renderer, UnparsedToolCallPart
from tests.test_properties import SPECS, Conversation, Spec, trainable
from tests.training import supervised_or_dropped

spec_param = pytest.mark.parametrize("spec", SPECS, ids=repr)

HARMLESS = "plain words"
HARMLESS_ANSWER = "plain answer"

# Formats whose documented input convention splits an assistant *string* at "</think>"
# (Qwen3, Qwen3.5 and 3.6 without reasoning; DeepSeek-V3.1 on a plain answer), as their
# templates do: the text before it becomes reasoning. That is interpretation by design,
# not injection, so in assistant text (only) these formats get the control strings
# without "</think>".
SPLITS_AT_THINK_END = {"qwen3", "qwen3_thinking_2507", "qwen3.5", "qwen3.6", "deepseek_v3.1"}

# Where a template drops the reasoning of the trained (last) turn, the renderer refuses it
# (the error is asserted by ``trainable``) and the supervised builds below train on the
# turn without it: the template would not have rendered that reasoning in any case.

# Harmony addresses a call to a recipient that ends at whitespace: gpt-oss rejects tool
# names holding whitespace, so there the names carry the text without it.
NAMES_WITHOUT_WHITESPACE = {"gpt_oss"}


def tool_name(spec: Spec, x: str) -> str:
    return "".join(x.split()) if spec.name in NAMES_WITHOUT_WHITESPACE else x


def conversation(
    spec: Spec, x: str, answer: str, *, reasoning: bool
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Messages and tools with ``x`` in every free-text field and ``answer`` as the
    assistants' text, ending with a trained assistant answer."""
    name = tool_name(spec, x)
    tools = [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": x,
                "parameters": {
                    "type": "object",
                    "properties": {"q": {"type": "string", "description": x, "enum": [x]}},
                },
            },
        }
    ]
    think = {"reasoning_content": x} if reasoning and spec.thinking else {}
    # Kimi writes the call's id, not its name: the id Kimi samples names the function.
    call_id = f"functions.{name}:0" if spec.name.startswith("kimi") else "call_1"
    arguments = json.dumps({"q": x, x: [x, 1]}, ensure_ascii=False)
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": x},
        {"role": "user", "content": x, "name": x},
        {
            "role": "assistant",
            "content": answer,
            **think,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "name": name, "content": x},
        {"role": "user", "content": x},
        {"role": "assistant", "content": answer, **think, "name": x},
    ]
    return messages, tools


def _controls(r: Renderer, ids: list[int]) -> list[int]:
    control = r.table.control_ids
    return [t for t in ids if t in control]


def check_ordinary(spec: Spec, x: str, *, reasoning: bool) -> None:
    """``x`` everywhere gives the control ids of harmless text, and its characters."""
    assert "\n" not in x and '"' not in x and "\\" not in x  # verbatim inside JSON too
    r = spec.renderer()
    answer = x
    if spec.name in SPLITS_AT_THINK_END:
        answer = x.replace("</think>", "") or "ok"
    messages, tools = conversation(spec, x, answer, reasoning=reasoning)
    safe_messages, safe_tools = conversation(spec, HARMLESS, HARMLESS_ANSWER, reasoning=reasoning)

    def trained(messages: list[dict[str, Any]]) -> Conversation:
        return trainable(r, messages, spec.trained_reasoning, repr(spec))

    builds: list[Callable[[list[dict[str, Any]], Any], list[int]]] = [
        lambda m, t: r.build_generation_prompt(m[:-1], t),
        lambda m, t: r.build_generation_prompt(m[:3], t),
        lambda m, t: supervised_or_dropped(r, trained(m), t)[0].tokens.tolist(),
        lambda m, t: supervised_or_dropped(r, trained(m), t, train_on="all_assistant")[
            0
        ].tokens.tolist(),
        lambda m, t: supervised_or_dropped(r, trained(m[:3]), None)[0].tokens.tolist(),
    ]
    for build in builds:
        try:
            expected = build(safe_messages, safe_tools)
        except ValueError as exc:  # a turn the format cannot train, whatever its text
            with pytest.raises(ValueError) as raised:
                build(messages, tools)
            # (Llama 3 and Mistral refuse text beside calls: the same error either way.)
            assert "cannot be trained" in str(exc) or spec.name in ("llama3", "mistral")
            assert "cannot be trained" in str(raised.value) or str(raised.value) == str(exc)
            continue
        got = build(messages, tools)
        assert _controls(r, got) == _controls(r, expected)
        # The same characters where the harmless text was: nothing dropped or altered.
        text = r.decode(expected).replace(tool_name(spec, HARMLESS), tool_name(spec, x))
        text = text.replace(HARMLESS_ANSWER, answer).replace(HARMLESS, x)
        assert r.decode(got) == text


@spec_param
@pytest.mark.parametrize("reasoning", [True, False], ids=["reasoning", "plain"])
def test_every_control_string_at_once_stays_ordinary_text(spec: Spec, reasoning: bool) -> None:
    r = spec.renderer()
    every = "".join(sorted(r.table.control_tokens))
    check_ordinary(spec, every, reasoning=reasoning)
    check_ordinary(spec, f"a {every} b", reasoning=reasoning)


@spec_param
def test_each_format_marker_alone_stays_ordinary_text(spec: Spec) -> None:
    """Text that is exactly one of the markers the format uses (or stops on)."""
    r = spec.renderer()
    structural = r.stream_parser()._structural | set(r.stop_token_ids)
    for token_id in sorted(structural):
        text = r.table.control_text(token_id)
        assert text is not None
        if text == "</think>" and spec.name in SPLITS_AT_THINK_END:
            # Assistant text that is exactly "</think>" is the inline-reasoning convention.
            check_ordinary(spec, text, reasoning=True)
            continue
        check_ordinary(spec, text, reasoning=False)


@spec_param
def test_control_strings_in_unparsed_tool_calls_stay_ordinary_text(spec: Spec) -> None:
    """An unparsed call's raw text is written back as sampled; only the spelled separator
    that split the call's segments (DeepSeek's ``<｜tool▁sep｜>`` and V4's ``｜DSML｜``,
    Kimi's first ``<|tool_call_argument_begin|>``) is written as its token, by design, so
    that parsed messages render back. Every other control string stays text."""
    r = spec.renderer()
    separators = {"<｜tool▁sep｜>", "<|tool_call_argument_begin|>", "｜DSML｜"}
    raw = "".join(t for t in sorted(r.table.control_tokens) if t not in separators)
    for text in (raw, "{not json " + raw):
        messages = [
            {"role": "user", "content": "Go."},
            Message("assistant", [UnparsedToolCallPart(text, "bad", name="f")]),
        ]
        harmless = UnparsedToolCallPart(HARMLESS, "bad", name="f")
        safe = [messages[0], Message("assistant", [harmless])]
        got = r.build_supervised_example(messages).tokens.tolist()
        expected = r.build_supervised_example(safe).tokens.tolist()
        assert _controls(r, got) == _controls(r, expected)
