"""The README's rollout loop with a real sampler, and at every length boundary.

The sampler is a tiny randomly initialised causal LM built from the cached Qwen3-8B and
gpt-oss-20b configurations (two layers, hidden size 64, a few experts; CPU, no weights)
and sampled with ``transformers``' ``generate`` under the renderer's stop tokens. Its
text is noise, so a logits processor keeps it inside a script (fixed ids where the turn
needs structure, free letters elsewhere); the logprobs it returns are the model's own
(raw logits, as vLLM reports them by default). One forward pass of the same model over
the final ``rollout.tokens`` must then give the stored logprobs at the sampled positions,
compared as whole vectors: the cached, token-by-token computation of ``generate`` and one
pass over the whole sequence round differently in float32 (up to 2e-3 at a position,
1.5e-4 on average, logprobs being about -12 here), and with a random model a one-position
shift can come as close as 5e-3 at a position, so no per-position tolerance separates
them; on average the aligned vector is within 5e-3 and every vector read one or two
positions off is more than ten times as far (about 0.15). Every weight-1 position must
hold the id sampled there.
"""

from __future__ import annotations

import functools
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    GenerationConfig,
    LogitsProcessor,
    LogitsProcessorList,
)

from renderers.registry import renderer_names
from renderers.rl_exports import verl_agent_loop_output
from renderers.rollout import DoneReason, TurnKind
from tests.test_rollout_rl import (
    ANSWER,
    CALL,
    TOOL_RESULT,
    logprobs_for,
    renderer,
    sampled,
    with_stop,
)

pytestmark = pytest.mark.slow  # see pyproject.toml: left out of the quick subset

README = Path(__file__).resolve().parents[1] / "README.md"
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def readme_rl_blocks() -> list[str]:
    """The Python blocks of the README's multi-turn RL section, in order."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Multi-turn RL") :]
    section = section[: section.index("\n## ", 1)]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 2, "the RL section: a setup block, then the loop"
    return blocks


def tiny_model(model_id: str, seed: int = 0) -> Any:
    """A randomly initialised two-layer model of ``model_id``'s architecture and vocabulary."""
    config = AutoConfig.from_pretrained(model_id)
    shrink: dict[str, Any] = {
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
    }
    if config.model_type == "gpt_oss":
        del config.quantization_config  # the checkpoint's MXFP4 weights are not loaded
        shrink.update(
            intermediate_size=64,
            num_local_experts=4,
            num_experts_per_tok=2,
            experts_per_token=2,
            layer_types=["sliding_attention", "full_attention"],
        )
    config.update(shrink)
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config).eval()


@functools.cache
def cached_model(model_id: str) -> Any:
    return tiny_model(model_id)


class Script(LogitsProcessor):
    """Keeps generation inside a script: the script's id where it has one, one of
    ``free`` where it has ``None``; unconstrained past its end."""

    def __init__(self, prompt_length: int, script: list[int | None], free: list[int]) -> None:
        self.prompt_length = prompt_length
        self.script = script
        self.free = torch.tensor(free)

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> Any:
        step = input_ids.shape[1] - self.prompt_length
        if step >= len(self.script):
            return scores
        allowed = self.free if self.script[step] is None else torch.tensor([self.script[step]])
        masked = torch.full_like(scores, -torch.inf)
        masked[:, allowed] = scores[:, allowed]
        return masked


def script(r: Any, *pieces: str | int) -> list[int | None]:
    """Text pieces (control-token spellings are tokens) and counts of free tokens."""
    out: list[int | None] = []
    for piece in pieces:
        if isinstance(piece, int):
            out += [None] * piece
        else:
            out += r.tokenizer.encode(piece, add_special_tokens=False)
    return out


