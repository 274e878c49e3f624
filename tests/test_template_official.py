"""The template renderer on TRL's byte-exact copies of official chat templates
(``trl/chat_templates``, see its README), with real tokenizers: the Qwen3 vocabulary for
the Qwen line, gpt-oss's for gpt-oss, tml-renderers' Nemotron-3 and GLM tokenizers.

The oracle is the raw template rendered by transformers (``render_jinja_template`` after
its own message normalisation) and tokenized by the model's tokenizer:

- every generation prompt of every corpus conversation equals it;
- a trained turn (the conversation cut after it, ``last_assistant``) has the oracle's
  tokens, trained from the end of the oracle's generation prompt through the first stop
  token. Where the template's rendering of the conversation does not extend the
  generation prompt token by token, the turn is what the model samples after that prompt
  (as the specialised renderers train it): the prompt's ids, then the template's text
  after the prompt's text tokenized on its own (the prompt ends inside a token the turn's
  text shares, ``\\n\\n``), or after the point where the prompt's text goes on with
  whitespace the template's turn does not write (Nemotron-3's prompt opens ``<think>\\n``
  where the turn is written ``<think></think>``);
- a turn the template renders otherwise is refused, and so is a turn whose reasoning the
  template drops (the ``reasoning`` rule).

``summary()`` gives the counts per configuration (``python -m tests.test_template_official``).
"""

from __future__ import annotations

import datetime
import functools
import importlib.util
import json
import re
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from renderers import TextPart
from renderers.template import TemplateRenderer
from tests.conftest import tokenizer_for
from tests.corpus import CORPUS, TOOLS, Conversation, call, prompts_of
from tests.oracle import server_messages
from tests.test_qwen3 import template_input

QWEN = "Qwen/Qwen3-8B"
GPT_OSS = "openai/gpt-oss-20b"
NEMOTRON = "tml_renderers.tokenizers:Nemotron3Tokenizer"
GLM = "tml_renderers.tokenizers:GlmTokenizer"

STOPS = {
    QWEN: ("<|im_end|>",),
    NEMOTRON: ("<|im_end|>",),
    GPT_OSS: ("<|return|>", "<|call|>"),
    GLM: ("<|user|>", "<|observation|>", "<|endoftext|>"),
}
"""The tokens sampling stops at (the models' generation configs)."""


