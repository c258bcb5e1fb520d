"""The model beside every reference figure and every closed form.

``kernbench run --bench validation`` (benches/validation.py) drives this
module; it can also be used directly::

    from kernbench import validation
    rows = validation.collect(quick=True)       # one row per figure
    text = validation.report_markdown(rows)

Each row: source, group, quantity, unit, status (fitted | predicted |
magnitude | closed form), reference (the figure; a range's midpoint),
reference_text (as the source states it), model, error ((model - ref) /
ref), tolerance (relative; None for magnitudes), verdict (ok | known miss | outside |
magnitude | error). A range passes when the model lands inside it, a bound
when the model is below it; their error is still taken against the
midpoint (the bound) so every row has one.

The reference figures come from ``kernbench.references`` (one list, built
from the tables of the models); the closed forms are computed here from the
same parameters the simulated machine is given.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Iterable, Mapping

from kernbench.references import Reference, all_references
from kernbench.validation_gpu import gpu_rows
from kernbench.validation_rows import STATUSES, make_row, reference_text, relative_error, verdict  # noqa: F401
from kernbench.validation_rows import number_text as _num
from kernbench.units import KiB, MiB

#: The reduced default machine of quick runs (as pe-dma-perf's smoke size):
#: 2 SIPs of 2x2 cubes keep every PE DMA scenario, in about a second.
QUICK_MACHINE = {"system.sips.w": 2, "system.sips.h": 1, "system.cubes.w": 2, "system.cubes.h": 2}


def cross_validated_errors(refs: Iterable[Reference] | None = None) -> dict[str, float | None]:
    """Reference key -> the cross-validated error of its fit (configs/k200.calibration.json, written by
    scripts/calibrate_k200.sh): the error when the figure's fold was left out of the fit. Only the figures
    configs/k200.yaml declares fitted by that script have one (the others were solved by hand, one parameter
    per figure: exactly determined, nothing to leave out); a missing file or row is an error, not a blank."""
    import json

    from kernbench import k200_reference, provenance
    from kernbench.system import config_path

    path = config_path("k200.calibration.json")
    rows = json.loads(path.read_text())["rows"]
    records = provenance.read(k200_reference.CONFIG)
    script = {p: r for p, r in records.items() if r.source == "scripts/calibrate_k200.sh"}
    by_script = set(provenance.fitted_on(script, k200_reference.dataset()))
    out: dict[str, float | None] = {}
    for ref in refs if refs is not None else all_references():
        if ref.status != "fitted" or ref.calibration_id not in by_script:
            continue
        if ref.calibration_id not in rows:
            raise LookupError(f"{path}: no row {ref.calibration_id!r} for the fitted figure {ref.key!r}: "
                              "rerun scripts/calibrate_k200.sh")
        out[ref.key] = rows[ref.calibration_id]["cv_error"]
    return out


# ---- the model's side of each reference ----------------------------------------------

class _Probes:
    """Runs the model for the references' probes, sharing runs that several figures read."""

    def __init__(self, quick: bool, seed: int, launch_loops: int, spread_seeds: int):
        self.quick, self.seed = quick, seed
        self.launch_loops, self.spread_seeds = launch_loops, spread_seeds
        self.cache: dict[Any, Any] = {}

    def _once(self, key, fn: Callable[[], Any]):
        if key not in self.cache:
            self.cache[key] = fn()
        return self.cache[key]

    def value(self, ref: Reference) -> float:
        kind, *args = ref.probe
        return float(getattr(self, "_" + kind)(*args))

    # K200 (configs/k200.yaml)
    def _copy(self, kind, direction, nbytes, knobs):
        from kernbench import k200

        system = k200.load_system(set=dict(knobs), seed=self.seed)
        return k200.copy(system, kind, direction, nbytes).gib_per_s

    def _gemm(self, n, precision, ncluster):
        from kernbench import k200

        return k200.gemm(k200.load_system(seed=self.seed), n, n, n, precision, ncluster=ncluster).gflops

    def _gemm_mnk(self, m, n, k, precision, ncluster):
        from kernbench import k200

        return k200.gemm(k200.load_system(seed=self.seed), m, n, k, precision, ncluster=ncluster).gflops

    def _launch(self, threads, field):
        from kernbench import k200, k200_reference

        vendor = k200_reference.vendor_kernel()  # the vendor test's kernel
        d = self._once(("launch", threads), lambda: k200.launch(
            k200.load_system(seed=self.seed), threads=threads, kernels=10, loops=self.launch_loops, **vendor))
        return d[field]

    def _dispatch(self, threads):
        from kernbench import k200, k200_reference

        # The synchronous round trip, per command and thread.
        return k200.dispatch(k200.load_system(seed=self.seed), threads=threads, commands=self.launch_loops,
                             **k200_reference.vendor_kernel())["round_trip_us"]

    def _wait(self, elements, ncluster):
        from kernbench import k200

        d = k200.launch(k200.load_system(seed=self.seed), threads=1, kernels=1, loops=1, elements=elements,
                        ncluster=ncluster)
        return d["wait_us"]

    @staticmethod
    def case_path(name):
        from kernbench import k200

        for p in k200.case_files():
            if p.name == name:
                return p
        raise LookupError(f"no K200 case file {name!r} (known: {', '.join(p.name for p in k200.case_files())})")

    def _case(self, case_file, variant, batch):
        """Throughput (samples/s) of one variant of an end-to-end case at one batch."""
        from kernbench import k200

        for r in _case_rows(self.case_path(case_file), self.seed):
            if r["variant"] == variant and r["batch"] == batch:
                return r["throughput_per_s"]
        raise LookupError(f"{case_file}: no variant {variant!r} at batch {batch}")

    # vGPU (configs/vgpu.yaml)
    def _vgpu(self, key):
        from kernbench import vgpu

        if key == "spread_ms":
            spread = self._once("spread", lambda: vgpu.elapsed_spread(self.spread_seeds, seed0=self.seed))
            return 0.5 * (min(spread) + max(spread))  # compared as a range: see vgpu_spread below
        launch = self._once("vgpu", lambda: vgpu.launches(1, seed=self.seed)["launches"][0])
        rows = {r["component"]: r for r in vgpu.decomposition(launch)}
        by_key = {"elapsed_ms": "elapsed_ms (jiffies)", "forwards": "PDE forwards", "accepted": "  accepted",
                  "refused": "  refused", "forwarding_ms": "forwarding (ms)",
                  "round_trip_ms": "per-forward round trip, mean (ms)",
                  "copy_in_ms": "QMD + shadow copies + bounce copy-in (ms)",
                  "doorbell_to_completion_ms": "doorbell -> completion (ms)", "copy_out_ms": "bounce copy-out (ms)"}
        return rows[by_key[key]]["model"]

    def vgpu_spread(self) -> tuple[float, float]:
        from kernbench import vgpu

        spread = self._once("spread", lambda: vgpu.elapsed_spread(self.spread_seeds, seed0=self.seed))
        return float(min(spread)), float(max(spread))

    # KernBench magnitudes (configs/topology.yaml; reduced in quick runs)
    def machine_sets(self) -> dict[str, Any]:
        return dict(QUICK_MACHINE) if self.quick else {}

    def _pe_dma(self, scenario, field):
        rows = self._once("pe_dma", self._pe_dma_rows)
        if scenario not in rows:
            raise LookupError(f"pe-dma-perf has no scenario {scenario!r} on this machine")
        return rows[scenario][field]

    def _pe_dma_rows(self):
        from kernbench import pe_dma
        from kernbench.system import System

        def machine():
            return System.load(None, set=self.machine_sets(), seed=self.seed)

        out = {}
        for name, kind, ops in pe_dma.scenarios(machine(), 0):
            if name in pe_dma.REFERENCE:
                out[name] = pe_dma.run_scenario(machine(), name, kind, ops, 16 * KiB)
        return out

    def _ccl_full(self, nbytes):
        from kernbench import ccl
        from kernbench.system import System

        system = System.load(None, set=self.machine_sets(), seed=self.seed)
        return ccl.all_reduce(system, nbytes, algorithm="lrab").latency_ps / 1e6

    def _gqa(self, phase, what):
        from kernbench import gqa
        from kernbench.system import System

        # The reference's panels: prefill case 1 (KV rotated around the ring of
        # cubes, one Q tile per PE), decode case 4 at S_kv = 8192.
        case, t_q, s_kv = (1, 2048, 2048) if phase == "prefill" else (4, 1, 8192)
        r = self._once(("gqa", phase), lambda: gqa.run(System.load(None, seed=self.seed), phase, case, t_q, s_kv))
        return r.plan["dma_out"] if what == "dma_out" else r.ipcq_ops


