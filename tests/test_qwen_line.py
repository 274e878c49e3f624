"""The Qwen line on Qwen3's format: Qwen2.5, Qwen3-2507 Instruct and Thinking, Qwen3-VL
Instruct (text), against the official templates.

Oracles: TRL's byte-exact ``qwen2_5.jinja``, ``qwen3_instruct_2507.jinja`` and
``qwen3_vl.jinja``, and for Thinking-2507 (whose own template is available neither in TRL
nor here) Qwen3-8B's official template with the documented delta (its generation prompt
opens ``<think>⏎``), rendered in transformers' sandbox and tokenized by the Qwen3-8B
tokenizer; Qwen2.5's template by that tokenizer without the four tokens Qwen2.5's
vocabulary lacks. Expected ids never come from the renderers.
"""

from __future__ import annotations

import functools
import json
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from renderers import Termination, TextPart, ThinkingPart, get_renderer
from renderers.qwen3 import Qwen3Renderer
from tests.conftest import tokenizer_for
from tests.corpus import CORPUS, Conversation, prompts_of
from tests.oracle import server_messages, template_text, trl_template
from tests.training import supervised_or_dropped

# The template turns control-token spellings in message text into control tokens; our
# message text stays text (tested in tests/test_qwen3.py for the shared writer).
PARITY = [c for c in CORPUS if "adversarial" not in c.tags]
QWEN3_ONLY = ("<tool_response>", "</tool_response>", "<think>", "</think>")
"""The tokens Qwen3 added to Qwen2.5's vocabulary (ids 151665 to 151668)."""

_QWEN3_PROMPT = (
    "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n"
    "    {%- if enable_thinking is defined and enable_thinking is false %}\n"
    "        {{- '<think>\\n\\n</think>\\n\\n' }}\n    {%- endif %}\n{%- endif %}"
)
_THINKING_PROMPT = (
    "{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n<think>\\n' }}\n{%- endif %}"
)


@functools.cache
def thinking_2507_template() -> str:
    """Qwen3's official template with Thinking-2507's generation prompt (the documented
    delta: ``<think>⏎`` always, no ``enable_thinking``)."""
    official: str = tokenizer_for("Qwen/Qwen3-8B").chat_template
    assert official.count(_QWEN3_PROMPT) == 1
    return official.replace(_QWEN3_PROMPT, _THINKING_PROMPT)


@functools.cache
def qwen2_5_tokenizer() -> Any:
    """The Qwen3-8B tokenizer without the four tokens Qwen3 added: Qwen2.5's vocabulary
    (the same BPE, the 22 special tokens ``<|endoftext|>``..``<|file_sep|>`` with the same
    ids)."""
    from huggingface_hub import hf_hub_download
    from tokenizers import Tokenizer
    from transformers import PreTrainedTokenizerFast

    path = Path(hf_hub_download("Qwen/Qwen3-8B", "tokenizer.json"))
    data = json.loads(path.read_text(encoding="utf-8"))
    data["added_tokens"] = [t for t in data["added_tokens"] if t["content"] not in QWEN3_ONLY]
    return PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(data)))


@dataclass(frozen=True)
class Config:
    name: str
    template: str  # a TRL template name, or "thinking_2507"

    def __repr__(self) -> str:
        return self.name

    @property
    def thinking(self) -> bool:
        return self.name == "qwen3_thinking_2507"

    def renderer(self) -> Qwen3Renderer:
        r = get_renderer(self.name, tokenizer_for("Qwen/Qwen3-8B"))
        assert isinstance(r, Qwen3Renderer)
        return r

    def oracle_tokenizer(self) -> Any:
        if self.name == "qwen2.5":
            return qwen2_5_tokenizer()
        return tokenizer_for("Qwen/Qwen3-8B")

    def text(self, messages: list[dict[str, Any]], tools: Any, gen: bool) -> str:
        source = (
            thinking_2507_template()
            if self.template == "thinking_2507"
            else trl_template(self.template)
        )
        given = vl_input(messages) if self.name == "qwen3_vl" else template_input(messages)
        return template_text(source, server_messages(given), tools, add_generation_prompt=gen)

    def ids(self, text: str) -> list[int]:
        ids: list[int] = self.oracle_tokenizer().encode(text, add_special_tokens=False)
        return ids


