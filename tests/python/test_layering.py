"""The library's layering, read from the source with ``ast`` (imports at any depth, functions included):
python/kernbench never imports the benches, its modules import each other without a cycle, and the
helpers live where their names say (kernbench.progress, kernbench.atomic_output, kernbench.units)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "python" / "kernbench"
BENCHES = "kernbench.benches"


def imported_modules(source: str, module: str) -> set[str]:
    """Every module an ``import`` or ``from ... import`` anywhere in ``source`` names, fully qualified
    (``from kernbench import benches`` counts as kernbench.benches; relative imports resolved against
    ``module``, a module of the kernbench package)."""
    out: set[str] = set()
    package = module.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            out.add(base)
            out.update(f"{base}.{a.name}" for a in node.names)
    return out


def library_modules() -> dict[str, Path]:
    return {f"kernbench.{p.stem}": p for p in sorted(PACKAGE.glob("*.py"))}


def _names_benches(mods: set[str]) -> list[str]:
    return sorted(m for m in mods if m == BENCHES or m.startswith(BENCHES + "."))


def test_the_checker_sees_every_spelling_of_a_benches_import():
    """The detector itself: absolute, from-package, relative and function-level imports are all caught."""
    spellings = ["import kernbench.benches.pe_dma_perf", "from kernbench.benches import pe_dma_perf",
                 "from kernbench import benches", "from .benches import milestone_1h_ccl",
                 "def f():\n    from kernbench.benches.pe_dma_perf import _scenarios\n"]
    for text in spellings:
        assert _names_benches(imported_modules(text, "kernbench.validation")), text
    assert not _names_benches(imported_modules("from kernbench import pe_dma, ccl\nimport importlib\n",
                                                "kernbench.validation"))


def test_the_library_never_imports_the_benches():
    """No module of python/kernbench imports kernbench.benches (discovery imports it by name, at run time)."""
    assert len(library_modules()) > 20
    offenders = {name: _names_benches(imported_modules(path.read_text(), name))
                 for name, path in library_modules().items()}
    offenders = {k: v for k, v in offenders.items() if v}
    assert offenders == {}


def test_the_package_import_graph_has_no_cycle():
    """Module- and function-level imports between the package's modules form no cycle (runner and
    sweeps used to import each other for the progress bar)."""
    mods = library_modules()
    graph = {}
    for name, path in mods.items():
        found = imported_modules(path.read_text(), name)
        graph[name] = {m for m in found if m in mods and m != name}
    assert "kernbench.runner" in graph["kernbench.sweeps"]  # sweeps runs benches through the runner ...
    assert "kernbench.sweeps" not in graph["kernbench.runner"]  # ... and the runner no longer needs sweeps
    assert "kernbench.progress" in graph["kernbench.runner"] and "kernbench.progress" in graph["kernbench.sweeps"]

    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(v: str) -> None:
        state[v] = 1
        stack.append(v)
        for w in sorted(graph[v]):
            if state.get(w) == 1:
                pytest.fail("import cycle: " + " -> ".join(stack[stack.index(w):] + [w]))
            if w not in state:
                visit(w)
        stack.pop()
        state[v] = 2

    for v in sorted(graph):
        if v not in state:
            visit(v)


def test_helpers_live_in_their_own_modules():
    """progress_bar, the atomic writers and the size formatter each have one home; the old names still work."""
    import kernbench.io
    from kernbench import atomic_output, progress, runner, sweeps, units

    assert sweeps.progress_bar is progress.progress_bar
    assert "progress_bar" not in vars(runner) or runner.progress_bar is progress.progress_bar
    assert kernbench.io.write_json is atomic_output.write_json  # the deprecated alias of the old name
    defined = {name: [n.name for n in ast.walk(ast.parse(p.read_text()))
                      if isinstance(n, ast.FunctionDef) and n.name in ("progress_bar", "write_json", "size")]
               for name, p in library_modules().items()}
    homes = {fn: sorted(m for m, fns in defined.items() if fn in fns) for fn in ("progress_bar", "write_json")}
    assert homes == {"progress_bar": ["kernbench.progress"], "write_json": ["kernbench.atomic_output"]}
    assert units.size(98304) == "96 KiB"
