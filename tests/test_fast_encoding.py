"""The tiktoken fast path encodes exactly like the tokenizer itself, proven on a large
corpus for every tokenizer it is enabled for; any other tokenizer keeps ``tokenizers``."""

from __future__ import annotations

import pickle
import random
import unicodedata
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from renderers import TokenTable, token_table
from renderers.core import fast_encoding, tokens
from renderers.core.fast_encoding import PROVEN, Proven, fingerprint
from tests.conftest import tokenizer_for
from tests.texts import corpus

PROVEN_MODELS = sorted(p.model for p in PROVEN.values())


def test_every_proven_tokenizer_is_proven_here() -> None:
    expected = [
        "Qwen/Qwen3-8B",
        "Qwen/Qwen3.5-27B",
        "deepseek-ai/DeepSeek-V3",
        "deepseek-ai/DeepSeek-V3.1",
        "deepseek-ai/DeepSeek-V4-Pro",
        "deepseek-ai/DeepSeek-V4.1-Flash",
        "moonshotai/Kimi-K2-Instruct",
        "moonshotai/Kimi-K2-Thinking",
        "moonshotai/Kimi-K2.5",
        "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B",
        "openai/gpt-oss-20b",
    ]
    assert expected == PROVEN_MODELS


def reference_ids(table: Any, texts: list[str]) -> list[list[int]]:
    """The tokenizer's own encoding of ``texts`` (batched for Hugging Face tokenizers)."""
    encoder = table._encoder
    if encoder is not None:
        return [e.ids for e in encoder.encode_batch(texts, add_special_tokens=False)]
    return [table._reference_encode(t) for t in texts]


@pytest.mark.parametrize("model_id", PROVEN_MODELS)
def test_fast_encoder_equals_the_tokenizer_on_the_corpus(model_id: str) -> None:
    table = token_table(tokenizer_for(model_id))
    assert table.fast_encoding
    texts = list(corpus())
    expected = reference_ids(table, texts)
    got = [table._encode_ordinary(t) for t in texts]
    mismatches = [t[:60] for t, g, e in zip(texts, got, expected, strict=True) if g != e]
    assert not mismatches, f"{len(mismatches)} texts differ, e.g. {mismatches[:3]}"
    assert sum(map(len, got)) > 1_000_000


def test_an_unproven_tokenizer_keeps_its_own_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    table = token_table(tokenizer_for("Qwen/Qwen3-8B"))
    monkeypatch.delitem(fast_encoding.PROVEN, fingerprint(table))
    assert fast_encoding.fast_encoder(table, table._reference_encode) is None


def test_a_failing_self_check_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    table = token_table(tokenizer_for("Qwen/Qwen3-8B"))
    key = fingerprint(table)
    wrong = Proven("Qwen/Qwen3-8B", r"\S+|\s+", nfc=True)  # not Qwen's split pattern
    monkeypatch.setitem(fast_encoding.PROVEN, key, wrong)
    assert fast_encoding.fast_encoder(table, table._reference_encode) is None


HF_PROVEN_MODELS = [
    "Qwen/Qwen3-8B",
    "deepseek-ai/DeepSeek-V3",
    "deepseek-ai/DeepSeek-V3.1",
    "moonshotai/Kimi-K2-Instruct",
    "moonshotai/Kimi-K2-Thinking",
    "openai/gpt-oss-20b",
]


@pytest.mark.parametrize("model_id", HF_PROVEN_MODELS)
def test_the_self_check_does_not_build_the_tokenizer_copy(model_id: str) -> None:
    """The load-time self-check compares with the tokenizer itself: the copy without added
    tokens (seconds and 100+ MB to build) is left for texts that spell an added token."""
    table = TokenTable(tokenizer_for(model_id))
    assert table.fast_encoding
    plain = table._vocabulary.plain_encoder
    assert plain is not None
    assert plain.__self__._plain is None  # type: ignore[attr-defined]


