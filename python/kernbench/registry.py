"""Bench registry: ``@bench`` registration, discovery and the import-time audit.

A bench is a function ``fn(ctx: BenchContext) -> dict`` in a module of the
``kernbench.benches`` package (the repository's ``benches/`` folder),
registered with::

    @bench(name="perf-phold", description="...", params={"events": 10_000_000})
    def perf_phold(ctx): ...

A bench joins the golden regression (``kernbench goldens``,
tests/python/test_goldens.py) by declaring a smoke size and the metrics to
compare::

    @bench(name=..., description=..., params={...},
           smoke={"bench.events": 20000, "system.sips.w": 1},          # --set values, a few seconds
           golden={"key": "population", "metrics": ["trace_hash", "pending"]})

A bench whose default size is too slow for CI's run of every bench (scripts/check_benches.py) declares a
full-check size, ``full_check={...}`` (``--set`` values, like ``smoke=``; ``kernbench run --full-check``):
fewer or smaller points that take every code path the default takes (kernbench.full_check; the registry
refuses one that drops a categorical value of the default).

Discovery imports every module of the package whose name does not start
with ``_``; a module that registers no bench fails the audit (a forgotten
decorator would otherwise make a bench silently vanish).

Benches outside the package (plugins) come from

- folders: every public ``*.py`` file of each folder of the
  ``KERNBENCH_BENCH_PATH`` environment variable (``os.pathsep``-separated)
  and of ``add_bench_path(DIR)`` (the CLI's ``--bench-path DIR``);
- the entry point group ``kernbench.benches`` of installed distributions
  (``[project.entry-points."kernbench.benches"] mine = "mypkg.benches"``):
  each entry point names a module (or an object in one) whose import
  registers benches.

A plugin file that does not import, or registers no bench, is an audit
error naming the file. ``list_benches()`` gives the package's benches first
(sorted by name), then the plugins' (sorted by name), so the index of a
shipped bench does not depend on the plugins installed.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import os
import pkgutil
import sys
from pathlib import Path
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping

from kernbench._core import ConfigError
from kernbench.full_check import check_declaration
from kernbench.overrides import Param, check_params

BENCH_PACKAGE = "kernbench.benches"
ENTRY_POINT_GROUP = "kernbench.benches"
BENCH_PATH_ENV = "KERNBENCH_BENCH_PATH"


class BenchAuditError(ConfigError):
    """A bench module is malformed: no ``@bench`` in it, or a name used twice."""


@dataclass(frozen=True)
class Bench:
    """One registered bench."""

    name: str
    description: str
    func: Callable[..., Any]
    params: Mapping[str, Any] = field(default_factory=dict)
    module: str = ""
    uses_config: bool = False
    smoke: Mapping[str, Any] | None = None
    golden: Mapping[str, Any] | None = None
    full_check: Mapping[str, Any] | None = None  # the CI size when the default is too slow (--full-check)
    config: str | None = None  # the machine config it runs when --config is not given (None: topology.yaml)
    outputs: Mapping[str, str] | None = None  # files it writes beside sweep.json -> what they hold (describe)
    primary: tuple[str, ...] = ()  # its headline metrics (kernbench diff lists them first)
    param_specs: Mapping[str, Param] = field(default_factory=dict)  # what each parameter allows (Param)
    checks: Callable[[Mapping[str, Any]], Any] | None = None  # the bench's own check over all its parameters
    source: str = ""  # the file that defines it
    plugin: bool = False  # from a --bench-path folder or an entry point, not the kernbench.benches package


_BENCHES: dict[str, Bench] = {}
_DISCOVERED: set[str] = set()
_EXTRA_PATHS: list[Path] = []          # add_bench_path / --bench-path
_LOADED_FILES: dict[Path, str] = {}    # plugin file -> its module name
_PLUGIN_MODULES: set[str] = set()      # modules whose benches are plugins
_ENTRY_POINTS_LOADED = False


def bench(
    *,
    name: str,
    description: str,
    params: Mapping[str, Any] | None = None,
    uses_config: bool = False,
    smoke: Mapping[str, Any] | None = None,
    golden: Mapping[str, Any] | None = None,
    config: str | None = None,
    outputs: Mapping[str, str] | Any = None,
    primary: str | Any = None,
    checks: Callable[[Mapping[str, Any]], Any] | None = None,
    full_check: Mapping[str, Any] | None = None,
):
    """Register ``fn`` as the bench ``name``.

    ``params`` are its parameters with their defaults (``--set bench.KEY=V``);
    ``uses_config`` says whether it simulates a machine config (``--config``,
    ``--set system...``); a bench that does not refuses those overrides.
    ``smoke``: ``--set`` values (``bench.KEY`` or config paths) for a run of
    a few seconds (``kernbench run --smoke``); ``golden``: ``{"key": column
    or columns naming a result row, "metrics": [names] or {name: tolerance}}``
    (tolerances ``"exact"``, ``"rel=1e-6"``, ``"abs=0.5"``; by default
    integers, strings and booleans are exact and other numbers rel=1e-6),
    compared against tests/goldens/<name>.json. ``config``: the machine config
    the bench runs when ``--config`` is not given (a packaged name such as
    ``"k200.yaml"``; implies ``uses_config``). ``outputs``: the files it
    writes beside sweep.json, ``{name: what it holds}`` (or a list of names;
    ``kernbench describe`` shows them, read from the source when not given).
    ``primary``: its headline metric (or metrics), listed first by ``kernbench diff``.
    ``full_check``: ``--set`` values of the size CI checks it at when its default is too slow
    (``kernbench run --full-check``): fewer or smaller points, every code path of the default
    (kernbench.full_check; one that drops a categorical value is refused here).

    A parameter may be declared as ``kernbench.Param(default, min=, max=, choices=, check=)``
    instead of a bare default; ``checks``: ``fn(params) -> None`` over all the parameters (return
    a text or raise ValueError to refuse them). Both run before the bench (``kernbench run``,
    every point of ``kernbench sweep``), after the type checks every parameter gets (see
    kernbench.overrides); a refused value is a ConfigError naming it, exit 2.
    """
    if golden is not None and smoke is None:
        raise BenchAuditError(f"bench {name!r}: golden= needs smoke= (the size the goldens are taken at)")
    if not name or not name.replace("-", "").replace("_", "").isalnum():
        raise BenchAuditError(f"bench name {name!r}: use letters, digits, '-' and '_'")

    if outputs is not None and not isinstance(outputs, Mapping):
        outputs = {str(o): "" for o in outputs}
    primaries = (primary,) if isinstance(primary, str) else tuple(primary or ())

    specs = {k: v for k, v in (params or {}).items() if isinstance(v, Param)}
    defaults = {k: (v.default if isinstance(v, Param) else v) for k, v in (params or {}).items()}
    try:
        check_params(name, defaults, specs, checks)
    except ConfigError as e:
        raise BenchAuditError(f"bench {name!r}: its default parameters fail its own checks: {e}") from None
    if full_check is not None:
        try:
            check_declaration(name, defaults, specs, full_check, lambda p: check_params(name, p, specs, checks))
        except ConfigError as e:
            raise BenchAuditError(f"bench {name!r}: {e}") from None

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        existing = _BENCHES.get(name)
        if existing is not None and existing.module != fn.__module__:
            raise BenchAuditError(
                f"bench {name!r} is defined twice: in {existing.module} and in {fn.__module__}"
            )
        _BENCHES[name] = Bench(
            name=name,
            description=description,
            func=fn,
            params=MappingProxyType(defaults),
            param_specs=MappingProxyType(specs),
            checks=checks,
            module=fn.__module__,
            uses_config=uses_config or config is not None,
            config=config,
            smoke=MappingProxyType(dict(smoke)) if smoke is not None else None,
            golden=MappingProxyType(dict(golden)) if golden is not None else None,
            full_check=MappingProxyType(dict(full_check)) if full_check is not None else None,
            outputs=MappingProxyType(dict(outputs)) if outputs is not None else None,
            primary=primaries,
            source=str(getattr(sys.modules.get(fn.__module__), "__file__", "") or ""),
            plugin=fn.__module__ in _PLUGIN_MODULES,
        )
        return fn

    return register


def discover(package: str = BENCH_PACKAGE) -> list[Bench]:
    """Import every public module of ``package`` and audit it; return its benches."""
    if package not in _DISCOVERED:
        pkg = importlib.import_module(package)
        for info in pkgutil.iter_modules(pkg.__path__):
            if info.name.startswith("_") or info.ispkg:
                continue  # helpers and sub-packages are not benches
            modname = f"{package}.{info.name}"
            importlib.import_module(modname)
            if not any(b.module == modname for b in _BENCHES.values()):
                raise BenchAuditError(
                    f"bench module {modname} registers no bench: decorate its entry point with "
                    "@bench(name=..., description=...) or rename it with a leading '_' if it is a helper"
                )
        _DISCOVERED.add(package)
    prefix = package + "."
    found = sorted((b for b in _BENCHES.values() if b.module.startswith(prefix)), key=lambda b: b.name)
    if package == BENCH_PACKAGE:
        _load_plugins()
        found += sorted((b for b in _BENCHES.values() if b.module in _PLUGIN_MODULES), key=lambda b: b.name)
    return found


def list_benches(package: str = BENCH_PACKAGE) -> list[Bench]:
    """All benches of ``package`` sorted by name, then (for the default package) the plugins' sorted by
    name; the position is the CLI index."""
    return discover(package)


# ---- plugins ---------------------------------------------------------------------------------

def add_bench_path(*folders: str | os.PathLike[str]) -> list[Path]:
    """Look for bench plugins (public ``*.py`` files) in these folders too; a missing folder is refused."""
    added = []
    for f in folders:
        p = Path(f).expanduser()
        if not p.is_dir():
            raise ConfigError(f"--bench-path {f}: no such folder")
        p = p.resolve()
        if p not in _EXTRA_PATHS:
            _EXTRA_PATHS.append(p)
        added.append(p)
    return added


def bench_paths() -> list[Path]:
    """The plugin folders: ``KERNBENCH_BENCH_PATH`` (``os.pathsep``-separated), then ``add_bench_path``'s."""
    out: list[Path] = []
    for part in os.environ.get(BENCH_PATH_ENV, "").split(os.pathsep):
        if not part.strip():
            continue
        p = Path(part.strip()).expanduser()
        if not p.is_dir():
            raise ConfigError(f"{BENCH_PATH_ENV}: {part.strip()}: no such folder")
        p = p.resolve()
        if p not in out:
            out.append(p)
    out += [p for p in _EXTRA_PATHS if p not in out]
    return out


