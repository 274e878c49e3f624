"""Mistral v3 (Tekken) and v7 (SentencePiece): parity with mistral-common's own encoder,
parsing, streaming.

Expected ids come from mistral-common's request encoder (``ChatCompletionRequest`` ->
``MistralTokenizer.encode_chat_completion``), the official one, with each version's
tokenizer file: ``ValidationMode.test`` for generation prompts, ``ValidationMode.finetuning``
for whole conversations.
"""

from __future__ import annotations

import copy
import functools
import json
import pickle
import random
import re
from dataclasses import dataclass
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
from renderers.core.packaged_tokenizers import MistralV7Tokenizer, packaged_tokenizer
from renderers.mistral import MistralRenderer
from tests.corpus import CORPUS, Conversation, prompts_of
from tests.training import supervised_or_dropped

pytest.importorskip("mistral_common", reason="mistral-common (the families extra)")


@dataclass(frozen=True)
class Version:
    """A Mistral version under test: its renderer, tokenizer file and model id, and the
    corpus entries its format cannot write (the encoder refuses them too, with
    ``refusal``)."""

    name: str
    file: str
    model_id: str
    unwritable: frozenset[str]
    refusal: str

    def __repr__(self) -> str:
        return self.name


V3 = Version(
    "mistral",
    "tekken_240718.json",
    "mistralai/Mistral-Nemo-Instruct-2407",
    frozenset(
        {"empty_assistant", "tool_call_with_text", "tool_call_after_blank_text_with_reasoning"}
    ),
    "Assistant message must have",
)
V7 = Version(
    "mistral_v7",
    "mistral_instruct_tokenizer_241114.model.v7",
    "mistralai/Mistral-Large-Instruct-2411",
    frozenset({"empty_assistant"}),
    "Invalid assistant message",
)
VERSIONS = (V3, V7)
version_param = pytest.mark.parametrize("version", VERSIONS, ids=repr)

# Corpus entries mistral-common's validator refuses, and why (the renderers write them).
ORACLE_REFUSES = {"tool_name_with_punctuation": "a tool name with '.'"}
# Where the renderers differ on purpose (documented in renderers/mistral.py): the encoder
# joins a list content's text chunks with "\n\n", the message model joins them as one text.
DIFFERS = {"list_content_user"}


def parity(version: Version) -> list[Conversation]:
    """The corpus entries both the renderer and the encoder write, the same on purpose."""
    return [c for c in CORPUS if c.id not in {*ORACLE_REFUSES, *DIFFERS, *version.unwritable}]


def _data_file(name: str) -> str:
    import mistral_common

    return str(Path(mistral_common.__file__).parent / "data" / name)


@functools.cache
def encoder(version: Version, mode: str = "test") -> Any:
    """mistral-common's encoder with the version's tokenizer (``MistralTokenizer.v3(
    is_tekken=True)`` and ``MistralTokenizer.v7()`` load these files in test mode)."""
    from mistral_common.protocol.instruct.validator import ValidationMode
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    return MistralTokenizer.from_file(_data_file(version.file), mode=ValidationMode(mode))


@functools.cache
def renderer(version: Version) -> MistralRenderer:
    r = get_renderer(version.name, encoder(version))  # the package's own object
    assert isinstance(r, MistralRenderer)
    return r


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
    """mistral-common's ids of an OpenAI-shaped conversation (reasoning left out: neither
    version has any; arguments as JSON text, the request's type); ``validate=False``:
    without its request validator (which wants 9-character call ids), the encoder's own
    normalizer and encoder only."""
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
    if not validate:  # each version has its own normalizer
        instruct = encoder._instruct_request_normalizer.from_chat_completion_request(request)
        unvalidated: list[int] = encoder.instruct_tokenizer.encode_instruct(instruct).tokens
        return unvalidated
    ids: list[int] = encoder.encode_chat_completion(request).tokens
    return ids


PROMPT_CASES = [
    pytest.param(version, conv, k, id=f"{version}-{conv.id}-{k}")
    for version in VERSIONS
    for conv in parity(version)
    for k in range(len(prompts_of(conv)))
]


@pytest.mark.parametrize(("version", "conv", "k"), PROMPT_CASES)
def test_generation_prompt_matches_the_encoder(
    version: Version, conv: Conversation, k: int
) -> None:
    r = renderer(version)
    messages = with_valid_ids(prompts_of(conv)[k])
    expected = encoded(encoder(version), messages, conv.tools)
    got = r.build_generation_prompt(messages, tools=conv.tools)
    assert got == expected, r.decode(got)


@pytest.mark.parametrize(("version", "size"), [(V3, 39), (V7, 41)], ids=repr)
def test_corpus_is_large_enough(version: Version, size: int) -> None:
    assert len(parity(version)) >= size


