"""Energy of a run and HBM traffic per pseudo-channel (docs/energy.md).

    res = system.run_program(prog)
    e = kernbench.energy.summarize(res)     # {"total_j", "by": {label: J}, "by_op_kind": {...}, ...}
    kernbench.energy.hbm_traffic(res)       # per HBM slice: bytes read / written per pseudo-channel

The C++ model (src/runtime/energy.hpp) prices what the run did with the
config's ``energy:`` section: bytes per hop of each link class, bytes at
each memory, FLOPs per engine and precision, and static power per node kind
over the makespan. Labels follow the shared sweep.json contract:
``dynamic:link:<class>``, ``dynamic:memory:<hbm|sram>``,
``dynamic:compute:<gemm|vector>:<precision|any>``, ``static:<node kind>``.
"""

from __future__ import annotations

import math
from typing import Any

from kernbench import _core

__all__ = ["report", "summarize", "hbm_traffic", "group", "GROUPS"]

#: Coarse groups of the labels, for plots: the label's first two fields.
GROUPS = ("dynamic:link", "dynamic:memory", "dynamic:compute", "static")


def _parts(result) -> tuple[Any, Any, Any]:
    program = getattr(result, "program_core", None)
    system = getattr(result, "system", None)
    if program is None or system is None:
        raise _core.UsageError(
            "energy: this result does not know its Program; run it with System.run_program (kernbench.RunResult)")
    core = result._core if hasattr(result, "_core") else result
    return system._core, program, core


def report(result) -> dict[str, Any]:
    """The full report: total, dynamic and static joules, by label, by op kind, and the counts priced."""
    system, program, core = _parts(result)
    r = dict(_core.energy(system, program, core))
    for key in ("total_j", "dynamic_j", "static_j"):
        if not math.isfinite(r[key]):
            raise _core.InternalError(f"energy: {key} is not finite ({r[key]})")
    return r


def summarize(result) -> dict[str, Any]:
    """The sweep.json ``energy`` dict of a run: ``{"total_j", "by": {label: J}, "by_op_kind": {kind: J}}``."""
    r = report(result)
    return {"total_j": float(r["total_j"]), "by": {k: float(v) for k, v in r["by"].items()},
            "by_op_kind": {k: float(v) for k, v in r["by_op_kind"].items()}}


def group(summary: dict[str, Any]) -> dict[str, float]:
    """Joules per coarse group (link, memory, compute, static) of a summary's labels."""
    out = {g: 0.0 for g in GROUPS}
    for label, j in summary["by"].items():
        for g in GROUPS:
            if label.startswith(g + ":") or label == g:
                out[g] += j
                break
    return out


def hbm_traffic(result) -> list[dict[str, Any]]:
    """Per HBM slice the run's moves touched: ``{"slice", "name", "read", "written"}`` (bytes per pseudo-channel)."""
    system, program, _ = _parts(result)
    return [dict(d) for d in _core.hbm_traffic(system, program)]
