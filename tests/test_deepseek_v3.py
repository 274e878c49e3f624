"""DeepSeek-V3 / V3.1: parity with the official templates, loss weights, parsing, streaming.

The oracle: transformers 5.23 and later drop ``content: None`` from messages inside
``apply_chat_template`` (5.0 to 5.22 pass it) and both DeepSeek templates then fail on every
tool-call message
(``'dict object' has no attribute 'content'``). Expected ids therefore come from the
official template text (``tokenizer.chat_template`` of the hub cache) rendered by jinja2's
``ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)`` -- the environment
transformers uses -- and tokenized by the real tokenizer
(``encode(text, add_special_tokens=False)``). :func:`test_oracle_equals_apply_chat_template`
checks that this gives what ``apply_chat_template`` gives wherever the latter works.
Where the renderer renders something the template cannot (corrected tool format, kept
reasoning), the expectation is hand-written template text tokenized by the real tokenizer.

The V3.1 template drops the reasoning of every assistant turn. For the trained (last)
turn of a supervised example the renderer refuses that (unless ``thinking=True,
keep_thinking=True`` keeps it): parity tests then assert the error, assert that the
template renders the same text with and without that reasoning, and compare the template's
ids with the renderer's for the turn without it (:func:`v31_trainable`).
"""

from __future__ import annotations

import copy
import functools
import json
import re
from typing import Any

import jinja2
import jinja2.sandbox
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from renderers import (
    Message,
    ParseResult,
    Part,
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
from renderers.deepseek_v3 import DeepSeekV3Renderer
from renderers.deepseek_v3_1 import DeepSeekV31Renderer
from tests.conftest import tokenizer_for
from tests.corpus import (
    CORPUS,
    DASHED_TOOL,
    SYS,
    TOOLS,
    Conversation,
    call,
    prompts_of,
    result,
)
from tests.one_shot import parsed_both_ways
from tests.training import supervised_or_dropped

V3 = "deepseek-ai/DeepSeek-V3"
V31 = "deepseek-ai/DeepSeek-V3.1"
BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"


@pytest.fixture(scope="module")
def v3() -> DeepSeekV3Renderer:
    return DeepSeekV3Renderer(tokenizer_for(V3))


@pytest.fixture(scope="module")
def v31() -> DeepSeekV31Renderer:
    return DeepSeekV31Renderer(tokenizer_for(V31))


# -- the oracle ------------------------------------------------------------------------------


@functools.cache
def _template(model_id: str) -> jinja2.Template:
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(tokenizer_for(model_id).chat_template)


def template_input(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation as the templates accept it: list content joined (they fail on
    lists), tool-call arguments as JSON text (they concatenate strings), and ``content: ""``
    of a tool-call message as None (our model does not tell them apart; the V3 template
    would hide the calls)."""
    out = []
    for m in messages:
        m = copy.deepcopy(m)
        if isinstance(m.get("content"), list):
            m["content"] = "".join(p.get("text", "") for p in m["content"] if p["type"] == "text")
        if m.get("tool_calls"):
            for c in m["tool_calls"]:
                if not isinstance(c["function"]["arguments"], str):
                    c["function"]["arguments"] = json.dumps(
                        c["function"]["arguments"], ensure_ascii=False
                    )
            if m.get("content") == "":
                m["content"] = None
        out.append(m)
    return out


def template_text(model_id: str, messages: list[dict[str, Any]], gen: bool, **kw: Any) -> str:
    tok = tokenizer_for(model_id)
    return _template(model_id).render(
        messages=template_input(messages),
        bos_token=tok.bos_token,
        eos_token=tok.eos_token,
        add_generation_prompt=gen,
        **kw,
    )


def oracle(model_id: str, messages: list[dict[str, Any]], gen: bool, **kw: Any) -> list[int]:
    ids: list[int] = tokenizer_for(model_id).encode(
        template_text(model_id, messages, gen, **kw), add_special_tokens=False
    )
    return ids


def encode(model_id: str, text: str) -> list[int]:
    """Hand-written template text tokenized the way the template's output is."""
    ids: list[int] = tokenizer_for(model_id).encode(text, add_special_tokens=False)
    return ids


# -- the corpus ------------------------------------------------------------------------------

TOOL_MSG = [call("get_weather", {"city": "Paris"}, "c1")]


def _c(id: str, messages: list[dict[str, Any]], tools: Any = None, *tags: str) -> Conversation:
    return Conversation(id, messages, tools, frozenset(tags))


EXTRA = [
    _c(
        "ds_two_system_messages",
        [
            SYS,
            {"role": "user", "content": "Hi"},
            {"role": "system", "content": "Answer in one word."},
            {"role": "assistant", "content": "Hello."},
        ],
        None,
        "system",
    ),
    _c(
        "ds_tool_result_then_user",
        [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": None, "tool_calls": TOOL_MSG},
            result("c1", "18°C"),
            {"role": "user", "content": "Thanks. And tomorrow?"},
            {"role": "assistant", "content": "I cannot tell."},
        ],
        TOOLS,
        "tools",
    ),
    _c(
        "ds_three_parallel_calls_twice",
        [
            {"role": "user", "content": "Weather in three cities?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    call("get_weather", {"city": c}, f"c{k}")
                    for k, c in enumerate(["Paris", "Oslo", "Rome"])
                ],
            },
            result("c0", "18"),
            result("c1", "3"),
            result("c2", "25"),
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    call("search", {"query": "Oslo forecast"}, "c3"),
                    call("search", {"query": "Rome forecast"}, "c4"),
                ],
            },
            result("c3", "snow"),
            result("c4", "sun"),
            {"role": "assistant", "content": "Paris 18, Oslo 3 (snow), Rome 25 (sun)."},
        ],
        TOOLS,
        "tools",
    ),
    _c(
        "ds_call_after_call_ends_with_tool",
        [
            {"role": "user", "content": "Find the city, then its weather."},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [call("search", {"query": "city of the Louvre"}, "c1")],
            },
            result("c1", "Paris"),
            {"role": "assistant", "content": None, "tool_calls": TOOL_MSG},
            result("c2", "18°C"),
        ],
        TOOLS,
        "tools",
    ),
    _c(
        "ds_assistant_after_assistant",
        [
            {"role": "user", "content": "Two messages please."},
            {"role": "assistant", "content": "First."},
            {"role": "assistant", "content": "Second."},
        ],
    ),
    _c("ds_system_only", [SYS]),
    _c(
        "ds_unicode_tool_io",
        [
            {"role": "user", "content": "東京の天気は？ 🌧"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [call("get-weather.v2", {"q": "東京 🌧"}, "c1")],
            },
            result("c1", "雨、12°C ☔ — «pluie»"),
            {"role": "assistant", "content": "東京は雨です ☔"},
        ],
        [DASHED_TOOL],
        "tools",
        "unicode",
    ),
    _c(
        "ds_inline_reasoning_content",
        [
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "Simple sum.</think>4"},
        ],
    ),
    _c(
        "ds_empty_tool_result",
        [
            {"role": "user", "content": "Ping"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [call("search", {"query": ""}, "c1")],
            },
            result("c1", ""),
            {"role": "assistant", "content": "Nothing found."},
        ],
        TOOLS,
        "tools",
    ),
    _c(
        "ds_answer_with_leading_space_and_newlines",
        [
            {"role": "user", "content": "Indent?"},
            {"role": "assistant", "content": "  \n\n  indented\n"},
            {"role": "user", "content": "\nnewline first"},
        ],
    ),
    _c(
        "ds_tool_call_string_args_unicode_escape",
        [
            {"role": "user", "content": "Zürich?"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {
                            "name": "get_weather",
                            "arguments": '{"city":"Z\\u00fcrich","days":[1,2]}',
                        },
                    }
                ],
            },
        ],
        TOOLS,
        "tools",
    ),
]

ALL = [c for c in CORPUS if "adversarial" not in c.tags] + EXTRA


def without_reasoning(conv: Conversation) -> Conversation:
    """The conversation without assistant reasoning. The V3 template drops reasoning, so
    its rendering is unchanged; the V3 renderer rejects reasoning unless
    ``render_thinking=True`` (tested separately)."""
    out = conv.copy()
    for m in out.messages:
        if m["role"] != "assistant":
            continue
        m.pop("reasoning_content", None)
        if isinstance(m.get("content"), list):
            m["content"] = [p for p in m["content"] if p.get("type") != "thinking"]
    return out


# The V3 template drops the calls of a message that also has text (tested separately).
V3_CORPUS = [without_reasoning(c) for c in ALL if "text_and_calls" not in c.tags]
V31_CORPUS = ALL


def test_corpus_is_large_enough() -> None:
    assert len(V3_CORPUS) >= 30
    assert len(V31_CORPUS) >= 30
    assert sum("tools" in c.tags for c in V3_CORPUS) >= 15


def test_oracle_equals_apply_chat_template() -> None:
    """The jinja oracle renders what transformers renders, wherever transformers can (no
    message with ``content: None``)."""
    checked = 0
    for model_id in (V3, V31):
        tok = tokenizer_for(model_id)
        for conv in ALL:
            messages = template_input(conv.messages)
            if any(m.get("content") is None for m in messages):
                continue
            for kw in ({}, {"thinking": True}) if model_id == V31 else ({},):
                for gen in (True, False):
                    expected = tok.apply_chat_template(
                        messages, tokenize=False, add_generation_prompt=gen, **kw
                    )
                    assert template_text(model_id, conv.messages, gen, **kw) == expected
                    checked += 1
    assert checked > 100


