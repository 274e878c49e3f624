"""Qwen3: rendering parity with the official template, loss weights, parsing, streaming.

Expected ids always come from the official chat template (``tokenizer_config.json`` of
Qwen/Qwen3-8B) applied by transformers and tokenized by the real tokenizer.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

import numpy as np
import pytest

from renderers import (
    Message,
    PartFinished,
    PartStarted,
    Termination,
    TextDelta,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    TrainOn,
    UnparsedToolCallPart,
)
from renderers.qwen3 import Qwen3Renderer
from tests.corpus import CORPUS, Conversation, prompts_of
from tests.one_shot import parsed_both_ways
from tests.oracle import hf_template_ids
from tests.training import supervised_or_dropped

# Entries whose text spells control tokens: the template turns them into control tokens,
# we deliberately do not (tested separately below).
PARITY = [c for c in CORPUS if "adversarial" not in c.tags]


@pytest.fixture(scope="module")
def qwen3(qwen3_tokenizer: Any) -> Qwen3Renderer:
    return Qwen3Renderer(qwen3_tokenizer)


def template_input(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as the official template understands it: list content joined
    into a string (the template would render a list as ''), thinking parts moved to
    ``reasoning_content``."""
    out = []
    for m in messages:
        m = dict(m)
        if isinstance(m.get("content"), list):
            texts = [p.get("text", "") for p in m["content"] if p.get("type") == "text"]
            thinking = [
                p.get("thinking", p.get("text", ""))
                for p in m["content"]
                if p.get("type") == "thinking"
            ]
            m["content"] = "".join(texts)
            if thinking:
                m["reasoning_content"] = "".join(thinking)
        out.append(m)
    return out


def oracle(tok: Any, messages: list[dict[str, Any]], tools: Any, gen: bool, **kw: Any) -> list[int]:
    return hf_template_ids(tok, template_input(messages), tools, add_generation_prompt=gen, **kw)


def control_ids(tok: Any) -> set[int]:
    return set(tok.backend_tokenizer.get_added_tokens_decoder())


# -- rendering parity ------------------------------------------------------------------


PROMPT_CASES = [
    pytest.param(conv, k, id=f"{conv.id}-{k}")
    for conv in PARITY
    for k in range(len(prompts_of(conv)))
]


@pytest.mark.parametrize("enable_thinking", [True, False])
@pytest.mark.parametrize(("conv", "k"), PROMPT_CASES)
def test_generation_prompt_matches_template(
    qwen3: Qwen3Renderer, qwen3_tokenizer: Any, conv: Conversation, k: int, enable_thinking: bool
) -> None:
    messages = prompts_of(conv)[k]
    expected = oracle(qwen3_tokenizer, messages, conv.tools, True, enable_thinking=enable_thinking)
    got = qwen3.build_generation_prompt(messages, tools=conv.tools, enable_thinking=enable_thinking)
    assert got == expected, qwen3.decode(got)


def test_corpus_is_large_enough() -> None:
    assert len(PARITY) >= 40


@pytest.mark.parametrize("conv", PARITY, ids=repr)
def test_supervised_tokens_match_template(
    qwen3: Qwen3Renderer, qwen3_tokenizer: Any, conv: Conversation
) -> None:
    expected = oracle(qwen3_tokenizer, conv.messages, conv.tools, False)
    for train_on in TrainOn:
        if train_on is not TrainOn.ALL and not any(m["role"] == "assistant" for m in conv.messages):
            continue
        # A trained turn whose reasoning the template drops is refused by default (one
        # rule for every renderer) and trained without it on request.
        example, _ = supervised_or_dropped(
            qwen3, conv.messages, tools=conv.tools, train_on=train_on
        )
        assert example.tokens.tolist() == expected
        assert example.weights.shape == example.tokens.shape
        assert example.tokens.dtype == np.int64
        assert example.tokens.flags.writeable and example.weights.flags.writeable


