"""The Harmony package: golden files of openai/harmony, openai-harmony itself as the oracle
for rendering and parsing, the parser's lenient and strict modes, and streaming.

Expected ids come from the golden files (tokenized by the real gpt-oss tokenizer, which
turns their control-token spellings into control tokens) or from the ``openai-harmony``
package; never from the code under test.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harmony import (
    BROWSER,
    PYTHON,
    ContentDelta,
    DeveloperContent,
    HarmonyEncoding,
    HarmonyError,
    HarmonyMessage,
    MessageFinished,
    MessageStarted,
    SystemContent,
    ToolDescription,
    ToolNamespace,
    drop_analysis,
    functions_namespace,
)
from harmony.parser import parse_header, read_header
from tests import strategies
from tests.conftest import tokenizer_for

SHARED = Path(__file__).resolve().parents[2] / "shared"
GOLDEN = SHARED / "harmony-golden"
os.environ.setdefault("TIKTOKEN_ENCODINGS_BASE", str(SHARED / "tiktoken"))

import openai_harmony as oh  # noqa: E402  (needs TIKTOKEN_ENCODINGS_BASE offline)


@pytest.fixture(scope="module")
def tok() -> Any:
    return tokenizer_for("openai/gpt-oss-20b")


@pytest.fixture(scope="module")
def enc(tok: Any) -> HarmonyEncoding:
    return HarmonyEncoding(tok)


@pytest.fixture(scope="module")
def oracle() -> oh.HarmonyEncoding:
    return oh.load_harmony_encoding(oh.HarmonyEncodingName.HARMONY_GPT_OSS)


def ids_of(tok: Any, text: str) -> list[int]:
    """Token ids of text written in Harmony markup (control-token spellings become control
    tokens), by the real tokenizer."""
    ids: list[int] = tok.encode(text, add_special_tokens=False)
    return ids


# -- openai-harmony conversion (test helper) --------------------------------------------


def _oh_namespace(ns: ToolNamespace) -> oh.ToolNamespaceConfig:
    return oh.ToolNamespaceConfig(
        name=ns.name,
        description=ns.description,
        tools=[
            oh.ToolDescription.new(
                t.name, t.description, dict(t.parameters) if t.parameters is not None else None
            )
            for t in ns.tools
        ],
    )


def to_oracle(m: HarmonyMessage) -> oh.Message:
    """Our message as an openai-harmony message."""
    content: Any
    if isinstance(m.content, SystemContent):
        s = m.content
        content = oh.SystemContent(
            model_identity=s.model_identity,
            reasoning_effort=None
            if s.reasoning_effort is None
            else oh.ReasoningEffort(s.reasoning_effort.capitalize()),
            knowledge_cutoff=s.knowledge_cutoff,
            conversation_start_date=s.conversation_start_date,
            channel_config=None
            if s.valid_channels is None
            else oh.ChannelConfig(
                valid_channels=list(s.valid_channels), channel_required=s.channel_required
            ),
            tools={ns.name: _oh_namespace(ns) for ns in s.tools} or None,
        )
    elif isinstance(m.content, DeveloperContent):
        d = m.content
        content = oh.DeveloperContent(
            instructions=d.instructions,
            tools={ns.name: _oh_namespace(ns) for ns in d.tools} or None,
        )
    else:
        content = m.content
    out = oh.Message.from_author_and_content(oh.Author(role=oh.Role(m.role), name=m.name), content)
    out.channel = m.channel
    out.recipient = m.recipient
    out.content_type = m.content_type
    return out


def oracle_view(m: oh.Message) -> tuple[Any, ...]:
    text = "".join(c.text for c in m.content if isinstance(c, oh.TextContent))
    return (m.author.role.value, m.author.name, m.channel, m.recipient, m.content_type, text)


def view(m: HarmonyMessage) -> tuple[Any, ...]:
    return (m.role, m.name, m.channel, m.recipient, m.content_type, m.text)


def oracle_render(
    oracle: oh.HarmonyEncoding, messages: list[HarmonyMessage], *, next_role: str | None = None
) -> list[int]:
    """openai-harmony's rendering of all the messages as given (no analysis dropping)."""
    conversation = oh.Conversation.from_messages([to_oracle(m) for m in messages])
    config = oh.RenderConversationConfig(auto_drop_analysis=False)
    if next_role is None:
        return list(oracle.render_conversation(conversation, config))
    return list(oracle.render_conversation_for_completion(conversation, oh.Role(next_role), config))


# -- golden files: rendering ------------------------------------------------------------


def system(**fields: Any) -> HarmonyMessage:
    return HarmonyMessage("system", SystemContent(**fields))


def developer(**fields: Any) -> HarmonyMessage:
    return HarmonyMessage("developer", DeveloperContent(**fields))


def user(text: str) -> HarmonyMessage:
    return HarmonyMessage("user", text)


def assistant(text: str, channel: str, **fields: Any) -> HarmonyMessage:
    return HarmonyMessage("assistant", text, channel=channel, **fields)


