"""Every measured reference figure of the project, in one list.

The figures themselves live where the models that use them live (the K200
tables in ``kernbench.k200``, the vGPU first launch in ``kernbench.vgpu``,
the KernBench magnitudes in ``kernbench.pe_dma`` and ``kernbench.ccl``); this module only
gathers them, so the validation report (``kernbench run --bench
validation``) and its test can check that none is left out. Nothing is
re-typed here; the only figures written here are those no table held: the
GQA op counts and the K200 figures of the reference's prose (K200_PROSE).

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

#: K200 figures k200-measured.md states in its prose, outside the tables that
#: kernbench.k200 holds: the K sweep of the GEMM at M = N = 2048 ("K 128-2048
#: FP32 ~7300, FP16 ~17500 ... ~4400 by 8192, FP16 ... ~14700 at 8192"), the
#: P2P debug stub ("~2.5 through a user-space fallback"), and D2D on one die
#: ("~62 GB/s for >= 64 MB"; configs/k200.yaml sets the D2D rate to it).
#: (group, quantity, value, unit, status, probe)
K200_PROSE = [
    ("K200 GEMM", "fp32 M=N=2048, K=128", 7300.0, "GFLOPS", "predicted", ("gemm_mnk", 2048, 2048, 128, "fp32", 0)),
    ("K200 GEMM", "fp32 M=N=2048, K=512", 7300.0, "GFLOPS", "predicted", ("gemm_mnk", 2048, 2048, 512, "fp32", 0)),
    ("K200 GEMM", "fp32 M=N=2048, K=8192", 4400.0, "GFLOPS", "predicted", ("gemm_mnk", 2048, 2048, 8192, "fp32", 0)),
    ("K200 GEMM", "fp16 M=N=2048, K=128", 17500.0, "GFLOPS", "predicted", ("gemm_mnk", 2048, 2048, 128, "fp16", 4)),
    ("K200 GEMM", "fp16 M=N=2048, K=512", 17500.0, "GFLOPS", "predicted", ("gemm_mnk", 2048, 2048, 512, "fp16", 4)),
    ("K200 GEMM", "fp16 M=N=2048, K=8192", 14700.0, "GFLOPS", "predicted",
     ("gemm_mnk", 2048, 2048, 8192, "fp16", 4)),
    ("K200 copy bandwidth", "same-card P2P, p2p_stub=1, 64 MiB", 2.5, "GiB/s", "predicted",
     ("copy", "peer", "h2d", 64 << 20, {"k200.driver.kl1_p2p_stub": 1})),
    ("K200 copy bandwidth", "d2d one die 64 MiB", 62.0, "GiB/s", "predicted", ("copy", "d2d", "h2d", 64 << 20, {})),
    ("K200 copy bandwidth", "d2d one die 1 GiB", 62.0, "GiB/s", "fitted", ("copy", "d2d", "h2d", 1 << 30, {})),
]


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


def _fitted_on(k200, fitted: bool, key: tuple) -> str:
    """The parameter(s) fitted to a figure (k200.FITTED_ON); a fitted figure without an entry is an error."""
    if not fitted:
        return ""
    if key not in k200.FITTED_ON:
        raise KeyError(f"kernbench.k200.FITTED_ON has no entry for the fitted figure {key!r}: add one")
    return k200.FITTED_ON[key]


def k200_references() -> list[Reference]:
    """Every figure of the K200 tables (kernbench.k200 REFERENCE_* / FITTED_*)."""
    from kernbench import k200

    out: list[Reference] = []
    g = "K200 copy bandwidth"
    for row, (kind, knobs, h2d, d2h) in k200.REFERENCE_COPY.items():
        for direction, ref in (("h2d", h2d), ("d2h", d2h)):
            for nbytes, measured in zip(k200.SIZES, ref):
                fitted = (row, direction, nbytes) in k200.FITTED_COPY
                out.append(Reference("k200", g, f"{row} {direction} {_size(nbytes)}", measured, "GiB/s",
                                     "fitted" if fitted else "predicted", ("copy", kind, direction, nbytes, knobs),
                                     fitted_on=_fitted_on(k200, fitted, ("copy", row, direction, nbytes))))
    for nbytes, measured in k200.REFERENCE_P2P.items():
        out.append(Reference("k200", g, f"same-card P2P {_size(nbytes)}", measured, "GiB/s",
                             "fitted" if nbytes in k200.FITTED_P2P else "predicted",
                             ("copy", "peer", "h2d", nbytes, {}),
                             fitted_on=_fitted_on(k200, nbytes in k200.FITTED_P2P, ("p2p", nbytes))))
    for direction, measured in k200.REFERENCE_PIN.items():
        out.append(Reference("k200", g, f"page pinning (per-page eDMA) {direction} 64 MiB", measured, "GiB/s",
                             "fitted" if direction in k200.FITTED_PIN else "predicted",
                             ("copy", "pageable", direction, 64 << 20, {"k200.driver.kl1_pageable_pin": 1}),
                             fitted_on=_fitted_on(k200, direction in k200.FITTED_PIN, ("pin", direction))))
    g = "K200 GEMM"
    for prec, table in k200.REFERENCE_GEMM.items():
        # FP16 is best (and was measured) at ncluster 4; FP32 at the default (k200-measured.md).
        nc = 4 if prec == "fp16" else 0
        for n, measured in table.items():
            fitted = (prec, n) in k200.FITTED_GEMM
            out.append(Reference("k200", g, f"{prec} M=N=K={n}", measured, "GFLOPS",
                                 "fitted" if fitted else "predicted", ("gemm", n, prec, nc),
                                 fitted_on=_fitted_on(k200, fitted, ("gemm", prec, n)),
                                 calibration_id=f"gemm-{prec}-{n}"))
    g = "K200 launch"
    lr = k200.REFERENCE_LAUNCH
    # The launch figures are per kernel of the vendor test (10 kernels, one
    # wait, loops; kernel size and ncluster as kernbench.k200 states them);
    # configs/k200.yaml fits launch to them.
    fitted_launch = k200.FITTED_LAUNCH
    for threads, key in ((1, "launch_1thread_us"), (4, "launch_4threads_us")):
        out.append(Reference("k200", g, f"launch per kernel, {threads} thread{'s' if threads > 1 else ''}",
                             tuple(lr[key]), "us", "fitted" if key in fitted_launch else "predicted",
                             ("launch", threads, "launch_us"),
                             fitted_on=_fitted_on(k200, key in fitted_launch, ("launch", key))))
    out.append(Reference("k200", g, "loop time per kernel, 1 thread", lr["per_kernel_us"], "us",
                         "fitted" if "per_kernel_us" in fitted_launch else "predicted", ("launch", 1, "per_kernel_us")))
    # "dispatch": the synchronous round trip (launch one kernel, wait for it) per
    # host thread; untraceable in the reference, approximate (15 %).
    for threads, measured in k200.REFERENCE_DISPATCH.items():
        out.append(Reference("k200", g, f"dispatch (sync launch + wait), {threads} thread{'s' if threads > 1 else ''}",
                             measured, "us", "predicted", ("dispatch", threads),
                             note="no traceable measurement (the reference: approximate, 15 %)",
                             tol=k200.DISPATCH_TOLERANCE))
    for (elements, nc), measured in k200.REFERENCE_WAIT.items():
        out.append(Reference("k200", g, f"single-kernel wait, {elements} elements, ncluster {nc}", measured, "us",
                             "fitted" if (elements, nc) in k200.FITTED_WAIT else "predicted",
                             ("wait", elements, nc),
                             fitted_on=_fitted_on(k200, (elements, nc) in k200.FITTED_WAIT, ("wait",))))
    g = "K200 end to end (C4)"
    for (variant, batch), measured in k200.REFERENCE_C4.items():
        fitted = (variant, batch) in k200.FITTED_C4
        out.append(Reference("k200", g, f"C4 {variant}, batch {batch}", float(measured), "samples/s",
                             "fitted" if fitted else "predicted", ("case", "c4_mlp.yaml", variant, batch),
                             note="target after calibration: 15 % (the scan's two limits, fitted on these 12 points)",
                             tol=k200.C4_TOLERANCE, fitted_on=_fitted_on(k200, fitted, ("c4",)),
                             calibration_id=f"c4-b{batch}-{variant.replace(' ', '-')}"))
    for group, quantity, value, unit, status, probe in K200_PROSE:
        on = _fitted_on(k200, status == "fitted", ("d2d", probe[3])) if probe[1] == "d2d" else ""
        out.append(Reference("k200", group, quantity, value, unit, status, probe,
                             note="stated approximately (~) in the reference's prose", fitted_on=on))
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
