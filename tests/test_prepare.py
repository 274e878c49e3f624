"""The dataset pipeline run for real: datasets.map (num_proc=2), the ``renderers prepare``
command (rejects, packing, order, length policies, atomic output, exit codes), data through
Arrow that must not change quietly, and renderers that travel cheaply to workers. Ray Data
runs in ``test_ray.py``."""

from __future__ import annotations

import contextlib
import copy
import json
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from renderers import get_renderer
from renderers.bench.prepare import generate_corpus
from renderers.cli import main
from renderers.prepare import ConversationMapper, job, pack_table
from renderers.prepare.sources import Batch

MODEL = "Qwen/Qwen3-8B"
_CLI = [sys.executable, "-m", "renderers.cli"]
_PARALLEL = ["--num-proc", "2", "--batch-size", "1"]  # many small work units
ROWS = generate_corpus(24, seed=7)
# The safe shape for Arrow (Dataset.from_list, Parquet, Ray Data): JSON objects as JSON
# text, so that no struct reorders their keys (the arguments of ROWS already are).
ARROW_ROWS = [{**row, "tools": json.dumps(row["tools"]) if row["tools"] else None} for row in ROWS]


def _expected(row: dict[str, Any]) -> tuple[list[int], list[int]]:
    """Ids and labels straight from the renderer (first token never a target)."""
    example = get_renderer(MODEL).build_supervised_example(row["messages"], row["tools"])
    labels = np.where(example.weights > 0, example.tokens, -100)
    labels[0] = -100
    return example.tokens.tolist(), labels.tolist()


def _write_jsonl(path: Path, rows: list[Any]) -> None:
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write((row if isinstance(row, str) else json.dumps(row)) + "\n")


def test_datasets_map_with_two_processes_keeps_order_and_rows() -> None:
    import datasets

    dataset = datasets.Dataset.from_list(ARROW_ROWS)
    mapper = ConversationMapper(MODEL)
    out = dataset.map(
        mapper,
        batched=True,
        batch_size=5,
        num_proc=2,
        with_indices=True,
        remove_columns=["messages", "tools"],
    )
    assert out["row_id"] == list(range(len(ROWS)))
    for k in (0, 11, 23):
        ids, labels = _expected(ROWS[k])
        assert out[k]["input_ids"] == ids
        assert out[k]["labels"] == labels
        assert out[k]["num_trained_tokens"] == sum(1 for t in labels if t != -100)


def test_renderers_pickle_small_and_restore_from_the_process_cache() -> None:
    renderer = get_renderer(MODEL)
    data = pickle.dumps(renderer)
    assert len(data) < 64 * 1024
    restored = pickle.loads(data)
    assert restored is pickle.loads(data)  # from the per-process cache
    assert restored.tokenizer is renderer.tokenizer  # the tokenizer is never reloaded
    assert len(pickle.dumps(ConversationMapper(renderer))) < 64 * 1024
    # A fresh process that has loaded the tokenizer gets the renderer from its cache.
    script = (
        "import pickle, sys, time\n"
        "from renderers import load_tokenizer\n"
        f"tok = load_tokenizer({MODEL!r})\n"
        "start = time.perf_counter()\n"
        "r = pickle.loads(sys.stdin.buffer.read())\n"
        "seconds = time.perf_counter() - start\n"
        "assert r.tokenizer is tok\n"
        "assert pickle.loads(pickle.dumps(r)) is r\n"
        "print(seconds)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], input=data, capture_output=True, check=True
    )
    assert float(done.stdout) >= 0.0  # the time is reported by the benchmark, not asserted


def test_prepare_skips_bad_rows_to_the_rejects_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows: list[Any] = [ROWS[0], ROWS[1]]
    rows.append({"messages": [{"role": "robot", "content": "x"}]})
    rows.append("{not json")
    rows.append({"messages": [{"role": "user", "content": "no answer"}]})
    rows.append(ROWS[2])
    data = tmp_path / "in.jsonl"
    _write_jsonl(data, rows)
    out = tmp_path / "out.parquet"
    stats = tmp_path / "stats.json"
    code = main(
        [
            "prepare",
            "--model",
            MODEL,
            str(data),
            "-o",
            str(out),
            "--on-error",
            "skip",
            "--max-reject-fraction",
            "0.5",
            "--stats",
            str(stats),
        ]
    )
    assert code == 0
    table = pq.read_table(out)
    assert table.column("row_id").to_pylist() == [0, 1, 5]
    assert table.column("input_ids")[2].as_py() == _expected(ROWS[2])[0]
    rejects = [
        json.loads(line) for line in (tmp_path / "out.rejects.jsonl").read_text().splitlines()
    ]
    assert [(r["row_id"], r["message_index"]) for r in rejects] == [(2, 0), (3, None), (4, None)]
    assert "unknown role 'robot'" in rejects[0]["error"]
    assert "not valid JSON" in rejects[1]["error"]
    assert "no assistant message" in rejects[2]["error"]
    summary = json.loads(stats.read_text())
    assert (summary["rows_read"], summary["rows_written"], summary["rows_rejected"]) == (6, 3, 3)
    assert summary["tokens"] == sum(table.column("num_tokens").to_pylist())
    assert "rejected  3 rows" in capsys.readouterr().err