def test_transformers_cannot_render_tool_calls_without_content() -> None:
    """Why the oracle renders the template itself (see the module doc)."""
    messages = template_input(
        [
            {"role": "user", "content": "x"},
            {"role": "assistant", "content": None, "tool_calls": TOOL_MSG},
        ]
    )
    for model_id in (V3, V31):
        with pytest.raises(jinja2.exceptions.UndefinedError):
            tokenizer_for(model_id).apply_chat_template(messages, tokenize=False)


def test_token_table_agrees_with_the_tokenizer(
    v3: DeepSeekV3Renderer, v31: DeepSeekV31Renderer
) -> None:
    texts = ["Hello, world!", "日本語 🎉 Ünïcödé 12345", "  spaced\n\n\tout ", "<think>"]
    for r, model_id in ((v3, V3), (v31, V31)):
        tok = tokenizer_for(model_id)
        for text in texts:
            if text == "<think>" and model_id == V31:
                continue
            ids = encode(model_id, text)
            assert r.table.encode(text) == ids
            assert r.decode(ids) == text
        for name in (BOS, EOS, "<｜User｜>", "<｜tool▁sep｜>"):
            assert r.table.control_id(name) == tok.convert_tokens_to_ids(name)
    assert v3.stop_token_ids == (tokenizer_for(V3).convert_tokens_to_ids(EOS),)
    assert v31.stop_token_ids == (1,)


# -- rendering parity ------------------------------------------------------------------------

MODES: list[Any] = [
    pytest.param(V3, {}, id="v3"),
    pytest.param(V31, {"thinking": False}, id="v3.1"),
    pytest.param(V31, {"thinking": True}, id="v3.1-thinking"),
]


def renderer_for(model_id: str) -> DeepSeekV3Renderer | DeepSeekV31Renderer:
    return _renderer(model_id)


@functools.cache
def _renderer(model_id: str) -> DeepSeekV3Renderer | DeepSeekV31Renderer:
    if model_id == V3:
        return DeepSeekV3Renderer(tokenizer_for(V3))
    return DeepSeekV31Renderer(tokenizer_for(V31))


def corpus_for(model_id: str) -> list[Conversation]:
    return V3_CORPUS if model_id == V3 else V31_CORPUS


PROMPT_CASES = [
    pytest.param(model_id, kw, conv, k, id=f"{p.id}-{conv.id}-{k}")
    for p in MODES
    for model_id, kw in [p.values]
    for conv in corpus_for(model_id)
    for k in range(len(prompts_of(conv)))
]


@pytest.mark.parametrize(("model_id", "kw", "conv", "k"), PROMPT_CASES)
def test_generation_prompt_matches_template(
    model_id: str, kw: dict[str, Any], conv: Conversation, k: int
) -> None:
    r = renderer_for(model_id)
    messages = prompts_of(conv)[k]
    got = r.build_generation_prompt(messages, tools=conv.tools, **kw)
    assert got == oracle(model_id, messages, True, **kw), r.decode(got)


SUPERVISED_CASES = [
    pytest.param(model_id, kw, conv, id=f"{p.id}-{conv.id}")
    for p in MODES
    for model_id, kw in [p.values]
    for conv in corpus_for(model_id)
    if any(m["role"] == "assistant" for m in conv.messages)
]


@pytest.mark.parametrize(("model_id", "kw", "conv"), SUPERVISED_CASES)
def test_supervised_tokens_match_template(
    model_id: str, kw: dict[str, Any], conv: Conversation
) -> None:
    r = renderer_for(model_id)
    expected = oracle(model_id, conv.messages, False, **kw)
    messages = v31_trainable(conv.messages, **kw) if model_id == V31 else conv.messages
    for train_on in TrainOn:
        try:
            example, _ = supervised_or_dropped(
                r, messages, tools=conv.tools, train_on=train_on, **kw
            )
        except ValueError as exc:
            # The template defect's header-less turn merges with the user's text: a trained
            # token would hold untrained text (asserted in the weights tests below).
            assert model_id == V3 and MIXED_TOKEN in str(exc), exc
            continue
        assert example.tokens.tolist() == expected, r.decode(example.tokens.tolist())
        assert example.weights.shape == example.tokens.shape
        assert example.tokens.dtype == np.int64


# -- loss weights ------------------------------------------------------------------------------


def _assistant_turns(model_id: str) -> list[Any]:
    return [
        pytest.param(conv, i, id=f"{conv.id}-{i}")
        for conv in corpus_for(model_id)
        for i, m in enumerate(conv.messages)
        if m["role"] == "assistant" and i > 0
    ]


def _lcp(a: list[int], b: list[int]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _sampled_from(ids: list[int], n: int, stop: int) -> list[float]:
    """Weights trained from ``n`` through the first stop token: calls the V3 template writes
    after an ``<｜end▁of▁sentence｜>`` of the same turn are never sampled (the model stops)."""
    end = ids.index(stop, n) + 1 if stop in ids[n:] else len(ids)
    return [0.0] * n + [1.0] * (end - n) + [0.0] * (len(ids) - end)


def _v3_prefix_breaks(messages: list[dict[str, Any]], i: int) -> bool:
    """Documented: in template mode, a V3 tool-call turn does not extend the generation
    prompt when it follows tool outputs or an earlier tool-call turn."""
    m = messages[i]
    if not m.get("tool_calls"):
        return False
    earlier_calls = any(x.get("tool_calls") for x in messages[:i] if x["role"] == "assistant")
    previous = [x for x in messages[:i] if x["role"] != "system"]
    return earlier_calls or (bool(previous) and previous[-1]["role"] == "tool")


def _after(role: str, messages: list[dict[str, Any]], i: int) -> bool:
    """Whether the message before ``messages[i]`` (system messages aside) has ``role``."""
    previous = [x for x in messages[:i] if x["role"] != "system"]
    return bool(previous) and previous[-1]["role"] == role


def _after_user(messages: list[dict[str, Any]], i: int) -> bool:
    return _after("user", messages, i)


MIXED_TOKEN = "holds text of this trained turn and untrained text"


def v31_error(i: int, *, after_tools: bool) -> str:
    """The error for a V3.1 trained turn ``messages[i]`` whose reasoning would be lost."""
    how = (
        "a turn right after tool outputs has no think block in this format"
        if after_tools
        else "pass thinking=True, keep_thinking=True to train on it"
    )
    return re.escape(
        f"messages[{i}]: deepseek_v3.1 cannot write the reasoning of this trained turn (its "
        f"template drops it; {how}); pass reasoning='drop' to leave it out, or remove it"
    )


def v31_trainable(messages: list[dict[str, Any]], **kw: Any) -> list[dict[str, Any]]:
    """``messages`` as the V3.1 renderer trains on them with options ``kw``.

    When the last message is an assistant turn whose reasoning the template drops (not
    kept by ``thinking=True, keep_thinking=True`` right after a user message), the
    renderer refuses the conversation: asserted here, naming the message and the option.
    The turn is then given without that reasoning -- its ``reasoning_content``, thinking
    parts and, for a plain answer not after tool outputs and without reasoning of its own,
    the inline reasoning up to its first ``</think>`` -- and the template renders the same
    text with and without it (asserted): the turn as the template trains on it."""
    i = len(messages) - 1
    m = messages[i]
    if m["role"] != "assistant":
        return messages
    if kw.get("thinking") and kw.get("keep_thinking") and _after_user(messages, i):
        return messages
    after_tools = _after("tool", messages, i)
    turn = copy.deepcopy(m)
    lost = turn.pop("reasoning_content", None) or ""
    content = turn.get("content") or ""
    own = bool(lost)
    if isinstance(content, list):
        thinking = [p for p in content if p["type"] == "thinking"]
        own = own or bool(thinking)
        lost += "".join(p.get("text", p.get("thinking", "")) for p in thinking)
        turn["content"] = [p for p in content if p["type"] != "thinking"]
        content = "".join(p["text"] for p in turn["content"])
    if not turn.get("tool_calls") and not after_tools and "</think>" in content:
        before, turn["content"] = content.split("</think>", 1)
        if not own:
            lost += before.removeprefix("<think>")
    if not lost:
        return messages
    trained = [*messages[:i], turn]
    assert template_text(V31, trained, False, **kw) == template_text(V31, messages, False, **kw)
    with pytest.raises(ValueError, match=f"^{v31_error(i, after_tools=after_tools)}$"):
        _renderer(V31).build_supervised_example(messages, **kw)
    return trained


@pytest.mark.parametrize(("model_id", "kw"), [p.values for p in MODES], ids=[p.id for p in MODES])
def test_last_assistant_weights_cover_exactly_the_sampled_tokens(
    model_id: str, kw: dict[str, Any]
) -> None:
    """For every assistant turn (as the last message): weights are 1 exactly on what the
    model samples after the template's generation prompt, through the
    ``<｜end▁of▁sentence｜>`` that ends the turn. Where the template's history does not
    extend its generation prompt, the cases are exactly the documented ones."""
    r = renderer_for(model_id)
    breaks = []
    for param in _assistant_turns(model_id):
        conv, i = param.values
        messages = conv.messages[: i + 1]
        prompt = oracle(model_id, messages[:-1], True, **kw)
        full = oracle(model_id, messages, False, **kw)
        if model_id == V31:
            messages = v31_trainable(messages, **kw)
        try:
            example = r.build_supervised_example(messages, tools=conv.tools, **kw)
        except ValueError as exc:
            # A documented V3 break where the end of the user's text and the start of the
            # turn are one token: training it would train untrained text, an error.
            assert model_id == V3 and MIXED_TOKEN in str(exc), exc
            assert _v3_prefix_breaks(conv.messages, i)
            breaks.append(param.id)
            continue
        assert example.tokens.tolist() == full
        weights = example.weights.tolist()
        if full[: len(prompt)] == prompt:
            assert weights == _sampled_from(full, len(prompt), r.eos), param.id
            continue
        breaks.append(param.id)
        if model_id == V3:
            # The turn's own tokens, starting where it departs from the prompt, are trained.
            assert weights == _sampled_from(full, _lcp(full, prompt), r.eos), param.id
        else:
            # Thinking mode: the template writes history as non-thinking turns; weights
            # are those of the non-thinking rendering.
            plain = r.build_supervised_example(
                v31_trainable(messages, thinking=False), tools=conv.tools, thinking=False
            )
            assert plain.tokens.tolist() == full
            assert weights == plain.weights.tolist()
    documented = []
    for param in _assistant_turns(model_id):
        conv, i = param.values
        if model_id == V3 and _v3_prefix_breaks(conv.messages, i):
            documented.append(param.id)
        if model_id == V31 and kw["thinking"] and _after_user(conv.messages, i):
            documented.append(param.id)
    assert breaks == documented
    if model_id == V31 and not kw["thinking"]:
        assert breaks == []
    else:
        assert breaks


@pytest.mark.parametrize(("model_id", "kw"), [p.values for p in MODES], ids=[p.id for p in MODES])
def test_all_assistant_weights_are_the_union_of_each_turn(
    model_id: str, kw: dict[str, Any]
) -> None:
    r = renderer_for(model_id)

    def trainable(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return v31_trainable(messages, **kw) if model_id == V31 else messages

    for conv in corpus_for(model_id):
        turns = [i for i, m in enumerate(conv.messages) if m["role"] == "assistant"]
        if not turns:
            continue
        try:
            example, dropped = supervised_or_dropped(
                r, trainable(conv.messages), tools=conv.tools, train_on="all_assistant", **kw
            )
        except ValueError as exc:
            assert model_id == V3 and MIXED_TOKEN in str(exc), exc
            continue
        expected = np.zeros(len(example.tokens), dtype=np.float32)
        for i in turns:
            part = r.build_supervised_example(
                trainable(conv.messages[: i + 1]),
                tools=conv.tools,
                **kw,
                **({"reasoning": "drop"} if dropped else {}),
            )
            n = len(part.tokens)
            assert example.tokens[:n].tolist() == part.tokens.tolist()
            expected[:n] = np.maximum(expected[:n], part.weights)
        assert example.weights.tolist() == expected.tolist(), conv.id
        assert example.weights.sum() > 0


def test_train_on_all_and_errors(v31: DeepSeekV31Renderer) -> None:
    conv = CORPUS[2]
    assert v31.build_supervised_example(conv.messages, train_on="all").weights.min() == 1.0
    with pytest.raises(ValueError, match="train_on"):
        v31.build_supervised_example(conv.messages, train_on="everything")
    with pytest.raises(ValueError, match="no assistant message"):
        v31.build_supervised_example([{"role": "user", "content": "hi"}])


# -- template behaviours we do not reproduce ---------------------------------------------------


def test_v3_keeps_calls_that_the_template_drops_next_to_text(v3: DeepSeekV3Renderer) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Weather?"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": TOOL_MSG},
    ]
    dropped = template_text(V3, messages, False)
    assert "tool▁call" not in dropped
    # content "" hides the calls in the template as well.
    empty = _template(V3).render(
        messages=[messages[0], {**template_input(messages)[1], "content": ""}],
        bos_token=BOS,
        add_generation_prompt=False,
    )
    assert empty == BOS + "<｜User｜>Weather?<｜Assistant｜>" + EOS
    got = v3.decode(v3.build_supervised_example(messages).tokens.tolist())
    assert got == (
        BOS + "<｜User｜>Weather?<｜Assistant｜>Let me check.<｜tool▁calls▁begin｜>"
        "<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
        '{"city": "Paris"}\n```<｜tool▁call▁end｜>'
    )
    messages[1]["content"] = ""
    assert "get_weather" in v3.decode(v3.build_supervised_example(messages).tokens.tolist())


