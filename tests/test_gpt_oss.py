"""gpt-oss: parity with the official template, the harmony dialect against openai-harmony,
loss weights, parsing into parts, streaming and round trips.

Expected ids come from the official chat template (``chat_template.jinja`` of
openai/gpt-oss-20b applied by transformers, with its clock fixed) or from the
``openai-harmony`` package, tokenized by the real tokenizer; never from the code under
test.
"""

from __future__ import annotations

import copy
import datetime
import json
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from renderers import (
    Message,
    ParseResult,
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
from renderers.core.scanning import sampled_text_ids
from renderers.gpt_oss import GptOssRenderer
from tests.conftest import tokenizer_for
from tests.corpus import (
    CORPUS,
    TOOLS,
    WEATHER_TOOL,
    Conversation,
    call,
    prompts_of,
    result,
)
from tests.oracle import hf_template_ids, hf_template_text
from tests.test_harmony import COMPLETIONS, LENIENT, SCHEMAS, golden_ids, oh
from tests.training import supervised_or_dropped

DATE = "2025-06-28"


@pytest.fixture(scope="module")
def tok() -> Any:
    return tokenizer_for("openai/gpt-oss-20b")


@pytest.fixture(scope="module")
def r(tok: Any) -> GptOssRenderer:
    return GptOssRenderer(tok, date=DATE)


@pytest.fixture(scope="module")
def oracle() -> oh.HarmonyEncoding:
    return oh.load_harmony_encoding(oh.HarmonyEncodingName.HARMONY_GPT_OSS)


def ids_of(tok: Any, text: str) -> list[int]:
    ids: list[int] = tok.encode(text, add_special_tokens=False)
    return ids


# -- the parity corpus ---------------------------------------------------------------------

NESTED_TOOL = {
    "type": "function",
    "function": {
        "name": "book_trip",
        "description": "Book a trip.",
        "parameters": {
            "type": "object",
            "properties": {
                "traveller": {
                    "type": "object",
                    "description": "Who travels",
                    "properties": {
                        "name": {"type": "string"},
                        "age": {"type": "integer"},
                        "tags": {"type": "array", "items": {"type": "string"}},
                    },
                    "required": ["name"],
                },
                "legs": {
                    "type": "array",
                    "items": {"type": "object", "properties": {"from": {"type": "string"}}},
                },
                "class": {"type": "string", "enum": ["economy", "business"], "default": "economy"},
                "nights": {"type": "integer", "default": 2, "description": "Nights"},
                "flexible": {"type": "boolean", "default": False},
                "budget": {"type": ["number", "null"]},
                "note": {"type": "string", "nullable": True},
                "when": {
                    "oneOf": [{"type": "string", "description": "ISO date"}, {"type": "integer"}]
                },
                "extras": {"type": "array"},
                "meta": {"type": "object"},
            },
            "required": ["traveller", "legs"],
        },
    },
}
NO_PARAMS_TOOL = {
    "type": "function",
    "function": {"name": "now", "description": "The time.", "parameters": {"type": "object"}},
}
EXTRA: list[Conversation] = [
    Conversation(
        "developer_instructions",
        [
            {"role": "developer", "content": "Use metric units."},
            {"role": "user", "content": "How tall is Everest?"},
            {"role": "assistant", "content": "8,849 m.", "reasoning_content": "Known fact."},
        ],
        None,
        frozenset({"system"}),
    ),
    Conversation(
        "nested_tool_schemas",
        [
            {"role": "system", "content": "You book trips."},
            {"role": "user", "content": "Book Paris to Rome."},
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": "Use book_trip.",
                "tool_calls": [call("book_trip", {"traveller": {"name": "Ann"}, "legs": []}, "c")],
            },
        ],
        [NESTED_TOOL, NO_PARAMS_TOOL, *TOOLS],
        frozenset({"tools", "tool_call"}),
    ),
    Conversation(
        "analysis_kept_while_calling_tools",
        [
            {"role": "user", "content": "Weather in Oslo and then Rome?"},
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": "Oslo first.",
                "tool_calls": [call("get_weather", {"city": "Oslo"}, "c1")],
            },
            result("c1", "-3°C", "get_weather"),
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": "Now Rome.",
                "tool_calls": [call("get_weather", {"city": "Rome"}, "c2")],
            },
            result("c2", "21°C", "get_weather"),
        ],
        TOOLS,
        frozenset({"tools", "tool_call", "tool_result", "reasoning"}),
    ),
    Conversation(
        "analysis_dropped_after_final",
        [
            {"role": "user", "content": "Weather in Oslo?"},
            {
                "role": "assistant",
                "content": "",
                "reasoning_content": "Call the tool.",
                "tool_calls": [call("get_weather", {"city": "Oslo"}, "c1")],
            },
            result("c1", '{"temp": -3}', "get_weather"),
            {"role": "assistant", "content": "-3°C.", "reasoning_content": "Cold."},
            {"role": "user", "content": "And tomorrow?"},
            {
                "role": "assistant",
                "content": "Checking the forecast.",
                "tool_calls": [call("search", {"query": "Oslo forecast", "limit": 1}, "c2")],
            },
            result("c2", "Snow", "search"),
            {"role": "assistant", "content": "Snow tomorrow.", "reasoning_content": "Easy."},
        ],
        TOOLS,
        frozenset({"tools", "tool_call", "tool_result", "reasoning", "multi_turn"}),
    ),
    Conversation(
        "unicode_tool_round",
        [
            {"role": "system", "content": "Réponds en français. 🇫🇷"},
            {"role": "user", "content": "Météo à Zürich ?"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [call("get_weather", {"city": "Zürich", "unit": "celsius"}, "c1")],
            },
            result("c1", "Ensoleillé, 22 °C — ☀️", "get_weather"),
            {"role": "assistant", "content": "Il fait 22 °C et beau. ☀️"},
        ],
        [WEATHER_TOOL],
        frozenset({"tools", "tool_call", "tool_result", "unicode"}),
    ),
]
# (conversation, template kwargs)
OPTION_CASES: list[tuple[Conversation, dict[str, Any]]] = [
    (c, options)
    for c, options in [
        (CORPUS[1], {"reasoning_effort": "low"}),
        (CORPUS[5], {"reasoning_effort": "high"}),
        (CORPUS[2], {"model_identity": "You are a careful assistant."}),
        (CORPUS[21], {"builtin_tools": ["browser"]}),
        (CORPUS[20], {"builtin_tools": ["python"]}),
        (CORPUS[27], {"builtin_tools": ["browser", "python"], "reasoning_effort": "high"}),
    ]
]

