"""The exports through the training stacks' own code: one batch mixing a normal episode,
one cut off by the budget, one whose sampler ignored the budget and one whose sampler
dropped the stop token.

- TRL 1.16: ``GRPOTrainer`` with a ``rollout_func`` trains a step on the batch (a tiny
  randomly initialised Qwen3 from the cached config, on CPU).
- verl 0.9.1: ``AgentLoopOutput``, ``AgentLoopWorker._agent_loop_postprocess`` (pads
  each sample to ``prompt_length`` / ``response_length``) and ``AgentLoopWorker.
  _postprocess`` (stacks the batch). verl's wheel pins ``transformers<5.11``, which the
  project's environment does not allow; the code this test runs works with the project's
  transformers, so ``.ci/run`` installs verl without its pins (``pip install --no-deps
  verl==0.9.1`` and the modules it imports on this path: ``tensordict codetiming
  hydra-core cachetools fastapi uvicorn``). Elsewhere the test skips, saying so; in CI a
  skip is a failure (``RENDERERS_NO_SKIPS``, ``tests/conftest.py``).

SkyRL, slime and OpenRLHF do not install on a CPU-only Python 3.11 machine; their
contracts are pinned in ``tests/test_rl_exports.py``.
"""

from __future__ import annotations

import asyncio
import functools
from types import SimpleNamespace
from typing import Any

import pytest

from renderers.rl_exports import trl_rollout_output, verl_agent_loop_output
from renderers.rollout import DoneReason, Rollout
from tests.test_rollout_rl import START, TOOL_RESULT, TOOLS, logprobs_for, qwen3_ids, renderer

CALL = qwen3_ids(
    '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call><|im_end|>'
)
ANSWER = qwen3_ids("It is sunny in Paris, 21C.<|im_end|>")
LONG_ANSWER = qwen3_ids(
    "It is sunny in Paris, 21C, with a light wind from the west and clear skies all day.<|im_end|>"
)


pytestmark = pytest.mark.slow  # see pyproject.toml: left out of the quick subset
KINDS = ("normal", "length-cut", "over-budget", "stop-dropped")


def episode(kind: str, budget: int) -> Rollout:
    """A call, its result, then an answer, sampled as ``kind`` says, within
    ``max_response_length=budget``."""
    r = renderer("qwen3")
    answer = {"normal": ANSWER, "stop-dropped": ANSWER[:-1]}.get(kind, LONG_ANSWER)
    finish = {"stop-dropped": "stop", "length-cut": "length"}.get(kind)
    rollout = r.rollout(START, tools=TOOLS, max_response_length=budget)
    for k, ids in enumerate([CALL, answer]):
        room = rollout.max_tokens(1024)
        if kind != "over-budget":  # that sampler ignores max_tokens
            ids = ids[:room]
        rollout.add_completion(ids, logprobs_for(k, len(ids)), finish_reason=finish)
        if not rollout.done:
            rollout.add_messages([TOOL_RESULT])
    return rollout


@functools.cache
def mixed_batch() -> tuple[int, list[Rollout]]:
    """The response budget and the four episodes: the normal one and the stop-dropped one
    fit in it, the others outgrow it."""
    probe = episode("normal", 1 << 20)
    budget = len(probe.tokens) - probe.turns[0].end + 2
    rollouts = [episode(kind, budget) for kind in KINDS]
    reasons = [r.done_reason for r in rollouts]
    assert reasons == [DoneReason.NO_TOOL_CALL, DoneReason.LENGTH] + [DoneReason.NO_TOOL_CALL] * 2
    return budget, rollouts


