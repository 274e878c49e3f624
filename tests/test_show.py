"""``renderers show``: conversations, rows of prepared Parquet and JSONL files,
completions, HTML output, colour on a real terminal (a subprocess on a pty), and errors."""

from __future__ import annotations

import io
import itertools
import json
import os
import pty
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from renderers import get_renderer, load_tokenizer
from renderers.cli import main
from renderers.registry import renderer_names
from renderers.rendering import Renderer
from renderers.view import supervised_view
from renderers.view.terminal import visible_whitespace
from tests.corpus import CORPUS
from tests.test_view import TOOL_CONVERSATION, _qwen3_rollout

CLI = [sys.executable, "-m", "renderers.cli"]


@dataclass
class Outcome:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def run(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> Callable[..., Outcome]:
    """The command line in this process (tokenizers stay loaded): exit status, stdout
    and stderr, stdin given as text."""

    def run_cli(*args: str, stdin: str | None = None) -> Outcome:
        capsys.readouterr()
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO((stdin or "").encode())))
        try:
            status = main(list(args))
        except SystemExit as exc:  # usage errors
            status = int(exc.code or 0)
        out, err = capsys.readouterr()
        return Outcome(status, out, err)

    return run_cli


@pytest.fixture(scope="module")
def qwen3() -> Renderer:
    return get_renderer("qwen3")


def _trained_text(r: Renderer, ids: list[int], weights: list[float]) -> list[str]:
    """The visible text of each run of trained tokens."""
    runs, start = [], None
    for k, w in enumerate([*weights, 0.0]):
        if w and start is None:
            start = k
        elif not w and start is not None:
            runs.append(visible_whitespace(r.decode(ids[start:k])))
            start = None
    return runs


def _bracketed(out: str) -> list[str]:
    body = out.split("\n\n", 1)[1]  # after the summary and the legend
    return [re.sub("[⟦⟧]", "", run) for run in re.findall("⟪(.*?)⟫", body, re.S)]


def test_show_prints_a_conversation_token_by_token(
    qwen3: Renderer, tmp_path: Path, run: Callable[..., Outcome]
) -> None:
    path = tmp_path / "conversation.json"
    path.write_text(json.dumps({"messages": TOOL_CONVERSATION}))
    proc = run("show", "--model", "qwen3", str(path), "--train-on", "all_assistant")
    assert proc.returncode == 0, proc.stderr
    example = qwen3.build_supervised_example(TOOL_CONVERSATION, train_on="all_assistant")
    ids, weights = example.tokens.tolist(), example.weights.tolist()
    assert proc.stdout.startswith("qwen3 · conversation.json\n")
    assert f"{len(ids)} tokens, {example.num_trained} trained" in proc.stdout
    assert _bracketed(proc.stdout) == _trained_text(qwen3, ids, weights)
    headers = re.findall(r"^── (\w+) · ", proc.stdout, re.M)
    assert headers == ["system", "user", "assistant", "user", "assistant"]
    assert "\x1b[" not in proc.stdout  # not a terminal: plain markers, no colour


def test_show_reads_a_rollout_saved_with_to_dict_and_outlines_its_parts(
    qwen3: Renderer, tmp_path: Path, run: Callable[..., Outcome]
) -> None:
    rollout, _, _ = _qwen3_rollout(qwen3)
    path = tmp_path / "rollout.json"
    path.write_text(json.dumps(rollout.to_dict()))
    page = tmp_path / "rollout.html"
    proc = run("show", "--model", "qwen3", str(path), "--html", str(page))
    assert proc.returncode == 0, proc.stderr
    html = page.read_text(encoding="utf-8")
    view = rollout.view("qwen3 · rollout.json")
    assert [p.kind for p in view.parts] == ["thinking", "tool_call", "text"]
    assert html == view.to_html()


def test_show_colours_on_a_terminal_unless_no_color_is_set(
    tmp_path: Path, run: Callable[..., Outcome]
) -> None:
    path = tmp_path / "conversation.json"
    path.write_text(json.dumps(TOOL_CONVERSATION))

    def on_a_terminal(env: dict[str, str]) -> str:
        leader, follower = pty.openpty()
        proc = subprocess.Popen(
            [*CLI, "show", "--model", "qwen3", str(path)],
            stdout=follower,
            stderr=subprocess.DEVNULL,
            env={**os.environ, **env},
        )
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed: the program ended
                break
            if not chunk:
                break
            chunks.append(chunk)
        os.close(leader)
        assert proc.wait(timeout=300) == 0
        return b"".join(chunks).decode()

    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    coloured = on_a_terminal({**env, "NO_COLOR": ""})
    assert "\x1b[32" in coloured and "⟪" not in coloured
    plain = on_a_terminal({"NO_COLOR": "1"})
    assert "\x1b[" not in plain and "⟪" in plain
    forced = run("show", "--model", "qwen3", str(path), "--color", "always").stdout
    assert "\x1b[32" in forced


