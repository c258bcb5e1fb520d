"""The virtualised-GPU forwarding path: launches, decomposition, P1-P12, what-ifs.

The C++ model (src/platforms/vgpu/) runs the path on ``configs/vgpu.yaml``;
this module drives it and analyses the results::

    from kernbench import vgpu
    run = vgpu.launches(2)                     # first two launches of a fresh context
    rows = vgpu.decomposition(run["launches"][0])   # component table beside the measured figures
    spread = vgpu.elapsed_spread(100)          # elapsed_ms of the first launch over 100 seeds
    s = vgpu.workload(seeds=range(1, 21))      # P1-P12, guest vs bare metal, p50/p95 and ratios

Every figure comes out of the simulation; ``MEASURED`` holds the reference's
figures (shared/reference/vgpu-forwarding.md, read from configs/vgpu.measured.yaml)
only to print beside them.
"""

from __future__ import annotations

import itertools
from typing import Any, Iterable, Mapping

import numpy as np

from kernbench import _core, units
from kernbench.system import System
from kernbench.trace import op_trace

CONFIG = "vgpu.yaml"
MS = 1e9  # ps per ms
US = 1e6  # ps per us

DATA = "vgpu.measured.yaml"

#: The reference's two bounds ("copy-in < 1 ms", "copy-out < 0.1 ms"): not rows of the data file (a row is a
#: point figure), so stated here, their one copy.
BOUNDS = {"copy_in_ms": "< 1", "copy_out_ms": "< 0.1"}


def _measured() -> dict[str, Any]:
    """The measured first launch: the point figures from their one copy, configs/vgpu.measured.yaml (its rows
    by id), and the bounds above, keyed as the decomposition prints them."""
    import yaml

    from kernbench.system import config_path

    rows = {r["id"]: r["value"] for r in yaml.safe_load(config_path(DATA).read_text())["rows"]}
    return {"elapsed_ms": float(rows["elapsed"]), "forwards": int(rows["forwards"]),
            "accepted": int(rows["accepted"]), "refused": int(rows["refused"]),
            "forwarding_ms": float(rows["forwarding"]), "round_trip_ms": float(rows["round-trip"]),
            "copy_in_ms": BOUNDS["copy_in_ms"], "doorbell_to_completion_ms": float(rows["doorbell"]),
            "copy_out_ms": BOUNDS["copy_out_ms"], "spread_ms": (float(rows["spread-min"]), float(rows["spread-max"]))}


#: The measured first launch (reference), printed beside the model's figures.
MEASURED: dict[str, Any] = _measured()

#: The two readings of the 22.5 ms round trip (waits per round trip, firmware mean).
SPLITS: dict[str, dict[str, str]] = {
    "A: 1 wait + 17.5 ms fw": {"vgpu.poll.waits_per_round_trip": "1", "vgpu.rpc.firmware.mean": "17.5 ms"},
    "B: 4 waits + 2.5 ms fw": {"vgpu.poll.waits_per_round_trip": "4", "vgpu.rpc.firmware.mean": "2.5 ms"},
}


def load(set: Mapping[str, Any] | None = None, seed: int = 1, config: Any = None) -> System:
    """The vGPU system (default ``configs/vgpu.yaml``) with overrides."""
    return System.load(config if config is not None else CONFIG, set=set, seed=seed)


def launches(
    n: int = 2,
    *,
    guests: int = 0,
    hang: Iterable[int] = (),
    bare: bool = False,
    set: Mapping[str, Any] | None = None,
    seed: int = 1,
    config: Any = None,
) -> dict[str, Any]:
    """Run ``n`` synchronised launches per guest (all guests start at t=0).

    Returns the C++ result as a ``Run`` (a dict, with ``to_trace``): ``launches`` (dicts, times in ps),
    GSP queue statistics and ``ops`` (the op log as columns with kind/resource names, an ``OpLog``).
    """
    system = load(set, seed, config)
    return Run(_core.vgpu_launches(system._core, n, guests, list(hang), bare))


def ops_table(ops: Mapping[str, Any]):
    """The op log of a run as a pandas DataFrame with kind and resource names, times in ms."""
    import pandas as pd

    kinds = np.asarray(ops["kind_names"], dtype=object)
    res = np.asarray(ops["resource_names"], dtype=object)
    df = pd.DataFrame({k: np.asarray(ops[k]) for k in ("op", "agent", "resource", "kind", "tag", "issue", "start",
                                                         "end", "bytes", "work")})
    df["kind_name"] = kinds[df["kind"].to_numpy()]
    df["resource_name"] = res[df["resource"].to_numpy()]
    for c in ("issue", "start", "end"):
        df[c + "_ms"] = df[c] / MS
    df["wait_ms"] = (df["start"] - df["issue"]) / MS
    df["duration_ms"] = (df["end"] - df["start"]) / MS
    return df


