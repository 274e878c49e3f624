"""The per-tokenizer token table decodes ids exactly like the tokenizer, on every path the
parsers use (per-token bytes, and the NumPy gather for long runs)."""

from __future__ import annotations

import itertools
import pickle
import unicodedata

import numpy as np
import pytest

from renderers import get_renderer, token_table
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


# -- tokenizers that encode ordinary text, decode bytes and name their control tokens -------

TML_MODELS = [
    "Qwen/Qwen3.5-27B",
    "deepseek-ai/DeepSeek-V4-Pro",
    "deepseek-ai/DeepSeek-V4.1-Flash",
    "moonshotai/Kimi-K2.5",
]


@pytest.mark.parametrize("model_id", TML_MODELS)
def test_a_tml_tokenizer_gives_a_table_that_decodes_and_encodes_like_it(model_id: str) -> None:
    tokenizer = tokenizer_for(model_id)
    table = token_table(tokenizer)
    texts = corpus()[:1500]
    ids = [t for text in texts for t in tokenizer.encode_ordinary(text)]
    assert table.decode(ids) == tokenizer.decode(ids)
    assert table.join_bytes(np.asarray(ids)) == tokenizer.decode_bytes(ids)
    for name in tokenizer.special_tokens():
        i = tokenizer.encode_special(name)
        assert table.control_id(tokenizer.decode([i])) == i
    assert [table.encode(t) for t in texts[:300]] == [
        tokenizer.encode_ordinary(t) for t in texts[:300]
    ]
    with pytest.raises(ValueError, match=rf"= {table.vocab_size} is not a token id"):
        table.check_ids([table.vocab_size])


def test_offsets_of_a_normalizing_tokenizer_cover_the_characters_each_token_holds() -> None:
    """Qwen3.5's tokenizer encodes NFC text: a token's character span covers what it
    encodes, and a character that normalization composed belongs to the tokens that hold
    part of it."""
    table = token_table(tokenizer_for("Qwen/Qwen3.5-27B"))
    text = "Cafe\u0301 au lait, \u212b and ｆｕｌｌ width: re\u0301sume\u0301!"
    ids, offsets = table.encode_with_offsets(text)
    assert ids == table.encode(text)
    pieces = [table.id_to_bytes[t] for t in ids]
    for piece, (start, end) in zip(pieces, offsets, strict=True):
        assert piece.decode("utf-8", "replace").strip("\ufffd") in unicodedata.normalize(
            "NFC", text[start:end]
        )
    assert offsets[0][0] == 0 and offsets[-1][1] == len(text)
    assert all(a[1] >= b[0] for a, b in itertools.pairwise(offsets))


def test_kimi_k25_has_kimi_k2_thinkings_vocabulary() -> None:
    """Why ``moonshotai/Kimi-K2.5`` loads through the tiktoken path of K2: the same ordinary
    tokens, and K2-Thinking's named control tokens at the same ids (K2.5 names four of
    K2-Thinking's reserved ones: its media tokens)."""
    k25 = token_table(tokenizer_for("moonshotai/Kimi-K2.5"))
    k2 = token_table(tokenizer_for("moonshotai/Kimi-K2-Thinking"))
    assert k25.vocab_size == k2.vocab_size
    assert k25.id_to_bytes[:163584] == k2.id_to_bytes[:163584]
    named = {t: i for t, i in k2.control_tokens.items() if "reserved" not in t}
    assert named.items() <= k25.control_tokens.items()
    added = {t for t in k25.control_tokens if "reserved" not in t} - set(named)
    assert added == {"<|media_begin|>", "<|media_content|>", "<|media_end|>", "<|media_pad|>"}


class ByteTokenizer:
    """The smallest ordinary-text tokenizer: one token per byte, two control tokens."""

    def __init__(self, controls: tuple[str, str]) -> None:
        self.controls = controls

    def encode_ordinary(self, text: str) -> list[int]:
        return list(text.encode())

    def decode_bytes(self, token_ids: list[int]) -> bytes:
        out = b""
        for t in token_ids:
            if not 0 <= t < 258:
                raise ValueError(f"no token {t}")
            out += bytes([t]) if t < 256 else self.controls[t - 256].encode()
        return out

    def special_tokens(self) -> list[str]:
        return ["first", "second"]

    def encode_special(self, name: str) -> int:
        return 256 + self.special_tokens().index(name)