def test_list_content_is_joined_where_the_templates_fail() -> None:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "A"}, {"type": "text", "text": "B"}]}
    ]
    for model_id in (V3, V31):
        with pytest.raises(TypeError):
            _template(model_id).render(messages=messages, bos_token=BOS, add_generation_prompt=True)
        r = renderer_for(model_id)
        assert r.build_generation_prompt(messages) == oracle(
            model_id, [{"role": "user", "content": "AB"}], True
        )


def test_v3_fixed_tool_format_golden(v3: DeepSeekV3Renderer) -> None:
    """``fix_tool_format=True``: sections always closed, every group of outputs wrapped."""
    conv = next(c for c in EXTRA if c.id == "ds_three_parallel_calls_twice")
    messages = [*conv.messages[:5], {"role": "user", "content": "More?"}, *conv.messages[5:]]

    def calls(*pairs: tuple[str, str]) -> str:
        return "\n".join(
            f"<｜tool▁call▁begin｜>function<｜tool▁sep｜>{n}\n```json\n{a}\n```<｜tool▁call▁end｜>"
            for n, a in pairs
        )

    expected = (
        BOS
        + "<｜User｜>Weather in three cities?<｜Assistant｜><｜tool▁calls▁begin｜>"
        + calls(
            ("get_weather", '{"city": "Paris"}'),
            ("get_weather", '{"city": "Oslo"}'),
            ("get_weather", '{"city": "Rome"}'),
        )
        + "<｜tool▁calls▁end｜>"
        + EOS
        + "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>18<｜tool▁output▁end｜>\n"
        "<｜tool▁output▁begin｜>3<｜tool▁output▁end｜>\n<｜tool▁output▁begin｜>25<｜tool▁output▁end｜>"
        "<｜tool▁outputs▁end｜><｜User｜>More?<｜Assistant｜><｜tool▁calls▁begin｜>"
        + calls(("search", '{"query": "Oslo forecast"}'), ("search", '{"query": "Rome forecast"}'))
        + "<｜tool▁calls▁end｜>"
        + EOS
        + "<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>snow<｜tool▁output▁end｜>\n"
        "<｜tool▁output▁begin｜>sun<｜tool▁output▁end｜><｜tool▁outputs▁end｜>"
        "Paris 18, Oslo 3 (snow), Rome 25 (sun)." + EOS
    )
    example = v3.build_supervised_example(messages, train_on="all_assistant", fix_tool_format=True)
    assert example.tokens.tolist() == encode(V3, expected)
    trained = v3.decode([t for t, w in zip(example.tokens, example.weights, strict=True) if w])
    assert trained == (
        "<｜tool▁calls▁begin｜>"
        + calls(
            ("get_weather", '{"city": "Paris"}'),
            ("get_weather", '{"city": "Oslo"}'),
            ("get_weather", '{"city": "Rome"}'),
        )
        + "<｜tool▁calls▁end｜>"
        + EOS
        + "<｜tool▁calls▁begin｜>"
        + calls(("search", '{"query": "Oslo forecast"}'), ("search", '{"query": "Rome forecast"}'))
        + "<｜tool▁calls▁end｜>"
        + EOS
        + "Paris 18, Oslo 3 (snow), Rome 25 (sun)."
        + EOS
    )


def test_v3_fixed_tool_format_extends_every_generation_prompt(v3: DeepSeekV3Renderer) -> None:
    """With the corrected format every assistant turn extends the generation prompt of
    the conversation before it (the template's does not, see the weights test)."""
    checked = 0
    for conv in map(without_reasoning, ALL):
        for i, m in enumerate(conv.messages):
            if m["role"] != "assistant" or i == 0:
                continue
            messages = conv.messages[: i + 1]
            prompt = v3.build_generation_prompt(messages[:-1], fix_tool_format=True)
            example = v3.build_supervised_example(messages, fix_tool_format=True)
            tokens, weights = example.tokens.tolist(), example.weights.tolist()
            assert tokens[: len(prompt)] == prompt, conv.id
            assert weights == [0.0] * len(prompt) + [1.0] * (len(tokens) - len(prompt))
            assert tokens[-1] == v3.eos
            checked += 1
    assert checked > 40


def test_v3_fixed_format_equals_template_without_tool_calls(v3: DeepSeekV3Renderer) -> None:
    for conv in V3_CORPUS:
        if "tools" not in conv.tags and any(m["role"] == "assistant" for m in conv.messages):
            fixed = v3.build_supervised_example(conv.messages, fix_tool_format=True)
            assert fixed.tokens.tolist() == oracle(V3, conv.messages, False)