def test_a_supervised_example_longer_than_the_packed_limit_matches_template(
    qwen3: Qwen3Renderer, qwen3_tokenizer: Any
) -> None:
    """Tokens of a long example (tens of thousands) take another conversion to an array
    than short ones; both must give the template's ids."""
    answer = " ".join(f"word{k} ünï {k % 97}," for k in range(6000))
    messages = [{"role": "user", "content": "Count."}, {"role": "assistant", "content": answer}]
    example = qwen3.build_supervised_example(messages)
    assert len(example.tokens) > 1 << 14
    assert example.tokens.tolist() == oracle(qwen3_tokenizer, messages, None, False)
    assert example.tokens.dtype == np.int64 and example.tokens.flags.writeable


ENDS_WITH_ASSISTANT = [
    c for c in PARITY if c.messages[-1]["role"] == "assistant" and len(c.messages) > 1
]


def _has_reasoning(message: dict[str, Any]) -> bool:
    content = message.get("content")
    return bool(message.get("reasoning_content")) or (
        isinstance(content, list) and any(p.get("type") == "thinking" for p in content)
    )


# With thinking off, a prompt cannot be followed by sampled reasoning.
WEIGHT_CASES = [
    pytest.param(conv, thinking, id=f"{conv.id}-thinking={thinking}")
    for conv in ENDS_WITH_ASSISTANT
    for thinking in (True, False)
    if thinking or not _has_reasoning(conv.messages[-1])
]


@pytest.mark.parametrize(("conv", "enable_thinking"), WEIGHT_CASES)
def test_last_assistant_weights_cover_exactly_the_sampled_tokens(
    qwen3: Qwen3Renderer, qwen3_tokenizer: Any, conv: Conversation, enable_thinking: bool
) -> None:
    """Weights are 1 exactly on what the model samples after the generation prompt,
    through the ``<|im_end|>`` that ends the turn; the untrained prefix is the template's
    generation prompt for the conversation before the last assistant message."""
    *history, _ = conv.messages
    full = oracle(qwen3_tokenizer, conv.messages, conv.tools, False)
    prompt = oracle(qwen3_tokenizer, history, conv.tools, True, enable_thinking=enable_thinking)
    # Qwen3 re-renders nothing before the last assistant turn differently, so the prompt
    # is always a prefix of the full rendering.
    assert full[: len(prompt)] == prompt
    example = qwen3.build_supervised_example(
        conv.messages, tools=conv.tools, enable_thinking=enable_thinking
    )
    weights = example.weights.tolist()
    im_end = qwen3_tokenizer.convert_tokens_to_ids("<|im_end|>")
    end = len(full) - 1 - full[::-1].index(im_end) + 1
    assert weights == [0.0] * len(prompt) + [1.0] * (end - len(prompt)) + [0.0] * (len(full) - end)
    assert (
        qwen3.build_generation_prompt(history, tools=conv.tools, enable_thinking=enable_thinking)
        == prompt
    )


@pytest.mark.parametrize(
    "conv", [c for c in PARITY if any(m["role"] == "assistant" for m in c.messages)], ids=repr
)
def test_all_assistant_weights_cover_each_assistant_turn(
    qwen3: Qwen3Renderer, qwen3_tokenizer: Any, conv: Conversation
) -> None:
    example, _ = supervised_or_dropped(
        qwen3, conv.messages, tools=conv.tools, train_on="all_assistant"
    )
    ids, w = example.tokens.tolist(), example.weights.tolist()
    im_start = qwen3_tokenizer.convert_tokens_to_ids("<|im_start|>")
    im_end = qwen3_tokenizer.convert_tokens_to_ids("<|im_end|>")
    header = qwen3_tokenizer.encode("assistant\n", add_special_tokens=False)
    # Independent expectation: every `<|im_start|>assistant\n ... <|im_end|>` body.
    expected = [0.0] * len(ids)
    i = 0
    while i < len(ids):
        if ids[i] == im_start and ids[i + 1 : i + 1 + len(header)] == header:
            j = i + 1 + len(header)
            k = ids.index(im_end, j)
            expected[j : k + 1] = [1.0] * (k + 1 - j)
            i = k
        i += 1
    if expected != w:
        # A body that starts with text merges with the header's newline only if it begins
        # with whitespace; the corpus avoids that, so any difference is a bug.
        pytest.fail(qwen3.decode([t for t, x in zip(ids, w, strict=True) if x]))
    assert sum(w) > 0


