"""What a user gets from installing the package: types a checker can see, every data file.

Both tests build the project as pip does for a user (one editable install, one wheel), so
they need the build backend from the package index (or pip's cache).
"""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

USER_CODE = """\
import renderers

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