def test_v31_keep_thinking_golden(v31: DeepSeekV31Renderer) -> None:
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "Is 17 prime?"},
        {"role": "assistant", "content": "Yes.", "reasoning_content": "Divisors up to 4."},
        {"role": "user", "content": "And 21?"},
        {
            "role": "assistant",
            "content": "No.",
            "reasoning_content": "21 = 3 x 7.",
            "tool_calls": [call("search", {"query": "21"}, "c1")],
        },
    ]
    example = v31.build_supervised_example(messages, thinking=True, keep_thinking=True)
    expected = (
        BOS
        + "<｜User｜>Is 17 prime?<｜Assistant｜></think>Yes."
        + EOS
        + "<｜User｜>And 21?<｜Assistant｜><think>21 = 3 x 7.</think>No.<｜tool▁calls▁begin｜>"
        '<｜tool▁call▁begin｜>search<｜tool▁sep｜>{"query": "21"}<｜tool▁call▁end｜>'
        "<｜tool▁calls▁end｜>" + EOS
    )
    assert example.tokens.tolist() == encode(V31, expected)
    prompt = oracle(V31, messages[:3], True, thinking=True)
    n = len(prompt)
    assert example.tokens.tolist()[:n] == prompt
    assert example.weights.tolist() == [0.0] * n + [1.0] * (len(example.tokens) - n)
    # Without thinking mode the option has no effect: the template drops the trained
    # turn's reasoning, which is an error naming the option (as without the option, and
    # with thinking=True alone); without that reasoning the template's rendering results.
    for options in _WITHOUT_KEEP:
        with pytest.raises(ValueError, match=f"^{v31_error(3, after_tools=False)}$"):
            v31.build_supervised_example(messages, **options)
    stripped = [*messages[:3], {k: v for k, v in messages[3].items() if k != "reasoning_content"}]
    assert template_text(V31, stripped, False) == template_text(V31, messages, False)
    assert v31.build_supervised_example(stripped, keep_thinking=True).tokens.tolist() == oracle(
        V31, messages, False
    )


def test_v31_keep_thinking_extends_the_thinking_prompt(v31: DeepSeekV31Renderer) -> None:
    checked = 0
    for conv in V31_CORPUS:
        for i, m in enumerate(conv.messages):
            if m["role"] != "assistant" or i == 0:
                continue
            # (After tool outputs reasoning cannot be kept: asserted, and left out.)
            messages = v31_trainable(conv.messages[: i + 1], thinking=True, keep_thinking=True)
            prompt = v31.build_generation_prompt(messages[:-1], thinking=True)
            assert prompt == oracle(V31, messages[:-1], True, thinking=True)
            example = v31.build_supervised_example(messages, thinking=True, keep_thinking=True)
            tokens, weights = example.tokens.tolist(), example.weights.tolist()
            assert tokens[: len(prompt)] == prompt, conv.id
            assert weights == [0.0] * len(prompt) + [1.0] * (len(tokens) - len(prompt))
            checked += 1
    assert checked > 40


def test_v3_render_thinking_writes_r1_style_reasoning(v3: DeepSeekV3Renderer) -> None:
    conv = next(c for c in CORPUS if c.id == "reasoning_last")
    # The template drops the reasoning; the renderer refuses to lose it silently.
    with pytest.raises(
        ValueError, match=r"messages\[1\]: .*render_thinking=True.*reasoning='drop'"
    ):
        v3.build_supervised_example(conv.messages)
    stripped = without_reasoning(conv).messages
    assert v3.build_supervised_example(stripped).tokens.tolist() == oracle(V3, conv.messages, False)
    example = v3.build_supervised_example(conv.messages, render_thinking=True)
    expected = (
        BOS + "<｜User｜>Is 17 prime?<｜Assistant｜><think>\n"
        "17 has no divisors other than 1 and itself.\n</think>\n\nYes, 17 is prime." + EOS
    )
    assert example.tokens.tolist() == encode(V3, expected)


# -- message text is ordinary text ---------------------------------------------------------------


@pytest.mark.parametrize("model_id", [V3, V31])
@pytest.mark.parametrize("role", ["system", "user", "tool", "assistant"])
def test_control_token_spellings_in_text_stay_ordinary(model_id: str, role: str) -> None:
    r = renderer_for(model_id)
    spelled = "".join(sorted(r.table.control_tokens))
    messages: list[dict[str, Any]] = [{"role": "user", "content": "q"}]
    if role == "tool":
        messages.append({"role": "assistant", "content": None, "tool_calls": TOOL_MSG})
    messages.append({"role": role, "content": spelled})
    safe = json.loads(json.dumps(messages).replace(json.dumps(spelled)[1:-1], "plain words"))
    got = r.build_generation_prompt(messages)
    baseline = r.build_generation_prompt(safe)
    controls = r.table.control_ids
    assert [t for t in got if t in controls] == [t for t in baseline if t in controls]
    # Same characters as the template's output; only the tokenization differs.
    assert r.decode(got) == template_text(model_id, messages, True)
    assert got != oracle(model_id, messages, True)


def test_adversarial_corpus_entry(v3: DeepSeekV3Renderer, v31: DeepSeekV31Renderer) -> None:
    conv = next(c for c in CORPUS if c.id == "special_looking_text")
    for r, model_id in ((v3, V3), (v31, V31)):
        got = r.build_supervised_example(conv.messages).tokens.tolist()
        assert r.decode(got) == template_text(model_id, conv.messages, False)
    got = v31.build_generation_prompt(conv.messages[:1])
    assert got.count(v31.think_end) == 1  # the prompt's own </think>, not the user's


# -- reasoning of the trained turn (V3.1) -------------------------------------------------------

_QUESTION = {"role": "user", "content": "Is 17 prime?"}
_MODES: tuple[dict[str, Any], ...] = ({"thinking": False}, {"thinking": True})
_KEEP: dict[str, Any] = {"thinking": True, "keep_thinking": True}
_WITHOUT_KEEP: tuple[dict[str, Any], ...] = ({}, {"thinking": True}, {"keep_thinking": True})
_V31_HISTORY: list[dict[str, Any]] = [
    SYS,
    _QUESTION,
    {"role": "assistant", "content": "Let me see.", "reasoning_content": "Think first."},
    _QUESTION,
]
# Trained turns with reasoning (each after _V31_HISTORY, so messages[4]), and the
# reasoning as the model samples it in thinking mode.
_V31_REASONING_TURNS: list[tuple[dict[str, Any], str]] = [
    ({"role": "assistant", "content": "Yes.", "reasoning_content": "No divisors."}, "No divisors."),
    (
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "text": "No divisors."},
                {"type": "text", "text": "Yes."},
            ],
        },
        "No divisors.",
    ),
    ({"role": "assistant", "content": "No divisors.</think>Yes."}, "No divisors."),
    (
        {
            "role": "assistant",
            "content": None,
            "reasoning_content": "Look it up.",
            "tool_calls": TOOL_MSG,
        },
        "Look it up.",
    ),
]


@pytest.mark.parametrize(("turn", "reasoning"), _V31_REASONING_TURNS)
def test_v31_trained_turn_whose_reasoning_the_template_drops_is_an_error(
    v31: DeepSeekV31Renderer, turn: dict[str, Any], reasoning: str
) -> None:
    """Training on a turn the template writes without its reasoning (reasoning_content,
    a thinking part, inline reasoning before ``</think>``; plain or before tool calls)
    would silently teach the turn without it: a ValueError naming the message and the
    option that keeps it, whatever the loss weights and unless thinking=True,
    keep_thinking=True."""
    messages = [*_V31_HISTORY, turn]
    for options in _WITHOUT_KEEP:
        for train_on in TrainOn:
            # Modes that train every assistant turn meet messages[2]'s reasoning first.
            first = 2 if train_on in (TrainOn.ALL, TrainOn.ALL_ASSISTANT) else 4
            with pytest.raises(ValueError, match=f"^{v31_error(first, after_tools=False)}$"):
                v31.build_supervised_example(messages, train_on=train_on, **options)
    # As history (a generation prompt, or a later trained turn), the template's
    # rendering, without an error.
    later = [*messages, {"role": "user", "content": "And 21?"}]
    for options in _MODES:
        assert v31.build_generation_prompt(later, **options) == oracle(V31, later, True, **options)
        answered = [*later, {"role": "assistant", "content": "No."}]
        example = v31.build_supervised_example(answered, **options)
        assert example.tokens.tolist() == oracle(V31, answered, False, **options)
    # The option keeps it: the turn as the model samples it in thinking mode.
    example = v31.build_supervised_example(messages, thinking=True, keep_thinking=True)
    prompt = oracle(V31, messages[:-1], True, thinking=True)
    tokens = example.tokens.tolist()
    assert tokens[: len(prompt)] == prompt
    assert example.weights.tolist() == [0.0] * len(prompt) + [1.0] * (len(tokens) - len(prompt))
    assert v31.decode(tokens[len(prompt) :]).startswith(reasoning + "</think>")


def test_v31_reasoning_after_tool_outputs_cannot_be_trained(v31: DeepSeekV31Renderer) -> None:
    """After tool outputs the format has no think block (no ``<｜Assistant｜>`` header):
    the reasoning of such a trained turn cannot be kept even with keep_thinking=True, and
    the error says so."""
    messages: list[dict[str, Any]] = [
        _QUESTION,
        {"role": "assistant", "content": None, "tool_calls": TOOL_MSG},
        result("c1", "18°C"),
        {"role": "assistant", "content": "18°C.", "reasoning_content": "The tool says 18."},
    ]
    for options in (*_WITHOUT_KEEP, _KEEP):
        with pytest.raises(ValueError, match=f"^{v31_error(3, after_tools=True)}$"):
            v31.build_supervised_example(messages, **options)
    # "</think>" after tool outputs is answer text (the template writes it), not inline
    # reasoning: no error. (Encoded as ordinary text: the characters are the template's.)
    inline = [*messages[:3], {"role": "assistant", "content": "a</think>b"}]
    for options in ({}, _KEEP):
        example = v31.build_supervised_example(inline, **options)
        text = v31.decode(example.tokens.tolist())
        assert text == template_text(V31, inline, False) and text.endswith("a</think>b" + EOS)
    stripped = v31_trainable(messages, thinking=True, keep_thinking=True)
    assert stripped[-1] == {"role": "assistant", "content": "18°C."}
    example = v31.build_supervised_example(stripped, thinking=True, keep_thinking=True)
    assert example.tokens.tolist() == oracle(V31, messages, False, thinking=True)


