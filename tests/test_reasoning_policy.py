"""The training rules every renderer keeps (issue 13, items 4-6).

- **One reasoning policy**: reasoning of turns that are not trained is rendered exactly
  as the official template does (generation prompts never fail on history reasoning);
  reasoning of a *trained* turn that the format cannot write is a one-line ``ValueError``
  naming the ``reasoning`` option, and ``reasoning="drop"`` trains the turn as the
  template renders it without that reasoning.
- **The untrained prefix is the generation prompt**: the tokens before the first trained
  token of a supervised example are the generation prompt of the messages before the
  trained turn, or building the example is a one-line ``ValueError``, or the case is one of
  the documented exceptions listed here (each checked exactly by its checker in
  tests/test_properties.py).
- **No trained token holds untrained text**: a token that merges the end of untrained
  text with the start of a trained turn is never trained.

Expected ids come from the official templates (tests/oracle.py, via the per-model test
helpers; Kimi-K2.5's too) and tml-renderers for the other 2026 families
(tests/tml_oracle.py).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest

from renderers import get_renderer
from renderers.core.messages import coerce_messages
from renderers.rendering import Renderer
from renderers.template import TemplateRenderer
from tests import tml_oracle
from tests.conftest import tokenizer_for
from tests.corpus import CORPUS, SYS, call, result
from tests.oracle import hf_template_ids
from tests.test_deepseek_v3 import V3, V31
from tests.test_deepseek_v3 import oracle as deepseek_oracle
from tests.test_gpt_oss import DATE, template_input
from tests.test_kimi_k2 import K2, K2_THINKING
from tests.test_properties import SPECS, Spec, prompt_equals

Conversation = list[dict[str, Any]]
Oracle = Callable[[Conversation, Any, bool], list[int]]


def _qwen3(enable_thinking: bool) -> Oracle:
    def ids(messages: Conversation, tools: Any, gen: bool) -> list[int]:
        tok = tokenizer_for("Qwen/Qwen3-8B")
        return hf_template_ids(
            tok, messages, tools, add_generation_prompt=gen, enable_thinking=enable_thinking
        )

    return ids


def _deepseek(model_id: str, **kw: Any) -> Oracle:
    return lambda messages, tools, gen: deepseek_oracle(model_id, messages, gen, **kw)


def _gpt_oss(messages: Conversation, tools: Any, gen: bool) -> list[int]:
    tok = tokenizer_for("openai/gpt-oss-20b")
    return hf_template_ids(tok, template_input(messages), tools, add_generation_prompt=gen)


def _tml(label: str) -> Oracle:
    config = next(c for c in tml_oracle.CONFIGS if c.label == label)

    def ids(messages: Conversation, tools: Any, gen: bool) -> list[int]:
        assert gen, "tml-renderers' supervised examples train only the last turn"
        return tml_oracle.prompt_ids(config, messages, tools)

    return ids


def _nemotron3(name: str, **options: Any) -> Oracle:
    """The official Nemotron-3 templates (tests/test_nemotron3.py, TRL's copies)."""

    def ids(messages: Conversation, tools: Any, gen: bool) -> list[int]:
        from tests import test_nemotron3 as nemotron

        config = nemotron.Config(name, nemotron.TEMPLATES[name], options)
        return nemotron.template_ids(nemotron.official_text(config, messages, tools, gen))

    return ids


def _qwen36(**options: Any) -> Oracle:
    """Qwen3.6's official template (tests/test_qwen3_6.py, TRL's copy). With thinking on,
    a whole conversation's assistant turns (all trained here) are encoded after their
    ``<think>⏎`` apart, as sampled (documented in renderers/qwen3_5.py)."""

    def ids(messages: Conversation, tools: Any, gen: bool) -> list[int]:
        from tests import test_qwen3_6 as qwen36

        text = qwen36.official_text(options, messages, tools, gen)
        if gen or not options.get("enable_thinking", True):
            return qwen36.template_ids(text)
        pieces = re.split(r"(?<=<\|im_start\|>assistant\n<think>\n)", text)
        return [t for piece in pieces for t in qwen36.template_ids(piece)]

    return ids


def _glm5(name: str, **options: Any) -> Oracle:
    """tml-renderers' GLM-5 renderers (tests/test_glm5.py), with the tools' property order
    theirs and their <|endoftext|> end replaced by the role token sampled next."""

    def ids(messages: Conversation, tools: Any, gen: bool) -> list[int]:
        from tests import test_glm5 as glm

        config = next(c for c in glm.CONFIGS if c.name == name and c.options == options)
        assert gen, "tml-renderers' supervised examples train only the last turn"
        return tml_oracle.prompt_ids(config.oracle(), messages, glm.sorted_properties(tools))

    return ids


def _kimi_k25(messages: Conversation, tools: Any, gen: bool) -> list[int]:
    """Moonshot's Kimi-K2.5 template (tests/test_kimi_k2_5.py), JSON tool declaration."""
    from tests import test_kimi_k2_5 as k25

    return k25.official_ids(k25.official_text(k25.K25[0], messages, tools, gen))


def _deepseek_r1(messages: Conversation, tools: Any, gen: bool) -> list[int]:
    """DeepSeek-R1's template (tests/test_deepseek_r1.py)."""
    from tests import test_deepseek_r1 as r1

    return r1.ids(r1.official_text(messages, gen))


def _kimi_k26(messages: Conversation, tools: Any, gen: bool) -> list[int]:
    """Moonshot's Kimi-K2.5 template with K2.6's tokenizer (tests/test_kimi_k2_6.py)."""
    from tests import test_kimi_k2_5 as k25
    from tests import test_kimi_k2_6 as k26

    return k26.ids(k25.official_text(k25.K25[0], messages, tools, gen))


def _llama3(messages: Conversation, tools: Any, gen: bool) -> list[int]:
    """Llama 3.1's template (tests/test_llama3.py) with the llama-models tokenizer."""
    from tests import test_llama3

    return test_llama3.template_ids(test_llama3.meta_tokenizer_instance(), messages, tools, gen)


def _llama4(messages: Conversation, tools: Any, gen: bool) -> list[int]:
    """Llama 4's template (tests/test_llama4.py) with the llama-models tokenizer."""
    from llama_models.llama4.tokenizer import Tokenizer

    from tests import test_llama4

    template = test_llama4.official_template()
    return test_llama4.template_ids(template, Tokenizer.get_instance(), messages, tools, gen)


def _qwen_line(name: str) -> Oracle:
    """The official templates of the Qwen line on Qwen3's format (tests/test_qwen_line.py)."""

    def ids(messages: Conversation, tools: Any, gen: bool) -> list[int]:
        from tests import test_qwen_line

        config = next(c for c in test_qwen_line.CONFIGS if c.name == name)
        return config.ids(config.text(messages, tools, gen))

    return ids


def _mistral(name: str) -> Oracle:
    """mistral-common's encoder of that version (tests/test_mistral.py), without its request
    validator (these conversations' call ids are not its 9 characters)."""

    def ids(messages: Conversation, tools: Any, gen: bool) -> list[int]:
        from tests import test_mistral

        version = next(v for v in test_mistral.VERSIONS if v.name == name)
        return test_mistral.encoded(test_mistral.encoder(version), messages, tools, False)

    return ids


# Every renderer, with each option set that changes what happens to reasoning, and the
# official rendering of the same conversation.
VARIANTS: list[tuple[str, dict[str, Any], Oracle]] = [
    ("qwen3", {}, _qwen3(True)),
    ("qwen3", {"enable_thinking": False}, _qwen3(False)),
    ("deepseek_v3", {}, _deepseek(V3)),
    ("deepseek_v3.1", {}, _deepseek(V31)),
    ("deepseek_v3.1", {"thinking": True}, _deepseek(V31, thinking=True)),
    ("kimi_k2", {}, lambda m, t, g: K2.template_ids(m, t, g)),
    ("kimi_k2_thinking", {}, lambda m, t, g: K2_THINKING.template_ids(m, t, g)),
    ("gpt_oss", {"date": DATE}, _gpt_oss),
    ("qwen3.5", {}, _tml("qwen3.5")),
    ("qwen3.5", {"enable_thinking": False}, _tml("qwen3.5-enable_thinking=False")),
    ("qwen3.6", {}, _qwen36()),
    ("qwen3.6", {"enable_thinking": False}, _qwen36(enable_thinking=False)),
    ("qwen3.6", {"preserve_thinking": True}, _qwen36(preserve_thinking=True)),
    ("qwen3.8", {}, _tml("qwen3.8")),
    ("qwen3.8", {"enable_thinking": False}, _tml("qwen3.8-enable_thinking=False")),
    ("deepseek_v4", {}, _tml("deepseek_v4")),
    ("deepseek_v4", {"thinking_mode": "chat"}, _tml("deepseek_v4-thinking_mode=chat")),
    ("deepseek_v4.1", {}, _tml("deepseek_v4.1")),
    ("deepseek_v4.1", {"thinking_mode": "chat"}, _tml("deepseek_v4.1-thinking_mode=chat")),
    ("kimi_k2.5", {"tool_declaration": "json"}, _kimi_k25),
    ("kimi_k2.6", {"tool_declaration": "json"}, _kimi_k26),
    ("deepseek_r1", {}, _deepseek_r1),
    ("nemotron3", {}, _nemotron3("nemotron3")),
    ("nemotron3", {"enable_thinking": False}, _nemotron3("nemotron3", enable_thinking=False)),
    ("nemotron3_super", {}, _nemotron3("nemotron3_super")),
    ("nemotron3_ultra", {}, _nemotron3("nemotron3_ultra")),
    ("glm5.2", {}, _glm5("glm5.2")),
    ("glm5.3", {}, _glm5("glm5.3")),
    ("glm5.3", {"clear_thinking": True}, _glm5("glm5.3", clear_thinking=True)),
    ("glm5.3_flash", {"clear_thinking": True}, _glm5("glm5.3_flash", clear_thinking=True)),
    ("llama3", {}, _llama3),
    ("llama4", {}, _llama4),
    ("mistral", {}, _mistral("mistral")),
    ("mistral_v7", {}, _mistral("mistral_v7")),
    ("qwen2.5", {}, _qwen_line("qwen2.5")),
    ("qwen3_instruct_2507", {}, _qwen_line("qwen3_instruct_2507")),
    ("qwen3_thinking_2507", {}, _qwen_line("qwen3_thinking_2507")),
    ("qwen3_vl", {}, _qwen_line("qwen3_vl")),
]
MODEL_IDS = {
    "qwen3": "Qwen/Qwen3-8B",
    "deepseek_v3": V3,
    "deepseek_v3.1": V31,
    "kimi_k2": "moonshotai/Kimi-K2-Instruct",
    "kimi_k2_thinking": "moonshotai/Kimi-K2-Thinking",
    "gpt_oss": "openai/gpt-oss-20b",
    "qwen3.5": "Qwen/Qwen3.5-27B",
    "qwen3.6": "Qwen/Qwen3.6-27B",
    "qwen3.8": "Qwen/Qwen3.8-27B",
    "deepseek_v4": "deepseek-ai/DeepSeek-V4-Pro",
    "deepseek_v4.1": "deepseek-ai/DeepSeek-V4.1-Flash",
    "kimi_k2.5": "moonshotai/Kimi-K2.5",
    "kimi_k2.6": "moonshotai/Kimi-K2.6",
    "deepseek_r1": "deepseek-ai/DeepSeek-R1",
    "nemotron3": "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B",
    "nemotron3_super": "nvidia/NVIDIA-Nemotron-3-Super-120B-A12B",
    "nemotron3_ultra": "nvidia/NVIDIA-Nemotron-3-Ultra-550B-A55B",
    "glm5.2": "zai-org/GLM-5.2",
    "glm5.3": "zai-org/GLM-5.3",
    "glm5.3_flash": "zai-org/GLM-5.3-Flash",
    "llama3": "meta-llama/Llama-3.1-8B-Instruct",
    "llama4": "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    "mistral": "mistralai/Mistral-Nemo-Instruct-2407",
    "mistral_v7": "mistralai/Mistral-Large-Instruct-2411",
    "qwen2.5": "Qwen/Qwen3-8B",
    "qwen3_instruct_2507": "Qwen/Qwen3-8B",
    "qwen3_thinking_2507": "Qwen/Qwen3-8B",
    "qwen3_vl": "Qwen/Qwen3-8B",
}
_BUILT: dict[Any, Renderer] = {}


def renderer(name: str, options: dict[str, Any]) -> Renderer:
    key = (name, tuple(sorted(options.items())))
    if key not in _BUILT:
        _BUILT[key] = get_renderer(name, tokenizer_for(MODEL_IDS[name]), **options)
    return _BUILT[key]


variant_param = pytest.mark.parametrize(
    ("name", "options", "official"),
    VARIANTS,
    ids=[n + "".join(f"-{k}={v}" for k, v in o.items()) for n, o, _ in VARIANTS],
)

QUESTION = {"role": "user", "content": "Is 17 prime?"}
REASONED = {"role": "assistant", "content": "Yes.", "reasoning_content": "No divisors."}
CALLED = {
    "role": "assistant",
    "content": "",
    "reasoning_content": "Look it up.",
    "tool_calls": [call("get_weather", {"city": "Paris"}, "c1")],
}
# Conversations whose history turns carry reasoning: generation prompts after them.
HISTORIES: dict[str, Conversation] = {
    "answer_then_user": [QUESTION, REASONED, {"role": "user", "content": "And 21?"}],
    "call_then_result": [QUESTION, CALLED, result("c1", "18 C", "get_weather")],
    "both": [
        SYS,
        QUESTION,
        REASONED,
        {"role": "user", "content": "Weather?"},
        CALLED,
        result("c1", "18 C", "get_weather"),
        {"role": "assistant", "content": "18 C.", "reasoning_content": "Report it."},
        {"role": "user", "content": "Thanks."},
    ],
}
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


def _without_reasoning(m: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in m.items() if k != "reasoning_content"}


@variant_param
@pytest.mark.parametrize("history", list(HISTORIES), ids=str)
@pytest.mark.usefixtures("fixed_clock")
def test_generation_prompts_with_history_reasoning_equal_the_template(
    name: str, options: dict[str, Any], official: Oracle, history: str
) -> None:
    messages = HISTORIES[history]
    got = renderer(name, options).build_generation_prompt(messages, tools=TOOLS)
    assert got == official(messages, TOOLS, True)


# Trained turns (the last message) whose reasoning each variant cannot write there.
TRAINED_CASES: dict[str, Conversation] = {
    "answer": [QUESTION, REASONED],
    "answer_after_tools": [QUESTION, CALLED, result("c1", "18 C", "get_weather"), REASONED],
}
# The variants that write the reasoning of these trained turns. The others refuse it:
# Qwen3/3.5/3.8 and Kimi-K2.5 with thinking off, DeepSeek-V4/V4.1 in chat mode, DeepSeek-V3 and
# K2-Instruct (no reasoning), DeepSeek-V3.1 (its template drops every turn's; only
# keep_thinking writes a last turn right after a user message), K2-Thinking (its template
# empties the conversation's last plain answer).
WRITES_TRAINED_REASONING = {
    ("qwen3", ()),
    ("gpt_oss", (("date", DATE),)),
    ("qwen3.5", ()),
    ("qwen3.6", ()),
    ("qwen3.6", (("preserve_thinking", True),)),
    ("qwen3.8", ()),
    ("deepseek_v4", ()),
    ("deepseek_v4.1", ()),
    ("kimi_k2.5", (("tool_declaration", "json"),)),
    ("kimi_k2.6", (("tool_declaration", "json"),)),
    ("nemotron3", ()),
    ("nemotron3_super", ()),
    ("nemotron3_ultra", ()),
    ("glm5.2", ()),
    ("glm5.3", ()),
    ("glm5.3", (("clear_thinking", True),)),
    ("glm5.3_flash", (("clear_thinking", True),)),
    ("qwen3_thinking_2507", ()),
}
# DeepSeek-R1 writes the reasoning of a trained answer after a user message, not after tool
# outputs (the prompt there opens no think block).
WRITES_TRAINED_REASONING_CASES = {("deepseek_r1", "answer")}
# Formats checked on prompts only where a turn is trained: tml-renderers' supervised
# examples train the last turn only; Kimi-K2.5/K2.6 and DeepSeek-R1 train it as sampled
# (tests/test_kimi_k2_5.py, tests/test_deepseek_r1.py).
TML = (
    "qwen3.5",
    "qwen3.8",
    "deepseek_v4",
    "deepseek_v4.1",
    "kimi_k2.5",
    "kimi_k2.6",
    "deepseek_r1",
    "glm5.2",
    "glm5.3",
    "glm5.3_flash",
)


@variant_param
@pytest.mark.parametrize("case", list(TRAINED_CASES), ids=str)
@pytest.mark.usefixtures("fixed_clock")
def test_trained_reasoning_the_format_cannot_write_is_refused_or_dropped(
    name: str, options: dict[str, Any], official: Oracle, case: str
) -> None:
    """Refused with an error naming the option; with ``reasoning="drop"`` the example is
    the official rendering of the turn without its reasoning, trained after its
    generation prompt."""
    r = renderer(name, options)
    messages = TRAINED_CASES[case]
    stripped = [*messages[:-1], _without_reasoning(messages[-1])]
    if (name, tuple(sorted(options.items()))) in WRITES_TRAINED_REASONING or (
        name,
        case,
    ) in WRITES_TRAINED_REASONING_CASES:
        r.build_supervised_example(messages, tools=TOOLS)
        return
    with pytest.raises(ValueError, match=r"^messages\[\d\]: .*reasoning='drop'") as raised:
        r.build_supervised_example(messages, tools=TOOLS)
    assert "\n" not in str(raised.value)
    example = r.build_supervised_example(messages, tools=TOOLS, reasoning="drop")
    without = r.build_supervised_example(stripped, tools=TOOLS)
    assert example.tokens.tolist() == without.tokens.tolist()
    assert example.weights.tolist() == without.weights.tolist()
    prompt = official(stripped[:-1], TOOLS, True)
    tokens = example.tokens.tolist()
    first = int(example.weights.argmax())
    if name in TML:
        assert tokens[:first] == prompt  # the oracle's supervised form trains the last turn
    else:
        assert tokens == official(stripped, TOOLS, False)
        # Documented: V3's template tool-call defects; V3.1 in thinking mode writes the
        # turn as non-thinking (``</think>`` where the prompt ends ``<think>``).
        # K2-Thinking's template drops the call turn's reasoning once a plain answer
        # follows (tests/test_properties.py kimi_thinking_prefix).
        documented = (name, case) in (
            ("deepseek_v3", "answer_after_tools"),
            ("kimi_k2_thinking", "answer_after_tools"),
        ) or (name == "deepseek_v3.1" and options.get("thinking"))
        assert tokens[:first] == prompt or documented


@variant_param
@pytest.mark.usefixtures("fixed_clock")
def test_trained_history_reasoning_is_refused_or_dropped(
    name: str, options: dict[str, Any], official: Oracle
) -> None:
    """Training every assistant turn: a history turn whose reasoning the template drops is
    refused (naming the option) or trained without it; generation prompts are unaffected;
    ``reasoning="drop"`` never changes the tokens of a conversation the renderer writes
    as the template does."""
    r = renderer(name, options)
    messages = [*HISTORIES["answer_then_user"], {"role": "assistant", "content": "No."}]
    try:
        example = r.build_supervised_example(messages, train_on="all_assistant")
    except ValueError as exc:
        text = str(exc)
        assert text.startswith("messages[1]: ") and "\n" not in text, text
        if "reasoning='drop'" not in text:
            return  # the turn itself cannot be trained (its prefix is not the prompt)
        example = r.build_supervised_example(messages, train_on="all_assistant", reasoning="drop")
    if name not in TML:
        assert example.tokens.tolist() == official(messages, None, False)


# -- the untrained prefix is the generation prompt -------------------------------------------

EXTRA: list[Conversation] = [
    # Issue 13 item 4: Qwen3 with thinking off (reasoning in the trained turn; no user).
    [
        {"role": "user", "content": "q"},
        {"role": "assistant", "reasoning_content": "r", "content": "a"},
    ],
    [{"role": "system", "content": "s"}, {"role": "assistant", "content": "a"}],
    # Item 5: DeepSeek-V3.1 writes "s" + "a" with no marker between them.
    [{"role": "system", "content": "ab"}, {"role": "assistant", "content": "cd"}],
    [{"role": "assistant", "content": "Hello."}, {"role": "user", "content": "Hi"}],
    [QUESTION, {"role": "assistant", "content": "\n\nLeading newlines."}],
    [QUESTION, {"role": "assistant", "content": "  Leading spaces."}],
    [QUESTION, {"role": "assistant", "content": "One."}, {"role": "assistant", "content": "Two."}],
]
CONVERSATIONS = [(c.id, c.messages, c.tools) for c in CORPUS] + [
    (f"extra{k}", m, None) for k, m in enumerate(EXTRA)
]


# DeepSeek-V3.1 in thinking mode writes every turn but a kept last one as non-thinking
# (module docstring; tests/test_properties.py test_v31_thinking_history_...); so does
# DeepSeek-R1, as its template writes history (``<｜Assistant｜>`` without the prompt's
# ``<think>\n``; tests/test_deepseek_r1.py test_history_turns_render_as_...).
NON_THINKING_HISTORY = {"deepseek_v3.1-thinking=True-keep_thinking=True", "deepseek_r1"}


def _first_trained_turn(example: Any) -> tuple[int, int]:
    first = int(example.weights.argmax())
    assert example.weights[first] > 0
    return first, int(example.message_indices[first])


@pytest.mark.parametrize("spec", SPECS, ids=repr)
@pytest.mark.usefixtures("fixed_clock")
def test_untrained_prefix_is_the_generation_prompt_on_the_corpus(spec: Spec) -> None:
    """Every corpus conversation (and the issue's reproductions), trained on the last
    assistant message and on every one: the tokens before the first trained token are the
    generation prompt of the messages before that turn, or the example is a one-line
    ``ValueError``, or the case is a documented exception of the variant (its checker from
    tests/test_properties.py asserts exactly what the prefix is instead)."""
    r = spec.renderer()
    check = spec.prompt_prefix or prompt_equals
    built = refused = documented = 0
    for _, messages, tools in CONVERSATIONS:
        for train_on in ("last_assistant", "all_assistant"):
            try:
                example = r.build_supervised_example(
                    messages, tools=tools, train_on=train_on, attribution=True
                )
            except ValueError as exc:
                assert "\n" not in str(exc), exc
                refused += 1
                continue
            built += 1
            first, turn = _first_trained_turn(example)
            msgs = coerce_messages(messages)
            tokens = example.tokens.tolist()
            if (
                turn == 0
                or msgs[turn - 1].role == "assistant"
                or any(m.role == "user" for m in msgs[turn + 1 :])
            ):
                # Documented (README, Renderer.build_supervised_example): a trained turn a
                # later user message follows is written in its history form, as the
                # template writes the whole conversation; so is an assistant turn right
                # before the trained one (a prompt ending with it writes it as the last
                # turn: Qwen3's empty think block); a first message has no prompt.
                documented += 1
                continue
            if tools or repr(spec) in NON_THINKING_HISTORY:
                prompt = r.build_generation_prompt(msgs[:turn], tools=tools)
                documents = spec.prompt_prefix is not None or repr(spec) in NON_THINKING_HISTORY
                if tokens[:first] != prompt and documents:
                    documented += 1
                    continue
                assert tokens[:first] == prompt
                continue
            if check(r, msgs[: turn + 1], tokens[:first], tokens[first:]):
                documented += 1
    assert built >= 40, (built, refused)


def _untrained_text(r: Renderer, example: Any) -> str:
    """The decoded text of the untrained tokens, with a break where trained tokens stand."""
    out = []
    for token, weight in zip(example.tokens.tolist(), example.weights.tolist(), strict=True):
        out.append(b"\x00" if weight else r.table.id_to_bytes[token])
    return b"".join(out).decode("utf-8", "replace")


@pytest.mark.parametrize("spec", SPECS, ids=repr)
@pytest.mark.usefixtures("fixed_clock")
def test_no_trained_token_holds_untrained_text(spec: Spec) -> None:
    """Independent of the writer's attribution: the text of every untrained (system,
    user, tool) message that the rendering shows exactly once is found whole among the
    untrained tokens, so no trained token holds part of it."""
    r = spec.renderer()
    for _, messages, tools in CONVERSATIONS:
        try:
            example = r.build_supervised_example(messages, tools=tools, train_on="all_assistant")
        except ValueError:
            continue
        full = r.decode(example.tokens.tolist())
        untrained = _untrained_text(r, example)
        for m in coerce_messages(messages):
            text = m.text.strip()
            if m.role == "assistant" or not text or full.count(text) != 1:
                continue
            assert text in untrained, (text, untrained)


def test_v31_assistant_turn_fused_with_system_text_is_refused() -> None:
    """Item 5: the template writes ``{system}{answer}`` with no marker when no user
    message comes first; the tokenizer merges ``s`` + ``a`` into one token. Rendered as
    the template does; training that turn is an error, never weight 1 on system text."""
    r = renderer("deepseek_v3.1", {})
    messages = [{"role": "system", "content": "s"}, {"role": "assistant", "content": "a"}]
    assert r.build_supervised_example(messages, train_on="all").tokens.tolist() == (
        deepseek_oracle(V31, messages, False)
    )
    with pytest.raises(ValueError, match=r"^messages\[1\]: deepseek_v3\.1's template writes"):
        r.build_supervised_example(messages)


def test_qwen3_thinking_off_trains_after_the_prompts_empty_think_block() -> None:
    """Item 4: with ``enable_thinking=False`` the trained turn follows the prompt's empty
    think block; its reasoning is refused (or dropped), and a turn the template writes
    without the block is refused."""
    r = renderer("qwen3", {"enable_thinking": False})
    official = _qwen3(False)
    q = {"role": "user", "content": "q"}
    turn = {"role": "assistant", "reasoning_content": "r", "content": "a"}
    with pytest.raises(ValueError, match=r"^messages\[1\]: qwen3 cannot write the reasoning"):
        r.build_supervised_example([q, turn])
    example = r.build_supervised_example([q, turn], reasoning="drop")
    plain = [q, {"role": "assistant", "content": "a"}]
    assert example.tokens.tolist() == official(plain, None, False)
    first = int(example.weights.argmax())
    assert example.tokens[:first].tolist() == official([q], None, True)
    with pytest.raises(ValueError, match=r"^messages\[1\]: qwen3 with enable_thinking=False"):
        r.build_supervised_example([{"role": "system", "content": "s"}, plain[1]])


def test_every_renderer_has_the_reasoning_option() -> None:
    from renderers.core.options import describe_options
    from renderers.registry import renderer_names

    assert set(renderer_names()) <= set(MODEL_IDS)
    for name in MODEL_IDS:
        cls = type(renderer(name, {}))
        option = {o.name: o for o in describe_options(cls.Options)}["reasoning"]
        assert option.type == "'error' | 'drop'" and option.default == "error", name
        assert "reasoning" in option.doc and "untrained" in option.doc.lower(), name
    # The template renderer (any other model) takes the same option, beside the template's.
    generic = TemplateRenderer(tokenizer_for("Qwen/Qwen3-8B"))
    option = {o.name: o for o in describe_options(TemplateRenderer.Options)}["reasoning"]
    assert option.type == "'error' | 'drop'" and option.default == "error"
    assert "reasoning" in generic.option_names
    assert "reasoning" in option.doc and "untrained" in option.doc.lower()
