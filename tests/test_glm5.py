"""GLM-5.2, GLM-5.3 and GLM-5.3-Flash against tml-renderers 0.2.1 (``Glm52``, ``Glm53``,
``Glm53Flash``; the official GLM-5 templates are not available here) on the shared
corpus, and the format's own behaviour.

Where the renderer documentedly differs from tml (``renderers/glm5.py``), the comparison
undoes exactly that difference: tml sorts a tool schema's ``properties`` (we keep the
given order: the tools given to us are sorted for the comparison), and tml ends the
trained last turn with ``<|endoftext|>`` (we with the role token the model samples next).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from renderers import Termination, TextPart, ThinkingPart, ToolCallPart, get_renderer
from renderers.glm5 import Glm52Renderer
from tests.conftest import tokenizer_for
from tests.corpus import CORPUS, TOOLS, Conversation, prompts_of

pytest.importorskip("tml_renderers")

import torch  # noqa: F401  (tml-renderers needs PyTorch loaded first)
from tml_renderers import renderers as tml

from tests.tml_oracle import (
    OracleConfig,
    our_items,
    parsed_items,
    prompt_ids,
    supervised_ids,
)

SOURCE = "tml_renderers.tokenizers:GlmTokenizer"
EXCLUDED = {"parts", "adversarial"}  # list content; control-token spellings in text
CORPUS_USED = [c for c in CORPUS if not c.tags & EXCLUDED]
ANSWERED = [c for c in CORPUS_USED if c.messages[-1]["role"] == "assistant"]


@dataclass(frozen=True)
class Config:
    name: str
    options: dict[str, Any]
    make: Callable[[], Any]

    def __repr__(self) -> str:
        return self.name + "".join(f"-{k}={v}" for k, v in self.options.items())

    def oracle(self) -> OracleConfig:
        return OracleConfig(self.name, SOURCE, self.options, self.make, repr(self))


CONFIGS = [
    Config("glm5.2", {}, lambda: tml.Glm52()),
    Config("glm5.2", {"reasoning_effort": "high"}, lambda: tml.Glm52.high()),
    Config("glm5.3", {}, lambda: tml.Glm53.preserve_thinking_history()),
    Config("glm5.3", {"clear_thinking": True}, lambda: tml.Glm53()),
    Config(
        "glm5.3",
        {"reasoning_effort": "low", "clear_thinking": True},
        lambda: tml.Glm53.low(),
    ),
    Config("glm5.3_flash", {"clear_thinking": True}, lambda: tml.Glm53Flash()),
]


def tokenizer() -> Any:
    return tokenizer_for(SOURCE)


def renderer(config: Config) -> Glm52Renderer:
    r = get_renderer(config.name, tokenizer(), **config.options)
    assert isinstance(r, Glm52Renderer)
    return r


def sorted_properties(tools: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """The tools with each schema's ``properties`` in sorted order (tml's order)."""
    if not tools:
        return tools
    tools = copy.deepcopy(tools)
    for tool in tools:
        parameters = tool["function"].get("parameters", {})
        if "properties" in parameters:
            parameters["properties"] = dict(sorted(parameters["properties"].items()))
    return tools


@pytest.mark.parametrize("config", CONFIGS, ids=repr)
@pytest.mark.parametrize("conversation", CORPUS_USED, ids=repr)
def test_generation_prompts_equal_tml_renderers(config: Config, conversation: Conversation) -> None:
    r = renderer(config)
    tools = conversation.tools
    for prompt in prompts_of(conversation):
        expected = prompt_ids(config.oracle(), prompt, tools)
        assert r.build_generation_prompt(prompt, sorted_properties(tools)) == expected


def test_tool_schemas_keep_their_key_order() -> None:
    r = renderer(CONFIGS[2])
    text = r.decode(r.build_generation_prompt([{"role": "user", "content": "q"}], TOOLS))
    line = json.dumps(TOOLS[1]["function"], ensure_ascii=False)
    assert "<tools>\n" + json.dumps(TOOLS[0]["function"], ensure_ascii=False) + "\n" + line in text


@pytest.mark.parametrize("config", CONFIGS, ids=repr)
@pytest.mark.parametrize("conversation", ANSWERED, ids=repr)
def test_supervised_examples_equal_tml_renderers_but_the_end_token(
    config: Config, conversation: Conversation
) -> None:
    """The oracle's example trained on the last turn, with its ``<|endoftext|>`` replaced by
    the role token the model samples next (``<|observation|>`` after calls)."""
    r = renderer(config)
    msgs, tools = conversation.messages, conversation.tools
    ids, weights = supervised_ids(config.oracle(), msgs, tools)
    assert ids[-1] == r.end_of_text
    end = r.observation if msgs[-1].get("tool_calls") else r.user
    example = r.build_supervised_example(msgs, sorted_properties(tools))
    assert example.tokens.tolist() == [*ids[:-1], end]
    assert example.weights.tolist() == weights


@pytest.mark.parametrize("config", CONFIGS, ids=repr)
def test_trained_turns_parse_as_tml_renderers_parses_them(config: Config) -> None:
    """Both parsers read each trained completion into the same reasoning, text and calls
    (tml given its own end token); ours with no issue, ending at the stop token, and the
    same when streamed in two pieces at any cut."""
    r = renderer(config)
    compared = 0
    for conversation in ANSWERED:
        msgs, tools = conversation.messages, conversation.tools
        example = r.build_supervised_example(msgs, tools)
        weights = example.weights.tolist()
        completion = example.tokens.tolist()[weights.index(1.0) :]
        result = r.parse_response(completion)
        assert result.termination is Termination.STOP and not result.issues, conversation.id
        for cut in range(0, len(completion) + 1, max(1, len(completion) // 25)):
            parser = r.stream_parser()
            parser.feed(completion[:cut])
            parser.feed(completion[cut:])
            assert parser.finish() == result, (conversation.id, cut)
        ours = our_items(result.message)
        if not ours:
            continue  # tml refuses a completion without content
        oracle_completion = [*completion[:-1], r.end_of_text]
        assert parsed_items(config.oracle(), msgs[:-1], tools, oracle_completion) == ours
        compared += 1
    assert compared >= 25


# -- the format's own behaviour ----------------------------------------------------------------


def test_a_call_parses_in_place_with_json_values_and_string_values() -> None:
    r = renderer(CONFIGS[2])
    arguments = {"q": "Zürich", "n": 3, "flag": True, "none": None, "deep": {"a": [1]}, "s": "x y"}
    msgs: list[dict[str, Any]] = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": "Let me look.",
            "reasoning_content": "Think.",
            "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": arguments}}],
        },
    ]
    example = r.build_supervised_example(msgs, TOOLS)
    weights = example.weights.tolist()
    completion = example.tokens.tolist()[weights.index(1.0) :]
    assert completion[-1] == r.observation
    parsed = r.parse_response(completion).message
    assert [type(p) for p in parsed.parts] == [ThinkingPart, TextPart, ToolCallPart]
    assert json.loads(parsed.tool_calls[0].arguments) == arguments


def test_each_stop_token_ends_the_message_and_end_of_text_is_eos() -> None:
    r = renderer(CONFIGS[2])
    body = [*r.table.encode("r"), r.think_end, *r.table.encode("a")]
    assert r.parse_response([*body, r.user]).termination is Termination.STOP
    assert r.parse_response([*body, r.observation]).termination is Termination.STOP
    assert r.parse_response([*body, r.end_of_text]).termination is Termination.EOS
    malformed = r.parse_response([*body, r.assistant, *r.table.encode("b")])
    assert malformed.termination is Termination.MALFORMED
    assert malformed.trailing_text == "<|assistant|>b"  # nothing sampled is lost


def test_a_call_off_the_grammar_is_kept_verbatim() -> None:
    r = renderer(CONFIGS[2])
    ids = [*r.table.encode("r"), r.think_end, r.tool_call, *r.table.encode("f"), r.arg_key]
    ids += [*r.table.encode("k"), r.arg_key_end, *r.table.encode("junk"), r.tool_call_end, r.user]
    parts = r.parse_response(ids).message.parts
    assert type(parts[-1]).__name__ == "UnparsedToolCallPart"
    assert parts[-1].raw == "f<arg_key>k</arg_key>junk"  # type: ignore[union-attr]


def test_cleared_reasoning_of_a_trained_turn_is_refused_or_dropped() -> None:
    msgs = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": "b", "reasoning_content": "r"},
        {"role": "user", "content": "c"},
    ]
    cleared = renderer(CONFIGS[3])
    with pytest.raises(ValueError, match=r"^messages\[1\]: glm5.3 cannot write the reasoning"):
        cleared.build_supervised_example(msgs, train_on="all_assistant")
    dropped = cleared.build_supervised_example(msgs, train_on="all_assistant", reasoning="drop")
    prompt = cleared.build_generation_prompt(msgs[:1])
    assert dropped.tokens.tolist()[: len(prompt)] == prompt
    # The trained turn ends with the next message's role token, trained with it.
    tokens, weights = dropped.tokens.tolist(), dropped.weights.tolist()
    end = tokens.index(cleared.user, len(prompt))
    assert weights[end] == 1.0 and weights[end + 1] == 0.0
    kept = renderer(CONFIGS[2]).build_supervised_example(msgs, train_on="all_assistant")
    assert "<think>r</think>b" in renderer(CONFIGS[2]).decode(kept.tokens.tolist())


def test_random_ids_never_crash_and_stream_as_in_one_shot() -> None:
    import random

    r = renderer(CONFIGS[2])
    rng = random.Random(11)
    pool = [
        r.think,
        r.think_end,
        r.tool_call,
        r.tool_call_end,
        r.arg_key,
        r.arg_key_end,
        r.arg_value,
        r.arg_value_end,
        r.assistant,
        r.user,
        *r.table.encode('a b 1 {"x": true} é'),
    ]
    for _ in range(200):
        ids = [rng.choice(pool) for _ in range(rng.randrange(1, 30))]
        result = r.parse_response(ids)
        parser = r.stream_parser()
        for t in ids:
            parser.feed([t])
        assert parser.finish() == result


def test_models_lists_each_variant_with_its_tokenizer_source() -> None:
    import io
    from argparse import Namespace

    from renderers.cli.models import run

    for name in ("glm5.2", "glm5.3", "glm5.3_flash"):
        out = io.StringIO()
        run(Namespace(name=name), out)
        assert f"  tokenizer: {SOURCE}\n" in out.getvalue()
        assert "clear_thinking: bool" in out.getvalue()