@pytest.mark.parametrize("model_id", HF_PROVEN_MODELS)
def test_the_self_check_probe_encodes_like_the_tokenizer_copy(model_id: str) -> None:
    table = TokenTable(tokenizer_for(model_id))
    probe = table._vocabulary.probe
    assert probe is not None
    names = sorted(table.control_tokens)
    texts = [fast_encoding._SAMPLE, *corpus()[:300]]
    texts += [f"say {names[k]} now" for k in range(0, len(names), max(1, len(names) // 20))]
    texts += [f"{a}{b}" for a in names[:3] for b in ("x", " y", "\n")]
    reference = token_table(tokenizer_for(model_id))  # the session's copy of the tokenizer
    assert [probe(t) for t in texts] == reference_ids(reference, texts)


@pytest.mark.parametrize("model_id", HF_PROVEN_MODELS)
def test_text_encoded_before_the_fast_encoder_is_built_has_the_tokenizers_ids(
    model_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Until the fast encoder is built, the tokenizer itself encodes (guarded: a text that
    spells an added token settles on the final encoder at once); ids never differ."""
    monkeypatch.setattr(tokens, "_INTERIM_SECONDS", float("inf"))
    table = TokenTable(tokenizer_for(model_id))
    names = sorted(table.control_tokens)
    plain = [
        t
        for t in [*corpus()[:400], fast_encoding._SAMPLE * 30]
        if not any(n in t or n in unicodedata.normalize("NFC", t) for n in names)
    ]
    assert len(plain) > 300
    reference = token_table(tokenizer_for(model_id))  # its own copy of the tokenizer
    assert [table.encode(t) for t in plain] == reference_ids(reference, plain)
    assert not _settled(table)  # still the tokenizer's own encoder
    spelled = [f"a {name} b" for name in names[:: max(1, len(names) // 10)]]
    got = [table.encode(t) for t in spelled]
    assert _settled(table)  # on the first text spelling a control token
    assert got == reference_ids(reference, spelled)
    assert not table.control_ids & {i for ids in got for i in ids}


def test_the_fast_encoder_is_built_once_encoding_took_long_enough(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(tokens, "_INTERIM_SECONDS", 0.0)
    table = TokenTable(tokenizer_for("Qwen/Qwen3-8B"))
    assert not _settled(table)
    assert table.encode("Hello world") == table._reference_encode("Hello world")
    assert _settled(table) and table._fast
    copy = pickle.loads(pickle.dumps(table))
    assert not _settled(copy) and copy.encode("Hello world") == table.encode("Hello world")


def _settled(table: TokenTable) -> bool:
    """Whether the table has settled on its final encoder (built the fast one)."""
    return table._final is not None


def test_a_failing_self_check_against_the_probe_falls_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    table = TokenTable(tokenizer_for("Qwen/Qwen3-8B"))
    wrong = Proven("Qwen/Qwen3-8B", r"\S+|\s+", nfc=True)
    monkeypatch.setitem(fast_encoding.PROVEN, fingerprint(table), wrong)
    assert not table.fast_encoding
    assert table.encode("Hello world") == table._reference_encode("Hello world")


# Characters at the edges of the split patterns' classes: ASCII and other digits (Nd, Nl,
# No), CJK and kana (with the kana-block punctuation and marks), letters of several
# scripts and cases, combining marks, punctuation, symbols, emoji, every kind of space.
BOUNDARY_ALPHABET = (
    "0123456789٣۴߂१௫〇Ⅻ½²"
    "中文字日本語ひらがなカタカナ゠・ーゝゞ\u3099\u309a"
    "abcXYZßſİıÄäéΩωЖжعبराא"
    "\u0301\u0308\u20dd"
    "'’\".,;:!?-–—_()[]{}<>/\\@#$%^&*+=|~`、。「」"
    "€¥©®™°±×÷"
    "🙂🎉👍🏽\u200d"
    " \t\n\r\u00a0\u2003\u3000\u000b\u000c"
)


@pytest.mark.parametrize("model_id", PROVEN_MODELS)
def test_fast_encoder_equals_the_tokenizer_at_class_boundaries(model_id: str) -> None:
    table = token_table(tokenizer_for(model_id))
    rng = random.Random(model_id)
    texts = [
        "".join(rng.choice(BOUNDARY_ALPHABET) for _ in range(rng.randint(1, 40)))
        for _ in range(20_000)
    ]
    texts += [a + b + c for a in "a 1中ー\n'" for b in "1 ー中\u0301\n" for c in "a1 中・"]
    expected = reference_ids(table, texts)
    got = [table._encode_ordinary(t) for t in texts]
    mismatches = [t for t, g, e in zip(texts, got, expected, strict=True) if g != e]
    assert not mismatches, f"{len(mismatches)} texts differ, e.g. {mismatches[:3]!r}"


def test_the_engine_pattern_groups_the_leading_alternatives_without_lookaround() -> None:
    group = fast_encoding.engine_pattern
    assert group(r"(?i:x|y)|[|(]|\s+(?!\S)|\s+") == r"(?:(?i:x|y)|[|(])|\s+(?!\S)|\s+"
    assert group(r"[\]|]|[a-z&&[^q]]|(?!x)y") == r"(?:[\]|]|[a-z&&[^q]])|(?!x)y"
    # Unchanged: an escaped parenthesis counts as a lookaround (never grouped wrongly), and
    # fewer than two alternatives come before the first lookaround or there is none.
    assert group(r"\(?=|a\||\s+(?=x)") == r"\(?=|a\||\s+(?=x)"
    assert group(r"a|b(?<=c)|d") == r"a|b(?<=c)|d"
    assert group(r"a|b") == r"a|b"


@pytest.fixture(scope="module")
def pattern_encoders() -> list[tuple[Any, Any]]:
    """For each proven split pattern: tiktoken with the pattern as the tokenizer spells it
    and with :func:`engine_pattern`'s grouping (over Qwen3's ranks: any vocabulary with
    merges shows where pieces split)."""
    import tiktoken

    table = token_table(tokenizer_for("Qwen/Qwen3-8B"))
    ranks = {b: i for i, b in enumerate(table.id_to_bytes[:60_000]) if b and table.valid[i]}
    assert all(bytes([k]) in ranks for k in range(256))
    encoders = []
    for k, pattern in enumerate(sorted({p.pattern for p in PROVEN.values()})):
        grouped = fast_encoding.engine_pattern(pattern)
        assert grouped != pattern and grouped.startswith("(?:")
        encoders.append(
            tuple(
                tiktoken.Encoding(
                    name=f"{k}-{which}", pat_str=p, mergeable_ranks=ranks, special_tokens={}
                )
                for which, p in (("spelled", pattern), ("grouped", grouped))
            )
        )
    return encoders


# Python's whitespace and Unicode's White_Space (the regex crate's \s) differ in a few
# characters: both kinds are here, in runs with and without newlines.
_SPLIT_ALPHABET = BOUNDARY_ALPHABET + "   \n\n\t\x1c\x1f\x85\u2028\u2029\u202f\u200b\ufeff"


@settings(max_examples=max(500, settings.default.max_examples))
@given(text=st.text(alphabet=st.sampled_from(_SPLIT_ALPHABET), max_size=80))
def test_the_engine_pattern_splits_like_the_pattern_as_spelled(
    pattern_encoders: list[tuple[Any, Any]], text: str
) -> None:
    for spelled, grouped in pattern_encoders:
        assert grouped.encode_ordinary(text) == spelled.encode_ordinary(text), spelled.name
