"""One example per trained turn where a format does not extend (issue 31, item 1):
``build_supervised_examples`` against the official templates.

Every example is the official template's rendering of the conversation or of the
conversation cut after a turn; each turn is trained in exactly one of them, after the
official generation prompt of the messages before it (or the documented exception of its
format, asserted exactly by the checker tests/test_properties.py has for it). Formats whose
history extends give one example, the singular method's. Expected ids come from the
official templates (tests/oracle.py, via the per-model test helpers) and openai-harmony.
"""

from __future__ import annotations

import pickle
import re
from typing import Any

import numpy as np
import pytest

from renderers import SupervisedExample, get_renderer
from renderers.core.messages import coerce_messages
from renderers.rendering import Renderer
from renderers.template import TemplateRenderer
from tests.conftest import tokenizer_for
from tests.corpus import SYS, call, result
from tests.oracle import hf_template_ids
from tests.test_gpt_oss import Conversation, harmony_conversation, oh
from tests.test_properties import (
    gpt_oss_template_prefix,
    prompt_equals,
    v3_template_prefix,
)
from tests.test_reasoning_policy import TOOLS, VARIANTS, Oracle, renderer

CHECKERS = {"deepseek_v3": v3_template_prefix, "gpt_oss": gpt_oss_template_prefix}
"""The formats whose untrained prefix documentedly differs from the generation prompt in
some cases (each checker asserts exactly what it is then)."""

Messages = list[dict[str, Any]]

ASK = {"role": "user", "content": "Weather in Paris and Lyon?"}
CALLS = {
    "role": "assistant",
    "content": "",
    "reasoning_content": "Two cities: two calls.",
    "tool_calls": [
        call("get_weather", {"city": "Paris"}, "c1"),
        call("get_weather", {"city": "Lyon"}, "c2"),
    ],
}
RESULTS = [result("c1", "18 C", "get_weather"), result("c2", "21 C", "get_weather")]
ANSWER = {"role": "assistant", "content": "18 C and 21 C.", "reasoning_content": "Report."}
CONVERSATIONS: dict[str, Messages] = {
    "chat": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "How are you?"},
        {"role": "assistant", "content": "Fine, thanks."},
        {"role": "user", "content": "Bye"},
        {"role": "assistant", "content": "Goodbye."},
    ],
    "reasoning_history": [
        {"role": "user", "content": "Is 17 prime?"},
        {"role": "assistant", "content": "Yes.", "reasoning_content": "No divisor up to 4."},
        {"role": "user", "content": "And 21?"},
        {"role": "assistant", "content": "No.", "reasoning_content": "21 = 3 x 7."},
    ],
    "agent": [
        SYS,
        ASK,
        CALLS,
        *RESULTS,
        ANSWER,
        {"role": "user", "content": "And Rome?"},
        {
            "role": "assistant",
            "content": "",
            "reasoning_content": "One call.",
            "tool_calls": [call("get_weather", {"city": "Rome"}, "c3")],
        },
        result("c3", "25 C", "get_weather"),
        {"role": "assistant", "content": "25 C.", "reasoning_content": "Done."},
    ],
}


def _without_reasoning(messages: Messages) -> Messages:
    return [{k: v for k, v in m.items() if k != "reasoning_content"} for m in messages]


def _assistants(messages: Messages) -> list[int]:
    return [i for i, m in enumerate(messages) if m["role"] == "assistant"]


class _WithTools:
    """A renderer whose generation prompts declare ``tools`` (the prefix checkers of
    tests/test_properties.py build prompts without tools)."""

    def __init__(self, renderer: Renderer, tools: Any) -> None:
        self.renderer, self.tools = renderer, tools

    def build_generation_prompt(self, messages: Any, tools: Any = None, **options: Any) -> Any:
        return self.renderer.build_generation_prompt(messages, self.tools, **options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.renderer, name)


def _first_trained(example: SupervisedExample, turn: int) -> int:
    indices = example.message_indices
    assert indices is not None
    trained = np.flatnonzero((indices == turn) & (example.weights > 0))
    return int(trained[0])


# Official oracles of the whole rendering (the 2026 families' oracle trains the last turn
# only; their prompts are checked by tests/test_reasoning_policy.py). Kimi-K2's official
# templates are being followed in renderers/kimi_k2.py: its examples are held to the
# properties of tests/test_sampled_runs.py here.
ORACLED = [v for v in VARIANTS if v[0] in ("qwen3", "deepseek_v3", "deepseek_v3.1", "gpt_oss")]
# The variants that write a trained turn's reasoning (the others refuse it, each case
# covered by tests/test_reasoning_policy.py): their conversations keep it.
WRITES_REASONING = {("qwen3", ()), ("gpt_oss", (("date", "2025-06-28"),))}