@pytest.mark.parametrize(
    "body",
    [
        "Plain answer.",
        "  leading spaces merge with the header's newline",
        "\n\nnewlines too",
        "Cafe\u0301 and a\u0308: not NFC, which the tokenizer normalizes",
        " e\u0301 right after the header",
    ],
)
def test_header_and_trained_text_merged_into_tokens_are_refused_or_weigh_by_what_they_hold(
    qwen3: Qwen3Renderer, qwen3_tokenizer: Any, body: str
) -> None:
    messages = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": body},
        {"role": "user", "content": "More"},
        {"role": "assistant", "content": "Done."},
    ]
    # Independent expectation from the tokenizer's own offsets: the earlier turn's header
    # and body share one text segment. A token holding header and body characters cannot
    # be trained (it would train text the model never samples): an error naming the turn;
    # otherwise a token is trained if it holds body characters.
    header = "assistant\n"
    enc = qwen3_tokenizer(header + body, add_special_tokens=False, return_offsets_mapping=True)
    if any(start < len(header) < end for start, end in enc["offset_mapping"]):
        with pytest.raises(ValueError, match=r"^messages\[1\]: the token .* holds text of this"):
            qwen3.build_supervised_example(messages, train_on="all_assistant")
        return
    example = qwen3.build_supervised_example(messages, train_on="all_assistant")
    ids, w = example.tokens.tolist(), example.weights.tolist()
    expected = [1.0 if end > len(header) else 0.0 for _, end in enc["offset_mapping"]]
    im_start = qwen3_tokenizer.convert_tokens_to_ids("<|im_start|>")
    start = [k for k, t in enumerate(ids) if t == im_start][1] + 1
    assert ids[start : start + len(expected)] == enc["input_ids"]
    assert w[start : start + len(expected)] == expected
    assert 0.0 in expected and 1.0 in expected


def test_train_on_all_weights_every_token(qwen3: Qwen3Renderer) -> None:
    conv = CORPUS[2]
    example = qwen3.build_supervised_example(conv.messages, train_on="all")
    assert example.weights.min() == 1.0


def test_train_on_rejects_unknown_mode(qwen3: Qwen3Renderer) -> None:
    with pytest.raises(ValueError, match="train_on"):
        qwen3.build_supervised_example(CORPUS[2].messages, train_on="everything")


def test_supervised_example_without_assistant_is_an_error(qwen3: Qwen3Renderer) -> None:
    with pytest.raises(ValueError, match="no assistant message"):
        qwen3.build_supervised_example([{"role": "user", "content": "hi"}])


def test_list_content_renders_joined_text_not_empty(
    qwen3: Qwen3Renderer, qwen3_tokenizer: Any
) -> None:
    """The template renders list content as '' (dropping training text); we join it."""
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}]}
    ]
    raw_template = hf_template_ids(qwen3_tokenizer, messages, add_generation_prompt=True)
    joined = hf_template_ids(
        qwen3_tokenizer, [{"role": "user", "content": "AB"}], add_generation_prompt=True
    )
    assert raw_template != joined
    assert qwen3.build_generation_prompt(messages) == joined


def test_thinking_history_kept_when_not_stripped(qwen3: Qwen3Renderer) -> None:
    conv = next(c for c in CORPUS if c.id == "reasoning_history")
    stripped = qwen3.decode(qwen3.build_generation_prompt(conv.messages[:3]))
    kept = qwen3.decode(
        qwen3.build_generation_prompt(conv.messages[:3], strip_thinking_history=False)
    )
    assert "Check divisors up to 4." not in stripped
    assert "<think>\nCheck divisors up to 4.\n</think>\n\nYes." in kept


def test_unknown_option_is_a_clear_error(qwen3: Qwen3Renderer) -> None:
    with pytest.raises(TypeError, match=r"unknown option.*enable_thinkin"):
        qwen3.build_generation_prompt([{"role": "user", "content": "x"}], enable_thinkin=False)


# -- message text is ordinary text -----------------------------------------------------