# Template behaviours we do not reproduce (see renderers/gpt_oss.py): only the first of
# several tool calls, string arguments JSON-quoted again, a later system message dropped,
# an empty reasoning string rendered as an empty analysis message.
NOT_PARITY = {"parallel", "string_args", "system_late"}
# The template refuses a tool-call message with both text and reasoning ("Cannot pass both
# content and thinking"); the renderer writes both.
REFUSED = {"text_and_calls", "reasoning"}
PARITY = [
    c
    for c in [*CORPUS, *EXTRA]
    if not (c.tags & NOT_PARITY) and not c.tags >= REFUSED and c.id != "reasoning_empty_string"
]
PARITY_CASES = [(c, {}) for c in PARITY] + OPTION_CASES


def template_input(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as the template understands it: list content joined into a string
    (the template cannot render lists), thinking parts moved to ``reasoning_content``."""
    out = []
    for m in copy.deepcopy(messages):
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


def case_id(case: tuple[Conversation, dict[str, Any]]) -> str:
    c, options = case
    return c.id + "".join(f"-{k}" for k in options)


def test_parity_corpus_is_large_enough() -> None:
    assert len({c.id for c, _ in PARITY_CASES}) >= 30


@pytest.mark.usefixtures("fixed_clock")
@pytest.mark.parametrize("case", PARITY_CASES, ids=case_id)
def test_generation_prompts_equal_the_template(
    case: tuple[Conversation, dict[str, Any]], r: GptOssRenderer, tok: Any
) -> None:
    conversation, options = case
    for prompt in prompts_of(conversation):
        expected = hf_template_ids(
            tok, template_input(prompt), conversation.tools, add_generation_prompt=True, **options
        )
        assert r.build_generation_prompt(prompt, conversation.tools, **options) == expected


@pytest.mark.usefixtures("fixed_clock")
@pytest.mark.parametrize(
    "case",
    [c for c in PARITY_CASES if c[0].messages[-1]["role"] == "assistant"],
    ids=case_id,
)
def test_supervised_examples_equal_the_template(
    case: tuple[Conversation, dict[str, Any]], r: GptOssRenderer, tok: Any
) -> None:
    conversation, options = case
    expected = hf_template_ids(
        tok,
        template_input(conversation.messages),
        conversation.tools,
        add_generation_prompt=False,
        **options,
    )
    for train_on in TrainOn:
        # A trained turn whose analysis the template drops is refused by default (the one
        # reasoning rule) and built with reasoning="drop": the template's ids either way.
        example, _ = supervised_or_dropped(
            r, conversation.messages, conversation.tools, train_on=train_on, **options
        )
        assert example.tokens.tolist() == expected
    assert expected[-1] in (r.tokens.return_, r.tokens.call)


@pytest.mark.usefixtures("fixed_clock")
def test_the_template_clock_is_fixed_in_these_tests(tok: Any) -> None:
    text = hf_template_text(tok, [{"role": "user", "content": "Hi"}], add_generation_prompt=True)
    assert "\nCurrent date: 2025-06-28\n" in text


@pytest.mark.usefixtures("fixed_clock")
def test_function_tool_schemas_render_like_the_template(r: GptOssRenderer, tok: Any) -> None:
    """The template's TypeScript macro, ported: every schema it can render."""
    rendered = 0
    for name, schema in SCHEMAS.items():
        tool = {
            "type": "function",
            "function": {"name": name, "description": "D", "parameters": schema},
        }
        messages = [{"role": "user", "content": "Hi"}]
        try:
            expected = hf_template_ids(tok, messages, [tool], add_generation_prompt=True)
        except Exception:  # the template fails on some schemas (non-string oneOf defaults)
            assert r.build_generation_prompt(messages, [tool])
            continue
        assert r.build_generation_prompt(messages, [tool]) == expected, name
        rendered += 1
    assert rendered >= len(SCHEMAS) - 2


@pytest.mark.usefixtures("fixed_clock")
def test_one_renderer_follows_each_calls_options_and_tools(tok: Any) -> None:
    """The renderer caches the system text and header ids: alternating options, tools and
    trained turns on one renderer gives the template's ids every time."""
    r = GptOssRenderer(tok, date=DATE)
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "Look it up.",
            "tool_calls": [call("get_weather", {"city": "Paris"}, "c1")],
        },
        result("c1", '{"temp": 21}'),
        {"role": "assistant", "content": "21 degrees.", "reasoning_content": "Answer."},
    ]
    option_sets: list[dict[str, Any]] = [
        {},
        {"reasoning_effort": "high"},
        {"builtin_tools": ["browser"]},
        {"builtin_tools": ["browser", "python"], "reasoning_effort": "low"},
    ]
    for _ in range(2):  # the second round renders from the caches
        for options in option_sets:
            for tools in (None, [WEATHER_TOOL]):
                for end in (3, 5):  # a tool-calling turn trained, then the answer
                    convo = messages[:end]
                    expected = hf_template_ids(
                        tok, template_input(convo), tools, add_generation_prompt=False, **options
                    )
                    example = r.build_supervised_example(convo, tools, reasoning="drop", **options)
                    assert example.tokens.tolist() == expected, (options, tools, end)
                    prompt = hf_template_ids(
                        tok,
                        template_input(convo[:-1]),
                        tools,
                        add_generation_prompt=True,
                        **options,
                    )
                    assert r.build_generation_prompt(convo[:-1], tools, **options) == prompt