TURN_CASES = [
    pytest.param(version, conv, id=f"{version}-{conv.id}")
    for version in VERSIONS
    for conv in parity(version)
    if conv.messages[-1]["role"] == "assistant"
]


@pytest.mark.parametrize(("version", "conv"), TURN_CASES)
def test_supervised_tokens_match_the_encoder(version: Version, conv: Conversation) -> None:
    messages = with_valid_ids(conv.messages)
    expected = encoded(encoder(version, "finetuning"), messages, conv.tools)
    for train_on in TrainOn:
        example, _ = supervised_or_dropped(
            renderer(version), messages, tools=conv.tools, train_on=train_on
        )
        assert example.tokens.tolist() == expected, train_on


@pytest.mark.parametrize(("version", "conv"), TURN_CASES)
def test_trained_turn_follows_its_generation_prompt_parses_back_and_streams_alike(
    version: Version, conv: Conversation
) -> None:
    r = renderer(version)
    messages = with_valid_ids(conv.messages)
    example, _ = supervised_or_dropped(r, messages, tools=conv.tools)
    tokens, weights = example.tokens.tolist(), example.weights.tolist()
    first = weights.index(1.0)
    assert tokens[:first] == r.build_generation_prompt(messages[:-1], tools=conv.tools)
    assert tokens[-1] == r.eos and all(w == 1.0 for w in weights[first:])
    completion = tokens[first:]
    result = r.parse_response(completion)
    assert result.termination is Termination.STOP and not result.issues
    last = coerce_messages(messages[-1:])[0]
    text = "".join(p.text for p in last.parts if isinstance(p, TextPart)).rstrip(" ")
    calls = [
        ToolCallPart(c.name, json.dumps(json.loads(c.arguments), ensure_ascii=False), id=c.id)
        for c in last.parts
        if isinstance(c, ToolCallPart)
    ]
    assert result.message.parts == (*([TextPart(text)] if text else []), *calls)
    for size in (1, 2, 7):
        parser = r.stream_parser()
        for k in range(0, len(completion), size):
            parser.feed(completion[k : k + size])
        assert parser.finish() == result


REFUSED_CASES = [
    pytest.param(version, conv_id, id=f"{version}-{conv_id}")
    for version in VERSIONS
    for conv_id in sorted(version.unwritable)
]


@pytest.mark.parametrize(("version", "conv_id"), REFUSED_CASES)
def test_what_the_encoder_refuses_is_refused_naming_the_message(
    version: Version, conv_id: str
) -> None:
    conv = next(c for c in CORPUS if c.id == conv_id)
    messages = with_valid_ids(conv.messages)
    cut = next(i for i, m in enumerate(messages) if m["role"] == "assistant") + 1
    with pytest.raises(Exception, match=version.refusal):
        encoded(encoder(version, "finetuning"), messages[:cut], conv.tools)
    with pytest.raises(ValueError, match=rf"^messages\[{cut - 1}\]: {version.name}\b"):
        renderer(version).build_supervised_example(messages[:cut], tools=conv.tools)


def _users(*texts: str) -> list[dict[str, Any]]:
    return [{"role": "user", "content": t} for t in texts]


SHAPES = [
    _users("", "c"),
    _users("a", ""),
    _users("", ""),
    _users("a", "", "b"),
    [{"role": "system", "content": "S"}, *_users("", "")],
    [*_users("a"), {"role": "system", "content": "S"}, *_users("", "b")],
    [
        {"role": "system", "content": "First."},
        *_users("a"),
        {"role": "assistant", "content": "   "},  # written as the encoder writes it: "</s>"
        {"role": "system", "content": ""},
        {"role": "system", "content": "Second."},
        *_users("", "c"),
    ],
]
"""Runs of user messages the encoder joins into one turn (empty texts skipped, a system
message between keeps them apart), system messages anywhere."""


@pytest.mark.parametrize("messages", SHAPES, ids=str)
@version_param
def test_user_runs_and_system_messages_are_placed_as_the_encoder_places_them(
    version: Version, messages: list[dict[str, Any]]
) -> None:
    r = renderer(version)
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    got = r.build_generation_prompt(messages, tools=tools)
    # (the validator refuses a system message after an assistant one: normalizer and encoder)
    assert got == encoded(encoder(version), messages, tools, validate=False), r.decode(got)


def test_v7_writes_system_messages_in_place_and_the_tools_before_the_last_user_turn() -> None:
    text = renderer(V7).decode(renderer(V7).build_generation_prompt(SHAPES[-1]))
    assert "[/INST]</s>[SYSTEM_PROMPT][/SYSTEM_PROMPT][SYSTEM_PROMPT] Second." in text
    assert text.endswith("[/SYSTEM_PROMPT][INST] c[/INST]")


