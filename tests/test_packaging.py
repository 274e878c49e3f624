"""What a user gets from installing the package: a core install whose commands run, types a
checker can see, every data file, and extras that never pull a CUDA build.

The install tests build the project as pip does for a user (a core install resolving its
dependencies, an editable install, a wheel), so they need the package index (or pip's
cache).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import venv
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from renderers import __version__

ROOT = Path(__file__).resolve().parents[1]

USER_CODE = """\
import renderers


pytestmark = pytest.mark.slow  # see pyproject.toml: left out of the quick subset

r = renderers.get_renderer("qwen3")
reveal_type(r)
ids: str = r.build_generation_prompt([{"role": "user", "content": "Hi"}])
"""


def _pip(python: Path, *args: str) -> None:
    proc = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--no-deps", *args],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        pytest.fail(f"pip install {' '.join(args)} failed:\n{proc.stderr[-2000:]}")


def test_a_user_project_type_checks_against_the_editable_install(tmp_path: Path) -> None:
    """The README installs with ``pip install -e``; mypy in the user's project must find the
    package and its types (an import-hook editable install hides them: "missing library
    stubs")."""
    env = tmp_path / "venv"
    venv.create(env, with_pip=True)
    python = env / "bin" / "python"
    _pip(python, "-e", str(ROOT))
    project = tmp_path / "project"
    project.mkdir()
    (project / "app.py").write_text(USER_CODE, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--python-executable", str(python), "app.py"],
        cwd=project,
        capture_output=True,
        text=True,
    )
    out = proc.stdout
    assert "import-not-found" not in out and "missing library stubs" not in out, out
    assert 'Revealed type is "renderers.rendering.Renderer"' in out, out
    # The checker sees real signatures: a list of ids is not a str.
    assert 'expression has type "list[int]", variable has type "str"' in out, out


def test_the_wheel_holds_the_type_marker_and_the_page_assets(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--quiet",
            "--no-deps",
            "-w",
            str(tmp_path),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = tmp_path.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in (
        "renderers/py.typed",
        "harmony/py.typed",
        "renderers/view/page.js",
        "renderers/view/page.css",
        "renderers/bench/__main__.py",
        "renderers/cli/__init__.py",
    ):
        assert needed in names, f"{needed} missing from {wheel.name}"
    assert not any(n.startswith(("tests/", "benchmarks/")) for n in names)


SMALL_ROWS = [
    {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]},
    {"messages": [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]},
]


def test_the_core_install_runs_every_everyday_command(tmp_path: Path) -> None:
    """``pip install .`` alone (the README's first command), with pip resolving the core
    dependencies in a fresh venv: the library and the commands work on first use (the
    registry imported the template renderer, whose jinja2 was only a test dependency), and
    a command that needs an extra says which in one line."""
    env = tmp_path / "venv"
    venv.create(env, with_pip=True)
    python = env / "bin" / "python"
    proc = subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", str(ROOT)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    cli = env / "bin" / "renderers"
    run_env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(cli), *args],
            input=stdin,
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=run_env,
            timeout=300,
        )

    version = run("--version")
    assert (version.returncode, version.stdout.split()) == (0, ["renderers", __version__])
    bare = run()
    assert bare.returncode == 0 and bare.stdout.startswith("usage: renderers") and not bare.stderr
    demo = run("demo", "--model", "Qwen/Qwen3-8B")
    assert demo.returncode == 0 and "termination: stop" in demo.stdout, demo.stderr
    think = run("think", stdin="<think>Check.</think>The answer is 4.")
    assert (think.returncode, think.stdout) == (0, "The answer is 4."), think.stderr
    (tmp_path / "conversation.json").write_text(json.dumps(SMALL_ROWS[0]["messages"]))
    render = run("render", "--model", "qwen3", "conversation.json")
    assert render.returncode == 0, render.stderr
    ids = json.loads(render.stdout)
    assert ids[0] == 151644 and len(ids) > 5  # <|im_start|>
    parse = run("parse", "--model", "qwen3", stdin=json.dumps([9707, 0, 151645]))
    assert parse.returncode == 0 and json.loads(parse.stdout)["termination"] == "stop"
    library = subprocess.run(
        [str(python), "-c", "import renderers; print(renderers.get_renderer('qwen3').name)"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=run_env,
    )
    assert library.stdout.strip() == "qwen3", library.stderr
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in SMALL_ROWS))
    prepare = run("prepare", "rows.jsonl", "--model", "qwen3", "-o", "out.parquet")
    assert prepare.returncode != 0 and not (tmp_path / "out.parquet").exists()
    assert "Traceback" not in prepare.stderr and len(prepare.stderr.splitlines()) == 1
    assert "pip install 'exact-renderers[data]'" in prepare.stderr


def _closure(requirement: str) -> set[str]:
    """The installed distributions ``requirement`` pulls in, transitively (extras and
    environment markers evaluated as pip evaluates them here)."""
    seen: set[str] = set()
    pending = [Requirement(requirement)]
    while pending:
        req = pending.pop()
        name = re.sub(r"[-_.]+", "-", req.name).lower()
        key = f"{name}[{','.join(sorted(req.extras))}]"
        if key in seen:
            continue
        seen.add(key)
        try:
            requires = metadata.requires(req.name) or []
        except metadata.PackageNotFoundError:
            continue
        for text in requires:
            dep = Requirement(text)
            extras = req.extras or {""}
            if dep.marker is None or any(dep.marker.evaluate({"extra": e}) for e in extras):
                pending.append(dep)
    return {key.split("[")[0] for key in seen}


@pytest.mark.parametrize("extras", ["", "[data]", "[ray]", "[bench]", "[test]", "[dev]"])
def test_no_everyday_install_pulls_pytorch(extras: str) -> None:
    """An unpinned ``torch`` from PyPI is a CUDA build of several GB: only the integration
    extra (TRL, a real trainer) may ask for PyTorch, after the README installs its CPU
    build."""
    assert "torch" not in _closure(f"exact-renderers{extras}")
    assert "torch" in _closure("exact-renderers[integration]")  # the check can fail