CONFIGS = [
    Config("qwen2.5", "qwen2_5"),
    Config("qwen3_instruct_2507", "qwen3_instruct_2507"),
    Config("qwen3_thinking_2507", "thinking_2507"),
    Config("qwen3_vl", "qwen3_vl"),
]


def _joined(message: dict[str, Any]) -> dict[str, Any]:
    """A message with list content as the 2507/Qwen2.5 templates can take it: text parts
    joined into ``content``, thinking parts into ``reasoning_content``."""
    m = dict(message)
    if isinstance(m.get("content"), list):
        parts = m["content"]
        m["content"] = "".join(p["text"] for p in parts if p.get("type") == "text")
        thinking = [p["thinking"] for p in parts if p.get("type") == "thinking"]
        if thinking:
            m["reasoning_content"] = "".join(thinking)
    return m


def template_input(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [_joined(m) for m in messages]


def vl_input(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Qwen3-VL's template takes list content as is (its text parts joined); a list with
    a thinking part is given joined (the template has no reasoning)."""
    out = []
    for m in messages:
        content = m.get("content")
        text_only = isinstance(content, list) and all(p.get("type") == "text" for p in content)
        out.append(dict(m) if text_only else _joined(m))
    return out


def refused(config: Config, conversation: Conversation) -> bool:
    """Qwen3-VL's template drops a system message after the first: refused here."""
    return config.name == "qwen3_vl" and "system_late" in conversation.tags


# -- the tokens ------------------------------------------------------------------------------


def test_the_special_tokens_the_templates_write_have_the_qwen3_8b_ids() -> None:
    """Qwen's published ids (Qwen2.5's from torchtune's ``QWEN2_5_SPECIAL_TOKENS``, and the
    four Qwen3 added after them) are the cached Qwen3-8B tokenizer's."""
    decoder = tokenizer_for("Qwen/Qwen3-8B").backend_tokenizer.get_added_tokens_decoder()
    ids = {token.content: i for i, token in decoder.items()}
    published = {"<|endoftext|>": 151643, "<|im_start|>": 151644, "<|im_end|>": 151645}
    published |= {"<tool_call>": 151657, "</tool_call>": 151658, "<|file_sep|>": 151664}
    published |= dict(zip(QWEN3_ONLY, range(151665, 151669), strict=True))
    assert {k: ids[k] for k in published} == published
    assert max(ids.values()) == 151668
    reduced = qwen2_5_tokenizer().backend_tokenizer.get_added_tokens_decoder()
    assert sorted(reduced) == list(range(151643, 151665))


# -- prompts, conversations, supervised examples ---------------------------------------------


@pytest.mark.parametrize("config", CONFIGS, ids=repr)
def test_generation_prompts_equal_the_official_template(config: Config) -> None:
    """61 prompts of the 43 conversations per format (Qwen3-VL: 60, the late system
    message refused)."""
    r = config.renderer()
    agreed = 0
    for conversation in PARITY:
        for prompt in prompts_of(conversation):
            if refused(config, conversation):
                with pytest.raises(
                    ValueError, match=r"messages\[1\]\.role: a system message after the first"
                ):
                    r.build_generation_prompt(prompt, conversation.tools)
                continue
            expected = config.ids(config.text(prompt, conversation.tools, True))
            assert r.build_generation_prompt(prompt, conversation.tools) == expected, (
                conversation.id
            )
            agreed += 1
    assert agreed == (60 if config.name == "qwen3_vl" else 61)


@pytest.mark.parametrize("config", CONFIGS, ids=repr)
def test_whole_conversations_equal_the_official_template(config: Config) -> None:
    """Every conversation rendered whole (nothing trained) is the template's (43, VL 42)."""
    r = config.renderer()
    agreed = 0
    for conversation in PARITY:
        if refused(config, conversation):
            continue
        msgs, tools = conversation.messages, conversation.tools
        expected = config.ids(config.text(msgs, tools, False))
        example = r.build_supervised_example(msgs, tools, train_on=("user",))
        assert example.tokens.tolist() == expected, conversation.id
        agreed += 1
    assert agreed == (42 if config.name == "qwen3_vl" else 43)


def _trained_cases(config: Config) -> list[Conversation]:
    return [c for c in PARITY if c.messages[-1]["role"] == "assistant" and not refused(config, c)]


@pytest.mark.parametrize("config", CONFIGS, ids=repr)
def test_supervised_examples_are_the_prompt_then_the_templates_turn(config: Config) -> None:
    """The untrained prefix is the template's generation prompt and the trained tokens its
    rendering of the last turn up to ``<|im_end|>`` (Thinking-2507: encoded on their own
    after the prompt's ``<think>⏎``, as sampled). 33 conversations end with an answer (VL
    32); a trained turn's reasoning in a format without think blocks is refused by default
    and dropped on request (as the template drops it): 9 of them."""
    r = config.renderer()
    dropped = 0
    cases = _trained_cases(config)
    for conversation in cases:
        msgs, tools = conversation.messages, conversation.tools
        example, was_dropped = supervised_or_dropped(r, msgs, tools)
        dropped += was_dropped
        prompt_text = config.text(msgs[:-1], tools, True)
        full = config.text(msgs, tools, False)
        assert full.startswith(prompt_text)
        prompt = config.ids(prompt_text)
        completion = full[len(prompt_text) :]
        assert completion.endswith("<|im_end|>\n")
        trained = config.ids(completion.removesuffix("\n"))
        newline = config.ids("\n")
        if not config.thinking:
            assert config.ids(full) == [*prompt, *trained, *newline]  # nothing merges
        assert example.tokens.tolist() == [*prompt, *trained, *newline], conversation.id
        assert example.weights.tolist() == [0.0] * len(prompt) + [1.0] * len(trained) + [0.0]
    assert len(cases) == (32 if config.name == "qwen3_vl" else 33)
    assert dropped == (0 if config.thinking else 9)


@pytest.mark.parametrize("config", CONFIGS, ids=repr)
def test_trained_turns_parse_back_and_render_back_streaming_as_in_one_shot(
    config: Config,
) -> None:
    """Each trained completion parses to the turn's reasoning, text and calls with no
    issue, the parsed message renders back to the same ids, and a stream fed in two pieces
    at any cut finishes with the same result."""
    r = config.renderer()
    for conversation in _trained_cases(config):
        msgs, tools = conversation.messages, conversation.tools
        example, _ = supervised_or_dropped(r, msgs, tools)
        weights = example.weights.tolist()
        start = weights.index(1.0)
        completion = example.tokens.tolist()[start : len(weights) - 1]
        result = r.parse_response(completion)
        assert result.termination is Termination.STOP
        assert not result.issues, conversation.id
        message = result.message
        given = _joined(server_messages([msgs[-1]])[0])
        text = (given.get("content") or "").strip()
        assert message.text.strip() == unicodedata.normalize("NFC", text), conversation.id
        calls = [(c.name, json.loads(c.arguments)) for c in message.tool_calls]
        expected_calls = [
            (c["function"]["name"], c["function"]["arguments"])
            for c in given.get("tool_calls") or []
        ]
        assert calls == expected_calls
        reasoning = (given.get("reasoning_content") or "").strip("\n")
        assert (message.thinking or "") == (reasoning if config.thinking else "")
        rendered = r.build_supervised_example([*msgs[:-1], message.to_dict()], tools)
        assert rendered.tokens.tolist() == example.tokens.tolist(), conversation.id
        for cut in range(0, len(completion) + 1, max(1, len(completion) // 20)):
            parser = r.stream_parser()
            parser.feed(completion[:cut])
            parser.feed(completion[cut:])
            assert parser.finish() == result, (conversation.id, cut)


# -- Qwen2.5's vocabulary --------------------------------------------------------------------


def test_qwen2_5_writes_the_same_ids_with_its_own_vocabulary_as_with_qwen3s() -> None:
    """Nothing Qwen2.5 writes is one of the four tokens its vocabulary lacks: the renderer
    gives the same ids with either tokenizer, on every prompt and whole conversation."""
    with_qwen3 = get_renderer("qwen2.5")
    with_own = get_renderer("qwen2.5", qwen2_5_tokenizer())
    compared = 0
    for conversation in PARITY:
        msgs, tools = conversation.messages, conversation.tools
        for prompt in prompts_of(conversation):
            a = with_qwen3.build_generation_prompt(prompt, tools)
            assert a == with_own.build_generation_prompt(prompt, tools)
            assert not set(a) & set(range(151665, 151669))
            compared += 1
        whole = with_qwen3.build_supervised_example(msgs, tools, train_on=("user",))
        own = with_own.build_supervised_example(msgs, tools, train_on=("user",))
        assert whole.tokens.tolist() == own.tokens.tolist()
    assert compared == 61


def test_qwen2_5_writes_tool_responses_as_text_and_a_default_system_turn() -> None:
    r = get_renderer("qwen2.5")
    msgs = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "", "tool_calls": [_call("f", {"a": 1})]},
        {"role": "tool", "content": "r"},
    ]
    text = r.decode(r.build_generation_prompt(msgs))
    assert text.startswith(
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
        "assistant.<|im_end|>\n"
    )
    ids = r.build_generation_prompt(msgs)
    assert 151665 not in ids and "<tool_response>\nr\n</tool_response>" in text


# -- Thinking-2507 ---------------------------------------------------------------------------


THINKING = Config("qwen3_thinking_2507", "thinking_2507")


def test_thinking_2507_completions_start_inside_the_reasoning() -> None:
    r = THINKING.renderer()
    prompt = r.build_generation_prompt([{"role": "user", "content": "q"}])
    assert prompt[-2:] == [r.think, *r.table.encode("\n")]
    ids = [*r.table.encode("Let me see.\n"), r.think_end, *r.table.encode("\n\nYes."), r.im_end]
    result = r.parse_response(ids)
    assert result.message.parts == (ThinkingPart("Let me see."), TextPart("Yes."))
    assert not result.issues


def test_thinking_2507_prefill_continues_the_reasoning() -> None:
    r = THINKING.renderer()
    msgs = [{"role": "user", "content": "q"}]
    prompt = r.build_generation_prompt(msgs, prefill="First,")
    assert prompt == r.build_generation_prompt(msgs) + r.table.encode("First,")
    ids = [*r.table.encode(" I think.\n"), r.think_end, *r.table.encode("\n\nA"), r.im_end]
    parsed = r.parse_response(ids, prefill="First,").message
    assert parsed.parts == (ThinkingPart("First, I think."), TextPart("A"))


def test_thinking_2507_cannot_train_a_turn_its_template_writes_without_a_think_block() -> None:
    r = THINKING.renderer()
    msgs = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b"},
        {"role": "user", "content": "c"},
        {"role": "assistant", "content": "d"},
    ]
    with pytest.raises(ValueError, match=r"messages\[1\]: qwen3_thinking_2507 writes this turn"):
        r.build_supervised_example(msgs, train_on="all_assistant")
    # The last turn trains, after the generation prompt of its prefix.
    example = r.build_supervised_example(msgs)
    prompt = r.build_generation_prompt(msgs[:3])
    assert example.tokens.tolist()[: len(prompt)] == prompt
    assert example.weights.tolist()[len(prompt) - 1 : len(prompt) + 1] == [0.0, 1.0]


# -- the formats without think blocks --------------------------------------------------------


@pytest.mark.parametrize("name", ["qwen2.5", "qwen3_instruct_2507", "qwen3_vl"])
def test_instruct_formats_refuse_trained_reasoning_and_drop_it_on_request(name: str) -> None:
    r = get_renderer(name)
    msgs = [
        {"role": "user", "content": "q"},
        {"role": "assistant", "content": "a", "reasoning_content": "r"},
    ]
    with pytest.raises(ValueError, match=rf"messages\[1\]: .*{name}.*reasoning='drop'"):
        r.build_supervised_example(msgs)
    dropped = r.build_supervised_example(msgs, reasoning="drop")
    without = r.build_supervised_example([msgs[0], {"role": "assistant", "content": "a"}])
    assert dropped.tokens.tolist() == without.tokens.tolist()


@pytest.mark.parametrize("name", ["qwen3_instruct_2507", "qwen3_vl"])
def test_instruct_formats_read_a_sampled_think_token_as_text(name: str) -> None:
    """No think markers: a ``<think>`` a Qwen3 tokenizer decodes is kept as text (nothing
    lost), and ``</think>`` in given text is written as is (no inline-reasoning split)."""
    r = get_renderer(name)
    think, think_end = r.table.control_id("<think>"), r.table.control_id("</think>")
    ids = [think, *r.table.encode("r"), think_end, *r.table.encode("a"), r.im_end]
    assert r.parse_response(ids).message.text == "<think>r</think>a"
    msgs = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "r</think>a"}]
    example = r.build_supervised_example(msgs)
    assert r.decode(example.tokens.tolist()).endswith("assistant\nr</think>a<|im_end|>\n")


