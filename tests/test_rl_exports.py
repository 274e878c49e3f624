"""Rollouts in the shapes of verl, SkyRL, slime, OpenRLHF and TRL.

The expected shapes are built the way the stacks' own agent loops build them, from the
sampler's outputs and the prompts the rollout returned (verl ``ToolAgentLoop``, SkyRL
``SkyRLGymGenerator.agent_loop``, slime's multi-turn generate, OpenRLHF
``MultiTurnAgentExecutor``): the prompt once, then each completion's ids with mask 1 and
their logprobs, each environment block with mask 0 and logprob 0.0. Field names are the
stacks' (see ``renderers/rl_exports.py`` for the versions read). TRL consumes the export
for real in ``tests/test_rl_loop.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from renderers.rl_exports import (
    openrlhf_agent_output,
    skyrl_generator_output,
    slime_sample,
    trl_rollout_output,
    verl_agent_loop_output,
)
from tests.test_rollout_rl import (
    ANSWER,
    CALL,
    START,
    TOOL_RESULT,
    TOOLS,
    USER,
    logprobs_for,
    qwen3_ids,
    renderer,
    sampled,
)

# The fields each stack's type declares (from the sources cited in rl_exports).
VERL_AGENT_LOOP_OUTPUT = {
    "prompt_ids",
    "response_ids",
    "response_mask",
    "response_logprobs",
    "multi_modal_data",
    "reward_score",
    "num_turns",
    "metrics",
    "extra_fields",
}
SKYRL_GENERATOR_OUTPUT = {
    "prompt_token_ids",
    "response_ids",
    "rewards",
    "loss_masks",
    "stop_reasons",
    "rollout_metrics",
    "rollout_logprobs",
    "trajectory_ids",
    "is_last_step",
    "sampling_masks",
}
SLIME_SAMPLE = {
    "group_index",
    "index",
    "prompt",
    "tokens",
    "multimodal_inputs",
    "multimodal_train_inputs",
    "response",
    "response_length",
    "label",
    "reward",
    "loss_mask",
    "weight_versions",
    "rollout_log_probs",
    "rollout_routed_experts",
    "remove_sample",
    "teacher_log_probs",
    "status",
    "metadata",
    "generate_function_path",
    "train_metadata",
    "session_id",
    "non_generation_time",
    "spec_info",
    "prefix_cache_info",
}
SLIME_STATUS = {"pending", "completed", "truncated", "aborted", "failed"}
OPENRLHF_READ = {  # what SamplesGenerator._process_response_into_experience reads
    "prompt",
    "label",
    "reward",
    "scores",
    "observation_tokens",
    "action_ranges",
    "rollout_log_probs",
    "extra_logs",
    "truncated",
    "images",
    "mm_train_inputs",
}


@dataclass
class StackLoop:
    """An episode accumulated the way the stacks' agent loops do it."""

    prompt_ids: list[int]
    response_ids: list[int] = field(default_factory=list)
    response_mask: list[int] = field(default_factory=list)
    response_logprobs: list[float] = field(default_factory=list)
    action_ranges: list[tuple[int, int]] = field(default_factory=list)

    def sampled(self, ids: list[int], logprobs: list[float]) -> None:
        start = len(self.prompt_ids) + len(self.response_ids)
        self.action_ranges.append((start, start + len(ids)))
        self.response_ids += ids
        self.response_mask += [1] * len(ids)
        self.response_logprobs += logprobs

    def environment(self, next_prompt: list[int]) -> None:
        block = next_prompt[len(self.prompt_ids) + len(self.response_ids) :]
        self.response_ids += block
        self.response_mask += [0] * len(block)
        self.response_logprobs += [0.0] * len(block)


def qwen3_episode() -> tuple[Any, StackLoop]:
    """A tool call, its result, an answer, a user turn, a second answer."""
    r = renderer("qwen3")
    rollout = r.rollout(START, tools=TOOLS)
    loop = StackLoop(rollout.prompt_ids)
    history: list[dict[str, Any]] = list(START)
    for k, (message, after) in enumerate([(CALL, [TOOL_RESULT]), (ANSWER, [USER]), (ANSWER, [])]):
        ids = sampled(r, history, message)
        rollout.add_completion(ids, logprobs_for(k, len(ids)))
        loop.sampled(ids, logprobs_for(k, len(ids)))
        history += [message, *after]
        if after:
            loop.environment(rollout.add_messages(after))
    return rollout, loop