def test_dates_and_options(tok: Any) -> None:
    r = GptOssRenderer(tok)
    messages = [{"role": "user", "content": "Hi"}]
    text = tok.decode(r.build_generation_prompt(messages, date=datetime.date(2024, 2, 29)))
    assert "\nCurrent date: 2024-02-29\n" in text
    default = tok.decode(r.build_generation_prompt(messages))
    assert "\nCurrent date: 20" in default  # today's date, as the template's strftime_now
    harmony = tok.decode(r.build_generation_prompt(messages, dialect="harmony"))
    assert "Current date" not in harmony
    with pytest.raises(ValueError, match="reasoning_effort: expected one of low, medium, high"):
        r.build_generation_prompt(messages, reasoning_effort="max")
    with pytest.raises(ValueError, match="builtin_tools: unknown tool"):
        r.build_generation_prompt(messages, builtin_tools=("shell",))
    with pytest.raises(ValueError, match="dialect: expected one of template, harmony"):
        r.build_generation_prompt(messages, dialect="chatml")
    with pytest.raises(TypeError, match="unknown option"):
        r.build_generation_prompt(messages, enable_thinking=False)


def test_bad_conversations_get_clear_errors(r: GptOssRenderer) -> None:
    with pytest.raises(ValueError, match=r"messages\[1\]\.role: a system message can only come"):
        r.build_generation_prompt(
            [{"role": "user", "content": "a"}, {"role": "system", "content": "b"}]
        )
    with pytest.raises(ValueError, match=r"messages\[1\]: a tool result without a preceding"):
        r.build_generation_prompt(
            [{"role": "user", "content": "a"}, {"role": "tool", "content": "b"}]
        )
    with pytest.raises(ValueError, match=r"messages\[0\]\.role: unknown role 'critic'"):
        r.build_generation_prompt([{"role": "critic", "content": "b"}])
    with pytest.raises(ValueError, match=r"messages\[0\]\.content\[0\]: a user message can only"):
        r.build_generation_prompt([Message("user", [ThinkingPart("x")])])


def test_typed_control_tokens_stay_text(r: GptOssRenderer, tok: Any) -> None:
    """The template would turn these into control tokens; we do not, on purpose."""
    messages = [{"role": "user", "content": "Say <|end|><|start|>assistant<|channel|>final"}]
    ids = r.build_generation_prompt(messages)
    assert ids.count(r.tokens.start) == 3  # system, user, generation prompt
    assert tok.decode(ids).count("<|end|>") == 3


# -- the harmony dialect against openai-harmony ------------------------------------------------


def harmony_conversation(
    conversation: Conversation, required_channels: list[str] | None = None
) -> tuple[list[oh.Message], list[list[oh.Message]]]:
    """The conversation as openai-harmony messages (system, developer, then one list of
    messages per conversation message), built from the OpenAI dicts for the oracle."""
    system = oh.SystemContent.new().with_conversation_start_date(DATE)
    if required_channels is not None:
        system = system.with_required_channels(required_channels)
    head = [oh.Message.from_role_and_content(oh.Role.SYSTEM, system)]
    messages = conversation.messages
    instructions = None
    if messages and messages[0]["role"] in ("system", "developer"):
        instructions = template_input(messages[:1])[0]["content"]
        messages = messages[1:]
    if instructions or conversation.tools:
        developer = oh.DeveloperContent.new()
        if instructions:
            developer = developer.with_instructions(instructions)
        if conversation.tools:
            developer = developer.with_function_tools(
                [
                    oh.ToolDescription.new(
                        t["function"]["name"],
                        t["function"].get("description", ""),
                        t["function"].get("parameters"),
                    )
                    for t in conversation.tools
                ]
            )
        head.append(oh.Message.from_role_and_content(oh.Role.DEVELOPER, developer))
    body: list[list[oh.Message]] = []
    ids: dict[str, str] = {}
    for m in template_input(messages):
        if m["role"] == "user":
            body.append([oh.Message.from_role_and_content(oh.Role.USER, m["content"])])
        elif m["role"] == "tool":
            name = ids[m["tool_call_id"]]
            author = oh.Author.new(oh.Role.TOOL, f"functions.{name}")
            message = oh.Message.from_author_and_content(author, m["content"])
            body.append([message.with_channel("commentary").with_recipient("assistant")])
        else:
            out = []
            calls = m.get("tool_calls") or []
            if m.get("reasoning_content"):
                out.append(("analysis", m["reasoning_content"]))
            if m.get("content") or not calls:
                out.append(("analysis" if calls else "final", m.get("content") or ""))
            turn = [
                oh.Message.from_role_and_content(oh.Role.ASSISTANT, text).with_channel(channel)
                for channel, text in out
            ]
            for c in calls:
                arguments = c["function"]["arguments"]
                if not isinstance(arguments, str):
                    arguments = json.dumps(arguments, ensure_ascii=False)
                ids[c["id"]] = c["function"]["name"]
                turn.append(
                    oh.Message.from_role_and_content(oh.Role.ASSISTANT, arguments)
                    .with_channel("commentary")
                    .with_recipient("functions." + c["function"]["name"])
                    .with_content_type("<|constrain|>json")
                )
            body.append(turn)
    return head, body


HARMONY_CASES = [
    c for c in [*CORPUS, *EXTRA] if "system_late" not in c.tags and c.id != "reasoning_empty_string"
]


@pytest.mark.parametrize("conversation", HARMONY_CASES, ids=repr)
def test_harmony_dialect_equals_openai_harmony(
    conversation: Conversation, r: GptOssRenderer, oracle: oh.HarmonyEncoding
) -> None:
    head, body = harmony_conversation(conversation)
    flat = [m for turn in body for m in turn]
    prompt_messages = conversation.messages
    if conversation.messages[-1]["role"] == "assistant":
        prompt_messages = prompt_messages[:-1]
        history = [m for turn in body[:-1] for m in turn]
        prompt = oracle.render_conversation_for_completion(
            oh.Conversation.from_messages(head + history), oh.Role.ASSISTANT
        )
        tail = oracle.render_conversation_for_training(
            oh.Conversation.from_messages(body[-1]),
            oh.RenderConversationConfig(auto_drop_analysis=False),
        )
        example = r.build_supervised_example(
            conversation.messages, conversation.tools, dialect="harmony"
        )
        # The trained turn keeps its analysis; the history is what the prompt showed.
        assert example.tokens.tolist() == [*prompt, *tail[2:]]
    else:
        prompt = oracle.render_conversation_for_completion(
            oh.Conversation.from_messages(head + flat), oh.Role.ASSISTANT
        )
    assert r.build_generation_prompt(
        prompt_messages, conversation.tools, dialect="harmony"
    ) == list(prompt)


