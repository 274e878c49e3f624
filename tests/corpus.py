"""The shared corpus of conversations (OpenAI chat dicts) every model is tested on.

Each entry has an id and tags saying what it exercises; a model's tests select the
entries its format can express (for example gpt-oss renders one tool call per assistant
message) and may add format-specific ones.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search",
        "description": "Search the web.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "limit": {"type": "integer", "default": 5},
            },
            "required": ["query"],
        },
    },
}
DASHED_TOOL = {
    "type": "function",
    "function": {
        "name": "get-weather.v2",
        "description": "A tool whose name has a dash, a dot and a digit.",
        "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
    },
}
TOOLS = [WEATHER_TOOL, SEARCH_TOOL]

LONG_TEXT = " ".join(
    f"Paragraph {i}: the quick brown fox jumps over the lazy dog, über naïve café {i * 7}."
    for i in range(400)
)


def call(name: str, arguments: dict[str, Any], call_id: str) -> dict[str, Any]:
    """An OpenAI tool call with dict arguments."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def result(call_id: str, content: str, name: str | None = None) -> dict[str, Any]:
    """An OpenAI tool result message."""
    out: dict[str, Any] = {"role": "tool", "tool_call_id": call_id, "content": content}
    if name is not None:
        out["name"] = name
    return out


@dataclass
class Conversation:
    id: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    tags: frozenset[str] = field(default_factory=frozenset)

    def copy(self) -> Conversation:
        return copy.deepcopy(self)

    def __repr__(self) -> str:
        return self.id


def _c(id: str, messages: list[dict[str, Any]], tools: Any = None, *tags: str) -> Conversation:
    return Conversation(id, messages, tools, frozenset(tags))


SYS = {"role": "system", "content": "You are a helpful assistant."}

