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
import importlib
import inspect
import json
import random
import re
import unicodedata
from pathlib import Path
from typing import Any

import pytest

tiktoken = pytest.importorskip("tiktoken")
from tiktoken.load import load_tiktoken_bpe  # noqa: E402

from renderers.kimi_tokenizer import (  # noqa: E402
    KIMI_PATTERN,
    load_kimi_tokenizer,
    read_tiktoken_ranks,
    special_token_names,
)
from renderers.tokenizer import load_tokenizer, token_table  # noqa: E402

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


def _file_texts() -> list[str]:
    paths: list[Path] = []
    for pattern in ("renderers/**/*.py", "tests/**/*.py", "harmony/**/*.py", "benchmarks/**/*"):
        paths += sorted(REPO.glob(pattern))
    paths += [REPO / "pyproject.toml", REPO / "README.md"]
    if SHARED.exists():
        paths += sorted(SHARED.glob("*.md"))
        paths += sorted((SHARED / "harmony-golden").glob("*"))
    texts: list[str] = []
    for path in paths:
        if path.is_file():
            try:
                texts.append(path.read_text(encoding="utf-8"))
            except (UnicodeDecodeError, OSError):
                continue
    for model in MODELS:
        for name in ("chat_template.jinja", "tokenizer_config.json", "LICENSE"):
            try:
                texts.append(_hub_file(model, name).read_text(encoding="utf-8"))
            except Exception:  # a file missing from a cache is not what this test is about
                continue
    return texts


def _stdlib_texts() -> list[str]:
    """Python sources of varied style (html.entities is full of non-ASCII symbols)."""
    texts = []
    for name in (
        "json.decoder",
        "textwrap",
        "difflib",
        "argparse",
        "tokenize",
        "html.entities",
        "email.utils",
        "string",
        "encodings.cp1252",
        "locale",
    ):
        texts.append(inspect.getsource(importlib.import_module(name)))
    return texts


CODE_SNIPPETS = [
    '{"name": "get_weather", "arguments": {"city": "Zürich", "days": [1, 2, 3]}}',
    "<html><body class=\"x\"><p>Hi &amp; bye</p><br/></body></html>",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY 2 DESC;",
    r"^(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z$",
    "for f in *.txt; do\n\techo \"$f\" | sed -e 's/a/b/g' >> out.log 2>&1\ndone",
    "template<typename T> constexpr auto sq(T x) -> decltype(x * x) { return x * x; }",
    "fn main() -> Result<(), Box<dyn Error>> {\n    let v: Vec<u8> = vec![0xFF; 16];\n"
    "    Ok(())\n}",
    "def f(x):\n    return x ** 2  # square\n\n\nclass A:\n    pass\n",
    "    \n\t\tif (a != b && c <= d) { x += 1; }\r\n",
    "const x = async () => { await fetch(`/api/${id}?q=${encodeURIComponent(q)}`); };",
]

CJK_TEXTS = [
    "我爱北京天安门，天安门上太阳升。",
    "使用Python3编写一个函数，返回斐波那契数列的前10项。",
    "東京都渋谷区で会議があります。ひらがなとカタカナ、そして漢字。",
    "안녕하세요, 만나서 반갑습니다! 한국어 텍스트입니다.",
    "「引用」『二重』【括弧】〈山括弧〉《書名》……——～",
    "中文English混合123数字和标点！？",
    "々〆〇ヶ丶ゝゞヽヾ",
    "𠀀𠀁𪚥𰻞 (CJK Extension B/G)",
]

EMOJI_TEXTS = [
    "🙂😀😂🤣❤️👍🏽👩‍💻👨‍👩‍👧‍👦🏳️‍🌈🇫🇷🇯🇵",
    "keycaps 1️⃣2️⃣#️⃣ and skin tones 👋🏻👋🏼👋🏽👋🏾👋🏿",
    "text🙂text 🙂 text🙂🙂🙂 🎉🎉",
    "☀️☁️☂️☃️★☆✓✔✗✘→←↑↓⇒⇔∀∃∅∈∉",
]

MIXED_SCRIPTS = [
    "Привет, мир! Ёжик в тумане.",
    "Γειά σου Κόσμε· αβγδε ΑΒΓΔΕ",
    "مرحبا بالعالم، هذا نص عربي ١٢٣٤",
    "שלום עולם, זה טקסט בעברית",
    "नमस्ते दुनिया, यह हिंदी पाठ है। १२३",
    "สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่าง",
    "გამარჯობა მსოფლიო; Բարեւ աշխարհ; வணக்கம் உலகம்",
    "Ünïcödé naïve café résumé façade Ångström Œuvre ß ẞ ǅ ǈ ǋ",
    "Cafe\u0301 re\u0301sume\u0301 a\u0308 Z\u0335\u0321a\u0336l\u0337g\u0338o\u0334",
    "mixed\u200bzero\u200cwidth\u200djoiners\ufeffbom\u2060wj",
    "\u202eRTL override\u202c and \u200fmarks\u200e",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝐛𝐨𝐥𝐝 𝓈𝒸𝓇𝒾𝓅𝓉 ℌℑℜ ＡＢＣ１２３",
]

CONTRACTIONS = [
    "it's I'm you're we've they'll he'd IT'S I'M YOU'RE WE'VE THEY'LL HE'D",
    "It'S i'M You'Re We'Ve They'Ll He'D don't won't can't shouldn't've",
    "'s 's' ''s 'sss 'S ſ 'ſ K İstanbul ı",
    "rock'n'roll o'clock ma'am y'all Ahmad's café's 東京's",
]

