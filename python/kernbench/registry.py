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

Discovery imports every module of the package whose name does not start
with ``_``; a module that registers no bench fails the audit (a forgotten
decorator would otherwise make a bench silently vanish).
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Callable, Mapping

from kernbench._core import ConfigError

BENCH_PACKAGE = "kernbench.benches"


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
    config: str | None = None  # the machine config it runs when --config is not given (None: topology.yaml)


_BENCHES: dict[str, Bench] = {}
_DISCOVERED: set[str] = set()


def bench(
    *,
    name: str,
    description: str,
    params: Mapping[str, Any] | None = None,
    uses_config: bool = False,
    smoke: Mapping[str, Any] | None = None,
    golden: Mapping[str, Any] | None = None,
    config: str | None = None,
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
    ``"k200.yaml"``; implies ``uses_config``).
    """
    if golden is not None and smoke is None:
        raise BenchAuditError(f"bench {name!r}: golden= needs smoke= (the size the goldens are taken at)")
    if not name or not name.replace("-", "").replace("_", "").isalnum():
        raise BenchAuditError(f"bench name {name!r}: use letters, digits, '-' and '_'")

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
            params=MappingProxyType(dict(params or {})),
            module=fn.__module__,
            uses_config=uses_config or config is not None,
            config=config,
            smoke=MappingProxyType(dict(smoke)) if smoke is not None else None,
            golden=MappingProxyType(dict(golden)) if golden is not None else None,
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
    return sorted(
        (b for b in _BENCHES.values() if b.module.startswith(prefix)), key=lambda b: b.name
    )


def list_benches(package: str = BENCH_PACKAGE) -> list[Bench]:
    """All benches of ``package``, sorted by name (their position is the CLI index)."""
    return discover(package)


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
