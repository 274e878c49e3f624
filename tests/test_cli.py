"""The ``renderers`` command line, run as a real subprocess on real input."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from renderers import get_renderer
from renderers.cli import main
from tests.conftest import tokenizer_for

CLI = [sys.executable, "-m", "renderers.cli"]


def run(
    *args: str, stdin: str | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [*CLI, *args], input=stdin, capture_output=True, text=True, timeout=300, env=os.environ
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


@pytest.fixture(scope="module")
def qwen3() -> Any:
    return get_renderer("qwen3", tokenizer_for("Qwen/Qwen3-8B"))


def test_demo_shows_prompt_and_parsed_parts() -> None:
    out = run("demo", "--model", "Qwen/Qwen3-8B").stdout
    assert "Prompt for Qwen/Qwen3-8B" in out and " tokens" in out
    assert "Thinking (shown to a person" in out
    assert "tool call: get_weather" in out
    assert "termination: stop" in out
    assert "\x1b[" not in out  # not a terminal: no colour


@pytest.mark.slow
@pytest.mark.parametrize(
    "model",
    [
        "qwen3",
        "deepseek_v3",
        "deepseek_v3.1",
        "kimi_k2",
        "kimi_k2_thinking",
        "gpt_oss",
        "llama3",  # tokenizers from their publishers' packages: no --tokenizer needed
        "llama4",
        "mistral",
        "mistral_v7",
        "qwen2.5",  # the Qwen line on Qwen3's tokenizer
        "qwen3_instruct_2507",
        "qwen3_thinking_2507",
        "qwen3_vl",
    ],
)
def test_the_demo_of_every_model_runs_quietly(model: str) -> None:
    """Each model's demo with its default options: a prompt, a parsed completion, and
    nothing on stderr (no advice from libraries underneath)."""
    proc = run("demo", "--model", model)
    assert "Prompt for " in proc.stdout and "termination: stop" in proc.stdout
    assert proc.stderr == ""


@pytest.mark.parametrize(
    ("model", "tokenizer"),
    [
        ("qwen3.5", "Qwen35Tokenizer"),
        ("qwen3.6", "Qwen35Tokenizer"),
        ("qwen3.8", "Qwen35Tokenizer"),
        ("deepseek_v4", "DeepSeekV4Tokenizer"),
        ("deepseek_v4.1", "DeepSeekV41Tokenizer"),
        ("kimi_k2.5", "KimiK25Tokenizer"),
        ("kimi_k2.6", "KimiK26Tokenizer"),
        ("deepseek_r1", "DeepSeekR1Tokenizer"),
        ("nemotron3_ultra", "Nemotron3Tokenizer"),
        ("glm5.3", "GlmTokenizer"),
    ],
)
def test_demo_of_each_2026_family_with_a_tokenizer_built_by_its_class(
    model: str, tokenizer: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # In this process: building a tml-renderers tokenizer takes seconds, and the process
    # shares it with the other tests (a bad --tokenizer is checked in a subprocess below).
    source = f"tml_renderers.tokenizers:{tokenizer}"
    assert main(["demo", "--model", model, "--tokenizer", source]) == 0
    out = capsys.readouterr().out
    assert f"Prompt for {model} ({model})" in out
    assert "Thinking (shown to a person" in out and "tool call: get_weather" in out
    assert "termination: stop" in out


def test_a_tokenizer_that_cannot_be_built_is_a_one_line_error() -> None:
    proc = run("demo", "--model", "qwen3.5", "--tokenizer", "no_such_module:Tok", check=False)
    assert proc.returncode == 1
    assert proc.stderr.startswith("renderers demo: error: cannot build the tokenizer")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_render_prints_the_generation_prompt_ids(qwen3: Any, tmp_path: Path) -> None:
    conversation = [{"role": "user", "content": "Hi <|im_end|> there"}]
    path = tmp_path / "conv.json"
    path.write_text(json.dumps(conversation))
    out = run("render", "--model", "qwen3", str(path)).stdout
    assert json.loads(out) == qwen3.build_generation_prompt(conversation)
    text = run("render", "--model", "qwen3", "--text", "-", stdin=json.dumps(conversation)).stdout
    assert text == qwen3.decode(qwen3.build_generation_prompt(conversation))


def test_render_supervised_with_options_and_tools(qwen3: Any, tmp_path: Path) -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    conversation = {
        "messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Yo"}],
        "tools": tools,
    }
    out = run(
        "render",
        "--model",
        "qwen3",
        "--supervised",
        "--option",
        "enable_thinking=false",
        "-",
        stdin=json.dumps(conversation),
    ).stdout
    data = json.loads(out)
    expected = qwen3.build_supervised_example(
        conversation["messages"], tools=tools, enable_thinking=False
    )
    assert data["tokens"] == expected.tokens.tolist()
    assert data["weights"] == expected.weights.tolist()


def test_parse_reads_ids_on_stdin(qwen3: Any) -> None:
    table = qwen3.table
    ids = [
        qwen3.think,
        *table.encode("\nhmm\n"),
        qwen3.think_end,
        *table.encode("\n\nHello"),
        qwen3.im_end,
    ]
    out = json.loads(run("parse", "--model", "Qwen/Qwen3-8B", stdin=json.dumps(ids)).stdout)
    assert out["message"]["content"] == [
        {"type": "thinking", "text": "hmm"},
        {"type": "text", "text": "Hello"},
    ]
    assert out["termination"] == "stop"
    openai = json.loads(
        run("parse", "--model", "qwen3", "--openai", stdin=" ".join(map(str, ids))).stdout
    )
    assert openai["message"] == {
        "role": "assistant",
        "content": "Hello",
        "reasoning_content": "hmm",
    }


def test_parse_text_reads_a_completion_given_as_text() -> None:
    text = (
        '<think>\nhmm\n</think>\n\nSure.\n<tool_call>\n{"name": "f", "arguments": {"a": 1}}'
        "\n</tool_call><|im_end|>"
    )
    out = json.loads(run("parse", "--model", "qwen3", "--text", "--openai", stdin=text).stdout)
    assert out["message"] == {
        "role": "assistant",
        "content": "Sure.",
        "reasoning_content": "hmm",
        "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}],
    }
    assert out["termination"] == "stop"


def test_parse_rejects_bad_input_with_a_clear_error() -> None:
    proc = run("parse", "--model", "qwen3", stdin="[1, 2, -5]", check=False)
    assert proc.returncode == 1
    assert "token_ids[2] = -5" in proc.stderr
    proc = run("parse", "--model", "qwen3", stdin="not ids", check=False)
    assert proc.returncode == 1 and "token ids" in proc.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["render", "--model", "qwen3"],
        ["parse"],
        ["think", "--style", "nope"],
        ["render", "--model", "qwen3", "--option", "novalue", "-"],
        ["render", "--model", "qwen3", "--option", "enable_thinking=maybe", "-"],
        ["render", "--model", "qwen3", "--option", "no_such_option=1", "-"],
        ["inspect", "qwen3", "--option", "enable_thinking=maybe"],
        ["frobnicate"],
    ],
)
def test_usage_errors_exit_2_with_a_message(args: list[str]) -> None:
    proc = run(*args, stdin="[]", check=False)
    assert proc.returncode == 2
    assert "error:" in proc.stderr


@pytest.mark.parametrize("command", ["demo", "render", "parse", "think", "bench"])
def test_every_command_explains_itself(command: str) -> None:
    out = run(command, "--help").stdout
    assert "usage:" in out and len(out) > 200


THOUGHTFUL = "Intro. <think>Step one.\nStep two.</think>\n\nThe answer is 42.\n"


def test_think_splits_content_and_thinking() -> None:
    proc = run("think", "--no-color", stdin=THOUGHTFUL)
    assert proc.stdout == "Intro.\n\nThe answer is 42.\n"
    assert proc.stderr == "[thinking 1]\n  Step one.\n  Step two.\n"


def test_think_json_and_thinking_file(tmp_path: Path) -> None:
    proc = run("think", "--json", stdin=THOUGHTFUL)
    assert json.loads(proc.stdout) == {
        "content": "Intro.\n\nThe answer is 42.\n",
        "reasoning_content": "Step one.\nStep two.",
    }
    target = tmp_path / "thinking.txt"
    proc = run("think", "--thinking-file", str(target), stdin=THOUGHTFUL)
    assert proc.stderr == ""
    assert target.read_text() == "[thinking 1]\n  Step one.\n  Step two.\n"


def test_think_styles_and_custom_tags() -> None:
    kimi = run("think", "--no-color", stdin="◁think▷plan◁/think▷Done.").stdout
    assert kimi == "Done."
    forced = run(
        "think", "--style", "forced", "--json", stdin="reasoning here</think>Answer"
    ).stdout
    assert json.loads(forced) == {"content": "Answer", "reasoning_content": "reasoning here"}
    custom = run("think", "--tags", "[r]", "[/r]", stdin="[r]x[/r]Clean").stdout
    assert custom == "Clean"
    attributed = run(
        "think", "--no-color", stdin='<thinking thought="hmm" thought_type="plan"/>Yes.'
    )
    assert attributed.stdout == "Yes."
    assert "  (thought_type=plan)\n" in attributed.stderr  # attributes as written


@pytest.mark.parametrize(
    ("style", "text", "expected"),
    [
        ("deepseek_r1", "r</think>A", {"content": "A", "reasoning_content": "r"}),
        ("deepseek-r1", "<think>r</think>A", {"content": "A", "reasoning_content": "r"}),
        ("qwen3", "Plain.", {"content": "Plain.", "reasoning_content": None}),
        ("qwen3-thinking", "r</think>A", {"content": "A", "reasoning_content": "r"}),
        ("kimi_k2", "<think>r</think>A", {"content": "A", "reasoning_content": "r"}),
    ],
)
def test_think_accepts_the_reasoning_parser_names_of_inference_servers(
    style: str, text: str, expected: dict[str, str | None]
) -> None:
    proc = run("think", "--style", style, "--json", stdin=text)
    assert json.loads(proc.stdout) == expected


def test_think_displays_thinking_as_numbered_blocks_or_agent_lines() -> None:
    """The seed documents' displays (test_text_seeds.py checks them on their examples):
    colour only on a terminal or when asked."""
    blocks = run("think", "--display", "blocks", stdin=THOUGHTFUL)
    assert blocks.stdout == "Intro.\n\nThe answer is 42.\n"
    assert blocks.stderr == "💭 [Thinking 1]\n  Step one.\n  Step two.\n\n"
    coloured = run("think", "--display", "blocks", "--color", "always", stdin=THOUGHTFUL)
    assert coloured.stderr == (
        "\x1b[34m💭 [Thinking 1]\x1b[0m\n\x1b[36m  Step one.\x1b[0m\n\x1b[36m  Step two.\x1b[0m\n\n"
    )
    merged = subprocess.run(  # 2>&1: the agent's lines start on a line of their own
        [*CLI, "think", "--display", "agent"],
        input="<thinking>I need to analyze this carefully</thinking>The answer is 42",
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=os.environ,
        check=True,
    )
    assert merged.stdout == (
        "🧠 reasoning: I need to analyze this carefully\nThe answer is 42\n📦 Content completed\n"
    )


def test_think_colours_a_terminal_by_default() -> None:
    main_fd, terminal = pty.openpty()
    proc = subprocess.Popen(
        [*CLI, "think", "--display", "blocks"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=terminal,
        env={k: v for k, v in os.environ.items() if k != "NO_COLOR"},
    )
    os.close(terminal)
    out, _ = proc.communicate(b"<think>r</think>A", timeout=120)
    shown = b""
    while True:
        try:
            data = os.read(main_fd, 4096)
        except OSError:  # the terminal closed with the process
            break
        if not data:
            break
        shown += data
    os.close(main_fd)
    assert out == b"A"
    assert b"\x1b[34m" in shown and b"\x1b[36m" in shown


def test_think_keeps_whitespace_and_takes_tool_calls_on_request() -> None:
    text = (
        'Let me check. <think>r</think> <tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
    )
    assert run("think", "--whitespace", "keep", stdin="a <think>x</think> b").stdout == "a  b"
    assert run("think", stdin="a <think>x</think> b").stdout == "a b"
    proc = run("think", "--tool-calls", stdin=text)
    assert proc.stdout == "Let me check."
    assert "[tool call] f {}" in proc.stderr
    fields = json.loads(run("think", "--tool-calls", "--json", stdin=text).stdout)
    assert fields == {
        "content": "Let me check.",
        "reasoning_content": "r",
        "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": "{}"}}],
    }
    assert "<tool_call>" in json.loads(run("think", "--json", stdin=text).stdout)["content"]


def test_think_json_types_the_thoughts_metadata_and_events_follow_the_agent_loop() -> None:
    text = (
        '<thinking thought="Check." thought_type="reflection" confidence="0.7"/>'
        "A <thinking>b</thinking>"
    )
    fields = json.loads(run("think", "--json", stdin=text).stdout)
    assert fields["thoughts"] == [
        {"thought": "Check.", "thoughtType": "reflection", "confidence": 0.7},
        {"thought": "b", "confidence": 0.5},
    ]
    lines = [json.loads(line) for line in run("think", "--events", stdin=text).stdout.splitlines()]
    assert [e["kind"] for e in lines] == [
        "thought-stream", "thought-stream", "content-delta", "content-complete"
    ]  # fmt: skip
    assert lines[0]["thoughtType"] == "reasoning" and lines[0]["verbosity"] == "normal"
    assert lines[0]["metadata"] == {
        "verbosity": "normal",
        "thoughtType": "reflection",
        "confidence": 0.7,
    }
    assert lines[0]["thoughtId"].startswith("thought-") and lines[-1]["content"] == "A"
    for bad in (["--events", "--tool-calls"], ["--events", "--json"]):
        proc = run("think", *bad, stdin="x", check=False)
        assert proc.returncode == 2 and "usage: renderers think" in proc.stderr


def test_think_explains_styles_that_text_cannot_split() -> None:
    proc = run("think", "--style", "gpt-oss", stdin="x", check=False)
    assert proc.returncode == 2
    assert "usage: renderers think" in proc.stderr and "Harmony" in proc.stderr
    assert "deepseek_r1" in run("think", "--help").stdout


def test_think_streams_content_before_input_ends() -> None:
    """Content arrives on stdout while the writer is still writing, in small chunks,
    even when a tag is split across writes."""
    proc = subprocess.Popen(
        [*CLI, "think", "--no-color"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=os.environ,
    )
    assert proc.stdin is not None and proc.stdout is not None
    received = b""

    def read_until(expected: bytes, timeout: float = 60.0) -> None:
        nonlocal received
        deadline = time.monotonic() + timeout
        while expected not in received:
            ready, _, _ = select.select(
                [proc.stdout], [], [], max(0.0, deadline - time.monotonic())
            )
            assert ready, f"no output in time; got {received!r}"
            received += os.read(proc.stdout.fileno(), 4096)

    for chunk in ["Vis", "ible ", "text. <th", "ink>hidden ", "reason", "ing</thi", "nk> More."]:
        proc.stdin.write(chunk.encode())
        proc.stdin.flush()
        time.sleep(0.05)
    read_until(b"Visible text. ")  # emitted before the input is closed
    rest, err = proc.communicate(b" And done.\n", timeout=60)
    received += rest
    assert proc.returncode == 0
    assert received.decode() == "Visible text. More. And done.\n"
    assert err.decode() == "[thinking 1]\n  hidden reasoning\n"


def test_ctrl_c_in_think_exits_130_without_a_traceback() -> None:
    """Interrupting a filter that waits for input is how a user stops it: exit 130, as
    shells expect, with nothing but a newline on stderr."""
    proc = subprocess.Popen(
        [*CLI, "think", "--no-color"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=os.environ,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"Some text. ")
    proc.stdin.flush()
    ready, _, _ = select.select([proc.stdout], [], [], 60.0)  # it is reading stdin now
    assert ready and os.read(proc.stdout.fileno(), 4096) == b"Some text."
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert err.decode() == "\n"


def test_a_tokenizer_missing_from_the_cache_is_one_line_naming_model_and_cache(
    tmp_path: Path,
) -> None:
    conversation = tmp_path / "conversation.json"
    conversation.write_text(json.dumps([{"role": "user", "content": "Hi"}]))
    env = {**os.environ, "HF_HUB_CACHE": str(tmp_path / "empty-cache"), "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [*CLI, "render", "--model", "qwen3", str(conversation)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 1
    assert proc.stdout == ""
    (line,) = proc.stderr.splitlines()
    assert line.startswith("renderers render: error: cannot load the tokenizer of 'Qwen/Qwen3-8B'")
    assert str(tmp_path / "empty-cache") in line and "HF_HUB_OFFLINE=1" in line


# -- what a script and a new user can trust -------------------------------------------------


def test_version_and_bare_command_print_without_error() -> None:
    import renderers

    assert run("--version").stdout == f"renderers {renderers.__version__}\n"
    bare = run()
    assert bare.stdout.startswith("usage: renderers") and "COMMAND" in bare.stdout
    assert "prepare" in bare.stdout and bare.stderr == ""


@pytest.mark.parametrize(
    ("args", "wrong", "right"),
    [
        (["render", "--modle", "qwen3", "c.json"], "--modle", "--model"),
        (["parse", "--modle", "qwen3"], "--modle", "--model"),
        (["show", "--modle", "qwen3", "c.json"], "--modle", "--model"),
        (["prepare", "c.jsonl", "--modle", "qwen3", "-o", "o.parquet"], "--modle", "--model"),
        (["prepare", "c.jsonl", "--model", "qwen3", "--ouput", "o.parquet"], "--ouput", "--output"),
        (["demo", "--modle", "qwen3"], "--modle", "--model"),
        (["inspect", "qwen3", "--jsn"], "--jsn", "--json"),
        (["think", "--stlye", "qwen3"], "--stlye", "--style"),
    ],
)
def test_a_misspelt_option_is_reported_as_unknown_not_as_a_missing_one(
    args: list[str], wrong: str, right: str
) -> None:
    proc = run(*args, stdin="[]", check=False)
    assert proc.returncode == 2
    assert proc.stderr.startswith(f"usage: renderers {args[0]}")
    assert proc.stderr.splitlines()[-1] == (
        f"renderers {args[0]}: error: unrecognized option {wrong} (did you mean {right}?)"
    )


def test_options_are_never_abbreviated() -> None:
    proc = run("render", "--mod", "qwen3", "-", stdin="[]", check=False)
    assert proc.returncode == 2
    assert "unrecognized option --mod (did you mean --model?)" in proc.stderr


def test_an_unknown_name_without_a_slash_is_one_line_without_the_hubs_reasons() -> None:
    proc = run("demo", "--model", "qwen4", check=False)
    assert proc.returncode == 1
    (line,) = proc.stderr.splitlines()
    assert line.startswith("renderers demo: error: 'qwen4' is not a renderer name (known: ")
    assert "huggingface.co" not in line and "HF_HUB_OFFLINE" not in line


@pytest.mark.parametrize("command", ["show", "think"])
def test_an_output_file_in_a_missing_folder_or_a_folder_is_one_line(
    command: str, tmp_path: Path
) -> None:
    conversation = tmp_path / "c.json"
    conversation.write_text(json.dumps([{"role": "user", "content": "Hi"}]))
    for target, reason in ((tmp_path, "is a folder"), (tmp_path / "no" / "x", "no such folder")):
        if command == "show":
            args = ["show", "--model", "qwen3", str(conversation), "--html", str(target)]
            option = "--html"
        else:
            args = ["think", "--thinking-file", str(target)]
            option = "--thinking-file"
        proc = run(*args, stdin="<think>a</think>b", check=False)
        assert proc.returncode == 1
        (line,) = proc.stderr.splitlines()
        where = (
            "is a folder, expected a file name"
            if target == tmp_path
            else (f"{target.parent}: {reason}")
        )
        assert line == f"renderers {command}: error: {option} {target}: {where}"


def test_show_names_the_line_of_a_bad_jsonl_row(tmp_path: Path) -> None:
    data = tmp_path / "rows.jsonl"
    data.write_text('{"messages": []}\n\n{oops\n')
    proc = run("show", "--model", "qwen3", str(data), "--row", "1", check=False)
    assert proc.returncode == 1
    assert "rows.jsonl row 1 (line 3) is not valid JSON" in proc.stderr


def test_render_help_lists_each_models_options() -> None:
    """The option list is built when the help is shown (not at every start)."""
    out = run("render", "--help").stdout
    assert "options per model:" in out
    assert "qwen3:" in out and "enable_thinking: bool (default: True)" in out
    assert "gpt_oss:" in out and "reasoning_effort" in out


def test_models_names_where_each_tokenizer_loads_from() -> None:
    """A hub model id, or the package that ships the tokenizer (no hub download)."""
    out = run("models").stdout
    assert "qwen3: Qwen/Qwen3-8B\n  tokenizer: Qwen/Qwen3-8B\n" in out
    assert "tokenizer: renderers.core.packaged_tokenizers:Llama3Tokenizer\n" in out
    assert "tokenizer: renderers.core.packaged_tokenizers:Llama4Tokenizer\n" in out
    assert "tokenizer: renderers.core.packaged_tokenizers:TekkenTokenizer\n" in out
    assert "tokenizer: renderers.core.packaged_tokenizers:MistralV7Tokenizer\n" in out
    for name, model, tokenizer in (
        ("deepseek_r1", "deepseek-ai/DeepSeek-R1", "DeepSeekR1Tokenizer"),
        ("kimi_k2.6", "moonshotai/Kimi-K2.6", "KimiK26Tokenizer"),
    ):
        assert f"{name}: {model}\n  tokenizer: tml_renderers.tokenizers:{tokenizer}\n" in out
