"""Prefill (issue 31 item 3): text the model is forced to start its turn with, in the
prompt of every format, and parsed as the start of the part it begins.

The oracle of the prompt is transformers' ``apply_chat_template(...,
continue_final_message=FIELD)`` (5.24: ``FIELD`` names the final assistant message's field
to continue) with the official template: ``"reasoning_content"`` where the prefill starts
the reasoning (thinking on), ``"content"`` where it starts the answer. Where the template
writes no reasoning for that final message (DeepSeek-V3.1, whose template drops all
reasoning), the oracle is the template's generation prompt, which opens the reasoning,
followed by the prefill; the Kimi templates write the reasoning of a final plain answer as
history (``<think></think>``), so their oracle's final message also calls a tool; for
DeepSeek-V4/V4.1 (no template) tml-renderers' prompt followed by the prefill. Where
``continue_final_message="content"`` differs from the prompt a sampler sees after the
generation prompt (it writes the final message as history: an empty think block before the
text), the tests assert the difference: that form is the prefill of the format's
thinking-off option.

The parse is checked against the parse of the whole sample: a completion sampled after
the prefill parses, with ``prefill``, to the message the prefill plus the completion parse
to (a supervised example's trained ids, cut after the prefill's text).
"""

from __future__ import annotations

import copy
import functools
import json
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from transformers.utils.chat_template_utils import _normalize_chat_messages, render_jinja_template

from renderers import Message, Renderer, TextPart, ThinkingPart, get_renderer
from renderers.core.kimi_tokenizer import load_kimi_tokenizer
from renderers.registry import renderer_names
from renderers.rollout import Rollout
from tests.conftest import tokenizer_for
from tests.oracle import chat_template_file, trl_template
from tests.tml_oracle import CONFIGS, decode, prompt_ids, template_ids

SHARED = Path(__file__).resolve().parents[2] / "shared"
PREFILL = "First,"
REST = " the sky is blue. <|im_end|> <think> stays text."
"""What the sample holds after the prefill (control-token spellings as ordinary text)."""
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Why?"}]


pytestmark = pytest.mark.usefixtures("fixed_clock")  # gpt-oss writes today's date


@functools.cache
def _kimi(model_id: str) -> Any:
    return load_kimi_tokenizer(model_id)


def _hf_config_template(model_id: str) -> str:
    config = json.loads(chat_template_file(model_id, "tokenizer_config.json").read_text("utf-8"))
    return str(config["chat_template"])


def _shared_template(model_id: str) -> str:
    return (SHARED / "templates" / model_id / "chat_template.jinja").read_text("utf-8")


@dataclass(frozen=True)
class Mode:
    """A format with options, what its prefill starts, and how the oracle writes it."""

    id: str
    name: str
    model_id: str
    options: tuple[tuple[str, Any], ...]
    starts: type[ThinkingPart] | type[TextPart]
    oracle: str
    """``"reasoning_content"`` / ``"content"``: continue_final_message of that field;
    ``"prompt"``: the template's generation prompt then the prefill; ``"tml"``:
    tml-renderers' prompt then the prefill; ``"mistral-common"``: its encoder with the
    prefill as a ``prefix`` assistant message."""
    template: Callable[[], str] | None = None
    encode: Callable[[str], list[int]] | None = None
    variables: tuple[tuple[str, Any], ...] = ()
    final_calls: bool = False
    """The oracle's final message also calls a tool: the Kimi templates write the
    reasoning of a final plain answer as history (``<think></think>``), of a tool-calling
    one as sampled."""
    generic: bool = False
    content_differs: str | None = None
    """What ``continue_final_message="content"`` writes before the prefill instead, where
    it differs from the prompt (asserted)."""
    kw: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        return self.id

    def renderer(self) -> Renderer:
        return _renderer(self.name, self.model_id, self.options, self.generic)

    def messages(self) -> list[dict[str, Any]]:
        return copy.deepcopy(MESSAGES)

    def oracle_text(self, field_name: str | None = None) -> str:
        """The template's text of the prompt with the prefill."""
        assert self.template is not None
        messages = _normalize_chat_messages(self.messages())
        variables = {**dict(self.options), **dict(self.variables)}
        variables.update(self.kw)
        chosen = field_name or self.oracle
        if chosen == "prompt":
            rendered, _ = render_jinja_template(
                [messages], chat_template=self.template(), add_generation_prompt=True, **variables
            )
            return str(rendered[0]) + PREFILL
        final: dict[str, Any] = {"role": "assistant", "content": "", chosen: PREFILL}
        if self.final_calls:
            function = {"name": "f", "arguments": "{}"}
            final["tool_calls"] = [
                {"id": "functions.f:0", "type": "function", "function": function}
            ]
        rendered, _ = render_jinja_template(
            [[*messages, final]],
            chat_template=self.template(),
            continue_final_message=chosen,
            **variables,
        )
        return str(rendered[0])