# -- TRL ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def trl_step(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One GRPO step of TRL on the mixed batch, with ``mask_truncated_completions``: what
    ``rollout_func`` returned, the inputs TRL computed the loss on, its log, and whether
    the model changed."""
    torch = pytest.importorskip("torch")
    trl = pytest.importorskip("trl")
    datasets = pytest.importorskip("datasets")
    from tests.test_rl_loop import tiny_model

    r = renderer("qwen3")
    budget, rollouts = mixed_batch()
    exported: list[dict[str, Any]] = []
    seen: list[dict[str, Any]] = []

    def rollout_func(prompts: list[Any], trainer: Any) -> dict[str, Any]:
        assert len(prompts) == len(rollouts)  # two prompts, two generations each
        exported.append(trl_rollout_output(rollouts))
        return exported[-1]

    class RecordingTrainer(trl.GRPOTrainer):  # type: ignore[misc]
        def compute_loss(self, model: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
            seen.append({k: v for k, v in inputs.items() if isinstance(v, torch.Tensor)})
            return super().compute_loss(model, inputs, *args, **kwargs)

    model = tiny_model(r.default_model, seed=1)
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is experimental
        trainer = RecordingTrainer(
            model=model,
            reward_funcs=[lambda completion_ids, **_: [float(len(c)) for c in completion_ids]],
            args=trl.GRPOConfig(
                output_dir=str(tmp_path_factory.mktemp("grpo")),
                per_device_train_batch_size=len(rollouts),
                num_generations=2,
                max_completion_length=budget,
                mask_truncated_completions=True,
                max_steps=1,
                learning_rate=1e-2,
                logging_steps=1,
                report_to="none",
                save_strategy="no",
                use_cpu=True,
                gradient_checkpointing=False,
            ),
            train_dataset=datasets.Dataset.from_dict(
                {"prompt": [[{"role": "user", "content": f"Weather in {c}?"}] for c in "AB"]}
            ),
            processing_class=r.tokenizer,
            rollout_func=rollout_func,
        )
        trainer.train()
    (out,) = exported
    (inputs,) = seen
    changed = any(not torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    return {"out": out, "inputs": inputs, "log": trainer.state.log_history[0], "changed": changed}


def test_trl_trains_on_the_mixed_batch_and_counts_only_the_cut_episodes_as_clipped(
    trl_step: dict[str, Any],
) -> None:
    out, log = trl_step["out"], trl_step["log"]
    budget, _ = mixed_batch()
    assert all(len(c) <= budget for c in out["completion_ids"])
    # TRL: clipped when the last id is not an end-of-sequence id. The closed stop-dropped
    # episode is not; the two cut at the budget are.
    assert log["completions/clipped_ratio"] == pytest.approx(2 / 4)
    trained = [sum(mask) for mask in out["env_mask"]]
    assert log["completions/mean_length"] == pytest.approx(sum(trained) / 4)
    assert trl_step["changed"]
    print(  # the figures, for a reader running it by hand (-s)
        "trl",
        [len(c) for c in out["completion_ids"]],
        "env_mask sums",
        trained,
        "clipped_ratio",
        log["completions/clipped_ratio"],
        "loss",
        log["loss"],
    )


def test_trl_trains_on_the_stop_dropped_episode_and_masks_the_cut_ones(
    trl_step: dict[str, Any],
) -> None:
    """With ``mask_truncated_completions`` TRL zeroes the loss of a clipped episode: the
    stop-dropped one keeps every sampled token, the closing stop token excluded."""
    out, inputs = trl_step["out"], trl_step["inputs"]
    pad = renderer("qwen3").tokenizer.pad_token_id
    loss_mask = (inputs["completion_mask"] * inputs["tool_mask"]).tolist()
    unmatched = list(range(len(KINDS)))
    for row, (ids, tool_mask) in enumerate(
        zip(inputs["completion_ids"].tolist(), inputs["tool_mask"].tolist(), strict=True)
    ):
        # TRL shuffles the batch: find the episode by its ids and environment mask (which
        # TRL zeroes for a clipped episode, along with its completion mask).
        k = next(
            k
            for k in unmatched
            if ids == out["completion_ids"][k] + [pad] * (len(ids) - len(out["completion_ids"][k]))
            and tool_mask[: len(out["env_mask"][k])]
            in (out["env_mask"][k], [0] * len(out["env_mask"][k]))
        )
        unmatched.remove(k)
        if KINDS[k] in ("length-cut", "over-budget"):
            assert sum(loss_mask[row]) == 0, KINDS[k]
        else:
            env_mask = out["env_mask"][k]
            assert loss_mask[row] == env_mask + [0] * (len(ids) - len(env_mask)), KINDS[k]
    stop_dropped = KINDS.index("stop-dropped")
    ids, env_mask = out["completion_ids"][stop_dropped], out["env_mask"][stop_dropped]
    assert ids[-1] == ANSWER[-1] and env_mask[-1] == 0  # <|im_end|>, not sampled
    assert sum(env_mask) > 0


# -- verl -----------------------------------------------------------------------------------


def test_verl_pads_and_stacks_the_mixed_batch() -> None:
    """verl's own postprocessing takes the batch: every response fits ``response_length``
    (a longer one fails ``_postprocess``: "Sizes of tensors must match"), masks and
    logprobs land where verl pads them, and the reward lands on the last token verl sees,
    the appended stop token of the stop-dropped episode."""
    verl = pytest.importorskip("verl")
    from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, AgentLoopWorker

    r = renderer("qwen3")
    budget, rollouts = mixed_batch()
    outputs = [verl_agent_loop_output(x, reward_score=float(k)) for k, x in enumerate(rollouts)]
    prompt_length = max(len(o["prompt_ids"]) for o in outputs) + 3
    worker = AgentLoopWorker.__new__(AgentLoopWorker)  # the methods under test, no Ray actor
    worker.rollout_config = SimpleNamespace(prompt_length=prompt_length, response_length=budget)
    worker.tokenizer = r.tokenizer
    worker.processor = None  # a text model (verl: model_config.processor)
    worker.mm_processor_kwargs = {}  # verl: config.data.get("mm_processor_kwargs", {})
    worker.reward_loop_worker_handles = None
    worker.distillation_enabled = False

    async def postprocess() -> Any:
        padded = [
            await worker._agent_loop_postprocess(
                AgentLoopOutput(**o), validate=False, raw_prompt=START
            )
            for o in outputs
        ]
        return worker._postprocess(padded)

    batch = asyncio.run(postprocess()).batch
    assert tuple(batch["responses"].shape) == (4, budget)
    assert tuple(batch["input_ids"].shape) == (4, prompt_length + budget)
    lengths = batch["attention_mask"][:, prompt_length:].sum(-1).tolist()
    assert lengths == [len(o["response_ids"]) for o in outputs]
    assert [n == budget for n in lengths] == [False, True, True, False]  # verl's clip test
    for row, o in enumerate(outputs):
        n = len(o["response_ids"])
        assert batch["responses"][row, :n].tolist() == o["response_ids"]
        assert batch["response_mask"][row].tolist() == o["response_mask"] + [0] * (budget - n)
        assert batch["rollout_log_probs"][row, :n].tolist() == pytest.approx(o["response_logprobs"])
        prompt = batch["prompts"][row, prompt_length - len(o["prompt_ids"]) :].tolist()
        assert prompt == o["prompt_ids"]
        scores = batch["rm_scores"][row]
        assert scores[n - 1] == float(row) and scores.abs().sum() == float(row)
    stop_dropped = KINDS.index("stop-dropped")
    n = lengths[stop_dropped]
    assert batch["responses"][stop_dropped, n - 1] == ANSWER[-1]  # <|im_end|>, appended
    assert batch["response_mask"][stop_dropped, n - 1] == 0
    assert batch["rollout_log_probs"][stop_dropped, n - 1] == 0.0
    print(  # the figures, for a reader running it by hand (-s)
        "verl",
        verl.__version__,
        "responses",
        tuple(batch["responses"].shape),
        "lengths",
        lengths,
        "mask sums",
        batch["response_mask"].sum(-1).tolist(),
    )
