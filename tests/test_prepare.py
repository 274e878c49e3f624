"""The dataset pipeline run for real: datasets.map (num_proc=2), a local Ray Data pipeline,
the ``renderers prepare`` command (rejects, packing, order, length policies, atomic
output), and renderers that travel cheaply to workers."""

from __future__ import annotations

import contextlib
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


def test_ray_data_pipeline_matches_the_renderer() -> None:
    import ray

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    try:
        dataset = ray.data.from_items([{"id": k, **row} for k, row in enumerate(ARROW_ROWS)])
        out = dataset.map_batches(
            ConversationMapper,
            fn_constructor_kwargs={"renderer": MODEL, "id_column": "id"},
            batch_size=6,
            concurrency=2,
        ).take_all()
    finally:
        ray.shutdown()
    by_id = {row["row_id"]: row for row in out}
    assert sorted(by_id) == list(range(len(ROWS)))
    for k in (0, 5, 23):
        ids, labels = _expected(ROWS[k])
        assert list(by_id[k]["input_ids"]) == ids
        assert list(by_id[k]["labels"]) == labels


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


def test_an_empty_input_gives_an_empty_file_with_the_columns(tmp_path: Path) -> None:
    data = tmp_path / "empty.jsonl"
    data.write_text("", encoding="utf-8")
    out = tmp_path / "out.parquet"
    assert main(["prepare", "--model", MODEL, str(data), "-o", str(out), "-q"]) == 0
    table = pq.read_table(out)
    assert table.num_rows == 0
    assert {"row_id", "input_ids", "labels", "loss_mask"} <= set(table.column_names)