@pytest.mark.parametrize("role", ["system", "user", "tool", "assistant"])
def test_control_token_spellings_in_text_stay_ordinary(
    qwen3: Qwen3Renderer, qwen3_tokenizer: Any, role: str
) -> None:
    spelled = "".join(sorted(qwen3.table.control_tokens))
    safe = "plain words"
    messages: list[dict[str, Any]] = [{"role": "user", "content": "q"}]
    if role == "tool":
        messages.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"type": "function", "function": {"name": "f", "arguments": {"x": spelled}}}
                ],
            }
        )
    messages.append({"role": role, "content": spelled})
    safe_messages = json.loads(json.dumps(messages).replace(json.dumps(spelled)[1:-1], safe))
    got = qwen3.build_generation_prompt(messages)
    baseline = qwen3.build_generation_prompt(safe_messages)
    controls = control_ids(qwen3_tokenizer)
    assert [t for t in got if t in controls] == [t for t in baseline if t in controls]
    # Same characters as the template's text: only the tokenization differs.
    text = qwen3_tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert qwen3.decode(got) == text


def test_adversarial_corpus_entry_decodes_to_template_text(
    qwen3: Qwen3Renderer, qwen3_tokenizer: Any
) -> None:
    conv = next(c for c in CORPUS if c.id == "special_looking_text")
    got = qwen3.build_generation_prompt(conv.messages[:1])
    expected_text = qwen3_tokenizer.apply_chat_template(
        conv.messages[:1], tokenize=False, add_generation_prompt=True
    )
    assert qwen3.decode(got) == expected_text
    assert qwen3.table.control_id("<think>") not in got


# -- parsing ---------------------------------------------------------------------------


def expected_message(message: dict[str, Any]) -> Message:
    """The message a parse must give back: Qwen3 carries no tool-call ids, and its
    tokenizer normalizes text to NFC before encoding."""
    m = Message.from_dict(template_input([message])[0])
    parts: list[Any] = []
    for p in m.parts:
        if isinstance(p, ToolCallPart):
            parts.append(ToolCallPart(p.name, nfc(p.arguments)))
        elif isinstance(p, (TextPart, ThinkingPart)):
            parts.append(type(p)(nfc(p.text)))
        else:
            parts.append(p)
    return Message("assistant", parts)


def nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


@pytest.mark.parametrize("conv", ENDS_WITH_ASSISTANT, ids=repr)
def test_round_trip_last_assistant_turn(
    qwen3: Qwen3Renderer, qwen3_tokenizer: Any, conv: Conversation
) -> None:
    *history, last = conv.messages
    full = oracle(qwen3_tokenizer, conv.messages, conv.tools, False)
    prompt = oracle(qwen3_tokenizer, history, conv.tools, True)
    assert full[: len(prompt)] == prompt
    result = qwen3.parse_response(full[len(prompt) :])
    assert result.message == expected_message(last)
    assert result.termination is Termination.STOP
    assert result.trailing_text == "\n"


def ids_of(qwen3: Qwen3Renderer, *pieces: str | int) -> list[int]:
    """Completion ids from text pieces (ordinary tokens) and control-token names."""
    out: list[int] = []
    for p in pieces:
        if isinstance(p, str) and p in qwen3.table.control_tokens:
            out.append(qwen3.table.control_id(p))
        elif isinstance(p, str):
            out += qwen3.table.encode(p)
        else:
            out.append(p)
    return out


def test_parts_keep_sampled_order_with_several_think_blocks(qwen3: Qwen3Renderer) -> None:
    ids = ids_of(
        qwen3,
        "<think>",
        "\nfirst thought\n",
        "</think>",
        "\n\nSome text.",
        "<think>",
        "\nsecond thought\n",
        "</think>",
        "\n\nMore text.",
        "<|im_end|>",
    )
    result = qwen3.parse_response(ids)
    assert result.message.parts == (
        ThinkingPart("first thought"),
        TextPart("Some text."),
        ThinkingPart("second thought"),
        TextPart("More text."),
    )
    assert result.termination is Termination.STOP


def test_text_between_and_after_tool_calls_is_kept(qwen3: Qwen3Renderer) -> None:
    ids = ids_of(
        qwen3,
        "<think>",
        "\nplan\n",
        "</think>",
        "\n\nChecking.\n",
        "<tool_call>",
        '\n{"name": "a", "arguments": {"x": 1}}\n',
        "</tool_call>",
        "\nBetween calls.\n",
        "<tool_call>",
        '\n{"name": "b", "arguments": {}}\n',
        "</tool_call>",
        "\nAfter the calls.",
        "<|im_end|>",
    )
    parts = qwen3.parse_response(ids).message.parts
    assert parts == (
        ThinkingPart("plan"),
        TextPart("Checking."),
        ToolCallPart("a", '{"x": 1}'),
        TextPart("\nBetween calls."),
        ToolCallPart("b", "{}"),
        TextPart("\nAfter the calls."),
    )