def test_qwen3_vl_renders_text_parts_and_refuses_images() -> None:
    r = get_renderer("qwen3_vl")
    parts = [{"type": "text", "text": "Look "}, {"type": "text", "text": "here."}]
    msgs = [{"role": "user", "content": parts}]
    expected = Config("qwen3_vl", "qwen3_vl")
    assert r.build_generation_prompt(msgs) == expected.ids(expected.text(msgs, None, True))
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    with pytest.raises(ValueError, match=r"messages\[0\]\.content\[1\]\.type: 'image_url'"):
        r.build_generation_prompt([{"role": "user", "content": [parts[0], image]}])


def test_models_lists_the_qwen_line_with_its_tokenizer_source() -> None:
    import io
    from argparse import Namespace

    from renderers.cli.models import run

    for name, model in [
        ("qwen2.5", "Qwen/Qwen2.5-7B-Instruct"),
        ("qwen3_instruct_2507", "Qwen/Qwen3-4B-Instruct-2507"),
        ("qwen3_thinking_2507", "Qwen/Qwen3-4B-Thinking-2507"),
        ("qwen3_vl", "Qwen/Qwen3-VL-8B-Instruct"),
    ]:
        out = io.StringIO()
        run(Namespace(name=name), out)
        assert out.getvalue().startswith(f"{name}: {model}")
        assert "  tokenizer: Qwen/Qwen3-8B\n" in out.getvalue()
    assert get_renderer("Qwen/Qwen3-235B-A22B-Thinking-2507").name == "qwen3_thinking_2507"