def decomposition(launch: Mapping[str, Any], measured: Mapping[str, Any] | None = MEASURED) -> list[dict[str, Any]]:
    """A launch's components (model, ms) beside the measured figures and the model/measured ratio."""
    rts = np.asarray(launch["round_trips_ps"], dtype=float) / MS
    rows = [
        ("PDE forwards", launch["forwards"], "forwards"),
        ("  accepted", launch["accepted"], "accepted"),
        ("  refused", launch["refused"], "refused"),
        ("forwarding (ms)", launch["forwarding_ps"] / MS, "forwarding_ms"),
        ("per-forward round trip, mean (ms)", float(rts.mean()) if rts.size else 0.0, "round_trip_ms"),
        ("  min (ms)", float(rts.min()) if rts.size else 0.0, None),
        ("  max (ms)", float(rts.max()) if rts.size else 0.0, None),
        ("  of which firmware (ms)", launch["firmware_ps"] / MS, None),
        ("  of which poll waits (ms)", launch["poll_wait_ps"] / MS, None),
        ("  of which GSP queue (ms)", launch["gsp_wait_ps"] / MS, None),
        ("QMD + shadow copies + bounce copy-in (ms)", launch["copy_in_ps"] / MS, "copy_in_ms"),
        ("doorbell -> completion (ms)", launch["doorbell_to_completion_ps"] / MS, "doorbell_to_completion_ms"),
        ("  of which doorbell write + GR queue (ms)",
         (launch["doorbell_to_completion_ps"] - launch["kernel_ps"] - launch["completion_wait_ps"]) / MS, None),
        ("  of which GR job: setup + kernel (ms)", launch["kernel_ps"] / MS, None),
        ("  of which completion seen (poll wait, ms)", launch["completion_wait_ps"] / MS, None),
        ("bounce copy-out (ms)", launch["copy_out_ps"] / MS, "copy_out_ms"),
        ("host service, exact (ms)", launch["host_ps"] / MS, None),
        ("elapsed_ms (jiffies)", launch["elapsed_ms"], "elapsed_ms"),
    ]
    out = []
    for name, value, key in rows:
        ref = measured.get(key) if (measured and key) else None
        ratio = value / ref if isinstance(ref, (int, float)) and ref else None
        out.append({"component": name, "model": value, "measured": ref, "model/measured": ratio})
    return out


def elapsed_spread(runs: int = 100, *, set: Mapping[str, Any] | None = None, seed0: int = 1,
                   config: Any = None) -> list[int]:
    """elapsed_ms of the first launch of a fresh context for seeds seed0 .. seed0 + runs - 1."""
    return [int(launches(1, set=set, seed=seed0 + i, config=config)["launches"][0]["elapsed_ms"])
            for i in range(runs)]


# ---- the scripted workload: P1-P12 ----------------------------------------------

def _pct(values: Iterable[float], q: float) -> float:
    v = np.asarray(list(values), dtype=float)
    return float(np.percentile(v, q)) if v.size else float("nan")


def _spread(values: list[float]) -> float:
    """p95 / p50; NaN (no dispersion to state) when the median is 0 -- a host figure counted in jiffies longer
    than the run (vgpu.jiffy = 1000 s) reads 0 -- or there are no values."""
    p50 = _pct(values, 50)
    return _pct(values, 95) / p50 if values and p50 else float("nan")


def knee(sizes: Iterable[int], bandwidths: Iterable[float]) -> int | None:
    """Knee of a copy curve: the smallest size reaching half the largest size's bandwidth."""
    s = list(sizes)
    b = list(bandwidths)
    if not s:
        return None
    half = 0.5 * b[-1]
    return next((x for x, y in zip(s, b) if y >= half), s[-1])


