"""Degenerate inputs in every format (issue 31 item 6): an assistant message with
``content: None`` and no calls, ``tool_calls: []``, empty and ``None`` tool results.

Every renderer follows one documented rule (each module docstring says where its template
does otherwise): ``content: None`` is empty text, an empty ``tool_calls`` list is no calls,
a ``None`` tool result is an empty one. That is what vLLM hands a template
(``vllm/entrypoints/chat_utils.py`` at vllm-project/vllm
bd5ec6d50b83652c21a570b81c1fb5219a6ebf76: ``_parse_chat_message_content`` reads a
``None`` content as no content parts, ``_postprocess_messages`` drops an empty
``tool_calls``), and our message model has no other spelling for them.

Expected ids: the official template applied to the rule's equivalent input (``""``, no
``tool_calls`` key), always; and the template applied to the input as given, as
transformers 5.24 passes it (5.23 and later drop every key whose value is ``None``:
``apply_chat_template`` in 5.23, ``_normalize_chat_messages`` since 5.24) and as 5.0 to
5.22 pass it (``None`` values kept; rendered here with 5.24's ``render_jinja_template``
without the normalisation). :data:`TEMPLATE` records, per format, case and transformers
behaviour, whether the template renders the input as the rule does (``same``), writes
something else (``differs``: the template's garbage, e.g. DeepSeek-V3.1's stray
``<｜tool▁calls▁end｜>``) or fails (``fails``).
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from transformers.utils.chat_template_utils import _normalize_chat_messages, render_jinja_template

from renderers import Renderer, get_renderer
from renderers.core.kimi_tokenizer import load_kimi_tokenizer
from renderers.kimi_k2 import KimiK2Renderer
from tests.conftest import tokenizer_for
from tests.oracle import chat_template_file, trl_template
from tests.tml_oracle import template_ids

SHARED = Path(__file__).resolve().parents[2] / "shared"
CALL = {"id": "functions.f:0", "type": "function", "function": {"name": "f", "arguments": "{}"}}
USER = {"role": "user", "content": "q"}
AGAIN = {"role": "user", "content": "again"}
TEXT = "Sunny today."

CASES: dict[str, list[dict[str, Any]]] = {
    "content_none": [USER, {"role": "assistant", "content": None}, AGAIN],
    "content_none_empty_calls": [
        USER,
        {"role": "assistant", "content": None, "tool_calls": []},
        AGAIN,
    ],
    "text_empty_calls": [USER, {"role": "assistant", "content": TEXT, "tool_calls": []}, AGAIN],
    "empty_tool_result": [
        USER,
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "functions.f:0", "content": ""},
    ],
    "none_tool_result": [
        USER,
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "functions.f:0", "content": None},
    ],
}


def equivalent(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The input the rule reads: ``None`` text as ``""`` (a call turn keeps ``None``, as
    templates that test ``content is none`` need), no empty ``tool_calls``."""
    out = copy.deepcopy(messages)
    for m in out:
        if m.get("tool_calls") == []:
            del m["tool_calls"]
        if m.get("content") is None and not m.get("tool_calls"):
            m["content"] = ""
    return out


@dataclass(frozen=True)
class Format:
    """A renderer and its official template, with how the template wants its input."""

    id: str
    model_id: str
    template: Callable[[], str]
    encode: Callable[[str], list[int]]
    renderer: Callable[[], Renderer]
    object_arguments: bool = False
    """The template takes arguments as an object (it iterates or ``tojson``s them)."""
    variables: tuple[tuple[str, Any], ...] = ()
    needs_none: bool = False
    """The template needs ``content: None`` on a call turn, which transformers 5.23+ drops
    (the DeepSeek templates then fail on every call turn): the rule's equivalent input is
    rendered as transformers 5.0-5.22 pass it."""

    def __repr__(self) -> str:
        return self.id

    def text(self, messages: list[dict[str, Any]], *, drop_none: bool) -> str:
        messages = copy.deepcopy(messages)
        if self.object_arguments:
            for m in messages:
                for c in m.get("tool_calls") or []:
                    c["function"]["arguments"] = json.loads(c["function"]["arguments"])
        if drop_none:
            messages = _normalize_chat_messages(messages)
        rendered, _ = render_jinja_template(
            [messages],
            chat_template=self.template(),
            add_generation_prompt=True,
            **dict(self.variables),
        )
        return str(rendered[0])

    def ids(self, messages: list[dict[str, Any]], *, drop_none: bool = True) -> list[int]:
        return self.encode(self.text(messages, drop_none=drop_none))