def test_v31_reasoning_of_history_turns_is_dropped_without_an_error(
    v31: DeepSeekV31Renderer,
) -> None:
    """History turns with reasoning (plain, inline, before tool calls, after tool outputs)
    are written as the template writes them, reasoning dropped: not an error, with or
    without the options."""
    messages: list[dict[str, Any]] = [
        _QUESTION,
        {"role": "assistant", "content": "Yes.", "reasoning_content": "No divisors."},
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": "Checking.",
            "reasoning_content": "Use the tool.",
            "tool_calls": TOOL_MSG,
        },
        result("c1", "18°C"),
        {"role": "assistant", "content": "Warm.", "reasoning_content": "After the tool."},
        {"role": "user", "content": "Thanks."},
        {"role": "assistant", "content": "Reasoning inline.</think>You are welcome."},
        {"role": "user", "content": "Bye."},
        {"role": "assistant", "content": "Bye."},
    ]
    for options in _MODES:
        for train_on in TrainOn:
            # Trained history turns with reasoning are refused (the one rule), and
            # trained without it on request: the template's rendering either way.
            example, refused = supervised_or_dropped(v31, messages, train_on=train_on, **options)
            assert refused == (train_on in (TrainOn.ALL, TrainOn.ALL_ASSISTANT))
            assert example.tokens.tolist() == oracle(V31, messages, False, **options)
        assert v31.build_generation_prompt(messages[:-1], **options) == oracle(
            V31, messages[:-1], True, **options
        )
    kept = v31.build_supervised_example(messages, thinking=True, keep_thinking=True)
    text = v31.decode(kept.tokens.tolist())
    for dropped in ("No divisors.", "Use the tool.", "After the tool.", "Reasoning inline."):
        assert dropped not in text
    assert text.endswith("<｜User｜>Bye.<｜Assistant｜><think></think>Bye." + EOS)


def test_v31_empty_reasoning_of_the_trained_turn_is_not_an_error(
    v31: DeepSeekV31Renderer,
) -> None:
    """Nothing is lost: empty ``reasoning_content``, or an inline ``</think>`` with
    nothing (or only ``<think>``) before it."""
    for turn in (
        {"role": "assistant", "content": "Yes.", "reasoning_content": ""},
        {"role": "assistant", "content": "</think>Yes."},
        {"role": "assistant", "content": "<think></think>Yes."},
        {
            "role": "assistant",
            "content": [{"type": "thinking", "text": ""}, {"type": "text", "text": "Yes."}],
        },
    ):
        messages = [_QUESTION, turn]
        for options in _MODES:
            example = v31.build_supervised_example(messages, **options)
            plain = [_QUESTION, {"role": "assistant", "content": "Yes."}]
            assert example.tokens.tolist() == oracle(V31, plain, False, **options)


def test_v31_keep_thinking_applies_right_after_a_user_message_only(
    v31: DeepSeekV31Renderer,
) -> None:
    """An assistant turn after another one has no header, so no think block to keep its
    reasoning in: still an error with keep_thinking=True."""
    messages: list[dict[str, Any]] = [
        _QUESTION,
        {"role": "assistant", "content": "Let me see."},
        {"role": "assistant", "content": "Yes.", "reasoning_content": "No divisors."},
    ]
    pattern = r"^messages\[2\]: deepseek_v3\.1 cannot write the reasoning of this trained"
    with pytest.raises(ValueError, match=pattern):
        v31.build_supervised_example(messages, thinking=True, keep_thinking=True)


# -- caller errors -------------------------------------------------------------------------------


