"""Rollouts in the shapes RL training stacks take, as plain data (no stack is imported).

Each function turns finished :class:`~renderers.rollout.Rollout` s into the dict (or the
batch of lists) one stack's rollout code builds, field for field, with the stack's own
conventions, read from its source at the version cited:

============================  ===================================================
:func:`verl_agent_loop_output`  verl ``AgentLoopOutput`` (an agent loop's ``run``)
:func:`skyrl_generator_output`  SkyRL ``GeneratorOutput`` (a generator's ``generate``)
:func:`slime_sample`            slime ``Sample`` (``Sample.from_dict``), custom generate
:func:`openrlhf_agent_output`   OpenRLHF agent executor's ``execute`` result
:func:`trl_rollout_output`      TRL ``GRPOTrainer(rollout_func=...)`` return value
============================  ===================================================

Shared conventions, which every stack above follows:

- *Prompt* is the initial prompt (:attr:`TurnKind.PROMPT`); *response* is everything
  after it up to the end of the last completion: sampled turns and the tool results /
  user turns between them. Messages added after the last completion (a prompt no sample
  followed) are left out: nothing sampled depends on them, and stacks put the reward on
  the response's last token.
- Masks are aligned with the tokens they describe (1 = the model sampled this token
  here, :attr:`Rollout.weights`), not shifted for next-token prediction: each stack
  shifts them itself when it computes logprobs (OpenRLHF's trainer drops the first
  position, ``action_mask[1:]``, the others slice the response after the prompt).
- Logprobs are the sampler's, aligned the same way; positions nothing was sampled at get
  0.0, as every stack writes them (a position whose sampled token the format replaced
  keeps its logprob, with mask 0). ``None`` when the rollout has no logprobs.
- The stop reason follows vLLM's finish reasons, which the stacks reuse: ``"length"``
  when the episode ran out of budget (:attr:`DoneReason.LENGTH`: a cut-off completion or
  no room for another turn), ``"stop"`` otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from renderers.rollout import DoneReason, Rollout, TurnKind

__all__ = [
    "openrlhf_agent_output",
    "skyrl_generator_output",
    "slime_sample",
    "trl_rollout_output",
    "verl_agent_loop_output",
]


@dataclass(frozen=True, slots=True)
class _Episode:
    """The trainable part of a rollout: the initial prompt and the response after it."""

    prompt_ids: list[int]
    response_ids: list[int]
    response_mask: list[int]
    response_logprobs: list[float] | None
    num_turns: int
    stop_reason: str
    done_reason: str | None


def _episode(rollout: Rollout) -> _Episode:
    turns = rollout.turns
    completions = [t for t in turns if t.kind is TurnKind.COMPLETION]
    if not completions:
        raise ValueError("rollout: it has no completion to export (add_completion first)")
    prompt_end, end = turns[0].end, completions[-1].end
    tokens = rollout.tokens
    mask = rollout.weights[prompt_end:end].astype(np.int64)
    logprobs = None
    if rollout.has_logprobs:
        values = rollout.logprobs[prompt_end:end].astype(np.float64)
        logprobs = np.where(np.isnan(values), 0.0, values).tolist()
    reason = rollout.done_reason
    return _Episode(
        prompt_ids=tokens[:prompt_end].tolist(),
        response_ids=tokens[prompt_end:end].tolist(),
        response_mask=mask.tolist(),
        response_logprobs=logprobs,
        num_turns=sum(1 for t in turns if t.end <= end),
        stop_reason="length" if reason is DoneReason.LENGTH else "stop",
        done_reason=None if reason is None else reason.value,
    )


def verl_agent_loop_output(
    rollout: Rollout,
    *,
    reward_score: float | None = None,
    extra_fields: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The fields of verl's ``AgentLoopOutput``, what an agent loop's ``run`` returns
    (``return AgentLoopOutput(**verl_agent_loop_output(rollout))``).

    Follows verl at commit 0003ed8 (``verl/experimental/agent_loop/agent_loop.py``) and
    its ``ToolAgentLoop`` (``tool_agent_loop.py`` at 1fc8e36):

    - ``prompt_ids``: the initial prompt;
    - ``response_ids``: every token after it, "LLM generated token, tool response token";
    - ``response_mask``: per response token, 1 where the model sampled it, 0 on tool
      responses and template tokens (verl pads and builds ``attention_mask`` itself);
    - ``response_logprobs``: per response token, the sampler's logprob, 0.0 where
      nothing was sampled (as ``ToolAgentLoop`` pads tool responses); ``None`` without
      logprobs;
    - ``reward_score``: the trajectory's reward if already known (else verl's reward
      manager computes it);
    - ``num_turns``: turns counted as ``ToolAgentLoop`` does (user + assistant + 1): the
      initial prompt, each completion, each block of inserted messages;
    - ``metrics``: ``{}`` (verl's ``AgentLoopMetrics`` defaults: no timings measured here);
    - ``extra_fields``: ``stop_reason`` (``"stop"`` / ``"length"``) and ``done_reason``
      (:class:`~renderers.rollout.DoneReason` value or ``None``), then ``extra_fields``.
    """
    e = _episode(rollout)
    return {
        "prompt_ids": e.prompt_ids,
        "response_ids": e.response_ids,
        "response_mask": e.response_mask,
        "response_logprobs": e.response_logprobs,
        "reward_score": reward_score,
        "num_turns": e.num_turns,
        "metrics": {},
        "extra_fields": {
            "stop_reason": e.stop_reason,
            "done_reason": e.done_reason,
            **(extra_fields or {}),
        },
    }