def _hf_config_template(model_id: str) -> str:
    config = json.loads(chat_template_file(model_id, "tokenizer_config.json").read_text("utf-8"))
    return str(config["chat_template"])


def _hf_encode(model_id: str) -> Callable[[str], list[int]]:
    return lambda text: list(tokenizer_for(model_id).encode(text, add_special_tokens=False))


def _tml_encode(model_id: str) -> Callable[[str], list[int]]:
    return lambda text: template_ids(tokenizer_for(model_id), text)


def _qwen_line_encode(name: str) -> Callable[[str], list[int]]:
    """The Qwen-line oracle's tokenizer (tests/test_qwen_line.py: Qwen2.5's vocabulary)."""

    def encode(text: str) -> list[int]:
        from tests import test_qwen_line

        config = next(c for c in test_qwen_line.CONFIGS if c.name == name)
        return config.ids(text)

    return encode


def _thinking_2507_template() -> str:
    from tests.test_qwen_line import thinking_2507_template

    return thinking_2507_template()


def _kimi_encode(model_id: str) -> Callable[[str], list[int]]:
    return lambda text: list(_kimi(model_id).encode(text, add_special_tokens=False))


@functools.cache
def _kimi(model_id: str) -> Any:
    return load_kimi_tokenizer(model_id)


def _kimi_instruct() -> Renderer:
    """K2-Instruct, which follows its official template (the one ``tokenizer_config.json``
    embeds)."""
    return KimiK2Renderer(_kimi("moonshotai/Kimi-K2-Instruct"))


def _named(name: str, model_id: str, **options: Any) -> Callable[[], Renderer]:
    return functools.cache(lambda: get_renderer(name, tokenizer_for(model_id), **options))


QWEN35 = "Qwen/Qwen3.5-27B"
V3, V31 = "deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-V3.1"
K2T, K25 = "moonshotai/Kimi-K2-Thinking", "moonshotai/Kimi-K2.5"
GPT_OSS = "openai/gpt-oss-20b"
BOS = (("bos_token", "<｜begin▁of▁sentence｜>"),)

