"""The per-tokenizer token table decodes ids exactly like the tokenizer, on every path the
parsers use (per-token bytes, and the NumPy gather for long runs)."""

from __future__ import annotations

import numpy as np
import pytest

from renderers import token_table
from tests.conftest import tokenizer_for
from tests.texts import corpus

MODELS = [
    "Qwen/Qwen3-8B",
    "deepseek-ai/DeepSeek-V3",
    "deepseek-ai/DeepSeek-V3.1",
    "moonshotai/Kimi-K2-Instruct",
    "moonshotai/Kimi-K2-Thinking",
    "openai/gpt-oss-20b",
]


@pytest.mark.parametrize("model_id", MODELS)
def test_long_runs_decode_like_the_tokenizer(model_id: str) -> None:
    tokenizer = tokenizer_for(model_id)
    table = token_table(tokenizer)
    texts = corpus()[:3000]
    ids = [t for text in texts for t in tokenizer.encode(text, add_special_tokens=False)]
    assert len(ids) > 3 * 2**15  # several gather chunks
    expected = tokenizer.decode(ids)
    assert table.join_bytes(np.asarray(ids)).decode("utf-8") == expected
    parsed = table.decode(ids)
    assert parsed == expected


@pytest.mark.parametrize("model_id", MODELS)
def test_the_gather_joins_every_token_including_control_tokens(model_id: str) -> None:
    table = token_table(tokenizer_for(model_id))
    valid = np.flatnonzero(table.valid_array)
    rng = np.random.default_rng(7)
    for n in (0, 1, 2, 2**15 - 1, 2**15, 2**15 + 1, 100_000):
        ids = rng.choice(valid, size=n)
        expected = b"".join(table.id_to_bytes[i] for i in ids.tolist())
        assert table.join_bytes(ids) == expected
    control = np.array(sorted(table.control_ids))
    assert table.join_bytes(control) == b"".join(table.id_to_bytes[i] for i in control.tolist())