ROBOT = "Answer the user's questions like a robot."
CAPITAL = "What is the capital of the largest country in the world?"
DATE = "2025-06-28"
TWO_CHANNELS = ("analysis", "final")
LOOKUP_WEATHER = ToolDescription(
    "lookup_weather",
    "Use this tool to lookup the weather in a given location. Call it with the parameter "
    "'location', can be any textual description of a location.",
    {"type": "object", "properties": {"location": {"type": "string"}}, "required": ["location"]},
)
WEATHER_FORMAT = {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"}
FUNCTIONS_WITH_PARAMETERS = [
    ToolDescription("get_location", "Gets the location of the user."),
    ToolDescription(
        "get_current_weather",
        "Gets the current weather in the provided location.",
        {
            "type": "object",
            "properties": {
                "location": {
                    "type": "string",
                    "description": "The city and state, e.g. San Francisco, CA",
                },
                "format": WEATHER_FORMAT,
            },
            "required": ["location"],
        },
    ),
    ToolDescription(
        "get_multiple_weathers",
        "Gets the current weather in the provided list of locations.",
        {
            "type": "object",
            "properties": {
                "locations": {
                    "type": "array",
                    "items": {"type": "string"},
                    "description": 'List of city and state, e.g. ["San Francisco, CA", '
                    '"New York, NY"]',
                },
                "format": WEATHER_FORMAT,
            },
            "required": ["locations"],
        },
    ),
    ToolDescription(
        "kitchensink",
        "A function with various complex schemas.",
        {
            "description": "params object",
            "type": "object",
            "properties": {
                "string": {
                    "type": "string",
                    "title": "STRING",
                    "description": "A string",
                    "examples": ["hello", "world"],
                },
                "string_nullable": {
                    "type": "string",
                    "nullable": True,
                    "description": "A nullable string",
                    "default": "the default",
                },
                "string_enum": {"type": "string", "enum": ["a", "b", "c"]},
                "oneof_string_or_number": {
                    "oneOf": [
                        {"type": "string", "default": "default_string_in_oneof"},
                        {"type": "number", "description": "numbers can happen too"},
                    ],
                    "description": "a oneof",
                    "default": 20,
                },
            },
        },
    ),
]


def _effort(effort: str, instructions: bool) -> list[HarmonyMessage]:
    return [
        system(reasoning_effort=effort),
        *([developer(instructions=ROBOT)] if instructions else []),
        user(CAPITAL),
    ]


# name -> (messages, apply openai-harmony's analysis dropping, role of the next turn)
GOLDEN_RENDERS: dict[str, tuple[list[HarmonyMessage], bool, str | None]] = {
    "test_simple_convo": ([system(), user("What is 2 + 2?")], False, "assistant"),
    **{
        f"test_simple_convo_{effort}_effort{suffix}": (
            _effort(effort, not suffix),
            False,
            "assistant",
        )
        for effort in ("low", "medium", "high")
        for suffix in ("", "_no_instruction")
    },
    "test_reasoning_system_message": (
        [system(valid_channels=TWO_CHANNELS), user("What is 2 + 2?")],
        False,
        "assistant",
    ),
    "test_reasoning_system_message_no_instruction": (
        [
            system(reasoning_effort="high", valid_channels=TWO_CHANNELS),
            user("What is the best place to eat candy in the world?"),
        ],
        False,
        "assistant",
    ),
    "test_reasoning_system_message_with_dates": (
        [
            system(
                knowledge_cutoff="2021-01",
                conversation_start_date="2021-01-01",
                valid_channels=TWO_CHANNELS,
            ),
            user("What is 42 * pi?"),
        ],
        False,
        "assistant",
    ),
    "test_render_functions_with_parameters": (
        [
            system(reasoning_effort="high", conversation_start_date=DATE),
            developer(
                instructions="Always respond in riddles",
                tools=(functions_namespace(FUNCTIONS_WITH_PARAMETERS),),
            ),
            user("What is the weather like in SF?"),
        ],
        False,
        "assistant",
    ),
    "test_no_tools": ([system(conversation_start_date=DATE)], False, "assistant"),
    "test_browser_tool_only": (
        [system(conversation_start_date=DATE, tools=(BROWSER,))],
        False,
        "assistant",
    ),
    "test_browser_and_python_tool": (
        [system(conversation_start_date=DATE, tools=(BROWSER, PYTHON))],
        False,
        "assistant",
    ),
    "test_browser_and_function_tool": (
        [
            system(conversation_start_date=DATE, tools=(BROWSER,)),
            developer(tools=(functions_namespace([LOOKUP_WEATHER]),)),
        ],
        False,
        "assistant",
    ),
    "test_dropping_cot_by_default": (
        [
            user("What is 2 + 2?"),
            assistant("User asks: “What is 2 + 2?” Simple arithmetic. Provide answer.", "analysis"),
            assistant("2 + 2 equals 4.", "final"),
            user("What about 9 / 2?"),
        ],
        True,
        "assistant",
    ),
    "test_preserve_cot": (
        [
            user("What is 2 + 2?"),
            assistant('User asks a simple question: "What is 2 + 2?" The answer: 4.', "analysis"),
            assistant("2 + 2 equals 4.", "final"),
            user("What about 9 / 2?"),
        ],
        False,
        "assistant",
    ),
    "test_keep_analysis_between_finals": (
        [
            user("What is 2 + 2?"),
            assistant("4", "final"),
            user("What is 3 + 5?"),
            assistant("thinking 3+5", "analysis"),
            assistant("8", "final"),
        ],
        True,
        None,
    ),
    "test_does_not_drop_if_ongoing_analysis": (
        [
            user("What is the weather in SF?"),
            assistant(
                "User asks: “What is the weather in SF?” We need to use lookup_weather tool.",
                "analysis",
            ),
            assistant(
                '{"location": "San Francisco"}',
                "commentary",
                recipient="functions.lookup_weather",
                content_type="<|constrain|>json",
            ),
            HarmonyMessage(
                "tool",
                '{"temperature": 20, "description": "sunny"}',
                name="functions.lookup_weather",
            ),
        ],
        True,
        "assistant",
    ),
}
GOLDEN_PARSES = [
    "test_simple_reasoning_response",
    "test_simple_tool_call",
    "test_streamable_parser",
    "test_tool_response_parsing",
]


def test_every_golden_file_is_covered() -> None:
    files = {p.stem for p in GOLDEN.glob("*.txt")}
    assert files == set(GOLDEN_RENDERS) | set(GOLDEN_PARSES)


def golden_text(name: str) -> str:
    # Like openai/harmony's own tests: the files end with a newline that is not data.
    return (GOLDEN / f"{name}.txt").read_text(encoding="utf-8").rstrip()


@pytest.mark.parametrize("name", sorted(GOLDEN_RENDERS))
def test_golden_rendering(name: str, enc: HarmonyEncoding, tok: Any) -> None:
    messages, drop, next_role = GOLDEN_RENDERS[name]
    if drop:
        messages = drop_analysis(messages)
    ids = enc.render_conversation(messages, next_role=next_role)
    assert ids == ids_of(tok, golden_text(name))


@pytest.mark.parametrize("name", sorted(GOLDEN_RENDERS))
def test_golden_inputs_are_what_openai_harmony_renders(
    name: str, oracle: oh.HarmonyEncoding, tok: Any
) -> None:
    """The conversations above are the golden files' inputs (checks the test itself)."""
    messages, drop, next_role = GOLDEN_RENDERS[name]
    conversation = oh.Conversation.from_messages([to_oracle(m) for m in messages])
    config = oh.RenderConversationConfig(auto_drop_analysis=drop)
    if next_role is None:
        ids = oracle.render_conversation(conversation, config)
    else:
        ids = oracle.render_conversation_for_completion(conversation, oh.Role.ASSISTANT, config)
    assert list(ids) == ids_of(tok, golden_text(name))


def test_dropping_rule_follows_openai_harmony() -> None:
    q, a1, f1, q2, a2, f2 = (
        user("q"),
        assistant("a1", "analysis"),
        assistant("f1", "final"),
        user("q2"),
        assistant("a2", "analysis"),
        assistant("f2", "final"),
    )
    call = assistant("{}", "commentary", recipient="functions.f")
    # Dropped before the first final answer when the conversation ends in one ...
    assert drop_analysis([q, a1, f1, q2, a2, f2]) == [q, f1, q2, a2, f2]
    assert drop_analysis([q, a1, f1, q2]) == [q, f1, q2]
    # ... kept while a turn is still calling tools.
    assert drop_analysis([q, a1, call]) == [q, a1, call]
    assert drop_analysis([q, a1, f1, q2, a2, call]) == [q, a1, f1, q2, a2, call]


# -- golden files: parsing --------------------------------------------------------------


def golden_ids(tok: Any, name: str) -> list[int]:
    text = (GOLDEN / f"{name}.txt").read_text(encoding="utf-8")
    if name in ("test_simple_reasoning_response", "test_simple_tool_call"):
        return [int(x) for x in text.split()]
    return ids_of(tok, text.rstrip("\n"))


def test_golden_simple_reasoning_response(enc: HarmonyEncoding, tok: Any) -> None:
    result = enc.parse(golden_ids(tok, "test_simple_reasoning_response"), role="assistant")
    analysis = 'User asks: "What is 2 + 2?" Simple arithmetic. Provide answer.'
    assert [view(m) for m in result.messages] == [
        ("assistant", None, "analysis", None, None, analysis),
        ("assistant", None, "final", None, None, "2 + 2 = 4."),
    ]
    assert [(m.end, m.truncated) for m in result.messages] == [("return", False), (None, True)]
    assert result.issues == ()


def test_golden_simple_tool_call(enc: HarmonyEncoding, tok: Any) -> None:
    ids = golden_ids(tok, "test_simple_tool_call")
    result = enc.parse(ids, role="assistant")
    analysis = 'User asks: "What is the weather in Tokyo?" We need to use lookup_weather tool.'
    assert [view(m) for m in result.messages] == [
        ("assistant", None, "analysis", None, None, analysis),
        ("assistant", None, "analysis", "lookup_weather", "code", '{"location": "Tokyo"}'),
    ]
    assert result.messages[0].span == (0, ids.index(enc.tokens.start))
    assert result.messages[1].span == (ids.index(enc.tokens.start), len(ids))


def test_golden_streamable_parser_token_by_token(enc: HarmonyEncoding, tok: Any) -> None:
    ids = golden_ids(tok, "test_streamable_parser")
    parser = enc.stream_parser(role="assistant")
    for t in ids:
        parser.feed([t])
    result = parser.finish()
    assert [view(m)[:5] for m in result.messages] == [
        ("assistant", None, "analysis", None, None),
        ("assistant", None, "commentary", "browser.search", "code"),
        ("tool", "browser.search", "commentary", "assistant", None),
    ]
    assert result.messages[1].text == (
        '{"query": "current US president July 2025", "topn": 10, "source": "news"}'
    )
    assert result.messages[2].text == '{"result": "https://openai.com/"}'
    assert [m.end for m in result.messages] == ["end", "call", "end"]
    assert result.issues == ()


def test_golden_tool_response_parsing(enc: HarmonyEncoding, tok: Any) -> None:
    result = enc.parse(golden_ids(tok, "test_tool_response_parsing"), role=None)
    assert [view(m) for m in result.messages] == [
        (
            "tool",
            "browser.search",
            "commentary",
            "assistant",
            None,
            '{"result": "https://openai.com/"} ',
        ),
    ]
    assert result.messages[0].truncated


@pytest.mark.parametrize("name", GOLDEN_PARSES)
def test_golden_parses_equal_openai_harmony(
    name: str, enc: HarmonyEncoding, oracle: oh.HarmonyEncoding, tok: Any
) -> None:
    ids = golden_ids(tok, name)
    role = None if name == "test_tool_response_parsing" else "assistant"
    expected = oracle.parse_messages_from_completion_tokens(
        ids, None if role is None else oh.Role(role)
    )
    assert [view(m) for m in enc.parse(ids, role=role).messages] == [
        oracle_view(m) for m in expected
    ]


# -- openai-harmony as oracle: rendering ----------------------------------------------------

SCHEMAS: dict[str, dict[str, Any]] = {
    "nested_object": {
        "type": "object",
        "properties": {
            "loc": {
                "type": "object",
                "description": "A place",
                "properties": {
                    "lat": {"type": "number"},
                    "lon": {"type": "number", "description": "Longitude"},
                },
                "required": ["lat"],
            }
        },
        "required": ["loc"],
    },
    "deep_object": {
        "type": "object",
        "properties": {
            "o": {
                "type": "object",
                "properties": {"p": {"type": "object", "properties": {"q": {"type": "string"}}}},
            }
        },
    },
    "array_of_objects": {
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {"type": "object", "properties": {"a": {}}}}
        },
    },
    "array_without_items": {"type": "object", "properties": {"xs": {"type": "array"}}},
    "array_defaults": {
        "type": "object",
        "properties": {"xs": {"type": "array", "items": {"type": "integer"}, "default": [1, 2]}},
    },
    "array_of_oneof": {
        "type": "object",
        "properties": {
            "d": {"type": "array", "items": {"oneOf": [{"type": "string"}, {"type": "number"}]}}
        },
    },
    "defaults": {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "default": 5},
            "f": {"type": "number", "default": 0.5},
            "b": {"type": "boolean", "default": True},
            "z": {"type": "string", "default": None},
            "s": {"type": "string", "default": "x y"},
            "u": {"type": "string", "enum": ["c", "f"], "default": "c", "description": "Unit"},
            "o": {"type": "object", "default": {"k": "ü", "n": [1]}},
        },
    },
    "nullable_and_type_lists": {
        "type": "object",
        "properties": {
            "a": {"type": "string", "nullable": True},
            "b": {"type": ["string", "null"]},
            "c": {"type": ["integer", "null"]},
            "d": {"type": "integer", "nullable": True, "default": 3},
        },
        "required": ["b"],
    },
    "oneof_property": {
        "type": "object",
        "properties": {
            "s": {
                "oneOf": [
                    {"type": "string", "nullable": True},
                    {"type": "integer", "description": "num", "default": 1},
                    {"type": "string", "enum": ["x"], "default": "x"},
                ],
                "description": "either",
                "default": "txt",
            }
        },
    },
    "untyped": {
        "type": "object",
        "properties": {
            "a": {"description": "whatever"},
            "b": {"anyOf": [{"type": "string"}]},
            "c": {"const": "x"},
            "d": {"enum": ["x", "y"]},
            "e": {"type": "integer", "enum": [1, 2]},
            "f": {"type": "null"},
        },
    },
    "comments": {
        "type": "object",
        "description": "top",
        "properties": {
            "a": {"type": "string", "title": "T", "examples": ["e", 3]},
            "b": {"type": "string", "description": "line1\nline2"},
            "c": {"type": "string", "examples": []},
        },
    },
    "empty_properties": {"type": "object", "properties": {}},
    "object_without_properties": {"type": "object", "properties": {"o": {"type": "object"}}},
    "unicode": {
        "type": "object",
        "properties": {"città": {"type": "string", "description": "名前 🙂", "default": "né"}},
    },
}


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_function_tools_render_like_openai_harmony(
    name: str, enc: HarmonyEncoding, oracle: oh.HarmonyEncoding
) -> None:
    tools = (
        ToolDescription("f", "Does f.\nSecond line.", SCHEMAS[name]),
        ToolDescription("g", "No parameters."),
    )
    message = developer(instructions="Be brief.", tools=(ToolNamespace("functions", None, tools),))
    assert enc.render(message) == list(oracle.render(to_oracle(message)))


