"""Loss-mask expressiveness, checked against the official Qwen3 template: its
``{% generation %}``-tagged version marks what the model samples, and renderings of
conversation prefixes mark where each message ends."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from renderers import Message, TrainOn, get_renderer
from renderers.bench.prepare import generate_corpus, qwen3_generation_template, template_example
from renderers.rendering import selected_messages
from tests.conftest import tokenizer_for
from tests.oracle import hf_template_ids
from tests.training import supervised_or_dropped

MODEL = "Qwen/Qwen3-8B"
AGENT = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": "4."},
    {"role": "user", "content": "Weather in Paris?"},
    {
        "role": "assistant",
        "content": "",
        "reasoning_content": "Call the tool.",
        "tool_calls": [
            {"type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}
        ],
    },
    {"role": "tool", "content": "18 C"},
    {"role": "assistant", "content": "18 C in Paris."},
]


@pytest.fixture(scope="module")
def qwen3() -> Any:
    return get_renderer(MODEL)


def _template_mask(messages: list[dict[str, Any]]) -> tuple[list[int], np.ndarray]:
    tok = tokenizer_for(MODEL)
    ids, mask = template_example(
        tok, {"messages": messages, "tools": None}, qwen3_generation_template(tok.chat_template)
    )
    return ids, np.asarray(mask)


def _message_end(messages: list[dict[str, Any]], i: int) -> int:
    """Where message ``i`` ends, from the template rendering of the prefix up to it (exact
    for user messages in Qwen3, whose rendering does not depend on what follows)."""
    return len(
        hf_template_ids(tokenizer_for(MODEL), messages[: i + 1], add_generation_prompt=False)
    )


def test_all_assistant_weights_equal_the_generation_tagged_template(qwen3: Any) -> None:
    for row in generate_corpus(12, seed=3):
        ids, mask = template_example(
            qwen3.tokenizer, row, qwen3_generation_template(qwen3.tokenizer.chat_template)
        )
        # Trained history reasoning the template drops: refused, built with "drop".
        example, _ = supervised_or_dropped(
            qwen3, row["messages"], row["tools"], train_on="all_assistant"
        )
        assert example.tokens.tolist() == ids
        assert (example.weights > 0).astype(int).tolist() == mask


def test_last_turn_trains_every_assistant_message_after_the_last_user_message(qwen3: Any) -> None:
    ids, mask = _template_mask(AGENT)
    last_user_end = _message_end(AGENT, 3)
    expected = mask.copy()
    expected[:last_user_end] = 0
    example = qwen3.build_supervised_example(AGENT, train_on=TrainOn.LAST_TURN)
    assert example.tokens.tolist() == ids
    assert example.weights.tolist() == expected.tolist()
    # The last assistant message alone is a strict part of it.
    last = qwen3.build_supervised_example(AGENT, train_on="last_assistant").weights
    assert 0 < last.sum() < example.weights.sum()
    assert np.all(last <= example.weights)


def test_last_assistant_turn_trains_across_a_system_message_where_last_turn_stops(
    qwen3: Any,
) -> None:
    """``last_assistant_turn`` is tinker-cookbook's ``LAST_ASSISTANT_TURN`` (v0.5.5: every
    assistant message after the last user message); ``last_turn`` ends the run of
    assistant and tool messages at any other message, a system note included. Without
    such a message the two are equal."""
    assert (
        qwen3.build_supervised_example(AGENT, train_on="last_assistant_turn").weights.tolist()
        == qwen3.build_supervised_example(AGENT, train_on="last_turn").weights.tolist()
    )
    messages = [*AGENT[:5], {"role": "system", "content": "Tools are slow."}, *AGENT[5:]]
    ids, mask = _template_mask(messages)
    last_user_end = _message_end(messages, 3)
    expected = mask.copy()
    expected[:last_user_end] = 0
    example = qwen3.build_supervised_example(messages, train_on=TrainOn.LAST_ASSISTANT_TURN)
    assert example.tokens.tolist() == ids
    assert example.weights.tolist() == expected.tolist()
    note_end = _message_end(messages, 5)
    expected[:note_end] = 0  # last_turn: only the answer after the system note
    assert qwen3.build_supervised_example(messages, train_on="last_turn").weights.tolist() == (
        expected.tolist()
    )


@pytest.mark.parametrize(
    "roles",
    [
        "u a t a",
        "s u a t a u",  # one trailing user message: the turn before it
        "a a",  # no user message: every assistant message
        "u a s a",
        "u a u t a",
    ],
)
def test_last_assistant_turn_selects_what_tinker_cookbook_selects(roles: str) -> None:
    """tinker-cookbook v0.5.5 (``renderers/base.py``): a message is in the last assistant
    turn when it is an assistant message at or after ``_last_assistant_turn_start_index(
    messages[:-1])``, one past the last user message before the final message."""
    names = {"u": "user", "a": "assistant", "t": "tool", "s": "system"}
    msgs = [Message(names[r], "x") for r in roles.split()]
    last_user = max((i for i, m in enumerate(msgs[:-1]) if m.role == "user"), default=-1)
    tinker = [m.role == "assistant" and i >= last_user + 1 for i, m in enumerate(msgs)]
    roles_known = ("system", "user", "assistant", "tool")
    assert selected_messages(msgs, "last_assistant_turn", roles_known) == tinker


def test_end_of_turn_token_can_be_left_untrained(qwen3: Any) -> None:
    ids, mask = _template_mask(AGENT)
    im_end = qwen3.table.control_id("<|im_end|>")
    expected = mask * (np.asarray(ids) != im_end)
    example = qwen3.build_supervised_example(
        AGENT, train_on="all_assistant", train_end_of_turn=False
    )
    assert example.weights.tolist() == expected.tolist()
    assert mask.sum() - expected.sum() == 3  # one <|im_end|> per assistant message


def test_a_message_weight_overrides_the_mode(qwen3: Any) -> None:
    ids, mask = _template_mask(AGENT)
    messages = [dict(m) for m in AGENT]
    messages[2]["train"] = False  # an assistant message left out
    messages[3]["weight"] = 0.5  # a user message trained at half weight
    example = qwen3.build_supervised_example(messages, train_on="all_assistant")
    user_end = _message_end(AGENT, 3)
    user_start = user_end - len(
        hf_template_ids(tokenizer_for(MODEL), AGENT[3:4], add_generation_prompt=False)
    )
    first_answer = np.arange(len(ids)) < user_start
    user_span = np.zeros(len(ids), dtype=bool)
    user_span[user_start:user_end] = True
    expected = np.where(first_answer, 0.0, mask.astype(float))
    expected[user_span] = 0.5
    assert example.weights.tolist() == expected.tolist()


def test_train_on_roles_trains_whole_messages_of_those_roles(qwen3: Any) -> None:
    example = qwen3.build_supervised_example(AGENT, train_on=("user",))
    expected = np.zeros(len(example.tokens))
    for i in (1, 3):
        alone = hf_template_ids(tokenizer_for(MODEL), AGENT[i : i + 1], add_generation_prompt=False)
        expected[_message_end(AGENT, i) - len(alone) : _message_end(AGENT, i)] = 1
    assert example.weights.tolist() == expected.tolist()
    with pytest.raises(ValueError, match=r"train_on: unknown role\(s\) 'robot'"):
        qwen3.build_supervised_example(AGENT, train_on=("robot",))


def test_attribution_gives_each_token_its_message(qwen3: Any) -> None:
    example = qwen3.build_supervised_example(AGENT, attribution=True)
    indices = example.message_indices
    assert indices is not None and len(indices) == len(example.tokens)
    for i in (0, 1, 3):  # system and user messages end where their prefix rendering ends
        positions = np.flatnonzero(indices == i)
        alone = hf_template_ids(tokenizer_for(MODEL), AGENT[i : i + 1], add_generation_prompt=False)
        end = _message_end(AGENT, i)
        assert positions.tolist() == list(range(end - len(alone), end))
    # Message indices never decrease, and every message has tokens.
    inside = indices[indices >= 0]
    assert np.all(np.diff(inside) >= 0)
    assert set(inside.tolist()) == set(range(len(AGENT)))
    text = qwen3.decode(example.tokens[indices == 6].tolist())
    assert "18 C in Paris." in text


def test_message_weight_fields_are_checked() -> None:
    assert Message.from_dict({"role": "user", "content": "x", "trainable": True}).weight == 1.0
    with pytest.raises(ValueError, match=r"^weight: expected a number >= 0"):
        Message.from_dict({"role": "user", "content": "x", "weight": -1})
    with pytest.raises(ValueError, match=r"^train: expected true or false"):
        Message.from_dict({"role": "user", "content": "x", "train": "yes"})
    with pytest.raises(ValueError, match=r"^train: conflicts with weight"):
        Message.from_dict({"role": "user", "content": "x", "weight": 1, "train": True})
    round_trip = Message.from_dict(Message("user", "x", weight=0.25).to_dict())
    assert round_trip.weight == 0.25
