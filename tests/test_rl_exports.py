"""Rollouts in the shapes of verl, SkyRL, slime, OpenRLHF and TRL.

The expected shapes are built the way the stacks' own agent loops build them, from the
sampler's outputs and the prompts the rollout returned (verl ``ToolAgentLoop``, SkyRL
``SkyRLGymGenerator.agent_loop``, slime's multi-turn generate, OpenRLHF
``MultiTurnAgentExecutor``): the prompt once, then each completion's ids with mask 1 and
their logprobs, each environment block with mask 0 and logprob 0.0. Field names are the
stacks' (see ``renderers/rl_exports.py`` for the versions read).

SkyRL (Python 3.12+), slime (SGLang, Megatron) and OpenRLHF (vLLM, flash-attn, DeepSpeed)
do not install on this CPU-only Python 3.11 machine: their contracts are pinned here to
the source cited with each constant and check. verl's and TRL's own code consume the
exports in ``tests/test_rl_stacks.py``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from renderers.rl_exports import (
    fill_slime_sample,
    openrlhf_agent_output,
    skyrl_generator_output,
    slime_sample,
    trl_rollout_output,
    verl_agent_loop_output,
)
from renderers.rollout import DoneReason
from tests.test_rollout_rl import (
    ANSWER,
    CALL,
    NAMES,
    START,
    TOOL_RESULT,
    TOOLS,
    USER,
    logprobs_for,
    qwen3_ids,
    renderer,
    sampled,
)

# The fields of verl 0.9.1's AgentLoopOutput (verl/experimental/agent_loop/agent_loop.py).
VERL_AGENT_LOOP_OUTPUT = {
    "prompt_ids",
    "response_ids",
    "response_mask",
    "response_logprobs",
    "routed_experts",
    "multi_modal_data",
    "reward_score",
    "num_turns",
    "metrics",
    "extra_fields",
    "mm_processor_kwargs",
    "mm_processor_output",
}
# SkyRL a956457, skyrl/train/generators/base.py: GeneratorOutput.
SKYRL_GENERATOR_OUTPUT = {
    "prompt_token_ids",
    "response_ids",
    "rewards",
    "loss_masks",
    "stop_reasons",
    "rollout_metrics",
    "rollout_logprobs",
    "trajectory_ids",
    "trajectory_generation_times",
    "trajectory_time_splits",
    "rollout_expert_indices",
    "is_last_step",
    "env_metrics",
    "pixel_values",
    "image_grid_thw",
}
# OpenRLHF v0.11.0 (3c3be62), openrlhf/trainer/ppo_utils/samples_generator.py: what
# SamplesGenerator._process_response_into_experience reads of an executor's result.
OPENRLHF_READ = {
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
class SlimeSample:
    """slime's ``Sample`` at 624b824 (``slime/utils/types.py``): its fields and defaults,
    less the nested info classes, with its ``Status`` enum."""

    class Status(enum.Enum):
        PENDING = "pending"
        COMPLETED = "completed"
        TRUNCATED = "truncated"
        ABORTED = "aborted"
        FAILED = "failed"

    group_index: int | None = None
    index: int | None = None
    rollout_id: int | None = None
    prompt: str | list[dict[str, str]] = ""
    tokens: list[int] = field(default_factory=list)
    multimodal_inputs: dict[str, Any] | None = None
    multimodal_train_inputs: dict[str, Any] | None = None
    multimodal_train_input_id: str | None = None
    apply_chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    response: str = ""
    response_length: int = 0
    label: str | None = None
    reward: float | dict[str, Any] | None = None
    loss_mask: list[int] | None = None
    weight_versions: list[str] = field(default_factory=list)
    rollout_log_probs: list[float] | None = None
    rollout_top_p_token_ids: list[int] | None = None
    rollout_top_p_token_offsets: list[int] | None = None
    rollout_routed_experts: list[list[int]] | None = None
    remove_sample: bool = False
    teacher_log_probs: list[float] | None = None
    status: Status = Status.PENDING
    metadata: dict[str, Any] = field(default_factory=dict)
    generate_function_path: str | None = None
    custom_rm_path: str | None = None
    train_metadata: dict[str, Any] | None = None
    session_id: str | None = None
    non_generation_time: float = 0.0


SLIME_SAMPLE = set(SlimeSample.__dataclass_fields__) | {"spec_info", "prefix_cache_info"}


def slime_train_fields(sample: SlimeSample) -> dict[str, Any]:
    """What slime 624b824 takes of a sample and checks (``slime/ray/rollout.py``,
    ``RolloutManager._convert_samples_to_train_data``)."""
    assert len(sample.loss_mask or []) == sample.response_length
    return {
        "tokens": sample.tokens,
        "response_lengths": sample.response_length,
        "truncated": 1 if sample.status == SlimeSample.Status.TRUNCATED else 0,
        "loss_masks": sample.loss_mask,
        "rollout_log_probs": sample.rollout_log_probs,
    }


def skyrl_validate(out: dict[str, Any], num_prompts: int) -> None:
    """The checks of SkyRL a956457 ``validate_generator_output``
    (``skyrl/train/utils/trainer_utils.py``), assertion for assertion."""
    assert len(out["response_ids"]) > 0
    assert num_prompts == len(out["response_ids"]) == len(out["prompt_token_ids"])
    for key in ("response_ids", "loss_masks", "rewards", "rollout_logprobs", "stop_reasons"):
        if isinstance(out[key], list):
            assert len(out[key]) == len(out["response_ids"])
    for i, (ids, mask, rewards) in enumerate(
        zip(out["response_ids"], out["loss_masks"], out["rewards"], strict=False)
    ):
        assert len(ids) == len(mask)
        if isinstance(rewards, list):
            assert len(rewards) == len(ids)
        if out["rollout_logprobs"]:
            assert len(ids) == len(out["rollout_logprobs"][i])
    kinds = {isinstance(r, list) for r in out["rewards"]}
    assert len(kinds) == 1


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
    out = skyrl_generator_output([a, b], rewards=[1.0, 0.0])
    assert set(out) <= SKYRL_GENERATOR_OUTPUT
    skyrl_validate(out, 2)
    assert out["prompt_token_ids"] == [loop_a.prompt_ids, loop_b.prompt_ids]
    assert out["response_ids"] == [loop_a.response_ids, loop_b.response_ids]
    assert out["loss_masks"] == [loop_a.response_mask, loop_b.response_mask]
    assert out["rollout_logprobs"] == [loop_a.response_logprobs, loop_b.response_logprobs]
    assert out["stop_reasons"] == ["stop", "stop"]
    assert out["rewards"] == [1.0, 0.0]
    per_token = [[0.0] * (len(loop_a.response_ids) - 1) + [1.0], [0.0] * len(loop_b.response_ids)]
    out = skyrl_generator_output([a, b], rewards=per_token)
    skyrl_validate(out, 2)
    assert out["rewards"] == per_token
    with pytest.raises(ValueError, match="rewards: expected one per rollout"):
        skyrl_generator_output([a, b], rewards=[1.0])


def test_skyrl_generator_output_refuses_what_skyrl_refuses() -> None:
    """``validate_generator_output`` refuses a batch mixing float and per-token rewards,
    per-token rewards of another length than the response, and an empty batch."""
    (a, _), (b, loop_b) = qwen3_episode(), qwen3_episode()
    n = len(loop_b.response_ids)
    with pytest.raises(
        ValueError, match=r"not both \(rewards\[0\] is a float, rewards\[1\] a list"
    ):
        skyrl_generator_output([a, b], rewards=[1.0, [0.0] * n])
    with pytest.raises(ValueError, match=rf"rewards\[1\]: expected one per response token \({n}"):
        skyrl_generator_output([a, b], rewards=[[0.0] * n, [0.0] * (n - 1)])
    with pytest.raises(ValueError, match="rollouts: expected at least one"):
        skyrl_generator_output([], rewards=[])


def test_batches_mixing_rollouts_with_and_without_logprobs_are_refused() -> None:
    r = renderer("qwen3")
    with_logprobs, _ = qwen3_episode()
    without = r.rollout(START)
    without.add_completion(sampled(r, START, ANSWER))
    with pytest.raises(ValueError, match=r"rollouts \[1\] have no logprobs but the others do"):
        skyrl_generator_output([with_logprobs, without], [1.0, 0.0])
    with pytest.raises(ValueError, match=r"rollouts \[1\] have no logprobs"):
        trl_rollout_output([with_logprobs, without])


def test_fill_slime_sample_fills_the_sample_it_is_given() -> None:
    """A custom generate function fills the ``Sample`` slime gave it: its index, group,
    session, prompt, label and metadata stay; ``status`` is the enum member slime compares
    (a string there would never equal ``Sample.Status.TRUNCATED``)."""
    rollout, loop = qwen3_episode()
    sample = SlimeSample(
        group_index=3,
        index=14,
        prompt="Weather in Paris?",
        label="sunny",
        session_id="s-14",
        metadata={"source": "weather"},
    )
    same = fill_slime_sample(sample, rollout, reward=1.0)
    assert same is sample
    assert (sample.group_index, sample.index, sample.session_id) == (3, 14, "s-14")
    assert (sample.prompt, sample.label, sample.reward) == ("Weather in Paris?", "sunny", 1.0)
    assert sample.metadata == {"source": "weather", "done_reason": "no_tool_call"}
    assert sample.status is SlimeSample.Status.COMPLETED
    assert sample.tokens == loop.prompt_ids + loop.response_ids
    assert sample.response == rollout.renderer.decode(loop.response_ids)
    train = slime_train_fields(sample)
    assert train["response_lengths"] == len(loop.response_ids)
    assert train["loss_masks"] == loop.response_mask
    assert train["rollout_log_probs"] == loop.response_logprobs
    assert train["truncated"] == 0
    with pytest.raises(ValueError, match="sample: expected a slime Sample"):
        fill_slime_sample({"tokens": []}, rollout)


def test_slime_sample_is_the_dict_sample_from_dict_reads() -> None:
    rollout, loop = qwen3_episode()
    out = slime_sample(rollout, reward=1.0, label="sunny")
    assert set(out) <= SLIME_SAMPLE
    assert out["tokens"] == loop.prompt_ids + loop.response_ids
    assert out["response_length"] == len(loop.response_ids)
    assert out["loss_mask"] == loop.response_mask
    assert out["rollout_log_probs"] == loop.response_logprobs
    assert out["response"] == rollout.renderer.decode(loop.response_ids)
    assert out["prompt"] == rollout.renderer.decode(loop.prompt_ids)
    # Sample.from_dict: data["status"] = Sample.Status(data["status"]).
    assert SlimeSample.Status(out["status"]) is SlimeSample.Status.COMPLETED
    assert (out["reward"], out["label"]) == (1.0, "sunny")


def test_openrlhf_agent_output_is_what_its_executor_returns() -> None:
    rollout, loop = qwen3_episode()
    prompt = "<|im_start|>user\nWeather in Paris?<|im_end|>\n"  # the dataset's, not ours
    out = openrlhf_agent_output(rollout, prompt=prompt, label="sunny", reward=0.5)
    assert set(out) <= OPENRLHF_READ
    assert (out["prompt"], out["label"]) == (prompt, "sunny")  # passed through
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
    with pytest.raises(TypeError, match="prompt"):
        openrlhf_agent_output(rollout)  # type: ignore[call-arg]


def test_trl_rollout_output_is_what_rollout_func_returns() -> None:
    rollout, loop = qwen3_episode()
    out = trl_rollout_output([rollout, rollout])
    assert set(out) == {"prompt_ids", "completion_ids", "logprobs", "env_mask"}
    assert out["prompt_ids"] == [loop.prompt_ids] * 2
    assert out["completion_ids"] == [loop.response_ids] * 2
    assert out["logprobs"] == [loop.response_logprobs] * 2
    assert out["env_mask"] == [loop.response_mask] * 2


def all_exports(rollout: Any) -> dict[str, dict[str, Any]]:
    """Every stack's export of one rollout, as one record each: the whole sequence, the
    response, its mask and logprobs, and the stack's flag for an episode out of budget."""
    verl = verl_agent_loop_output(rollout)
    skyrl = skyrl_generator_output([rollout], [1.0])
    sample = fill_slime_sample(SlimeSample(), rollout)
    openrlhf = openrlhf_agent_output(rollout, prompt="p", label=None)
    trl = trl_rollout_output([rollout])
    prompt = len(verl["prompt_ids"])
    mask = [0] * len(openrlhf["observation_tokens"])
    for start, end in openrlhf["action_ranges"]:
        mask[start:end] = [1] * (end - start)
    lp = openrlhf["rollout_log_probs"]
    return {
        "verl": {
            "tokens": verl["prompt_ids"] + verl["response_ids"],
            "mask": verl["response_mask"],
            "logprobs": verl["response_logprobs"],
            "flag": verl["extra_fields"]["stop_reason"] == "length",
        },
        "skyrl": {
            "tokens": skyrl["prompt_token_ids"][0] + skyrl["response_ids"][0],
            "mask": skyrl["loss_masks"][0],
            "logprobs": None if skyrl["rollout_logprobs"] is None else skyrl["rollout_logprobs"][0],
            "flag": skyrl["stop_reasons"] == ["length"],
        },
        "slime": {
            "tokens": sample.tokens,
            "mask": sample.loss_mask,
            "logprobs": sample.rollout_log_probs,
            "flag": sample.status is SlimeSample.Status.TRUNCATED,
        },
        "openrlhf": {
            "tokens": openrlhf["observation_tokens"],
            "mask": mask[prompt:],
            "logprobs": None if lp is None else lp[prompt:],
            "flag": openrlhf["truncated"],
        },
        "trl": {
            "tokens": trl["prompt_ids"][0] + trl["completion_ids"][0],
            "mask": trl["env_mask"][0],
            "logprobs": None if trl["logprobs"] is None else trl["logprobs"][0],
            # TRL: clipped when the last id is not an end-of-sequence id.
            "flag": trl["completion_ids"][0][-1] not in rollout.renderer.stop_token_ids,
        },
    }