@functools.cache
def _renderer(
    name: str, model_id: str, options: tuple[tuple[str, Any], ...], generic: bool
) -> Renderer:
    tokenizer = _kimi(model_id) if name.startswith("kimi_k2") and "." not in name else None
    if tokenizer is None:
        tokenizer = tokenizer_for(model_id)
    target = model_id if generic else name
    return get_renderer(target, tokenizer, generic=generic, **dict(options))


def _meta_llama3() -> Any:
    """Meta's Llama 3 tokenizer (llama-models), which encodes control-token spellings."""
    from llama_models.llama3.tokenizer import Tokenizer

    return Tokenizer.get_instance()


def _meta_llama4() -> Any:
    """Meta's Llama 4 tokenizer (llama-models), which encodes control-token spellings."""
    from llama_models.llama4.tokenizer import Tokenizer

    return Tokenizer.get_instance()


def _llama4_template() -> str:
    from tests.test_llama4 import official_template

    return official_template()


def _mistral_prefilled(messages: list[dict[str, Any]], name: str) -> list[int]:
    """mistral-common's ids of the conversation with the prefill as a ``prefix`` assistant
    message (its way to continue a turn), with the tokenizer of renderer ``name``."""
    from mistral_common.protocol.instruct.request import ChatCompletionRequest
    from mistral_common.tokens.tokenizers.mistral import MistralTokenizer

    final = {"role": "assistant", "content": PREFILL, "prefix": True}
    request = ChatCompletionRequest.model_validate({"messages": [*messages, final]})
    encoder = MistralTokenizer.v7() if name == "mistral_v7" else MistralTokenizer.v3(is_tekken=True)
    ids: list[int] = encoder.encode_chat_completion(request).tokens
    return ids


def _thinking_2507_template() -> str:
    """Qwen3's template with Thinking-2507's generation prompt (tests/test_qwen_line.py)."""
    from tests.test_qwen_line import thinking_2507_template

    return thinking_2507_template()


def _hf(model_id: str) -> Callable[[str], list[int]]:
    return lambda text: list(tokenizer_for(model_id).encode(text, add_special_tokens=False))


def _tml(model_id: str) -> Callable[[str], list[int]]:
    return lambda text: template_ids(tokenizer_for(model_id), text)


def _kimi_encode(model_id: str) -> Callable[[str], list[int]]:
    return lambda text: list(_kimi(model_id).encode(text, add_special_tokens=False))


Q3, Q35, Q38 = "Qwen/Qwen3-8B", "Qwen/Qwen3.5-27B", "Qwen/Qwen3.8-27B"
Q36 = "Qwen/Qwen3.6-27B"
V3, V31, V4 = "deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-V3.1", "deepseek-ai/DeepSeek-V4-Pro"
V41 = "deepseek-ai/DeepSeek-V4.1-Flash"
K2, K2T, K25 = "moonshotai/Kimi-K2-Instruct", "moonshotai/Kimi-K2-Thinking", "moonshotai/Kimi-K2.5"
K26, R1 = "moonshotai/Kimi-K2.6", "deepseek-ai/DeepSeek-R1"
GPT_OSS = "openai/gpt-oss-20b"
NEMOTRON = "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B"
NEMOTRON_SUPER = "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B"
NEMOTRON_ULTRA = "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B"
GLM52, GLM53, GLM53_FLASH = "zai-org/GLM-5.2", "zai-org/GLM-5.3", "zai-org/GLM-5.3-Flash"
L3 = "meta-llama/Llama-3.1-8B-Instruct"
L4 = "meta-llama/Llama-4-Scout-17B-16E-Instruct"
BOS = (("bos_token", "<｜begin▁of▁sentence｜>"),)
EMPTY_THINK_QWEN = "<think>\n\n</think>\n\n"


