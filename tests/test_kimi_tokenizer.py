"""The Kimi-K2 tokenizer built from ``tiktoken.model`` equals tiktoken itself.

The reference is a ``tiktoken.Encoding`` made here, independently of the code under
test: ranks read by ``tiktoken.load.load_tiktoken_bpe``, the split pattern copied from
``shared/PROVENANCE.md`` and the special tokens named from ``tokenizer_config.json``.
Both must give identical ids on a large varied corpus: the repository's own sources,
``shared/*.md`` and the templates, Python standard-library sources, every Unicode code
point in context, whitespace runs, numbers, CJK, emoji, mixed scripts, contractions,
control-token spellings and seeded random strings.
"""

from __future__ import annotations

import functools
import json
import random
import re
from pathlib import Path
from typing import Any

import pytest

tiktoken = pytest.importorskip("tiktoken")
from tiktoken.load import load_tiktoken_bpe  # noqa: E402

from renderers import load_tokenizer, token_table  # noqa: E402
from renderers.core.kimi_tokenizer import (  # noqa: E402
    KIMI_PATTERN,
    load_kimi_tokenizer,
    read_tiktoken_ranks,
    special_token_names,
)
from tests.texts import SPECIAL_SPELLINGS, corpus  # noqa: E402

INSTRUCT = "moonshotai/Kimi-K2-Instruct"
THINKING = "moonshotai/Kimi-K2-Thinking"
MODELS = [INSTRUCT, THINKING]
REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
NUM_BASE = 163584


def _hub_file(model_id: str, filename: str) -> Path:
    from huggingface_hub import hf_hub_download

    return Path(hf_hub_download(model_id, filename))


def _provenance_pattern() -> str | None:
    """The split pattern as written in shared/PROVENANCE.md."""
    path = SHARED / "PROVENANCE.md"
    if not path.exists():
        return None
    text = path.read_text(encoding="utf-8")
    match = re.search(r"this split pattern:\s*`([^`]+)`", text)
    return match.group(1) if match else None


@functools.cache
def reference_encoding(model_id: str) -> Any:
    """tiktoken over the same data, built without the code under test."""
    ranks = load_tiktoken_bpe(str(_hub_file(model_id, "tiktoken.model")))
    config = json.loads(_hub_file(model_id, "tokenizer_config.json").read_text("utf-8"))
    named = {int(i): t["content"] for i, t in config["added_tokens_decoder"].items()}
    specials = {
        named.get(i, f"<|reserved_token_{i}|>"): i for i in range(len(ranks), len(ranks) + 256)
    }
    pattern = _provenance_pattern() or KIMI_PATTERN
    return tiktoken.Encoding(
        name=f"reference-{model_id}",
        pat_str=pattern,
        mergeable_ranks=ranks,
        special_tokens=specials,
    )


# -- the corpus ---------------------------------------------------------------------------


def _first_mismatches(
    texts: tuple[str, ...], got: list[list[int]], expected: list[list[int]]
) -> list[str]:
    bad = [
        f"{t[:80]!r}: got {g[:12]}..., expected {e[:12]}..."
        for t, g, e in zip(texts, got, expected, strict=True)
        if g != e
    ]
    return bad[:5] + ([f"... {len(bad)} mismatching texts"] if bad else [])


# -- tests --------------------------------------------------------------------------------


def test_corpus_is_large_and_varied() -> None:
    texts = corpus()
    assert len(texts) > 12000
    assert sum(map(len, texts)) > 2_000_000
    joined = "".join(texts)
    for probe in ("def ", "中", "🙂", "\u3000", "٣", "<|im_end|>", "'LL", "ſ", "\U0010ffff"):
        assert probe in joined


def test_the_split_pattern_is_the_documented_one() -> None:
    documented = _provenance_pattern()
    if documented is None:
        pytest.skip("shared/PROVENANCE.md not beside the checkout")
    assert documented == KIMI_PATTERN


@functools.cache
def corpus_ids(model_id: str) -> list[list[int]]:
    """The corpus through the tokenizer under test (its normal batch call)."""
    tokenizer = load_kimi_tokenizer(model_id)
    ids: list[list[int]] = tokenizer(list(corpus()), add_special_tokens=False)["input_ids"]
    return ids


@pytest.mark.parametrize("model_id", MODELS)
def test_ids_equal_tiktoken_on_the_corpus(model_id: str) -> None:
    texts = corpus()
    got = corpus_ids(model_id)
    expected = reference_encoding(model_id).encode_batch(
        list(texts), allowed_special="all", num_threads=2
    )
    assert got == expected, "\n".join(_first_mismatches(texts, got, expected))


@pytest.mark.parametrize("model_id", MODELS)
def test_decode_round_trips_the_corpus(model_id: str) -> None:
    tokenizer = load_kimi_tokenizer(model_id)
    texts = corpus()
    ids = corpus_ids(model_id)
    decoded = tokenizer.batch_decode(ids, skip_special_tokens=False)
    bad = [t[:80] for t, d in zip(texts, decoded, strict=True) if t != d]
    assert not bad, bad[:5]
    table = token_table(tokenizer)
    assert all(table.decode(i) == t for t, i in zip(texts, ids, strict=True))


