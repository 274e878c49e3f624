"""The code's dependencies point one way: no import cycle between modules, none between
packages, and the core never imports what is built on it; and every module imports first
in a fresh interpreter.

Imports are read from the source with ``ast`` (every ``import``, including those inside
functions and under ``TYPE_CHECKING``), so a cycle hidden behind a lazy import counts.
Python also runs a package's ``__init__`` before any module in it, which the graph does
not model: importing each module first, for real, checks that.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from renderers import registry

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("renderers", "harmony", "benchmarks")


def _modules() -> dict[str, Path]:
    modules: dict[str, Path] = {}
    for top in PACKAGES:
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


MODULES = _modules()


def _package_of(module: str) -> str:
    """The innermost package holding ``module`` (a package is its own package)."""
    path = MODULES[module]
    if path.name == "__init__.py":
        return module
    return module.rpartition(".")[0]


def _imported(module: str) -> Iterator[str]:
    """The project modules ``module`` imports (the longest known prefix of each name)."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name and name != module:
                yield name


GRAPH = {module: sorted(set(_imported(module))) for module in MODULES}


def _cycle(graph: dict[str, list[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path, or ``None``."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in graph.get(node, []):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in graph:
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def _ancestors_excluded(edges: dict[str, set[str]]) -> dict[str, list[str]]:
    # A package importing its own subpackage (``renderers`` re-exporting ``renderers.core``)
    # is how Python packages work; a subpackage importing its parent package is not.
    return {
        a: sorted(b for b in targets if not b.startswith(a + ".")) for a, targets in edges.items()
    }


def test_the_graph_sees_the_packages() -> None:
    assert "renderers.core.engine" in GRAPH
    assert "renderers.core.engine" in GRAPH["harmony.parser"]
    assert "harmony" in GRAPH["renderers.gpt_oss"]


def test_no_import_cycle_between_modules() -> None:
    graph = {m: [t for t in targets if not m.startswith(t + ".")] for m, targets in GRAPH.items()}
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_import_cycle_between_packages() -> None:
    edges: dict[str, set[str]] = {}
    for module, targets in GRAPH.items():
        source = _package_of(module)
        for target in targets:
            package = _package_of(target)
            if package != source:
                edges.setdefault(source, set()).add(package)
    cycle = _cycle(_ancestors_excluded(edges))
    assert cycle is None, "package cycle: " + " -> ".join(cycle or [])


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if m.startswith("renderers.core")))
def test_the_core_imports_only_the_core(module: str) -> None:
    outside = [t for t in GRAPH[module] if not t.startswith("renderers.core")]
    assert not outside, f"{module} imports {outside}"


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if m.startswith("harmony")))
def test_harmony_builds_on_the_core_only(module: str) -> None:
    outside = [t for t in GRAPH[module] if not t.startswith(("harmony", "renderers.core"))]
    assert not outside, f"{module} imports {outside}"


# The model modules: one per family, built on the core and the Renderer contract (and
# the modules of each family's own pieces, such as Kimi-K2.5's tool declarations).
_FAMILIES = {c.__module__ for c in registry.renderer_classes()} - {"renderers.template.renderer"}
MODEL_MODULES = sorted(m for m in GRAPH if any(m.startswith(f) for f in _FAMILIES))


@pytest.mark.parametrize("module", sorted(m for m in GRAPH if m.startswith("renderers.template")))
def test_the_template_renderer_imports_no_model_module(module: str) -> None:
    """The template renderer builds its parsers from grammar records (the core, Harmony's
    parser), not from the model modules' private parsers."""
    models = [t for t in GRAPH[module] if t in MODEL_MODULES]
    assert not models, f"{module} imports {models}"


def test_a_cycle_is_detected() -> None:
    assert _cycle({"a": ["b"], "b": ["c"], "c": ["a"]}) == ["a", "b", "c", "a"]
    assert _cycle({"a": ["b"], "b": []}) is None


# Imports each module given on the command line first (every project module forgotten
# before each), in one interpreter: prints {module: error} for those that fail.
_IMPORT_EACH_FIRST = """\
import importlib, json, sys
failures = {}
for name in sys.argv[1:]:
    for loaded in [m for m in sys.modules if m.split(".")[0] in PACKAGES]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] in PACKAGES:
            failures[name] = f"{type(exc).__name__}: {exc}"
    except Exception as exc:
        failures[name] = f"{type(exc).__name__}: {exc}"
print(json.dumps(failures))
"""


def _first_import_failures(modules: list[str], cache: Path) -> dict[str, str]:
    """``{module: error}`` for the modules that fail when imported before any other project
    module (an optional dependency that is not installed is no failure). Bytecode goes to
    ``cache``, so that each module is compiled once, not once per import."""
    code = f"PACKAGES = {PACKAGES!r}\n" + _IMPORT_EACH_FIRST
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(cache)
    done = subprocess.run(
        [sys.executable, "-c", code, *modules],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    failures: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
    return failures


def test_every_module_imports_first_in_a_fresh_interpreter(tmp_path: Path) -> None:
    # A package's __init__ runs before its modules: ``import harmony`` first once reached
    # ``renderers.core`` through ``renderers/__init__``, whose registry imports gpt_oss,
    # which imports the half-initialised ``harmony``.
    modules = sorted(m for m in MODULES if not m.endswith("__main__"))
    failures = _first_import_failures(modules, tmp_path)
    assert not failures, "\n".join(f"{m}: {e}" for m, e in sorted(failures.items()))


def test_a_first_import_failure_is_detected(tmp_path: Path) -> None:
    (tmp_path / "cyclic_a.py").write_text("import cyclic_b\nVALUE = 1\n")
    (tmp_path / "cyclic_b.py").write_text("from cyclic_a import VALUE\n")
    code = "import sys; sys.path.insert(0, sys.argv.pop(1))\nPACKAGES = ('cyclic_a', 'cyclic_b')\n"
    done = subprocess.run(
        [sys.executable, "-c", code + _IMPORT_EACH_FIRST, str(tmp_path), "cyclic_a", "cyclic_b"],
        capture_output=True,
        text=True,
        check=True,
    )
    failures = json.loads(done.stdout.strip().splitlines()[-1])
    assert list(failures) == ["cyclic_a"]
    assert "partially initialized" in failures["cyclic_a"]


def _class_sizes(path: Path) -> Iterator[tuple[str, int]]:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ClassDef):
            assert node.end_lineno is not None
            yield node.name, node.end_lineno - node.lineno + 1


@pytest.mark.parametrize("module", sorted(m for m in MODULES if not m.startswith("benchmarks")))
def test_no_class_is_longer_than_a_reader_can_hold(module: str) -> None:
    """At most 300 lines per class, docstrings included."""
    long = {name: size for name, size in _class_sizes(MODULES[module]) if size > 300}
    assert not long, f"{module}: {long}"


@pytest.mark.parametrize("module", MODEL_MODULES)
def test_a_model_module_stays_under_600_lines(module: str) -> None:
    """A family is its specification, options, writer and grammar record (see
    docs/development.md, adding a family)."""
    lines = len(MODULES[module].read_text().splitlines())
    assert lines <= 600, f"{module}: {lines} lines"


def test_the_size_checks_see_the_families_and_their_classes() -> None:
    assert {"renderers.qwen3", "renderers.gpt_oss", "renderers.deepseek_v3_1"} <= set(MODEL_MODULES)
    assert dict(_class_sizes(MODULES["renderers.rendering"]))["Renderer"] > 100