def _sampled(r: MistralRenderer, *pieces: str) -> list[int]:
    """Ids of a completion: control tokens by name; a text as the encoder writes it (v7: a
    space before it) unless it starts with ``|`` (then as it is, less the ``|``)."""
    ids: list[int] = []
    for piece in pieces:
        if re.fullmatch(r"</?s>|\[/?[A-Z_]+\]", piece):
            ids.append(r.table.control_id(piece))
        elif piece.startswith("|"):
            ids += r.table.encode(piece[1:])
        else:
            ids += r.table.encode(r._text_prefix + piece)
    return ids


CALLS = '[{"name": "f", "arguments": {"a": 1}, "id": "abcDEF123"}, {"name": "g", "arguments": {}}]'
PARSED = [ToolCallPart("f", '{"a": 1}', id="abcDEF123"), ToolCallPart("g", "{}")]
COMPLETIONS = [
    (["Hello [INST] there", "</s>"], [TextPart("Hello [INST] there")], Termination.STOP),
    (
        ['{"name": "f", "arguments": {}}', "</s>"],
        [TextPart('{"name": "f", "arguments": {}}')],
        Termination.STOP,
    ),
    (["[TOOL_CALLS]", CALLS, "</s>"], PARSED, Termination.STOP),
    (["Sure.", "[TOOL_CALLS]", CALLS, "</s>"], [TextPart("Sure."), *PARSED], Termination.STOP),
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
    # v7: the space before a text is the format's; a text sampled without it is whole.
    (["|  two spaces", "</s>"], [TextPart(" two spaces")], Termination.STOP),
    (["|no space", "</s>"], [TextPart("no space")], Termination.STOP),
]
COMPLETION_CASES = [
    pytest.param(version, *case, id=f"{version}-{n}")
    for version in VERSIONS
    for n, case in enumerate(COMPLETIONS)
    if version is V7 or not case[0][0].startswith("|")
] + [pytest.param(V7, ["Hi", "[SYSTEM_PROMPT]", "more"], [TextPart("Hi")], Termination.MALFORMED)]


@pytest.mark.parametrize(("version", "pieces", "expected", "termination"), COMPLETION_CASES)
def test_completions_parse_to_text_and_calls_and_stream_alike(
    version: Version, pieces: list[str], expected: list[Any], termination: Termination
) -> None:
    r = renderer(version)
    ids = _sampled(r, *pieces)
    result = r.parse_response(ids)
    parts = [
        UnparsedToolCallPart(p.raw, "?", incomplete=p.incomplete)
        if isinstance(p, UnparsedToolCallPart)
        else p
        for p in result.message.parts
    ]
    assert parts == expected and result.termination is termination
    for size in (1, 3):
        parser = r.stream_parser()
        for k in range(0, len(ids), size):
            parser.feed(ids[k : k + size])
        assert parser.finish() == result


@pytest.mark.parametrize("case", [0, 2, 3, 4, 7], ids=str)
def test_a_v7_completion_parsed_renders_back_to_its_ids(case: int) -> None:
    r = renderer(V7)
    ids = _sampled(r, *COMPLETIONS[case][0])
    message = r.parse_response(ids).message
    prompt = [{"role": "user", "content": "q"}]
    example = r.build_supervised_example([*prompt, message])
    assert example.tokens.tolist() == r.build_generation_prompt(prompt) + ids


@version_param
def test_the_packaged_tokenizer_loads_without_the_hub_and_pickles_by_name(
    version: Version,
) -> None:
    r = get_renderer(version.model_id)
    again = pickle.loads(pickle.dumps(r))
    messages = [{"role": "user", "content": "Hi ✨ [INST] <s>"}]
    assert again.build_generation_prompt(messages) == encoded(encoder(version), messages, None)
    assert packaged_tokenizer(encoder(version)) is packaged_tokenizer(encoder(version))


def test_the_v7_tokenizer_encodes_as_sentencepiece_after_its_space_and_decodes_bytes() -> None:
    sentencepiece = encoder(V7).instruct_tokenizer.tokenizer
    ours = MistralV7Tokenizer()
    rng = random.Random(7)
    alphabet = "ab c\n\t  é日🎉{}\"'0123456789[INST]</s>\x00\r"
    for _ in range(500):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40)))
        ids = ours.encode_ordinary(" " + text)
        assert ids == sentencepiece.encode(text, bos=False, eos=False)
        assert ours.decode_bytes(ids) == (" " + text).encode()
        assert not set(ids) & sentencepiece.special_ids


def test_another_sentencepiece_vocabulary_is_refused_not_mistaken_for_v7() -> None:
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    v3 = MistralTokenizer.from_file(_data_file("mistral_instruct_tokenizer_240323.model.v3"))
    with pytest.raises(TypeError, match=r"not the one MistralTokenizer.v7\(\) loads"):
        packaged_tokenizer(v3)
