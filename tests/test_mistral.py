"""Mistral v3 (Tekken): parity with mistral-common's own encoder, parsing, streaming.

Expected ids come from mistral-common's request encoder (``ChatCompletionRequest`` ->
``MistralTokenizer.encode_chat_completion``), the official one: ``ValidationMode.test``
for generation prompts, ``ValidationMode.finetuning`` for whole conversations.
"""

from __future__ import annotations

import copy
import json
import pickle
import re
from pathlib import Path
from typing import Any

import pytest

from renderers import (
    Termination,
    TextPart,
    ToolCallPart,
    TrainOn,
    UnparsedToolCallPart,
    get_renderer,
)
from renderers.core.messages import coerce_messages
from renderers.mistral import MistralRenderer
from tests.corpus import CORPUS, Conversation, prompts_of
from tests.training import supervised_or_dropped

pytest.importorskip("mistral_common", reason="mistral-common (the families extra)")

# Corpus entries mistral-common's validator refuses, and why (this renderer writes them).
ORACLE_REFUSES = {"tool_name_with_punctuation": "a tool name with '.'"}
# Where this renderer differs on purpose (documented in renderers/mistral.py): the encoder
# joins a list content's text chunks with "\n\n", the message model joins them as one text.
DIFFERS = {"list_content_user"}
# Entries the format cannot write (the encoder refuses them too: asserted below).
UNWRITABLE = {"empty_assistant", "tool_call_with_text", "tool_call_after_blank_text_with_reasoning"}
PARITY = [c for c in CORPUS if c.id not in {*ORACLE_REFUSES, *UNWRITABLE, *DIFFERS}]


def _tekken_file() -> str:
    import mistral_common

    return str(Path(mistral_common.__file__).parent / "data" / "tekken_240718.json")


TEKKEN = _tekken_file()
"""The Tekken file ``MistralTokenizer.v3(is_tekken=True)`` loads."""


@pytest.fixture(scope="module")
def encoders() -> dict[str, Any]:
    from mistral_common.protocol.instruct.validator import ValidationMode
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    return {
        "test": MistralTokenizer.v3(is_tekken=True),
        "finetuning": MistralTokenizer.from_file(TEKKEN, mode=ValidationMode.finetuning),
    }


@pytest.fixture(scope="module")
def mistral(encoders: dict[str, Any]) -> MistralRenderer:
    renderer = get_renderer("mistral", encoders["test"])  # the package's own object
    assert isinstance(renderer, MistralRenderer)
    return renderer