def _prepared_rows(r: Renderer) -> list[dict[str, Any]]:
    """Rows in the layout `renderers prepare` writes: input_ids, labels (-100 where not
    trained), loss_mask, num_tokens, num_trained_tokens and the input row's id."""
    rows = []
    for k, conversation in enumerate(CORPUS[:12]):
        try:
            example = r.build_supervised_example(conversation.messages, tools=conversation.tools)
        except ValueError:
            continue
        ids = example.tokens.tolist()
        mask = (example.weights != 0).astype(np.int8).tolist()
        rows.append(
            {
                "input_ids": ids,
                "labels": [t if m else -100 for t, m in zip(ids, mask, strict=True)],
                "loss_mask": mask,
                "num_tokens": len(ids),
                "num_trained_tokens": sum(mask),
                "row_id": k,
            }
        )
    assert len(rows) >= 5
    return rows


def test_show_reads_a_row_of_a_prepared_parquet_file(
    qwen3: Renderer, tmp_path: Path, run: Callable[..., Outcome]
) -> None:
    rows = _prepared_rows(qwen3)
    schema = pa.schema(
        [
            ("input_ids", pa.list_(pa.int32())),
            ("labels", pa.list_(pa.int32())),
            ("loss_mask", pa.list_(pa.int8())),
            ("num_tokens", pa.int32()),
            ("num_trained_tokens", pa.int32()),
            ("row_id", pa.int64()),
        ]
    )
    path = tmp_path / "prepared.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), path, row_group_size=2)
    for k in (0, 3, len(rows) - 1):
        proc = run("show", "--model", "qwen3", str(path), "--row", str(k))
        assert proc.returncode == 0, proc.stderr
        row = rows[k]
        assert f"{row['num_tokens']} tokens, {row['num_trained_tokens']} trained" in proc.stdout
        assert proc.stdout.startswith(f"qwen3 · prepared.parquet · row {k}\n")
        weights = [float(m) for m in row["loss_mask"]]
        assert _bracketed(proc.stdout) == _trained_text(qwen3, row["input_ids"], weights)

    # Without loss_mask, labels say what is trained.
    labels_only = tmp_path / "labels.parquet"
    pq.write_table(pa.Table.from_pylist(rows).drop_columns(["loss_mask"]), labels_only)
    by_labels = run("show", "--model", "qwen3", str(labels_only), "--row", "3").stdout
    assert (
        by_labels.split("\n", 1)[1]
        == (run("show", "--model", "qwen3", str(path), "--row", "3").stdout.split("\n", 1)[1])
    )

    missing = run("show", "--model", "qwen3", str(path), "--row", str(len(rows)))
    assert missing.returncode == 1
    assert missing.stderr == (
        f"renderers show: error: {path}: row {len(rows)} does not exist (it has {len(rows)} rows)\n"
    )


def test_show_reads_conversation_rows_from_jsonl_and_parquet(
    qwen3: Renderer, tmp_path: Path, run: Callable[..., Outcome]
) -> None:
    conversations = [c for c in CORPUS if c.tools is None][:4]
    jsonl = tmp_path / "conversations.jsonl"
    jsonl.write_text("".join(json.dumps({"messages": c.messages}) + "\n" for c in conversations))
    table = tmp_path / "conversations.parquet"
    pq.write_table(pa.Table.from_pylist([{"messages": c.messages} for c in conversations]), table)
    example = qwen3.build_supervised_example(conversations[2].messages)
    expected = _trained_text(qwen3, example.tokens.tolist(), example.weights.tolist())
    for path in (jsonl, table):
        proc = run("show", "--model", "qwen3", str(path), "--row", "2")
        assert proc.returncode == 0, proc.stderr
        assert _bracketed(proc.stdout) == expected


