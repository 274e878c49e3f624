"""What an RL trainer needs of a rollout: logprobs aligned with the kept tokens, turn
spans, why the episode ended, a token budget, a plain form, small pickles, stop strings.

Completions are the ids each format samples for an assistant turn: the weight-1 ids of
the renderer's supervised example, which the format tests prove equal to the official
template's. The real-model loop is in ``tests/test_rl_loop.py``; the exports are in
``tests/test_rl_exports.py``.
"""

from __future__ import annotations

import functools
import itertools
import json
import pickle
from typing import Any

import numpy as np
import pytest

from renderers import get_renderer
from renderers.registry import renderer_class
from renderers.rollout import DoneReason, Rollout, TurnKind
from tests.conftest import tokenizer_for

NAMES = ["qwen3", "deepseek_v3", "deepseek_v3.1", "kimi_k2", "kimi_k2_thinking", "gpt_oss"]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]
START = [
    {"role": "system", "content": "You are a weather bot."},
    {"role": "user", "content": "Weather in Paris?"},
]
CALL = {
    "role": "assistant",
    "content": "Let me check.",
    "tool_calls": [
        {
            "id": "functions.get_weather:0",
            "type": "function",
            "function": {"name": "get_weather", "arguments": {"city": "Paris"}},
        }
    ],
}
TOOL_RESULT = {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "21C"}
ANSWER = {"role": "assistant", "content": "Sunny, 21C."}
USER = {"role": "user", "content": "Thanks! And tomorrow?"}


@functools.cache
def renderer(name: str) -> Any:
    options = {"date": "2025-06-28"} if name == "gpt_oss" else {}
    return get_renderer(name, tokenizer_for(renderer_class(name).default_model), **options)


def sampled(r: Any, history: list[dict[str, Any]], message: dict[str, Any]) -> list[int]:
    """The ids the model samples for ``message`` after ``history``."""
    tokens, weights = r.build_supervised_example([*history, message], tools=TOOLS)
    ids: list[int] = tokens[weights == 1].tolist()
    return ids


def with_stop(r: Any, ids: list[int]) -> list[int]:
    return ids if ids and ids[-1] in r.stop_token_ids else [*ids, r.stop_token_ids[0]]


