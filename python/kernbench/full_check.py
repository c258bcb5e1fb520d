"""A bench's full-check size: fewer or smaller points than its default, every code path the default takes.

A bench whose default size is too slow for CI (scripts/check_benches.py runs every bench once) declares a
third size beside the default and the smoke size, as ``--set`` values the way ``smoke=`` is declared::

    @bench(name=..., params={"sizes": [1024, 1 << 20, 64 << 20], "algorithms": Param(["ring", "tree"], ...)},
           smoke={...},
           full_check={"bench.sizes": [1024, 1 << 20]})       # every algorithm still, only fewer sizes

``kernbench run --full-check`` runs it. The registry refuses a full-check that drops a code path
(``gaps``): every value the default takes of every *categorical* parameter must stay. A parameter is
categorical when it is declared with ``Param(choices=...)``, or when its default is a bool or a string
(or a list of them), or an empty list (a bench's "every one" spelling: full-check must keep it empty);
``Param(..., size=True)`` marks a string or a choice that is a size, not a code path (e.g. ``"8x8"``
SIPs), which full-check may thin out. Numbers without choices are sizes.
"""

from __future__ import annotations

from typing import Any, Mapping

from kernbench._core import ConfigError
from kernbench.overrides import Param, apply_bench_overrides


def set_text(v: Any) -> str:
    """A declared size value as its ``--set`` text (``true``/``false``; lists joined by ``,``)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return ",".join(set_text(x) for x in v)
    return str(v)


def sets_of(values: Mapping[str, Any]) -> list[str]:
    """``{"bench.sizes": [1, 2], "system.sips.w": 1}`` -> ``["bench.sizes=1,2", "system.sips.w=1"]``."""
    return [f"{k}={set_text(v)}" for k, v in values.items()]


def full_check_sets(bench) -> list[str]:
    """The bench's full-check size as ``--set`` strings: its ``full_check=``, or none (its default size)
    when it declares none -- its default size is then what a full check runs."""
    return sets_of(bench.full_check) if bench.full_check is not None else []


def categorical(default: Any, spec: Param | None) -> bool:
    """Whether a parameter's values pick code paths (see the module's docstring)."""
    if spec is not None and spec.size:
        return False
    if spec is not None and spec.choices is not None:
        return True
    items = default if isinstance(default, (list, tuple)) else [default]
    if isinstance(default, (list, tuple)) and not default:
        return True
    return all(isinstance(x, (str, bool)) for x in items)


def _values(v: Any) -> list[Any]:
    return list(v) if isinstance(v, (list, tuple)) else [v]


def gaps(name: str, defaults: Mapping[str, Any], specs: Mapping[str, Param],
         full_check: Mapping[str, Any]) -> list[str]:
    """What ``full_check`` drops of the default's code paths, one text per categorical parameter
    (``bench.algorithms: the default runs 'tree', full-check does not``); [] when it covers them all.
    A full-check that does not parse (unknown ``bench.`` key, a value of the wrong type) is a ConfigError."""
    params, _ = apply_bench_overrides(name, defaults, sets_of(full_check))
    out = []
    for key, default in defaults.items():
        if not categorical(default, specs.get(key)):
            continue
        want, have = _values(default), _values(params[key])
        if isinstance(default, (list, tuple)) and not default:
            if have:
                out.append(f"bench.{key}: the default is [] (every one), full-check takes only "
                           f"{set_text(have)}")
            continue
        missing = [v for v in want if v not in have]
        if missing:
            out.append(f"bench.{key}: the default runs {', '.join(repr(v) for v in missing)}, full-check does not")
    return out


def check_declaration(name: str, defaults: Mapping[str, Any], specs: Mapping[str, Param],
                      full_check: Mapping[str, Any], check) -> None:
    """The registry's audit of ``@bench(full_check=...)``: it parses, its parameters pass the bench's own
    checks (``check(params)``), and it drops no code path. Raises ConfigError naming what is wrong."""
    try:
        missing = gaps(name, defaults, specs, full_check)
        params, _ = apply_bench_overrides(name, defaults, sets_of(full_check))
        check(params)
    except ConfigError as e:
        raise ConfigError(f"full_check= does not run: {e}") from None
    if missing:
        raise ConfigError("full_check= drops a code path of the default size: " + "; ".join(missing)
                          + " (keep every such value, or mark a size with Param(..., size=True))")