class ModelSampler:
    """``sample(prompt_ids, stop, max_tokens) -> (ids, logprobs)`` with ``generate``,
    one script per call; remembers what it was asked and what it sampled."""

    def __init__(self, model: Any, r: Any, scripts: list[list[int | None]]) -> None:
        self.model = model
        self.scripts = scripts
        self.free = [r.table.encode(c)[0] for c in LETTERS]
        self.pad = r.stop_token_ids[-1]
        self.calls: list[tuple[list[int], list[int], list[float]]] = []

    def __call__(
        self, prompt_ids: list[int], stop: tuple[int, ...], max_tokens: int
    ) -> tuple[list[int], list[float]]:
        prompt = torch.tensor([prompt_ids])
        config = GenerationConfig(
            do_sample=True,
            temperature=1.0,
            top_k=0,  # no top-k / top-p: sample from the (scripted) distribution
            top_p=1.0,
            max_new_tokens=max_tokens,
            eos_token_id=list(stop),
            pad_token_id=self.pad,
            output_logits=True,
            return_dict_in_generate=True,
            use_cache=True,  # a trainer may have turned the cache off for training
        )
        processor = Script(len(prompt_ids), self.scripts[len(self.calls)], self.free)
        with torch.no_grad():
            out = self.model.generate(
                prompt, generation_config=config, logits_processor=LogitsProcessorList([processor])
            )
            scores = self.model.compute_transition_scores(
                out.sequences, out.logits, normalize_logits=True
            )
        ids: list[int] = out.sequences[0, len(prompt_ids) :].tolist()
        logprobs: list[float] = scores[0].tolist()
        self.calls.append((list(prompt_ids), ids, logprobs))
        return ids, logprobs


SHIFTS = (-2, -1, 1, 2)
"""Misalignments the logprob check must catch: the model read that many positions off."""


def model_logprob_gaps(
    model: Any, tokens: np.ndarray, positions: list[int], ids: list[int], stored: np.ndarray
) -> dict[int, float]:
    """Per shift (0 = aligned, and each of ``SHIFTS``), the mean distance between the
    ``stored`` logprobs of the ``ids`` sampled at ``positions`` and the model's logprobs
    of those ids read from one forward pass over ``tokens``, that many positions off."""
    with torch.no_grad():
        logits = model(torch.tensor([tokens.tolist()])).logits[0].float()
    recomputed = torch.log_softmax(logits, dim=-1).numpy()
    gaps = {}
    for shift in (0, *SHIFTS):
        rows = np.asarray(positions) - 1 + shift
        inside = (rows >= 0) & (rows < len(tokens))
        read = recomputed[rows[inside], np.asarray(ids)[inside]]
        gaps[shift] = float(np.mean(np.abs(stored[inside] - read)))
    return gaps


def assert_the_model_agrees(gaps: dict[int, float]) -> None:
    """The stored vector is the model's, and closer to it than any misaligned reading."""
    assert gaps[0] < 5e-3, gaps
    assert min(gaps[s] for s in SHIFTS) > 10 * gaps[0], gaps


def sampled_positions(rollout: Any, sampler: Any) -> tuple[list[int], list[int]]:
    """The position of every sampled id in the rollout and the id, after checking that
    each completion was sampled after exactly the tokens the rollout holds before it and
    is kept there with the sampler's own logprobs."""
    tokens, stored, weights = rollout.tokens, rollout.logprobs, rollout.weights
    completions = [t for t in rollout.turns if t.kind is TurnKind.COMPLETION]
    assert len(completions) == len(sampler.calls)
    positions: list[int] = []
    ids: list[int] = []
    for turn, (prompt, sampled_ids, logprobs) in zip(completions, sampler.calls, strict=True):
        assert tokens[: turn.start].tolist() == prompt
        for k, pos in enumerate(range(turn.start, turn.end)):
            assert stored[pos] == np.float32(logprobs[k])
            if weights[pos] == 1:
                assert tokens[pos] == sampled_ids[k]
            positions.append(pos)
            ids.append(sampled_ids[k])
    elsewhere = np.ones(len(tokens), dtype=bool)
    elsewhere[positions] = False
    assert np.isnan(stored[elsewhere]).all()
    assert (weights[elsewhere] == 0).all()
    return positions, ids


