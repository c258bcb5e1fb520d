"""The library's layering, read from the source with ``ast`` (imports at any depth, function bodies included,
in every module of python/kernbench and its subpackages): the library never imports the benches, its modules
import each other without a cycle, none imports another module's private name, and the helpers live where
their names say (kernbench.progress, kernbench.atomic_output, kernbench.units)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "python" / "kernbench"
BENCH_FILES = ROOT / "benches"
BENCHES = "kernbench.benches"
CORE = "kernbench._core"  # the extension module: the bindings, imported by name from anywhere


def module_name(path: Path) -> str:
    """``python/kernbench/workloads/graph.py`` -> ``kernbench.workloads.graph``; a package's ``__init__.py``
    is the package itself."""
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def library_modules() -> dict[str, Path]:
    """Every module of python/kernbench, subpackages included, by its dotted name."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py")) if "__pycache__" not in p.parts}


def imports(source: str, module: str, *, is_package: bool = False) -> list[tuple[int, str, str | None]]:
    """Every import anywhere in ``source`` (module level, functions, classes, branches) as
    (line, module, name): ``import a.b`` is (line, "a.b", None), ``from a.b import c`` is (line, "a.b", "c").
    Relative imports are resolved against ``module`` (a package itself when ``is_package``: its
    ``__init__.py``)."""
    out: list[tuple[int, str, str | None]] = []
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            out += [(node.lineno, base, a.name) for a in node.names]
    return out


def imported_modules(source: str, module: str, *, is_package: bool = False) -> set[str]:
    """Every module an ``import`` or ``from ... import`` anywhere in ``source`` names, fully qualified
    (``from kernbench import benches`` counts as kernbench.benches; relative imports resolved against
    ``module``, a module of the kernbench package)."""
    out: set[str] = set()
    for _, base, name in imports(source, module, is_package=is_package):
        out.add(base)
        if name is not None:
            out.add(f"{base}.{name}")
    return out


def import_edges(source: str, module: str, modules: set[str], *, is_package: bool = False) -> set[str]:
    """The modules of ``modules`` that ``source`` imports: ``from P import n`` is an edge to ``P.n`` when that
    is a module (a submodule imported by name), else to ``P`` (a name from P's namespace); ``import P.m`` to
    ``P.m``. The parent packages an import runs first are not edges (every submodule would then be in a cycle
    with its package's ``__init__``)."""
    known = modules | {CORE}
    out = set()
    for _, base, name in imports(source, module, is_package=is_package):
        target = f"{base}.{name}" if name is not None and f"{base}.{name}" in known else base
        if target in modules and target != module:
            out.add(target)
    return out


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def private_imports(source: str, module: str, *, is_package: bool = False) -> list[str]:
    """The imports in ``source`` of a kernbench module's private name: ``from kernbench.x import _y`` (relative
    spellings too) and ``import kernbench.x._y`` / ``from kernbench.x._y import z``. kernbench._core is the
    extension module, public to the package; dunders are not private; ``from x import y as _y`` is a private
    alias of a public name, not a private import."""
    out = []
    for line, base, name in imports(source, module, is_package=is_package):
        full = base if name is None else f"{base}.{name}"
        if base.split(".")[0] != "kernbench" or full == CORE or base == CORE:
            continue
        if any(_private(p) for p in full.split(".")):
            out.append(f"line {line}: " + (f"import {base}" if name is None else f"from {base} import {name}"))
    return out


def import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of ``mods`` it imports (import_edges, at any depth)."""
    names = set(mods)
    return {name: import_edges(path.read_text(), name, names, is_package=path.name == "__init__.py")
            for name, path in mods.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle (``[a, b, ..., a]``) through each strongly connected component of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    comps: list[set[str]] = []

    def connect(v: str) -> None:  # Tarjan's algorithm
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(comp)

    for v in sorted(graph):
        if v not in index:
            connect(v)

    def path_back(start: str, comp: set[str]) -> list[str]:  # breadth-first: a shortest cycle through start
        prev: dict[str, str | None] = {start: None}
        todo = [start]
        while todo:
            v = todo.pop(0)
            for w in sorted(graph[v] & comp):
                if w == start:
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return path[::-1] + [start]
                if w not in prev:
                    prev[w] = v
                    todo.append(w)
        raise AssertionError(f"no cycle through {start}")

    return [path_back(min(c), c) for c in sorted(comps, key=min)]


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


def test_the_checker_resolves_relative_imports_in_subpackages():
    """Relative imports resolve against the importing module's package, and a package's ``__init__`` is its
    own package, so ``from . import x`` in kernbench/workloads/__init__.py is kernbench.workloads.x."""
    assert imported_modules("from . import graph", "kernbench.workloads", is_package=True) >= {
        "kernbench.workloads.graph"}
    assert imported_modules("from . import graph", "kernbench.workloads.lower") >= {"kernbench.workloads.graph"}
    assert imported_modules("from ..units import size", "kernbench.calibrate.data") >= {"kernbench.units"}
    assert imported_modules("from .. import units", "kernbench.calibrate", is_package=True) >= {"kernbench.units"}


def test_the_cycle_finder_sees_a_cycle_through_a_function_level_import():
    """A cycle closed by an import inside a function body (as lower <-> training and registry <-> functions
    were) is a cycle; a package's __init__ importing its submodules is not one by itself."""
    mods = {"kernbench.a", "kernbench.b", "kernbench.c", "kernbench.p", "kernbench.p.q"}
    sources = {"kernbench.a": "from kernbench.b import x\n",
               "kernbench.b": "import kernbench.c\n",
               "kernbench.c": "def f():\n    if True:\n        from kernbench import a\n",
               "kernbench.p": "from kernbench.p.q import y\n",
               "kernbench.p.q": "from kernbench import _core\nimport kernbench.c\n"}
    graph = {m: import_edges(s, m, mods, is_package=m == "kernbench.p") for m, s in sources.items()}
    assert graph["kernbench.c"] == {"kernbench.a"}  # `from kernbench import a`: the submodule, not the package
    assert graph["kernbench.p.q"] == {"kernbench.c"}
    assert cycles(graph) == [["kernbench.a", "kernbench.b", "kernbench.c", "kernbench.a"]]
    graph["kernbench.c"] = set()
    assert cycles(graph) == []