@pytest.mark.parametrize("model_id", MODELS)
def test_ordinary_encoding_never_makes_control_tokens(model_id: str) -> None:
    """The renderers' text encoder equals tiktoken's encode_ordinary, even on text that
    spells control tokens."""
    table = token_table(load_kimi_tokenizer(model_id))
    reference = reference_encoding(model_id)
    rng = random.Random(7)
    texts = list(SPECIAL_SPELLINGS) + rng.sample(corpus(), 3000)
    for text in texts:
        assert table.encode(text) == reference.encode_ordinary(text), text[:80]


COMMON_SPECIALS = {
    "[BOS]": 163584,
    "[EOS]": 163585,
    "<|im_end|>": 163586,
    "<|im_user|>": 163587,
    "<|im_assistant|>": 163588,
    "<|start_header_id|>": 163590,
    "<|end_header_id|>": 163591,
    "[EOT]": 163593,
    "<|im_system|>": 163594,
    "<|tool_calls_section_begin|>": 163595,
    "<|tool_calls_section_end|>": 163596,
    "<|tool_call_begin|>": 163597,
    "<|tool_call_argument_begin|>": 163598,
    "<|tool_call_end|>": 163599,
    "<|im_middle|>": 163601,
    "[UNK]": 163838,
    "[PAD]": 163839,
    "<|reserved_token_163589|>": 163589,
    "<|reserved_token_163600|>": 163600,
    "<|reserved_token_163837|>": 163837,
}


@pytest.mark.parametrize("model_id", MODELS)
def test_documented_special_token_ids(model_id: str) -> None:
    tokenizer = load_kimi_tokenizer(model_id)
    assert len(tokenizer) == 163840
    for text, token_id in COMMON_SPECIALS.items():
        assert tokenizer.convert_tokens_to_ids(text) == token_id, text
        assert tokenizer.encode(text, add_special_tokens=False) == [token_id], text
        assert tokenizer.decode([token_id]) == text
    assert (tokenizer.bos_token, tokenizer.bos_token_id) == ("[BOS]", 163584)
    assert (tokenizer.eos_token, tokenizer.eos_token_id) == ("[EOS]", 163585)
    assert (tokenizer.pad_token, tokenizer.pad_token_id) == ("[PAD]", 163839)
    assert (tokenizer.unk_token, tokenizer.unk_token_id) == ("[UNK]", 163838)
    assert tokenizer.encode("Hello") == tokenizer.encode("Hello", add_special_tokens=False)
    table = token_table(tokenizer)
    assert len(table.control_tokens) == 256
    assert table.control_id("<|im_end|>") == 163586


def test_think_tokens_exist_only_in_k2_thinking() -> None:
    thinking = load_kimi_tokenizer(THINKING)
    instruct = load_kimi_tokenizer(INSTRUCT)
    assert thinking.encode("<think>", add_special_tokens=False) == [163606]
    assert thinking.encode("</think>", add_special_tokens=False) == [163607]
    assert thinking.encode("<think>hi</think>", add_special_tokens=False)[::2] == [163606, 163607]
    think_pieces = instruct.encode("<think>", add_special_tokens=False)
    assert len(think_pieces) == 3 and all(i < NUM_BASE for i in think_pieces)
    assert instruct.decode(think_pieces) == "<think>"
    assert len(instruct.encode("</think>", add_special_tokens=False)) == 3
    assert instruct.convert_ids_to_tokens(163606) == "<|reserved_token_163606|>"
    assert "<think>" in token_table(thinking).control_tokens
    assert "<think>" not in token_table(instruct).control_tokens


def test_the_singular_section_marker_is_not_a_token() -> None:
    for model_id in MODELS:
        ids = load_kimi_tokenizer(model_id).encode(
            "<|tool_call_section_begin|>", add_special_tokens=False
        )
        assert len(ids) > 1 and all(i < NUM_BASE for i in ids)


def test_loading_is_cached_per_model_and_shared_with_load_tokenizer() -> None:
    assert load_kimi_tokenizer(THINKING) is load_kimi_tokenizer(THINKING)
    assert load_tokenizer(THINKING) is load_kimi_tokenizer(THINKING)
    assert load_kimi_tokenizer(INSTRUCT) is not load_kimi_tokenizer(THINKING)


def test_chat_template_is_the_repository_file() -> None:
    """The tokenizer carries chat_template.jinja, usable with apply_chat_template on a
    conversation without tool-call history."""
    tokenizer = load_kimi_tokenizer(THINKING)
    template = _hub_file(THINKING, "chat_template.jinja").read_text(encoding="utf-8")
    assert tokenizer.chat_template == template
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Hi"}], tokenize=False, add_generation_prompt=True
    )
    assert text == (
        "<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI."
        "<|im_end|><|im_user|>user<|im_middle|>Hi<|im_end|><|im_assistant|>assistant"
        "<|im_middle|>"
    )


def test_rank_file_errors_name_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.model"
    bad.write_bytes(b"IQ== 0\nnot-base64!! 1\n")
    with pytest.raises(ValueError, match=r"bad.model:2"):
        read_tiktoken_ranks(bad)
    gap = tmp_path / "gap.model"
    gap.write_bytes(b"IQ== 0\nIg== 2\n")
    with pytest.raises(ValueError, match=r"not exactly 0\.\.1"):
        read_tiktoken_ranks(gap)


def test_special_token_names_fill_reserved_slots() -> None:
    config = {"added_tokens_decoder": {"10": {"content": "[X]"}}}
    names = special_token_names(config, 10)
    assert len(names) == 256
    assert names[0] == "[X]"
    assert names[1] == "<|reserved_token_11|>"