SPECIAL_SPELLINGS = [
    "<|im_end|>",
    "before<|im_end|>after",
    "<|im_system|>system<|im_middle|>hi<|im_end|><|im_user|>user<|im_middle|>x<|im_end|>",
    "<think>thoughts</think>answer",
    "[BOS][EOS][PAD][UNK][EOT]",
    "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{}"
    "<|tool_call_end|><|tool_calls_section_end|>",
    "<|reserved_token_163589|><|reserved_token_163700|>",
    "<|im_end <|im_end| im_end|> <|tool_call_section_begin|>",
]


def _whitespace_texts(rng: random.Random) -> list[str]:
    units = [" ", "\t", "\n", "\r", "\r\n", "\u3000", "\xa0", "\u2028", "\x0b", "\x0c", "\x85",
             "\u2009", "\u200a", "\u1680"]
    texts = []
    for _ in range(3000):
        run = "".join(rng.choice(units) for _ in range(rng.randint(1, 12)))
        texts.append(rng.choice(["", "a", "word", "1", "!", "中"]) + run
                     + rng.choice(["", "b", "Word", "2", "?", "文"]))
    for n in (1, 2, 3, 7, 16, 63, 64, 65, 100, 257, 1000, 5000):
        texts += [" " * n, "\n" * n, "\t" * n, " \n" * n, "x" + " " * n + "y", "\r\n" * n]
    return texts


def _number_texts(rng: random.Random) -> list[str]:
    texts = []
    for digits in range(1, 40):
        texts.append(str(rng.randrange(10 ** (digits - 1), 10**digits)))
    for _ in range(500):
        texts.append(
            rng.choice(["", "-", "+", "$", "€", "x="])
            + f"{rng.uniform(-1e6, 1e6):,.{rng.randint(0, 6)}f}"
            + rng.choice(["", "%", " kg", "e10", "th", "px"])
        )
    texts += [
        "2024-01-31T23:59:59.999Z 12:00 PM +1 (555) 123-4567 192.168.0.1 v1.2.3-rc.4",
        "0x1F 0b1010 0o777 1e-9 6.022e23 3.14159265358979323846 1/3 ½ ² ³ ⅞",
        "٠١٢٣٤٥٦٧٨٩ ०१२३४५६७८९ １２３４５ ①②③ ⅠⅡⅢⅣ 一二三",
        "1000000000000000000000000000000000000000000000000000000",
    ]
    return texts


def _random_texts(rng: random.Random) -> list[str]:
    pool = list("aAzZ'sStTlLdDmMvVrReE0123456789.,;!?-_()[]{}<>|\"`~@#$%^&*+=/\\ \t\n\r")
    pool += [
        *"中文字日本語ひらがなカタカナ한국어",
        "\u3000", "\xa0", "\u2028", "\x85", "\u200b", "\ufeff", "ſ", "K", "İ", "ı", "ǅ", "ᾈ",
        "é", "e\u0301", "🙂", "👨‍👩‍👧", "🇫🇷", "\u0300", "ـ", "ๆ", "々", "〇", "Ⅻ", "²", "½",
        "٣", "\x00", "\x7f", "\x1b", "\U0001F600", "\U000E0001", "\ufffd", "\U0010FFFF",
        "<|im_end|>", "<think>", "[EOS]",
    ]
    return ["".join(rng.choice(pool) for _ in range(rng.randint(1, 80))) for _ in range(6000)]


def _code_point_texts(rng: random.Random) -> list[str]:
    """Every assigned Unicode character (CJK ideographs: every 8th, they all take the same
    path) plus a sample of unassigned and private-use ones, 64 per text, each followed by
    a random context."""
    contexts = ["", " ", "a", "A", "1", "\n", "  ", "'s", "中", "!"]
    points, others = [], []
    for c in range(0x110000):
        if 0xD800 <= c < 0xE000:
            continue
        ch = chr(c)
        if unicodedata.category(ch) in ("Cn", "Co"):
            others.append(c)
        elif not unicodedata.name(ch, "").startswith("CJK UNIFIED") or c % 8 == 0:
            points.append(c)
    points += rng.sample(others, 3000)
    return [
        "".join(chr(c) + rng.choice(contexts) for c in points[k : k + 64])
        for k in range(0, len(points), 64)
    ]


@functools.cache
def corpus() -> tuple[str, ...]:
    rng = random.Random(20250713)
    texts: list[str] = []
    files = _file_texts() + _stdlib_texts()
    texts += files
    for text in files:  # also every paragraph on its own (different boundaries)
        texts += [p for p in text.split("\n\n") if p]
    texts += CODE_SNIPPETS + CJK_TEXTS + EMOJI_TEXTS + MIXED_SCRIPTS + CONTRACTIONS
    texts += SPECIAL_SPELLINGS
    texts += _whitespace_texts(rng) + _number_texts(rng) + _random_texts(rng)
    texts += _code_point_texts(rng)
    texts += ["a" * 3000, "!" * 2000, "中" * 2000, "🙂" * 500, "ab" * 2000, ""]
    return tuple(texts)


def _first_mismatches(texts: tuple[str, ...], got: list[list[int]], expected: list[list[int]]
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
    for probe in ("def ", "中", "🙂", "\u3000", "٣", "<|im_end|>", "'LL", "ſ", "\U0010FFFF"):
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
