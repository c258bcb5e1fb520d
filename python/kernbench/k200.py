"""The Kunlun K200 host model from Python.

    import kernbench, kernbench.k200 as k200
    sys = kernbench.System.load("k200.yaml")
    r = k200.copy(sys, "pinned", "h2d", 256 << 20)
    r.gib_per_s, r.path, r.bound, r.ops          # bandwidth, path taken, busiest resource, per-op breakdown
    k200.gemm(sys, 2048, 2048, 2048, "fp16", ncluster=4).gflops
    k200.run_case(k200.load_case("c4_mlp.yaml"))  # an end-to-end case with its what-ifs

The C++ model (src/platforms/k200/) does the work; each call attaches a
fresh model to the System and runs from its current time. The measured
figures (shared/reference/k200-measured.md) are in configs/k200.measured.yaml
only; kernbench.k200_reference reads them with what configs/k200.yaml was
fitted on, so benches and tests report fitted and predicted points apart.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from kernbench import _core
from kernbench._core import ConfigError, UsageError
from kernbench.k200_lowering import K200Target
from kernbench.k200_lowering import conv_step as _conv
from kernbench.k200_lowering import copy_step as _copy
from kernbench.k200_lowering import elementwise_step as _add
from kernbench.k200_lowering import fc_step as _fc
from kernbench.trace import not_traceable, op_trace
from kernbench.units import GiB, MiB
from kernbench.units import KiB as KIB

COPY_KINDS = ("pinned", "pageable", "stock", "peer", "peer_cross_card", "cross_card_staged", "d2d")

# The copy sizes of the reference's copy tables (1 MiB, 64 MiB, 256 MiB, 1 GiB). The measured figures
# themselves live in configs/k200.measured.yaml only; kernbench.k200_reference reads them, with what
# configs/k200.yaml was fitted on (its declared provenance).
SIZES = (MiB, 64 * MiB, 256 * MiB, GiB)


@dataclass
class Result:
    """What one K200 run measured (see the C++ RunReport)."""

    elapsed_s: float
    bytes: int
    gib_per_s: float
    gflops: float
    path: str
    bound: str
    ops: list[dict[str, Any]]
    utilization: dict[str, float]
    raw: dict[str, Any] = field(repr=False, default_factory=dict)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Result":
        return cls(
            elapsed_s=d["elapsed_ps"] * 1e-12,
            bytes=int(d["bytes"]),
            gib_per_s=float(d["gib_per_s"]),
            gflops=float(d["gflops"]),
            path=d["path"],
            bound=d["bound"],
            ops=[dict(o) for o in d["ops"]],
            utilization=dict(d["utilization"]),
            raw=dict(d),
        )

    def to_trace(self, label: str | None = None) -> dict[str, Any]:
        """The run's ops as Trace Event JSON (kernbench.trace's op-log writer): one process (``label``,
        default "K200"), one track per resource (lanes for overlaps), times from the run's start, and the
        run's exact critical path as a process of its own."""
        return self._trace(label or "K200")

    def _trace(self, label: str) -> dict[str, Any]:
        raw = self.raw
        if "resource_names" not in raw:
            raise not_traceable(self)
        log = raw.get("log")
        if log is None:
            raise UsageError("this run recorded too many ops to trace (more than 200000); trace a smaller run")
        names = raw["resource_names"]
        n = len(log["kind"])
        res = [int(r) for r in log["resource"]]
        t0 = int(raw["start_ps"])

        def event(i):
            return log["kind"][i], names[res[i]], {
                "op": int(log["op"][i]), "kind": log["kind"][i], "bytes": int(log["bytes"][i]),
                "tag": int(log["tag"][i]), "issue_ps": int(log["issue_ps"][i]),
                "issue_us": (int(log["issue_ps"][i]) - t0) / 1e6}

        return op_trace(n, start=[int(x) for x in log["start_ps"]], end=[int(x) for x in log["end_ps"]],
                        process=[0] * n, track=[(r, names[r]) for r in res], units={}, event=event,
                        process_names={0: label}, t0=t0, critical=raw.get("critical_path"), match="op",
                        other={"panel": label, "makespan_ps": int(raw["elapsed_ps"]), "source": "k200"})

    def chrome_trace(self, path: str | Path, label: str = "K200") -> dict[str, Any]:
        """Write the run's ops as a Chrome/Perfetto trace (``to_trace``) atomically; returns the trace."""
        from kernbench import atomic_output as kio

        trace = self._trace(label)
        kio.write_json(Path(path), trace)
        return trace

    def critical_path(self, label: str = "K200"):
        """The chain of ops and waits that set this run's elapsed time: exact, walked by the C++ core over
        the causes the model recorded (each op's last dependency and the op that handed it the eDMA
        channel, copy thread, queue or clusters it waited for; docs/critical-path.md)."""
        from kernbench.critical_path import from_raw

        return from_raw(self.raw.get("critical_path"), program=label)

    def breakdown(self) -> dict[str, float]:
        """Seconds per op kind (summed over ops, so overlapping ops add up beyond elapsed)."""
        return {o["kind"]: o["time_ps"] * 1e-12 for o in self.ops}