def test_messages_no_completion_followed_are_left_out_of_every_export() -> None:
    rollout, _ = qwen3_episode()
    before = all_exports(rollout)
    rollout.add_messages([USER])
    assert rollout.done_reason is None  # the episode goes on: the exports are the same
    assert all_exports(rollout) == before


def test_a_cut_off_rollout_is_reported_truncated_in_every_shape() -> None:
    r = renderer("qwen3")
    rollout = r.rollout(START, tools=TOOLS)
    ids = qwen3_ids('<tool_call>\n{"name": "get_weather", "argu')
    rollout.add_completion(ids, [-0.5] * len(ids))
    for stack, out in all_exports(rollout).items():
        assert out["flag"], stack
        assert out["tokens"][-len(ids) :] == ids, stack  # nothing appended to a cut turn


@pytest.mark.parametrize("name", NAMES)
def test_a_dropped_stop_token_closes_the_last_turn_in_every_shape(name: str) -> None:
    """A sampler that stopped at a stop token without returning it (``finish_reason=
    "stop"``): every export ends the turn with the token the model stops there with, mask
    0 and logprob 0.0, as SkyRL's generator appends the end-of-sequence token it did not
    sample; TRL then counts the episode as finished, not clipped."""
    r = renderer(name)
    answer = sampled(r, START, ANSWER)
    assert answer[-1] in r.stop_token_ids
    dropped = r.rollout(START)
    dropped.add_completion(answer[:-1], logprobs_for(0, len(answer) - 1), finish_reason="stop")
    assert dropped.closing_ids() == [answer[-1]]
    kept = r.rollout(START)
    kept.add_completion(answer, logprobs_for(0, len(answer)))
    assert kept.closing_ids() == []
    for (stack, out), ref in zip(
        all_exports(dropped).items(), all_exports(kept).values(), strict=True
    ):
        assert out["tokens"] == ref["tokens"], stack  # the same ids as a kept stop token
        assert out["mask"] == [*ref["mask"][:-1], 0], stack
        assert out["logprobs"] == [*ref["logprobs"][:-1], 0.0], stack
        assert not out["flag"], stack