def assert_logprobs_are_the_models(model: Any, rollout: Any, sampler: ModelSampler) -> None:
    positions, ids = sampled_positions(rollout, sampler)
    stored = rollout.logprobs[positions]
    assert_the_model_agrees(model_logprob_gaps(model, rollout.tokens, positions, ids, stored))


def qwen3_scripts(r: Any) -> list[list[int | None]]:
    call = script(
        r,
        "<think>\n",
        3,
        "\n</think>\n\n<tool_call>\n" + '{"name": "get_weather", "arguments": {"city": "',
        3,
        '"}}\n</tool_call><|im_end|>',
    )
    answer = script(r, "<think>\n", 3, "\n</think>\n\n", 4, "<|im_end|>")
    return [call, answer]


def gpt_oss_scripts(r: Any) -> list[list[int | None]]:
    call = script(
        r,
        "<|channel|>analysis<|message|>",
        2,
        "<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather "
        '<|constrain|>json<|message|>{"city": "',
        3,
        '"}<|call|>',
    )
    answer = script(r, "<|channel|>final<|message|>", 3, "<|return|>")
    return [call, answer]


def run_readme_loop(name: str, scripts: list[list[int | None]]) -> tuple[dict[str, Any], Any]:
    """The README's setup, its stand-in sampler replaced by a model, then its loop."""
    setup, loop = readme_rl_blocks()
    namespace: dict[str, Any] = {}
    exec(compile(setup, "README.md", "exec"), namespace)
    r = renderer(name)
    model = cached_model(r.default_model)
    sampler = ModelSampler(model, r, scripts)
    namespace.update(r=r, sample=sampler)
    exec(compile(loop, "README.md", "exec"), namespace)
    return namespace, sampler


SCRIPTS = {"qwen3": qwen3_scripts, "gpt_oss": gpt_oss_scripts}


@functools.cache
def readme_run(name: str) -> tuple[dict[str, Any], ModelSampler]:
    """The README loop with the model, once per renderer."""
    return run_readme_loop(name, SCRIPTS[name](renderer(name)))


@pytest.mark.parametrize("name", SCRIPTS)
def test_the_readme_loop_keeps_a_real_models_logprobs_aligned(name: str) -> None:
    r = renderer(name)
    namespace, sampler = readme_run(name)
    rollout = namespace["rollout"]
    assert rollout.done_reason is DoneReason.NO_TOOL_CALL
    assert [t.kind for t in rollout.turns] == [
        TurnKind.PROMPT,
        TurnKind.COMPLETION,
        TurnKind.MESSAGES,
        TurnKind.COMPLETION,
    ]
    (call,) = rollout.results[0].message.tool_calls
    city = call.parsed_arguments()["city"]
    assert len(city) == 3 and set(city) <= set(LETTERS)  # sampled, not scripted
    assert f"Sunny in {city}, 21C." in r.decode(rollout.tokens.tolist())
    assert_logprobs_are_the_models(cached_model(r.default_model), rollout, sampler)
    # The export the README shows carries the same alignment.
    item = namespace["item"]
    assert item == verl_agent_loop_output(rollout, reward_score=1.0)
    mask = np.asarray(item["response_mask"])
    start = len(item["prompt_ids"])
    assert (mask == rollout.weights[start : start + len(mask)]).all()
    lp = np.asarray(item["response_logprobs"], dtype=np.float32)
    stored = rollout.logprobs[start : start + len(mask)]
    assert (lp[mask == 1] == stored[mask == 1]).all()
    assert (lp[mask == 0] == 0.0).all()