FORMATS = [
    Format(
        "qwen3",
        "Qwen/Qwen3-8B",
        lambda: _hf_config_template("Qwen/Qwen3-8B"),
        _hf_encode("Qwen/Qwen3-8B"),
        _named("qwen3", "Qwen/Qwen3-8B"),
    ),
    Format(
        "template-qwen3",
        "Qwen/Qwen3-8B",
        lambda: _hf_config_template("Qwen/Qwen3-8B"),
        _hf_encode("Qwen/Qwen3-8B"),
        functools.cache(
            lambda: get_renderer("Qwen/Qwen3-8B", tokenizer_for("Qwen/Qwen3-8B"), generic=True)
        ),
    ),
    *(
        Format(
            name,
            "Qwen/Qwen3-8B",
            lambda t=template: trl_template(t),
            _qwen_line_encode(name),
            _named(name, "Qwen/Qwen3-8B"),
            object_arguments=name == "qwen2.5",  # it writes arguments with tojson
        )
        for name, template in (
            ("qwen2.5", "qwen2_5"),
            ("qwen3_instruct_2507", "qwen3_instruct_2507"),
            ("qwen3_vl", "qwen3_vl"),
        )
    ),
    Format(
        "qwen3_thinking_2507",
        "Qwen/Qwen3-8B",
        lambda: _thinking_2507_template(),
        _hf_encode("Qwen/Qwen3-8B"),
        _named("qwen3_thinking_2507", "Qwen/Qwen3-8B"),
    ),
    Format(
        "qwen3.5",
        QWEN35,
        lambda: trl_template("qwen3_5_think"),
        _tml_encode(QWEN35),
        _named("qwen3.5", QWEN35),
        object_arguments=True,
    ),
    Format(
        "qwen3.6",
        QWEN35,
        lambda: trl_template("qwen3_6"),
        _tml_encode(QWEN35),
        _named("qwen3.6", QWEN35),
        object_arguments=True,
    ),
    Format(
        "qwen3.8",
        QWEN35,
        lambda: trl_template("qwen3_8"),
        _tml_encode(QWEN35),
        _named("qwen3.8", QWEN35),
        object_arguments=True,
    ),
    Format(
        "deepseek_v3",
        V3,
        lambda: _hf_config_template(V3),
        _hf_encode(V3),
        _named("deepseek_v3", V3),
        variables=BOS,
        needs_none=True,
    ),
    Format(
        "deepseek_v3.1",
        V31,
        lambda: _hf_config_template(V31),
        _hf_encode(V31),
        _named("deepseek_v3.1", V31),
        variables=BOS,
        needs_none=True,
    ),
    Format(
        "kimi_k2",
        "moonshotai/Kimi-K2-Instruct",
        lambda: _hf_config_template("moonshotai/Kimi-K2-Instruct"),
        _kimi_encode("moonshotai/Kimi-K2-Instruct"),
        functools.cache(_kimi_instruct),
        object_arguments=True,  # it writes arguments with tojson (a string twice quoted)
    ),
    Format(
        "kimi_k2_thinking",
        K2T,
        lambda: (SHARED / "templates" / K2T / "chat_template.jinja").read_text("utf-8"),
        _kimi_encode(K2T),
        functools.cache(lambda: get_renderer("kimi_k2_thinking", _kimi(K2T))),
    ),
    Format(
        "kimi_k2.5",
        K25,
        lambda: (SHARED / "templates" / K25 / "chat_template.jinja").read_text("utf-8"),
        _tml_encode(K25),
        _named("kimi_k2.5", K25, tool_declaration="json"),
    ),
    Format(
        "gpt_oss",
        GPT_OSS,
        lambda: chat_template_file(GPT_OSS).read_text("utf-8"),
        _hf_encode(GPT_OSS),
        _named("gpt_oss", GPT_OSS, date="2025-06-28"),
        object_arguments=True,  # it writes arguments with tojson (a string twice quoted)
    ),
]