def test_caller_errors_name_the_message(v3: DeepSeekV3Renderer, v31: DeepSeekV31Renderer) -> None:
    for r in (v3, v31):
        with pytest.raises(ValueError, match=r"messages\[1\]\.role: unknown role 'developer'"):
            r.build_generation_prompt(
                [{"role": "user", "content": "a"}, {"role": "developer", "content": "b"}]
            )
        with pytest.raises(ValueError, match=r"messages\[0\]\.content\[0\]"):
            r.build_generation_prompt(
                [{"role": "user", "content": [{"type": "thinking", "text": "x"}]}]
            )
        with pytest.raises(ValueError, match=r"messages\[1\]\.tool_calls\[0\]\.function\.name"):
            r.build_generation_prompt(
                [
                    {"role": "user", "content": "a"},
                    {"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]},
                ]
            )
    with pytest.raises(TypeError, match=r"unknown option.*thinkin"):
        v31.build_generation_prompt([{"role": "user", "content": "x"}], thinkin=True)
    with pytest.raises(TypeError, match=r"unknown option"):
        v3.build_generation_prompt([{"role": "user", "content": "x"}], thinking=True)


# -- parsing: round trip -------------------------------------------------------------------------


def expected_message(message: dict[str, Any], *, reasoning: bool, split: bool) -> Message:
    """What parsing the rendered turn must give back: the text, the calls (no ids: the
    formats carry none) and, when rendered, the reasoning."""
    m = Message.from_dict(message)
    parts: list[Part] = []
    text = m.text
    thinking = m.thinking
    if split and "</think>" in text and not m.tool_calls:
        before, text = text.split("</think>", 1)
        thinking = thinking or before
    if reasoning and thinking:
        parts.append(ThinkingPart(thinking))
    if text:
        parts.append(TextPart(text))
    parts += [ToolCallPart(c.name, c.arguments) for c in m.tool_calls]
    return Message("assistant", parts)


@pytest.mark.parametrize(
    ("model_id", "kw"),
    [
        pytest.param(V3, {}, id="v3"),
        pytest.param(V3, {"fix_tool_format": True}, id="v3-fixed"),
        pytest.param(V31, {"thinking": False}, id="v3.1"),
        pytest.param(V31, {"thinking": True, "keep_thinking": True}, id="v3.1-thinking"),
    ],
)
def test_round_trip_of_every_assistant_turn(model_id: str, kw: dict[str, Any]) -> None:
    """Render each assistant turn as a training target, parse its trained tokens back."""
    r = renderer_for(model_id)
    checked = 0
    for conv in corpus_for(model_id):
        for i, m in enumerate(conv.messages):
            if m["role"] != "assistant" or i == 0:
                continue
            messages = conv.messages[: i + 1]
            if (
                model_id == V3
                and not kw
                and (_v3_prefix_breaks(messages, i) or len(m.get("tool_calls") or ()) > 2)
            ):
                continue  # the template's defective turns (see the weights test)
            if model_id == V31:
                messages = v31_trainable(messages, **kw)
            example = r.build_supervised_example(messages, **kw)
            weights = example.weights.tolist()
            start = weights.index(1.0)
            completion = example.tokens.tolist()[start:]
            after_user = _after_user(messages, i)
            parse_kw = {"thinking": kw["thinking"] and after_user} if model_id == V31 else {}
            parsed = r.parse_response(completion, **parse_kw)
            expected = expected_message(
                m,
                reasoning=bool(kw.get("keep_thinking")) and after_user,
                split=model_id == V31 and not _after("tool", messages, i),
            )
            assert parsed.message == expected, (conv.id, i, r.decode(completion))
            if completion[-1] == r.eos:
                assert parsed.termination is Termination.STOP, parsed.issues
            else:  # the V3 template never closes a single call
                assert model_id == V3 and not kw
                assert parsed.termination is Termination.LENGTH
            checked += 1
    assert checked > 40


# Random assistant messages in any part order (the parser's view of a message).
_names = st.sampled_from(["get_weather", "get-weather.v2", "ns.tool_3", "f", "検索"])
_args = st.dictionaries(
    st.text("abcxyz", min_size=1, max_size=4),
    st.one_of(st.integers(-5, 5), st.text('ab é😀\n"', max_size=6), st.booleans()),
    max_size=3,
).map(lambda d: json.dumps(d, ensure_ascii=False))
_text = st.lists(
    st.sampled_from([*"ab c\n日😀<>/{}`", "<think>", "</think>", "```"]), min_size=1, max_size=12
).map("".join)
_part = st.one_of(
    _text.map(TextPart),
    st.builds(ToolCallPart, _names, _args),
)


def _canonical(parts: list[Part]) -> list[Part]:
    """Adjacent text parts merge; text between two calls of one section has no marker."""
    out: list[Part] = []
    for p in parts:
        if out and type(p) is TextPart and type(out[-1]) is TextPart:
            out[-1] = TextPart(out[-1].text + p.text)
        else:
            out.append(p)
    return out


@given(
    parts=st.lists(_part, min_size=1, max_size=5),
    reasoning=st.one_of(st.none(), _text),
    v31_mode=st.booleans(),
)
def test_round_trip_property(parts: list[Part], reasoning: str | None, v31_mode: bool) -> None:
    if v31_mode:
        r: DeepSeekV3Renderer | DeepSeekV31Renderer = renderer_for(V31)
        kw: dict[str, Any] = {"thinking": True, "keep_thinking": True}
        reasoning = reasoning.replace("</think>", "") if reasoning else reasoning
        # The template cuts a plain answer at its first "</think>" (inline reasoning).
        parts = [
            TextPart(p.text.replace("</think>", "")) if type(p) is TextPart else p for p in parts
        ]
        parts = [p for p in parts if type(p) is not TextPart or p.text]
        if not parts:
            parts = [TextPart("x")]
    else:
        r = renderer_for(V3)
        kw = {"fix_tool_format": True, "render_thinking": True}
        if reasoning is not None:
            reasoning = reasoning.replace("</think>", "") or None
        if type(parts[0]) is TextPart and parts[0].text.startswith("<think>"):
            parts = [TextPart("x" + parts[0].text), *parts[1:]]
    thinking: list[Part] = [ThinkingPart(reasoning)] if reasoning else []
    message = Message("assistant", [*thinking, *_canonical(parts)])
    example = r.build_supervised_example([{"role": "user", "content": "q"}, message], **kw)
    weights = example.weights.tolist()
    completion = example.tokens.tolist()[weights.index(1.0) :]
    parsed = r.parse_response(completion, **({"thinking": True} if v31_mode else {}))
    assert parsed.message == message, r.decode(completion)
    assert parsed.termination is Termination.STOP


# -- parsing: completions ------------------------------------------------------------------------


def ids_of(r: DeepSeekV3Renderer | DeepSeekV31Renderer, *pieces: str) -> list[int]:
    """Completion ids from control-token names and ordinary text pieces."""
    out: list[int] = []
    for p in pieces:
        if p in r.table.control_tokens:
            out.append(r.table.control_id(p))
        else:
            out += r.table.encode(p)
    return out


def v3_call(name: str, args: str) -> tuple[str, ...]:
    return (
        "<｜tool▁call▁begin｜>",
        "function",
        "<｜tool▁sep｜>",
        f"{name}\n```json\n{args}\n```",
        "<｜tool▁call▁end｜>",
    )


def v31_call(name: str, args: str) -> tuple[str, ...]:
    return ("<｜tool▁call▁begin｜>", name, "<｜tool▁sep｜>", args, "<｜tool▁call▁end｜>")


@pytest.mark.parametrize("name", ["get-weather.v2", "tool_3", "a.b.c", "x-1", "42", "検索"])
def test_tool_names_with_punctuation_and_digits_parse(
    v3: DeepSeekV3Renderer, v31: DeepSeekV31Renderer, name: str
) -> None:
    args = '{"q": "Lyon", "n": 2}'
    for r, one in ((v3, v3_call), (v31, v31_call)):
        ids = ids_of(r, "<｜tool▁calls▁begin｜>", *one(name, args), "<｜tool▁calls▁end｜>", EOS)
        result = r.parse_response(ids)
        assert result.message.parts == (ToolCallPart(name, args),)
        assert result.termination is Termination.STOP


def test_several_sections_and_text_after_them_are_kept(
    v3: DeepSeekV3Renderer, v31: DeepSeekV31Renderer
) -> None:
    for r, one, sep in ((v3, v3_call, "\n"), (v31, v31_call, "")):
        ids = ids_of(
            r,
            "Checking.",
            "<｜tool▁calls▁begin｜>",
            *one("a", '{"x": 1}'),
            sep,
            *one("b.v2", "{}"),
            "<｜tool▁calls▁end｜>",
            "Between sections.",
            "<｜tool▁calls▁begin｜>",
            *one("c-3", '{"y": [1, 2]}'),
            "<｜tool▁calls▁end｜>",
            "After.",
            EOS,
        )
        result = r.parse_response(ids)
        assert result.message.parts == (
            TextPart("Checking."),
            ToolCallPart("a", '{"x": 1}'),
            ToolCallPart("b.v2", "{}"),
            TextPart("Between sections."),
            ToolCallPart("c-3", '{"y": [1, 2]}'),
            TextPart("After."),
        )
        assert result.termination is Termination.STOP
        assert result.issues == ()


@pytest.mark.parametrize(
    "arguments",
    [
        '{"city":"Zürich","n":1.50,"ok":true}',
        '{ "spaced" :  [1, 2,3] }',
        '"a string"',
        '{"u": "\\u00e9 é 東京"}',
        "{}",
    ],
)
def test_arguments_are_kept_exactly_as_sampled(
    v3: DeepSeekV3Renderer, v31: DeepSeekV31Renderer, arguments: str
) -> None:
    for r, one in ((v3, v3_call), (v31, v31_call)):
        ids = ids_of(r, "<｜tool▁calls▁begin｜>", *one("f", arguments), "<｜tool▁calls▁end｜>", EOS)
        (part,) = r.parse_response(ids).message.parts
        assert part == ToolCallPart("f", arguments)


def test_bad_json_is_an_unparsed_part_with_raw_text_and_name(
    v3: DeepSeekV3Renderer, v31: DeepSeekV31Renderer
) -> None:
    bad = '{"q": unquoted}'
    for r, one, raw in (
        (v3, v3_call, "function<｜tool▁sep｜>lookup\n```json\n" + bad + "\n```"),
        (v31, v31_call, "lookup<｜tool▁sep｜>" + bad),
    ):
        ids = ids_of(
            r,
            "Let me look.",
            "<｜tool▁calls▁begin｜>",
            *one("lookup", bad),
            "<｜tool▁calls▁end｜>",
            EOS,
        )
        result = r.parse_response(ids)
        text, unparsed = result.message.parts
        assert text == TextPart("Let me look.")
        assert isinstance(unparsed, UnparsedToolCallPart)
        assert unparsed.raw == raw
        assert unparsed.name == "lookup"
        assert "invalid JSON" in unparsed.error
        assert result.termination is Termination.MALFORMED  # reported (issue 13)
        # An unparsed call renders back to the same tokens.
        example = r.build_supervised_example(
            [{"role": "user", "content": "q"}, result.message],
            **({"fix_tool_format": True} if r is v3 else {}),  # type: ignore[arg-type]
        )
        weights = example.weights.tolist()
        assert example.tokens.tolist()[weights.index(1.0) :] == ids


def test_v3_call_format_variants(v3: DeepSeekV3Renderer) -> None:
    def parse(*body: str) -> Part:
        ids = ids_of(
            v3,
            "<｜tool▁calls▁begin｜>",
            "<｜tool▁call▁begin｜>",
            *body,
            "<｜tool▁call▁end｜>",
            "<｜tool▁calls▁end｜>",
            EOS,
        )
        (part,) = v3.parse_response(ids).message.parts
        return part

    assert parse("function", "<｜tool▁sep｜>", 'f\n```json\n{"a": 1}\n```') == ToolCallPart(
        "f", '{"a": 1}'
    )
    # Lenient about the fence's whitespace, or a missing fence.
    assert parse("function", "<｜tool▁sep｜>", 'f\n```json\n{"a": 1}```\n') == ToolCallPart(
        "f", '{"a": 1}'
    )
    assert parse("function", "<｜tool▁sep｜>", 'f\n{"a": 1}') == ToolCallPart("f", '{"a": 1}')
    other = parse("retrieval", "<｜tool▁sep｜>", "f\n```json\n{}\n```")
    assert isinstance(other, UnparsedToolCallPart) and "tool type" in other.error
    assert other.name == "f"
    no_sep = parse("function f {}")
    assert isinstance(no_sep, UnparsedToolCallPart) and no_sep.raw == "function f {}"
    v31_style = parse("f", "<｜tool▁sep｜>", '{"a": 1}')
    assert isinstance(v31_style, UnparsedToolCallPart)


def test_v31_thinking_mode_starts_inside_reasoning(v31: DeepSeekV31Renderer) -> None:
    ids = ids_of(v31, "Let me think.", "</think>", "The answer.", EOS)
    result = v31.parse_response(ids, thinking=True)
    assert result.message.parts == (ThinkingPart("Let me think."), TextPart("The answer."))
    assert result.spans == (
        (0, ids.index(v31.think_end) + 1),
        (ids.index(v31.think_end) + 1, len(ids) - 1),
    )
    assert result.termination is Termination.STOP
    # Empty reasoning: no thinking part.
    empty = v31.parse_response(ids_of(v31, "</think>", "Hi.", EOS), thinking=True)
    assert empty.message.content == "Hi."
    # The renderer option is the parser's default.
    thinking = DeepSeekV31Renderer(tokenizer_for(V31), thinking=True)
    assert thinking.parse_response(ids) == result
    # Without thinking mode, a </think> is out of place: kept as text, reported.
    out_of_place = v31.parse_response(ids)
    assert out_of_place.message.content == "Let me think.</think>The answer."
    assert out_of_place.termination is Termination.MALFORMED


def test_truncated_reasoning_stays_thinking_and_incomplete(
    v3: DeepSeekV3Renderer, v31: DeepSeekV31Renderer
) -> None:
    result = v31.parse_response(ids_of(v31, "Still reasoning about the"), thinking=True)
    assert result.message.parts == (ThinkingPart("Still reasoning about the", incomplete=True),)
    assert result.termination is Termination.LENGTH
    assert v31.parse_response([], thinking=True).message.parts == (
        ThinkingPart("", incomplete=True),
    )
    opened = v31.parse_response(ids_of(v31, "Answer: ", "<think>", "more"))
    assert opened.message.parts == (TextPart("Answer: "), ThinkingPart("more", incomplete=True))
    r1 = v3.parse_response(ids_of(v3, "<think>\nStill reasoning about the"))
    assert r1.message.parts == (ThinkingPart("Still reasoning about the", incomplete=True),)
    assert r1.termination is Termination.LENGTH
    # Cut inside the closing marker: the partial marker is reasoning text.
    cut = v3.parse_response(ids_of(v3, "<think>\nhmm\n</thi"))
    assert cut.message.parts == (ThinkingPart("hmm\n</thi", incomplete=True),)


def test_v3_leading_think_text_is_r1_reasoning(v3: DeepSeekV3Renderer) -> None:
    text = "<think>\nThe user greets.\n</think>\n\nHello!"
    ids = [*v3.table.encode(text), v3.eos]
    result = v3.parse_response(ids)
    assert result.message.parts == (ThinkingPart("The user greets."), TextPart("Hello!"))
    assert result.termination is Termination.STOP
    # Spans are token-granular: the token holding ">\n\n" ends the reasoning's span and
    # starts the answer's.
    shared = next(k for k, t in enumerate(ids) if v3.decode([t]) == ">\n\n")
    assert result.spans == ((0, shared + 1), (shared, len(ids) - 1))
    ids = [*v3.table.encode("<think>\nx</think>y"), v3.eos]
    assert v3.decode([ids[-3]]) == ">"  # the marker ends at a token boundary
    assert v3.parse_response(ids).spans == ((0, len(ids) - 2), (len(ids) - 2, len(ids) - 1))
    # Elsewhere <think> is ordinary text.
    later = v3.parse_response([*v3.table.encode("Use <think>x</think> tags."), v3.eos])
    assert later.message.content == "Use <think>x</think> tags."
    spaced = v3.parse_response([*v3.table.encode(" <think>\nx\n</think>\n\ny"), v3.eos])
    assert spaced.message.content == " <think>\nx\n</think>\n\ny"


def test_v3_reasoning_keeps_looking_for_its_end_after_a_stray_marker(
    v3: DeepSeekV3Renderer,
) -> None:
    ids = ids_of(v3, "<think>\na", "<｜tool▁sep｜>", "b\n</think>\n\nc", EOS)
    result = v3.parse_response(ids)
    assert result.message.parts == (ThinkingPart("a<｜tool▁sep｜>b"), TextPart("c"))
    assert result.termination is Termination.MALFORMED


def test_v3_reasoning_then_tool_calls(v3: DeepSeekV3Renderer) -> None:
    ids = ids_of(
        v3,
        "<think>\nplan\n</think>\n\n",
        "<｜tool▁calls▁begin｜>",
        *v3_call("f", "{}"),
        "<｜tool▁calls▁end｜>",
        EOS,
    )
    result = v3.parse_response(ids)
    assert result.message.parts == (ThinkingPart("plan"), ToolCallPart("f", "{}"))
    assert result.issues == ()
    unclosed = ids_of(
        v3,
        "<think>\nplan",
        "<｜tool▁calls▁begin｜>",
        *v3_call("f", "{}"),
        "<｜tool▁calls▁end｜>",
        EOS,
    )
    # Reasoning ends at </think> only: a call drafted in open reasoning is reasoning.
    result = v3.parse_response(unclosed)
    assert result.message.parts == (ThinkingPart(v3.decode(unclosed[:-1])[len("<think>\n") :]),)
    assert result.message.tool_calls == ()
    assert result.termination is Termination.MALFORMED


def test_truncated_tool_call_is_incomplete_with_name(
    v3: DeepSeekV3Renderer, v31: DeepSeekV31Renderer
) -> None:
    for r, pieces, raw in (
        (
            v3,
            ("function", "<｜tool▁sep｜>", 'get-x.v2\n```json\n{"a": '),
            'function<｜tool▁sep｜>get-x.v2\n```json\n{"a": ',
        ),
        (v31, ("get-x.v2", "<｜tool▁sep｜>", '{"a": '), 'get-x.v2<｜tool▁sep｜>{"a": '),
    ):
        ids = ids_of(r, "Calling.", "<｜tool▁calls▁begin｜>", "<｜tool▁call▁begin｜>", *pieces)
        result = r.parse_response(ids)
        text, part = result.message.parts
        assert text == TextPart("Calling.")
        assert isinstance(part, UnparsedToolCallPart)
        assert part.incomplete and part.name == "get-x.v2" and part.raw == raw
        assert result.termination is Termination.LENGTH


def test_text_cut_off_is_marked_incomplete(v31: DeepSeekV31Renderer) -> None:
    result = v31.parse_response(ids_of(v31, "r", "</think>", "The answer is"), thinking=True)
    assert result.message.parts == (ThinkingPart("r"), TextPart("The answer is", incomplete=True))


def test_control_token_spellings_typed_as_text_are_content(
    v3: DeepSeekV3Renderer, v31: DeepSeekV31Renderer
) -> None:
    text = "Use <｜tool▁calls▁begin｜> and </think> or <｜end▁of▁sentence｜> literally."
    for r in (v3, v31):
        ids = [*r.table.encode(text), r.eos]
        assert not set(ids[:-1]) & r.table.control_ids
        result = r.parse_response(ids)
        assert result.message.content == text
        assert result.termination is Termination.STOP


def test_text_after_the_stop_token_is_trailing(v31: DeepSeekV31Renderer) -> None:
    ids = ids_of(v31, "Done.", EOS, "<｜User｜>", "more")
    result = v31.parse_response(ids)
    assert result.message.content == "Done."
    assert result.stop_token_id == v31.eos
    assert result.trailing_text == "<｜User｜>more"


def test_new_turn_without_stop_is_malformed(
    v3: DeepSeekV3Renderer, v31: DeepSeekV31Renderer
) -> None:
    for r in (v3, v31):
        for marker in (
            "<｜User｜>",
            "<｜Assistant｜>",
            "<｜tool▁outputs▁begin｜>",
            "<｜tool▁output▁begin｜>",
        ):
            ids = ids_of(r, "Answer.", marker, "more")
            result = r.parse_response(ids)
            assert result.message.content == "Answer."
            assert result.termination is Termination.MALFORMED
            assert result.issues[0].position == len(r.table.encode("Answer."))
            assert result.trailing_text == marker + "more"


def test_out_of_place_markers_are_issues_kept_as_text(
    v31: DeepSeekV31Renderer, v3: DeepSeekV3Renderer
) -> None:
    result = v31.parse_response(ids_of(v31, "Hi", "</think>", " there", EOS))
    assert result.message.content == "Hi</think> there"
    assert result.termination is Termination.MALFORMED
    assert "</think>" in result.issues[0].message
    result = v3.parse_response(ids_of(v3, "a", "<｜tool▁sep｜>", "b", "<｜tool▁calls▁end｜>", EOS))
    assert result.message.content == "a<｜tool▁sep｜>b<｜tool▁calls▁end｜>"
    assert len(result.issues) == 2


def test_unclosed_section_at_the_stop_token_is_malformed(v3: DeepSeekV3Renderer) -> None:
    ids = ids_of(v3, "<｜tool▁calls▁begin｜>", *v3_call("f", "{}"), EOS)
    result = v3.parse_response(ids)
    assert result.message.parts == (ToolCallPart("f", "{}"),)
    assert result.termination is Termination.MALFORMED
    assert "tool▁calls▁end" in result.issues[0].message


def test_call_outside_a_section_is_parsed_with_an_issue(v31: DeepSeekV31Renderer) -> None:
    ids = ids_of(v31, *v31_call("f", "{}"), "<｜tool▁calls▁end｜>", EOS)
    result = v31.parse_response(ids)
    assert result.message.parts == (ToolCallPart("f", "{}"),)
    assert result.termination is Termination.MALFORMED


def test_spans_cover_each_part(v31: DeepSeekV31Renderer) -> None:
    ids = ids_of(
        v31,
        "r",
        "</think>",
        "Text",
        "<｜tool▁calls▁begin｜>",
        *v31_call("f", "{}"),
        "<｜tool▁calls▁end｜>",
        EOS,
    )
    result = v31.parse_response(ids, thinking=True)
    think_end = ids.index(v31.think_end)
    begin = ids.index(v31.call_begin)
    end = ids.index(v31.call_end)
    assert result.spans == (
        (0, think_end + 1),
        (think_end + 1, ids.index(v31.calls_begin)),
        (begin, end + 1),
    )


def test_invalid_token_ids_name_the_position(v3: DeepSeekV3Renderer) -> None:
    good = v3.table.encode("hello world")
    with pytest.raises(ValueError, match=r"token_ids\[2\]"):
        v3.parse_response([*good[:2], -1, *good[2:]])


# -- streaming ---------------------------------------------------------------------------------


def completions() -> list[tuple[Any, list[int], dict[str, Any]]]:
    v3, v31 = renderer_for(V3), renderer_for(V31)
    out: list[tuple[Any, list[int], dict[str, Any]]] = []
    modes: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
        (V3, {"fix_tool_format": True, "render_thinking": True}, {}),
        (V31, {"thinking": True, "keep_thinking": True}, {"thinking": True}),
    ]
    for model_id, kw, parse_kw in modes:
        r = renderer_for(model_id)
        for conv_id in (
            "tool_result_then_answer",
            "ds_three_parallel_calls_twice",
            "unicode_reasoning",
            "ds_unicode_tool_io",
        ):
            conv = next(c for c in ALL if c.id == conv_id)
            # The first assistant turn (right after the user: thinking mode applies).
            first = next(i for i, m in enumerate(conv.messages) if m["role"] == "assistant")
            example = r.build_supervised_example(conv.messages[: first + 1], **kw)
            tokens, weights = example.tokens.tolist(), example.weights.tolist()
            out.append((r, tokens[weights.index(1.0) :], parse_kw))
    out += [
        (v3, [*v3.table.encode("<think>\nR1 reasoning 🤔 here\n</think>\n\nAnswer ✓"), v3.eos], {}),
        (v3, v3.table.encode("<think>\nStill reasoning 🤔 about the"), {}),
        (v3, ids_of(v3, "<think>\na</th", "<｜tool▁sep｜>", "b\n</think>\n\nc", EOS), {}),
        (
            v3,
            ids_of(
                v3,
                "Calling.",
                "<｜tool▁calls▁begin｜>",
                *v3_call("get-w.v2", '{"a": "é"}'),
                "\n",
                *v3_call("g", "{bad}"),
                "<｜tool▁calls▁end｜>",
                "after",
                EOS,
                "x",
            ),
            {},
        ),
        (v31, ids_of(v31, "Hi", "</think>", " there", "<｜User｜>", "user"), {}),
        (
            v31,
            ids_of(
                v31,
                "thinking 日本",
                "<｜tool▁calls▁begin｜>",
                *v31_call("f", '{"a": 1}'),
                "<｜tool▁calls▁end｜>",
                "after",
                "<think>",
                "again",
                "</think>",
                "done",
                EOS,
            ),
            {"thinking": True},
        ),
        (
            v31,
            [*v31.table.encode("日本語のテキスト🎉 with emoji split across tokens"), v31.eos],
            {},
        ),
    ]
    return out