def test_corpus_tools_render_like_openai_harmony(
    enc: HarmonyEncoding, oracle: oh.HarmonyEncoding
) -> None:
    from tests.corpus import DASHED_TOOL, TOOLS

    message = developer(tools=(functions_namespace([*TOOLS, DASHED_TOOL]),))
    assert enc.render(message) == list(oracle.render(to_oracle(message)))


SYSTEMS = {
    "default": SystemContent(),
    "everything": SystemContent(
        model_identity="You are a test.",
        reasoning_effort="low",
        knowledge_cutoff="2023-01",
        conversation_start_date="2025-01-31",
        tools=(PYTHON, BROWSER),
    ),
    "nothing": SystemContent(None, None, None, None, None),
    "channels_optional": SystemContent(valid_channels=TWO_CHANNELS, channel_required=False),
    "custom_namespaces": SystemContent(
        tools=(
            ToolNamespace("zeta", None, (ToolDescription("f", ""),)),
            ToolNamespace("alpha", "Alpha.\nTwo lines.", ()),
        )
    ),
}


@pytest.mark.parametrize("name", sorted(SYSTEMS))
@pytest.mark.parametrize("functions", [False, True])
def test_system_and_developer_messages_render_like_openai_harmony(
    name: str, functions: bool, enc: HarmonyEncoding, oracle: oh.HarmonyEncoding
) -> None:
    messages = [HarmonyMessage("system", SYSTEMS[name])]
    if functions:
        messages.append(developer(tools=(functions_namespace([LOOKUP_WEATHER]),)))
    else:
        messages.append(developer(instructions=""))
    messages.append(user("Hi"))
    assert enc.render_conversation(messages, next_role="assistant") == oracle_render(
        oracle, messages, next_role="assistant"
    )


