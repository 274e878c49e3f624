"""Every Python snippet of the README runs as written.

The blocks are run in order in one fresh interpreter, as a reader pastes them into a
notebook: a later block may use names an earlier one defined (the streaming block parses
the quickstart's completion). The multi-turn RL blocks are also run against a real model in
``test_rl_loop.py``.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"
pytestmark = pytest.mark.slow  # see pyproject.toml: left out of the quick subset

BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def readme_python_blocks() -> list[tuple[int, str]]:
    """(line number, code) of each Python block of the README."""
    text = README.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 2, m[1]) for m in BLOCK.finditer(text)]


def test_the_readme_has_python_snippets() -> None:
    assert len(readme_python_blocks()) >= 8


def test_every_readme_python_snippet_runs_as_written(tmp_path: Path) -> None:
    """One script: each block compiled under its README line numbers, so a failure names
    the README line."""
    lines = ["import sys", "README = sys.argv[1]", "namespace: dict = {'__name__': '__main__'}"]
    for line, code in readme_python_blocks():
        padded = "\n" * (line - 1) + code
        lines.append(f"exec(compile({padded!r}, README, 'exec'), namespace)")
    script = tmp_path / "readme_blocks.py"
    script.write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script), str(README)],
        cwd=tmp_path,  # the snippets write files (example.html) in the working directory
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (
        (tmp_path / "example.html")
        .read_text(encoding="utf-8")
        .lower()
        .startswith("<!doctype html>")
    )
