"""Rollouts in the shapes RL training stacks take, as plain data (no stack is imported).

Each function turns finished :class:`~renderers.rollout.Rollout` s into the dict (or the
batch of lists) one stack's rollout code builds, field for field, with the stack's own
conventions, read from its source at the version cited:

==============================  ===================================================
:func:`verl_agent_loop_output`  verl ``AgentLoopOutput`` (an agent loop's ``run``)
:func:`skyrl_generator_output`  SkyRL ``GeneratorOutput`` (a generator's ``generate``)
:func:`fill_slime_sample`       slime ``Sample`` filled in place (a custom generate)
:func:`slime_sample`            the same fields as the dict ``Sample.from_dict`` reads
:func:`openrlhf_agent_output`   OpenRLHF agent executor's ``execute`` result
:func:`trl_rollout_output`      TRL ``GRPOTrainer(rollout_func=...)`` return value
==============================  ===================================================

Shared conventions, which every stack above follows:

- *Prompt* is the initial prompt (:attr:`TurnKind.PROMPT`); *response* is everything
  after it up to the end of the last completion: sampled turns and the tool results /
  user turns between them. Messages added after the last completion (a prompt no sample
  followed) are left out: nothing sampled depends on them, and stacks put the reward on
  the response's last token.
- A last turn the sampler stopped without returning its stop token (``finish_reason=
  "stop"``) is closed: :meth:`Rollout.closing_ids` (the stop token, after the closers of
  a block left open) ends the response with mask 0 and logprob 0.0, as SkyRL's own
  generator appends the end-of-sequence token it did not sample. Without it TRL counts
  the episode as clipped and SkyRL's batching, which assumes a final stop token, does not
  get one.
- The response never exceeds the rollout's limits, which stand for the stack's:
  ``max_response_length`` (verl's ``response_length``; TRL's ``max_completion_length``)
  and ``max_length`` less the prompt (OpenRLHF's ``max_len``, SkyRL's and slime's context
  length). A longer one (new messages past the budget, a sampler that ignored
  ``max_tokens``) is cut there, mask and logprobs with it, as verl's ``ToolAgentLoop`` cuts
  ``response_ids[: response_length]``, and the episode counts as out of budget.
- Masks are aligned with the tokens they describe (1 = the model sampled this token
  here, :attr:`Rollout.weights`), not shifted for next-token prediction: each stack
  shifts them itself when it computes logprobs (OpenRLHF's trainer drops the first
  position, ``action_mask[1:]``, the others slice the response after the prompt).
- Logprobs are the sampler's, aligned the same way; positions nothing was sampled at get
  0.0, as every stack writes them (a position whose sampled token the format replaced
  keeps its logprob, with mask 0). ``None`` when the rollout has no logprobs; a batch
  mixing rollouts with and without them is refused.
- *Out of budget* (the episode ran out of room: :attr:`DoneReason.LENGTH`, or cut here)
  is told each stack's own way, where it has one: SkyRL ``stop_reasons`` ``"length"``
  (else ``"stop"``); slime ``status`` ``Sample.Status.TRUNCATED`` (else ``COMPLETED``);
  OpenRLHF ``truncated``; verl has no such field (its metrics count a response of
  exactly ``response_length`` as clipped; ``extra_fields`` carries ``stop_reason`` for
  the caller); TRL has none either (it counts a completion whose last id is not an
  end-of-sequence id as clipped, which a cut response is, unless the cut falls right
  after one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from renderers.rollout import DoneReason, Rollout, TurnKind

__all__ = [
    "fill_slime_sample",
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
    truncated: bool
    done_reason: str | None

    @property
    def stop_reason(self) -> str:
        """vLLM's finish reason for the episode, as SkyRL spells it."""
        return "length" if self.truncated else "stop"


def _response_limit(rollout: Rollout, prompt_length: int) -> int | None:
    """The most response tokens the rollout's limits allow (``None``: no limit)."""
    bounds = [
        b
        for b in (
            rollout.limits.max_response_length,
            None
            if rollout.limits.max_length is None
            else rollout.limits.max_length - prompt_length,
        )
        if b is not None
    ]
    return min(bounds) if bounds else None