@pytest.mark.parametrize("shift", [-1, 1])
def test_the_logprob_check_catches_a_vector_one_position_off(shift: int) -> None:
    """The whole-vector check passes the stored logprobs and fails them shifted by one
    position, which a per-position tolerance loose enough for float32 noise would not
    always tell apart."""
    namespace, sampler = readme_run("qwen3")
    rollout = namespace["rollout"]
    positions, ids = sampled_positions(rollout, sampler)
    model = cached_model(renderer("qwen3").default_model)
    stored = rollout.logprobs[positions]
    assert_the_model_agrees(model_logprob_gaps(model, rollout.tokens, positions, ids, stored))
    shifted = np.roll(stored, shift)
    with pytest.raises(AssertionError):
        assert_the_model_agrees(model_logprob_gaps(model, rollout.tokens, positions, ids, shifted))


def test_a_real_models_cut_off_turn_is_closed_and_stays_aligned() -> None:
    r = renderer("qwen3")
    model = cached_model(r.default_model)
    call, answer = qwen3_scripts(r)
    sampler = ModelSampler(model, r, [call, answer])
    tools = readme_tools()
    rollout = r.rollout([{"role": "user", "content": "Weather?"}], tools=tools)
    ids, logprobs = sampler(rollout.prompt_ids, r.stop_token_ids, 12)  # cut inside the call
    result = rollout.add_completion(ids, logprobs)
    assert len(ids) == 12 and rollout.done_reason is DoneReason.LENGTH
    assert result.message.parts[-1].incomplete
    rollout.add_messages([{"role": "user", "content": "Go on."}])
    closing = rollout.turns[2]
    assert r.decode(rollout.tokens[closing.start : closing.start + 2].tolist()) == (
        "</tool_call><|im_end|>"
    )
    ids, logprobs = sampler(rollout.prompt_ids, r.stop_token_ids, rollout.max_tokens(64))
    rollout.add_completion(ids, logprobs)
    assert rollout.done_reason is DoneReason.NO_TOOL_CALL
    assert_logprobs_are_the_models(model, rollout, sampler)


def test_gpt_oss_return_replaced_in_history_keeps_the_models_logprob() -> None:
    r = renderer("gpt_oss")
    model = cached_model(r.default_model)
    _, answer = gpt_oss_scripts(r)
    sampler = ModelSampler(model, r, [answer, answer])
    rollout = r.rollout([{"role": "user", "content": "Weather?"}])
    for _ in range(2):
        ids, logprobs = sampler(rollout.prompt_ids, r.stop_token_ids, rollout.max_tokens(64))
        rollout.add_completion(ids, logprobs)
        if rollout.messages[-1] is rollout.results[0].message:
            rollout.add_messages([{"role": "user", "content": "And tomorrow?"}])
    first = rollout.turns[1]
    replaced = first.end - 1
    assert sampler.calls[0][1][-1] == r.tokens.return_
    assert rollout.tokens[replaced] == r.tokens.end and rollout.weights[replaced] == 0
    assert rollout.logprobs[replaced] == np.float32(sampler.calls[0][2][-1])
    assert_logprobs_are_the_models(model, rollout, sampler)


class ReplaySampler:
    """Replays a format's tool call, then its answer (the ids its supervised example
    trains, stop token included), cut at ``max_tokens``; refuses a budget under 1."""

    def __init__(self, completions: list[list[int]]) -> None:
        self.completions = completions
        self.calls: list[int] = []

    def __call__(
        self, prompt_ids: list[int], stop: tuple[int, ...], max_tokens: int
    ) -> tuple[list[int], list[float]]:
        assert type(max_tokens) is int and max_tokens >= 1, max_tokens
        k = len(self.calls)
        self.calls.append(max_tokens)
        ids = self.completions[k][:max_tokens]
        return ids, logprobs_for(k, len(self.completions[k]))[: len(ids)]