@dataclass(frozen=True, eq=False)
class Official:
    """One of TRL's official templates, the tokenizer it runs with and template options."""

    template: str
    tokenizer: str
    options: dict[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        opts = ",".join(f"{k}={v}" for k, v in self.options.items())
        return f"{self.template}[{opts}]" if opts else self.template


OFF = {"enable_thinking": False}
ON = {"enable_thinking": True}
CONFIGS = [
    Official("qwen2_5", QWEN),
    Official("qwen3", QWEN),
    Official("qwen3", QWEN, OFF),
    Official("qwen3_instruct_2507", QWEN),
    Official("qwen3_vl", QWEN),
    Official("qwen3_5_think", QWEN),
    Official("qwen3_5_think", QWEN, OFF),
    Official("qwen3_5_nothink", QWEN),
    Official("qwen3_6", QWEN),
    Official("qwen3_6", QWEN, OFF),
    Official("qwen3_8", QWEN),
    Official("qwen3_8", QWEN, OFF),
    Official("nemotron_3_nano", NEMOTRON),
    Official("nemotron_3_nano", NEMOTRON, OFF),
    Official("nemotron_3_super", NEMOTRON),
    Official("nemotron_3_super", NEMOTRON, OFF),
    Official("nemotron_3_ultra", NEMOTRON),
    Official("nemotron_3_ultra", NEMOTRON, OFF),
    Official("nemotron_3_5_lightning", NEMOTRON),
    Official("nemotron_3_5_lightning", NEMOTRON, OFF),
    Official("glm4moe", GLM),
    Official("glm4moe", GLM, OFF),
    Official("gptoss", GPT_OSS),
]

PARITY = [c for c in CORPUS if "adversarial" not in c.tags]


def trl_template(name: str) -> str:
    """``trl/chat_templates/{name}.jinja``, read without importing TRL (it imports
    PyTorch); the test skips where TRL (the integration extra) is missing."""
    found = importlib.util.find_spec("trl")
    if found is None or found.origin is None:
        pytest.skip("TRL (the integration extra) holds the official templates")
    return (Path(found.origin).parent / "chat_templates" / f"{name}.jinja").read_text("utf-8")


@functools.cache
def renderer_for(config: Official) -> TemplateRenderer:
    return TemplateRenderer(
        tokenizer_for(config.tokenizer), chat_template=trl_template(config.template)
    )


# -- the oracle ------------------------------------------------------------------------------


@contextmanager
def fixed_clock() -> Iterator[None]:
    """gpt-oss's template writes today's date: 2025-06-28 in transformers and here."""
    import transformers.utils.chat_template_utils as chat_template_utils

    import renderers.template.environment as template_environment

    class FixedDateTime(datetime.datetime):
        @classmethod
        def now(cls, tz: Any = None) -> FixedDateTime:
            return cls(2025, 6, 28, 12, 0, 0)

    saved = chat_template_utils.datetime, template_environment.datetime
    chat_template_utils.datetime = template_environment.datetime = FixedDateTime  # type: ignore[misc]
    try:
        yield
    finally:
        chat_template_utils.datetime, template_environment.datetime = saved  # type: ignore[misc]


def oracle_text(
    config: Official, messages: list[dict[str, Any]], tools: Any, generation: bool
) -> str:
    """What ``apply_chat_template(tokenize=False)`` renders: transformers' message
    normalisation and ``render_jinja_template``, each call's arguments an object (as vLLM
    hands them to a template, and as the template renderer reads arguments text:
    :class:`~renderers.template.environment.Arguments`)."""
    from transformers.utils.chat_template_utils import (
        _normalize_chat_messages,
        render_jinja_template,
    )

    def render(given: list[dict[str, Any]]) -> str:
        rendered, _ = render_jinja_template(
            [_normalize_chat_messages(template_input(given))],
            tools=tools,
            chat_template=trl_template(config.template),
            add_generation_prompt=generation,
            **config.options,
        )
        text: str = rendered[0]
        return text

    try:
        return render(server_messages(messages))
    except Exception as exc:  # the template refuses the conversation
        raise TemplateFails(f"{type(exc).__name__}: {exc}") from None


class TemplateFails(Exception):
    """The raw template fails on the conversation (the renderer must fail too)."""


def oracle_ids(config: Official, text: str) -> list[int]:
    """Template text tokenized as ``apply_chat_template(tokenize=True)`` does (the
    tml-renderers tokenizers: control spellings as control tokens, the rest ordinary)."""
    tok = tokenizer_for(config.tokenizer)
    if config.tokenizer in (NEMOTRON, GLM):
        from tests.tml_oracle import template_ids

        return template_ids(tok, text)
    ids: list[int] = tok.encode(text, add_special_tokens=False)
    return ids


@dataclass(frozen=True)
class Expected:
    """A trained turn as the oracle says: tokens and weights, or ``None`` (refused)."""

    tokens: list[int] | None
    weights: list[float] | None
    why: str = ""


def expected_turn(config: Official, conv: Conversation, t: int) -> Expected:
    """The oracle's example training turn ``t`` of ``conv`` cut after it (module docs)."""
    msgs = conv.messages[: t + 1]
    prompt_text = oracle_text(config, msgs[:t], conv.tools, True)
    full_text = oracle_text(config, msgs, conv.tools, False)
    prompt = oracle_ids(config, prompt_text)
    full = oracle_ids(config, full_text)
    if full[: len(prompt)] == prompt:
        tokens = full
    else:
        k = 0
        while k < min(len(prompt_text), len(full_text)) and prompt_text[k] == full_text[k]:
            k += 1
        if k < len(prompt_text) and prompt_text[k:].strip():
            return Expected(None, None, "prefix")
        tokens = prompt + oracle_ids(config, full_text[k:])
    tok = renderer_for(config)
    stops = {tok.table.control_id(s) for s in STOPS[config.tokenizer]}
    end = next((k + 1 for k in range(len(prompt), len(tokens)) if tokens[k] in stops), None)
    end = len(tokens) if end is None else end
    if end == len(prompt):
        return Expected(None, None, "the template writes nothing for the turn")
    weights = [1.0 if len(prompt) <= k < end else 0.0 for k in range(len(tokens))]
    return Expected(tokens, weights)


# -- measuring -------------------------------------------------------------------------------


def assistant_turns(conv: Conversation) -> list[int]:
    return [i for i, m in enumerate(conv.messages) if m["role"] == "assistant" and i > 0]


def prompt_outcome(config: Official, conv: Conversation, prompt: list[dict[str, Any]]) -> str:
    """``equal``, ``differ``, ``both fail`` or ``error: ...`` for one generation prompt."""
    try:
        expected = oracle_ids(config, oracle_text(config, prompt, conv.tools, True))
    except TemplateFails:
        expected = None
    try:
        ours = renderer_for(config).build_generation_prompt(prompt, conv.tools, **config.options)
    except ValueError as exc:
        return "both fail" if expected is None else f"error: {exc}"
    if expected is None:
        return "error: the template fails"
    return "equal" if ours == expected else "differ"


def turn_outcome(config: Official, conv: Conversation, t: int) -> str:
    """``equal``, ``refused: ...`` (as the oracle refuses, or for reasoning the template
    drops), ``differ``, ``wrongly refused: ...`` or ``wrongly trained``."""
    try:
        expected = expected_turn(config, conv, t)
    except TemplateFails:
        expected = Expected(None, None, "template fails")
    renderer = renderer_for(config)
    try:
        example = renderer.build_supervised_example(
            conv.messages[: t + 1], conv.tools, "last_assistant", **config.options
        )
    except ValueError as exc:
        why = str(exc)
        if expected.tokens is None or "drops" in why:
            return f"refused: {_kind(why)}"
        return f"wrongly refused: {_kind(why)}"
    if expected.tokens is None:
        return "wrongly trained"
    same = example.tokens.tolist() == expected.tokens and example.weights.tolist() == (
        expected.weights
    )
    return "equal" if same else "differ"


def _kind(error: str) -> str:
    return re.sub(r"messages\[\d+\]", "messages[i]", error)[:90]


def summary() -> dict[str, Counter[str]]:
    """Per configuration: generation prompts equal, trained turns equal, refused (and
    why), different."""
    out: dict[str, Counter[str]] = {}
    with fixed_clock():
        for config in CONFIGS:
            counts: Counter[str] = Counter()
            for conv in PARITY:
                for prompt in prompts_of(conv):
                    outcome = prompt_outcome(config, conv, prompt)
                    counts[f"prompt {outcome[:60]}"] += 1
                for t in assistant_turns(conv):
                    counts[f"turn {turn_outcome(config, conv, t)}"] += 1
            out[repr(config)] = counts
    return out


if __name__ == "__main__":
    for name, counts in summary().items():
        print(name)
        for key, n in sorted(counts.items()):
            print(f"  {n:4d} {key}")


# -- tests -----------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _fixed_clock() -> Iterator[None]:
    with fixed_clock():
        yield


@pytest.mark.parametrize("config", CONFIGS, ids=repr)
def test_generation_prompts_equal_the_official_template(config: Official) -> None:
    outcomes = Counter(
        prompt_outcome(config, conv, prompt) for conv in PARITY for prompt in prompts_of(conv)
    )
    assert set(outcomes) <= {"equal", "both fail"}, outcomes


@pytest.mark.parametrize("config", CONFIGS, ids=repr)
def test_every_trained_turn_is_the_official_templates_or_refused_as_it_says(
    config: Official,
) -> None:
    """Turns without reasoning included where the prompt opens the reasoning (Qwen3.5/3.6/
    3.8 and Nemotron-3 with thinking on): trained as the model samples them."""
    outcomes = Counter(
        turn_outcome(config, conv, t) for conv in PARITY for t in assistant_turns(conv)
    )
    wrong = {k: n for k, n in outcomes.items() if k != "equal" and not k.startswith("refused")}
    assert not wrong, outcomes


THINKING_ON = [
    c
    for c in CONFIGS
    if c.template.startswith(("qwen3_5_think", "qwen3_6", "qwen3_8", "nemotron"))
    and c.options != OFF
]


@pytest.mark.parametrize("config", THINKING_ON, ids=repr)
def test_inspect_reports_each_probe_with_and_without_reasoning(config: Official) -> None:
    """Where the prompt opens the reasoning, turns without it are trainable too, and
    ``renderers inspect`` says so per case."""
    from renderers.cli.inspect import report

    renderer = renderer_for(config)
    outcomes = report(renderer, renderer, True)["untrained_prefix"]
    assert outcomes and all(
        cases == {"reasoning": "yes", "no reasoning": "yes"} for cases in outcomes.values()
    ), outcomes


def _role_before(tokens: list[int], k: int, roles: dict[int, str]) -> str | None:
    return next((roles[t] for t in reversed(tokens[:k]) if t in roles), None)


@pytest.mark.parametrize("config", [c for c in CONFIGS if c.tokenizer == GLM], ids=repr)
def test_glm_history_turns_are_trained_through_the_next_turns_header(config: Official) -> None:
    """GLM writes no end of turn: sampling stops at the next turn's ``<|user|>`` or
    ``<|observation|>`` (its generation config's end-of-sequence tokens), inferred from the
    template, so a history turn under ``all_assistant`` is trained with it."""
    renderer = renderer_for(config)
    table = renderer.table
    stops = {table.control_id(s) for s in ("<|user|>", "<|observation|>")}
    assert set(renderer.stop_token_ids) == stops
    roles = {
        table.control_id(f"<|{r}|>"): r for r in ("system", "user", "assistant", "observation")
    }
    trained_ends = 0
    for conv in PARITY:
        if len(assistant_turns(conv)) < 2:
            continue
        try:
            example = renderer.build_supervised_example(
                conv.messages, conv.tools, "all_assistant", reasoning="drop", **config.options
            )
        except ValueError:  # reasoning in a trained turn with thinking off
            continue
        tokens = example.tokens.tolist()
        for k, token in enumerate(tokens):
            if token in stops:  # the end of an assistant turn is trained, of others not
                by_assistant = _role_before(tokens, k, roles) == "assistant"
                assert example.weights[k] == float(by_assistant), (conv.id, k)
                trained_ends += by_assistant
    assert trained_ends


# -- parsing what the template writes ----------------------------------------------------------


def sampled(config: Official, messages: list[dict[str, Any]], tools: Any) -> list[int]:
    """The oracle's tokens the model samples for the conversation's last turn."""
    expected = expected_turn(config, Conversation("probe", messages, tools), len(messages) - 1)
    assert expected.tokens is not None and expected.weights is not None
    return [t for t, w in zip(expected.tokens, expected.weights, strict=True) if w]


def parsed(config: Official, ids: list[int]) -> Any:
    """The parse of sampled ids, the same fed one token at a time (streaming is batch)."""
    renderer = renderer_for(config)
    result = renderer.parse_response(ids, **config.options)
    stream = renderer.stream_parser(**config.options)
    for token in ids:
        stream.feed([token])
    streamed = stream.finish()
    assert streamed.message == result.message
    return result.message


NEMOTRON_ON = [c for c in THINKING_ON if c.tokenizer == NEMOTRON]
XML_CALLS = [c for c in CONFIGS if c.template.startswith(("qwen3_5", "qwen3_6", "qwen3_8", "nem"))]
USER = {"role": "user", "content": "Weather in Paris?"}


@pytest.mark.parametrize("config", NEMOTRON_ON, ids=repr)
def test_nemotron_call_turns_parse_without_the_newline_before_the_end_of_turn(
    config: Official,
) -> None:
    """The template writes ``</tool_call>\\n<|im_end|>``: the newline is the format's, not
    a text part after the calls."""
    calls = [call("get_weather", {"city": c}, f"c{k}") for k, c in enumerate(["Paris", "Rome"])]
    for turn in (
        {"role": "assistant", "content": "", "tool_calls": calls[:1]},
        {"role": "assistant", "content": "Checking.", "tool_calls": calls},
        {"role": "assistant", "content": "", "reasoning_content": "Look.", "tool_calls": calls},
    ):
        ids = sampled(config, [USER, turn], TOOLS)
        message = parsed(config, ids)
        kinds = [type(p).__name__ for p in message.parts]
        first = kinds.index("ToolCallPart")
        assert kinds[first:] == ["ToolCallPart"] * len(turn["tool_calls"])
        assert message.text == turn["content"]
        # Cut off before <|im_end|>, the newline may begin more text: it is kept.
        assert parsed(config, ids[:-1]).parts[-1] == TextPart("\n", incomplete=True)


@pytest.mark.parametrize("config", NEMOTRON_ON, ids=repr)
@pytest.mark.parametrize("reasoning", ["Think.\n", "Think.\n\n", "\nThink.", "Think."])
def test_nemotron_reasoning_parses_back_with_its_newlines(config: Official, reasoning: str) -> None:
    """Ultra and Lightning write ``<think>\\n{reasoning}</think>`` (Nano and Super
    ``<think>\\n{reasoning}\\n</think>\\n``): the padding is what the template adds, no more."""
    turn = {"role": "assistant", "content": "Sunny.", "reasoning_content": reasoning}
    ids = sampled(config, [USER, turn], None)
    message = parsed(config, ids)
    assert (message.thinking, message.text) == (reasoning, "Sunny.")


@pytest.mark.parametrize("config", XML_CALLS, ids=repr)
def test_python_spelled_scalars_parse_back_as_json_values(config: Official) -> None:
    """Qwen3.5 and Nemotron-3 write a true, false or null argument as ``True``, ``False``,
    ``None`` (``|string``); it parses back as the JSON value, whichever way it is written."""
    arguments = {"flag": True, "off": False, "nothing": None, "n": 3, "city": "Paris"}
    turn = {"role": "assistant", "content": "", "tool_calls": [call("search", arguments, "c1")]}
    ids = sampled(config, [USER, turn], TOOLS)
    (part,) = parsed(config, ids).tool_calls
    assert json.loads(part.arguments) == arguments


@pytest.mark.parametrize("config", CONFIGS, ids=repr)
@pytest.mark.parametrize("content", [None, ""])
def test_a_call_turn_without_text_renders_as_empty_text(config: Official, content: Any) -> None:
    """``content: None`` on a call turn is empty text (the degenerate-input rule): the
    template's rendering of ``content: ""``, which transformers 5.23+ also renders (it drops
    the ``None``; 5.0-5.22 pass it, and GLM-4-MoE's template writes ``None``)."""
    turn = {"role": "assistant", "content": content, "tool_calls": [call("search", {}, "c1")]}
    messages = [USER, turn, {"role": "tool", "tool_call_id": "c1", "content": "Sunny"}]
    rule = [USER, {**turn, "content": ""}, messages[2]]
    expected = oracle_ids(config, oracle_text(config, rule, TOOLS, True))
    ours = renderer_for(config).build_generation_prompt(messages, TOOLS, **config.options)
    assert ours == expected