@pytest.mark.parametrize(
    ("name", "options", "official"),
    ORACLED,
    ids=[n + "".join(f"-{k}={v}" for k, v in o.items()) for n, o, _ in ORACLED],
)
@pytest.mark.parametrize("conversation", list(CONVERSATIONS), ids=str)
@pytest.mark.usefixtures("fixed_clock")
def test_each_example_is_the_template_rendering_and_trains_its_turns_after_their_prompts(
    name: str, options: dict[str, Any], official: Oracle, conversation: str
) -> None:
    r = renderer(name, options)
    messages = CONVERSATIONS[conversation]
    if (name, tuple(sorted(options.items()))) not in WRITES_REASONING:
        messages = _without_reasoning(messages)
    tools = TOOLS if any(m.get("tool_calls") for m in messages) else None
    try:
        examples = r.build_supervised_examples(
            messages, tools, train_on="all_assistant", attribution=True
        )
    except ValueError as exc:
        # A turn that cannot be trained even as the last one (DeepSeek-V3's documented
        # header-less call turn, whose first token holds the user's text): refused as the
        # singular method refuses its cut conversation.
        turn = int(str(exc).split("]")[0].removeprefix("messages["))
        with pytest.raises(ValueError, match=re.escape(str(exc))):
            r.build_supervised_example(messages[: turn + 1], tools)
        return
    turns = [t for e in examples for t in e.turns]
    assert sorted(turns) == turns == _assistants(messages)  # each turn once, in order
    msgs = coerce_messages(messages)
    check = CHECKERS.get(name, prompt_equals)
    for example in examples:
        cut = example.num_messages
        assert cut is not None and example.turns
        # Documented divergence: the gpt-oss template renders one call per message.
        parity = name != "gpt_oss" or all(len(m.tool_calls) < 2 for m in msgs[:cut])
        if parity:
            assert example.tokens.tolist() == official(messages[:cut], tools, False)
        if cut < len(messages):
            assert cut - 1 == example.turns[-1]  # a cut conversation ends with its turn
        for t in example.turns:
            first = _first_trained(example, t)
            tokens = example.tokens.tolist()
            prefix = tokens[:first]
            if name == "deepseek_v3.1" and options.get("thinking"):
                # Documented (module docs, test_v31_thinking_history_is_written_as_...):
                # turns are written as non-thinking history, </think> for the prompt's
                # <think> after a user message.
                prompt = official(messages[:t], tools, True)
                if msgs[t - 1].role == "user":
                    think, think_end = (r.table.control_id(x) for x in ("<think>", "</think>"))
                    assert prompt[-1] == think
                    prompt = [*prompt[:-1], think_end]
                assert prefix == prompt
                continue
            # The renderer's prompts are the official ones; the prefix is that prompt or
            # the documented exception (asserted exactly by the checker).
            if parity:
                prompt = r.build_generation_prompt(msgs[:t], tools)
                assert prompt == official(messages[:t], tools, True)
            check(_WithTools(r, tools), msgs[: t + 1], prefix, tokens[first:])


@pytest.mark.usefixtures("fixed_clock")
def test_qwen3_thinking_off_trains_every_turn_of_a_multi_turn_conversation() -> None:
    """The template writes history turns without the empty think block their prompt ends
    with: one example refuses every earlier turn, the examples train each after its
    official prompt (the block untrained, the answer and <|im_end|> trained)."""
    r = renderer("qwen3", {"enable_thinking": False})
    tok = tokenizer_for("Qwen/Qwen3-8B")

    def official(messages: Messages, gen: bool) -> list[int]:
        return hf_template_ids(tok, messages, add_generation_prompt=gen, enable_thinking=False)

    messages = CONVERSATIONS["chat"]
    with pytest.raises(ValueError, match=r"^messages\[1\]: qwen3 with enable_thinking=False"):
        r.build_supervised_example(messages, train_on="all_assistant")
    examples = r.build_supervised_examples(messages, train_on="all_assistant")
    assert [e.turns for e in examples] == [(1,), (3,), (5,)]
    for example, t in zip(examples, (1, 3, 5), strict=True):
        full = official(messages[: t + 1], False)
        prompt = official(messages[:t], True)
        assert example.tokens.tolist() == full and full[: len(prompt)] == prompt
        trained = example.tokens[example.weights > 0].tolist()
        assert example.weights[: len(prompt)].sum() == 0
        # The answer and <|im_end|>; the template's "\n" after it is not sampled.
        assert r.decode(trained) == messages[t]["content"] + "<|im_end|>"
        assert full[len(prompt) : len(prompt) + len(trained)] == trained
    # The same examples from the template renderer running the official template.
    generic = TemplateRenderer(tokenizer_for("Qwen/Qwen3-8B"), enable_thinking=False)
    for mine, theirs in zip(
        examples, generic.build_supervised_examples(messages, train_on="all_assistant"), strict=True
    ):
        assert mine.tokens.tolist() == theirs.tokens.tolist()
        assert mine.weights.tolist() == theirs.weights.tolist()
        assert mine.turns == theirs.turns