def test_any_tokenizer_with_the_four_methods_gives_a_table() -> None:
    table = token_table(ByteTokenizer(("<|a|>", "<|b|>")))
    assert table.vocab_size == 258
    assert table.control_tokens == {"<|a|>": 256, "<|b|>": 257}
    assert table.encode("<|a|>é") == list("<|a|>é".encode())  # spelled: ordinary text
    assert table.decode([256, 195, 169]) == "<|a|>é"
    with pytest.raises(TypeError, match="encode_ordinary, decode_bytes, special_tokens"):
        token_table(object())


def test_tml_tokenizers_are_pickled_by_their_class_and_shared_in_a_process() -> None:
    """A renderer holding a tokenizer built by its class (tml-renderers) pickles by that
    class's name: small, the same table in this process, equal ids in a fresh one."""
    import subprocess
    import sys

    from tml_renderers import tokenizers

    tokenizer = tokenizers.Qwen3Tokenizer()  # built directly, not by load_tokenizer
    r = get_renderer("qwen3", tokenizer)
    data = pickle.dumps(r)
    assert len(data) < 1024 and b"tml_renderers.tokenizers:Qwen3Tokenizer" in data
    clone = pickle.loads(data)
    assert clone.table is r.table
    assert token_table(tokenizers.Qwen3Tokenizer()) is r.table  # one table per class
    messages = [{"role": "user", "content": "Pickled é <|im_end|>"}]
    script = (
        "import pickle, sys, torch; r = pickle.loads(sys.stdin.buffer.read()); "
        f"print(r.build_generation_prompt({messages!r}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], input=data, capture_output=True, check=True
    ).stdout
    assert out.decode().strip() == str(r.build_generation_prompt(messages))
    # A tokenizer its class cannot rebuild without arguments is pickled with the renderer.
    toy = pickle.loads(pickle.dumps(get_renderer("qwen3", tokenizer_for("Qwen/Qwen3-8B"))))
    assert toy.table is token_table(tokenizer_for("Qwen/Qwen3-8B"))


# -- how the table is built (one vectorized pass, checked against the per-token way) --------


@pytest.mark.parametrize("model_id", MODELS)
def test_every_token_has_the_bytes_its_vocabulary_spells(model_id: str) -> None:
    from renderers.core.byte_level import bytes_to_unicode

    backend = tokenizer_for(model_id).backend_tokenizer
    table = token_table(tokenizer_for(model_id))
    byte_of = {c: b for b, c in bytes_to_unicode().items()}
    added = {i: t.content for i, t in backend.get_added_tokens_decoder().items()}
    expected: dict[int, bytes] = {
        i: bytes(byte_of[c] for c in piece)
        for piece, i in backend.get_vocab(with_added_tokens=False).items()
        if i not in added
    }
    expected.update({i: content.encode("utf-8") for i, content in added.items()})
    assert table.vocab_size == max(expected) + 1
    assert [i for i, ok in enumerate(table.valid) if ok] == sorted(expected)
    assert all(table.id_to_bytes[i] == b for i, b in expected.items())


def _complete_or_none(b: bytes) -> str | None:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return None


@pytest.mark.parametrize("model_id", MODELS + TML_MODELS)
def test_token_texts_are_the_complete_utf8_of_their_bytes(model_id: str) -> None:
    table = token_table(tokenizer_for(model_id))
    expected = [
        _complete_or_none(b) if ok else None
        for b, ok in zip(table.id_to_bytes, table.valid, strict=True)
    ]
    assert table.id_to_str == expected
    assert 0 < expected.count(None) < len(expected)


def test_token_texts_of_nul_bytes_cut_sequences_and_encoded_surrogates() -> None:
    from renderers.core.tokens import _complete_texts

    pieces = [
        b"\x00",
        b"a\x00\xe4",
        b"\xe4\xb8",
        b"\xe4\xb8\xad",
        b"",
        b"\xed\xa0\x80",  # an encoded surrogate: not UTF-8
        b"\xff",
        b"ok",
        b"\xb8\xad",
        b"x",
    ]
    valid = [True] * len(pieces)
    valid[-1] = False
    assert _complete_texts(pieces, valid) == [
        "\x00",
        None,
        None,
        "中",
        "",
        None,
        None,
        "ok",
        None,
        None,
    ]