@pytest.mark.parametrize(
    "arguments",
    [
        '{"city":"Zürich","n":1.50,"ok":true}',
        '{ "spaced" :  [1, 2,3] }',
        '"{\\"city\\": \\"Paris\\"}"',
        '{"unicode": "\\u00e9 é 東京"}',
        "{}",
    ],
)
def test_tool_call_arguments_are_kept_exactly_as_sampled(
    qwen3: Qwen3Renderer, arguments: str
) -> None:
    body = '\n{"name": "get-weather.v2", "arguments": ' + arguments + "}\n"
    ids = ids_of(qwen3, "<tool_call>", body, "</tool_call>", "<|im_end|>")
    (call,) = qwen3.parse_response(ids).message.tool_calls
    assert call.name == "get-weather.v2"
    assert call.arguments == arguments
    assert call.parsed_arguments() == json.loads(arguments)


def test_bad_json_is_an_unparsed_part_with_raw_text_and_name(qwen3: Qwen3Renderer) -> None:
    body = '\n{"name": "lookup", "arguments": {"q": unquoted}}\n'
    ids = ids_of(qwen3, "Let me look.\n", "<tool_call>", body, "</tool_call>", "<|im_end|>")
    result = qwen3.parse_response(ids)
    text, unparsed = result.message.parts
    assert text == TextPart("Let me look.")
    assert isinstance(unparsed, UnparsedToolCallPart)
    assert unparsed.raw == body
    assert unparsed.name == "lookup"
    assert "invalid JSON" in unparsed.error
    assert result.message.tool_calls == ()
    # Reported (issue 13: an unreadable call must not pass for a final answer).
    assert result.termination is Termination.MALFORMED
    assert "tool call not parsed" in result.issues[0].message


def test_tool_call_with_unexpected_keys_is_unparsed(qwen3: Qwen3Renderer) -> None:
    body = '\n{"name": "f", "parameters": {}}\n'
    ids = ids_of(qwen3, "<tool_call>", body, "</tool_call>", "<|im_end|>")
    (part,) = qwen3.parse_response(ids).message.parts
    assert isinstance(part, UnparsedToolCallPart) and part.raw == body and part.name == "f"


def test_unclosed_think_at_the_end_is_incomplete_thinking(qwen3: Qwen3Renderer) -> None:
    ids = ids_of(qwen3, "<think>", "\nStill reasoning about the")
    result = qwen3.parse_response(ids)
    assert result.message.parts == (ThinkingPart("Still reasoning about the", incomplete=True),)
    assert result.termination is Termination.LENGTH
    assert result.stop_token_id is None


def test_think_opened_but_empty_when_cut_is_reported(qwen3: Qwen3Renderer) -> None:
    result = qwen3.parse_response(ids_of(qwen3, "<think>"))
    assert result.message.parts == (ThinkingPart("", incomplete=True),)
    assert result.termination is Termination.LENGTH


def test_unclosed_tool_call_at_the_end_is_incomplete(qwen3: Qwen3Renderer) -> None:
    ids = ids_of(qwen3, "Calling.\n", "<tool_call>", '\n{"name": "f", "arguments": {"a": ')
    result = qwen3.parse_response(ids)
    text, call = result.message.parts
    assert text == TextPart("Calling.")
    assert isinstance(call, UnparsedToolCallPart)
    assert call.incomplete and call.name == "f"
    assert call.raw == '\n{"name": "f", "arguments": {"a": '
    assert result.termination is Termination.LENGTH


def test_text_cut_off_is_marked_incomplete(qwen3: Qwen3Renderer) -> None:
    result = qwen3.parse_response(
        ids_of(qwen3, "<think>", "\nx\n", "</think>", "\n\nThe answer is")
    )
    assert result.message.parts == (ThinkingPart("x"), TextPart("The answer is", incomplete=True))
    assert result.termination is Termination.LENGTH