def metrics(w: Mapping[str, Any]) -> dict[str, float]:
    """P1-P12 of one workload run (the raw dict of ``_core.vgpu_workload``); times in ms/us, rates in GB/s."""
    mallocs = np.asarray(w["mallocs_ps"], dtype=float)
    warm = np.asarray(w["warm_ps"], dtype=float)
    first = w["first"]
    m: dict[str, float] = {
        "P1_init_ms": w["init_ps"] / MS,
        "P2_malloc_first_ms": mallocs[0] / MS,
        "P2_malloc_steady_p50_ms": _pct(mallocs[1:] / MS, 50),
        "P2_malloc_steady_p95_ms": _pct(mallocs[1:] / MS, 95),
        "P3_first_launch_ms": first["guest_latency_ps"] / MS,
        # The host's figure: elapsed_ms in jiffies (bare metal has no backend: its launch -> completion).
        "P3h_host_ms": float(first["elapsed_ms"]) if not w["bare"] else first["host_ps"] / MS,
        "P4_warm_p50_ms": _pct(warm / MS, 50),
        "P4_warm_p95_ms": _pct(warm / MS, 95),
        "P5_ce_push_us": w["h2d"][0]["push_latency_ps"] / US,
        "P6_interrupt_us": w["msix_ps"] / US,
        "P9_kernel_us": w["kernel_ps"] / US,
        "P10_launches_per_s": w["burst_launches"] / (w["burst_ps"] / 1e12),
        "P12_kernel_cycles": float(w["kernel_cycles"]),
    }
    for key, rows in (("P7_h2d", w["h2d"]), ("P8_d2h", w["d2h"])):
        sizes = [r["bytes"] for r in rows]
        bw = [r["bandwidth_Bps"] / 1e9 for r in rows]
        for s, b in zip(sizes, bw):
            m[f"{key}_{_size_name(s)}_GBps"] = b
        big = [b for s, b in zip(sizes, bw) if s >= 4 << 20]
        m[f"{key}_ge4MiB_GBps"] = float(np.mean(big)) if big else float("nan")
        m[f"{key}_knee_KiB"] = (knee(sizes, bw) or 0) / 1024
    return m


def _size_name(b: int) -> str:
    """Sizes in metric names: '4KiB', '16MiB' (no space, MiB at most)."""
    return units.size(b, sep="", largest="MiB")


def workload(*, set: Mapping[str, Any] | None = None, seeds: Iterable[int] | None = None,
             config: Any = None) -> dict[str, Any]:
    """The scripted workload for guest and bare metal over seeded repetitions.

    ``seeds``: default 1 .. vgpu.workload.repetitions of the config.

    Returns ``runs`` (per seed: guest and bare metrics) and ``summary`` (per
    metric: guest and bare p50/p95 and the guest/bare ratio of the p50s),
    plus P11 (run-to-run dispersion p95/median of P3h and P4 p50).
    """
    runs = []
    if seeds is None:
        first = _core.vgpu_workload(load(set, 1, config)._core, False)
        seeds = range(1, int(first["repetitions"]) + 1)
    for seed in seeds:
        g = metrics(_core.vgpu_workload(load(set, seed, config)._core, False))
        b = metrics(_core.vgpu_workload(load(set, seed, config)._core, True))
        runs.append({"seed": seed, "guest": g, "bare": b})
    keys = list(runs[0]["guest"]) if runs else []
    summary = []
    for k in keys:
        gv = [r["guest"][k] for r in runs]
        bv = [r["bare"][k] for r in runs]
        g50, b50 = _pct(gv, 50), _pct(bv, 50)
        summary.append({
            "metric": k,
            "guest_p50": g50, "guest_p95": _pct(gv, 95),
            "bare_p50": b50, "bare_p95": _pct(bv, 95),
            "ratio": g50 / b50 if b50 else float("nan"),
        })
    for k in ("P3h_host_ms", "P4_warm_p50_ms"):
        gv = [r["guest"][k] for r in runs]
        bv = [r["bare"][k] for r in runs]
        gd, bd = _spread(gv), _spread(bv)
        summary.append({"metric": f"P11_dispersion_{k}", "guest_p50": gd, "guest_p95": gd,
                        "bare_p50": bd, "bare_p95": bd, "ratio": gd / bd if bd else float("nan")})
    return {"runs": runs, "summary": summary}


# ---- what-ifs ------------------------------------------------------------------

#: Poll settings of the what-if study: label -> overrides.
POLL_WHATIFS: dict[str, dict[str, str]] = {
    "5 ms": {"vgpu.poll.quantum": "5 ms"},
    "2 ms": {"vgpu.poll.quantum": "2 ms"},
    "1 ms": {"vgpu.poll.quantum": "1 ms"},
    "0.1 ms": {"vgpu.poll.quantum": "0.1 ms"},
    "interrupt": {"vgpu.poll.mode": "interrupt"},
}


