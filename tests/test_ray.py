"""Ray Data for real, on a Ray cluster started here as a user starts one (``ray start
--head``, then ``ray.init(address=...)``): its workers do not inherit the test's
environment (no ``HF_HUB_CACHE``, no ``HF_HUB_OFFLINE``), as on a real cluster. One cluster
serves the whole module: starting one takes seconds."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from renderers import get_renderer
from renderers.prepare import ConversationMapper, loading_environment
from tests.test_prepare import ARROW_ROWS, HETEROGENEOUS, MODEL, ROWS, _expected, _struct_rows

pytestmark = pytest.mark.slow  # see pyproject.toml: left out of the quick subset

ray = pytest.importorskip("ray")

ROOT = Path(__file__).resolve().parents[1]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _stop(head: subprocess.Popen[bytes]) -> None:
    """The head and every process it started (its own process group), and no other."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(head.pid, sig)
        except ProcessLookupError:
            return
        try:
            head.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """The address of a local Ray cluster whose processes lack the tokenizer cache
    variables of this one (token authentication off: a test cluster, on localhost)."""
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="rt", dir="/tmp")  # short: Ray puts sockets there
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TIKTOKEN"))}
    env["RAY_AUTH_MODE"] = "disabled"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    command = [
        str(Path(sys.executable).parent / "ray"),
        "start",
        "--head",
        "--block",
        f"--port={port}",
        "--num-cpus=2",
        "--include-dashboard=false",
        "--disable-usage-stats",
        f"--temp-dir={temp}",
    ]
    head = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    address = f"127.0.0.1:{port}"
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("RAY_AUTH_MODE", "disabled")
            deadline = time.monotonic() + 120
            while True:
                assert head.poll() is None, "ray start --head exited"
                try:
                    ray.init(address=address, log_to_driver=False)
                    break
                except ConnectionError:
                    assert time.monotonic() < deadline, "the Ray head did not come up"
                    time.sleep(1)
            try:
                yield address
            finally:
                ray.shutdown()
    finally:
        _stop(head)
        subprocess.run(["rm", "-rf", temp], check=False)


def _mapped(dataset: Any, **kwargs: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = dataset.map_batches(
        ConversationMapper,
        fn_constructor_kwargs={"renderer": MODEL, **kwargs},
        batch_size=6,
        compute=ray.data.ActorPoolStrategy(size=1),
    ).take_all()
    return out


def test_ray_data_on_a_cluster_matches_the_renderer(cluster: str) -> None:
    dataset = ray.data.from_items([{"id": k, **row} for k, row in enumerate(ARROW_ROWS)])
    out = _mapped(dataset, id_column="id", environment=loading_environment())
    by_id = {row["row_id"]: row for row in out}
    assert sorted(by_id) == list(range(len(ROWS)))
    for k in (0, 5, 23):
        ids, labels = _expected(ROWS[k])
        assert list(by_id[k]["input_ids"]) == ids
        assert list(by_id[k]["labels"]) == labels


def test_heterogeneous_rows_as_json_text_and_an_all_null_tools_column(cluster: str) -> None:
    """Rows as published (different tool schemas, content as text or parts, arguments as
    objects) through Ray as JSON text; a tools column that is null everywhere reaches the
    mapper as NaN, which means no tools."""
    rows = [
        {"messages": json.dumps(r["messages"]), "tools": json.dumps(r["tools"])}
        if r["tools"]
        else {"messages": json.dumps(r["messages"]), "tools": None}
        for r in HETEROGENEOUS
    ]
    untooled = [{"messages": r["messages"], "tools": None} for r in rows]
    renderer = get_renderer(MODEL)
    for batch, sources in ((rows, HETEROGENEOUS), (untooled, HETEROGENEOUS)):
        out = _mapped(ray.data.from_items(batch), environment=loading_environment())
        tools = [r["tools"] if batch is rows else None for r in sources]
        expected = [
            renderer.build_supervised_example(r["messages"], t).tokens.tolist()
            for r, t in zip(sources, tools, strict=True)
        ]
        assert [row["error"] for row in out] == [None] * len(sources)
        assert sorted(list(row["input_ids"]) for row in out) == sorted(expected)


def test_argument_objects_from_ray_are_refused_not_changed(cluster: str) -> None:
    with pytest.raises(Exception, match=r"arguments: tool-call arguments stored as objects"):
        _mapped(ray.data.from_items(_struct_rows()), environment=loading_environment())


def test_a_worker_without_the_drivers_environment_fails_at_once_saying_why(cluster: str) -> None:
    """No download retries: the worker finds the model missing from its own hub cache and
    says how to give it the driver's environment."""
    rows = [{"messages": json.dumps(HETEROGENEOUS[3]["messages"]), "tools": None}]
    with pytest.raises(Exception) as failure:
        _mapped(ray.data.from_items(rows))
    text = str(failure.value)
    assert f"cannot load the tokenizer of '{MODEL}': it is not in this worker's hub cache" in text
    assert "pass environment=loading_environment()" in text