REQUIRED_CHANNELS = [
    ["analysis", "commentary", "final"],
    ["analysis", "final"],
    ["final"],
    ["final", "analysis"],
    [],
]


@pytest.mark.parametrize("channels", REQUIRED_CHANNELS, ids=lambda c: ",".join(c) or "none")
@pytest.mark.parametrize("functions", [False, True])
def test_required_channels_render_like_openai_harmony(
    channels: list[str], functions: bool, enc: HarmonyEncoding, oracle: oh.HarmonyEncoding
) -> None:
    """``with_required_channels`` rewrites the ``# Valid channels`` line (an empty list
    drops it, and with it the sentence sending function calls to ``commentary``)."""
    ours = SystemContent(conversation_start_date=DATE).with_required_channels(channels)
    theirs = oh.SystemContent.new().with_conversation_start_date(DATE)
    theirs = theirs.with_required_channels(channels)
    head = [oh.Message.from_role_and_content(oh.Role.SYSTEM, theirs)]
    messages = [HarmonyMessage("system", ours)]
    if functions:
        namespace = functions_namespace([LOOKUP_WEATHER])
        messages.append(developer(tools=(namespace,)))
        head.append(to_oracle(messages[-1]))
    messages.append(user("Hi"))
    head.append(to_oracle(messages[-1]))
    expected = oracle.render_conversation_for_completion(
        oh.Conversation.from_messages(head), oh.Role.ASSISTANT
    )
    assert enc.render_conversation(messages, next_role="assistant") == list(expected)