def _load_plugins() -> None:
    global _ENTRY_POINTS_LOADED
    for folder in bench_paths():
        for path in sorted(folder.glob("*.py")):
            if not path.name.startswith("_") and path not in _LOADED_FILES:
                _load_plugin_file(path)
    if not _ENTRY_POINTS_LOADED:
        _ENTRY_POINTS_LOADED = True
        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            _load_entry_point(ep)


def _load_plugin_file(path: Path) -> None:
    """Import one plugin file as its own module; a file that fails or registers nothing is named."""
    tag = hashlib.sha1(str(path.parent).encode()).hexdigest()[:8]
    modname = f"kernbench_plugin_{tag}_{path.stem}"
    spec = importlib.util.spec_from_file_location(modname, path)
    if spec is None or spec.loader is None:
        raise BenchAuditError(f"{path}: bench plugin: not an importable Python file")
    module = importlib.util.module_from_spec(spec)
    _LOADED_FILES[path] = modname
    _PLUGIN_MODULES.add(modname)
    sys.modules[modname] = module
    folder = str(path.parent)
    on_path = folder in sys.path
    if not on_path:
        sys.path.insert(0, folder)  # the plugin may import its own helpers (_common.py beside it)
    try:
        spec.loader.exec_module(module)
    except SyntaxError as e:
        _forget(modname, path)
        raise BenchAuditError(f"{path}:{e.lineno}: bench plugin does not parse: {e.msg}") from None
    except BenchAuditError as e:
        _forget(modname, path)
        raise BenchAuditError(f"{path}: {e}") from None
    except Exception as e:
        _forget(modname, path)
        raise BenchAuditError(f"{path}: bench plugin failed to import: {type(e).__name__}: {e}") from None
    finally:
        if not on_path and folder in sys.path:
            sys.path.remove(folder)
    if not any(b.module == modname for b in _BENCHES.values()):
        _forget(modname, path)
        raise BenchAuditError(f"{path}: bench plugin registers no bench: decorate its entry point with "
                              "@bench(name=..., description=...) or rename it with a leading '_' if it is a helper")