def test_the_checker_sees_every_spelling_of_a_private_import():
    """``from ... import _name`` (absolute, relative, in a function, aliased) and ``import kernbench.x._y``
    are private imports; kernbench._core, dunders, private aliases of public names and other packages'
    private names are not."""
    bad = ["from kernbench.system import _overrides", "from .system import _overrides",
           "from ..fit import _config_lookup", "def f():\n    from kernbench.units import size, _QUANTITY\n",
           "from kernbench.units import _QUANTITY as QUANTITY", "import kernbench.sweeps.grid._text",
           "from kernbench.workloads._private import thing", "from kernbench.workloads import _LAZY"]
    for text in bad:
        assert private_imports(text, "kernbench.calibrate.report"), text
    good = ["from kernbench import _core", "from kernbench._core import UsageError", "import kernbench._core",
            "from kernbench.units import size as _size", "from kernbench.version import __version__",
            "from numpy import _private", "import kernbench.atomic_output as kio\nkio._atomic_write_bytes\n"]
    for text in good:
        assert not private_imports(text, "kernbench.calibrate.report"), text
    assert private_imports("def f():\n    from kernbench.fit import _x\n", "kernbench.report") == [
        "line 2: from kernbench.fit import _x"]


def test_the_library_never_imports_the_benches():
    """No module of python/kernbench, subpackages included, imports kernbench.benches (discovery imports it
    by name, at run time)."""
    mods = library_modules()
    assert len(mods) > 20 and "kernbench.workloads.lower" in mods and "kernbench.calibrate.registry" in mods
    offenders = {name: _names_benches(imported_modules(path.read_text(), name,
                                                       is_package=path.name == "__init__.py"))
                 for name, path in mods.items()}
    offenders = {k: v for k, v in offenders.items() if v}
    assert offenders == {}


def test_the_package_import_graph_has_no_cycle():
    """Module- and function-level imports between the package's modules, subpackages included, form no cycle
    (runner and sweeps used to import each other for the progress bar; workloads.lower and training, and
    calibrate's registry and functions, through imports in function bodies)."""
    graph = import_graph(library_modules())
    assert "kernbench.runner" in graph["kernbench.sweeps.core"]  # sweeps runs benches through the runner ...
    # ... and the runner no longer needs sweeps: no module of the package (importing one runs its __init__)
    assert not {m for m in graph["kernbench.runner"] if m == "kernbench.sweeps" or m.startswith("kernbench.sweeps.")}
    assert "kernbench.progress" in graph["kernbench.runner"] and "kernbench.progress" in graph["kernbench.sweeps.core"]
    # lower() drives training; both use the Lowerer, which knows neither
    assert {"kernbench.workloads.training", "kernbench.workloads.lowerer"} <= graph["kernbench.workloads.lower"]
    assert "kernbench.workloads.lowerer" in graph["kernbench.workloads.training"]
    assert not {"kernbench.workloads.lower", "kernbench.workloads.training"} & graph["kernbench.workloads.lowerer"]
    # the registry imports no measurement function: the package imports the built-ins, which register
    assert "kernbench.calibrate.registry" in graph["kernbench.calibrate.functions"]
    assert {"kernbench.calibrate.functions", "kernbench.calibrate.gpu_functions"} <= graph["kernbench.calibrate"]
    assert not {m for m in graph["kernbench.calibrate.registry"] if m.startswith("kernbench.calibrate")}
    assert "kernbench.calibrate.gpu_functions" not in graph["kernbench.calibrate.functions"]

    found = [" -> ".join(c) for c in cycles(graph)]
    assert found == [], "import cycles:\n" + "\n".join(found)


def test_no_module_imports_another_modules_private_name():
    """No module of python/kernbench (subpackages included, imports at any depth) imports a private name of
    another (``from kernbench.x import _y``, ``import kernbench.x._y``): a name another module needs is
    public in its home; nor does a bench import one from the library. kernbench._core, the bindings, is
    public to all."""
    offenders = {name: private_imports(path.read_text(), name, is_package=path.name == "__init__.py")
                 for name, path in library_modules().items()}
    for p in sorted(BENCH_FILES.glob("*.py")):  # the benches' own _helpers are the benches package's business
        found = [f for f in private_imports(p.read_text(), f"{BENCHES}.{p.stem}")
                 if not f.split()[3].startswith(BENCHES)]
        offenders[f"benches/{p.name}"] = found
    offenders = {k: v for k, v in offenders.items() if v}
    assert offenders == {}


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