def test_required_channels_want_a_list_of_names() -> None:
    with pytest.raises(TypeError, match="channels: expected a sequence of channel names"):
        SystemContent().with_required_channels("final")


CONVERSATION = [
    system(conversation_start_date=DATE),
    developer(instructions="Be kind.", tools=(functions_namespace([LOOKUP_WEATHER]),)),
    user("Weather in Zürich? 🙂"),
    assistant("Need the tool.\n\nCall it.", "analysis"),
    assistant("Checking…", "commentary"),
    assistant(
        '{"location": "Zürich"}',
        "commentary",
        recipient="functions.lookup_weather",
        content_type="<|constrain|>json",
    ),
    HarmonyMessage(
        "tool",
        '{"temp": 20}',
        name="functions.lookup_weather",
        channel="commentary",
        recipient="assistant",
    ),
    assistant("print(1)", "analysis", recipient="python", content_type="code"),
    HarmonyMessage("tool", "1\n", name="python", channel="analysis", recipient="assistant"),
    assistant('{"query": "x"}', "commentary", recipient="browser.search", content_type="json"),
    HarmonyMessage("tool", "", name="browser.search", recipient="assistant"),
    assistant("It is 20 °C.", "final"),
    HarmonyMessage("user", "Thanks", name="bob"),
    HarmonyMessage("assistant", "no channel"),
]


def test_conversation_renders_like_openai_harmony(
    enc: HarmonyEncoding, oracle: oh.HarmonyEncoding
) -> None:
    assert enc.render_conversation(CONVERSATION) == oracle_render(oracle, CONVERSATION)


def test_training_render_ends_the_final_answer_with_return(
    enc: HarmonyEncoding, oracle: oh.HarmonyEncoding
) -> None:
    messages = CONVERSATION[:-2]
    conversation = oh.Conversation.from_messages([to_oracle(m) for m in messages])
    expected = oracle.render_conversation_for_training(
        conversation, oh.RenderConversationConfig(auto_drop_analysis=False)
    )
    ids = enc.render_conversation(messages, training=True)
    assert ids == list(expected)
    assert ids[-1] == enc.tokens.return_


def test_message_text_spelling_control_tokens_stays_text(enc: HarmonyEncoding) -> None:
    message = assistant("a <|end|> b <|start|>", "final")
    ids = enc.render(message)
    assert ids.count(enc.tokens.end) == 1 and ids.count(enc.tokens.start) == 1
    assert enc.parse(ids).messages[0].text == "a <|end|> b <|start|>"


# -- openai-harmony as oracle: parsing --------------------------------------------------------

