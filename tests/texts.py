"""A large, varied corpus of texts for proving that two encoders agree: the project's own
sources, the shared docs, standard-library sources, code, every assigned Unicode code
point in context, whitespace runs, numbers, contractions, mixed scripts, emoji, control-
token spellings and random strings (about 13k texts, 2.4M characters)."""

from __future__ import annotations

import functools
import importlib
import inspect
import random
import unicodedata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
TEMPLATE_MODELS = ("moonshotai/Kimi-K2-Instruct", "Qwen/Qwen3-8B", "openai/gpt-oss-20b")


def _hub_file(model_id: str, filename: str) -> Path:
    from huggingface_hub import hf_hub_download

    return Path(hf_hub_download(model_id, filename))


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
    for model in TEMPLATE_MODELS:
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
    '<html><body class="x"><p>Hi &amp; bye</p><br/></body></html>',
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
    units = [
        " ",
        "\t",
        "\n",
        "\r",
        "\r\n",
        "\u3000",
        "\xa0",
        "\u2028",
        "\x0b",
        "\x0c",
        "\x85",
        "\u2009",
        "\u200a",
        "\u1680",
    ]
    texts = []
    for _ in range(3000):
        run = "".join(rng.choice(units) for _ in range(rng.randint(1, 12)))
        texts.append(
            rng.choice(["", "a", "word", "1", "!", "中"])
            + run
            + rng.choice(["", "b", "Word", "2", "?", "文"])
        )
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
        "\u3000",
        "\xa0",
        "\u2028",
        "\x85",
        "\u200b",
        "\ufeff",
        "ſ",
        "K",
        "İ",
        "ı",
        "ǅ",
        "ᾈ",
        "é",
        "e\u0301",
        "🙂",
        "👨‍👩‍👧",
        "🇫🇷",
        "\u0300",
        "ـ",
        "ๆ",
        "々",
        "〇",
        "Ⅻ",
        "²",
        "½",
        "٣",
        "\x00",
        "\x7f",
        "\x1b",
        "\U0001f600",
        "\U000e0001",
        "\ufffd",
        "\U0010ffff",
        "<|im_end|>",
        "<think>",
        "[EOS]",
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