CORPUS: list[Conversation] = [
    _c("single_user", [{"role": "user", "content": "Hello!"}]),
    _c("system_user", [SYS, {"role": "user", "content": "What is 2+2?"}], None, "system"),
    _c(
        "system_user_assistant",
        [SYS, {"role": "user", "content": "What is 2+2?"}, {"role": "assistant", "content": "4"}],
        None,
        "system",
    ),
    _c(
        "multi_turn",
        [
            {"role": "user", "content": "Hi"},
            {"role": "assistant", "content": "Hello! How can I help?"},
            {"role": "user", "content": "Tell me a joke."},
            {"role": "assistant", "content": "Why did the chicken cross the road?"},
        ],
        None,
        "multi_turn",
    ),
    _c(
        "multi_turn_system",
        [
            SYS,
            {"role": "user", "content": "Name a colour."},
            {"role": "assistant", "content": "Blue."},
            {"role": "user", "content": "Another one?"},
            {"role": "assistant", "content": "Green."},
            {"role": "user", "content": "Thanks."},
        ],
        None,
        "multi_turn",
        "system",
    ),
    _c(
        "reasoning_last",
        [
            {"role": "user", "content": "Is 17 prime?"},
            {
                "role": "assistant",
                "content": "Yes, 17 is prime.",
                "reasoning_content": "17 has no divisors other than 1 and itself.",
            },
        ],
        None,
        "reasoning",
    ),
    _c(
        "reasoning_history",
        [
            {"role": "user", "content": "Is 17 prime?"},
            {
                "role": "assistant",
                "content": "Yes.",
                "reasoning_content": "Check divisors up to 4.",
            },
            {"role": "user", "content": "And 21?"},
            {
                "role": "assistant",
                "content": "No, 21 = 3 x 7.",
                "reasoning_content": "21 is divisible by 3.",
            },
        ],
        None,
        "reasoning",
        "multi_turn",
    ),
    _c(
        "reasoning_history_then_user",
        [
            {"role": "user", "content": "Is 17 prime?"},
            {"role": "assistant", "content": "Yes.", "reasoning_content": "Divisors up to 4."},
            {"role": "user", "content": "And 21?"},
        ],
        None,
        "reasoning",
        "multi_turn",
    ),
    _c(
        "reasoning_multiline",
        [
            {"role": "user", "content": "Plan a trip."},
            {
                "role": "assistant",
                "content": "Day 1: museums.\nDay 2: hiking.",
                "reasoning_content": "First, list options.\n\nThen pick two.\n- museums\n- hiking",
            },
        ],
        None,
        "reasoning",
    ),
    _c(
        "reasoning_as_parts",
        [
            {"role": "user", "content": "Capital of France?"},
            {
                "role": "assistant",
                "content": [
                    {"type": "thinking", "thinking": "The capital of France is Paris."},
                    {"type": "text", "text": "Paris."},
                ],
            },
        ],
        None,
        "reasoning",
        "parts",
    ),
    _c(
        "list_content_user",
        [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "First part. "},
                    {"type": "text", "text": "Second part."},
                ],
            },
            {"role": "assistant", "content": "Got both parts."},
        ],
        None,
        "parts",
    ),
    _c(
        "list_content_system",
        [
            {"role": "system", "content": [{"type": "text", "text": "Be terse."}]},
            {"role": "user", "content": "Why is the sky blue?"},
        ],
        None,
        "parts",
        "system",
    ),
    _c(
        "unicode_emoji",
        [
            {"role": "user", "content": "日本語で答えて 🙂 — ¿qué tal? Ünïcödé ✓ 𝔘𝔫𝔦"},
            {"role": "assistant", "content": "はい、元気です！🎉 Ça va très bien. Ω≈ç√∫"},
        ],
        None,
        "unicode",
    ),
    _c(
        "unicode_reasoning",
        [
            {"role": "user", "content": "Translate 'cat' to Chinese."},
            {
                "role": "assistant",
                "content": "猫 (māo) 🐱",
                "reasoning_content": "The word is 猫; pinyin māo.",
            },
        ],
        None,
        "unicode",
        "reasoning",
    ),
    _c(
        "combining_characters",
        [
            {"role": "user", "content": "Cafe\u0301 and re\u0301sume\u0301 and a\u0308"},
            {"role": "assistant", "content": "Noted: e\u0301."},
        ],
        None,
        "unicode",
    ),
    _c(
        "empty_user",
        [{"role": "user", "content": ""}, {"role": "assistant", "content": "You said nothing."}],
        None,
        "empty",
    ),
    _c(
        "empty_assistant",
        [{"role": "user", "content": "Say nothing."}, {"role": "assistant", "content": ""}],
        None,
        "empty",
    ),
    _c(
        "whitespace_content",
        [
            {"role": "user", "content": "  leading and trailing spaces  "},
            {"role": "assistant", "content": "\tTabs\tand\nnewlines\n\n"},
        ],
        None,
        "whitespace",
    ),
    _c(
        "long_content",
        [{"role": "user", "content": LONG_TEXT}, {"role": "assistant", "content": LONG_TEXT}],
        None,
        "long",
    ),
    _c(
        "code_content",
        [
            {"role": "user", "content": "Write hello world in Python."},
            {
                "role": "assistant",
                "content": '```python\ndef main():\n    print("hello, world")\n\n\nmain()\n```',
            },
        ],
        None,
        "code",
    ),
    _c(
        "tools_declared_no_call",
        [SYS, {"role": "user", "content": "Hi there"}],
        TOOLS,
        "tools",
        "system",
    ),
    _c(
        "tools_declared_no_system",
        [{"role": "user", "content": "What's the weather?"}],
        TOOLS,
        "tools",
    ),
    _c(
        "tool_call_single",
        [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [call("get_weather", {"city": "Paris"}, "call_1")],
            },
        ],
        TOOLS,
        "tools",
        "tool_call",
    ),
    _c(
        "tool_call_with_text",
        [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": "Let me check.",
                "tool_calls": [call("get_weather", {"city": "Paris", "unit": "celsius"}, "c1")],
            },
        ],
        TOOLS,
        "tools",
        "tool_call",
        "text_and_calls",
    ),
    _c(
        "tool_call_with_reasoning",
        [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": "I should call the weather tool.",
                "tool_calls": [call("get_weather", {"city": "Paris"}, "c1")],
            },
        ],
        TOOLS,
        "tools",
        "tool_call",
        "reasoning",
    ),
    _c(
        "tool_call_after_blank_text_with_reasoning",
        [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": "\n",
                "reasoning_content": "Only a newline before the call.",
                "tool_calls": [call("get_weather", {"city": "Paris"}, "c1")],
            },
            result("c1", "18C", "get_weather"),
        ],
        TOOLS,
        "tools",
        "tool_call",
        "reasoning",
        "text_and_calls",
    ),
    _c(
        "tool_call_parallel",
        [
            {"role": "user", "content": "Weather in Paris and London?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    call("get_weather", {"city": "Paris"}, "c1"),
                    call("get_weather", {"city": "London"}, "c2"),
                ],
            },
        ],
        TOOLS,
        "tools",
        "tool_call",
        "parallel",
    ),
    _c(
        "tool_result_single",
        [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [call("get_weather", {"city": "Paris"}, "c1")],
            },
            result("c1", '{"temp": 18, "sky": "clear"}', "get_weather"),
        ],
        TOOLS,
        "tools",
        "tool_call",
        "tool_result",
    ),
    _c(
        "tool_result_then_answer",
        [
            SYS,
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": "Call the tool.",
                "tool_calls": [call("get_weather", {"city": "Paris"}, "c1")],
            },
            result("c1", "18°C and clear", "get_weather"),
            {
                "role": "assistant",
                "content": "It is 18°C and clear in Paris.",
                "reasoning_content": "The tool says 18°C.",
            },
        ],
        TOOLS,
        "tools",
        "tool_call",
        "tool_result",
        "reasoning",
        "system",
    ),
    _c(
        "tool_results_consecutive",
        [
            {"role": "user", "content": "Weather in Paris and London?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    call("get_weather", {"city": "Paris"}, "c1"),
                    call("get_weather", {"city": "London"}, "c2"),
                ],
            },
            result("c1", "18°C", "get_weather"),
            result("c2", "12°C", "get_weather"),
            {"role": "assistant", "content": "Paris 18°C, London 12°C."},
        ],
        TOOLS,
        "tools",
        "tool_call",
        "tool_result",
        "parallel",
    ),
    _c(
        "tool_results_consecutive_pending",
        [
            {"role": "user", "content": "Weather in Paris and London?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    call("get_weather", {"city": "Paris"}, "c1"),
                    call("get_weather", {"city": "London"}, "c2"),
                ],
            },
            result("c1", "18°C", "get_weather"),
            result("c2", "12°C", "get_weather"),
        ],
        TOOLS,
        "tools",
        "tool_call",
        "tool_result",
        "parallel",
    ),
    _c(
        "multi_step_tools",
        [
            {"role": "user", "content": "Find the weather where the Eiffel tower is."},
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": "First search.",
                "tool_calls": [call("search", {"query": "Eiffel tower city"}, "c1")],
            },
            result("c1", "Paris", "search"),
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": "Now the weather.",
                "tool_calls": [call("get_weather", {"city": "Paris"}, "c2")],
            },
            result("c2", "Sunny, 25°C", "get_weather"),
            {
                "role": "assistant",
                "content": "It is sunny and 25°C in Paris.",
                "reasoning_content": "Done.",
            },
        ],
        TOOLS,
        "tools",
        "tool_call",
        "tool_result",
        "reasoning",
        "multi_step",
    ),
    _c(
        "tools_then_new_question",
        [
            {"role": "user", "content": "Weather in Rome?"},
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": "Use the tool.",
                "tool_calls": [call("get_weather", {"city": "Rome"}, "c1")],
            },
            result("c1", "Hot", "get_weather"),
            {"role": "assistant", "content": "It is hot.", "reasoning_content": "Easy."},
            {"role": "user", "content": "And in Oslo?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [call("get_weather", {"city": "Oslo"}, "c2")],
            },
        ],
        TOOLS,
        "tools",
        "tool_call",
        "tool_result",
        "reasoning",
        "multi_turn",
    ),
    _c(
        "tool_call_unicode_args",
        [
            {"role": "user", "content": "Weather in Zürich and 東京?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [call("search", {"query": "Zürich 東京 ☀️", "limit": 3}, "c1")],
            },
        ],
        TOOLS,
        "tools",
        "tool_call",
        "unicode",
    ),
    _c(
        "tool_call_nested_args",
        [
            {"role": "user", "content": "Complex call"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    call(
                        "search",
                        {
                            "query": "nested",
                            "filters": {"lang": ["en", "fr"], "safe": True, "score": 0.5},
                            "limit": None,
                        },
                        "c1",
                    )
                ],
            },
        ],
        TOOLS,
        "tools",
        "tool_call",
    ),
    _c(
        "tool_call_string_args",
        [
            {"role": "user", "content": "Weather in Paris?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
        ],
        TOOLS,
        "tools",
        "tool_call",
        "string_args",
    ),
    _c(
        "tool_call_empty_args",
        [
            {"role": "user", "content": "Call it with nothing."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [call("search", {}, "c1")],
            },
        ],
        TOOLS,
        "tools",
        "tool_call",
    ),
    _c(
        "tool_name_with_punctuation",
        [
            {"role": "user", "content": "Use the v2 tool."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [call("get-weather.v2", {"q": "Lyon"}, "c1")],
            },
            result("c1", "rain", "get-weather.v2"),
            {"role": "assistant", "content": "Rain in Lyon."},
        ],
        [DASHED_TOOL],
        "tools",
        "tool_call",
        "tool_result",
    ),
    _c(
        "tool_result_json_multiline",
        [
            {"role": "user", "content": "List files."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [call("search", {"query": "ls"}, "c1")],
            },
            result("c1", '{\n  "files": ["a.txt", "b.txt"],\n  "count": 2\n}', "search"),
            {"role": "assistant", "content": "Two files: a.txt and b.txt."},
        ],
        TOOLS,
        "tools",
        "tool_call",
        "tool_result",
    ),
    _c(
        "special_looking_text",
        [
            {
                "role": "user",
                "content": "Explain what <think> and </think> tags do in HTML-ish text.",
            },
            {
                "role": "assistant",
                "content": "They look like tags: <b>bold</b> and <tool_call> text.",
            },
        ],
        None,
        "adversarial",
    ),
    _c(
        "system_second_position",
        [
            {"role": "user", "content": "Hi"},
            {"role": "system", "content": "Mid-conversation system note."},
            {"role": "assistant", "content": "Hello."},
        ],
        None,
        "system",
        "system_late",
    ),
    _c(
        "reasoning_empty_string",
        [
            {"role": "user", "content": "Quick question"},
            {"role": "assistant", "content": "Quick answer", "reasoning_content": ""},
        ],
        None,
        "reasoning",
        "empty",
    ),
    _c(
        "numbers_and_symbols",
        [
            {"role": "user", "content": "3.14159 * 2 = ? and 1e10 + 0x1F; a@b.c #tag $5 %20"},
            {"role": "assistant", "content": "6.28318; 10000000031. Done!"},
        ],
        None,
        "code",
    ),
    _c(
        "assistant_prefill_history",
        [
            {"role": "user", "content": "Count to three."},
            {"role": "assistant", "content": "One, two, three."},
            {"role": "user", "content": "Backwards?"},
            {"role": "assistant", "content": "Three, two, one."},
            {"role": "user", "content": "Again, in French."},
            {"role": "assistant", "content": "Trois, deux, un.", "reasoning_content": "French."},
        ],
        None,
        "multi_turn",
        "reasoning",
    ),
]


def select(*, exclude: set[str] | frozenset[str] = frozenset()) -> list[Conversation]:
    """Corpus entries without any of the ``exclude`` tags (deep copies)."""
    return [c.copy() for c in CORPUS if not (c.tags & exclude)]


def prompts_of(conversation: Conversation) -> list[list[dict[str, Any]]]:
    """Every prefix of the conversation that ends just before an assistant message, plus
    the whole conversation when it does not end with one: the generation prompts a
    sampler would see along the conversation."""
    msgs = conversation.messages
    out = [msgs[:i] for i, m in enumerate(msgs) if m["role"] == "assistant" and i > 0]
    if msgs and msgs[-1]["role"] != "assistant":
        out.append(msgs)
    return out