def _core_system(system):
    return getattr(system, "_core", system)


def load_system(path: str | Path = "k200.yaml", *, set: Mapping[str, Any] | None = None, seed: int = 1):
    """A K200 host System (default: the packaged configs/k200.yaml) with overrides."""
    from kernbench.system import System

    return System.load(path, set=set, seed=seed)


def info(system) -> dict[str, Any]:
    """Cards, dies per card, derived PCIe line/payload rates, peaks."""
    return dict(_core.k200_info(_core_system(system)))


def _check_size(n: Any, what: str) -> int:
    if isinstance(n, bool) or not isinstance(n, (int,)) and not (isinstance(n, float) and n.is_integer()):
        raise UsageError(f"{what}: expected a whole number of bytes, got {n!r}")
    n = int(n)
    if n <= 0:
        raise UsageError(f"{what}: must be > 0, got {n}")
    return n


def copy(system, kind: str, direction: str = "h2d", bytes: int = 64 * MiB, *, die=(0, 0), peer=None) -> Result:
    """One copy: kind in COPY_KINDS, direction h2d|d2h (host copies), die = (card, die)."""
    b = _check_size(bytes, "k200.copy bytes")
    return Result.from_dict(_core.k200_copy(_core_system(system), kind, direction, b, tuple(die),
                                            None if peer is None else tuple(peer)))


def copies(system, specs: Iterable[Mapping[str, Any]]) -> Result:
    """Several copies started together: dicts with kind, direction, bytes, die, peer."""
    out = []
    for s in specs:
        d = dict(s)
        d["bytes"] = _check_size(d.get("bytes"), "k200.copies bytes")
        for k in ("die", "peer"):
            if k in d and d[k] is not None:
                d[k] = tuple(d[k])
        out.append(d)
    return Result.from_dict(_core.k200_copies(_core_system(system), out))


def launch(system, threads: int = 1, kernels: int = 10, loops: int = 100, elements: int = 5120,
           ncluster: int = 0, die=(0, 0)) -> dict[str, Any]:
    """The vendor launch test (each thread on its own stream, waiting for its stream); returns launch_us, wait_us,
    per_kernel_us, single_us and the report. The reference's test: the launch rows of configs/k200.measured.yaml."""
    d = dict(_core.k200_launch_test(_core_system(system), threads, kernels, loops, elements, ncluster, tuple(die)))
    d["result"] = Result.from_dict(d)
    return d


def dispatch(system, threads: int = 1, commands: int = 100, elements: int = 5120, ncluster: int = 4,
             die=(0, 0)) -> dict[str, Any]:
    """The synchronous round trip: each thread (a stream each) launches one kernel and waits for it, `commands`
    times; returns round_trip_us (per command and thread), per_command_us (elapsed / all commands) and the report."""
    d = dict(_core.k200_dispatch_test(_core_system(system), threads, commands, elements, ncluster, tuple(die)))
    d["result"] = Result.from_dict(d)
    return d