def _qwen(name: str, model: str, template: Callable[[], str], encode: Any) -> list[Mode]:
    return [
        Mode(
            f"{name}",
            name,
            model,
            (),
            ThinkingPart,
            "reasoning_content",
            template,
            encode,
            content_differs=EMPTY_THINK_QWEN,
        ),
        Mode(
            f"{name}-no-thinking",
            name,
            model,
            (("enable_thinking", False),),
            TextPart,
            "content",
            template,
            encode,
        ),
    ]


MODES = [
    *_qwen("qwen3", Q3, lambda: _hf_config_template(Q3), _hf(Q3)),
    *_qwen("qwen3.5", Q35, lambda: trl_template("qwen3_5_think"), _tml(Q35)),
    *_qwen("qwen3.6", Q36, lambda: trl_template("qwen3_6"), _tml(Q36)),
    *_qwen("qwen3.8", Q38, lambda: trl_template("qwen3_8"), _tml(Q38)),
    *(
        Mode(name, name, Q3, (), TextPart, "content", lambda t=template: trl_template(t), _hf(Q3))
        for name, template in (
            ("qwen2.5", "qwen2_5"),
            ("qwen3_instruct_2507", "qwen3_instruct_2507"),
            ("qwen3_vl", "qwen3_vl"),
        )
    ),
    Mode(
        "qwen3_thinking_2507",
        "qwen3_thinking_2507",
        Q3,
        (),
        ThinkingPart,
        "reasoning_content",
        lambda: _thinking_2507_template(),
        _hf(Q3),
        content_differs=EMPTY_THINK_QWEN,
    ),
    Mode(
        "deepseek_v3",
        "deepseek_v3",
        V3,
        (),
        TextPart,
        "content",
        lambda: _hf_config_template(V3),
        _hf(V3),
        BOS,
    ),
    Mode(
        "deepseek_v3.1",
        "deepseek_v3.1",
        V31,
        (),
        TextPart,
        "content",
        lambda: _hf_config_template(V31),
        _hf(V31),
        BOS,
    ),
    Mode(
        "deepseek_v3.1-thinking",
        "deepseek_v3.1",
        V31,
        (("thinking", True), ("keep_thinking", True)),  # (keep: a trained turn's reasoning)
        ThinkingPart,
        "prompt",
        lambda: _hf_config_template(V31),
        _hf(V31),
        BOS,
        content_differs="</think>",
    ),
    Mode(
        "deepseek_r1",
        "deepseek_r1",
        R1,
        (),
        ThinkingPart,
        "prompt",  # (the prompt opens the reasoning; continue_final_message cannot)
        lambda: (Path(__file__).parent / "data" / "deepseek_r1_chat_template.jinja").read_text(
            "utf-8"
        ),
        _tml(R1),
        BOS,
    ),
    Mode("deepseek_v4", "deepseek_v4", V4, (), ThinkingPart, "tml", encode=_tml(V4)),
    Mode(
        "deepseek_v4-chat",
        "deepseek_v4",
        V4,
        (("thinking_mode", "chat"),),
        TextPart,
        "tml",
        encode=_tml(V4),
    ),
    Mode("deepseek_v4.1", "deepseek_v4.1", V41, (), ThinkingPart, "tml", encode=_tml(V41)),
    Mode(
        "deepseek_v4.1-chat",
        "deepseek_v4.1",
        V41,
        (("thinking_mode", "chat"),),
        TextPart,
        "tml",
        encode=_tml(V41),
    ),
    Mode(
        "kimi_k2",
        "kimi_k2",
        K2,
        (),
        TextPart,
        "content",
        lambda: _hf_config_template(K2),
        _kimi_encode(K2),
    ),
    Mode(
        "kimi_k2_thinking",
        "kimi_k2_thinking",
        K2T,
        (("keep_last_reasoning", True),),  # (a trained final answer keeps its reasoning)
        ThinkingPart,
        "reasoning_content",
        lambda: _shared_template(K2T),
        _kimi_encode(K2T),
        final_calls=True,
        content_differs="<think></think>",
    ),
    Mode(
        "kimi_k2.5",
        "kimi_k2.5",
        K25,
        (("tool_declaration", "json"),),
        ThinkingPart,
        "reasoning_content",
        lambda: _shared_template(K25),
        _tml(K25),
        final_calls=True,
        content_differs="<think></think>",
    ),
    Mode(
        "kimi_k2.6",
        "kimi_k2.6",
        K26,
        (("tool_declaration", "json"),),
        ThinkingPart,
        "reasoning_content",
        lambda: _shared_template(K25),  # (K2.6's own template is not available here)
        _tml(K26),
        final_calls=True,
        content_differs="<think></think>",
    ),
    Mode(
        "kimi_k2.5-no-thinking",
        "kimi_k2.5",
        K25,
        (("tool_declaration", "json"), ("thinking", False)),
        TextPart,
        "content",
        lambda: _shared_template(K25),
        _tml(K25),
    ),
    Mode(
        "gpt_oss",
        "gpt_oss",
        GPT_OSS,
        (("date", "2025-06-28"),),
        ThinkingPart,
        "reasoning_content",
        lambda: chat_template_file(GPT_OSS).read_text("utf-8"),
        _hf(GPT_OSS),
        content_differs="<|channel|>final<|message|>",
    ),
    Mode(
        "gpt_oss-final",
        "gpt_oss",
        GPT_OSS,
        (("date", "2025-06-28"), ("prefill_channel", "final")),
        TextPart,
        "content",
        lambda: chat_template_file(GPT_OSS).read_text("utf-8"),
        _hf(GPT_OSS),
    ),
    *(
        Mode(
            name,
            name,
            model,
            (),
            ThinkingPart,
            "reasoning_content",
            lambda template=template: trl_template(template),
            _tml(model),
            content_differs="<think></think>",
        )
        for name, model, template in (
            ("nemotron3", NEMOTRON, "nemotron_3_nano"),
            ("nemotron3_super", NEMOTRON_SUPER, "nemotron_3_super"),
            ("nemotron3_ultra", NEMOTRON_ULTRA, "nemotron_3_ultra"),
        )
    ),
    Mode(
        "nemotron3-no-thinking",
        "nemotron3",
        NEMOTRON,
        (("enable_thinking", False),),
        TextPart,
        "content",
        lambda: trl_template("nemotron_3_nano"),
        _tml(NEMOTRON),
    ),
    *(
        Mode(name, name, model, options, ThinkingPart, "tml", encode=_tml(model))
        for name, model, options in (
            ("glm5.2", GLM52, ()),
            ("glm5.3", GLM53, (("clear_thinking", True),)),
            ("glm5.3_flash", GLM53_FLASH, (("clear_thinking", True),)),
        )
    ),
    Mode(
        "llama3",
        "llama3",
        L3,
        (),
        TextPart,
        "content",
        lambda: trl_template("llama3_1"),
        lambda text: _meta_llama3().encode(text, bos=False, eos=False, allowed_special="all"),
        (("bos_token", "<|begin_of_text|>"),),
    ),
    Mode(
        "llama4",
        "llama4",
        L4,
        (),
        TextPart,
        "content",
        _llama4_template,
        lambda text: _meta_llama4().encode(text, bos=False, eos=False, allowed_special="all"),
        (("bos_token", "<|begin_of_text|>"),),
    ),
    Mode(
        "mistral",
        "mistral",
        "mistralai/Mistral-Nemo-Instruct-2407",
        (),
        TextPart,
        "mistral-common",
        encode=lambda text: [],  # unused: the oracle gives ids
    ),
    Mode(
        "mistral_v7",
        "mistral_v7",
        "mistralai/Mistral-Large-Instruct-2411",
        (),
        TextPart,
        "mistral-common",
        encode=lambda text: [],  # unused: the oracle gives ids
    ),
    Mode(
        "template-qwen3",
        "template",
        Q3,
        (("enable_thinking", False),),
        TextPart,
        "content",
        lambda: _hf_config_template(Q3),
        _hf(Q3),
        generic=True,
    ),
    Mode(
        "template-gpt_oss",
        "template",
        GPT_OSS,
        (),
        ThinkingPart,
        "reasoning_content",
        lambda: chat_template_file(GPT_OSS).read_text("utf-8"),
        _hf(GPT_OSS),
        generic=True,
    ),
]
# The template renderer's options are the template's kwargs: the mode's own options are
# the renderer's (gpt-oss's date is the template's clock, fixed above).