def test_qwen3_turns_that_extend_together_share_an_example() -> None:
    """Qwen3 keeps the reasoning of turns after the last user message: the calls and the
    answer of one exchange are one example, each exchange before it another."""
    r = get_renderer("qwen3", tokenizer_for("Qwen/Qwen3-8B"))
    messages = CONVERSATIONS["agent"]
    with pytest.raises(ValueError, match=r"^messages\[2\]: .*reasoning='drop'"):
        r.build_supervised_example(messages, tools=TOOLS, train_on="all_assistant")
    examples = r.build_supervised_examples(messages, tools=TOOLS, train_on="all_assistant")
    assert [(e.turns, e.num_messages) for e in examples] == [((2, 5), 6), ((7, 9), 10)]
    # Nothing dropped: every turn's reasoning is trained.
    for example in examples:
        trained = r.decode(example.tokens[example.weights > 0].tolist())
        for t in example.turns:
            assert messages[t]["reasoning_content"] in trained
    # The last exchange alone is the singular example of the whole conversation's last turn.
    last = r.build_supervised_example(messages, tools=TOOLS, train_on="last_assistant_turn")
    assert examples[-1].tokens.tolist() == last.tokens.tolist()
    assert examples[-1].weights.tolist() == last.weights.tolist()


@pytest.mark.parametrize(
    ("name", "model_id", "options", "tools"),
    [
        ("deepseek_v3.1", "deepseek-ai/DeepSeek-V3.1", {}, None),
        ("deepseek_v3", "deepseek-ai/DeepSeek-V3", {"fix_tool_format": True}, None),
        # With tools declared, DeepSeek-V4 keeps the think blocks of history turns.
        ("deepseek_v4", "deepseek-ai/DeepSeek-V4-Pro", {}, TOOLS),
        ("deepseek_v4.1", "deepseek-ai/DeepSeek-V4.1-Flash", {}, TOOLS),
    ],
)
def test_a_conversation_that_extends_is_one_example_the_singular_one(
    name: str, model_id: str, options: dict[str, Any], tools: Any
) -> None:
    r = get_renderer(name, tokenizer_for(model_id), **options)
    messages = _without_reasoning(CONVERSATIONS["chat"])
    (example,) = r.build_supervised_examples(messages, tools, train_on="all_assistant")
    single = r.build_supervised_example(messages, tools, train_on="all_assistant")
    assert example.tokens.tolist() == single.tokens.tolist()
    assert example.weights.tolist() == single.weights.tolist()
    assert example.turns == (1, 3, 5) and example.num_messages == len(messages)
    if tools is not None:  # without tools its history drops them: one example per turn
        split = r.build_supervised_examples(messages, train_on="all_assistant")
        assert [e.turns for e in split] == [(1,), (3,), (5,)]


def test_gpt_oss_harmony_dialect_examples_equal_openai_harmony() -> None:
    """openai-harmony drops the analysis of turns before the last final answer: each answer
    with its reasoning is its own example, openai-harmony's prompt of the conversation
    before it plus that turn's training rendering."""
    r = renderer("gpt_oss", {"date": "2025-06-28"})
    encoding = oh.load_harmony_encoding(oh.HarmonyEncodingName.HARMONY_GPT_OSS)
    messages = CONVERSATIONS["reasoning_history"]
    with pytest.raises(ValueError, match=r"^messages\[1\]: gpt_oss .*reasoning='drop'"):
        r.build_supervised_example(messages, train_on="all_assistant", dialect="harmony")
    examples = r.build_supervised_examples(messages, train_on="all_assistant", dialect="harmony")
    assert [e.turns for e in examples] == [(1,), (3,)]
    for example in examples:
        cut = example.num_messages
        assert cut is not None
        head, body = harmony_conversation(Conversation("cut", messages[:cut]))
        prompt = encoding.render_conversation_for_completion(
            oh.Conversation.from_messages(head + [m for turn in body[:-1] for m in turn]),
            oh.Role.ASSISTANT,
        )
        tail = encoding.render_conversation_for_training(
            oh.Conversation.from_messages(body[-1]),
            oh.RenderConversationConfig(auto_drop_analysis=False),
        )
        assert example.tokens.tolist() == [*prompt, *tail[2:]]
        first = int(np.argmax(example.weights))
        assert example.tokens[:first].tolist() == list(prompt)
        assert example.weights[first:].all()  # the turn's reasoning and answer, to <|return|>