def test_prepare_stops_on_a_bad_row_with_one_line_and_no_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "in.jsonl"
    _write_jsonl(data, [ROWS[0], {"messages": [{"role": "robot", "content": "x"}]}])
    out = tmp_path / "out.parquet"
    assert main(["prepare", "--model", MODEL, str(data), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("renderers prepare: error: row 1: messages[0].role: unknown role")
    assert err.count("\n") == 1
    assert list(tmp_path.iterdir()) == [data]  # no output, no temporary file left


@pytest.mark.parametrize("num_proc", [2, 3])
def test_parallel_runs_write_what_one_process_writes_in_input_order(
    num_proc: int, tmp_path: Path
) -> None:
    # Small work units, so that this process and its workers each map several, and bad
    # rows among them, so that the rejects are ordered too.
    rows: list[Any] = list(ROWS)
    rows[5] = {"messages": [{"role": "robot", "content": "x"}]}
    rows[13] = "{not json"
    data = tmp_path / "in.jsonl"
    _write_jsonl(data, rows)
    spools = set(_spool_folders())  # (a killed run elsewhere may have left one)
    outputs = []
    for n in (1, num_proc):
        out = tmp_path / f"out-{n}.parquet"
        args = [str(data), "-o", str(out), "--on-error", "skip", "--batch-size", "2", "-q"]
        assert main(["prepare", "--model", MODEL, *args, "--num-proc", str(n)]) == 0
        rejects = (tmp_path / f"out-{n}.rejects.jsonl").read_text()
        outputs.append((pq.read_table(out), rejects))
    (single, single_rejects), (parallel, parallel_rejects) = outputs
    assert parallel.equals(single)
    assert set(_spool_folders()) == spools
    assert parallel_rejects == single_rejects
    assert parallel.column("row_id").to_pylist() == [k for k in range(24) if k not in (5, 13)]
    assert parallel.column("input_ids")[20].as_py() == _expected(ROWS[22])[0]


def test_a_parallel_run_stops_on_a_bad_row_with_one_line_and_no_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "in.jsonl"
    rows: list[Any] = list(ROWS[:9])
    rows[7] = {"messages": [{"role": "robot", "content": "x"}]}
    _write_jsonl(data, rows)
    out = tmp_path / "out.parquet"
    spools = set(_spool_folders())
    args = [str(data), "-o", str(out), "--batch-size", "1", "--num-proc", "2"]
    assert main(["prepare", "--model", MODEL, *args]) == 1
    err = capsys.readouterr().err
    assert err.startswith("renderers prepare: error: row 7: messages[0].role: unknown role")
    assert err.count("\n") == 1
    assert list(tmp_path.iterdir()) == [data]
    assert set(_spool_folders()) == spools


def test_ctrl_c_in_a_parallel_run_exits_130_with_one_newline_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    """A terminal's Ctrl-C interrupts the whole process group, workers included: the run
    stops with exit 130 and only a newline on stderr (no worker reports its interruption),
    and leaves no output, temporary file or spool folder."""
    data = tmp_path / "in.jsonl"
    _write_jsonl(data, generate_corpus(3000, seed=3))
    out = tmp_path / "out.parquet"
    before = set(_spool_folders())
    proc = subprocess.Popen(
        [*_CLI, "prepare", "--model", MODEL, str(data), "-o", str(out), "-q", *_PARALLEL],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )
    deadline = time.monotonic() + 120
    while not set(_spool_folders()) - before:  # the workers are mapping now
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.3)
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert (proc.returncode, err.decode()) == (130, "\n")
    assert list(tmp_path.iterdir()) == [data]
    assert set(_spool_folders()) == before


def _spool_folders() -> list[Path]:
    """Spool folders of parallel runs (workers hand tables over there) still present."""
    places = {Path("/dev/shm"), Path(tempfile.gettempdir())}
    return [p for place in places if place.is_dir() for p in place.glob("renderers-prepare-*")]


class _Finished:
    """What ``Pool.apply_async`` gives once the work is done."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def get(self) -> Any:
        return self.value


def test_a_worker_hands_its_table_over_as_a_file_read_back_equal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mapper = ConversationMapper(get_renderer(MODEL))
    batch = Batch(0, "objects", ROWS[:5])
    expected = batch.prepare(mapper)
    # What _init_worker sets in a worker (it also ignores SIGINT: not in this process).
    monkeypatch.setattr(job, "_WORKER_MAPPER", mapper)
    monkeypatch.setattr(job, "_WORKER_SPOOL", str(tmp_path))
    handed, _ = job._work(batch)
    assert isinstance(handed, job._Spooled)
    assert Path(handed.path).parent == tmp_path and Path(handed.path).exists()
    table, _ = job._result(_Finished((handed, 1.0)))
    assert table.equals(expected)
    assert list(tmp_path.iterdir()) == []  # read, then removed


def test_tables_go_through_the_pipe_when_the_spool_cannot_take_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "in.jsonl"
    _write_jsonl(data, ROWS[:12])
    missing = tmp_path / "no-such-folder"

    @contextlib.contextmanager
    def unwritable_spool(**_: Any) -> Iterator[str]:
        yield str(missing)

    monkeypatch.setattr(job.tempfile, "TemporaryDirectory", unwritable_spool)
    outputs = []
    for n in (1, 2):
        out = tmp_path / f"out-{n}.parquet"
        args = [str(data), "-o", str(out), "--batch-size", "2", "-q", "--num-proc", str(n)]
        assert main(["prepare", "--model", MODEL, *args]) == 0
        outputs.append(pq.read_table(out))
    assert outputs[1].equals(outputs[0])
    assert outputs[1].column("input_ids")[11].as_py() == _expected(ROWS[11])[0]


def test_prepare_usage_errors_exit_2(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    _write_jsonl(data, ROWS[:1])
    with pytest.raises(SystemExit) as exit_info:
        main(
            [
                "prepare",
                "--model",
                MODEL,
                str(data),
                "-o",
                str(tmp_path / "o.parquet"),
                "--pack",
                "100",
                "--max-length",
                "200",
            ]
        )
    assert exit_info.value.code == 2


@pytest.mark.parametrize("policy", ["drop", "truncate", "error"])
def test_max_length_policies(policy: str, tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    _write_jsonl(data, ROWS[:6])
    lengths = [len(_expected(r)[0]) for r in ROWS[:6]]
    limit = sorted(lengths)[3]
    out = tmp_path / "out.jsonl"
    args = [
        "prepare",
        "--model",
        MODEL,
        str(data),
        "-o",
        str(out),
        "--max-length",
        str(limit),
        "--overflow",
        policy,
        "-q",
    ]
    if policy == "error":
        assert main(args) == 1
        assert not out.exists()
        return
    assert main(args) == 0
    written = [json.loads(line) for line in out.read_text().splitlines()]
    if policy == "drop":
        assert [w["row_id"] for w in written] == [k for k, n in enumerate(lengths) if n <= limit]
        rejects = (tmp_path / "out.rejects.jsonl").read_text()
        assert rejects.count("longer than max_length") == sum(n > limit for n in lengths)
    else:
        assert [w["num_tokens"] for w in written] == [min(n, limit) for n in lengths]
        assert [w["untruncated_num_tokens"] for w in written] == lengths
        assert written[0]["input_ids"] == _expected(ROWS[0])[0][:limit]


def test_packing_keeps_order_and_no_label_crosses_conversations(tmp_path: Path) -> None:
    data = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist(ARROW_ROWS[:10]), data)
    out = tmp_path / "packed.parquet"
    length = 4096
    assert (
        main(
            [
                "prepare",
                "--model",
                MODEL,
                str(data),
                "-o",
                str(out),
                "--pack",
                str(length),
                "--shifted",
                "--overflow",
                "drop",
                "--batch-size",
                "3",
                "--num-proc",
                "2",
                "-q",
            ]
        )
        == 0
    )
    packed = pq.read_table(out).to_pylist()
    row_ids = [i for row in packed for i in row["row_ids"]]
    assert row_ids == sorted(row_ids)
    expected = {k: _expected(ROWS[k]) for k in range(10)}
    assert set(row_ids) == {k for k, (ids, _) in expected.items() if len(ids) <= length}
    for row in packed:
        assert row["num_tokens"] == sum(row["seq_lens"]) <= length
        start = 0
        for row_id, n in zip(row["row_ids"], row["seq_lens"], strict=True):
            ids, labels = expected[row_id]
            assert row["input_ids"][start : start + n] == ids
            assert row["labels"][start : start + n] == labels
            assert row["position_ids"][start : start + n] == list(range(n))
            assert row["labels"][start] == -100  # never predicted from the previous one
            assert row["target_ids"][start + n - 1] == -100  # nor predicts the next one
            assert row["target_ids"][start : start + n - 1] == ids[1:]
            start += n
    # The library function packs the same way.
    unpacked = ConversationMapper(MODEL, max_length=length, overflow="drop", on_error="skip")(
        {"messages": [r["messages"] for r in ROWS[:10]], "tools": [r["tools"] for r in ROWS[:10]]},
        list(range(10)),
    )
    assert pack_table(unpacked, length).column("row_ids").to_pylist() == [
        r["row_ids"] for r in packed
    ]


def test_inputs_of_every_kind_give_the_same_rows_in_order(tmp_path: Path) -> None:
    import datasets

    rows = ARROW_ROWS[:4]
    folder = tmp_path / "folder"
    folder.mkdir()
    _write_jsonl(folder / "a.jsonl", rows[:2])
    (folder / "b.json").write_text(json.dumps(rows[2:]), encoding="utf-8")
    saved = tmp_path / "saved"
    datasets.Dataset.from_list(rows).save_to_disk(str(saved))
    results = []
    for source in (folder, saved):
        out = tmp_path / f"{source.name}.arrow"
        assert main(["prepare", "--model", MODEL, str(source), "-o", str(out), "-q"]) == 0
        results.append(datasets.Dataset.from_file(str(out)))
    for result in results:
        assert result["row_id"] == [0, 1, 2, 3]
        assert result["input_ids"] == [_expected(r)[0] for r in ROWS[:4]]


def test_an_empty_input_fails_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run that produced no row fails, whatever the reason: a script feeding an empty
    shard must not take an empty file for a training set."""
    data = tmp_path / "empty.jsonl"
    data.write_text("\n", encoding="utf-8")
    out = tmp_path / "out.parquet"
    assert main(["prepare", "--model", MODEL, str(data), "-o", str(out), "-q"]) == 1
    assert not out.exists()
    (line,) = capsys.readouterr().err.splitlines()
    assert line.endswith(f"no row written: {data} holds no rows"), line


# -- data through Arrow: nothing changes quietly ------------------------------------------

DATA = Path(__file__).parent / "data"
SHAREGPT_FILE = DATA / "sharegpt_tools.jsonl"


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# Real-looking tool-calling rows as published: tool schemas of different shapes, content
# as text or as a list of parts, arguments as text or as objects whose values differ in
# type between rows. Arrow cannot hold them in one schema (Dataset.from_list and Ray's
# from_items fail on them), and would change them if it could.
HETEROGENEOUS: list[dict[str, Any]] = [
    *_jsonl(DATA / "sharegpt_tools.openai.jsonl"),
    {
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Round 2.5 and 3.5."}]},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"type": "function", "function": {"name": "round", "arguments": {"x": 2.5}}},
                    {"type": "function", "function": {"name": "round", "arguments": {"x": 3.5}}},
                ],
            },
            {"role": "tool", "content": "2"},
            {"role": "tool", "content": "4"},
            {"role": "assistant", "content": "2 and 4 (ties round to even)."},
        ],
        "tools": [{"type": "function", "function": {"name": "round", "parameters": {}}}],
    },
    {
        "messages": [
            {"role": "user", "content": "Move to (3, 0)."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "type": "function",
                        "function": {"name": "move", "arguments": {"y": 0, "x": 3}},
                    }
                ],
            },
            {"role": "tool", "content": "ok"},
            {"role": "assistant", "content": "Moved."},
        ],
        "tools": None,
    },
]