def test_show_splits_a_packed_row_into_its_sequences(
    qwen3: Renderer, tmp_path: Path, run: Callable[..., Outcome]
) -> None:
    rows = _prepared_rows(qwen3)[:2]
    packed = {
        "input_ids": rows[0]["input_ids"] + rows[1]["input_ids"],
        "loss_mask": rows[0]["loss_mask"] + rows[1]["loss_mask"],
        "seq_lens": [rows[0]["num_tokens"], rows[1]["num_tokens"]],
    }
    path = tmp_path / "packed.jsonl"
    path.write_text(json.dumps(packed) + "\n")
    out = run("show", "--model", "qwen3", str(path), "--row", "0").stdout
    labels = re.findall(r"^── \w+ · (seq \d)", out, re.M)
    first = len(supervised_view(rows[0]["input_ids"], rows[0]["loss_mask"], qwen3).segments)
    second = len(supervised_view(rows[1]["input_ids"], rows[1]["loss_mask"], qwen3).segments)
    assert labels == ["seq 0"] * first + ["seq 1"] * second


def test_render_supervised_pipes_into_show(qwen3: Renderer, run: Callable[..., Outcome]) -> None:
    rendered = run(
        "render", "--model", "qwen3", "--supervised", "-", stdin=json.dumps(TOOL_CONVERSATION)
    )
    shown = run("show", "--model", "qwen3", "-", stdin=rendered.stdout)
    assert shown.returncode == 0, shown.stderr
    data = json.loads(rendered.stdout)
    assert _bracketed(shown.stdout) == _trained_text(qwen3, data["tokens"], data["weights"])


def test_show_html_writes_one_page(
    qwen3: Renderer, tmp_path: Path, run: Callable[..., Outcome]
) -> None:
    conversation = tmp_path / "conversation.json"
    conversation.write_text(json.dumps(TOOL_CONVERSATION))
    page = tmp_path / "page.html"
    proc = run("show", "--model", "qwen3", str(conversation), "--html", str(page))
    assert proc.returncode == 0 and proc.stdout == ""
    example = qwen3.build_supervised_example(TOOL_CONVERSATION)
    assert proc.stderr == (
        f"renderers show: wrote {page} ({len(example.tokens)} tokens, "
        f"{example.num_trained} trained)\n"
    )
    text = page.read_text(encoding="utf-8")
    assert (
        text
        == supervised_view(
            example.tokens, example.weights, qwen3, "qwen3 · conversation.json"
        ).to_html()
    )
    assert run("show", "--model", "qwen3", str(conversation), "--html", "-").stdout == text


def test_show_parse_lists_parts_spans_and_termination(
    qwen3: Renderer, run: Callable[..., Outcome]
) -> None:
    answer = {"role": "assistant", "reasoning_content": "Think.", "content": "Done."}
    example = qwen3.build_supervised_example([{"role": "user", "content": "Hi"}, answer])
    ids = example.tokens[example.weights == 1].tolist()
    proc = run("show", "--model", "qwen3", "--parse", "-", stdin=json.dumps(ids))
    assert proc.returncode == 0, proc.stderr
    result = qwen3.parse_response(ids)
    (a, b), (c, d) = result.spans
    assert "termination: stop" in proc.stdout
    assert f"part 0: thinking (tokens {a}–{b - 1})" in proc.stdout
    assert f"part 1: text (tokens {c}–{d - 1})" in proc.stdout
    assert "〔thinking〕" in proc.stdout and "〔/text〕" in proc.stdout


@pytest.mark.parametrize(
    ("args", "stdin", "status", "message"),
    [
        (["--parse", "--row", "1"], "[1, 2]", 2, "--parse reads token ids"),
        (["--train-on", "all", "-"], '{"tokens": [1], "weights": [1]}', 2, "do not apply"),
        (["-"], '{"tokens": [1, 999999999], "weights": [0, 1]}', 1, "token_ids[1] = 999999999"),
        (["-"], '{"input_ids": [1, 2], "labels": [-100]}', 1, "labels has 1 values for 2"),
        (["-"], '{"input_ids": [1, 2]}', 1, "input_ids without labels"),
        (["-"], '{"something": 1}', 1, "stdin: expected a conversation (messages)"),
        (
            ["-"],
            '{"input_ids": [], "labels": [], "error": "messages[1]: bad role"}',
            1,
            "stdin was rejected by prepare: messages[1]: bad role",
        ),
        (["--row", "-1", "-"], "[]", 2, "--row must be 0 or more"),
        (["missing.parquet"], None, 1, "missing.parquet: no such file"),
    ],
)
def test_show_errors_are_one_line(
    args: list[str], stdin: str | None, status: int, message: str, run: Callable[..., Outcome]
) -> None:
    proc = run("show", "--model", "qwen3", *args, stdin=stdin)
    assert proc.returncode == status
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    if status == 1:
        assert proc.stderr.startswith("renderers show: error: ") and proc.stderr.count("\n") == 1