def test_gpt_oss_parallel_calls_train_each_call_after_its_own_prompt() -> None:
    """The model stops at each <|call|>: the next call is sampled after a new prompt,
    ``<|start|>assistant``, which is not trained (the template's tokens are unchanged)."""
    r = renderer("gpt_oss", {"date": "2025-06-28"})
    messages: Messages = [ASK, CALLS]
    example = r.build_supervised_example(messages, tools=TOOLS)
    tokens = example.tokens.tolist()
    call_id, start = r.table.control_id("<|call|>"), r.table.control_id("<|start|>")
    first_call = tokens.index(call_id)
    assert tokens[first_call + 1] == start
    assert (
        example.weights[first_call] == 1
        and example.weights[first_call + 1 : first_call + 3].sum() == 0
    )
    # The second call's untrained prefix is the prompt after the first call.
    after = r.build_generation_prompt(
        [ASK, {**CALLS, "tool_calls": CALLS["tool_calls"][:1]}], TOOLS
    )
    assert tokens[: first_call + 3] == after
    second = tokens[first_call + 3 :]
    parsed = r.parse_response(second)
    assert [c.parsed_arguments() for c in parsed.message.tool_calls] == [{"city": "Lyon"}]
    assert parsed.stop_token_id == call_id and example.weights[first_call + 3 :].all()


def test_train_on_all_trains_every_message_once_and_template_text_in_the_whole_example() -> None:
    r = get_renderer("qwen3", tokenizer_for("Qwen/Qwen3-8B"), enable_thinking=False)
    messages = CONVERSATIONS["chat"]
    examples = r.build_supervised_examples(messages, train_on="all", attribution=True)
    assert [(e.turns, e.num_messages) for e in examples] == [((1,), 2), ((3,), 4), ((5,), 6)]
    trained_by_message: dict[int, int] = {}
    for example in examples:
        assert example.message_indices is not None
        for i in set(example.message_indices[example.weights > 0].tolist()):
            trained_by_message[i] = trained_by_message.get(i, 0) + 1
    assert trained_by_message == {i: 1 for i in range(len(messages))}  # users once too
    # Each turn trained whole (its header too), after an untrained prefix in the cut ones.
    for example, t in zip(examples[:-1], (1, 3), strict=True):
        assert example.message_indices is not None
        assert (example.weights > 0).tolist() == (example.message_indices == t).tolist()


def test_message_weights_and_roles_are_kept_and_trained_once(qwen3_tokenizer: Any) -> None:
    r = get_renderer("qwen3", qwen3_tokenizer, enable_thinking=False)
    messages = [dict(m) for m in CONVERSATIONS["chat"]]
    messages[3]["weight"] = 0.5
    messages[1]["train"] = False
    messages[2]["weight"] = 1.0  # a user message, trained whole
    examples = r.build_supervised_examples(messages, train_on="all_assistant", attribution=True)
    assert [e.turns for e in examples] == [(3,), (5,)]
    first = examples[0]
    assert first.message_indices is not None
    assert set(first.weights[first.message_indices == 3].tolist()) == {0.0, 0.5}
    # The user message is trained in the whole conversation's example only.
    assert examples[1].num_messages == len(messages)
    assert examples[1].weights[examples[1].message_indices == 2].min() == 1.0  # type: ignore[operator]
    assert not first.weights[first.message_indices == 2].any()


def test_examples_pickle_with_their_turns() -> None:
    r = renderer("qwen3", {"enable_thinking": False})
    for example in r.build_supervised_examples(CONVERSATIONS["chat"], train_on="all_assistant"):
        back = pickle.loads(pickle.dumps(example))
        assert (back.turns, back.num_messages) == (example.turns, example.num_messages)
        assert back.tokens.tolist() == example.tokens.tolist()


def test_a_turn_that_cannot_be_trained_even_last_is_refused_as_by_the_singular_method() -> None:
    r: Renderer = renderer("qwen3", {"enable_thinking": False})
    messages = CONVERSATIONS["reasoning_history"]
    pattern = r"^messages\[1\]: qwen3 cannot write the reasoning of this trained turn"
    with pytest.raises(ValueError, match=pattern):
        r.build_supervised_example(messages[:2])
    with pytest.raises(ValueError, match=pattern):
        r.build_supervised_examples(messages, train_on="all_assistant")
    dropped = r.build_supervised_examples(messages, train_on="all_assistant", reasoning="drop")
    assert [e.turns for e in dropped] == [(1,), (3,)]