def _as_json_text(row: dict[str, Any]) -> dict[str, Any]:
    """The recipe for Arrow: messages and tools as JSON text columns."""
    tools = row.get("tools")
    return {"messages": json.dumps(row["messages"]), "tools": json.dumps(tools) if tools else None}


def _expected_ids(row: dict[str, Any]) -> list[int]:
    return (
        get_renderer(MODEL).build_supervised_example(row["messages"], row["tools"]).tokens.tolist()
    )


def test_heterogeneous_rows_go_through_datasets_as_json_text_exactly() -> None:
    import datasets

    with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError)):
        datasets.Dataset.from_list(HETEROGENEOUS)  # as published: no single Arrow schema
    dataset = datasets.Dataset.from_list([_as_json_text(r) for r in HETEROGENEOUS])
    out = dataset.map(ConversationMapper(MODEL), batched=True, remove_columns=["messages", "tools"])
    assert out["error"] == [None] * len(HETEROGENEOUS)
    assert out["input_ids"] == [_expected_ids(r) for r in HETEROGENEOUS]


def _struct_rows() -> list[dict[str, Any]]:
    """Two rows whose call arguments are objects: Arrow makes them one struct."""
    first, second = copy.deepcopy(HETEROGENEOUS[-1]), copy.deepcopy(HETEROGENEOUS[-1])
    second["messages"][1]["tool_calls"][0]["function"]["arguments"] = {"x": 1.5, "z": "q"}
    return [first, second]