def run_readme_loop_within(r: Any, limit: str, budget: int) -> tuple[Any, ReplaySampler]:
    """The README's loop as written, its ``max_length`` replaced by ``limit=budget``."""
    setup, loop = readme_rl_blocks()
    assert loop.count("max_length=4096") == 1
    namespace: dict[str, Any] = {}
    exec(compile(setup, "README.md", "exec"), namespace)
    start = namespace["messages"]
    # Llama 3 and Mistral write a call turn as the calls alone.
    called = {**CALL, "content": ""} if r.name in ("llama3", "mistral") else CALL
    call = with_stop(r, sampled(r, start, called))
    answer = with_stop(r, sampled(r, [*start, called, TOOL_RESULT], ANSWER))
    sampler = ReplaySampler([call, answer])
    namespace.update(r=r, sample=sampler)
    exec(
        compile(loop.replace("max_length=4096", f"{limit}={budget}"), "README.md", "exec"),
        namespace,
    )
    return namespace["rollout"], sampler


@pytest.mark.parametrize("limit", ["max_length", "max_response_length"])
@pytest.mark.parametrize("name", renderer_names())
def test_the_readme_loop_is_right_at_every_length_boundary(name: str, limit: str) -> None:
    """Run unbounded, then with the budget one short of, at and one past the end of each
    turn: the sampler is never asked for fewer than one token, the episode is the
    unbounded one cut where the budget ends, and the export stays within the budget."""
    r = renderer(name)
    full, _ = run_readme_loop_within(r, "max_length", 1 << 20)
    prompt = full.turns[0].end
    assert full.done_reason is DoneReason.NO_TOOL_CALL, full.done_reason
    assert [t.kind for t in full.turns][1:3] == [TurnKind.COMPLETION, TurnKind.MESSAGES]
    ends = sorted({e + d for t in full.turns for e in [t.end] for d in (-1, 0, 1)})
    for end in [e for e in ends if e > prompt]:
        budget = end if limit == "max_length" else end - prompt
        rollout, sampler = run_readme_loop_within(r, limit, budget)
        where = (name, limit, budget)
        assert sampler.calls, where
        n = len(rollout.tokens)
        assert rollout.tokens.tolist() == full.tokens[:n].tolist(), where
        assert rollout.weights.tolist() == full.weights[:n].tolist(), where
        if end >= len(full.tokens):
            assert rollout.done_reason is DoneReason.NO_TOOL_CALL, where
            assert n == len(full.tokens), where
        else:
            assert rollout.done_reason is DoneReason.LENGTH, where
        item = verl_agent_loop_output(rollout)
        response = item["response_ids"]
        assert len(item["prompt_ids"]) + len(response) <= end, where
        assert item["prompt_ids"] + response == full.tokens[: prompt + len(response)].tolist()
        assert item["response_mask"] == full.weights[prompt : prompt + len(response)].tolist()
        sampled_logprobs = full.logprobs[prompt : prompt + len(response)]
        mask = np.asarray(item["response_mask"]) == 1
        assert (np.asarray(item["response_logprobs"])[mask] == sampled_logprobs[mask]).all()
        stop = "stop" if end >= len(full.tokens) else "length"
        assert item["extra_fields"]["stop_reason"] == stop, where


def readme_tools() -> Any:
    namespace: dict[str, Any] = {}
    exec(compile(readme_rl_blocks()[0], "README.md", "exec"), namespace)
    return namespace["tools"]


def test_the_readme_rl_snippets_run_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    namespace: dict[str, Any] = {}
    for block in readme_rl_blocks():
        exec(compile(block, "README.md", "exec"), namespace)
    printed = capsys.readouterr().out.splitlines()
    # Each print's output is the comment the README shows under it.
    loop = readme_rl_blocks()[1]
    shown = [m.group(1) for m in re.finditer(r"^# (\[.*|no_tool_call.*)$", loop, flags=re.M)]
    shown += [m.group(1) for m in re.finditer(r"^print\(.*\)  # (.*)$", loop, flags=re.M)]
    assert sorted(printed) == sorted(shown)