def test_tags_typed_as_ordinary_text_are_content(qwen3: Qwen3Renderer) -> None:
    text = "Use <think> and </think> or <tool_call>{}</tool_call> literally."
    ids = [*qwen3.table.encode(text), qwen3.im_end]
    assert not set(ids[:-1]) & qwen3.table.control_ids
    result = qwen3.parse_response(ids)
    assert result.message.content == text
    assert result.termination is Termination.STOP


def test_plain_text_answer_keeps_string_content(qwen3: Qwen3Renderer) -> None:
    result = qwen3.parse_response(
        ids_of(qwen3, "<think>", "\n\n", "</think>", "\n\nHello!", "<|im_end|>")
    )
    assert result.message.content == "Hello!"
    assert result.message.to_openai() == {"role": "assistant", "content": "Hello!"}


def test_text_after_the_stop_token_is_reported_not_parsed(qwen3: Qwen3Renderer) -> None:
    ids = ids_of(qwen3, "Done.", "<|im_end|>", "\n", "<|im_start|>", "user\nmore")
    result = qwen3.parse_response(ids)
    assert result.message.content == "Done."
    assert result.termination is Termination.STOP
    assert result.stop_token_id == qwen3.im_end
    assert result.trailing_text == "\n<|im_start|>user\nmore"
    assert list(result.trailing_ids) == ids[len(qwen3.table.encode("Done.")) + 1 :]


def test_end_of_text_token_is_eos_termination(qwen3: Qwen3Renderer) -> None:
    result = qwen3.parse_response(ids_of(qwen3, "Bye.", "<|endoftext|>"))
    assert result.termination is Termination.EOS
    assert result.message.content == "Bye."


def test_new_turn_without_stop_is_malformed_and_ends_the_message(qwen3: Qwen3Renderer) -> None:
    ids = ids_of(qwen3, "Answer.", "<|im_start|>", "user\nhi")
    result = qwen3.parse_response(ids)
    assert result.message.content == "Answer."
    assert result.termination is Termination.MALFORMED
    assert result.issues[0].position == len(qwen3.table.encode("Answer."))
    assert result.trailing_text == "<|im_start|>user\nhi"


def test_stray_closing_tags_are_issues_kept_as_text(qwen3: Qwen3Renderer) -> None:
    # A control token out of place is sampled text: kept where it was, and reported.
    result = qwen3.parse_response(ids_of(qwen3, "Hi", "</think>", " there", "<|im_end|>"))
    assert result.message.content == "Hi</think> there"
    assert result.termination is Termination.MALFORMED
    assert "</think>" in result.issues[0].message


def test_a_stray_think_end_inside_a_call_is_call_text(qwen3: Qwen3Renderer) -> None:
    # Only an opening marker cuts a call; a stray </think> is kept in its body, reported.
    body = '\n{"name": "f", "arguments": {}}\n'
    ids = ids_of(qwen3, "<tool_call>", body, "</think>", "</tool_call>", "<|im_end|>")
    result = qwen3.parse_response(ids)
    (part,) = result.message.parts
    assert type(part) is UnparsedToolCallPart and part.raw == body + "</think>"
    assert not part.incomplete
    at = ids.index(qwen3.think_end)
    issues = [(i.position, i.message) for i in result.issues]
    assert (at, "</think> without an open think block (kept as text)") in issues


def test_a_new_turn_inside_a_call_ends_the_message_there(qwen3: Qwen3Renderer) -> None:
    body = '\n{"name": "f", "arguments": {}}\n'
    ids = ids_of(qwen3, "Hi", "<tool_call>", body, "<|im_start|>", "user")
    result = qwen3.parse_response(ids)
    assert result.message.parts == (TextPart("Hi"), ToolCallPart("f", "{}"))
    at = ids.index(qwen3.im_start)
    assert [(i.position, i.message) for i in result.issues] == [
        (at, "<|im_start|> before <|im_end|>: the message ends here"),
        (at, "the message ended inside a tool call (no </tool_call>)"),
    ]
    assert result.trailing_ids == tuple(ids[at:])