def test_streaming_equals_batch_at_every_split() -> None:
    checked = 0
    for r, ids, kw in completions():
        expected = r.parse_response(ids, **kw)
        for cut in range(len(ids) + 1):
            parser = r.stream_parser(**kw)
            parser.feed(ids[:cut])
            parser.feed(ids[cut:])
            assert parser.finish() == expected, (cut, r.decode(ids))
            checked += 1
        parser = r.stream_parser(**kw)
        for t in ids:
            parser.feed([t])
        assert parser.finish() == expected
    assert checked > 300


def test_a_whole_call_in_one_chunk_is_reported(
    v31: DeepSeekV31Renderer, v3: DeepSeekV3Renderer
) -> None:
    for r, one in ((v3, v3_call), (v31, v31_call)):
        head = ids_of(r, "Checking.")
        call_ids = ids_of(
            r,
            "<｜tool▁calls▁begin｜>",
            *one("get-weather.v2", '{"city": "Oslo"}'),
            "<｜tool▁calls▁end｜>",
        )
        parser = r.stream_parser()
        parser.feed(head)
        events = parser.feed(call_ids)
        finished = [e.part for e in events if isinstance(e, PartFinished)]
        assert TextPart("Checking.") in finished
        assert ToolCallPart("get-weather.v2", '{"city": "Oslo"}') in finished
        parser.feed([r.eos])
        assert parser.finish().message.tool_calls == (
            ToolCallPart("get-weather.v2", '{"city": "Oslo"}'),
        )