def test_every_renderer_has_a_prefill_mode() -> None:
    assert {m.name for m in MODES} == {*renderer_names(), "template"}


def _oracle_ids(mode: Mode) -> list[int]:
    assert mode.encode is not None
    if mode.oracle == "mistral-common":
        return _mistral_prefilled(mode.messages(), mode.name)
    if mode.oracle == "tml":
        config = next(
            c for c in CONFIGS if c.name == mode.name and dict(c.options) == dict(mode.options)
        )
        tokenizer = tokenizer_for(mode.model_id)
        text = decode(tokenizer, prompt_ids(config, mode.messages(), None)) + PREFILL
        return mode.encode(text)
    return mode.encode(mode.oracle_text())


@pytest.mark.parametrize("mode", MODES, ids=repr)
def test_a_prefilled_prompt_equals_the_template(mode: Mode) -> None:
    r = mode.renderer()
    ours = r.build_generation_prompt(mode.messages(), prefill=PREFILL)
    assert ours == _oracle_ids(mode)
    if mode.content_differs is not None and mode.template is not None:
        # continue_final_message="content" writes the final message as history: the
        # answer after what content_differs names, not what a sampler sees here.
        text = mode.oracle_text("content")
        assert text.endswith(mode.content_differs + PREFILL)
        assert mode.encode is not None and mode.encode(text) != ours