def test_spans_cover_each_part_with_its_markers(qwen3: Qwen3Renderer) -> None:
    ids = ids_of(
        qwen3,
        "<think>",
        "\nr\n",
        "</think>",
        "\n\nText\n",
        "<tool_call>",
        '\n{"name": "f", "arguments": {}}\n',
        "</tool_call>",
        "<|im_end|>",
    )
    result = qwen3.parse_response(ids)
    think_end = ids.index(qwen3.think_end)
    call_start = ids.index(qwen3.tool_call)
    call_end = ids.index(qwen3.tool_call_end)
    assert result.spans == (
        (0, think_end + 1),
        (think_end + 1, call_start),
        (call_start, call_end + 1),
    )


def test_invalid_token_ids_name_the_position(qwen3: Qwen3Renderer) -> None:
    good = qwen3.table.encode("hello world")
    for bad in (-1, qwen3.table.vocab_size, 10**12):
        with pytest.raises(ValueError, match=rf"token_ids\[2\] = {bad}"):
            qwen3.parse_response([*good[:2], bad, *good[2:]])
        long = good * 40
        with pytest.raises(ValueError, match=rf"token_ids\[{len(long)}\]"):
            qwen3.parse_response([*long, bad])


# -- streaming -------------------------------------------------------------------------


def completions(qwen3: Qwen3Renderer, tok: Any) -> list[list[int]]:
    out = []
    for conv in ENDS_WITH_ASSISTANT:
        full = oracle(tok, conv.messages, conv.tools, False)
        prompt = oracle(tok, conv.messages[:-1], conv.tools, True)
        out.append(full[len(prompt) :])
    out += [
        ids_of(qwen3, "<think>", "\nStill reasoning 🤔 about the"),
        ids_of(qwen3, "Calling.\n", "<tool_call>", '\n{"name": "f", "arguments": {"a": '),
        ids_of(qwen3, "Hi", "</think>", " there", "<|im_start|>", "user"),
        ids_of(
            qwen3,
            "<think>",
            "\n\n\n",
            "<tool_call>",
            "\n{bad}\n",
            "</tool_call>",
            "x",
            "<|im_end|>",
            "y",
        ),
        [*qwen3.table.encode("日本語のテキスト🎉 with emoji split across tokens"), qwen3.im_end],
    ]
    return out