def test_verl_agent_loop_output_is_what_tool_agent_loop_builds() -> None:
    rollout, loop = qwen3_episode()
    out = verl_agent_loop_output(rollout, reward_score=1.0, extra_fields={"uid": "a"})
    assert set(out) <= VERL_AGENT_LOOP_OUTPUT
    assert out["prompt_ids"] == loop.prompt_ids
    assert out["response_ids"] == loop.response_ids
    assert out["response_mask"] == loop.response_mask
    assert out["response_logprobs"] == loop.response_logprobs
    assert out["reward_score"] == 1.0
    assert out["num_turns"] == 1 + 3 + 2  # verl: user turns + assistant turns + 1
    assert out["extra_fields"] == {"stop_reason": "stop", "done_reason": "no_tool_call", "uid": "a"}


def test_skyrl_generator_output_is_what_its_agent_loop_gathers() -> None:
    (a, loop_a), (b, loop_b) = qwen3_episode(), qwen3_episode()
    out = skyrl_generator_output([a, b], rewards=[1.0, [0.0] * len(loop_b.response_ids)])
    assert set(out) <= SKYRL_GENERATOR_OUTPUT
    assert out["prompt_token_ids"] == [loop_a.prompt_ids, loop_b.prompt_ids]
    assert out["response_ids"] == [loop_a.response_ids, loop_b.response_ids]
    assert out["loss_masks"] == [loop_a.response_mask, loop_b.response_mask]
    assert out["rollout_logprobs"] == [loop_a.response_logprobs, loop_b.response_logprobs]
    assert out["stop_reasons"] == ["stop", "stop"]
    assert out["rewards"] == [1.0, [0.0] * len(loop_b.response_ids)]
    with pytest.raises(ValueError, match="rewards: expected one per rollout"):
        skyrl_generator_output([a, b], rewards=[1.0])


def test_slime_sample_is_what_a_multi_turn_generate_fills() -> None:
    rollout, loop = qwen3_episode()
    out = slime_sample(rollout, reward=1.0, label="sunny")
    assert set(out) <= SLIME_SAMPLE
    assert out["tokens"] == loop.prompt_ids + loop.response_ids
    assert out["response_length"] == len(loop.response_ids)
    assert len(out["loss_mask"]) == out["response_length"]  # slime's rollout manager checks it
    assert out["loss_mask"] == loop.response_mask
    assert out["rollout_log_probs"] == loop.response_logprobs
    assert out["response"] == rollout.renderer.decode(loop.response_ids)
    assert out["prompt"] == rollout.renderer.decode(loop.prompt_ids)
    assert out["status"] == "completed" and out["status"] in SLIME_STATUS
    assert (out["reward"], out["label"]) == (1.0, "sunny")


def test_openrlhf_agent_output_is_what_its_executor_returns() -> None:
    rollout, loop = qwen3_episode()
    out = openrlhf_agent_output(rollout, reward=0.5, label="sunny")
    assert set(out) <= OPENRLHF_READ
    assert out["observation_tokens"] == loop.prompt_ids + loop.response_ids
    assert out["action_ranges"] == loop.action_ranges
    assert out["rollout_log_probs"] == [0.0] * len(loop.prompt_ids) + loop.response_logprobs
    assert (out["reward"], out["scores"], out["truncated"]) == (0.5, 0.5, False)
    # OpenRLHF's trainer shifts by one for next-token prediction: position i of its mask
    # and logprobs describes token i + 1.
    mask = [0] * len(out["observation_tokens"])
    for start, end in out["action_ranges"]:
        mask[start:end] = [1] * (end - start)
    shifted_mask, shifted_logprobs = mask[1:], out["rollout_log_probs"][1:]
    assert shifted_mask == rollout.weights[1:].astype(int).tolist()
    for i, (m, lp) in enumerate(zip(shifted_mask, shifted_logprobs, strict=True)):
        assert (lp != 0.0) == bool(m), i