def _control_ids(r: Renderer, ids: list[int]) -> list[int]:
    return [t for t in ids if r.table.control_text(t) is not None]


@pytest.mark.parametrize("mode", MODES, ids=repr)
def test_prefill_text_is_ordinary_text(mode: Mode) -> None:
    """Control-token spellings in a prefill stay text: the prompt gains only the controls
    the format writes to open the prefilled part."""
    r = mode.renderer()
    tricky = "<|im_end|><think></think><|end|><｜end▁of▁sentence｜><|im_start|>"
    base = r.build_generation_prompt(mode.messages())
    ours = r.build_generation_prompt(mode.messages(), prefill=tricky)
    opened = r.build_generation_prompt(mode.messages(), prefill="x")
    assert _control_ids(r, ours) == _control_ids(r, opened)
    if mode.name == "mistral_v7":  # SentencePiece reads a typed "▁" as a space
        tricky = tricky.replace("\u2581", " ")
    assert r.decode(ours).endswith(tricky)
    assert len(_control_ids(r, opened)) - len(_control_ids(r, base)) <= 2


def _sample(mode: Mode) -> tuple[list[int], list[int]]:
    """A whole sample whose first part starts with the prefill (a supervised example's
    trained ids), and the ids after the prefill's text in it."""
    r = mode.renderer()
    first = mode.starts(PREFILL + REST)
    parts = [first, TextPart("So it is.")] if mode.starts is ThinkingPart else [first]
    example = r.build_supervised_example([*mode.messages(), Message("assistant", parts)])
    sample = example.tokens[example.weights > 0].tolist()
    for k in range(len(sample) + 1):
        if r.decode(sample[:k]).endswith(PREFILL):
            return sample, sample[k:]
    raise AssertionError(f"the sample does not spell the prefill: {r.decode(sample)!r}")


