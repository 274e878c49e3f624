"""The prepared column layout against a real trainer: TRL's ``SFTTrainer`` trains one step
on our Parquet output (a tiny randomly initialised model from the cached Qwen3 config, on
CPU) and the labels it trains on are ours."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from renderers.bench.prepare import generate_corpus
from renderers.cli import main

pytestmark = pytest.mark.slow  # see pyproject.toml: left out of the quick subset

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")

MODEL = "Qwen/Qwen3-8B"


def _tiny_qwen3() -> Any:
    import transformers

    config = transformers.AutoConfig.from_pretrained(MODEL)
    config.num_hidden_layers = 1
    config.hidden_size = 32
    config.intermediate_size = 64
    config.num_attention_heads = 2
    config.num_key_value_heads = 1
    config.head_dim = 16
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(config)


def test_trl_sft_trainer_trains_on_our_labels(tmp_path: Path) -> None:
    import datasets

    from renderers import load_tokenizer

    rows = [
        {
            "messages": [
                {"role": "user", "content": f"Question {k}: what is {k} + {k}?"},
                {"role": "assistant", "content": f"It is {2 * k}.", "reasoning_content": "Add."},
            ]
        }
        for k in range(4)
    ]
    rows += generate_corpus(40, seed=11)[:2]  # with tools, calls and reasoning
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "train.parquet"
    assert (
        main(
            [
                "prepare",
                "--model",
                MODEL,
                str(data),
                "-o",
                str(out),
                "--max-length",
                "192",  # the cost is tokens x the 151k vocabulary: keep batches small
                "--overflow",
                "truncate",
                "-q",
            ]
        )
        == 0
    )
    ours = pq.read_table(out).to_pylist()
    dataset = datasets.Dataset.from_parquet(str(out)).select_columns(["input_ids", "labels"])

    seen: list[dict[str, Any]] = []

    class RecordingTrainer(trl.SFTTrainer):  # type: ignore[misc]
        def compute_loss(self, model: Any, inputs: Any, *args: Any, **kwargs: Any) -> Any:
            seen.append({k: v.clone() for k, v in inputs.items()})
            return super().compute_loss(model, inputs, *args, **kwargs)

    config = trl.SFTConfig(
        output_dir=str(tmp_path / "run"),
        max_steps=1,
        per_device_train_batch_size=len(rows),
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        logging_strategy="no",
        max_length=None,
    )
    trainer = RecordingTrainer(
        model=_tiny_qwen3(),
        args=config,
        train_dataset=dataset,
        processing_class=load_tokenizer(MODEL),
    )
    result = trainer.train()
    assert trainer.state.global_step == 1
    assert torch.isfinite(torch.tensor(result.training_loss))
    (batch,) = seen
    by_ids = {tuple(row["input_ids"]): row["labels"] for row in ours}
    matched = set()
    for ids, mask, labels in zip(
        batch["input_ids"].tolist(),
        batch["attention_mask"].tolist(),
        batch["labels"].tolist(),
        strict=True,
    ):
        n = sum(mask)
        key = tuple(ids[:n])
        assert key in by_ids, "TRL trained on a row that is not ours"
        assert labels[:n] == by_ids[key]  # TRL took our labels as they are
        assert set(labels[n:]) <= {-100}  # and masked its padding
        matched.add(key)
    assert len(matched) == len(ours)