def test_a_stop_string_inside_a_block_closes_it_before_the_stop_token() -> None:
    r = renderer("qwen3")
    rollout = r.rollout(START, tools=TOOLS)
    ids = qwen3_ids("<think>\nLet me think")
    rollout.add_completion(ids, [-0.5] * len(ids), finish_reason="stop")
    closing = r.decode(rollout.closing_ids())
    assert closing == "</think><|im_end|>"
    out = verl_agent_loop_output(rollout)
    assert r.decode(out["response_ids"]).endswith("Let me think</think><|im_end|>")
    assert out["response_mask"][-2:] == [0, 0]


def budget_overrun(limit: str, room: int) -> tuple[Any, int]:
    """The issue's episode: a call (with its stop token), then a tool result longer than
    what is left of the budget; the budget leaves ``room`` tokens after the call."""
    r = renderer("qwen3")
    call = qwen3_ids(
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
        "<|im_end|>"
    )
    prompt = len(r.build_generation_prompt(START, tools=TOOLS))
    budget = (prompt if limit == "max_length" else 0) + len(call) + room
    rollout = r.rollout(START, tools=TOOLS, **{limit: budget})
    rollout.add_completion(call, logprobs_for(0, len(call)))
    rollout.add_messages([{**TOOL_RESULT, "content": "sunny, 21C, light wind. " * 4}])
    assert rollout.done_reason is DoneReason.LENGTH
    return rollout, budget