def skyrl_generator_output(
    rollouts: Sequence[Rollout], rewards: Sequence[float | Sequence[float]]
) -> dict[str, Any]:
    """SkyRL's ``GeneratorOutput``, what a generator's ``generate`` returns for a batch
    (one entry per rollout, in order).

    Follows SkyRL at commit 297e467 (``skyrl-train/skyrl_train/generators/base.py``) and
    the multi-turn, token-in-token-out path of ``SkyRLGymGenerator.agent_loop``
    (``skyrl_gym_generator.py`` at 63bda56):

    - ``prompt_token_ids``: each initial prompt;
    - ``response_ids``: each response (sampled turns and the observations between them);
    - ``rewards``: ``rewards`` as given, a float per trajectory or a list of per-token
      rewards (SkyRL places a turn's reward on its last token);
    - ``loss_masks``: per response token, 1 where the model sampled it, 0 on observations;
    - ``stop_reasons``: ``"stop"`` or ``"length"`` (SkyRL's ``zero_reward_on_non_stop``
      zeroes the reward of anything but ``"stop"``);
    - ``rollout_metrics``: ``None`` (SkyRL computes its own from the other fields);
    - ``rollout_logprobs``: per response token, the sampler's logprob, 0.0 on
      observations; ``None`` unless every rollout has logprobs.
    """
    if len(rewards) != len(rollouts):
        raise ValueError(f"rewards: expected one per rollout ({len(rollouts)}), got {len(rewards)}")
    episodes = [_episode(r) for r in rollouts]
    logprobs = [e.response_logprobs for e in episodes]
    return {
        "prompt_token_ids": [e.prompt_ids for e in episodes],
        "response_ids": [e.response_ids for e in episodes],
        "rewards": [r if isinstance(r, (int, float)) else list(r) for r in rewards],
        "loss_masks": [e.response_mask for e in episodes],
        "stop_reasons": [e.stop_reason for e in episodes],
        "rollout_metrics": None,
        "rollout_logprobs": None if any(lp is None for lp in logprobs) else logprobs,
    }


def slime_sample(
    rollout: Rollout,
    *,
    reward: float | dict[str, Any] | None = None,
    prompt: str | list[dict[str, Any]] | None = None,
    label: str | None = None,
) -> dict[str, Any]:
    """The fields a slime custom generate function fills on its ``Sample``, as the dict
    ``Sample.from_dict`` reads (``Sample.from_dict(slime_sample(rollout))``).

    Follows slime at commit 0d234f3 (``slime/utils/types.py``), the check its rollout
    manager makes (``slime/ray/rollout.py``: ``len(loss_mask) == response_length``) and
    its multi-turn example (``examples/search-r1/generate_with_search.py``):

    - ``prompt``: ``prompt`` if given, else the initial prompt's text;
    - ``tokens``: the initial prompt and the response, one list;
    - ``response``: the response's text (control tokens spelled out);
    - ``response_length``: the number of response tokens (the last ``response_length``
      of ``tokens``);
    - ``loss_mask``: per response token (not per token of ``tokens``), 1 where the model
      sampled it, 0 on tool results;
    - ``rollout_log_probs``: per response token, the sampler's logprob, 0.0 where
      nothing was sampled; ``None`` without logprobs;
    - ``reward``, ``label``: as given;
    - ``status``: ``"completed"``, or ``"truncated"`` when out of budget (slime's
      ``Sample.Status`` values, set from the sampler's finish reason);
    - ``metadata``: ``done_reason``.
    """
    e = _episode(rollout)
    return {
        "prompt": prompt if prompt is not None else rollout.renderer.table.decode(e.prompt_ids),
        "tokens": e.prompt_ids + e.response_ids,
        "response": rollout.renderer.table.decode(e.response_ids),
        "response_length": len(e.response_ids),
        "loss_mask": e.response_mask,
        "rollout_log_probs": e.response_logprobs,
        "reward": reward,
        "label": label,
        "status": "truncated" if e.stop_reason == "length" else "completed",
        "metadata": {"done_reason": e.done_reason},
    }


