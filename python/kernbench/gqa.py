"""GQA attention of one KV-head group on 8 cubes x 8 PEs: the four sharding cases.

The model lives in C++ (``src/kernels/gqa.hpp`` documents the cases, the
tiling and the cost of each op): it plans a case, builds its Program (DMA of
Q/K/V tiles, QK^T and PV on the GEMM engine, the online softmax on the vector
engine, IPCQ sends for the K/V ring and the softmax merges, the output write)
and runs it::

    import kernbench
    from kernbench import gqa

    system = kernbench.System.load()
    r = gqa.run(system, "prefill", 4, t_q=2048, s_kv=2048)
    r.latency_us, r.compute_work, r.ipcq_ops, r.link_bytes

``gqa.plan(...)`` gives the decisions and the closed-form op counts without
running. ``kernbench.gqa_reference`` runs a case's Program and interprets its
ops in NumPy, in the order the executor ran them, to check that it computes
attention.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from kernbench import _core

__all__ = ["GqaResult", "plan", "run", "CASES", "CASE_NAMES"]

CASES = (1, 2, 3, 4)
CASE_NAMES = {1: "Cube-SP x PE-TP", 2: "Cube-Repl x PE-TP", 3: "Cube-Repl x PE-SP", 4: "Cube-SP x PE-SP"}


def _core_system(system):
    return system._core if hasattr(system, "_core") else system


def plan(system, phase: str, case: int, t_q: int, s_kv: int, *, tile_q: int = 256, tile_s: int = 256,
         kv_buffers: int = 2, sip: int = 0, cubes: Sequence[int] | None = None, precision: str = "fp16") -> dict:
    """The plan of one case as a dict (shares, tiles, scratch, work, closed-form op counts)."""
    return _core.gqa_plan(_core_system(system), phase, int(case), int(t_q), int(s_kv), int(tile_q), int(tile_s),
                          int(kv_buffers), int(sip), list(cubes or []), precision)


@dataclass
class GqaResult:
    """One simulated GQA run. Times in ps (``latency_us`` in microseconds)."""

    phase: str
    case: int
    t_q: int
    s_kv: int
    latency_ps: int
    plan: dict
    engine_busy_ps: dict[str, float]
    engine_occupancy: dict[str, float]
    link_bytes: dict[str, int]
    op_counts: dict[str, int]
    op_bytes: dict[str, int]
    peak_scratch: int
    phase_windows_ps: dict[str, tuple[int, int]] = field(default_factory=dict)
    run: Any = field(default=None, repr=False)  # kernbench.RunResult: op log, engines, traces

    @property
    def latency_us(self) -> float:
        return self.latency_ps / 1e6

    @property
    def dma_ops(self) -> int:
        return self.op_counts.get("dma", 0)

    @property
    def dma_bytes(self) -> int:
        return self.op_bytes.get("dma", 0)

    @property
    def ipcq_ops(self) -> int:
        """IPCQ copies (sends; every send has its recv)."""
        return self.op_counts.get("send", 0)

    @property
    def ipcq_bytes(self) -> int:
        return self.op_bytes.get("send", 0)

    @property
    def compute_work(self) -> float:
        """Sum over PEs of query rows (token x head) x K/V tokens processed: score elements computed."""
        return self.plan["compute_work"]

    @property
    def active_pes(self) -> int:
        return self.plan["active_pes"]

    @property
    def kv_bytes_per_cube(self) -> int:
        return self.plan["kv_bytes_per_cube"]

    def row(self) -> dict:
        """A flat record (one CSV row)."""
        r = {"phase": self.phase, "case": self.case, "case_name": CASE_NAMES[self.case], "t_q": self.t_q,
             "s_kv": self.s_kv, "latency_us": self.latency_us, "active_pes": self.active_pes,
             "compute_work": self.compute_work, "flops": self.plan["flops"],
             "kv_bytes_per_cube": self.kv_bytes_per_cube, "peak_scratch": self.peak_scratch,
             "scratch_per_pe": self.plan["scratch_per_pe"], "tile_q": self.plan["tile_q"],
             "tile_s": self.plan["tile_s"], "q_tiles": self.plan["q_tiles"], "dma_ops": self.dma_ops,
             "dma_bytes": self.dma_bytes, "ipcq_ops": self.ipcq_ops, "ipcq_bytes": self.ipcq_bytes,
             "gemm_ops": self.op_counts.get("gemm", 0), "vector_ops": self.op_counts.get("vector", 0)}
        for k, v in sorted(self.engine_occupancy.items()):
            r[f"occupancy_{k}"] = v
        for k, v in sorted(self.link_bytes.items()):
            r[f"link_bytes_{k}"] = v
        return r


def run(system, phase: str, case: int, t_q: int, s_kv: int, *, tile_q: int = 256, tile_s: int = 256,
        kv_buffers: int = 2, sip: int = 0, cubes: Sequence[int] | None = None, precision: str = "fp16") -> GqaResult:
    """Build and run one case on ``system`` (advances its clock); returns its metrics."""
    from kernbench.program import RunResult

    d = _core.gqa_run(_core_system(system), phase, int(case), int(t_q), int(s_kv), int(tile_q), int(tile_s),
                      int(kv_buffers), int(sip), list(cubes or []), precision)
    return GqaResult(phase=phase, case=int(case), t_q=int(t_q), s_kv=int(s_kv), latency_ps=int(d["latency_ps"]),
                     plan=dict(d["plan"]), engine_busy_ps=dict(d["engine_busy_ps"]),
                     engine_occupancy=dict(d["engine_occupancy"]), link_bytes=dict(d["link_bytes"]),
                     op_counts=dict(d["op_counts"]), op_bytes=dict(d["op_bytes"]),
                     peak_scratch=int(d["peak_scratch"]),
                     phase_windows_ps={k: tuple(v) for k, v in dict(d["phase_windows_ps"]).items()},
                     run=RunResult(d["run"], system))