def test_harmony_dialect_refuses_a_trained_turns_analysis_openai_harmony_drops(
    r: GptOssRenderer, oracle: oh.HarmonyEncoding
) -> None:
    """openai-harmony drops the analysis of turns before the last final answer: training
    such a turn is the reasoning rule's error; with ``reasoning="drop"`` the tokens are
    openai-harmony's (analysis of the first turn dropped, the last kept)."""
    messages = [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "reasoning_content": "r1", "content": "a1"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "reasoning_content": "r2", "content": "a2"},
    ]
    with pytest.raises(ValueError, match=r"^messages\[1\]: gpt_oss .*reasoning='drop'"):
        r.build_supervised_example(messages, train_on="all_assistant", dialect="harmony")
    example = r.build_supervised_example(
        messages, train_on="all_assistant", dialect="harmony", reasoning="drop"
    )
    head, body = harmony_conversation(Conversation("two_answers", messages))
    prompt = oracle.render_conversation_for_completion(
        oh.Conversation.from_messages(head + [m for turn in body[:-1] for m in turn]),
        oh.Role.ASSISTANT,
    )
    tail = oracle.render_conversation_for_training(
        oh.Conversation.from_messages(body[-1]),
        oh.RenderConversationConfig(auto_drop_analysis=False),
    )
    assert example.tokens.tolist() == [*prompt, *tail[2:]]
    trained = r.decode(example.tokens[example.weights > 0].tolist())
    assert "a1" in trained and "r2" in trained and "r1" not in r.decode(example.tokens.tolist())


CHANNEL_CHOICES = [["analysis", "final"], ["final"], ["commentary", "final", "analysis"], []]
CHANNEL_CASES = [
    c
    for c in HARMONY_CASES
    if c.id in ("system_user_assistant", "reasoning_last", "tool_result_then_answer")
]


def test_channel_cases_exist() -> None:
    assert len(CHANNEL_CASES) == 3


@pytest.mark.parametrize("channels", CHANNEL_CHOICES, ids=lambda c: ",".join(c) or "none")
@pytest.mark.parametrize("conversation", CHANNEL_CASES, ids=repr)
def test_required_channels_equal_openai_harmony(
    channels: list[str],
    conversation: Conversation,
    r: GptOssRenderer,
    oracle: oh.HarmonyEncoding,
) -> None:
    """The harmony dialect's ``required_channels`` is openai-harmony's
    ``with_required_channels``: prompts and supervised examples."""
    head, body = harmony_conversation(conversation, channels)
    history = [m for turn in body[:-1] for m in turn]
    prompt = oracle.render_conversation_for_completion(
        oh.Conversation.from_messages(head + history), oh.Role.ASSISTANT
    )
    options = {"dialect": "harmony", "required_channels": channels}
    messages, tools = conversation.messages, conversation.tools
    assert r.build_generation_prompt(messages[:-1], tools, **options) == list(prompt)
    tail = oracle.render_conversation_for_training(
        oh.Conversation.from_messages(body[-1]),
        oh.RenderConversationConfig(auto_drop_analysis=False),
    )
    example = r.build_supervised_example(messages, tools, **options)
    assert example.tokens.tolist() == [*prompt, *tail[2:]]


_TEMPLATE_CHANNELS = (
    "# Valid channels: analysis, commentary, final. Channel must be included for every message."
)


@pytest.mark.usefixtures("fixed_clock")
@pytest.mark.parametrize("channels", CHANNEL_CHOICES, ids=lambda c: ",".join(c) or "none")
@pytest.mark.parametrize("conversation", CHANNEL_CASES, ids=repr)
def test_required_channels_in_the_template_dialect_replace_only_its_channel_line(
    channels: list[str],
    conversation: Conversation,
    r: GptOssRenderer,
    tok: Any,
    oracle: oh.HarmonyEncoding,
) -> None:
    """The template dialect writes the template's ids with its channel line replaced by
    the one openai-harmony writes for ``channels`` (the system message alone)."""
    system = oh.SystemContent.new().with_required_channels(channels)
    rendered = oracle.decode(
        oracle.render(oh.Message.from_role_and_content(oh.Role.SYSTEM, system))
    )
    line = next((x for x in rendered.split("\n\n") if x.startswith("# Valid")), "")
    line = line.split("<|end|>")[0]
    prompt = conversation.messages[:-1]
    text = hf_template_text(
        tok, template_input(prompt), conversation.tools, add_generation_prompt=True
    )
    assert _TEMPLATE_CHANNELS in text
    expected_text = (
        text.replace(_TEMPLATE_CHANNELS, line)
        if line
        else (
            text.replace("\n\n" + _TEMPLATE_CHANNELS, "").replace(
                "\nCalls to these tools must go to the commentary channel: 'functions'.", ""
            )
        )
    )
    ids = r.build_generation_prompt(prompt, conversation.tools, required_channels=channels)
    assert ids == ids_of(tok, expected_text)


def test_required_channels_are_an_option_of_the_command_line() -> None:
    values = GptOssRenderer.options_from_text({"required_channels": "analysis,final"})
    assert values == {"required_channels": ("analysis", "final")}