SAME, DIFFERS, FAILS = "same", "differs", "fails"
# (format, case) -> (transformers 5.23+, transformers 5.0-5.22); absent: same for both.
TEMPLATE: dict[tuple[str, str], tuple[str, str]] = {
    # DeepSeek-V3: reads message['content'] of every assistant message (missing: fails);
    # with None it writes nothing for a turn without calls; a None result is concatenated.
    ("deepseek_v3", "content_none"): (FAILS, DIFFERS),
    ("deepseek_v3", "content_none_empty_calls"): (FAILS, DIFFERS),
    ("deepseek_v3", "empty_tool_result"): (FAILS, SAME),
    ("deepseek_v3", "none_tool_result"): (FAILS, FAILS),
    # DeepSeek-V3.1: also tests "'tool_calls' in message": an empty list writes a stray
    # <｜tool▁calls▁end｜> and drops the text.
    ("deepseek_v3.1", "content_none"): (FAILS, FAILS),
    ("deepseek_v3.1", "content_none_empty_calls"): (DIFFERS, DIFFERS),
    ("deepseek_v3.1", "text_empty_calls"): (DIFFERS, DIFFERS),
    ("deepseek_v3.1", "empty_tool_result"): (FAILS, SAME),
    ("deepseek_v3.1", "none_tool_result"): (FAILS, FAILS),
    # K2-Instruct's official template writes a None result as the text "None".
    ("kimi_k2", "none_tool_result"): (SAME, DIFFERS),
    # gpt-oss: "... in message.content" fails on None (and on a missing content of a turn
    # without calls), tool_calls[0] on an empty list, tojson on a missing result.
    ("gpt_oss", "content_none"): (FAILS, FAILS),
    ("gpt_oss", "content_none_empty_calls"): (FAILS, FAILS),
    ("gpt_oss", "text_empty_calls"): (FAILS, FAILS),
    ("gpt_oss", "empty_tool_result"): (SAME, FAILS),
    ("gpt_oss", "none_tool_result"): (FAILS, FAILS),
    # Qwen2.5: '\n' + message.content of a turn without calls (missing or None: fails); a
    # None result is written "None".
    ("qwen2.5", "content_none"): (FAILS, FAILS),
    ("qwen2.5", "content_none_empty_calls"): (FAILS, FAILS),
    ("qwen2.5", "none_tool_result"): (SAME, DIFFERS),
    # Qwen3-VL: iterates over a content that is not a string (None: fails; missing: none).
    ("qwen3_vl", "content_none"): (SAME, FAILS),
    ("qwen3_vl", "content_none_empty_calls"): (SAME, FAILS),
    ("qwen3_vl", "empty_tool_result"): (SAME, FAILS),
    ("qwen3_vl", "none_tool_result"): (SAME, FAILS),
}


pytestmark = pytest.mark.usefixtures("fixed_clock")  # gpt-oss writes today's date


PARAMS = [
    pytest.param(f, case, id=f"{f.id}-{case}")
    for f in FORMATS
    for case in CASES
    if not (f.id == "template-qwen3" and "tool_result" in case)
]


@pytest.mark.parametrize(("fmt", "case"), PARAMS)
def test_degenerate_inputs_render_as_the_template_renders_the_rule(fmt: Format, case: str) -> None:
    """The prompt is the template's for the rule's equivalent input; where the template
    renders the input as given, that is the same ids, or the documented difference."""
    r = fmt.renderer()
    messages = CASES[case]
    ours = r.build_generation_prompt(messages)
    assert ours == fmt.ids(equivalent(messages), drop_none=not fmt.needs_none)
    behaviours = TEMPLATE.get((fmt.id, case), (SAME, SAME))
    for drop_none, expected in zip((True, False), behaviours, strict=True):
        if expected == FAILS:
            with pytest.raises(Exception):  # noqa: B017  (jinja errors of all kinds)
                fmt.ids(messages, drop_none=drop_none)
        elif expected == SAME:
            assert fmt.ids(messages, drop_none=drop_none) == ours
        else:
            assert fmt.ids(messages, drop_none=drop_none) != ours


def test_the_table_names_known_formats_and_cases() -> None:
    ids = {f.id for f in FORMATS}
    assert {name for name, _ in TEMPLATE} <= ids and {case for _, case in TEMPLATE} <= set(CASES)


@pytest.mark.parametrize("fmt", FORMATS, ids=repr)
@pytest.mark.parametrize("case", ["content_none", "content_none_empty_calls", "text_empty_calls"])
def test_a_trained_degenerate_turn_trains_what_the_rule_reads(fmt: Format, case: str) -> None:
    """A trained turn learns the equivalent input's tokens (an empty or plain answer, the
    stop token), never the template's garbage (a stray section end, a dropped text)."""
    r = fmt.renderer()
    messages = CASES[case][:2]
    example = r.build_supervised_example(messages)
    plain = r.build_supervised_example(equivalent(messages))
    assert example.tokens.tolist() == plain.tokens.tolist()
    assert example.weights.tolist() == plain.weights.tolist()
    trained = r.decode(example.tokens[example.weights > 0].tolist())
    assert "tool▁calls▁end" not in trained and "None" not in trained
    assert (TEXT in trained) == (case == "text_empty_calls")