def test_streaming_equals_batch_at_every_split(qwen3: Qwen3Renderer, qwen3_tokenizer: Any) -> None:
    checked = 0
    for ids in completions(qwen3, qwen3_tokenizer):
        expected = qwen3.parse_response(ids)
        step = max(1, len(ids) // 60)
        for cut in range(0, len(ids) + 1, step):
            parser = qwen3.stream_parser()
            parser.feed(ids[:cut])
            parser.feed(ids[cut:])
            assert parser.finish() == expected, cut
            checked += 1
        parser = qwen3.stream_parser()
        for t in ids:
            parser.feed([t])
        assert parser.finish() == expected
    assert checked > 500


def test_one_token_feeds_emit_one_delta_per_token(
    qwen3: Qwen3Renderer, qwen3_tokenizer: Any
) -> None:
    words = qwen3_tokenizer.encode("Plain answer, ünïcode 🙂 text.", add_special_tokens=False)
    ids = [*words, qwen3_tokenizer.convert_tokens_to_ids("<|im_end|>")]
    parser = qwen3.stream_parser()
    events = [e for t in ids for e in parser.feed([t])]
    texts = [qwen3_tokenizer.decode([t]) for t in words]
    assert "\ufffd" not in "".join(texts)  # every word token is whole UTF-8 here
    answer = TextPart("".join(texts))
    assert events == [
        PartStarted(0, "text"),
        *(TextDelta(0, text) for text in texts),
        PartFinished(0, answer),
    ]
    assert all(hash(e) == hash(TextDelta(0, e.text)) for e in events if isinstance(e, TextDelta))
    assert parser.finish().message.parts == (answer,)


def test_stream_events_rebuild_the_parts(qwen3: Qwen3Renderer, qwen3_tokenizer: Any) -> None:
    for ids in completions(qwen3, qwen3_tokenizer):
        parser = qwen3.stream_parser()
        events = []
        for k in range(0, len(ids), 3):
            events += parser.feed(ids[k : k + 3])
        result = parser.finish()
        events += parser.final_events
        parts = result.message.parts
        started = [e.index for e in events if isinstance(e, PartStarted)]
        finished = {e.index: e.part for e in events if isinstance(e, PartFinished)}
        assert started == sorted(set(started))
        assert [finished[i] for i in sorted(finished)] == [
            p for p in _unmerged_parts(result, parts)
        ]
        for i, part in finished.items():
            deltas = "".join(e.text for e in events if isinstance(e, TextDelta) and e.index == i)
            if isinstance(part, (TextPart, ThinkingPart)):
                assert deltas == part.text
            elif isinstance(part, UnparsedToolCallPart):
                assert deltas == part.raw


def _unmerged_parts(result: Any, parts: tuple[Any, ...]) -> list[Any]:
    # A plain-text message is stored as one string; its parts view is one TextPart.
    return list(parts)


def test_numpy_input_equals_list_input(qwen3: Qwen3Renderer, qwen3_tokenizer: Any) -> None:
    for ids in completions(qwen3, qwen3_tokenizer)[:5]:
        assert qwen3.parse_response(np.asarray(ids)) == qwen3.parse_response(ids)


def test_feed_after_finish_is_an_error(qwen3: Qwen3Renderer) -> None:
    parser = qwen3.stream_parser()
    parser.finish()
    with pytest.raises(RuntimeError):
        parser.feed([1])


# -- caller errors ---------------------------------------------------------------------


def test_unknown_role_names_the_message(qwen3: Qwen3Renderer) -> None:
    with pytest.raises(ValueError, match=r"messages\[1\]\.role: unknown role 'developer'"):
        qwen3.build_generation_prompt(
            [{"role": "user", "content": "a"}, {"role": "developer", "content": "b"}]
        )


def test_thinking_in_a_user_message_is_rejected(qwen3: Qwen3Renderer) -> None:
    with pytest.raises(ValueError, match=r"messages\[0\]\.content\[0\]"):
        qwen3.build_generation_prompt(
            [{"role": "user", "content": [{"type": "thinking", "text": "x"}]}]
        )


def test_malformed_tool_call_input_names_the_field(qwen3: Qwen3Renderer) -> None:
    with pytest.raises(ValueError, match=r"messages\[1\]\.tool_calls\[0\]\.function\.name"):
        qwen3.build_generation_prompt(
            [
                {"role": "user", "content": "a"},
                {"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]},
            ]
        )


@pytest.mark.parametrize("kind", ["complete", "malformed", "truncated"])
def test_completions_parse_on_the_one_shot_path_as_fed(
    qwen3: Qwen3Renderer, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Completions of about 1k tokens (reasoning, text, three calls, one of them invalid
    JSON when malformed, cut off when truncated) take the one-shot path, which must give
    what feeding the ids gives."""
    from renderers.bench.workloads import completions
    from renderers.core.grammars import TaggedParser

    ids = next(c.ids for c in completions(qwen3, 1000) if c.kind == kind)
    parsed, fed, one_shot = parsed_both_ways(qwen3, TaggedParser, ids, monkeypatch)
    assert parsed == fed
    assert one_shot
    assert len(fed.message.parts) >= 5


# -- arguments: written verbatim, as the template writes a string -----------------------------

ODD_ARGUMENTS = '{"city":"Par\\u00eds","n":1e1,"x":{"y":[true,null]}}'


@pytest.mark.parametrize(
    "conversation",
    [c for c in PARITY if any(m.get("tool_calls") for m in c.messages)],
    ids=repr,
)
def test_arguments_text_is_written_verbatim_as_the_template_writes_a_string(
    conversation: Conversation, qwen3: Qwen3Renderer, qwen3_tokenizer: Any
) -> None:
    """The template writes a string ``arguments`` as is: compact, escaped, exponent JSON
    text is the model's text unchanged (no re-serialisation)."""
    messages = json.loads(json.dumps(conversation.messages))
    for m in messages:
        for c in m.get("tool_calls") or []:
            c["function"]["arguments"] = ODD_ARGUMENTS
    for prompt in prompts_of(Conversation(conversation.id, messages)):
        expected = oracle(qwen3_tokenizer, prompt, conversation.tools, True)
        assert qwen3.build_generation_prompt(prompt, conversation.tools) == expected
    assert ODD_ARGUMENTS in qwen3.decode(qwen3.build_supervised_example(messages).tokens)