# -- loss weights ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "conversation",
    [c for c in PARITY if c.messages[-1]["role"] == "assistant"],
    ids=repr,
)
@pytest.mark.parametrize("dialect", ["template", "harmony"])
def test_weights_cover_exactly_what_the_model_samples(
    conversation: Conversation, dialect: str, r: GptOssRenderer
) -> None:
    messages, tools = conversation.messages, conversation.tools
    example = r.build_supervised_example(messages, tools, dialect=dialect)
    tokens, weights = example.tokens.tolist(), example.weights
    first = int(np.argmax(weights))
    assert weights[first:].all() and not weights[:first].any()
    assert tokens[first - 2 : first] == [r.tokens.start, r.table.encode("assistant")[0]]
    sampled = tokens[first:]
    parsed = r.parse_response(sampled)
    assert parsed.termination is Termination.STOP
    assert parsed.trailing_ids == ()
    last = Message.from_dict(messages[-1])
    if last.tool_calls:  # the content of a tool-calling message is analysis (template)
        assert parsed.message.text == ""
        assert parsed.message.thinking == ((last.thinking or "") + last.text or None)
    else:
        assert parsed.message.text == last.text
        assert parsed.message.thinking == last.thinking
    assert [(c.name, c.parsed_arguments()) for c in parsed.message.tool_calls] == [
        (c.name, c.parsed_arguments()) for c in last.tool_calls
    ]


def test_earlier_answers_are_weighted_without_their_history_end(r: GptOssRenderer) -> None:
    conversation = next(c for c in CORPUS if c.id == "tools_then_new_question")
    # The first call turn's analysis is dropped by the template: trained, it is refused
    # (the one reasoning rule) and trained without it with reasoning="drop".
    with pytest.raises(ValueError, match=r"^messages\[1\]: gpt_oss .*reasoning='drop'"):
        r.build_supervised_example(
            conversation.messages, conversation.tools, train_on=TrainOn.ALL_ASSISTANT
        )
    example = r.build_supervised_example(
        conversation.messages, conversation.tools, train_on=TrainOn.ALL_ASSISTANT, reasoning="drop"
    )
    tokens, weights = example.tokens.tolist(), example.weights
    end, ret, call_id = r.tokens.end, r.tokens.return_, r.tokens.call
    weighted_ends = [
        t for t, w in zip(tokens, weights, strict=True) if w and t in (end, ret, call_id)
    ]
    # Two calls (<|call|>) and, between them, a final answer whose history <|end|> stands
    # where the model sampled <|return|>: not trained.
    assert weighted_ends == [call_id, call_id]
    final = tokens.index(r.table.encode("It")[0])
    assert weights[final] == 1
    assert weights[tokens.index(end, final)] == 0


def test_prompt_is_a_prefix_of_the_example_when_no_analysis_is_dropped(r: GptOssRenderer) -> None:
    for conversation in PARITY:
        messages = conversation.messages
        if messages[-1]["role"] != "assistant" or conversation.id in (
            "tool_result_then_answer",
            "multi_step_tools",
            "analysis_dropped_after_final",
        ):
            continue
        example = r.build_supervised_example(messages, conversation.tools)
        first = int(np.argmax(example.weights))
        prompt = r.build_generation_prompt(messages[:-1], conversation.tools)
        assert example.tokens[:first].tolist() == prompt, conversation.id


def test_template_drops_tool_call_analysis_once_the_answer_exists(
    r: GptOssRenderer, tok: Any
) -> None:
    """The template's rule: the prompt for the answer shows the tool-call analysis, the
    rendered conversation with the answer does not (keep sampled ids for multi-turn RL)."""
    conversation = next(c for c in CORPUS if c.id == "tool_result_then_answer")
    prompt = tok.decode(r.build_generation_prompt(conversation.messages[:-1], conversation.tools))
    full = tok.decode(r.build_supervised_example(conversation.messages, conversation.tools).tokens)
    assert "Call the tool." in prompt and "Call the tool." not in full
    assert "The tool says 18°C." in full


# -- parsing -----------------------------------------------------------------------------------


def parse(r: GptOssRenderer, tok: Any, text: str) -> Any:
    return r.parse_response(ids_of(tok, text))


def test_reasoning_then_answer(r: GptOssRenderer, tok: Any) -> None:
    res = parse(r, tok, COMPLETIONS["analysis_then_final"])
    assert res.message.parts == (
        ThinkingPart("Think.\n\nMore."),
        TextPart("Answer 🙂"),
    )
    assert res.termination is Termination.STOP
    assert res.stop_token_id == r.tokens.return_
    assert res.message.text == "Answer 🙂"


@pytest.mark.parametrize(
    "name",
    ["call_recipient_after_channel", "call_constrain_glued", "call_recipient_before_channel"],
)
def test_tool_calls_in_every_header_order(name: str, r: GptOssRenderer, tok: Any) -> None:
    res = parse(r, tok, COMPLETIONS[name])
    call_part = res.message.parts[-1]
    assert isinstance(call_part, ToolCallPart)
    assert (call_part.name, call_part.arguments, call_part.channel) == (
        "get_weather",
        '{"city": "Paris"}',
        None,  # commentary, the default channel of a call
    )
    assert call_part.content_type in ("json", "<|constrain|>json")
    assert res.termination is Termination.STOP and res.stop_token_id == r.tokens.call
    assert res.issues == ()


def test_preamble_then_call(r: GptOssRenderer, tok: Any) -> None:
    res = parse(r, tok, COMPLETIONS["preamble_then_call"])
    assert res.message.parts == (
        TextPart("Let me check.", channel="commentary"),
        ToolCallPart("lookup", "{}", content_type="<|constrain|>json"),
    )
    assert res.message.to_openai()["content"] == "Let me check."


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (
            "builtin_python",
            ToolCallPart("python", "print(2 ** 10)", channel="analysis", content_type="code"),
        ),
        (
            "builtin_browser",
            ToolCallPart("browser.open", '{"id": 3}', content_type="code"),
        ),
    ],
)
def test_builtin_recipients_are_kept(
    name: str, expected: ToolCallPart, r: GptOssRenderer, tok: Any
) -> None:
    assert parse(r, tok, COMPLETIONS[name]).message.parts == (expected,)


def test_builtin_calls_render_back_to_their_recipient(r: GptOssRenderer, tok: Any) -> None:
    messages = [
        {"role": "user", "content": "Search."},
        Message("assistant", [ToolCallPart("browser.search", '{"query": "x"}')]),
        {"role": "tool", "content": "results", "name": "browser.search"},
    ]
    text = tok.decode(r.build_generation_prompt(messages, builtin_tools=("browser",)))
    assert "<|start|>assistant to=browser.search<|channel|>commentary json<|message|>" in text
    assert '<|start|>browser.search to=assistant<|channel|>commentary<|message|>"results"' in text


