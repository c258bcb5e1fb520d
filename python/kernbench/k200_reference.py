"""The K200 measurements as the model's reference: read from their one copy, configs/k200.measured.yaml.

Each figure is a row of the data file (kernbench.calibrate's format); whether the model was fitted on it, and
which parameters were, is read from configs/k200.yaml's declared provenance (kernbench.provenance): a row is
fitted when a value of the config names it (or its group) in a ``fitted:`` record. Nothing here re-types a
figure. The tables below give the shapes the benches, the validation report and the tests read::

    from kernbench import k200_reference as ref
    ref.copy_table()["pinned"]         # ("pinned", {}, {("h2d", 1 MiB): Figure, ...})
    ref.gemm_table()["fp16"][2048]     # Figure: value 20100 GFLOPS, fitted on k200.compute.fp16_efficiency
    ref.launch_table()                 # model vs measured for the launch, wait and dispatch rows
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Mapping

__all__ = ["DATA", "CONFIG", "COPY_GROUPS", "Figure", "dataset", "figures", "by_group", "copy_table", "p2p_table",
           "nbytes", "pin_table", "gemm_table", "k_sweep", "wait_table", "launch_rows", "vendor_kernel", "dispatch_table", "c4_table",
           "launch_table"]

DATA = "k200.measured.yaml"
CONFIG = "k200.yaml"

#: The copy groups of the data file and the names the tables and the report give them.
COPY_GROUPS = {"copy-pinned": "pinned", "copy-pageable": "pageable pipeline on",
               "copy-pipe-off": "pageable pipeline off", "copy-stock": "stock driver pageable"}


@dataclass(frozen=True)
class Figure:
    """One measured row: its value in the row's unit, its tolerance (None: the role's default), and the config
    parameters fitted on it (empty: the model predicts it)."""

    id: str
    group: str
    metric: str
    value: float
    unit: str
    params: Mapping[str, Any]
    set: Mapping[str, str]
    tolerance: float | None
    fitted_on: tuple[str, ...]
    source: str = ""

    @property
    def fitted(self) -> bool:
        return bool(self.fitted_on)

    @property
    def status(self) -> str:
        return "fitted" if self.fitted else "predicted"


@functools.lru_cache(maxsize=4)
def dataset(data: str = DATA) -> Any:
    """The data file as kernbench.calibrate reads it (a Dataset)."""
    from kernbench.calibrate import load_data
    from kernbench.system import config_path

    return load_data(config_path(data))


@functools.lru_cache(maxsize=4)
def figures(data: str = DATA, config: str = CONFIG) -> tuple[Figure, ...]:
    """Every row of the data file, in file order, with what the config was fitted on."""
    from kernbench import provenance

    ds = dataset(data)
    fitted = provenance.fitted_on(provenance.read(config), ds)
    return tuple(Figure(r.id, r.group, r.metric, float(r.value), r.unit, dict(r.params), dict(r.set), r.tolerance,
                        tuple(fitted.get(r.id, ())), r.source) for r in ds.rows)


def by_group(*groups: str) -> list[Figure]:
    """The rows of the named groups, in file order; a group the file lacks is a KeyError."""
    figs = figures()
    known = {f.group for f in figs}
    for g in groups:
        if g not in known:
            raise KeyError(f"{DATA}: no group {g!r} (groups: {', '.join(sorted(known))})")
    return [f for f in figs if f.group in groups]


def nbytes(f: Figure) -> int:
    """A copy row's size in bytes (its call gives it as text: `bytes=64MiB`)."""
    from kernbench.units import parse_size

    b = f.params["bytes"]
    return int(b) if isinstance(b, int) else parse_size(str(b))


def copy_table() -> dict[str, tuple[str, dict[str, str], dict[tuple[str, int], Figure]]]:
    """{row name: (copy kind, driver knobs, {(direction, bytes): Figure})} for the four copy tables."""
    out: dict[str, tuple[str, dict[str, str], dict[tuple[str, int], Figure]]] = {}
    for group, name in COPY_GROUPS.items():
        rows = by_group(group)
        out[name] = (str(rows[0].params["kind"]), dict(rows[0].set),
                     {(str(f.params["direction"]), nbytes(f)): f for f in rows})
    return out