def _episode(rollout: Rollout, where: str = "rollout") -> _Episode:
    turns = rollout.turns
    completions = [t for t in turns if t.kind is TurnKind.COMPLETION]
    if not completions:
        raise ValueError(f"{where}: it has no completion to export (add_completion first)")
    prompt_end, end = turns[0].end, completions[-1].end
    limit = _response_limit(rollout, prompt_end)
    if limit is not None and limit < 1:
        raise ValueError(
            f"{where}: its prompt ({prompt_end} tokens) leaves no room for a response under "
            f"max_length={rollout.limits.max_length}"
        )
    closing = rollout.closing_ids()
    response = [*rollout.tokens[prompt_end:end].tolist(), *closing]
    mask = [*rollout.weights[prompt_end:end].astype(np.int64).tolist(), *[0] * len(closing)]
    logprobs = None
    if rollout.has_logprobs:
        values = rollout.logprobs[prompt_end:end].astype(np.float64)
        logprobs = [*np.where(np.isnan(values), 0.0, values).tolist(), *[0.0] * len(closing)]
    cut = limit is not None and len(response) > limit
    if cut:
        response, mask = response[:limit], mask[:limit]
        logprobs = None if logprobs is None else logprobs[:limit]
    reason = rollout.done_reason
    return _Episode(
        prompt_ids=rollout.tokens[:prompt_end].tolist(),
        response_ids=response,
        response_mask=mask,
        response_logprobs=logprobs,
        num_turns=sum(1 for t in turns if t.end <= end),
        truncated=cut or reason is DoneReason.LENGTH,
        done_reason=None if reason is None else reason.value,
    )


def _episodes(rollouts: Sequence[Rollout]) -> list[_Episode]:
    """The episodes of a batch, which must not be empty nor mix rollouts with and without
    logprobs (a stack takes logprobs for the whole batch or for none of it)."""
    if not rollouts:
        raise ValueError("rollouts: expected at least one, got none")
    episodes = [_episode(r, f"rollouts[{i}]") for i, r in enumerate(rollouts)]
    without = [i for i, e in enumerate(episodes) if e.response_logprobs is None]
    if without and len(without) < len(episodes):
        raise ValueError(
            f"rollouts: rollouts {without} have no logprobs but the others do; give logprobs "
            "for every rollout of a batch or for none"
        )
    return episodes