def _load_entry_point(ep) -> None:
    where = f"entry point {ep.name} = {ep.value} (group {ENTRY_POINT_GROUP}"
    dist = getattr(ep, "dist", None)
    where += f", distribution {dist.name})" if dist is not None and getattr(dist, "name", None) else ")"
    modname = ep.value.split(":", 1)[0].strip()
    _PLUGIN_MODULES.add(modname)
    before = set(_BENCHES)
    try:
        obj = ep.load()
    except SyntaxError as e:
        raise BenchAuditError(f"{where}: {e.filename}:{e.lineno}: does not parse: {e.msg}") from None
    except BenchAuditError as e:
        raise BenchAuditError(f"{where}: {e}") from None
    except Exception as e:
        raise BenchAuditError(f"{where}: failed to import: {type(e).__name__}: {e}") from None
    mine = [b for b in _BENCHES.values() if b.module == modname]
    if not mine and getattr(obj, "__module__", None) in {b.module for b in _BENCHES.values()}:
        _PLUGIN_MODULES.add(obj.__module__)  # an entry point naming a decorated function in another module
        mine = [b for b in _BENCHES.values() if b.module == obj.__module__]
    if not mine and set(_BENCHES) == before:
        raise BenchAuditError(f"{where}: registers no bench (decorate the bench function with @bench)")
    for b in mine:  # registered before it was known to be a plugin
        _BENCHES[b.name] = _replace_plugin(b)


def _replace_plugin(b: Bench) -> Bench:
    from dataclasses import replace

    return replace(b, plugin=True)


def _forget(modname: str, path: Path) -> None:
    """A plugin file that failed leaves nothing behind (the next discovery reports it again)."""
    _LOADED_FILES.pop(path, None)
    _PLUGIN_MODULES.discard(modname)
    sys.modules.pop(modname, None)
    for name in [n for n, b in _BENCHES.items() if b.module == modname]:
        del _BENCHES[name]


def get_bench(key: str | int, package: str = BENCH_PACKAGE) -> Bench:
    """A bench by name or by its index in ``list_benches()``; unknown keys list the known ones."""
    benches = list_benches(package)
    if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
        i = int(key)
        if 0 <= i < len(benches):
            return benches[i]
        raise ConfigError(f"no bench with index {i} (valid: 0..{len(benches) - 1})")
    for b in benches:
        if b.name == key:
            return b
    known = ", ".join(b.name for b in benches) or "none"
    raise ConfigError(f"unknown bench {key!r} (known: {known})")