def test_arrow_changes_argument_objects_and_the_mapper_refuses_them(tmp_path: Path) -> None:
    import datasets

    rows = _struct_rows()
    dataset = datasets.Dataset.from_list(rows)
    stored = dataset[0]["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert stored == {"y": 0, "x": 3.0, "z": None}  # what Arrow made of {"y": 0, "x": 3}
    advice = r"arguments: tool-call arguments stored as objects .* as JSON text"
    with pytest.raises(ValueError, match=r"messages\[\]\.tool_calls\[\]\.function\." + advice):
        dataset.map(ConversationMapper(MODEL), batched=True)
    # The same with the rows given as a table, and after a Parquet file.
    with pytest.raises(ValueError, match=advice):
        ConversationMapper(MODEL)(pa.Table.from_pylist(rows))
    # Python lists with Arrow's null-filled keys (what an IterableDataset batch holds).
    with pytest.raises(
        ValueError, match=r"row 0: messages\[1\]\.tool_calls\[0\]\.function\." + advice
    ):
        ConversationMapper(MODEL)(dataset[:], [0, 1])
    # Rendered as stored when asked: the int became a float.
    accepted = ConversationMapper(MODEL, arrow_structs="accept")(pa.Table.from_pylist(rows))
    assert accepted.column("input_ids")[0].as_py() != _expected_ids(rows[0])
    # Objects given in Python, not through Arrow, are exact.
    exact = ConversationMapper(MODEL).map_rows([(0, rows[0]["messages"], None)])
    assert exact.column("input_ids")[0].as_py() == _expected_ids(rows[0])


def test_prepare_refuses_a_parquet_file_with_argument_objects_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "calls.parquet"
    pq.write_table(pa.Table.from_pylist(_struct_rows()), data)
    out = tmp_path / "out.parquet"
    assert main(["prepare", "--model", MODEL, str(data), "-o", str(out), "-q"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "json.dumps(arguments)" in err
    assert "--arrow-structs accept" in err and "arrow_structs=" not in err
    assert not out.exists()


def test_tool_definitions_stored_as_structs_are_refused_too() -> None:
    import datasets

    rows = [_as_json_text(r) for r in HETEROGENEOUS[:2]]
    for row, source in zip(rows, HETEROGENEOUS[:2], strict=True):
        row["tools"] = source["tools"]
    dataset = datasets.Dataset.from_list(rows)
    with pytest.raises(ValueError, match=r"^tools: tool definitions stored as objects"):
        dataset.map(ConversationMapper(MODEL), batched=True)


def test_null_and_nan_mean_absent_in_every_column_the_mapper_reads() -> None:
    import pandas as pd

    rows = [_as_json_text(r) for r in HETEROGENEOUS[3:5]]
    frame = pd.DataFrame(
        {
            "messages": [r["messages"] for r in rows],
            "tools": [float("nan")] * 2,
            "system": [float("nan"), None],
            "id": [7, float("nan")],
        }
    )
    out = ConversationMapper(MODEL, id_column="id")(frame)
    assert out.column("error").to_pylist() == [None, None]
    assert out.column("row_id").to_pylist() == [7, None]
    expected = [
        get_renderer(MODEL).build_supervised_example(HETEROGENEOUS[k]["messages"]).tokens.tolist()
        for k in (3, 4)
    ]
    assert out.column("input_ids").to_pylist() == expected


# -- the command line: shapes, exit codes and messages a script can trust ------------------


def test_prepare_reads_a_sharegpt_tool_calling_file_as_published(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.jsonl"
    assert main(["prepare", "--model", MODEL, str(SHAREGPT_FILE), "-o", str(out)]) == 0
    written = [json.loads(line) for line in out.read_text().splitlines()]
    expected = _jsonl(DATA / "sharegpt_tools.openai.jsonl")
    assert [w["input_ids"] for w in written] == [_expected_ids(r) for r in expected]
    assert "sharegpt_tools.jsonl: 6 rows (sharegpt)" in capsys.readouterr().err


def test_a_run_that_writes_no_row_fails_and_keeps_the_rejects(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "in.jsonl"
    _write_jsonl(data, [{"messages": [{"role": "user", "content": "no answer"}]}] * 3)
    out = tmp_path / "out.parquet"
    args = [str(data), "-o", str(out), "--on-error", "skip", "--max-reject-fraction", "1"]
    assert main(["prepare", "--model", MODEL, *args]) == 1
    err = capsys.readouterr().err
    assert err.startswith("renderers prepare: error: no row written: all 3 rows were rejected")
    assert err.count("\n") == 1 and "no assistant message" in err
    assert not out.exists()
    assert len((tmp_path / "out.rejects.jsonl").read_text().splitlines()) == 3


@pytest.mark.parametrize(("fraction", "code"), [(None, 1), ("0.5", 0)])
def test_more_rejected_rows_than_the_limit_fail_the_run(
    fraction: str | None, code: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows: list[Any] = [ROWS[k] for k in range(6)]
    rows[1] = rows[4] = {"messages": [{"role": "robot", "content": "x"}]}
    data = tmp_path / "in.jsonl"
    _write_jsonl(data, rows)
    out = tmp_path / "out.parquet"
    args = [str(data), "-o", str(out), "--on-error", "skip", "-q"]
    if fraction is not None:
        args += ["--max-reject-fraction", fraction]
    assert main(["prepare", "--model", MODEL, *args]) == code
    err = capsys.readouterr().err
    if code:
        assert "2 of 6 rows failed (33.3%, more than --max-reject-fraction 0.1)" in err
        assert not out.exists()
    else:
        assert pq.read_table(out).num_rows == 4


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (
            ["--train-on", "last_asistant"],
            "--train-on: 'last_asistant' is neither a mode (last_assistant, last_turn, "
            "last_assistant_turn, "
            "all_assistant, all) nor a role of qwen3 (system, user, assistant, tool",
        ),
        (
            ["--messages-column", "msgs"],
            "--messages-column msgs: in.jsonl has no such column (its first row has: "
            "messages, tools)",
        ),
        (["--role", "robot=android"], "--role expects NAME=ROLE with ROLE one of system"),
        (["--max-reject-fraction", "2"], "--max-reject-fraction must be between 0 and 1"),
        (["--format", "alpaca"], "argument --format: invalid choice: 'alpaca'"),
    ],
)
def test_wrong_options_are_usage_errors_before_any_row(
    options: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "in.jsonl"
    _write_jsonl(data, ROWS[:50])
    out = tmp_path / "out.parquet"
    with pytest.raises(SystemExit) as exit_info:
        main(["prepare", "--model", MODEL, str(data), "-o", str(out), *options])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: renderers prepare")
    assert message in err and err.count("error:") == 1
    assert list(tmp_path.iterdir()) == [data]


def test_a_bad_jsonl_line_is_named_by_its_line_number(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    data.write_text(json.dumps(ROWS[0]) + "\n\n" + "{oops\n" + json.dumps(ROWS[1]) + "\n")
    out = tmp_path / "out.parquet"
    args = [str(data), "-o", str(out), "--on-error", "skip", "--max-reject-fraction", "1", "-q"]
    assert main(["prepare", "--model", MODEL, *args]) == 0
    (reject,) = [json.loads(x) for x in (tmp_path / "out.rejects.jsonl").read_text().splitlines()]
    assert reject["row_id"] == 1
    assert reject["error"].startswith("in.jsonl line 3: not valid JSON")


def test_advice_in_errors_is_spelt_as_command_line_options(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "in.jsonl"
    row = {
        "messages": [
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "4", "reasoning_content": "Add."},
        ]
    }
    _write_jsonl(data, [row])
    out = tmp_path / "out.parquet"
    options = ["--option", "enable_thinking=false"]
    assert main(["prepare", "--model", MODEL, str(data), "-o", str(out), *options]) == 1
    err = capsys.readouterr().err
    assert "--option reasoning=drop" in err and "reasoning='drop'" not in err
    assert "--option enable_thinking=false" in err
    # Rows skipped: the run's error quotes the first one, spelt for the command line once.
    skip = ["--on-error", "skip", "--max-reject-fraction", "1"]
    assert main(["prepare", "--model", MODEL, str(data), "-o", str(out), *options, *skip]) == 1
    err = capsys.readouterr().err
    assert "--option reasoning=drop" in err and "--option --option" not in err


def test_feather_output_is_an_arrow_file_and_arrow_output_a_stream_as_the_summary_says(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import pyarrow.feather as feather

    data = tmp_path / "in.jsonl"
    _write_jsonl(data, ROWS[:3])
    for suffix, reader in ((".feather", "Arrow IPC file"), (".arrow", "Arrow IPC stream")):
        out = tmp_path / f"out{suffix}"
        assert main(["prepare", "--model", MODEL, str(data), "-o", str(out)]) == 0
        assert reader in capsys.readouterr().err
    table = feather.read_table(tmp_path / "out.feather")
    assert table.equals(pa.ipc.open_file(tmp_path / "out.feather").read_all())
    assert table.equals(pa.ipc.open_stream(tmp_path / "out.arrow").read_all())
    assert table.column("input_ids")[2].as_py() == _expected(ROWS[2])[0]


@pytest.mark.parametrize("option", ["--output", "--stats", "--rejects"])
def test_an_output_path_in_a_missing_folder_or_a_folder_is_one_line(
    option: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "in.jsonl"
    _write_jsonl(data, ROWS[:1])
    for target, reason in (
        (tmp_path, "is a folder"),
        (tmp_path / "no" / "x.json", "no such folder"),
    ):
        args = ["-o", str(tmp_path / "out.parquet"), option, str(target)]
        if option == "--output":
            args = ["-o", str(target)]
        assert main(["prepare", "--model", MODEL, str(data), *args]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and reason in err and "Errno" not in err
    assert not (tmp_path / "out.parquet").exists()


def test_each_file_is_read_in_the_shape_of_its_first_row_and_other_rows_say_theirs(
    tmp_path: Path,
) -> None:
    sharegpt = _jsonl(SHAREGPT_FILE)
    openai = _jsonl(DATA / "sharegpt_tools.openai.jsonl")
    data = tmp_path / "mixed.jsonl"
    _write_jsonl(data, [sharegpt[0], openai[1], {"prompt": "Hi"}, {"conversations": None}])
    out = tmp_path / "out.parquet"
    args = [str(data), "-o", str(out), "--on-error", "skip", "--max-reject-fraction", "1", "-q"]
    assert main(["prepare", "--model", MODEL, *args]) == 0
    rejects = [json.loads(x)["error"] for x in (tmp_path / "out.rejects.jsonl").open()]
    assert rejects == [
        "messages[0].from: missing (it has role: an OpenAI message) (read as sharegpt, the "
        "shape of the first row, but this row is openai: give each shape its own file, or "
        "shape= / --format to read every row as one)",
        "fits no known shape (tried openai, sharegpt, llamafactory): no messages or "
        "conversations field (fields: prompt)",
        "conversations: null (the row has no conversation)",
    ]
    assert pq.read_table(out).column("input_ids")[0].as_py() == _expected_ids(openai[0])


# -- conversations split into one example per group of turns (issue 31) ---------------------


def _no_reasoning(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {
            **row,
            "messages": [
                {k: v for k, v in m.items() if k != "reasoning_content"} for m in row["messages"]
            ],
        }
        for row in rows
    ]


MULTI_TURN = [r for r in ROWS if sum(m["role"] == "user" for m in r["messages"]) > 1]
NO_THINK_ROWS = _no_reasoning(MULTI_TURN)
REASONING_TOOL_ROWS = [
    r
    for r in ROWS
    if r["tools"]
    and any(m.get("reasoning_content") for m in r["messages"])
    and sum(m["role"] == "user" for m in r["messages"]) > 1
]


def test_the_rows_of_the_split_tests_are_multi_turn_with_reasoning_and_tools() -> None:
    assert len(NO_THINK_ROWS) >= 8 and len(REASONING_TOOL_ROWS) >= 4


@pytest.mark.parametrize(
    ("label", "rows", "model", "options"),
    [
        ("qwen3 no-think multi-turn", NO_THINK_ROWS, MODEL, ["enable_thinking=false"]),
        ("qwen3 reasoning and tools", REASONING_TOOL_ROWS, MODEL, []),
        (
            "gpt-oss reasoning and tools",
            REASONING_TOOL_ROWS,
            "openai/gpt-oss-20b",
            ["date=2025-06-28"],
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_all_assistant_rejects_no_row_where_one_example_per_row_would(
    label: str,
    rows: list[dict[str, Any]],
    model: str,
    options: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Every turn trained as sampled: the rows the format does not extend are written as
    one example per group of turns (the renderer's build_supervised_examples, row for
    row), counted in the summary and the statistics; --split-turns never refuses them."""
    data = tmp_path / "in.jsonl"
    _write_jsonl(data, rows)
    flags = [f for o in options for f in ("--option", o)]
    out, stats = tmp_path / "out.parquet", tmp_path / "stats.json"
    common = ["prepare", "--model", model, str(data), *flags, "--train-on", "all_assistant"]
    assert main([*common, "-o", str(out), "--stats", str(stats)]) == 0
    summary = json.loads(stats.read_text())
    assert summary["rows_read"] == len(rows) and summary["rows_rejected"] == 0
    assert summary["split_turns"] == "auto" and summary["rows_split"] > 0
    table = pq.read_table(out)
    assert (
        summary["rows_written"]
        == table.num_rows
        == summary["split_examples"] + (len(rows) - summary["rows_split"])
    )
    assert (
        f"split     {summary['rows_split']:,} rows into {summary['split_examples']:,} examples"
        in capsys.readouterr().err
    )
    r = get_renderer(model)
    r = get_renderer(model, **type(r).options_from_text(dict(o.split("=", 1) for o in options)))
    expected_ids: list[Any] = []
    expected_index: list[int] = []
    expected_tokens: list[list[int]] = []
    for k, row in enumerate(rows):
        examples = r.build_supervised_examples(
            row["messages"], row["tools"], train_on="all_assistant"
        )
        expected_ids += [k] * len(examples)
        expected_index += list(range(len(examples)))
        expected_tokens += [e.tokens.tolist() for e in examples]
    assert table.column("row_id").to_pylist() == expected_ids
    assert table.column("example_index").to_pylist() == expected_index
    assert table.column("input_ids").to_pylist() == expected_tokens
    # One example per row: the rows whose whole conversation the renderer refuses.
    refused = []
    for k, row in enumerate(rows):
        try:
            r.build_supervised_example(row["messages"], row["tools"], train_on="all_assistant")
        except ValueError:
            refused.append(k)
    assert refused  # the rejects
    never = tmp_path / "never.parquet"
    skip = ["--split-turns", "never", "--on-error", "skip", "--max-reject-fraction", "1"]
    code = main([*common, "-o", str(never), *skip, "-q"])
    rejects = (tmp_path / "never.rejects.jsonl").read_text().splitlines()
    assert [json.loads(line)["row_id"] for line in rejects] == refused
    assert code == (1 if len(refused) == len(rows) else 0)
    if code == 0:
        assert "example_index" not in pq.read_table(never).column_names


def test_datasets_map_writes_each_example_of_a_split_row_under_its_row_id() -> None:
    import datasets

    rows = [_as_json_text(r) for r in NO_THINK_ROWS[:6]]
    dataset = datasets.Dataset.from_list(rows)
    mapper = ConversationMapper(
        MODEL, train_on="all_assistant", renderer_options={"enable_thinking": False}
    )
    out = dataset.map(
        mapper, batched=True, batch_size=4, with_indices=True, remove_columns=["messages", "tools"]
    )
    r = get_renderer(MODEL, enable_thinking=False)
    expected = [
        (k, j, e.tokens.tolist())
        for k, row in enumerate(NO_THINK_ROWS[:6])
        for j, e in enumerate(
            r.build_supervised_examples(row["messages"], row["tools"], train_on="all_assistant")
        )
    ]
    assert len(out) == len(expected) > len(rows)
    assert list(zip(out["row_id"], out["example_index"], out["input_ids"], strict=True)) == [
        tuple(e) for e in expected
    ]
    never = ConversationMapper(
        MODEL,
        train_on="all_assistant",
        split_turns="never",
        on_error="skip",
        renderer_options={"enable_thinking": False},
    )(dataset[:])
    assert never.num_rows == len(rows) and "example_index" not in never.column_names
    assert all("enable_thinking=False" in e for e in never.column("error").to_pylist())


def test_packed_rows_say_which_example_of_which_row_they_hold(tmp_path: Path) -> None:
    data = tmp_path / "in.jsonl"
    _write_jsonl(data, NO_THINK_ROWS[:4])
    out = tmp_path / "out.parquet"
    args = ["prepare", "--model", MODEL, str(data), "-o", str(out), "-q", "--pack", "32768"]
    assert main([*args, "--option", "enable_thinking=false", "--train-on", "all_assistant"]) == 0
    packed = pq.read_table(out).to_pylist()
    row_ids = [i for row in packed for i in row["row_ids"]]
    indices = [i for row in packed for i in row["example_indices"]]
    pairs = list(zip(row_ids, indices, strict=True))
    assert pairs == sorted(pairs) and len(set(row_ids)) == 4 and max(indices) >= 1