def verl_agent_loop_output(
    rollout: Rollout,
    *,
    reward_score: float | None = None,
    extra_fields: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The fields of verl's ``AgentLoopOutput``, what an agent loop's ``run`` returns
    (``return AgentLoopOutput(**verl_agent_loop_output(rollout))``).

    Follows verl 0.9.1 (the PyPI release): ``verl/experimental/agent_loop/agent_loop.py``
    (``AgentLoopOutput``; ``AgentLoopWorker._agent_loop_postprocess``, which pads the
    prompt to ``prompt_length`` and the response to ``response_length`` and fails on a
    longer one; ``AgentLoopWorker._postprocess``, which stacks a batch) and
    ``tool_agent_loop.py`` (``ToolAgentLoop.run``, which cuts the response at
    ``response_length``). Give the rollout ``max_response_length=response_length``.

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
      (:class:`~renderers.rollout.DoneReason` value or ``None``), then ``extra_fields``
      (verl keeps them per sample in its batch; its trainer reads neither).
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


def _batch_logprobs(episodes: list[_Episode]) -> list[list[float]] | None:
    """Each episode's response logprobs, or ``None`` when they have none (all or none)."""
    logprobs = [e.response_logprobs for e in episodes]
    return None if logprobs[0] is None else [lp for lp in logprobs if lp is not None]


def skyrl_generator_output(
    rollouts: Sequence[Rollout], rewards: Sequence[float | Sequence[float]]
) -> dict[str, Any]:
    """SkyRL's ``GeneratorOutput``, what a generator's ``generate`` returns for a batch
    (one entry per rollout, in order).

    Follows SkyRL at commit a956457 (``skyrl/train/generators/base.py``,
    ``GeneratorOutput``), the multi-turn, token-in-token-out path of
    ``SkyRLGymGenerator.agent_loop`` (``skyrl/train/generators/skyrl_gym_generator.py``)
    and the checks of ``validate_generator_output`` (``skyrl/train/utils/
    trainer_utils.py``), which this export makes itself:

    - ``prompt_token_ids``: each initial prompt;
    - ``response_ids``: each response (sampled turns and the observations between them);
    - ``rewards``: ``rewards`` as given, all floats (one per trajectory) or all lists of
      per-token rewards, one per exported response token (SkyRL refuses a mix; SkyRL
      places a turn's reward on its last token);
    - ``loss_masks``: per response token, 1 where the model sampled it, 0 on observations
      and on a stop token appended here (as ``agent_loop`` masks the end-of-sequence
      token it appends after a stop string);
    - ``stop_reasons``: ``"stop"``, or ``"length"`` when out of budget (as ``agent_loop``
      reports an episode whose input outgrew ``max_input_length``). SkyRL applies
      ``zero_reward_on_non_stop`` and ``apply_overlong_filtering`` to them only in
      ``SkyRLGymGenerator.generate``: a custom generator returning this applies them
      itself (``skyrl/train/generators/utils.py``);
    - ``rollout_metrics``: ``None`` (SkyRL computes its own from the other fields);
    - ``rollout_logprobs``: per response token, the sampler's logprob, 0.0 on
      observations; ``None`` when the rollouts have no logprobs.
    """
    if len(rewards) != len(rollouts):
        raise ValueError(f"rewards: expected one per rollout ({len(rollouts)}), got {len(rewards)}")
    episodes = _episodes(rollouts)
    per_token = [not isinstance(r, (int, float)) for r in rewards]
    if any(per_token) and not all(per_token):
        first = per_token.index(not per_token[0])
        raise ValueError(
            f"rewards: expected a float per rollout or per-token rewards for every rollout, "
            f"not both (rewards[0] is {_kind(per_token[0])}, rewards[{first}] "
            f"{_kind(per_token[first])}): SkyRL refuses a batch that mixes them"
        )
    checked: list[float | list[float]] = []
    for i, (reward, episode) in enumerate(zip(rewards, episodes, strict=True)):
        if isinstance(reward, (int, float)):
            checked.append(reward)
            continue
        values = list(reward)
        if len(values) != len(episode.response_ids):
            raise ValueError(
                f"rewards[{i}]: expected one per response token ({len(episode.response_ids)}: "
                f"the exported response), got {len(values)}"
            )
        checked.append(values)
    return {
        "prompt_token_ids": [e.prompt_ids for e in episodes],
        "response_ids": [e.response_ids for e in episodes],
        "rewards": checked,
        "loss_masks": [e.response_mask for e in episodes],
        "stop_reasons": [e.stop_reason for e in episodes],
        "rollout_metrics": None,
        "rollout_logprobs": _batch_logprobs(episodes),
    }


def _kind(per_token: bool) -> str:
    return "a list of per-token rewards" if per_token else "a float"


def _slime_fields(e: _Episode, rollout: Rollout) -> dict[str, Any]:
    """The fields of a slime ``Sample`` a multi-turn generate function fills."""
    return {
        "tokens": e.prompt_ids + e.response_ids,
        "response": rollout.renderer.table.decode(e.response_ids),
        "response_length": len(e.response_ids),
        "loss_mask": e.response_mask,
        "rollout_log_probs": e.response_logprobs,
    }


def fill_slime_sample(sample: Any, rollout: Rollout, *, reward: Any = None) -> Any:
    """Fill the slime ``Sample`` a custom generate function received with the rollout;
    returns it (``return fill_slime_sample(sample, rollout)``).

    Follows slime at commit 624b824 (``slime/utils/types.py``, ``Sample``) and its
    multi-turn example (``examples/search-r1/generate_with_search.py``, ``generate``),
    which fills the sample it is given; ``RolloutManager._convert_samples_to_train_data``
    (``slime/ray/rollout.py``) then checks ``len(loss_mask) == response_length`` and
    reads ``status == Sample.Status.TRUNCATED``. Sets:

    - ``tokens``: the initial prompt and the response, one list;
    - ``response``: the response's text (control tokens spelled out);
    - ``response_length``: the number of response tokens (the last ``response_length``
      of ``tokens``);
    - ``loss_mask``: per response token (not per token of ``tokens``), 1 where the model
      sampled it, 0 on tool results;
    - ``rollout_log_probs``: per response token, the sampler's logprob, 0.0 where
      nothing was sampled; ``None`` without logprobs;
    - ``status``: the sample's ``Sample.Status.TRUNCATED`` when out of budget, else
      ``COMPLETED`` (the enum member, as slime compares it);
    - ``metadata["done_reason"]``: the :class:`~renderers.rollout.DoneReason` value;
    - ``reward``: when given.

    Everything else the sample holds is kept (``index``, ``group_index``, ``prompt``,
    ``label``, ``session_id``, the rest of ``metadata``, ...).
    """
    status = getattr(sample, "Status", None)
    if status is None or not hasattr(status, "TRUNCATED"):
        raise ValueError(
            f"sample: expected a slime Sample (with Sample.Status), got {type(sample).__name__}"
        )
    e = _episode(rollout)
    for name, value in _slime_fields(e, rollout).items():
        setattr(sample, name, value)
    sample.status = status.TRUNCATED if e.truncated else status.COMPLETED
    if sample.metadata is None:
        sample.metadata = {}
    sample.metadata["done_reason"] = e.done_reason
    if reward is not None:
        sample.reward = reward
    return sample


def slime_sample(
    rollout: Rollout,
    *,
    reward: float | dict[str, Any] | None = None,
    prompt: str | list[dict[str, Any]] | None = None,
    label: str | None = None,
) -> dict[str, Any]:
    """The fields of :func:`fill_slime_sample` as the dict ``Sample.from_dict`` reads
    (``Sample.from_dict(slime_sample(rollout))``), for code that builds new samples;
    a generate function fills the sample it received instead (``from_dict`` would drop
    its ``index``, ``group_index``, ``session_id`` and ``metadata``).

    Adds ``prompt`` (``prompt`` if given, else the initial prompt's text), ``reward`` and
    ``label`` as given, ``status`` as its value (``"completed"`` / ``"truncated"``,
    which ``Sample.from_dict`` turns into the enum member) and ``metadata``
    (``done_reason``).
    """
    e = _episode(rollout)
    return {
        "prompt": prompt if prompt is not None else rollout.renderer.table.decode(e.prompt_ids),
        **_slime_fields(e, rollout),
        "reward": reward,
        "label": label,
        "status": "truncated" if e.truncated else "completed",
        "metadata": {"done_reason": e.done_reason},
    }


def openrlhf_agent_output(
    rollout: Rollout,
    *,
    prompt: Any,
    label: Any,
    reward: float | None = None,
    scores: float | None = None,
    extra_logs: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The dict an OpenRLHF agent executor's ``execute(prompt, label, ...)`` returns.

    Follows OpenRLHF v0.11.0 (commit 3c3be62): ``openrlhf/utils/agent.py``
    (``MultiTurnAgentExecutor.execute``) and its consumer
    ``SamplesGenerator._process_response_into_experience``
    (``openrlhf/trainer/ppo_utils/samples_generator.py``), which cuts everything at
    ``max_len`` and shifts by one itself (``action_mask[1:]``, ``rollout_log_probs[1:]``):

    - ``prompt``, ``label``: those ``execute`` was given, passed through. OpenRLHF groups
      the samples of a prompt by their order in the batch, not by this string
      (``experience_maker.py``: ``rewards.reshape(-1, n_samples_per_prompt)``), but its
      evaluation looks the string up to find the sample's data source
      (``ppo_trainer.py``, ``compute_eval_metrics``): it must be the dataset's prompt;
    - ``reward``, ``scores``: as given (``scores`` defaults to ``reward``);
    - ``observation_tokens``: the whole sequence, prompt and response;
    - ``action_ranges``: ``[start, end)`` positions in ``observation_tokens`` of the
      sampled tokens, one range per run (per completion, less a position the format
      replaced);
    - ``rollout_log_probs``: per token of ``observation_tokens``, the sampler's logprob,
      0.0 on prompt and environment tokens; ``None`` without logprobs;
    - ``extra_logs``: as given, else ``{}``;
    - ``truncated``: whether the episode ran out of budget (read into the experience's
      ``truncated``; OpenRLHF's single-turn executor sets it from
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
        "prompt": prompt,
        "label": label,
        "reward": reward,
        "scores": reward if scores is None else scores,
        "observation_tokens": tokens,
        "action_ranges": ranges,
        "rollout_log_probs": logprobs,
        "extra_logs": dict(extra_logs or {}),
        "truncated": e.truncated,
    }


def trl_rollout_output(rollouts: Sequence[Rollout]) -> dict[str, Any]:
    """What a TRL ``rollout_func(prompts, trainer)`` returns for its prompts' rollouts
    (one entry per rollout, ``num_generations`` per prompt, in order).

    Follows TRL 1.16.0 (``trl/trainer/grpo_trainer.py``, ``GRPOTrainer._generate`` and
    ``_generate_and_score_completions``):

    - ``prompt_ids``: each initial prompt (TRL left-pads them);
    - ``completion_ids``: each response, tool results and user turns included (TRL
      right-pads them, and counts a completion as clipped when its last id is not an
      end-of-sequence id of the model: with ``mask_truncated_completions`` it trains on
      none of it);
    - ``logprobs``: per completion token, the sampler's logprob, 0.0 where nothing was
      sampled (as TRL's own tool loop pads tool results); ``None`` when the rollouts have
      no logprobs;
    - ``env_mask``: per completion token, 1 where the model sampled it, 0 on environment
      tokens (TRL multiplies it into its loss mask).
    """
    episodes = _episodes(rollouts)
    return {
        "prompt_ids": [e.prompt_ids for e in episodes],
        "completion_ids": [e.response_ids for e in episodes],
        "logprobs": _batch_logprobs(episodes),
        "env_mask": [e.response_mask for e in episodes],
    }
