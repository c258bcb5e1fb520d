"""Every measured reference figure of the project, in one list.

The figures themselves live in one place each (the K200 measurements in
configs/k200.measured.yaml, read by ``kernbench.k200_reference`` with what
configs/k200.yaml declares fitted on them; the vGPU first launch in
``kernbench.vgpu``; the KernBench magnitudes in ``kernbench.pe_dma`` and
``kernbench.ccl``); this module only gathers them, so the validation report
(``kernbench run --bench validation``) and its test can check that none is
left out. Nothing is re-typed here; the only figures written here are those
no table held: the GQA op counts.

Each ``Reference`` says what was measured, in which unit, whether the
model was fitted to it (``fitted``), predicts it (``predicted``) or only
has to reach its order of magnitude (``magnitude``: another simulator's
outputs on a topology we do not have), and how it is checked:
``value`` is a number, ``(lo, hi)`` a measured range (the model must land
inside) or ``("<", bound)`` an upper bound.

Sources (described in docs/references.md; SOURCES below says the same):
  k200       Kunlun K200 (KL1) measurements from the public tuning repository of a K200 host
  vgpu       the first working run of an emulated-vGPU forwarding stack (host backend logs)
  kernbench  outputs of an earlier Python simulator of the SIP/CUBE/PE machine ("KernBench")
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernbench.units import size as _size

SOURCES = {
    "k200": "Kunlun K200 (KL1) measurements: the public tuning repository of a K200 host (driver stages S2-S9)",
    "vgpu": "the first working run of an emulated-vGPU forwarding stack: one guest, host backend timing logs",
    "kernbench": "outputs of an earlier Python simulator of the SIP/CUBE/PE machine (KernBench), magnitudes only",
}

#: Relative tolerance per status: a fitted point must be reproduced closely,
#: a prediction within 20 %; magnitudes have no pass/fail (ratio reported).
TOLERANCE = {"fitted": 0.05, "predicted": 0.20, "magnitude": None}

#: The GQA op counts the reference quotes for a prefill panel (64 DMA writes
#: of the output, 896 = 7 ring rotations x K and V x 64 PEs IPCQ copies) and
#: for its decode study (1 output write, 189 IPCQ copies); kernbench-model.md.
GQA_PREFILL_COUNTS = {"dma_out": 64, "ipcq_ops": 896}
GQA_DECODE_COUNTS = {"dma_out": 1, "ipcq_ops": 189}

@dataclass(frozen=True)
class Reference:
    """One reference figure and how the model is asked for it.

    ``key`` is unique over all references; ``probe`` tells
    ``kernbench.validation`` which model run produces the figure.
    """

    source: str          # k200 | vgpu | kernbench
    group: str           # a table of the report, e.g. "K200 copy bandwidth"
    quantity: str        # human name, unique within the group
    value: Any           # float, (lo, hi) range, or ("<", bound)
    unit: str
    status: str          # fitted | predicted | magnitude
    probe: tuple = field(default=())
    note: str = ""
    tol: float | None = None  # overrides the status' tolerance (a figure the source calls approximate)
    fitted_on: str = ""       # for a fitted figure: the parameter(s) of the config fitted to it
    calibration_id: str = ""  # its row id in configs/k200.measured.yaml, where `kernbench calibrate` fits it

    @property
    def key(self) -> str:
        return f"{self.group}: {self.quantity}"

    @property
    def tolerance(self) -> float | None:
        if self.status == "magnitude":
            return None
        return self.tol if self.tol is not None else TOLERANCE[self.status]

    @property
    def center(self) -> float:
        """The number the model is compared with (a range's midpoint, a bound itself)."""
        v = self.value
        if isinstance(v, tuple):
            return float(v[1]) if v[0] == "<" else 0.5 * (float(v[0]) + float(v[1]))
        return float(v)


def _k200_ref(group: str, quantity: str, f, probe: tuple, note: str = "") -> Reference:
    """A K200 row of configs/k200.measured.yaml as a Reference: its value, status and tolerance, and the
    parameters configs/k200.yaml declares fitted on it."""
    return Reference("k200", group, quantity, f.value, f.unit, f.status, probe, note=note or f.source,
                     tol=f.tolerance, fitted_on=", ".join(f.fitted_on), calibration_id=f.id)


def k200_references() -> list[Reference]:
    """Every figure of configs/k200.measured.yaml (kernbench.k200_reference), fitted or predicted as
    configs/k200.yaml's provenance says."""
    from kernbench import k200_reference as ref

    out: list[Reference] = []
    g = "K200 copy bandwidth"
    for row, (kind, knobs, figs) in ref.copy_table().items():
        for direction in ("h2d", "d2h"):
            for (d, nbytes), f in figs.items():
                if d == direction:
                    out.append(_k200_ref(g, f"{row} {direction} {_size(nbytes)}", f,
                                         ("copy", kind, direction, nbytes, knobs)))
    for nbytes, f in ref.p2p_table().items():
        out.append(_k200_ref(g, f"same-card P2P {_size(nbytes)}", f, ("copy", "peer", "h2d", nbytes, {})))
    for direction, f in ref.pin_table().items():
        out.append(_k200_ref(g, f"page pinning (per-page eDMA) {direction} 64 MiB", f,
                             ("copy", "pageable", direction, 64 << 20, dict(f.set))))
    for f in ref.by_group("copy-p2p-stub"):
        nbytes = ref.nbytes(f)
        out.append(_k200_ref(g, f"same-card P2P, p2p_stub=1, {_size(nbytes)}", f,
                             ("copy", "peer", "h2d", nbytes, dict(f.set))))
    for f in ref.by_group("copy-d2d"):
        nbytes = ref.nbytes(f)
        out.append(_k200_ref(g, f"d2d one die {_size(nbytes)}", f, ("copy", "d2d", "h2d", nbytes, {})))
    g = "K200 GEMM"
    for prec, table in ref.gemm_table().items():
        for n, f in table.items():
            out.append(_k200_ref(g, f"{prec} M=N=K={n}", f, ("gemm", n, prec, int(f.params["ncluster"]))))
    for f in ref.k_sweep():
        m, n, k, prec, nc = (int(f.params["m"]), int(f.params["n"]), int(f.params["k"]), str(f.params["precision"]),
                             int(f.params["ncluster"]))
        out.append(_k200_ref(g, f"{prec} M=N={m}, K={k}", f, ("gemm_mnk", m, n, k, prec, nc)))
    g = "K200 launch"
    for (threads, metric), f in ref.launch_rows().items():
        plural = "s" if threads > 1 else ""
        quantity = (f"launch per kernel, {threads} thread{plural}" if metric == "launch"
                    else f"loop time per kernel, {threads} thread{plural}")
        out.append(_k200_ref(g, quantity, f, ("launch", threads, f"{metric}_us")))
    for threads, f in ref.dispatch_table().items():
        out.append(_k200_ref(g, f"dispatch (sync launch + wait), {threads} thread{'s' if threads > 1 else ''}", f,
                             ("dispatch", threads)))
    for (elements, nc), f in ref.wait_table().items():
        out.append(_k200_ref(g, f"single-kernel wait, {elements} elements, ncluster {nc}", f, ("wait", elements, nc)))
    g = "K200 end to end (C4)"
    for (variant, batch), f in ref.c4_table().items():
        out.append(_k200_ref(g, f"C4 {variant}, batch {batch}", f, ("case", str(f.params["case"]), variant, batch)))
    return out


#: vgpu.MEASURED key -> (quantity, status, unit, note). The window
#: counts are configs/vgpu.yaml inputs (the reference's own counts), hence
#: "fitted". A figure that is a sum of parameters fitted to that same figure
#: is fitted too: the first launch's elapsed time and its forwarding time are
#: the fitted round trips and setup added up, the spread is the firmware sd's.
_VGPU = {
    "elapsed_ms": ("elapsed_ms, first launch", "fitted", "ms", "one seed; jiffies (1 ms granularity); "
                   "a sum of the fitted round trips and setup"),
    "forwards": ("PDE forwards", "fitted", "count", "config input: 1 scratch + 7 guest windows"),
    "accepted": ("forwards accepted", "fitted", "count", "config input"),
    "refused": ("forwards refused", "fitted", "count", "config input"),
    "forwarding_ms": ("forwarding time", "fitted", "ms", "the fitted round trip times the forwards"),
    "round_trip_ms": ("per-forward round trip, mean", "fitted", "ms", "firmware mean fitted"),
    "copy_in_ms": ("QMD + shadow copies + bounce copy-in", "predicted", "ms", "a bound"),
    "doorbell_to_completion_ms": ("doorbell -> completion", "fitted", "ms", ""),
    "copy_out_ms": ("bounce copy-out", "predicted", "ms", "a bound"),
    "spread_ms": ("first-launch elapsed_ms range over seeds", "fitted", "ms", "firmware sd fitted to it"),
}


#: For each fitted vGPU figure, the configs/vgpu.yaml parameter(s) it pins or follows from.
_VGPU_FITTED_ON = {
    "elapsed_ms": "vgpu firmware round trip (mean), gr_first_setup",
    "forwards": "config input (the reference's window count)",
    "accepted": "config input", "refused": "config input",
    "forwarding_ms": "vgpu firmware round trip (mean)",
    "round_trip_ms": "vgpu firmware round trip (mean)",
    "doorbell_to_completion_ms": "gr_first_setup",
    "spread_ms": "vgpu firmware round trip (sd)",
}


def vgpu_references() -> list[Reference]:
    """Every figure of vgpu.MEASURED (the measured first launch)."""
    from kernbench import vgpu

    out = []
    for k, v in vgpu.MEASURED.items():
        if k not in _VGPU:
            raise KeyError(f"vgpu.MEASURED[{k!r}] has no entry in kernbench.references._VGPU: add one")
        quantity, status, unit, note = _VGPU[k]
        if isinstance(v, str):  # "< 1"
            op, bound = v.split()
            value: Any = (op, float(bound))
        elif isinstance(v, (list, tuple)):
            value = (float(v[0]), float(v[1]))
        else:
            value = float(v)
        on = _VGPU_FITTED_ON[k] if status == "fitted" else ""
        out.append(Reference("vgpu", "vGPU first launch", quantity, value, unit, status, ("vgpu", k), note,
                             fitted_on=on))
    return out


def kernbench_references() -> list[Reference]:
    """The KernBench magnitudes: the PE DMA study, the 96 KB all-reduce, the GQA op counts."""
    from kernbench import ccl, pe_dma

    out = []
    for scenario, v in pe_dma.REFERENCE.items():
        if isinstance(v, tuple):
            out.append(Reference("kernbench", "KernBench PE DMA", f"{scenario} aggregate bandwidth", float(v[1]),
                                 "GB/s", "magnitude", ("pe_dma", scenario, "effective_GBps")))
        else:
            out.append(Reference("kernbench", "KernBench PE DMA", f"{scenario} makespan", float(v), "ns",
                                 "magnitude", ("pe_dma", scenario, "makespan_ns")))
    out.append(Reference("kernbench", "KernBench collectives", "all-reduce 96 KiB per PE, whole machine",
                         ccl.REFERENCE_ALL_REDUCE_US, "us", "magnitude", ("ccl_full", ccl.REFERENCE_ALL_REDUCE_BYTES),
                         note="the reference's own topology; ours: the default machine"))
    for k, v in GQA_PREFILL_COUNTS.items():
        out.append(Reference("kernbench", "KernBench GQA op counts", f"prefill {k}", float(v), "ops", "magnitude",
                             ("gqa", "prefill", k)))
    for k, v in GQA_DECODE_COUNTS.items():
        out.append(Reference("kernbench", "KernBench GQA op counts", f"decode {k}", float(v), "ops", "magnitude",
                             ("gqa", "decode", k)))
    return out


def all_references() -> list[Reference]:
    """Every reference figure, K200 then vGPU then KernBench; keys are unique."""
    refs = k200_references() + vgpu_references() + kernbench_references()
    seen: set[str] = set()
    for r in refs:
        if r.key in seen:
            raise ValueError(f"reference {r.key!r} appears twice")
        seen.add(r.key)
    return refs