def whatif_combinations(splits: Mapping[str, Mapping[str, str]] = SPLITS) -> list[dict[str, Any]]:
    """Every combination of split x poll setting x batching x caching, as labelled override sets."""
    out = []
    for (sname, sset), (pname, pset), batch, cache in itertools.product(
            splits.items(), POLL_WHATIFS.items(), (False, True), (False, True)):
        sets = {**sset, **pset, "vgpu.pde.batching": str(batch).lower(), "vgpu.pde.cache_accepted": str(cache).lower()}
        out.append({"split": sname, "poll": pname, "batching": batch, "caching": cache, "set": sets})
    return out


# ---- traces ----------------------------------------------------------------------

def critical_path(run: Mapping[str, Any], label: str = "vGPU"):
    """The chain of ops and waits that set a run's makespan (the dict of :func:`launches` or
    :func:`workload`'s raw run): exact, walked by the C++ core over the causes the model recorded (each
    op's last dependency -- the guest's previous op, the GR job the completion poll saw, the last copy
    chunk -- and the op that handed it the GSP, GR, CE, bounce window or backend worker it waited for)."""
    from kernbench.critical_path import from_raw

    if "critical_path" not in run:
        raise _core.UsageError("vgpu.critical_path: pass the run (the dict launches() returns), not its op log")
    return from_raw(run["critical_path"], program=label)


def trace_of(run: Mapping[str, Any], label: str = "vGPU") -> dict[str, Any]:
    """The Trace Event JSON of a vGPU run (the dict of :func:`launches`; or its ``"ops"`` alone, then
    without the critical path), through kernbench.trace's op-log writer: one process per guest, one track
    per resource, and the run's exact critical path."""
    ops = run["ops"] if "ops" in run else run
    kinds = list(ops["kind_names"])
    res_names = list(ops["resource_names"])
    n = len(ops["op"])
    res = [int(r) for r in ops["resource"]]
    start = [int(x) for x in ops["start"]]

    def event(i):
        return kinds[int(ops["kind"][i])], res_names[res[i]], {
            "op": int(ops["op"][i]), "kind": kinds[int(ops["kind"][i])], "tag": int(ops["tag"][i]),
            "issue_ps": int(ops["issue"][i]), "queued_us": (start[i] - int(ops["issue"][i])) / 1e6,
            "bytes": int(ops["bytes"][i]), "work": float(ops["work"][i])}

    guests = [int(g) for g in ops["agent"]]
    end = [int(x) for x in ops["end"]]
    return op_trace(n, start=start, end=end, process=guests, track=[(r, res_names[r]) for r in res], units={},
                    event=event, process_names={g: f"guest {g}" for g in set(guests)},
                    critical=run.get("critical_path") if "ops" in run else None, match="op",
                    other={"panel": label, "makespan_ps": (max(end) - min(int(x) for x in ops["issue"])) if n else 0,
                           "source": "vgpu"})


class OpLog(dict):
    """A run's op log (``run["ops"]``: columns with kind/resource names), a dict that traces itself."""

    def to_trace(self, label: str | None = None) -> dict[str, Any]:
        """The op log as Trace Event JSON (:func:`trace_of`; no critical path)."""
        return trace_of(self, label or "vGPU")


class Run(dict):
    """What :func:`launches` returns: the C++ result dict (its keys as they are), its ``"ops"`` an
    ``OpLog``, and ``to_trace``."""

    def __init__(self, *args: Any, **kw: Any):
        super().__init__(*args, **kw)
        if isinstance(self.get("ops"), dict) and not isinstance(self["ops"], OpLog):
            self["ops"] = OpLog(self["ops"])

    def to_trace(self, label: str | None = None) -> dict[str, Any]:
        """The run as Trace Event JSON (:func:`trace_of`, with the run's critical path)."""
        return trace_of(self, label or "vGPU")


def chrome_trace(run: Mapping[str, Any], path: Any, label: str = "vGPU") -> dict[str, int]:
    """Write a vGPU run (the dict of :func:`launches`, or its ``"ops"``) as a Chrome / Perfetto trace
    (:func:`trace_of`: one process per guest, one track per resource, extra tracks where ops overlap, and
    the run's exact critical path); returns {"events", "tracks"} (events: op-log rows)."""
    from pathlib import Path

    from kernbench import atomic_output as kio

    trace = trace_of(run, label)
    kio.write_json(Path(path), trace)
    return {"events": trace["otherData"]["events"], "tracks": trace["otherData"]["tracks"]}