def gemm(system, m: int, n: int, k: int, precision: str = "fp32", *, ncluster: int = 0, die=(0, 0)) -> Result:
    """One xdnn-fc-like GEMM on a die (launch, dispatch, run, wait); .raw['plan'] has the tiling."""
    return Result.from_dict(_core.k200_gemm(_core_system(system), m, n, k, precision, ncluster, tuple(die)))


def run_streams(system, streams: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Run workload streams (see src/platforms/k200/workload.hpp) to completion; returns the raw dict + Result."""
    d = dict(_core.k200_run(_core_system(system), [dict(s) for s in streams]))
    d["result"] = Result.from_dict(d)
    return d


# ---- the five cases ---------------------------------------------------------------

CASE_DIR = "k200_cases"
ELEM = {"fp32": 4, "fp16": 2}


def case_files() -> list[Path]:
    """The case definitions shipped in configs/k200_cases/."""
    from kernbench.system import config_dirs

    for d in config_dirs():
        if (d / CASE_DIR).is_dir():
            return sorted((d / CASE_DIR).glob("*.yaml"))
    raise ConfigError(f"{CASE_DIR}/: no case folder in the config directories")


def load_case(path: str | Path) -> dict[str, Any]:
    """Read a case file (a name in configs/k200_cases/ or a path) and check its keys."""
    import yaml

    p = Path(path)
    if not p.exists():
        for f in case_files():
            if f.name == p.name or f.stem == p.stem:
                p = f
                break
        else:
            raise ConfigError(f"{path}: no such K200 case (known: {', '.join(f.name for f in case_files())})")
    data = yaml.safe_load(p.read_text())
    if not isinstance(data, dict):
        raise ConfigError(f"{p}: a case file is a map (name, title, workload, params, what_if)")
    allowed = {"name", "title", "workload", "params", "what_if", "set"}
    for key in data:
        if key not in allowed:
            raise ConfigError(f"{p}: {key}: unknown key (known: {', '.join(sorted(allowed))})")
    for key in ("name", "workload", "params"):
        if key not in data:
            raise ConfigError(f"{p}: {key}: required key is missing")
    if data["workload"] not in WORKLOADS:
        raise ConfigError(f"{p}: workload: unknown workload {data['workload']!r} (known: {', '.join(WORKLOADS)})")
    data["source_file"] = str(p)
    return data


def _staging_kind(staging: str) -> str:
    if staging not in ("pinned", "pageable", "stock"):
        raise ConfigError(f"staging: expected pinned, pageable or stock, got {staging!r}")
    return staging


def resnet50_layers(batch: int) -> list[tuple[str, int, int, int, int]]:
    """ResNet-50 v1.5 as (name, M, N, K, residual elements) GEMMs at 224x224 input."""
    layers = [("conv1", batch * 112 * 112, 64, 3 * 7 * 7, 0)]
    h = 56  # after the 3x3/2 max pool
    cin = 64
    for stage, (mid, out, blocks, stride) in enumerate([(64, 256, 3, 1), (128, 512, 4, 2), (256, 1024, 6, 2),
                                                         (512, 2048, 3, 2)]):
        for b in range(blocks):
            s = stride if b == 0 else 1
            ho = h // s
            name = f"s{stage + 1}b{b + 1}"
            layers.append((f"{name}.conv1", batch * h * h, mid, cin, 0))           # 1x1 (v1.5: stride in the 3x3)
            layers.append((f"{name}.conv2", batch * ho * ho, mid, mid * 9, 0))      # 3x3, stride s
            res = batch * ho * ho * out
            if b == 0:
                layers.append((f"{name}.down", batch * ho * ho, out, cin, 0))      # 1x1 projection
            layers.append((f"{name}.conv3", batch * ho * ho, out, mid, res))       # 1x1, then the residual add
            cin, h = out, ho
    layers.append(("fc", batch, 1000, 2048, 0))
    return layers


def resnet50_lowering(batch: int) -> dict[str, int]:
    """Layer name -> input elements its im2col lowering reads (the layers of resnet50_layers that need one:
    every conv but the 1x1 stride-1 ones, whose NHWC input already is the GEMM's A)."""
    out = {"conv1": batch * 224 * 224 * 3}  # 7x7 stride 2
    h, cin = 56, 64
    for stage, (mid, outc, blocks, stride) in enumerate([(64, 256, 3, 1), (128, 512, 4, 2), (256, 1024, 6, 2),
                                                         (512, 2048, 3, 2)]):
        for b in range(blocks):
            s = stride if b == 0 else 1
            name = f"s{stage + 1}b{b + 1}"
            out[f"{name}.conv2"] = batch * h * h * mid   # 3x3 (stride s) over conv1's output
            if b == 0 and s > 1:
                out[f"{name}.down"] = batch * h * h * cin  # 1x1 stride 2: a gather of every other pixel
            cin, h = outc, h // s
    return out


def lower_ops(ops, *, precision: str = "fp32", ncluster: int = 8, die=(0, 0), framework_op_us: float = 0.0,
              fold: bool = True) -> list[dict[str, Any]]:
    """A workload's op list (kernbench.workloads Op records, in execution order) as K200 stream steps: the K200
    target's lowering (kernbench.k200_lowering.K200Target, which has the table), as the hand-written cases
    launch them. Any kind without one: ConfigError naming the op."""
    return K200Target(precision=precision, ncluster=ncluster, die=die, framework_op_us=framework_op_us,
                      fold=fold).lower(ops)


def run_ops(system, ops, *, precision: str = "fp32", ncluster: int = 8, die=(0, 0), framework_op_us: float = 0.0,
            staging: str = "pageable", input_bytes: int = 0, output_bytes: int = 0, iterations: int = 1,
            fold: bool = True, name: str = "ops") -> dict[str, Any]:
    """Run a workload's op list on the K200 (lower_ops, then one stream: the input copy, the ops launched one
    after another, a wait, the output copy back), ``iterations`` times. Returns run_streams' dict plus
    ``steps`` (the lowered steps) and ``latency_ms`` (mean iteration)."""
    die = tuple(die)
    body = lower_ops(ops, precision=precision, ncluster=ncluster, die=die, framework_op_us=framework_op_us,
                     fold=fold)
    steps = []
    if input_bytes:
        steps.append(_copy(_staging_kind(staging), "h2d", int(input_bytes), die, "input h2d"))
    steps += [{k: v for k, v in st.items() if k != "name"} for st in body]
    steps.append({"op": "wait", "die": die, "label": "wait"})
    if output_bytes:
        steps.append(_copy(_staging_kind(staging), "d2h", int(output_bytes), die, "output d2h"))
    out = run_streams(system, [{"name": name, "iterations": int(iterations), "steps": steps}])
    ends = out["iteration_ends_ps"][0]
    start = out["result"].raw["start_ps"]
    out["latency_ms"] = (ends[-1] - start) / len(ends) * 1e-9
    out["steps"] = body
    return out


def _streams_resnet50(p, batch):
    die = (0, 0)
    prec, nc = p["precision"], p["ncluster"]
    fw = float(p.get("framework_op_us", 0.0))  # the framework's own host work per op (C1 runs through one)
    lowering = resnet50_lowering(batch)
    steps = [_copy(_staging_kind(p["staging"]), "h2d", batch * 3 * 224 * 224 * ELEM[prec], die, "input h2d")]
    for name, m, n, k, res in resnet50_layers(batch):
        if name == "fc":
            steps.append(_fc(m, n, k, prec, nc, die, "conv/fc"))
            steps[-1]["kernel"]["framework_overhead_ps"] = int(round(fw * 1e6))
        else:
            steps.append(_conv(m, n, k, lowering.get(name, 0), prec, nc, die, "conv/fc", fw))
        if res:
            steps.append(_add(res, nc, die, "residual add", prec, fw))
    steps.append({"op": "wait", "die": die, "label": "wait"})
    steps.append(_copy(_staging_kind(p["staging"]), "d2h", batch * 1000 * ELEM[prec], die, "logits d2h"))
    return [{"name": "resnet50", "iterations": p["iterations"], "steps": steps}], batch


def _streams_denoiser(p, batch):
    die = (0, 0)
    prec, nc, c = p["precision"], p["ncluster"], p["channels"]
    hw = p["height"] * p["width"] * batch
    act = hw * c * ELEM[prec]
    img = hw * 3 * ELEM[prec]
    wait = {"op": "wait", "die": die, "label": "wait"}
    # Every conv is 3x3 (stride 1): its im2col reads the hw x Cin input.
    steps = [_copy(_staging_kind(p["staging"]), "h2d", img, die, "h2d"),
             _conv(hw, c, 3 * 9, hw * 3, prec, nc, die, "conv"), wait]
    steps += [_copy("d2d", "h2d", act, die, "d2d"), wait]  # the global skip
    for _ in range(p["blocks"]):
        steps += [_copy("d2d", "h2d", act, die, "d2d"), wait,
                  _conv(hw, c, c * 9, hw * c, prec, nc, die, "conv"), wait,
                  _conv(hw, c, c * 9, hw * c, prec, nc, die, "conv"), wait,
                  _add(hw * c, nc, die, "add", prec), wait]
    steps += [_conv(hw, c, c * 9, hw * c, prec, nc, die, "conv"), wait, _add(hw * c, nc, die, "add", prec), wait,
              _conv(hw, 3, c * 9, hw * c, prec, nc, die, "conv"), wait,
              _copy(_staging_kind(p["staging"]), "d2h", img, die, "d2h")]
    return [{"name": "denoiser", "iterations": p["iterations"], "steps": steps}], batch


def _streams_pipeline(p, batch):
    prec, nc, f = p["precision"], p["ncluster"], p["feature"]
    a, b = (0, 0), ((0, 0) if p.get("solo") else (0, 1))
    x = batch * f * ELEM[prec]
    stage = lambda die, label: [_fc(batch, f, f, prec, nc, die, label) for _ in range(p["layers_per_stage"])]
    steps = [_copy(_staging_kind(p["staging"]), "h2d", x, a, "h2d")] + stage(a, "layers A")
    steps += [_copy("d2d", "h2d", x, a, "d2d")] if p.get("solo") else [_copy("peer", "h2d", x, a, "peer copy", peer=b)]
    steps += stage(b, "layers B") + [_copy(_staging_kind(p["staging"]), "d2h", x, b, "d2h")]
    return [{"name": "pipeline", "iterations": p["iterations"], "steps": steps}], batch


def _mlp_stream(p, batch, die, name):
    prec, nc, f = p["precision"], p["ncluster"], p["feature"]
    x = batch * f * ELEM[prec]
    steps = [_copy(_staging_kind(p["staging"]), "h2d", x, die, "h2d")]
    steps += [_fc(batch, f, f, prec, nc, die, "fc") for _ in range(p["layers"])]
    steps += [_copy(_staging_kind(p["staging"]), "d2h", x, die, "d2h"), {"op": "wait", "die": die, "label": "wait"}]
    return {"name": name, "iterations": p["iterations"], "steps": steps}


def _streams_mlp(p, batch):
    return [_mlp_stream(p, batch, (0, 0), "mlp")], batch


def _streams_multi_card(p, batch):
    n = int(p.get("cards", 2))
    dies = [(0, i) for i in range(n)] if p.get("same_card") else [(i, 0) for i in range(n)]
    return [_mlp_stream(p, batch, d, f"process{i}") for i, d in enumerate(dies)], batch * n


WORKLOADS = {
    "resnet50": _streams_resnet50,
    "denoiser": _streams_denoiser,
    "pipeline": _streams_pipeline,
    "mlp": _streams_mlp,
    "multi_card": _streams_multi_card,
}


def _weights_upload(p, streams):
    """C4/C5: the shared weight, uploaded once before the timed iterations (pinned)."""
    if "feature" not in p or "layers" not in p:
        return None
    w = p["feature"] * p["feature"] * ELEM[p["precision"]]
    dies = sorted({tuple(s["steps"][0]["die"]) for s in streams})
    return [{"name": f"weights{i}", "iterations": 1, "steps": [_copy("pinned", "h2d", w, d, "weights")]}
            for i, d in enumerate(dies)]


def _bound(r: Result) -> str:
    """The busiest resource, or -- when nothing is busy half the time -- the serial chain of ops itself."""
    share = r.utilization.get(r.bound, 0.0)
    if share >= 0.5:
        return r.bound
    return f"latency chain (busiest {r.bound} at {share:.0%})"


def run_variant(case: Mapping[str, Any], overrides: Mapping[str, Any] | None = None, *,
                config: str | Path = "k200.yaml", seed: int = 1,
                on_run: Callable[[str, Result], Any] | None = None) -> list[dict[str, Any]]:
    """One variant of a case (params overridden by `overrides`) for every batch; a row per batch.
    ``on_run(label, result)`` sees each batch's run (e.g. to take its critical path)."""
    p = dict(case["params"])
    over = dict(overrides or {})
    sets = dict(case.get("set") or {})
    sets.update(over.pop("set", {}) or {})
    name = over.pop("name", "baseline")
    p.update(over)
    rows = []
    batches = p.pop("batch", [1])
    for batch in batches if isinstance(batches, list) else [batches]:
        system = load_system(config, set=sets, seed=seed)
        streams, items = WORKLOADS[case["workload"]](p, int(batch))
        upload = _weights_upload(p, streams) if case["workload"] in ("mlp", "multi_card") else None
        if upload:
            run_streams(system, upload)
        out = run_streams(system, streams)
        r: Result = out["result"]
        ends = out["iteration_ends_ps"]
        iters = len(ends[0])
        if on_run is not None:  # the run's critical path covers all its iterations: the label says so
            on_run(f"{case['name']} {name} batch {batch} (whole run: {iters} iteration{'s' if iters > 1 else ''}, "
                   f"{r.elapsed_s * 1e3:.3f} ms)", r)
        # Latency: mean iteration time of the streams (first iteration included).
        start = r.raw["start_ps"]
        lat = sum((e[-1] - start) / len(e) for e in ends) / len(ends) * 1e-12
        labels = sorted(out["labels"], key=lambda t: -t["time_ps"])
        rows.append({
            "case": case["name"], "variant": name, "batch": int(batch),
            "iterations": iters, "elapsed_s": r.elapsed_s, "latency_ms": lat * 1e3,
            "throughput_per_s": items * iters / r.elapsed_s if r.elapsed_s > 0 else math.nan,
            "bound_resource": _bound(r), "busiest_share": r.utilization.get(r.bound, 0.0),
            "top_step": labels[0]["label"] if labels else "",
            "step_time_ms": {t["label"]: t["time_ps"] * 1e-9 for t in labels},  # work per label (overlaps)
            # where the whole run's elapsed time went: each label's share (overlaps split) and the idle rest
            # (launch and dispatch gaps); they add up to elapsed_s
            "step_share_ms": {**{t["label"]: t["share_ps"] * 1e-9 for t in labels}, "idle": out["idle_ps"] * 1e-9},
            "paths": out["paths"], "set": {k: str(v) for k, v in sets.items()},
        })
    return rows


def run_case(case: Mapping[str, Any] | str | Path, *, config: str | Path = "k200.yaml", seed: int = 1,
             what_if: bool = True) -> list[dict[str, Any]]:
    """A case: its baseline and (if asked) each what-if variant; a row per (variant, batch)."""
    c = load_case(case) if not isinstance(case, Mapping) else case
    rows = run_variant(c, None, config=config, seed=seed)
    if what_if:
        for w in c.get("what_if") or []:
            rows += run_variant(c, w, config=config, seed=seed)
    return rows