@pytest.mark.parametrize("limit", ["max_length", "max_response_length"])
def test_an_episode_out_of_budget_is_flagged_the_way_of_each_stack(limit: str) -> None:
    """The tool result overran the budget: the loop stops before sampling again; every
    export leaves the result out, fits the budget and flags the episode."""
    rollout, budget = budget_overrun(limit, room=5)
    for stack, out in all_exports(rollout).items():
        response = len(out["mask"])
        total = len(out["tokens"])
        assert (total if limit == "max_length" else response) <= budget, stack
        if stack != "trl":  # TRL has no flag: the call ended with <|im_end|>
            assert out["flag"], stack


def test_a_response_longer_than_the_budget_is_cut_with_its_mask_and_logprobs() -> None:
    """A sampler that ignored ``max_tokens``: the export cuts the response at the budget
    (verl pads every response to ``response_length`` and fails on a longer one), with its
    mask and logprobs, and flags it."""
    r = renderer("qwen3")
    answer = sampled(r, START, ANSWER)
    rollout = r.rollout(START, max_response_length=len(answer) - 3)
    rollout.add_completion(answer, logprobs_for(0, len(answer)))
    assert rollout.done_reason is DoneReason.NO_TOOL_CALL  # the answer itself is whole
    for stack, out in all_exports(rollout).items():
        assert len(out["mask"]) == len(answer) - 3, stack
        assert out["tokens"][-len(out["mask"]) :] == answer[:-3], stack
        assert out["mask"] == [1] * (len(answer) - 3), stack
        assert out["logprobs"] == logprobs_for(0, len(answer))[:-3], stack
        assert out["flag"], stack