# Completions after ``<|start|>assistant``, as models sample them.
COMPLETIONS = {
    "final_only": "<|channel|>final<|message|>Hello!<|return|>",
    "analysis_then_final": (
        "<|channel|>analysis<|message|>Think.\n\nMore.<|end|>"
        "<|start|>assistant<|channel|>final<|message|>Answer 🙂<|return|>"
    ),
    "call_recipient_after_channel": (
        "<|channel|>analysis<|message|>Need weather.<|end|>"
        "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
        '<|message|>{"city": "Paris"}<|call|>'
    ),
    "call_constrain_glued": (
        "<|channel|>commentary to=functions.get_weather<|constrain|>json"
        '<|message|>{"city": "Paris"}<|call|>'
    ),
    "call_recipient_before_channel": (
        ' to=functions.get_weather<|channel|>commentary json<|message|>{"city": "Paris"}<|call|>'
    ),
    "preamble_then_call": (
        "<|channel|>commentary<|message|>Let me check.<|end|>"
        "<|start|>assistant to=functions.lookup<|channel|>commentary <|constrain|>json"
        "<|message|>{}<|call|>"
    ),
    "builtin_python": "<|channel|>analysis to=python code<|message|>print(2 ** 10)<|call|>",
    "builtin_browser": ('<|channel|>commentary to=browser.open code<|message|>{"id": 3}<|call|>'),
    "unknown_channel": "<|channel|>scratchpad<|message|>kept<|return|>",
    "no_channel": "<|message|>bare<|return|>",
    "empty_final": "<|channel|>final<|message|><|return|>",
    "truncated_body": "<|channel|>analysis<|message|>The user wants",
    "truncated_after_end": "<|channel|>analysis<|message|>Done.<|end|>",
    "tool_output_in_completion": (
        "<|channel|>commentary to=functions.f<|message|>{}<|call|>"
        '<|start|>functions.f to=assistant<|channel|>commentary<|message|>{"ok": true}<|end|>'
        "<|start|>assistant<|channel|>final<|message|>ok<|return|>"
    ),
    "multiline_unicode": (
        "<|channel|>final<|message|>日本語\n\n  indented\tand tabs — ünïcödé 𝔘<|return|>"
    ),
}


@pytest.mark.parametrize("name", sorted(COMPLETIONS))
def test_parsing_equals_openai_harmony(
    name: str, enc: HarmonyEncoding, oracle: oh.HarmonyEncoding, tok: Any
) -> None:
    ids = ids_of(tok, COMPLETIONS[name])
    expected = oracle.parse_messages_from_completion_tokens(ids, oh.Role.ASSISTANT, strict=False)
    assert [view(m) for m in enc.parse(ids, role="assistant").messages] == [
        oracle_view(m) for m in expected
    ]


@pytest.mark.parametrize("next_role", [None, "assistant"])
def test_parsing_a_rendered_conversation_equals_openai_harmony(
    next_role: str | None, enc: HarmonyEncoding, oracle: oh.HarmonyEncoding
) -> None:
    # System and developer contents parse back as text; openai-harmony cannot parse the
    # "user:bob" author it renders (we can: see the strict test below).
    messages = [m for m in CONVERSATION[2:] if m.name != "bob"]
    ids = oracle_render(oracle, messages)
    expected = oracle.parse_messages_from_completion_tokens(ids, None, strict=True)
    if next_role is not None:
        ids = oracle_render(oracle, messages, next_role=next_role)
    result = enc.parse(ids)
    assert [view(m) for m in result.messages] == [oracle_view(m) for m in expected]
    assert [view(m) for m in result.messages] == [view(m) for m in messages]
    assert result.pending_header == ("assistant" if next_role else None)
    # The assistant message without a channel is the only issue.
    assert [i.message for i in result.issues] == [
        "expected <|channel|> in an assistant message header"
    ]


# -- lenient and strict modes ------------------------------------------------------------------

# completion -> (lenient messages as (channel, recipient, content_type, text), issue count,
#                strict error: (where, words of the message)); where is (control token,
#                occurrence, offset) naming the token, or None for the end of the ids.
Where = tuple[str, int, int] | None
LENIENT: dict[str, tuple[str, list[tuple[Any, ...]], int, tuple[Where, str]]] = {
    "recipient_after_channel": (
        "<|channel|>commentary to=functions.f json<|message|>{}<|call|>",
        [("commentary", "functions.f", "json", "{}")],
        0,
        (("<|channel|>", 0, 0), "expected the recipient before <|channel|>"),
    ),
    "constrain_glued": (
        " to=functions.f<|channel|>commentary<|constrain|>json<|message|>{}<|call|>",
        [("commentary", "functions.f", "<|constrain|>json", "{}")],
        0,
        (("<|constrain|>", 0, 0), "expected a space before <|constrain|>"),
    ),
    "constrain_glued_to_recipient_after_channel": (
        "<|channel|>commentary to=functions.f<|constrain|>json<|message|>{}<|call|>",
        [("commentary", "functions.f", "<|constrain|>json", "{}")],
        0,
        (("<|channel|>", 0, 0), "expected the recipient before <|channel|>"),
    ),
    "missing_message": (
        '<|channel|>commentary to=functions.f <|constrain|>json{"a": 1}<|call|>',
        [("commentary", "functions.f", "<|constrain|>json", '{"a": 1}')],
        1,
        (("<|call|>", 0, 0), "expected <|message|> before <|call|>"),
    ),
    "missing_message_plain_text": (
        "<|channel|>final Hello there<|return|>",
        [("final", None, None, "Hello there")],
        1,
        (("<|return|>", 0, 0), "expected <|message|> before <|return|>"),
    ),
    "repeated_start": (
        "<|channel|>analysis<|message|>a<|end|><|start|><|start|>assistant"
        "<|channel|>final<|message|>b<|return|>",
        [("analysis", None, None, "a"), ("final", None, None, "b")],
        1,
        (("<|start|>", 1, 0), "a repeated <|start|>"),
    ),
    "start_inside_header": (
        "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|start|>assistant"
        "<|channel|>final<|message|>b<|return|>",
        [("analysis", None, None, "a"), ("final", None, None, "b")],
        1,
        (("<|start|>", 1, 0), "<|start|> inside a header"),
    ),
    "unknown_channel": (
        "<|channel|>scratch<|message|>x<|return|>",
        [("scratch", None, None, "x")],
        1,
        (("<|channel|>", 0, 0), "unknown channel 'scratch'"),
    ),
    "truncated_body": (
        "<|channel|>final<|message|>Once upon",
        [("final", None, None, "Once upon")],
        0,
        (None, "before the end of the tokens"),
    ),
    "channel_inside_body": (
        "<|channel|>analysis<|message|>a<|channel|>final<|message|>b<|return|>",
        [("analysis", None, None, "a"), ("final", None, None, "b")],
        1,
        (("<|channel|>", 1, 0), "before <|channel|>"),
    ),
    "start_inside_body": (
        "<|channel|>analysis<|message|>a<|start|>assistant<|channel|>final<|message|>b<|return|>",
        [("analysis", None, None, "a"), ("final", None, None, "b")],
        1,
        (("<|start|>", 0, 0), "before <|start|>"),
    ),
    "no_channel": (
        "<|message|>bare<|return|>",
        [(None, None, None, "bare")],
        1,
        (("<|message|>", 0, 0), "expected <|channel|>"),
    ),
    "doubled_channel": (
        "<|channel|>final<|channel|>final<|message|>x<|return|>",
        [("final", None, None, "x")],
        1,
        (("<|channel|>", 1, 0), "a second <|channel|>"),
    ),
    "text_between_messages": (
        "<|channel|>final<|message|>a<|end|>stray<|start|>assistant<|channel|>final"
        "<|message|>b<|return|>",
        [("final", None, None, "a"), (None, None, None, "stray"), ("final", None, None, "b")],
        2,
        (("<|end|>", 0, 1), "text outside a message"),
    ),
    "whitespace_between_messages": (
        "<|channel|>final<|message|>a<|end|>\n<|start|>assistant<|channel|>final"
        "<|message|>b<|return|>",
        [("final", None, None, "a"), ("final", None, None, "b")],
        1,
        (("<|start|>", 0, 0), "whitespace '\\n' between messages"),
    ),
    "missing_start": (
        "<|channel|>analysis<|message|>a<|end|><|channel|>final<|message|>b<|return|>",
        [("analysis", None, None, "a"), ("final", None, None, "b")],
        1,
        (("<|channel|>", 1, 0), "expected <|start|> before <|channel|>"),
    ),
    "stray_control_token_in_body": (
        "<|channel|>final<|message|>a<|constrain|>b<|return|>",
        [("final", None, None, "a<|constrain|>b")],
        1,
        (("<|constrain|>", 0, 0), "<|constrain|> outside a message header"),
    ),
}