def test_invalid_and_cut_off_arguments_are_unparsed_calls(r: GptOssRenderer, tok: Any) -> None:
    bad = parse(r, tok, "<|channel|>commentary to=functions.f json<|message|>{oops<|call|>")
    (part,) = bad.message.parts
    assert isinstance(part, UnparsedToolCallPart)
    assert (part.name, part.raw, part.incomplete) == ("f", "{oops", False)
    cut = parse(r, tok, '<|channel|>commentary to=functions.f json<|message|>{"a": ')
    (part,) = cut.message.parts
    assert isinstance(part, UnparsedToolCallPart)
    assert (part.name, part.raw, part.incomplete) == ("f", '{"a": ', True)
    assert cut.termination is Termination.LENGTH


def test_truncated_reasoning_is_incomplete(r: GptOssRenderer, tok: Any) -> None:
    res = parse(r, tok, COMPLETIONS["truncated_body"])
    assert res.message.parts == (ThinkingPart("The user wants", incomplete=True),)
    assert res.termination is Termination.LENGTH
    done = parse(r, tok, COMPLETIONS["truncated_after_end"])
    assert done.message.parts == (ThinkingPart("Done."),)
    assert done.termination is Termination.LENGTH


def test_end_of_sequence_token(r: GptOssRenderer, tok: Any) -> None:
    res = parse(r, tok, "<|channel|>final<|message|>Bye<|endoftext|>junk")
    assert res.message.parts == (TextPart("Bye"),)
    assert res.termination is Termination.EOS
    assert res.trailing_text == "junk"


def test_another_roles_message_ends_the_completion(r: GptOssRenderer, tok: Any) -> None:
    text = COMPLETIONS["tool_output_in_completion"].replace("<|call|>", "<|end|>")
    ids = ids_of(tok, text)
    res = r.parse_response(ids)
    assert res.message.parts == (ToolCallPart("f", "{}"),)
    start = ids.index(r.tokens.start)
    assert list(res.trailing_ids) == ids[start:]
    assert res.termination is Termination.MALFORMED
    assert [i.position for i in res.issues] == [start]
    parser = r.stream_parser()
    for t in ids:
        parser.feed([t])
    assert parser.finish() == res
    # The ids of the other message come back as Python ints, whatever integers were given.
    numpy_ids = [np.int64(t) for t in ids]
    parser = r.stream_parser()
    for k in range(0, len(ids), 3):
        parser.feed(numpy_ids[k : k + 3])
    for parsed in (r.parse_response(numpy_ids), parser.finish()):
        assert parsed == res
        assert all(type(t) is int for t in parsed.trailing_ids)


def test_another_roles_message_cut_off_at_the_end_trails(r: GptOssRenderer, tok: Any) -> None:
    """A completion long enough to be parsed whole that ends inside another role's message
    (its header ran into text): that message's ids trail, as when the ids are fed."""
    text = (
        "<|channel|>analysis<|message|>"
        + "lorem ipsum dolor " * 40
        + "<|end|><|start|>user Hello there, how are you?"
    )
    ids = ids_of(tok, text)
    start = ids.index(r.tokens.start)
    parser = r.stream_parser()
    for t in ids:
        parser.feed([t])
    fed = parser.finish()
    assert list(fed.trailing_ids) == ids[start:]
    assert r.parse_response(ids) == fed
    assert r.parse_response(np.array(ids)) == fed


@pytest.mark.parametrize("name", sorted(LENIENT))
def test_malformed_completions_are_data(name: str, r: GptOssRenderer, tok: Any) -> None:
    text, expected, issues, _ = LENIENT[name]
    res = parse(r, tok, text)
    texts = [
        p.arguments if isinstance(p, ToolCallPart) else getattr(p, "text", getattr(p, "raw", ""))
        for p in res.message.parts
    ]
    # Nothing lost, in order (adjacent plain texts join into one string content).
    assert "".join(texts) == "".join(e[3] for e in expected if e[3])
    assert len(texts) <= len([e for e in expected if e[3]])
    assert (res.termination is Termination.MALFORMED) == (issues > 0)
    assert len(res.issues) == issues


@pytest.mark.parametrize("text", [*COMPLETIONS.values(), *(v[0] for v in LENIENT.values())])
def test_never_returns_harmony_markup_as_text(text: str, r: GptOssRenderer, tok: Any) -> None:
    res = parse(r, tok, text)
    for part in res.message.parts:
        content = repr(part)
        for marker in (
            "<|start|>",
            "<|channel|>",
            "<|message|>",
            "<|end|>",
            "<|return|>",
            "<|call|>",
        ):
            assert marker not in content, (marker, part)


@pytest.mark.parametrize("name", sorted(COMPLETIONS))
def test_parts_follow_openai_harmony_messages(
    name: str, r: GptOssRenderer, oracle: oh.HarmonyEncoding, tok: Any
) -> None:
    ids = ids_of(tok, COMPLETIONS[name])
    res = r.parse_response(ids)
    end = len(ids) - len(res.trailing_ids)
    messages = oracle.parse_messages_from_completion_tokens(
        ids[:end], oh.Role.ASSISTANT, strict=False
    )
    expected = []
    for m in messages:
        text = "".join(c.text for c in m.content)
        if m.recipient is not None:
            name_ = m.recipient.removeprefix("functions.")
            expected.append(("call", name_, text, m.channel or "commentary", m.content_type))
        elif text:
            kind = "thinking" if m.channel == "analysis" else "text"
            expected.append((kind, None, text, m.channel or "final", None))
    # A parsed part carries its channel only when it is not its kind's default.
    got = []
    for p in res.message.parts:
        if isinstance(p, ToolCallPart):
            got.append(("call", p.name, p.arguments, p.channel or "commentary", p.content_type))
        elif isinstance(p, ThinkingPart):
            got.append(("thinking", None, p.text, p.channel or "analysis", None))
        elif isinstance(p, TextPart):
            got.append(("text", None, p.text, p.channel or "final", None))
    assert got == expected