def variant(r: Any, ids: list[int], kind: str) -> list[int]:
    """A completion as a sampler may return it."""
    if kind == "stopped":
        return ids
    if kind == "stop-dropped":
        return ids[:-1] if ids[-1] in r.stop_token_ids else ids
    if kind == "truncated":
        return ids[: len(ids) // 2]
    assert kind == "tokens-after-stop"
    return [*with_stop(r, ids), *r.table.encode("\nmore text")]


def logprobs_for(turn: int, count: int) -> list[float]:
    """Distinct logprobs, exact in float32, that say which completion and id they are."""
    return [-(1 + turn * 1000 + i) / 4096 for i in range(count)]


def expected_kept(r: Any, ids: list[int]) -> int:
    """Completions end at their first stop (or end-of-sequence) token."""
    stops = [k for k, t in enumerate(ids) if t in r.stop_token_ids]
    return stops[0] + 1 if stops else len(ids)


VARIANTS = ["stopped", "stop-dropped", "truncated", "tokens-after-stop"]


@pytest.mark.parametrize("kind", VARIANTS)
@pytest.mark.parametrize("name", NAMES)
def test_logprobs_and_weights_stay_aligned_with_the_kept_tokens(name: str, kind: str) -> None:
    r = renderer(name)
    call = sampled(r, START, CALL)
    answer = sampled(r, [*START, CALL, TOOL_RESULT], ANSWER)
    completions = [variant(r, call, kind), variant(r, answer, kind), answer]
    rollout = r.rollout(START, tools=TOOLS)
    for k, ids in enumerate(completions):
        result = rollout.add_completion(ids, logprobs_for(k, len(ids)))
        if k < len(completions) - 1:  # a tool result answers a call, a user turn anything
            rollout.add_messages([TOOL_RESULT] if result.message.tool_calls else [USER])

    tokens, weights, logprobs = rollout.tokens, rollout.weights, rollout.logprobs
    assert len(tokens) == len(weights) == len(logprobs)
    turns = rollout.turns
    assert [t.kind for t in turns] == [TurnKind.PROMPT] + [
        TurnKind.COMPLETION,
        TurnKind.MESSAGES,
    ] * 2 + [TurnKind.COMPLETION]
    assert turns[0].start == 0 and turns[-1].end == len(tokens)
    assert all(a.end == b.start for a, b in itertools.pairwise(turns))

    in_completion = np.zeros(len(tokens), dtype=bool)
    replaced = []
    for k, (turn, ids) in enumerate(
        zip([t for t in turns if t.kind is TurnKind.COMPLETION], completions, strict=True)
    ):
        kept = expected_kept(r, ids)
        assert turn.end - turn.start == kept
        in_completion[turn.start : turn.end] = True
        # One logprob per kept sampled id, in order; the ids after the stop are dropped.
        assert logprobs[turn.start : turn.end].tolist() == logprobs_for(k, len(ids))[:kept]
        for pos, sampled_id in zip(range(turn.start, turn.end), ids[:kept], strict=True):
            if weights[pos] == 1:
                assert tokens[pos] == sampled_id
            else:
                replaced.append((pos, sampled_id, int(tokens[pos])))
    # Nothing outside the completions was sampled.
    assert np.isnan(logprobs[~in_completion]).all()
    assert (weights[~in_completion] == 0).all()
    # Only gpt-oss replaces a sampled token: a final answer's <|return|> becomes <|end|>
    # in history, at the same position, with weight 0 and the sampled logprob kept.
    if name == "gpt_oss" and kind in ("stopped", "tokens-after-stop"):
        tk = r.tokens
        assert [(s, t) for _, s, t in replaced] == [(tk.return_, tk.end)]
        assert replaced[0][0] == turns[3].end - 1
    else:
        assert replaced == []


@pytest.mark.parametrize("name", NAMES)
def test_turn_spans_hold_the_prompt_each_completion_and_each_block_of_messages(
    name: str,
) -> None:
    r = renderer(name)
    rollout = r.rollout(START, tools=TOOLS)
    first_prompt = rollout.prompt_ids
    call = with_stop(r, sampled(r, START, CALL))
    rollout.add_completion(call)
    second_prompt = rollout.add_messages([TOOL_RESULT])
    answer = sampled(r, [*START, CALL, TOOL_RESULT], ANSWER)
    rollout.add_completion(answer)
    prompt, completion1, block, completion2 = rollout.turns
    assert (prompt.start, prompt.end) == (0, len(first_prompt))
    assert first_prompt == r.build_generation_prompt(START, tools=TOOLS)
    assert rollout.tokens[completion1.start : completion1.end].tolist() == call
    assert (block.start, block.end) == (completion1.end, len(second_prompt))
    assert rollout.tokens[completion2.start : completion2.end].tolist() == answer


def test_a_resumed_rollout_starts_with_the_given_prompt_as_its_prompt_span() -> None:
    r = renderer("qwen3")
    prompt = r.build_generation_prompt(START)
    rollout = Rollout.resume(r, prompt)
    rollout.add_completion(sampled(r, START, ANSWER))
    assert rollout.turns[0].end == len(prompt)
    assert rollout.turns[1].kind is TurnKind.COMPLETION


def test_logprobs_must_come_one_per_sampled_id_and_for_every_completion_or_none() -> None:
    r = renderer("qwen3")
    call = sampled(r, START, CALL)
    rollout = r.rollout(START, tools=TOOLS)
    with pytest.raises(ValueError, match=rf"logprobs: expected one per sampled id \({len(call)}\)"):
        rollout.add_completion(call, [-1.0] * (len(call) - 1))
    rollout.add_completion(call, np.full(len(call), -1.0))
    rollout.add_messages([TOOL_RESULT])
    with pytest.raises(ValueError, match="completion 1 comes without logprobs"):
        rollout.add_completion(sampled(r, [*START, CALL, TOOL_RESULT], ANSWER))


def test_without_logprobs_every_position_is_nan_and_the_rollout_says_so() -> None:
    r = renderer("qwen3")
    rollout = r.rollout(START)
    rollout.add_completion(sampled(r, START, ANSWER))
    assert not rollout.has_logprobs
    assert np.isnan(rollout.logprobs).all()


# -- done and why -------------------------------------------------------------------------


def qwen3_ids(text: str) -> list[int]:
    """Ids of Qwen3 text as the model samples it (control-token spellings are tokens)."""
    ids: list[int] = renderer("qwen3").tokenizer.encode(text, add_special_tokens=False)
    return ids


QWEN3_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'


@pytest.mark.parametrize(
    ("text", "finish_reason", "reason"),
    [
        (QWEN3_CALL + "<|im_end|>", None, None),
        ("Sunny.<|im_end|>", None, DoneReason.NO_TOOL_CALL),
        ("<tool_call>\n{not json}\n</tool_call><|im_end|>", None, None),
        ("Sunny.<|endoftext|>", None, DoneReason.END_OF_SEQUENCE),
        (QWEN3_CALL + "<|endoftext|>", None, DoneReason.END_OF_SEQUENCE),
        ("Sunny and", None, DoneReason.LENGTH),
        ("Sunny and", "length", DoneReason.LENGTH),
        ("Sunny.", "stop", DoneReason.NO_TOOL_CALL),
        (QWEN3_CALL, "stop", None),
        ("Sunny.<|im_end|>", "length", DoneReason.NO_TOOL_CALL),  # the ids win
    ],
    ids=[
        "tool-call",
        "answer",
        "unparsed-call-counts-as-a-call",
        "end-of-sequence",
        "end-of-sequence-after-a-call",
        "cut-off",
        "cut-off-reported",
        "stop-string-reported",
        "call-stopped-by-a-stop-string",
        "stop-token-despite-length",
    ],
)
def test_done_says_why_the_episode_is_over(
    text: str, finish_reason: str | None, reason: DoneReason | None
) -> None:
    rollout = renderer("qwen3").rollout(START, tools=TOOLS)
    rollout.add_completion(qwen3_ids(text), finish_reason=finish_reason)
    assert rollout.done_reason is reason
    assert rollout.done is (reason is not None)


def test_max_turns_ends_the_episode_and_refuses_more_completions() -> None:
    rollout = renderer("qwen3").rollout(START, tools=TOOLS, max_turns=1)
    assert not rollout.done
    rollout.add_completion(qwen3_ids(QWEN3_CALL + "<|im_end|>"))
    assert rollout.done_reason is DoneReason.MAX_TURNS
    rollout.add_messages([TOOL_RESULT])
    assert rollout.done_reason is DoneReason.MAX_TURNS
    with pytest.raises(RuntimeError, match="max_turns=1"):
        rollout.add_completion(qwen3_ids("Sunny.<|im_end|>"))


def test_max_tokens_is_what_is_left_of_the_budgets() -> None:
    r = renderer("qwen3")
    prompt_length = len(r.build_generation_prompt(START, tools=TOOLS))
    call = qwen3_ids(QWEN3_CALL + "<|im_end|>")
    rollout = r.rollout(START, tools=TOOLS, max_length=prompt_length + 100)
    assert rollout.max_tokens() == 100
    assert rollout.max_tokens(30) == 30
    rollout.add_completion(call)
    after = len(rollout.add_messages([TOOL_RESULT]))
    assert rollout.max_tokens() == prompt_length + 100 - after
    assert not rollout.done

    tight = r.rollout(START, tools=TOOLS, max_response_length=len(call) + 5)
    assert tight.max_tokens(1000) == len(call) + 5
    tight.add_completion(call)
    tight.add_messages([TOOL_RESULT])  # the tool result does not fit in 5 tokens
    assert tight.done_reason is DoneReason.LENGTH


@pytest.mark.parametrize("limit", ["max_length", "max_response_length"])
@pytest.mark.parametrize("room", [0, 1])
def test_an_episode_out_of_budget_is_never_sampled_again(limit: str, room: int) -> None:
    """New messages can fill the budget: then the episode is over, ``max_tokens`` never
    answers 0 (a sampler refuses it) and ``add_completion`` refuses a sample taken anyway;
    with a token of room left both go on."""
    r = renderer("qwen3")
    call = qwen3_ids(QWEN3_CALL + "<|im_end|>")
    probe = r.rollout(START, tools=TOOLS)
    probe.add_completion(call)
    after = len(probe.add_messages([TOOL_RESULT]))
    prompt = probe.turns[0].end
    budget = after + room if limit == "max_length" else after - prompt + room
    rollout = r.rollout(START, tools=TOOLS, **{limit: budget})
    rollout.add_completion(call)
    rollout.add_messages([TOOL_RESULT])
    if room:
        assert not rollout.done and rollout.max_tokens(50) == 1
        rollout.add_completion(qwen3_ids("Sunny."), finish_reason="length")
        assert rollout.done_reason is DoneReason.LENGTH
        return
    assert rollout.done_reason is DoneReason.LENGTH
    with pytest.raises(
        RuntimeError, match=rf"max_tokens\(\): the episode is over: no room left .*{limit}={budget}"
    ):
        rollout.max_tokens(50)
    with pytest.raises(RuntimeError, match=r"add_completion\(\): the episode is over"):
        rollout.add_completion([])
    assert len(rollout.turns) == 3  # nothing was added


def test_a_prompt_that_fills_the_budget_leaves_nothing_to_sample() -> None:
    r = renderer("qwen3")
    prompt = r.build_generation_prompt(START)
    rollout = r.rollout(START, max_length=len(prompt))
    assert rollout.done_reason is DoneReason.LENGTH
    with pytest.raises(RuntimeError, match="the episode is over"):
        rollout.max_tokens(10)
    with pytest.raises(ValueError, match=r"per_turn: expected a positive integer or None, got 0"):
        r.rollout(START).max_tokens(0)


def test_budget_errors_are_clear() -> None:
    r = renderer("qwen3")
    with pytest.raises(ValueError, match="max_tokens\\(\\): no budget"):
        r.rollout(START).max_tokens()
    with pytest.raises(ValueError, match="max_length: expected a positive integer"):
        r.rollout(START, max_length=0)
    with pytest.raises(ValueError, match="max_turns: expected a positive integer"):
        r.rollout(START, max_turns=1.5)
    with pytest.raises(ValueError, match="finish_reason: expected 'stop', 'length' or None"):
        r.rollout(START).add_completion(qwen3_ids("Hi."), finish_reason="eos")
    rollout = r.rollout(START)
    rollout.add_completion(qwen3_ids("Hi.<|im_end|>"))
    with pytest.raises(RuntimeError, match="waits for new messages"):
        rollout.max_tokens(10)


# -- stop strings ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", NAMES)
def test_stop_strings_are_the_stop_tokens_as_text(name: str) -> None:
    r = renderer(name)
    assert len(r.stop_strings) == len(r.stop_token_ids)
    for text, token_id in zip(r.stop_strings, r.stop_token_ids, strict=True):
        assert r.table.control_id(text) == token_id
        assert r.tokenizer.convert_tokens_to_ids(text) == token_id


# -- plain form and pickling ------------------------------------------------------------------


def episode(name: str) -> Any:
    """A finished three-turn episode with logprobs (a call, an answer, a second answer)."""
    r = renderer(name)
    rollout = r.rollout(START, tools=TOOLS, max_length=32768, max_turns=8)
    history: list[dict[str, Any]] = list(START)
    for k, (message, after) in enumerate([(CALL, [TOOL_RESULT]), (ANSWER, [USER]), (ANSWER, [])]):
        ids = sampled(r, history, message)
        rollout.add_completion(ids, logprobs_for(k, len(ids)))
        history += [message, *after]
        if after:
            rollout.add_messages(after)
    return rollout


def assert_same_rollout(a: Any, b: Any) -> None:
    assert a.tokens.tolist() == b.tokens.tolist()
    assert a.weights.tolist() == b.weights.tolist()
    np.testing.assert_array_equal(a.logprobs, b.logprobs)
    assert a.turns == b.turns
    assert a.messages == b.messages
    assert a.results == b.results
    assert a.done_reason == b.done_reason


@pytest.mark.parametrize("name", NAMES)
def test_the_plain_form_is_json_and_reads_back_into_the_same_rollout(name: str) -> None:
    original = episode(name)
    data = json.loads(json.dumps(original.to_dict()))
    assert data["renderer"] == name
    assert len(data["tokens"]) == len(data["weights"]) == len(data["logprobs"])
    assert data["done_reason"] == "no_tool_call"
    restored = Rollout.from_dict(data, renderer(name))
    assert_same_rollout(restored, original)
    # A restored rollout goes on exactly as the original does.
    assert restored.add_messages([USER]) == original.add_messages([USER])


def test_the_plain_form_names_its_renderer() -> None:
    data = episode("qwen3").to_dict()
    with pytest.raises(ValueError, match="made with 'qwen3', not 'kimi_k2'"):
        Rollout.from_dict(data, renderer("kimi_k2"))
    with pytest.raises(ValueError, match="version: expected 1"):
        Rollout.from_dict({**data, "version": 99}, renderer("qwen3"))


@pytest.mark.parametrize("name", NAMES)
def test_a_pickled_rollout_is_small_and_goes_on_like_the_original(name: str) -> None:
    original = episode(name)
    blob = pickle.dumps(original)
    n = len(original.tokens)
    # The renderer pickles by reference (~150 bytes); ids, weights and logprobs as packed
    # arrays (9 bytes a token); the rest is the messages' text and the parse results.
    text = sum(len(json.dumps(m.to_dict())) for m in original.messages) + len(json.dumps(TOOLS))
    assert len(blob) <= 9 * n + text + 4096, (len(blob), n, text)
    assert len(blob) < 16 * 1024
    restored = pickle.loads(blob)
    assert_same_rollout(restored, original)
    assert restored.add_messages([USER]) == original.add_messages([USER])


def test_a_long_realistic_episode_pickles_under_64_kib() -> None:
    """Eight tool turns with reasoning and long tool results: about 2,600 tokens."""
    r = renderer("qwen3")
    rollout = r.rollout(START, tools=TOOLS)
    reasoning = "I should look at the forecast for each city before answering. " * 6
    for k in range(8):
        text = f"<think>\n{reasoning}\n</think>\n\n{QWEN3_CALL}<|im_end|>"
        ids = qwen3_ids(text)
        rollout.add_completion(ids, logprobs_for(k, len(ids)))
        rollout.add_messages([{"role": "tool", "content": "sunny, 21C, light wind. " * 20}])
    ids = qwen3_ids("Sunny everywhere.<|im_end|>")
    rollout.add_completion(ids, logprobs_for(8, len(ids)))
    n = len(rollout.tokens)
    blob = pickle.dumps(rollout)
    assert n > 2500
    assert len(blob) < 64 * 1024, (len(blob), n)
    assert_same_rollout(pickle.loads(blob), rollout)


def test_the_plain_form_keeps_a_rollout_without_logprobs_without_logprobs() -> None:
    r = renderer("qwen3")
    rollout = r.rollout(START)
    rollout.add_completion(sampled(r, START, ANSWER))
    data = rollout.to_dict()
    assert data["logprobs"] is None
    restored = Rollout.from_dict(data, r)
    assert not restored.has_logprobs
    restored.add_messages([USER])
    with pytest.raises(ValueError, match="comes with logprobs but earlier completions had none"):
        restored.add_completion(qwen3_ids("Hi.<|im_end|>"), [-1.0, -1.0, -1.0])
    restored.add_completion(qwen3_ids("Hi.<|im_end|>"))
    assert np.isnan(restored.logprobs).all()