@pytest.mark.parametrize("name", sorted(LENIENT))
def test_lenient_mode_accepts_and_repairs(name: str, enc: HarmonyEncoding, tok: Any) -> None:
    text, expected, issues, _ = LENIENT[name]
    result = enc.parse(ids_of(tok, text), role="assistant")
    assert [(m.channel, m.recipient, m.content_type, m.text) for m in result.messages] == expected
    assert len(result.issues) == issues, result.issues


@pytest.mark.parametrize("name", sorted(LENIENT))
def test_strict_mode_says_what_was_expected_and_where(
    name: str, enc: HarmonyEncoding, tok: Any
) -> None:
    text, _, _, (where, words) = LENIENT[name]
    ids = ids_of(tok, text)
    if where is None:
        position = len(ids)
    else:
        spelling, occurrence, offset = where
        token = enc.table.control_id(spelling)
        position = [k for k, t in enumerate(ids) if t == token][occurrence] + offset
    with pytest.raises(HarmonyError, match=r"^token \d+: ") as error:
        enc.parse(ids, role="assistant", strict=True)
    assert error.value.position == position
    assert words in str(error.value)


def test_strict_mode_accepts_the_canonical_form(enc: HarmonyEncoding) -> None:
    messages = CONVERSATION[2:-1]
    result = enc.parse(enc.render_conversation(messages), strict=True)
    assert [view(m) for m in result.messages] == [view(m) for m in messages]
    assert result.messages[-1].author == "user:bob"


def test_truncated_header_is_reported_not_invented(enc: HarmonyEncoding, tok: Any) -> None:
    ids = ids_of(tok, "<|channel|>final<|message|>a<|end|><|start|>assistant<|channel|>fin")
    result = enc.parse(ids, role="assistant")
    assert [m.text for m in result.messages] == ["a"]
    assert result.pending_header == "assistant<|channel|>fin"
    assert result.issues == ()


def test_spans_cover_each_message_with_its_markers(enc: HarmonyEncoding, tok: Any) -> None:
    text = COMPLETIONS["analysis_then_final"]
    ids = ids_of(tok, text)
    result = enc.parse(ids, role="assistant")
    first, second = result.messages
    assert first.span == (0, ids.index(enc.tokens.end) + 1)
    assert second.span == (first.span[1], len(ids))
    assert tok.decode(ids[second.span[0] : second.span[1]]).startswith("<|start|>assistant")


# -- streaming ----------------------------------------------------------------------------------

STREAMED = [COMPLETIONS[k] for k in ("analysis_then_final", "call_recipient_after_channel")] + [
    LENIENT[k][0] for k in ("missing_message", "text_between_messages", "start_inside_header")
]


@pytest.mark.parametrize("text", STREAMED)
def test_streaming_equals_batch_at_every_split(text: str, enc: HarmonyEncoding, tok: Any) -> None:
    ids = ids_of(tok, text)
    expected = enc.parse(ids, role="assistant")
    for cut in range(len(ids) + 1):
        parser = enc.stream_parser(role="assistant")
        parser.feed(ids[:cut])
        parser.feed(ids[cut:])
        assert parser.finish() == expected, cut
    parser = enc.stream_parser(role="assistant")
    for t in ids:
        parser.feed([t])
    assert parser.finish() == expected