@pytest.mark.parametrize("name", ["test_simple_reasoning_response", "test_simple_tool_call"])
def test_golden_completions(name: str, r: GptOssRenderer, tok: Any) -> None:
    ids = golden_ids(tok, name)
    res = r.parse_response(ids)
    assert res.stop_token_id == r.tokens.return_
    assert res.message.parts == (
        ThinkingPart(r.table.decode(ids[3 : ids.index(r.tokens.return_)])),
    )
    (start,) = [k for k, t in enumerate(ids) if t == r.tokens.start]
    assert list(res.trailing_ids) == ids[start:]


def test_spans_include_each_message_markers(r: GptOssRenderer, tok: Any) -> None:
    ids = ids_of(tok, COMPLETIONS["preamble_then_call"])
    res = r.parse_response(ids)
    start = ids.index(r.tokens.start)
    assert res.spans == ((0, start), (start, len(ids)))


# -- streaming -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        COMPLETIONS["analysis_then_final"],
        COMPLETIONS["preamble_then_call"],
        COMPLETIONS["tool_output_in_completion"].replace("<|call|>", "<|end|>"),
        LENIENT["missing_message"][0],
        LENIENT["text_between_messages"][0],
        COMPLETIONS["truncated_body"],
    ],
)
def test_streaming_equals_batch_at_every_split(text: str, r: GptOssRenderer, tok: Any) -> None:
    ids = ids_of(tok, text)
    expected = r.parse_response(ids)
    for cut in range(len(ids) + 1):
        parser = r.stream_parser()
        parser.feed(ids[:cut])
        parser.feed(np.asarray(ids[cut:], dtype=np.int64))
        assert parser.finish() == expected, cut


def test_stream_events(r: GptOssRenderer, tok: Any) -> None:
    ids = ids_of(tok, COMPLETIONS["preamble_then_call"])
    parser = r.stream_parser()
    events = [e for t in ids for e in parser.feed([t])]
    res = parser.finish()
    events += parser.final_events
    assert [e for e in events if isinstance(e, PartStarted)] == [
        PartStarted(0, "text"),
        PartStarted(1, "tool_call"),
    ]
    assert "".join(e.text for e in events if isinstance(e, TextDelta) and e.index == 0) == (
        "Let me check."
    )
    assert [e.part for e in events if isinstance(e, PartFinished)] == list(res.message.parts)


def test_large_completion_parses_in_one_go(r: GptOssRenderer) -> None:
    body = "Reasoning step. " * 4000
    messages = [
        {"role": "user", "content": "Go"},
        {"role": "assistant", "content": body, "reasoning_content": body},
    ]
    example = r.build_supervised_example(messages)
    res = r.parse_response(example.tokens[example.weights > 0])
    assert res.message.parts == (ThinkingPart(body), TextPart(body))


# -- round trip ------------------------------------------------------------------------------

ROUND_TRIP = [
    Message("assistant", [ThinkingPart("Plan."), TextPart("Done.")]),
    Message("assistant", [TextPart("Just text.")]),
    Message(
        "assistant",
        [
            ThinkingPart("Need data."),
            TextPart("One moment.", channel="commentary"),
            ToolCallPart("get_weather", '{"city": "Zürich"}', content_type="json"),
        ],
    ),
    Message(
        "assistant",
        [ToolCallPart("python", "print('<|end|>')", channel="analysis", content_type="code")],
    ),
    Message(
        "assistant",
        [
            ThinkingPart("a"),
            TextPart("b"),
            ThinkingPart("c"),
            TextPart("d"),
        ],
    ),
    Message("assistant", [ThinkingPart("日本語 🙂\n\n  x"), TextPart("")]),
]


@pytest.mark.parametrize("message", ROUND_TRIP, ids=lambda m: repr(m.parts)[:60])
@pytest.mark.parametrize("dialect", ["template", "harmony"])
def test_render_then_parse_round_trip(message: Message, dialect: str, r: GptOssRenderer) -> None:
    conversation = [{"role": "user", "content": "Go."}, message]
    example = r.build_supervised_example(conversation, [WEATHER_TOOL], dialect=dialect)
    completion = example.tokens[example.weights > 0].tolist()
    res = r.parse_response(completion)
    assert list(res.message.parts) == [p for p in message.parts if getattr(p, "text", True) != ""]
    assert res.termination is Termination.STOP
    again = r.build_supervised_example(
        [conversation[0], res.message], [WEATHER_TOOL], dialect=dialect
    )
    assert again.tokens.tolist() == example.tokens.tolist()