def test_a_dropped_stop_token_that_does_not_fit_is_cut_and_flagged() -> None:
    r = renderer("qwen3")
    answer = sampled(r, START, ANSWER)[:-1]
    rollout = r.rollout(START, max_response_length=len(answer))
    rollout.add_completion(answer, logprobs_for(0, len(answer)), finish_reason="stop")
    out = verl_agent_loop_output(rollout)
    assert out["response_ids"] == answer
    assert out["extra_fields"]["stop_reason"] == "length"


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
    ranges = openrlhf_agent_output(rollout, prompt="p", label=None)["action_ranges"]
    prompt_length = len(out["prompt_ids"])
    assert ranges[0] == (prompt_length, prompt_length + len(answer) - 1)
    assert ranges[1][1] == prompt_length + len(out["response_ids"])  # ends with <|return|>
    assert out["response_ids"][-1] == r.tokens.return_


def test_exporting_a_rollout_without_completions_is_an_error() -> None:
    rollout = renderer("qwen3").rollout(START)
    with pytest.raises(ValueError, match="no completion to export"):
        verl_agent_loop_output(rollout)
    with pytest.raises(ValueError, match=r"rollouts\[0\]: it has no completion to export"):
        trl_rollout_output([rollout])


def test_exports_without_logprobs_say_none() -> None:
    r = renderer("qwen3")
    rollout = r.rollout(START)
    rollout.add_completion(sampled(r, START, ANSWER))
    assert verl_agent_loop_output(rollout)["response_logprobs"] is None
    assert skyrl_generator_output([rollout], [1.0])["rollout_logprobs"] is None
    assert slime_sample(rollout)["rollout_log_probs"] is None
    assert openrlhf_agent_output(rollout, prompt="p", label=None)["rollout_log_probs"] is None
    assert trl_rollout_output([rollout])["logprobs"] is None
    assert np.isnan(rollout.logprobs).all()