@pytest.mark.parametrize(
    ("name", "make"), [("qwen3_instruct_2507", "instruct"), ("qwen3_vl", "vision_instruct")]
)
def test_tml_renderers_agrees_on_generation_prompts_but_one_tokenization(
    name: str, make: str
) -> None:
    """The second oracle, tml-renderers' ``Qwen3.instruct()`` / ``Qwen3.vision_instruct()``:
    60 of 61 prompts equal (VL: 59 of 60); the other spells the same text, an assistant text
    ``⏎`` before a call, which tml encodes apart from the header's newline where the
    template's text tokenized whole (and we) merge them."""
    pytest.importorskip("tml_renderers")
    from tests.tml_oracle import OracleConfig, prompt_ids, tml

    config = OracleConfig(name, "Qwen/Qwen3-8B", {}, getattr(tml.Qwen3, make), make)
    r = get_renderer(name)
    agreed, differ = 0, []
    for conversation in PARITY:
        if refused(Config(name, ""), conversation):
            continue
        for prompt in prompts_of(conversation):
            theirs = prompt_ids(config, prompt, conversation.tools)
            ours = r.build_generation_prompt(prompt, conversation.tools)
            if theirs == ours:
                agreed += 1
            else:
                assert r.decode(theirs) == r.decode(ours)
                differ.append(conversation.id)
    assert differ == ["tool_call_after_blank_text_with_reasoning"]
    assert agreed == (59 if name == "qwen3_vl" else 60)


def _call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}