def p2p_table() -> dict[int, Figure]:
    """Same-card peer copies (the production knobs): {bytes: Figure}."""
    return {nbytes(f): f for f in by_group("copy-p2p")}


def pin_table() -> dict[str, Figure]:
    """Page pinning with the per-page eDMA (kl1_pageable_pin=1), 64 MiB: {direction: Figure}."""
    return {str(f.params["direction"]): f for f in by_group("copy-page-pin")}


def gemm_table() -> dict[str, dict[int, Figure]]:
    """The square GEMMs: {precision: {M = N = K: Figure}} (the fitted three included)."""
    out: dict[str, dict[int, Figure]] = {}
    for f in by_group("gemm-square", "gemm-fit"):
        out.setdefault(str(f.params["precision"]), {})[int(f.params["m"])] = f
    return {p: dict(sorted(t.items())) for p, t in out.items()}


def k_sweep() -> list[Figure]:
    """The K sweep at M = N = 2048 (stated approximately in the reference)."""
    return by_group("gemm-k-sweep")


def wait_table() -> dict[tuple[int, int], Figure]:
    """Single-kernel waits: {(elements, ncluster): Figure}."""
    return {(int(f.params["elements"]), int(f.params["ncluster"])): f for f in by_group("wait")}


def launch_rows() -> dict[tuple[int, str], Figure]:
    """The vendor launch test: {(threads, metric): Figure} (metric launch or per_kernel)."""
    return {(int(f.params["threads"]), f.metric): f for f in by_group("launch")}


def vendor_kernel() -> dict[str, int]:
    """The vendor launch test's kernel (elements and ncluster), as its rows' calls give it."""
    f = launch_rows()[(1, "launch")]
    return {"elements": int(f.params["elements"]), "ncluster": int(f.params["ncluster"])}


def dispatch_table() -> dict[int, Figure]:
    """The synchronous round trips: {threads: Figure}."""
    return {int(f.params["threads"]): f for f in by_group("dispatch")}


def c4_table() -> dict[tuple[str, int], Figure]:
    """The C4 MLP tower: {(variant, batch): Figure}."""
    return {(str(f.params["variant"]), int(f.params["batch"])): f for f in by_group("c4")}


def launch_table(config: Any = CONFIG, *, set: Mapping[str, Any] | None = None,
                 seed: int = 1) -> list[dict[str, Any]]:
    """Model vs measured for every launch, wait and dispatch row of the data file, each marked fitted or
    predicted (a fresh system per figure; the vendor test's kernel as each row's call gives it)."""
    from kernbench import calibrate
    from kernbench import k200

    def fresh():
        return k200.load_system(config, set=set, seed=seed)

    rows = []

    def row(name, f: Figure, model):
        tol = f.tolerance if f.tolerance is not None else calibrate.DEFAULT_TOLERANCE[f.status]
        rows.append({"row": name, "id": f.id, "measured_us": f.value, "model_us": round(model, 4),
                     "ratio": round(model / f.value, 4), "within": bool(abs(model / f.value - 1) <= tol + 1e-12),
                     "tolerance": tol, "fitted": f.status, "fitted_on": list(f.fitted_on)})

    def call(f: Figure) -> dict[str, int]:
        return {k: int(v) for k, v in f.params.items()}

    for (threads, metric), f in launch_rows().items():
        lt = k200.launch(fresh(), **call(f))
        label = "launch, " if metric == "launch" else "vendor loop, per kernel, "
        row(f"{label}{threads} thread{'s' if threads > 1 else ''}", f, lt[f"{metric}_us"])
    for (n, nc), f in wait_table().items():
        w = k200.launch(fresh(), threads=1, kernels=1, loops=1, elements=n, ncluster=nc)
        row(f"single-kernel wait, {n} elements nc {nc}", f, w["wait_us"])
    for threads, f in dispatch_table().items():
        d = k200.dispatch(fresh(), **call(f))
        row(f"dispatch (sync round trip), {threads} thread{'s' if threads > 1 else ''}", f, d["round_trip_us"])
    return rows