def test_stream_events_rebuild_the_messages(enc: HarmonyEncoding, tok: Any) -> None:
    ids = ids_of(tok, COMPLETIONS["tool_output_in_completion"])
    parser = enc.stream_parser(role="assistant")
    events = [e for t in ids for e in parser.feed([t])]
    result = parser.finish()
    events += parser.final_events
    started = [e.index for e in events if isinstance(e, MessageStarted)]
    finished = [e.message for e in events if isinstance(e, MessageFinished)]
    assert started == [0, 1, 2]
    assert finished == list(result.messages)
    for k, m in enumerate(result.messages):
        assert "".join(e.text for e in events if isinstance(e, ContentDelta) and e.index == k) == (
            m.text
        )


# -- properties -----------------------------------------------------------------------------------

_names = st.from_regex(r"[a-z][a-z0-9_]{0,8}(\.[a-z][a-z0-9_]{0,8})?", fullmatch=True)


@st.composite
def harmony_messages(draw: st.DrawFn) -> HarmonyMessage:
    role = draw(st.sampled_from(["user", "assistant", "tool", "developer"]))
    channel = draw(st.sampled_from([None, "analysis", "commentary", "final"]))
    recipient = draw(st.one_of(st.none(), _names))
    content_type = draw(st.sampled_from([None, "json", "<|constrain|>json", "code"]))
    # A tool's name needs a namespace (``functions.x``) to be told apart from a role.
    name = "functions." + draw(_names) if role == "tool" else None
    if role == "assistant" and channel is None:
        channel = "final"
    return HarmonyMessage(role, draw(strategies.text), name, channel, recipient, content_type)


@given(messages=st.lists(harmony_messages(), max_size=5))
def test_rendered_messages_parse_back_strictly(messages: list[HarmonyMessage]) -> None:
    enc = HarmonyEncoding(tokenizer_for("openai/gpt-oss-20b"))
    ids = enc.render_conversation(messages)
    result = enc.parse(ids, strict=True)
    assert [view(m) for m in result.messages] == [view(m) for m in messages]
    assert all(not m.truncated for m in result.messages)


@given(data=st.data())
def test_random_ids_never_crash_and_strict_only_raises_harmony_errors(data: st.DataObject) -> None:
    enc = HarmonyEncoding(tokenizer_for("openai/gpt-oss-20b"))
    table = enc.table
    controls = sorted(table.control_ids)
    piece = st.one_of(
        st.sampled_from(controls).map(lambda t: [t]),
        strategies.text.map(table.encode),
        st.sampled_from(["assistant", " to=functions.f", "final", " json", "user"]).map(
            table.encode
        ),
    )
    ids = [t for p in data.draw(st.lists(piece, max_size=25)) for t in p]
    role = data.draw(st.sampled_from([None, "assistant"]))
    result = enc.parse(ids, role=role)
    ends = [m.span[1] for m in result.messages if m.span]
    assert ends == sorted(ends) and all(0 <= e <= len(ids) for e in ends)
    parser = enc.stream_parser(role=role)
    for t in ids:
        parser.feed([t])
    assert parser.finish() == result
    with contextlib.suppress(HarmonyError):
        enc.parse(ids, role=role, strict=True)


@given(text=strategies.text)
def test_a_body_without_control_tokens_is_kept_whole(text: str) -> None:
    enc = HarmonyEncoding(tokenizer_for("openai/gpt-oss-20b"))
    prefix = enc.render(assistant("", "final"))[:-1]  # up to <|message|>
    ids = prefix + enc.table.encode(text)
    (message,) = enc.parse(ids).messages
    assert message.text == enc.table.decode(enc.table.encode(text))
    assert message.truncated


_HEADER_WORDS = st.sampled_from(
    [
        *("assistant", "user", "tool", "functions.f", "to=functions.f", "to=", "analysis"),
        *("final", "commentary", "json", "<|constrain|>json", "x.y", "", " ", "  ", "\n", "é"),
    ]
)


@given(
    segments=st.lists(
        st.tuples(st.sampled_from([1, 2]), st.lists(_HEADER_WORDS, max_size=4).map(" ".join)),
        max_size=3,
    ),
    first=st.lists(_HEADER_WORDS, max_size=3).map(" ".join),
    role=st.sampled_from([None, "assistant"]),
    valid=st.sampled_from([None, ("analysis", "commentary", "final")]),
    missing_message=st.booleans(),
    positions=st.lists(st.integers(0, 10_000), min_size=8, max_size=8, unique=True),
)
def test_a_header_read_again_at_other_positions_reads_as_parsed_there(
    segments: list[tuple[int, str]],
    first: str,
    role: str | None,
    valid: tuple[str, ...] | None,
    missing_message: bool,
    positions: list[int],
) -> None:
    """Headers are read once and placed at each later header's token positions: every read,
    the first and the kept ones, must equal parsing the header where it is."""
    kinds = [0, *(kind for kind, _ in segments)]
    texts = [first, *(text for _, text in segments)]
    options: dict[str, Any] = {
        "role": role,
        "default_role": "assistant",
        "valid_channels": valid,
        "missing_message": missing_message,
    }
    marks = sorted(positions)
    for at in (marks[: len(kinds)], marks[-len(kinds) :], marks[: len(kinds)]):
        assert read_header(kinds, texts, at, **options) == parse_header(kinds, texts, at, **options)