def openrlhf_agent_output(
    rollout: Rollout,
    *,
    reward: float | None = None,
    scores: float | None = None,
    prompt: str | None = None,
    label: str | None = None,
    extra_logs: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The dict an OpenRLHF agent executor's ``execute`` returns.

    Follows OpenRLHF at commit 04655bc (``openrlhf/utils/agent.py``,
    ``MultiTurnAgentExecutor``) and its consumer ``SamplesGenerator.
    _process_response_into_experience`` (``openrlhf/trainer/ppo_utils/
    samples_generator.py`` at 03912e4), which shifts by one itself
    (``action_mask[1:]``, ``rollout_log_probs[1:]``):

    - ``prompt``: ``prompt`` if given, else the initial prompt's text (OpenRLHF groups
      the samples of one prompt by this string);
    - ``label``, ``reward``, ``scores``: as given (``scores`` defaults to ``reward``);
    - ``observation_tokens``: the whole sequence, prompt and response;
    - ``action_ranges``: ``[start, end)`` positions in ``observation_tokens`` of the
      sampled tokens, one range per run (per completion, less a position the format
      replaced);
    - ``rollout_log_probs``: per token of ``observation_tokens``, the sampler's logprob,
      0.0 on prompt and environment tokens; ``None`` without logprobs;
    - ``extra_logs``: as given, else ``{}``;
    - ``truncated``: whether the episode ran out of budget (OpenRLHF's
      ``finish_reason == "length"``).
    """
    e = _episode(rollout)
    tokens = e.prompt_ids + e.response_ids
    mask = np.asarray([0] * len(e.prompt_ids) + e.response_mask, dtype=np.int8)
    edges = np.flatnonzero(np.diff(np.concatenate(([0], mask, [0]))))
    ranges = [(int(s), int(t)) for s, t in zip(edges[::2], edges[1::2], strict=True)]
    logprobs = None
    if e.response_logprobs is not None:
        logprobs = [0.0] * len(e.prompt_ids) + e.response_logprobs
    return {
        "prompt": prompt if prompt is not None else rollout.renderer.table.decode(e.prompt_ids),
        "label": label,
        "reward": reward,
        "scores": reward if scores is None else scores,
        "observation_tokens": tokens,
        "action_ranges": ranges,
        "rollout_log_probs": logprobs,
        "extra_logs": dict(extra_logs or {}),
        "truncated": e.stop_reason == "length",
    }


def trl_rollout_output(rollouts: Sequence[Rollout]) -> dict[str, Any]:
    """What a TRL ``rollout_func(prompts, trainer)`` returns for its prompts' rollouts
    (one entry per rollout, ``num_generations`` per prompt, in order).

    Follows TRL 1.16.0 (``trl/trainer/grpo_trainer.py``, ``GRPOTrainer._generate``):

    - ``prompt_ids``: each initial prompt (TRL left-pads them);
    - ``completion_ids``: each response, tool results and user turns included (TRL
      right-pads them and counts a completion as truncated when its last id is not an
      end-of-sequence id of the model);
    - ``logprobs``: per completion token, the sampler's logprob, 0.0 where nothing was
      sampled (as TRL's own tool loop pads tool results); ``None`` unless every rollout
      has logprobs;
    - ``env_mask``: per completion token, 1 where the model sampled it, 0 on environment
      tokens (TRL multiplies it into its loss mask).
    """
    episodes = [_episode(r) for r in rollouts]
    logprobs = [e.response_logprobs for e in episodes]
    return {
        "prompt_ids": [e.prompt_ids for e in episodes],
        "completion_ids": [e.response_ids for e in episodes],
        "logprobs": None if any(lp is None for lp in logprobs) else logprobs,
        "env_mask": [e.response_mask for e in episodes],
    }