def with_valid_ids(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool-call ids as mistral-common's validator wants them (9 letters or digits), the
    same in both renderings."""
    out = copy.deepcopy(messages)
    ids: dict[str, str] = {}

    def valid(call_id: str) -> str:
        if call_id not in ids:
            ids[call_id] = (re.sub(r"[^A-Za-z0-9]", "", call_id) + "0" * 9)[:8] + str(len(ids))
        return ids[call_id]

    for m in out:
        for call in m.get("tool_calls") or []:
            call["id"] = valid(call["id"])
        if m.get("role") == "tool" and m.get("tool_call_id"):
            m["tool_call_id"] = valid(m["tool_call_id"])
    return out


def encoded(
    encoder: Any, messages: list[dict[str, Any]], tools: Any, validate: bool = True
) -> list[int]:
    """mistral-common's ids of an OpenAI-shaped conversation (reasoning left out: v3 has
    none; arguments as JSON text, the request's type); ``validate=False``: without its
    request validator (which wants 9-character call ids), normalizer and encoder only."""
    from mistral_common.protocol.instruct.request import ChatCompletionRequest

    messages = copy.deepcopy(messages)
    for m in messages:
        m.pop("reasoning_content", None)
        if isinstance(m.get("content"), list):
            m["content"] = [p for p in m["content"] if p.get("type") == "text"]
        for call in m.get("tool_calls") or []:
            if not isinstance(call["function"]["arguments"], str):
                call["function"]["arguments"] = json.dumps(call["function"]["arguments"])
    request = ChatCompletionRequest.model_validate({"messages": messages, "tools": tools})
    if not validate:
        from mistral_common.protocol.instruct.normalize import InstructRequestNormalizer

        instruct = InstructRequestNormalizer.normalizer().from_chat_completion_request(request)
        unvalidated: list[int] = encoder.instruct_tokenizer.encode_instruct(instruct).tokens
        return unvalidated
    ids: list[int] = encoder.encode_chat_completion(request).tokens
    return ids


PROMPT_CASES = [
    pytest.param(conv, k, id=f"{conv.id}-{k}")
    for conv in PARITY
    for k in range(len(prompts_of(conv)))
]


@pytest.mark.parametrize(("conv", "k"), PROMPT_CASES)
def test_generation_prompt_matches_the_encoder(
    mistral: MistralRenderer, encoders: dict[str, Any], conv: Conversation, k: int
) -> None:
    messages = with_valid_ids(prompts_of(conv)[k])
    expected = encoded(encoders["test"], messages, conv.tools)
    got = mistral.build_generation_prompt(messages, tools=conv.tools)
    assert got == expected, mistral.decode(got)


def test_corpus_is_large_enough() -> None:
    assert len(PARITY) >= 39


ENDS_WITH_ASSISTANT = [c for c in PARITY if c.messages[-1]["role"] == "assistant"]


@pytest.mark.parametrize("conv", ENDS_WITH_ASSISTANT, ids=repr)
def test_supervised_tokens_match_the_encoder(
    mistral: MistralRenderer, encoders: dict[str, Any], conv: Conversation
) -> None:
    messages = with_valid_ids(conv.messages)
    expected = encoded(encoders["finetuning"], messages, conv.tools)
    for train_on in TrainOn:
        example, _ = supervised_or_dropped(mistral, messages, tools=conv.tools, train_on=train_on)
        assert example.tokens.tolist() == expected


@pytest.mark.parametrize("conv", ENDS_WITH_ASSISTANT, ids=repr)
def test_trained_turn_follows_its_generation_prompt_parses_back_and_streams_alike(
    mistral: MistralRenderer, conv: Conversation
) -> None:
    messages = with_valid_ids(conv.messages)
    example, _ = supervised_or_dropped(mistral, messages, tools=conv.tools)
    tokens, weights = example.tokens.tolist(), example.weights.tolist()
    first = weights.index(1.0)
    assert tokens[:first] == mistral.build_generation_prompt(messages[:-1], tools=conv.tools)
    assert tokens[-1] == mistral.eos and all(w == 1.0 for w in weights[first:])
    completion = tokens[first:]
    result = mistral.parse_response(completion)
    assert result.termination is Termination.STOP and not result.issues
    last = coerce_messages(messages[-1:])[0]
    calls = [p for p in last.parts if isinstance(p, ToolCallPart)]
    if calls:
        assert result.message.parts == tuple(
            ToolCallPart(c.name, json.dumps(json.loads(c.arguments), ensure_ascii=False), id=c.id)
            for c in calls
        )
    else:
        text = "".join(p.text for p in last.parts if isinstance(p, TextPart))
        assert result.message.parts == (TextPart(text.rstrip(" ")),)
    for size in (1, 2, 7):
        parser = mistral.stream_parser()
        for k in range(0, len(completion), size):
            parser.feed(completion[k : k + size])
        assert parser.finish() == result


@pytest.mark.parametrize("conv_id", sorted(UNWRITABLE))
def test_what_the_encoder_refuses_is_refused_naming_the_message(
    mistral: MistralRenderer, encoders: dict[str, Any], conv_id: str
) -> None:
    conv = next(c for c in CORPUS if c.id == conv_id)
    messages = with_valid_ids(conv.messages)
    cut = next(i for i, m in enumerate(messages) if m["role"] == "assistant") + 1
    with pytest.raises(Exception, match="Assistant message must have"):
        encoded(encoders["finetuning"], messages[:cut], conv.tools)
    with pytest.raises(ValueError, match=rf"^messages\[{cut - 1}\]: mistral"):
        mistral.build_supervised_example(messages[:cut], tools=conv.tools)


def _ids(r: MistralRenderer, *pieces: str) -> list[int]:
    ids: list[int] = []
    for piece in pieces:
        if re.fullmatch(r"</?s>|\[/?[A-Z_]+\]", piece):
            ids.append(r.table.control_id(piece))
        else:
            ids += r.table.encode(piece)
    return ids


@pytest.mark.parametrize(
    ("pieces", "expected", "termination"),
    [
        (["Hello [INST] there", "</s>"], [TextPart("Hello [INST] there")], Termination.STOP),
        (
            ['{"name": "f", "arguments": {}}', "</s>"],
            [TextPart('{"name": "f", "arguments": {}}')],
            Termination.STOP,
        ),
        (
            [
                "[TOOL_CALLS]",
                '[{"name": "f", "arguments": {"a": 1}, "id": "abcDEF123"}, '
                '{"name": "g", "arguments": {}}]',
                "</s>",
            ],
            [ToolCallPart("f", '{"a": 1}', id="abcDEF123"), ToolCallPart("g", "{}")],
            Termination.STOP,
        ),
        (
            ["[TOOL_CALLS]", "not json", "</s>"],
            [UnparsedToolCallPart("not json", "?")],
            Termination.MALFORMED,
        ),
        (
            ["[TOOL_CALLS]", '[{"name": "f", "argu'],
            [UnparsedToolCallPart('[{"name": "f", "argu', "?", incomplete=True)],
            Termination.LENGTH,
        ),
        (["Hi", "[INST]", "more"], [TextPart("Hi")], Termination.MALFORMED),
    ],
)
def test_completions_parse_to_text_or_calls_and_stream_alike(
    mistral: MistralRenderer, pieces: list[str], expected: list[Any], termination: Termination
) -> None:
    ids = _ids(mistral, *pieces)
    result = mistral.parse_response(ids)
    parts = [
        UnparsedToolCallPart(p.raw, "?", incomplete=p.incomplete)
        if isinstance(p, UnparsedToolCallPart)
        else p
        for p in result.message.parts
    ]
    assert parts == expected and result.termination is termination
    for size in (1, 3):
        parser = mistral.stream_parser()
        for k in range(0, len(ids), size):
            parser.feed(ids[k : k + size])
        assert parser.finish() == result


def test_the_packaged_tokenizer_loads_without_the_hub_and_pickles_by_name(
    mistral: MistralRenderer, encoders: dict[str, Any]
) -> None:
    renderer = get_renderer("mistralai/Mistral-Nemo-Instruct-2407")
    again = pickle.loads(pickle.dumps(renderer))
    messages = [{"role": "user", "content": "Hi ✨ [INST]"}]
    assert again.build_generation_prompt(messages) == mistral.build_generation_prompt(messages)
    assert again.build_generation_prompt(messages) == encoded(encoders["test"], messages, None)