def test_openai_dict_tool_call_round_trip(r: GptOssRenderer) -> None:
    messages = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "Call it.",
            "tool_calls": [call("get_weather", {"city": "Paris"}, "c1")],
        },
    ]
    example = r.build_supervised_example(messages, [WEATHER_TOOL])
    res = r.parse_response(example.tokens[example.weights > 0])
    assert res.message.to_openai() == {
        "role": "assistant",
        "content": None,
        "reasoning_content": "Call it.",
        "tool_calls": [
            {
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    }


def test_parallel_calls_render_as_consecutive_call_messages(r: GptOssRenderer, tok: Any) -> None:
    conversation = next(c for c in CORPUS if c.id == "tool_results_consecutive")
    text = tok.decode(r.build_supervised_example(conversation.messages, conversation.tools).tokens)
    assert text.count("<|start|>assistant to=functions.get_weather<|channel|>commentary json") == 2
    assert text.count("<|start|>functions.get_weather to=assistant") == 2
    assert '"18°C"' in text and '"12°C"' in text


def test_renderer_basics(r: GptOssRenderer) -> None:
    tk = r.tokens
    assert r.stop_token_ids == (tk.return_, tk.call, tk.end_of_text)
    assert (r.name, r.default_model) == ("gpt_oss", "openai/gpt-oss-20b")
    prompt = r.build_generation_prompt([{"role": "user", "content": "Hi"}])
    assert prompt[-2:] == [tk.start, r.table.encode("assistant")[0]]


# -- text sampled where a header belongs is kept (issue 13 item 1) --------------------------


def _parsed_both_ways(r: GptOssRenderer, text: str) -> ParseResult:
    """``parse_text`` of ``text``, checked against streaming its ids one at a time."""
    result = r.parse_text(text)
    parser = r.stream_parser()
    for t in sampled_text_ids(r.table, text):
        parser.feed([t])
    assert parser.finish() == result
    return result


def test_a_completion_that_is_only_text_is_a_truncated_text_part(r: GptOssRenderer) -> None:
    result = _parsed_both_ways(r, "53 + 18 = 71")
    assert result.message.parts == (TextPart("53 + 18 = 71", incomplete=True),)
    assert result.termination is Termination.MALFORMED
    stopped = _parsed_both_ways(r, "53 + 18 = 71<|return|>")
    assert stopped.message.parts == (TextPart("53 + 18 = 71"),)


def test_text_before_a_new_message_is_kept_as_a_message(r: GptOssRenderer) -> None:
    result = _parsed_both_ways(
        r,
        "Let me check.<|start|>assistant<|channel|>commentary to=functions.get_weather"
        '<|constrain|>json<|message|>{"city":"Beijing"}<|call|>',
    )
    text, call = result.message.parts
    assert text == TextPart("Let me check.")
    assert isinstance(call, ToolCallPart)
    assert (call.name, call.arguments) == ("get_weather", '{"city":"Beijing"}')
    assert result.termination is Termination.MALFORMED


def test_a_cut_off_header_alone_is_no_part(r: GptOssRenderer) -> None:
    result = _parsed_both_ways(r, "<|channel|>analysis")
    assert result.message.parts == ()
    assert result.termination is Termination.LENGTH


_NEXT = "<|start|>assistant<|channel|>final<|message|>ok<|end|>"


@given(
    text=st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40),
    after=st.sampled_from(["", "<|return|>", "<|end|>", _NEXT, _NEXT + "<|return|>"]),
)
def test_text_sampled_instead_of_a_header_is_never_lost(text: str, after: str) -> None:
    """Whatever text a completion starts with where the header belongs (no header word),
    it is the message's first text, cut off, stopped or followed by another message."""
    assume("<|" not in text and "to=" not in text and text.strip())
    r = GptOssRenderer(tokenizer_for("openai/gpt-oss-20b"), date=DATE)
    result = _parsed_both_ways(r, text + after)
    kept = text.lstrip()
    assert result.message.text == (kept + "ok" if after.startswith(_NEXT) else kept), result


@pytest.mark.parametrize(
    "header", ["final blah blah", "final json json", "commentary to=functions.f json json"]
)
def test_every_extra_header_word_is_reported_even_when_it_repeats_another(header: str) -> None:
    """A header holds one content type; a second word, even the same word again, is text
    the model sampled where the format has no place for it: always an issue."""
    r = GptOssRenderer(tokenizer_for("openai/gpt-oss-20b"), date=DATE)
    result = r.parse_text(f"<|channel|>{header}<|message|>{{}}<|return|>")
    assert result.termination is Termination.MALFORMED
    assert [i.message for i in result.issues if "unexpected words" in i.message] == [
        f"unexpected words in the header: {[header.split()[-1]]}"
    ]


_HEADER_WORD = st.text(
    st.characters(blacklist_categories=("Cs", "Zs", "Cc", "Zl", "Zp")), min_size=1, max_size=8
).filter(lambda w: "<|" not in w and not w.startswith("to=") and not any(c.isspace() for c in w))


@given(
    channel=st.sampled_from(["final", "analysis", "commentary to=functions.f"]),
    words=st.lists(_HEADER_WORD, min_size=2, max_size=4),
    gap=st.sampled_from([" ", "  ", "\t"]),
    constrained=st.booleans(),
)
def test_header_words_the_format_has_no_place_for_are_kept_as_text(
    channel: str, words: list[str], gap: str, constrained: bool
) -> None:
    """A header holds one content type. Every other word sampled there is text the model
    wrote: it is kept, as sampled, in a text part before the body (and reported), in
    batch and streaming alike."""
    r = GptOssRenderer(tokenizer_for("openai/gpt-oss-20b"), date=DATE)
    header = channel + " " + gap.join(words)
    if constrained:
        header += " <|constrain|>json"
    body = '{"a": 1}' if "to=" in channel else "body"
    end = "<|call|>" if "to=" in channel else "<|return|>"
    result = _parsed_both_ways(r, f"<|channel|>{header}<|message|>{body}{end}")
    stray = gap.join(words if constrained else words[:-1])
    assert result.termination is Termination.MALFORMED
    assert any("unexpected words" in i.message for i in result.issues)
    assert result.message.text.startswith(stray), result
    kept = "".join(p.text for p in result.message.parts if isinstance(p, TextPart | ThinkingPart))
    assert kept.replace(stray, "", 1).endswith("" if "to=" in channel else body), result


@pytest.mark.parametrize("kind", ["complete", "malformed", "truncated"])
def test_completions_parse_in_one_shot_as_fed(r: GptOssRenderer, kind: str) -> None:
    """Completions of about 1k tokens (analysis then a final answer, cut off when
    truncated) parsed whole, as a list and as an array, give what feeding the ids gives;
    so do a tool call with invalid JSON arguments after an analysis message, and a
    completion cut off inside its analysis."""
    from renderers.bench.workloads import TOOLS as BENCH_TOOLS
    from renderers.bench.workloads import completions

    ids = next(c.ids for c in completions(r, 1000) if c.kind == kind)
    call = r.build_supervised_example(
        [
            {"role": "user", "content": "Go."},
            Message(
                "assistant",
                [
                    ThinkingPart("look it up " * 30),
                    UnparsedToolCallPart('{"query": oops', "bad", name="search"),
                ],
            ),
        ],
        tools=BENCH_TOOLS,
    )
    call_ids = call.tokens[call.weights > 0].tolist()
    for sample in (ids, call_ids, ids[: len(ids) // 4]):  # the last cut inside the analysis
        parser = r.stream_parser(_events=False)
        parser.feed(tuple(sample))
        fed = parser.finish()
        assert r.parse_response(list(sample)) == fed
        assert r.parse_response(np.array(sample, dtype=np.int64)) == fed
        assert len(fed.message.parts) >= (1 if sample is not ids else 2)