def reference_rows(refs: Iterable[Reference] | None = None, *, quick: bool = False, seed: int = 1,
                   launch_loops: int = 100, spread_seeds: int = 100,
                   failures: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """One row per reference figure; a figure whose model run fails is a row with verdict ``error``."""
    probes = _Probes(quick, seed, launch_loops, spread_seeds)
    refs = list(refs if refs is not None else all_references())
    cv = cross_validated_errors(refs)
    rows = []
    for ref in refs:
        note = ref.note
        try:
            model = probes.value(ref)
            if ref.probe == ("vgpu", "spread_ms"):
                lo, hi = probes.vgpu_spread()
                note = (f"{note}; model {lo:g}-{hi:g} over {spread_seeds} seeds (the row shows the midpoints; "
                        "each end is judged against the measured end)")
                row = make_row(source=ref.source, group=ref.group, quantity=ref.quantity, unit=ref.unit,
                               status=ref.status, value=ref.value, model=model, tolerance=ref.tolerance, note=note)
                # A range against a range: each end within the status' tolerance of the measured end.
                tol = ref.tolerance or 0.0
                ends_ok = abs(lo - ref.value[0]) <= tol * ref.value[0] and abs(hi - ref.value[1]) <= tol * ref.value[1]
                row["verdict"] = "ok" if ends_ok else "outside"
                row["tolerance"] = tol
                rows.append(row)
                continue
            err_text = ""
        except Exception as e:  # a failing probe never hides the other figures
            model, err_text = None, f"{type(e).__name__}: {e}"
            if failures is not None:
                failures.append({"name": ref.key, "error": err_text})
        if ref.source == "kernbench" and ref.probe[0] in ("pe_dma", "ccl_full") and quick:
            note = (note + "; " if note else "") + "quick run: 2 SIPs of 2x2 cubes"
        rows.append(make_row(source=ref.source, group=ref.group, quantity=ref.quantity, unit=ref.unit,
                             status=ref.status, value=ref.value, model=model, tolerance=ref.tolerance, note=note,
                             error_text=err_text, fitted_on=ref.fitted_on, cv_error=cv.get(ref.key)))
    return rows


# ---- closed forms -----------------------------------------------------------------------

def queue_rows(customers: int, seed: int = 1) -> list[dict[str, Any]]:
    """Server against queueing theory: mean wait of M/M/1, M/D/1 and M/M/2 at loads 0.5 and 0.9."""
    from kernbench import _core

    rows = []
    service = 1_000_000  # 1 us
    for name, dist, c, tol in (("M/M/1", "exponential", 1, 0.05), ("M/D/1", "deterministic", 1, 0.05),
                               ("M/M/2", "exponential", 2, 0.05)):
        for rho in (0.5, 0.9):
            inter = int(round(service / (rho * c)))
            sim = _core.Simulation(seed)
            r = _core.run_queue(sim, inter, service, service=dist, servers=c, customers=customers, record_ops=False)
            theory = float(r["theory_wait_ps"])
            # At rho = 0.9 the sample mean converges slowly (relaxation ~ 1/(1-rho)^2 services): wider band.
            rows.append(make_row(source="closed form", group="Queueing (Server vs theory)",
                                 quantity=f"{name} mean wait, rho={rho}", unit="us", status="closed form",
                                 value=theory / 1e6, model=float(r["mean_wait_ps"]) / 1e6,
                                 tolerance=tol if rho <= 0.5 else 2 * tol,
                                 note=f"{customers} customers, Erlang C / Pollaczek-Khinchine"))
    return rows


def ring_yaml(p: int, gbps: float, latency_ns: float, dispatch_ns: float = 20, bank_hop_ns: float = 1,
              vector_bytes_per_cycle: int = 128, clock_mhz: int = 1000) -> str:
    """An explicit ring of ``p`` PEs: the uncontended machine of the alpha-beta closed form."""
    nodes = "\n".join(f"    - {{name: pe{i}, kind: pe, overhead: 0 ns}}" for i in range(p))
    edges = "\n".join(f"    - {{a: pe{i}, b: pe{(i + 1) % p}, class: ring, bandwidth: {gbps:g} GB/s, "
                      f"latency: {latency_ns:g} ns}}" for i in range(p))
    return (f"graph:\n  nodes:\n{nodes}\n  edges:\n{edges}\n"
            f"pe: {{clock: {clock_mhz} MHz, dispatch: {dispatch_ns:g} ns, scratch: 64 MiB, "
            f"vector_bytes_per_cycle: {vector_bytes_per_cycle}, "
            f"ipcq: {{bank_hop: {bank_hop_ns:g} ns, slot: 4 KiB}}}}\n")


def ring_allreduce_closed_form_ps(p: int, nbytes: int, gbps: float, latency_ns: float, dispatch_ns: float = 20,
                                  bank_hop_ns: float = 1, vector_bytes_per_cycle: int = 128,
                                  clock_mhz: int = 1000, slot: int = 4 * KiB) -> float:
    """2 (p - 1) (alpha + n / (p beta)): alpha per step = the send's dispatch + the wire latency +
    the last slot's reduction after it lands (a bank hop + slot / vector rate); beta = link bandwidth."""
    alpha = (dispatch_ns + latency_ns + bank_hop_ns) * 1e3 + slot / vector_bytes_per_cycle * 1e6 / clock_mhz
    beta = gbps * 1e9 / 1e12  # bytes per ps
    return 2.0 * (p - 1) * (alpha + nbytes / (p * beta))


def ring_rows(sizes: Iterable[int], seed: int = 1, p: int = 8, gbps: float = 64, latency_ns: float = 10) -> list[dict]:
    """The ring all-reduce on an uncontended ring against the alpha-beta closed form."""
    from kernbench import ccl
    from kernbench.system import System

    rows = []
    for n in sizes:
        r = ccl.all_reduce(System.from_yaml(ring_yaml(p, gbps, latency_ns), source="validation-ring", seed=seed),
                           n, algorithm="ring")
        closed = ring_allreduce_closed_form_ps(p, n, gbps, latency_ns)
        rows.append(make_row(source="closed form", group="Alpha-beta (ring all-reduce)",
                             quantity=f"ring all-reduce, {p} PEs, {n // KiB} KiB per PE", unit="us",
                             status="closed form", value=closed / 1e6, model=r.latency_ps / 1e6, tolerance=0.05,
                             note=f"{gbps:g} GB/s links, {latency_ns:g} ns; bytes on the ring "
                                  f"{r.link_bytes.get('ring', 0)} (closed form {2 * (p - 1) * n})"))
    return rows


PARKING_LOT = """graph:
  nodes:
    - {name: a, kind: other, overhead: 0 ns}
    - {name: b, kind: router, overhead: 0 ns}
    - {name: c, kind: router, overhead: 0 ns}
    - {name: d, kind: other, overhead: 0 ns}
  edges:
    - {a: a, b: b, class: l1, bandwidth: %(c1)g GB/s, latency: 0 ns}
    - {a: b, b: c, class: l2, bandwidth: %(c2)g GB/s, latency: 0 ns}
    - {a: c, b: d, class: l3, bandwidth: %(c3)g GB/s, latency: 0 ns}
fabric: {model: flow}
"""


def maxmin_rows(nbytes: int = MiB, c1: float = 100, c2: float = 100, c3: float = 40, seed: int = 1) -> list[dict]:
    """The flow fabric on a parking lot (a long flow a->d over three links, one short flow per link)
    against max-min fair share by hand: with c3 / 2 below c1 / 2 and c2 / 2, the long flow and the
    third short one get c3 / 2 each, the first two short flows the rest of their links; rates do not
    change when the short ones finish, so each completion time is bytes / its rate."""
    from kernbench.system import System

    if not c3 / 2 <= min(c1, c2) / 2:
        raise ValueError("maxmin_rows: the closed form assumes c3 <= min(c1, c2)")
    paths = [("a", "d"), ("a", "b"), ("b", "c"), ("c", "d")]
    names = ["long a->d", "short a->b", "short b->c", "short c->d"]
    rate = [c3 / 2, c1 - c3 / 2, c2 - c3 / 2, c3 / 2]  # GB/s
    system = System.from_yaml(PARKING_LOT % {"c1": c1, "c2": c2, "c3": c3}, source="validation-parking-lot",
                              seed=seed)
    solver = system.max_min_rates(paths)
    for src, dst in paths:
        system.transfer(src, dst, nbytes)
    system.run()
    ends = system.transfers()["end_ps"]
    rows = []
    for i, name in enumerate(names):
        rows.append(make_row(source="closed form", group="Max-min fair share (flow fabric)",
                             quantity=f"{name} rate (solver)", unit="GB/s", status="closed form", value=rate[i],
                             model=solver[i] / 1e9, tolerance=1e-9))
        rows.append(make_row(source="closed form", group="Max-min fair share (flow fabric)",
                             quantity=f"{name} completion, {nbytes // KiB} KiB", unit="ns", status="closed form",
                             value=nbytes / rate[i], model=float(ends[i]) / 1e3, tolerance=1e-6,
                             note="simulated flow fabric; durations round up to the next ps"))
    return rows


def closed_form_rows(*, quick: bool = False, seed: int = 1, failures: list | None = None) -> list[dict[str, Any]]:
    """Every closed form; one that cannot run becomes a failure (the others still run)."""
    rows: list[dict[str, Any]] = []
    parts = [("queueing", lambda: queue_rows(100_000 if quick else 1_000_000, seed)),
             ("alpha-beta", lambda: ring_rows([1 * MiB] if quick else [256 * KiB, 1 * MiB, 4 * MiB], seed)),
             ("max-min", lambda: maxmin_rows(seed=seed))]
    for name, fn in parts:
        try:
            rows += fn()
        except Exception as e:
            if failures is None:
                raise
            failures.append({"name": f"closed form: {name}", "error": f"{type(e).__name__}: {e}"})
    return rows


@functools.lru_cache(maxsize=None)
def _case_rows(path, seed: int) -> tuple:
    """One K200 case file's rows (every variant and batch), run once per process and seed: the C4 reference
    rows and the case predictions read the same runs."""
    from kernbench import k200

    return tuple(k200.run_case(path, seed=seed))


def case_prediction_rows(*, seed: int = 1, failures: list | None = None) -> list[dict[str, Any]]:
    """Every end-to-end K200 case (C1-C5), every variant and batch, as a prediction: what the model says
    and what bounds it. Figures measured here (C4's) are reference rows too; the others are held back
    to judge the model, so these rows have no reference and no verdict."""
    from kernbench import k200, k200_reference

    rows = []
    for path in k200.case_files():
        try:
            results = _case_rows(path, seed)
        except Exception as e:
            if failures is None:
                raise
            failures.append({"name": f"case {path.name}", "error": f"{type(e).__name__}: {e}"})
            continue
        for r in results:
            measured = r["case"] == "C4" and (r["variant"], r["batch"]) in k200_reference.c4_table()
            rows.append({"source": "k200", "group": "K200 end to end (predictions)",
                         "quantity": f"{r['case']} {r['variant']}, batch {r['batch']}", "unit": "samples/s",
                         "status": "predicted", "reference": None,
                         "reference_text": "measured (see C4)" if measured else "held back", "check": "point",
                         "model": float(r["throughput_per_s"]), "error": None, "tolerance": None,
                         "verdict": "prediction", "fitted_on": "", "cv_error": None,
                         "note": f"latency {r['latency_ms']:.4g} ms; bound: {r['bound_resource']}; "
                                 f"top step: {r['top_step']}"})
    return rows


def collect(*, quick: bool = False, seed: int = 1, failures: list | None = None) -> list[dict[str, Any]]:
    """Every reference figure, every closed form, every end-to-end case prediction and the GPU target's rows
    (fitted and predicted apart), as report rows."""
    rows = reference_rows(quick=quick, seed=seed, launch_loops=10 if quick else 100,
                          spread_seeds=10 if quick else 100, failures=failures)
    rows += closed_form_rows(quick=quick, seed=seed, failures=failures)
    rows += case_prediction_rows(seed=seed, failures=failures)
    return rows + gpu_rows(failures=failures)


# ---- the report -----------------------------------------------------------------------------

def summary(rows: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Per status: points, within tolerance, mean and worst |error| (fitted and predicted kept apart)."""
    out = []
    for status in STATUSES:
        sub = [r for r in rows if r["status"] == status]
        if not sub:
            continue
        # Mean and worst over point figures: a range's or a bound's midpoint is no target.
        errs = [abs(r["error"]) for r in sub if r["error"] is not None and r.get("check", "point") == "point"]
        judged = [r for r in sub if r["verdict"] in ("ok", "known miss", "outside")]
        out.append({"status": status, "points": len(sub),
                    "ok": sum(r["verdict"] == "ok" for r in judged) if judged else None,
                    "known_misses": sum(r["verdict"] == "known miss" for r in judged),
                    "judged": len(judged), "errors": sum(r["verdict"] == "error" for r in sub),
                    "mean_abs_error": sum(errs) / len(errs) if errs else None,
                    "worst_abs_error": max(errs) if errs else None})
    return out


def report_markdown(rows: list[Mapping[str, Any]], *, title: str = "Validation report",
                    preamble: str = "", figures: Iterable[str] = ()) -> str:
    """The report: a summary, then one table per group (quantity, model, reference, error, status, verdict)."""
    lines = [f"# {title}", ""]
    if preamble:
        lines += [preamble, ""]
    lines += ["## Summary", "",
              "| status | points | within tolerance | mean abs error | worst abs error |",
              "|---|---|---|---|---|"]
    for s in summary(rows):
        ok = f"{s['ok']} / {s['judged']}" if s["judged"] else "n/a (ratios only)"
        if s["known_misses"]:
            ok += f" ({s['known_misses']} known misses: within a widened tolerance of their own only)"
        mean = f"{100 * s['mean_abs_error']:.1f} %" if s["mean_abs_error"] is not None else "--"
        worst = f"{100 * s['worst_abs_error']:.1f} %" if s["worst_abs_error"] is not None else "--"
        lines.append(f"| {s['status']} | {s['points']} | {ok} | {mean} | {worst} |")
    lines += ["", "Error = (model - reference) / reference; a range is compared by its midpoint and passes "
              "when the model lands inside it, a bound when the model is below it (neither counts in the mean "
              "and worst errors of the summary). Magnitudes are another "
              "simulator's outputs on a topology we do not have: their ratio is reported, never judged.", ""]
    for f in figures:
        lines += [f"![{f}]({f})", ""]
    groups: list[str] = []
    for r in rows:
        if r["group"] not in groups:
            groups.append(r["group"])
    for g in groups:
        sub = [r for r in rows if r["group"] == g]
        lines += [f"## {g}", ""]
        if g == "K200 end to end (predictions)":
            lines += ["Every end-to-end case, as the model predicts it; only C4 was measured here (its rows "
                      "above), the other measurements are held back to judge these numbers.", ""]
        lines += [
                  "| quantity | model | reference | unit | error | status | tolerance | verdict | fitted on | "
                  "cross-validated error | note |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in sub:
            err = "--" if r["error"] is None else (f"x{1 + r['error']:.3f}" if r["status"] == "magnitude"
                                                   else f"{100 * r['error']:+.2f} %")
            tol = {"range": "inside range", "bound": "below bound"}.get(r.get("check", "point"), "--")
            if r["tolerance"] is not None:
                tol = f"{100 * r['tolerance']:g} %"
            note = str(r.get("note", "")).replace("|", "/")
            cv = r.get("cv_error")
            cv_text = "--" if cv is None else f"{100 * cv:+.2f} %"
            on = str(r.get("fitted_on") or "--").replace("|", "/")
            lines.append(f"| {r['quantity']} | {_num(r['model'])} | {r['reference_text']} | {r['unit']} | {err} | "
                         f"{r['status']} | {tol} | {r['verdict']} | {on} | {cv_text} | {note} |")
        lines.append("")
    return "\n".join(lines)