@pytest.mark.parametrize("mode", MODES, ids=repr)
def test_a_completion_after_a_prefill_parses_to_the_whole_samples_message(mode: Mode) -> None:
    r = mode.renderer()
    sample, after = _sample(mode)
    whole = r.parse_response(sample)
    result = r.parse_response(after, prefill=PREFILL)
    assert result.message == whole.message
    assert type(result.message.parts[0]) is mode.starts
    assert result.message.parts[0].text.startswith(PREFILL + REST.rstrip("."))
    assert result.termination == whole.termination and result.issues == whole.issues
    # Spans count from the completion's first id: the first part starts at 0.
    assert result.spans[0][0] == 0 and result.spans[-1][1] <= len(after)
    # What a sampler sees: the prefilled prompt then the completion spell the prompt then
    # the whole sample.
    prompt = r.build_generation_prompt(mode.messages())
    prefilled = r.build_generation_prompt(mode.messages(), prefill=PREFILL)
    assert r.decode(prefilled + after) == r.decode(prompt + sample)
    # Streaming, token by token and in two pieces at every split: the same result, and
    # the events spell the message (the prefill's text with the first feed).
    one = r.stream_parser(prefill=PREFILL)
    events = [e for t in after for e in one.feed([t])]
    assert one.finish() == result
    events += one.final_events
    texts: dict[int, str] = {}
    for event in events:
        if hasattr(event, "text"):
            texts[event.index] = texts.get(event.index, "") + event.text
    assert texts[0].startswith(PREFILL)
    for cut in range(0, len(after) + 1, max(1, len(after) // 12)):
        parser = r.stream_parser(prefill=PREFILL)
        parser.feed(after[:cut])
        parser.feed(after[cut:])
        assert parser.finish() == result, cut


@pytest.mark.parametrize(
    "mode",
    [
        m
        for m in MODES
        if m.id in ("qwen3.5", "deepseek_v3.1-thinking", "gpt_oss", "template-qwen3", "qwen3")
    ],
    ids=repr,
)
def test_a_rollout_prefills_each_turn_it_is_given(mode: Mode) -> None:
    r = mode.renderer()
    rollout = r.rollout(mode.messages(), prefill=PREFILL)
    assert rollout.prompt_ids == r.build_generation_prompt(mode.messages(), prefill=PREFILL)
    sample, after = _sample(mode)
    result = rollout.add_completion(after)
    assert result.message == r.parse_response(sample).message
    assert not rollout.weights[: len(rollout.tokens) - len(after)].any()
    prompt = rollout.add_messages([{"role": "user", "content": "And then?"}], prefill="Then,")
    assert r.decode(prompt).endswith("Then,")
    second = rollout.add_completion(after)
    assert second.message.parts[0].text.startswith("Then," + REST.rstrip("."))
    rollout.add_messages([{"role": "user", "content": "Thanks."}])
    third = rollout.add_completion(sample)  # no prefill: the whole sample again
    assert third.message == r.parse_response(sample).message


def test_a_prefill_must_be_text() -> None:
    r = MODES[0].renderer()
    with pytest.raises(TypeError, match="prefill: expected text"):
        r.build_generation_prompt(MESSAGES, prefill=b"x")
    with pytest.raises(TypeError, match="prefill: expected text"):
        r.parse_response([], prefill=1)


@pytest.mark.parametrize("mode", [m for m in MODES if m.id in ("qwen3.5", "gpt_oss")], ids=repr)
def test_a_rollout_awaiting_a_prefilled_completion_keeps_its_prefill(mode: Mode) -> None:
    """Through its plain form and a pickle, as a worker hands it on."""
    r = mode.renderer()
    sample, after = _sample(mode)
    expected = r.parse_response(sample).message
    rollout = r.rollout(mode.messages(), prefill=PREFILL)
    data = json.loads(json.dumps(rollout.to_dict()))
    assert data["prefill"]["text"] == PREFILL
    for copy_ in (Rollout.from_dict(data, r), pickle.loads(pickle.dumps(rollout))):
        assert copy_.add_completion(after).message == expected


def test_a_generic_prompt_that_opens_no_reasoning_is_followed_by_the_prefill_as_text() -> None:
    """The template renderer writes the prefill after the prompt as the template writes
    it: for Qwen3's template with thinking on that is before the model's own ``<think>``
    (the ``qwen3`` renderer opens the reasoning first)."""
    mode = next(m for m in MODES if m.id == "template-qwen3")
    generic = _renderer("template", Q3, (), True)
    expected = _hf(Q3)(
        Mode("q", "template", Q3, (), TextPart, "prompt", mode.template).oracle_text()
    )
    assert generic.build_generation_prompt(MESSAGES, prefill=PREFILL) == expected
    ids = tokenizer_for(Q3).encode(" then<think>\nx</think>\n\ny", add_special_tokens=False)
    parts = generic.parse_response(ids, prefill=PREFILL).message.parts
    assert parts[0] == TextPart(PREFILL + " then")
    assert type(parts[1]) is ThinkingPart