def test_stream_events_rebuild_the_parts() -> None:
    for r, ids, kw in completions():
        parser = r.stream_parser(**kw)
        events = []
        for k in range(0, len(ids), 3):
            events += parser.feed(ids[k : k + 3])
        result = parser.finish()
        events += parser.final_events
        started = [e.index for e in events if isinstance(e, PartStarted)]
        finished = {e.index: e.part for e in events if isinstance(e, PartFinished)}
        assert started == sorted(set(started)) == sorted(finished)
        assert [finished[i] for i in sorted(finished)] == list(result.message.parts)
        for i, part in finished.items():
            deltas = "".join(e.text for e in events if isinstance(e, TextDelta) and e.index == i)
            if isinstance(part, (TextPart, ThinkingPart)):
                assert deltas == part.text


def test_numpy_input_equals_list_input() -> None:
    for r, ids, kw in completions()[:6]:
        assert r.parse_response(np.asarray(ids), **kw) == r.parse_response(ids, **kw)


@given(data=st.data(), v31_mode=st.booleans(), thinking=st.booleans())
def test_random_ids_never_crash_and_stream_equals_batch(
    data: st.DataObject, v31_mode: bool, thinking: bool
) -> None:
    r = renderer_for(V31 if v31_mode else V3)
    pool = (
        sorted(r.table.control_ids)
        + r.table.encode("<think>\n</think>\n\n```json\n{} é日😀 function")
        + [0, 1, 2, 100, 5000, 127999]
    )
    ids = data.draw(st.lists(st.sampled_from(pool), max_size=40))
    if thinking and not v31_mode:  # an R1-style opening
        ids = r.table.encode("<think>\n") + ids
    kw = {"thinking": thinking} if v31_mode else {}
    expected = r.parse_response(ids, **kw)
    cut = data.draw(st.integers(0, len(ids)))
    parser = r.stream_parser(**kw)
    parser.feed(ids[:cut])
    parser.feed(ids[cut:])
    assert parser.finish() == expected
    assert len(expected.spans) == len(expected.message.parts)


LONG_REASONING = " ".join(f"step {k}: weigh option {k % 7} against the rest." for k in range(400))


def _feed_every_way(r: DeepSeekV3Renderer, ids: list[int]) -> list[ParseResult]:
    """Batch (list and array), one token per feed, long chunks, and single tokens followed
    by one long chunk: long runs take the NumPy path, short feeds the per-token one."""
    results = [r.parse_response(ids), r.parse_response(np.asarray(ids))]
    for chunks in (
        [[t] for t in ids],
        [ids[k : k + 700] for k in range(0, len(ids), 700)],
        [*([t] for t in ids[:100]), ids[100:1500], *([t] for t in ids[1500:1510]), ids[1510:]],
    ):
        parser = r.stream_parser()
        for chunk in chunks:
            parser.feed(chunk)
        results.append(parser.finish())
    return results


def test_v3_reasoning_marker_after_a_long_run_maps_to_its_tokens(v3: DeepSeekV3Renderer) -> None:
    head = v3.table.encode("<think>\n")
    body = v3.table.encode(LONG_REASONING)
    close = v3.table.encode("\n</think>")
    tail = v3.table.encode("\n\nThe answer.")
    ids = [*head, *body, *close, *tail, v3.eos]
    assert len(body) > 2000 and v3.decode(close) == "\n</think>"
    end = len(head) + len(body) + len(close)
    for parsed in _feed_every_way(v3, ids):
        assert parsed.message.parts == (ThinkingPart(LONG_REASONING), TextPart("The answer."))
        assert parsed.spans == ((0, end), (end, len(ids) - 1))
        assert parsed.termination is Termination.STOP


@pytest.mark.parametrize("kind", ["complete", "malformed", "truncated"])
@pytest.mark.parametrize("thinking", [False, True])
def test_v31_completions_parse_on_the_one_shot_path_as_fed(
    kind: str, thinking: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """V3.1 completions of about 1k tokens (reasoning, text, a section of three calls, one
    of them invalid JSON when malformed, cut off when truncated) take the one-shot path,
    which must give what feeding the ids gives."""
    from renderers.bench.workloads import completions
    from renderers.core.sections import SectionParser

    options: dict[str, Any] = (
        {"thinking": True, "keep_thinking": True} if thinking else {"reasoning": "drop"}
    )
    r = DeepSeekV31Renderer(tokenizer_for(V31), **options)
    ids = next(c.ids for c in completions(r, 1000) if c.kind == kind)
    parsed, fed, one_shot = parsed_both_ways(r, SectionParser, ids, monkeypatch)
    assert parsed == fed
    assert one_shot
    assert len(fed.message.parts) >= 4


@pytest.mark.parametrize("kind", ["complete", "malformed", "truncated"])
def test_v3_completions_parse_on_the_one_shot_path_as_fed(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DeepSeek-V3 completions of about 1k tokens (R1-style reasoning written as text,
    text, a section of three calls, one of them invalid JSON when malformed, cut off
    when truncated) take the one-shot path, which must give what feeding the ids gives;
    so must the same completion with its reasoning marker ending mid-token."""
    from renderers.bench.workloads import completions
    from renderers.core.sections import SectionParser

    r = DeepSeekV3Renderer(tokenizer_for(V3), render_thinking=True, fix_tool_format=True)
    ids = next(c.ids for c in completions(r, 1000) if c.kind == kind)
    end = r.table.encode("</think>\n\n")
    at = next(k for k in range(len(ids)) if ids[k : k + len(end)] == end)
    # "</think>" then "\n\nx" in one token's worth of text: the text region starts there.
    glued = [
        *ids[:at],
        *r.table.encode("</think>"),
        *r.table.encode("\n\nx"),
        *ids[at + len(end) :],
    ]
    for sample in (ids, glued):
        parsed, fed, one_shot = parsed_both_ways(r, SectionParser, sample, monkeypatch)
        assert parsed == fed
        assert one_shot
        assert len(fed.message.parts) >= 4


# -- arguments: written verbatim, as the templates concatenate them ---------------------------

ODD_ARGUMENTS = '{"city":"Par\\u00eds","n":1e1,"x":{"y":[true,null]}}'


@pytest.mark.parametrize("model_id", [V3, V31])
def test_arguments_text_is_written_verbatim_as_the_templates_concatenate_it(
    model_id: str,
) -> None:
    """The templates concatenate the arguments string: compact, escaped, exponent JSON
    text is the model's text unchanged (no re-serialisation)."""
    r = renderer_for(model_id)
    call = {"id": "c", "type": "function", "function": {"name": "f", "arguments": ODD_ARGUMENTS}}
    messages = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c", "content": "r"},
        {"role": "user", "content": "again"},
    ]
    expected = oracle(model_id, messages, True)
    assert r.build_generation_prompt(messages) == expected
    assert ODD_ARGUMENTS in r.decode(expected)