def test_trl_rollout_output_is_what_rollout_func_returns() -> None:
    rollout, loop = qwen3_episode()
    out = trl_rollout_output([rollout, rollout])
    assert set(out) == {"prompt_ids", "completion_ids", "logprobs", "env_mask"}
    assert out["prompt_ids"] == [loop.prompt_ids] * 2
    assert out["completion_ids"] == [loop.response_ids] * 2
    assert out["logprobs"] == [loop.response_logprobs] * 2
    assert out["env_mask"] == [loop.response_mask] * 2


def test_messages_no_completion_followed_are_left_out_of_every_export() -> None:
    rollout, _ = qwen3_episode()
    before = (
        verl_agent_loop_output(rollout),
        slime_sample(rollout),
        openrlhf_agent_output(rollout),
        trl_rollout_output([rollout]),
    )
    rollout.add_messages([USER])
    after = (
        verl_agent_loop_output(rollout),
        slime_sample(rollout),
        openrlhf_agent_output(rollout),
        trl_rollout_output([rollout]),
    )
    # Only the done reason changed (the episode goes on): the tokens are the same.
    assert before[0]["extra_fields"]["done_reason"] == "no_tool_call"
    assert after[0]["extra_fields"]["done_reason"] is None
    for b, a in zip(before, after, strict=True):
        for key in ("response_ids", "tokens", "observation_tokens", "completion_ids"):
            if key in b:
                assert a[key] == b[key]


def test_a_rollout_out_of_budget_is_reported_truncated_in_every_shape() -> None:
    r = renderer("qwen3")
    rollout = r.rollout(START, tools=TOOLS)
    ids = qwen3_ids('<tool_call>\n{"name": "get_weather", "argu')
    rollout.add_completion(ids, [-0.5] * len(ids))
    assert verl_agent_loop_output(rollout)["extra_fields"]["stop_reason"] == "length"
    assert skyrl_generator_output([rollout], [0.0])["stop_reasons"] == ["length"]
    assert slime_sample(rollout)["status"] == "truncated"
    assert openrlhf_agent_output(rollout)["truncated"] is True
    # TRL tells truncation from the last id: not an end-of-sequence id.
    assert trl_rollout_output([rollout])["completion_ids"][0][-1] not in r.stop_token_ids


def test_gpt_oss_replaced_return_is_masked_and_keeps_its_logprob_in_the_exports() -> None:
    r = renderer("gpt_oss")
    rollout = r.rollout(START)
    answer = sampled(r, START, ANSWER)
    assert answer[-1] == r.tokens.return_
    rollout.add_completion(answer, logprobs_for(0, len(answer)))
    rollout.add_messages([USER])
    second = sampled(r, [*START, ANSWER, USER], ANSWER)
    rollout.add_completion(second, logprobs_for(1, len(second)))
    out = verl_agent_loop_output(rollout)
    position = len(answer) - 1  # in the response: the first answer's last token
    assert out["response_ids"][position] == r.tokens.end
    assert out["response_mask"][position] == 0
    assert out["response_logprobs"][position] == logprobs_for(0, len(answer))[-1]
    assert out["response_mask"][: len(answer)] == [1] * (len(answer) - 1) + [0]
    ranges = openrlhf_agent_output(rollout)["action_ranges"]
    prompt_length = len(out["prompt_ids"])
    assert ranges[0] == (prompt_length, prompt_length + len(answer) - 1)
    assert ranges[1][1] == prompt_length + len(out["response_ids"])  # ends with <|return|>
    assert out["response_ids"][-1] == r.tokens.return_


def test_exporting_a_rollout_without_completions_is_an_error() -> None:
    rollout = renderer("qwen3").rollout(START)
    with pytest.raises(ValueError, match="no completion to export"):
        verl_agent_loop_output(rollout)


def test_exports_without_logprobs_say_none() -> None:
    r = renderer("qwen3")
    rollout = r.rollout(START)
    rollout.add_completion(sampled(r, START, ANSWER))
    assert verl_agent_loop_output(rollout)["response_logprobs"] is None
    assert skyrl_generator_output([rollout], [1.0])["rollout_logprobs"] is None
    assert slime_sample(rollout)["rollout_log_probs"] is None
    assert openrlhf_agent_output(rollout)["rollout_log_probs"] is None
    assert trl_rollout_output([rollout])["logprobs"] is None