def test_show_reads_a_saved_rollout(
    qwen3: Renderer, tmp_path: Path, run: Callable[..., Outcome]
) -> None:
    rollout, _, completions = _qwen3_rollout(qwen3)
    path = tmp_path / "rollout.json"
    saved = {"tokens": rollout.tokens.tolist(), "weights": rollout.weights.tolist()}
    path.write_text(json.dumps(saved))
    proc = run("show", "--model", "qwen3", str(path))
    assert proc.returncode == 0, proc.stderr
    assert _bracketed(proc.stdout) == [visible_whitespace(qwen3.decode(c)) for c in completions]
    headers = re.findall(r"^── (\w+) · ", proc.stdout, re.M)
    assert headers == ["system", "user", "assistant", "user", "assistant"]


# -- every family ------------------------------------------------------------------------

SHOWN = ("tool_result_then_answer", "tool_call_with_reasoning", "reasoning_last", "multi_turn")
"""Corpus conversations in order of preference: each family shows the first it can train
(reasoning dropped where the format refuses it), every assistant turn trained if it can."""


def _family_source(name: str) -> str:
    """Where ``get_renderer(name)`` loads the tokenizer from offline: the class's
    ``tokenizer_source``, or the stand-in the tests use for a default model the hub cache
    lacks (tests/conftest.py)."""
    from renderers.registry import renderer_class
    from tests.conftest import TML_TOKENIZERS

    cls = renderer_class(name)
    return cls.tokenizer_source or TML_TOKENIZERS.get(cls.default_model, cls.default_model)


def _shown_example(r: Renderer) -> tuple[dict[str, Any], str, Any]:
    """The conversation (``{"messages", "tools"}``), the ``--train-on`` value and the
    example it renders to: the first of :data:`SHOWN` the format can train."""
    from tests.tml_oracle import without_reasoning

    by_id = {c.id: c for c in CORPUS}
    for conversation_id in SHOWN:
        conversation = by_id[conversation_id]
        for messages in (conversation.messages, without_reasoning(conversation.messages)):
            for train_on in ("all_assistant", "last_assistant"):
                try:
                    example = r.build_supervised_example(
                        messages, tools=conversation.tools, train_on=train_on
                    )
                except ValueError:
                    continue
                return {"messages": messages, "tools": conversation.tools}, train_on, example
    raise AssertionError(f"{r.name} trains none of {SHOWN}")


@pytest.mark.parametrize("name", renderer_names())
def test_show_marks_exactly_the_trained_tokens_for_every_family(
    name: str, tmp_path: Path, run: Callable[..., Outcome]
) -> None:
    """``renderers show`` on a conversation with a tool call and reasoning (where the
    format trains them), as text and as HTML: exit 0, every trained token's text marked
    as trained, the untrained prompt not."""
    source = _family_source(name)
    r = get_renderer(name, load_tokenizer(source))
    record, train_on, example = _shown_example(r)
    ids, weights = example.tokens.tolist(), example.weights.tolist()
    assert 1.0 in weights and 0.0 in weights
    # Each run of trained tokens, split where a message's header starts a new section.
    starts = [s.start for s in supervised_view(ids, weights, r).segments]
    trained = [
        run
        for a, b in itertools.pairwise([*starts, len(ids)])
        for run in _trained_text(r, ids[a:b], weights[a:b])
    ]
    path = tmp_path / "conversation.json"
    path.write_text(json.dumps(record))
    args = ("show", "--model", name, "--tokenizer", source, "--train-on", train_on, str(path))

    proc = run(*args)
    assert proc.returncode == 0, proc.stderr
    assert f"{len(ids)} tokens, {example.num_trained} trained" in proc.stdout
    assert _bracketed(proc.stdout) == trained  # marked, and nothing else is

    page = tmp_path / "page.html"
    proc = run(*args, "--html", str(page))
    assert proc.returncode == 0, proc.stderr
    match = re.search(
        r'<script type="application/json" id="view-data">(.*?)</script>',
        page.read_text(encoding="utf-8"),
        re.S,
    )
    assert match
    data = json.loads(match.group(1))
    assert data["ids"] == ids
    assert [value for value, count in data["weights"] for _ in range(count)] == weights
    for token in ids:
        assert data["text"][str(token)] == r.table.id_to_bytes[token].decode(
            "utf-8", "backslashreplace"
        )
