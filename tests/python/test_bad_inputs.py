"""The bad-input corpus: broken configs, CLI calls and API calls, each refused with the right error.

A simulator is only trusted when it never returns a wrong number silently, so
every input here must fail loudly: with exactly the expected kernbench error
class, a message holding the expected words (and the config file, for config
errors), and, from the CLI, one ``kernbench: error:`` line and a non-zero exit
code -- never a crash, a hang or a traceback.

The cases live in data:

* ``tests/bad_inputs/cases.yaml`` (and ``cases_<family>.yaml`` beside it) lists the broken config files (under
  ``tests/bad_inputs/configs/``) and the CLI calls;
* ``API_CASES`` below lists the Python API calls (they are code).

A case with a ``bug`` is a known defect: it runs as a strict xfail, so the
fix turns it into an XPASS failure that asks for the marker to go. Inputs that
could hang or eat memory if a guard broke run in a child process with a time
and an address-space limit (``isolate``).

Run this module as a script (``python test_bad_inputs.py child KIND KEY``) to
execute one case in the current process and print its outcome as JSON; the
tests use that for the isolated cases.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml

import kernbench
from kernbench import _core
from kernbench._core import CapacityError, ConfigError, DeadlockError, TopologyError, UsageError
from kernbench.serving import ServingError
from kernbench.workloads import WorkloadError

CORPUS = Path(__file__).resolve().parent.parent / "bad_inputs"
CONFIGS = CORPUS / "configs"


def _load_manifest() -> dict[str, list]:
    """cases.yaml and every cases_<family>.yaml beside it, their lists joined (configs, cli)."""
    merged: dict[str, list] = {"configs": [], "cli": []}
    for path in sorted(CORPUS.glob("cases*.yaml")):
        part = yaml.safe_load(path.read_text()) or {}
        unknown = set(part) - set(merged)
        assert not unknown, f"{path.name}: unknown sections {sorted(unknown)} (known: configs, cli)"
        for key in merged:
            merged[key] += part.get(key) or []
    return merged


MANIFEST = _load_manifest()
BASE_SYSTEM = CONFIGS / "_base_system.yaml"
BASE_GRAPH = CONFIGS / "_base_graph.yaml"

CHILD_TIMEOUT_S = 20  # an isolated case or CLI call that runs longer is a hang
CHILD_MEMORY_BYTES = 4 << 30  # address-space limit of child processes

# The error classes a case may name: every kernbench._core exception.
ERRORS: dict[str, type[BaseException]] = {
    name: obj for name, obj in vars(_core).items()
    if isinstance(obj, type) and issubclass(obj, _core.KernbenchError)
}

# ---- the Python API cases ------------------------------------------------------------

PE0, PE1 = "sip0.cube0.pe0", "sip0.cube0.pe1"
HBM0 = "sip0.cube0.hbm_ctrl.pe0"
ROUTER = "sip0.cube0.r0c0"


def _tiny(**kw) -> kernbench.System:
    """The 2-PE machine of tests/bad_inputs/configs/_base_system.yaml (7 nodes)."""
    return kernbench.System.load(BASE_SYSTEM, **kw)


@dataclass(frozen=True)
class ApiCase:
    """One bad API call: `call` must raise exactly `error` with every one of `words` in its message."""

    id: str
    call: Callable[[], Any]
    error: type[BaseException]
    words: tuple[str, ...]
    isolate: bool = False  # run in a child process with a time and memory limit
    timeout_s: float = CHILD_TIMEOUT_S
    bug: str | None = None  # a known bug: strict xfail until fixed


def _after_a_run() -> kernbench.System:
    """A machine whose clock has moved past 0 (one small transfer ran)."""
    s = _tiny()
    s.transfer(PE0, PE1, 64)
    s.run()
    return s


def _run_transfer(nbytes: int, model: str = "packet") -> int:
    s = _tiny(set={"fabric.model": model})
    s.transfer(PE0, PE1, nbytes)
    s.run()
    return s.now


def _run_dma(nbytes: int) -> int:
    s = _tiny()
    s.dma("read", PE0, HBM0, nbytes)
    s.run()
    return s.now


def _sim_after_queue() -> kernbench.Simulation:
    sim = kernbench.Simulation(1)
    kernbench.run_queue(sim, 1000, 900, customers=10)
    return sim


def _program(name: str):
    return _tiny().program(name)


def _h100():
    return kernbench.System.load("machines/h100-8x-nvswitch.yaml")


def _a100():
    return kernbench.System.load("machines/a100-8x-nvswitch.yaml")


def _measure(name: str, **params):
    from kernbench.calibrate import REGISTRY, Context

    return REGISTRY.get(name).fn(Context(config="machines/h100-8x-nvswitch.yaml", sets={}), **params)


def _fp8_on_sip():
    p = _program("p")
    p.compute(PE0, 1e3, precision="fp8")  # a precision the SIP PE's GEMM engine lacks (pe.gemm.fp8 = 0)
    return p.run()


def _free_of_gemm():
    p = _program("p")
    return p.free(p.compute(PE0, 1e3))


def _scratch_overflow():
    p = _program("big")
    a = p.alloc(PE1, 800 * 1024, name="A")
    p.alloc(PE1, 400 * 1024, deps=[a], name="B")
    return p.run()


def _scratch_single_alloc():
    p = _program("huge")
    p.alloc(PE0, 2 * 1024 * 1024, name="H")
    return p.run()


def _cyclic_program():
    p = _program("cycle")
    x = p.barrier(PE0, [], name="x")
    y = p.compute(PE0, 1e3, deps=[x], name="y")
    z = p.compute(PE0, 1e3, deps=[y], name="z")
    p.depend(y, z)
    return p.run()


def _self_dependency():
    p = _program("self")
    y = p.compute(PE0, 1e3, name="y")
    p.depend(y, y)
    return p.run()


def _recv_without_send():
    p = _program("lonely")
    p.recv(PE1, PE0, key=5, name="r")
    return p.run()


def _recv_other_key():
    p = _program("keys")
    p.send(PE0, PE1, 64, key=1, name="s")
    p.recv(PE1, PE0, key=2, name="r")
    return p.run()


def _agent_out_of_range():
    p = _program("p")
    p.compute(999, 1e3, name="g")
    return p.run()


def _gemm_int8_op_without_int8():
    p = _tiny(set={"pe.gemm.int8": 0}).program("p")
    p.compute(PE0, 1e3, precision="int8", name="q")
    return p.run()


def _double_free():
    # 800 KiB freed twice; then 1000 + 800 KiB fit a 1 MiB scratch only if the
    # second free was (wrongly) counted.
    p = _program("df")
    a = p.alloc(PE0, 800 * 1024, name="a")
    f1 = p.free(a, deps=[a], name="f1")
    f2 = p.free(a, deps=[f1], name="f2")
    b = p.alloc(PE0, 1000 * 1024, deps=[f2], name="b")
    p.alloc(PE0, 800 * 1024, deps=[b], name="c")
    return p.run()


def _gemm_on_a_router():
    p = _program("p")
    p.compute(ROUTER, 1e6, name="g")
    return p.run()


def _gemm_flops(flops: float):
    p = _program("p")
    p.compute(PE0, flops, name="g")
    return p.run()


def _many_keys(n: int = 100_000):
    text = "".join(f"k{i}: 1\n" for i in range(n))
    return kernbench.System.from_yaml(text, source="many_keys.yaml")


def _from_yaml(text: str, source: str):
    return lambda: kernbench.System.from_yaml(text, source=source)


def _absurd_machine():
    # 10^9 PEs: below the loader's INT_MAX guard, far beyond any memory.
    return _tiny(set={"system.sips.w": 1000, "system.sips.h": 1000, "system.routers.w": 1,
                      "system.routers.h": 1, "system.pes_per_cube": 1000})


def _serve(**kw):
    """serving.run of issue 54's S (llama3-8b, 8 requests of 64 + 16 tokens, no check) with ``kw`` changed."""
    from kernbench import serving

    args = dict(config="machines/h100-8x-nvswitch.yaml", requests=8, check=0, prompt="fixed:64", output="fixed:16")
    return serving.run("llama3-8b", **{**args, **kw})


def _trace(**cols):
    from kernbench.serving import Trace

    return Trace(**{"arrival_s": [0.0], "prompt": [64], "output": [16], **cols})


def _kv_capacity(**kw):
    from kernbench import serving
    from kernbench.workloads import get_model

    return serving.kv_capacity(get_model("llama3-8b"), _h100(), **kw)


def _footprint(**kw):
    from kernbench.workloads import get_model
    from kernbench.workloads.memory import inference_footprint

    return inference_footprint(get_model("llama3-8b"), **{"tp": 1, "pp": 1, "batch": 1, "prompt": 64, "tokens": 80,
                                                             **kw})


def _alltoall(bytes_per_pair):
    from kernbench.cluster import alltoall_bound

    return alltoall_bound(kernbench.System.load("machines/dgx-h100-cluster.yaml").cluster(), bytes_per_pair)


def _estimate_long_prompt():
    from kernbench.workloads import estimate, get_model

    return estimate.inference(get_model("llama3-8b").builder(), _h100(), batch=1, prompt=10**7)


def _train_empty():
    from kernbench.workloads import ParallelPlan, WorkloadGraph, estimate

    return estimate.training_step(WorkloadGraph("empty", []), _h100(), ParallelPlan())


def _plan_rule_naming_no_op():
    from kernbench.workloads import ParallelPlan, get_model
    from kernbench.workloads.lower import lower

    return lower(get_model("gpt2").graph(1, 16, layers=1), _h100(), ParallelPlan(tp=2, rules={"nope": "row"}))


def _gemm_flops_not_its_attrs():
    from kernbench.workloads import Op, ParallelPlan, TensorSpec, WorkloadGraph
    from kernbench.workloads.lower import lower

    x = TensorSpec((4, 4), "bf16")
    g = WorkloadGraph("g", [Op("mm", "matmul", "aten.mm", (x, x), (x,), (), int(1e15), {"m": 4, "n": 4, "k": 4})])
    return lower(g, _h100(), ParallelPlan())


def _all_gather_none():
    from kernbench import ccl

    ccl.dist.init_process_group(system=_tiny())
    try:
        return ccl.dist.all_gather(None)
    finally:
        ccl.dist.destroy_process_group()


API_CASES: list[ApiCase] = [
    # ---- machines from Python -------------------------------------------------------
    ApiCase("load-missing-config", lambda: kernbench.System.load("no_such_config.yaml"), ConfigError,
            ("no_such_config.yaml", "no such config file")),
    ApiCase("load-set-unknown-key", lambda: _tiny(set={"system.nonsense": 1}), ConfigError,
            ("_base_system.yaml", "system.nonsense", "--set system.nonsense=1", "unknown key")),
    ApiCase("load-set-bad-value", lambda: _tiny(set={"system.sips.w": "two"}), ConfigError,
            ("_base_system.yaml", "system.sips.w", 'got "two"')),
    ApiCase("load-set-empty-path-component", lambda: _tiny(set={"links..pcie": 1}), ConfigError,
            ("_base_system.yaml", "links..pcie", "dotted path")),
    ApiCase("from-yaml-bad-text", lambda: kernbench.System.from_yaml("system: [", source="inline.yaml"),
            ConfigError, ("inline.yaml", "invalid YAML")),
    ApiCase("load-absurd-machine", _absurd_machine, ConfigError, ("too large",), isolate=True,
        ),
    ApiCase("from-yaml-many-keys", _many_keys, ConfigError, ("many_keys.yaml", "k0", "unknown key"),
            isolate=True, timeout_s=5,
        ),
    # The reproducers at full size (the corpus files are smaller variants).
    ApiCase("from-yaml-recursive-alias", _from_yaml("x: &a [1, *a]\n", "a.yaml"), ConfigError,
            ("a.yaml", "x[1]", "recursive alias"), isolate=True),
    ApiCase("from-yaml-nesting-100000", _from_yaml("x: " + "[" * 100_000 + "]" * 100_000, "deep.yaml"), ConfigError,
            ("deep.yaml", "nested deeper than 100 levels"), isolate=True),
    ApiCase("from-yaml-key-10MB", _from_yaml("k" * 10_000_000 + ": 1\n", "key.yaml"), ConfigError,
            ("key.yaml", "map key too long", "10000000 bytes", "256"), isolate=True),
    ApiCase("from-yaml-alias-bomb-1MiB-x20000",
            _from_yaml("a: &s " + "x" * (1 << 20) + "\nb: [" + ", ".join(["*s"] * 20_000) + "]\n", "bomb.yaml"),
            ConfigError, ("bomb.yaml", "b[", "more than 64 MiB", "once aliases are expanded"), isolate=True),
    # ---- nodes, transfers, DMA ------------------------------------------------------------
    ApiCase("transfer-unknown-node", lambda: _tiny().transfer(PE0, "nowhere", 64), TopologyError,
            ("_base_system.yaml", "unknown node 'nowhere'")),
    ApiCase("transfer-node-id-out-of-range", lambda: _tiny().transfer(0, 1_000_000, 64), UsageError,
            ("node id 1000000", "out of range", "7 nodes")),
    ApiCase("transfer-negative-node-id", lambda: _tiny().transfer(-1, 0, 64), UsageError,
            ("-1", "out of range"),
        ),
    ApiCase("transfer-negative-size", lambda: _tiny().transfer(PE0, PE1, -64), UsageError,
            ("transfer", "negative size")),
    ApiCase("transfer-in-the-past", lambda: _tiny().transfer(PE0, PE1, 64, at_ps=-5), UsageError,
            ("t=-5 ps", "in the past")),
    ApiCase("transfer-too-large-packet-model", lambda: _run_transfer(1 << 50), UsageError, ("too large",),
            isolate=True,
        ),
    ApiCase("transfer-too-large-flow-model", lambda: _run_transfer(1 << 62, "flow"), UsageError,
            ("too large",), isolate=True,
        ),
    ApiCase("dma-unknown-node", lambda: _tiny().dma("read", PE0, "sip0.cube0.hbm_ctrl.pe9", 64),
            TopologyError, ("_base_system.yaml", "unknown node 'sip0.cube0.hbm_ctrl.pe9'")),
    ApiCase("dma-node-id-out-of-range", lambda: _tiny().dma("read", 0, 99_999, 64), UsageError,
            ("node id 99999", "out of range")),
    ApiCase("dma-in-the-past", lambda: _after_a_run().dma("read", PE0, HBM0, 64, at_ps=0), UsageError,
            ("dma at t=0 ps", "in the past")),
    ApiCase("dma-negative-size", lambda: _tiny().dma("read", PE0, HBM0, -1), UsageError,
            ("dma", "negative size")),
    ApiCase("dma-unknown-kind", lambda: _tiny().dma("copy", PE0, HBM0, 64), ConfigError,
            ("unknown kind 'copy'", "read, write")),
    ApiCase("dma-too-large", lambda: _run_dma(1 << 62), UsageError, ("too large",), isolate=True,
        ),
    ApiCase("route-unknown-node", lambda: _tiny().route(PE0, "x"), TopologyError, ("unknown node 'x'",)),
    ApiCase("node-name-out-of-range", lambda: _tiny().node_name(12345), UsageError, ("12345", "out of range"),
        ),
    # ---- traffic ------------------------------------------------------------------------------
    ApiCase("traffic-unknown-pattern", lambda: _tiny().traffic("random", [PE0, PE1], 1.0, 64, 0, 1000),
            ConfigError, ("unknown pattern 'random'", "uniform, transpose, bitcomplement, hotspot")),
    ApiCase("traffic-bernoulli-without-cycle",
            lambda: _tiny().traffic("uniform", [PE0, PE1], 1.0, 64, 0, 1000, injection="bernoulli"),
            ConfigError, ("bernoulli injection needs a cycle > 0 ps",)),
    ApiCase("traffic-bernoulli-over-one-per-cycle",
            lambda: _tiny().traffic("uniform", [PE0, PE1], 64.0, 64, 0, 10000, injection="bernoulli", cycle_ps=2000),
            ConfigError, ("over 1",)),
    ApiCase("traffic-bitcomplement-not-power-of-two",
            lambda: _tiny().traffic("bitcomplement", [PE0, PE1, ROUTER], 1.0, 64, 0, 1000),
            ConfigError, ("power-of-two number of endpoints, got 3",)),
    ApiCase("traffic-transpose-not-square",
            lambda: _tiny().traffic("transpose", [PE0, PE1, ROUTER], 1.0, 64, 0, 1000), ConfigError,
            ("transpose needs a square grid", "3 endpoints")),
    ApiCase("traffic-zero-rate", lambda: _tiny().traffic("uniform", [PE0, PE1], 0.0, 64, 0, 1000),
            ConfigError, ("offered load must be > 0",)),
    ApiCase("traffic-nan-rate", lambda: _tiny().traffic("uniform", [PE0, PE1], float("nan"), 64, 0, 1000),
            ConfigError, ("offered load must be > 0",)),
    ApiCase("traffic-zero-packet", lambda: _tiny().traffic("uniform", [PE0, PE1], 1.0, 0, 0, 1000),
            ConfigError, ("packet size must be > 0",)),
    ApiCase("traffic-stop-before-start", lambda: _tiny().traffic("uniform", [PE0, PE1], 1.0, 64, 1000, 0),
            ConfigError, ("stop must be after start",)),
    ApiCase("traffic-one-endpoint", lambda: _tiny().traffic("uniform", [PE0], 1.0, 64, 0, 1000),
            ConfigError, ("at least two endpoints", "got 1")),
    ApiCase("traffic-unknown-injection",
            lambda: _tiny().traffic("uniform", [PE0, PE1], 1.0, 64, 0, 1000, injection="bursty"), ConfigError,
            ("unknown injection 'bursty'", "poisson, periodic")),
    # ---- running ------------------------------------------------------------------------------
    ApiCase("system-run-until-the-past", lambda: _after_a_run().run(until_ps=0), UsageError,
            ("run(until=0 ps)", "before the current time")),
    ApiCase("simulation-run-until-the-past", lambda: _sim_after_queue().run(until=0), UsageError,
            ("run(until=0 ps)", "before the current time")),
    ApiCase("phold-unknown-engine",
            lambda: kernbench.run_phold(kernbench.Simulation(1), engine="threads", lps=4, events=10),
            ConfigError, ("unknown engine 'threads'", "bare, callbacks, coroutines")),
    ApiCase("phold-zero-lps", lambda: kernbench.run_phold(kernbench.Simulation(1), lps=0, events=10),
            ConfigError, ("lps must be >= 1",)),
    ApiCase("queue-zero-servers",
            lambda: kernbench.run_queue(kernbench.Simulation(1), 1000, 900, servers=0, customers=10),
            ConfigError, ("servers must be >= 1, got 0",)),
    ApiCase("queue-unknown-service",
            lambda: kernbench.run_queue(kernbench.Simulation(1), 1000, 900, service="pareto", customers=10),
            ConfigError, ("unknown service distribution 'pareto'",)),
    ApiCase("queue-zero-interarrival",
            lambda: kernbench.run_queue(kernbench.Simulation(1), 0, 900, customers=10), ConfigError,
            ("mean_interarrival must be > 0",)),
    # ---- programs -----------------------------------------------------------------------------
    ApiCase("program-scratch-overflow", _scratch_overflow, CapacityError,
            ("scratch of sip0.cube0.pe1 overflows", "B asks for 400 KiB", "800 KiB of 1024 KiB in use")),
    ApiCase("program-alloc-beyond-scratch", _scratch_single_alloc, CapacityError,
            ("scratch of sip0.cube0.pe0 overflows", "H asks for 2048 KiB")),
    ApiCase("program-cycle", _cyclic_program, DeadlockError,
            ("cycle: deadlock", "op 1 'y'", "waits for op 2", "op 2 'z'", "waits for op 1")),
    ApiCase("program-self-dependency", _self_dependency, DeadlockError, ("op 0 'y'", "waits for op 0")),
    ApiCase("program-recv-without-send", _recv_without_send, DeadlockError,
            ("lonely: deadlock", "op 0 'r'", "recv on sip0.cube0.pe1", "send from sip0.cube0.pe0 with key 5",
             "never came")),
    ApiCase("program-recv-other-key", _recv_other_key, DeadlockError, ("op 1 'r'", "key 2", "never came")),
    ApiCase("program-unknown-precision", lambda: _program("p").compute(PE0, 1e3, precision="fp4"), ConfigError,
            ("unknown precision 'fp4'", "fp32, tf32, fp16, bf16, fp8, int8")),
    ApiCase("program-precision-without-mode", lambda: _fp8_on_sip(), ConfigError, ("no fp8 mode", "pe.gemm.fp8 = 0")),
    ApiCase("program-unknown-agent", lambda: _program("p").compute("sip0.cube0.pe9", 1e3), TopologyError,
            ("unknown node 'sip0.cube0.pe9'",)),
    ApiCase("program-agent-id-out-of-range", _agent_out_of_range, UsageError,
            ("op 0 'g'", "agent node id 999 out of range")),
    ApiCase("program-dependency-on-a-later-op", lambda: _program("p").compute(PE0, 1e3, deps=[42]), UsageError,
            ("depends on op 42", "does not exist yet")),
    ApiCase("program-depend-on-missing-op", lambda: _program("p").depend(0, 5), UsageError,
            ("depend(0, 5)", "no such op")),
    ApiCase("program-free-of-a-non-alloc", _free_of_gemm, UsageError, ("op 0 is not an alloc",)),
    ApiCase("program-negative-flops", lambda: _program("p").compute(PE0, -1.0), UsageError, ("FLOPs must be >= 0",)),
    ApiCase("program-nan-flops", lambda: _program("p").compute(PE0, float("nan")), UsageError,
            ("FLOPs must be >= 0",)),
    ApiCase("program-negative-dma-size", lambda: _program("p").dma(PE0, HBM0, PE0, -1), UsageError,
            ("dma", "negative size")),
    ApiCase("program-negative-alloc", lambda: _program("p").alloc(PE0, -1), UsageError,
            ("alloc", "negative size")),
    ApiCase("program-composite-unknown-compute",
            lambda: _program("p").composite(PE0, tiles=2, loads=[(HBM0, PE0, 1024)], flops=1e3, compute="conv"),
            ConfigError, ("unknown compute stage 'conv'", "gemm, vector")),
    ApiCase("program-composite-zero-tiles",
            lambda: _program("p").composite(PE0, tiles=0, loads=[(HBM0, PE0, 1024)], flops=1e3), UsageError,
            ("composite", "at least one tile")),
    ApiCase("program-composite-zero-buffers",
            lambda: _program("p").composite(PE0, tiles=2, loads=[(HBM0, PE0, 1024)], flops=1e3, buffers=0),
            UsageError, ("composite", "at least one buffer")),
    ApiCase("program-int8-gemm-without-int8", _gemm_int8_op_without_int8, ConfigError,
            ("op 0 'q'", "no int8 mode", "pe.gemm.int8 = 0")),
    ApiCase("program-double-free", _double_free, UsageError, ("f2", "freed"),
        ),
    ApiCase("program-gemm-on-a-router", _gemm_on_a_router, UsageError, ("sip0.cube0.r0c0", "not a PE"),
        ),
    ApiCase("program-infinite-flops", lambda: _gemm_flops(float("inf")), UsageError, ("FLOPs",),
        ),
    ApiCase("program-flops-overflow-the-clock", lambda: _gemm_flops(1e30), UsageError, ("'g'", "too large"),
        ),
    # ---- the GEMM kernel helper ---------------------------------------------------------------
    ApiCase("gemm-plan-int8-without-int8",
            lambda: _core.gemm_plan(kernbench.System.load(set={"pe.gemm.int8": 0, "system.sips.w": 1,
                                                               "system.sips.h": 1})._core,
                                    64, 64, 64, precision="int8"),
            ConfigError, ("int8", "no int8 mode", "pe.gemm.int8 = 0")),
    ApiCase("gemm-plan-unknown-precision", lambda: _core.gemm_plan(_tiny()._core, 64, 64, 64, precision="fp4"),
            ConfigError, ("unknown precision 'fp4'",)),
    ApiCase("gemm-plan-zero-dimension", lambda: _core.gemm_plan(_tiny()._core, 0, 64, 64), ConfigError,
            ("GEMM 0x64x64", "must be positive")),
    ApiCase("gemm-plan-on-a-router", lambda: _core.gemm_plan(_tiny()._core, 64, 64, 64, pes=[ROUTER]),
            ConfigError, ("sip0.cube0.r0c0 is a router, not a PE",)),
    ApiCase("gemm-plan-pe-twice", lambda: _core.gemm_plan(_tiny()._core, 64, 64, 64, pes=[PE0, PE0]),
            ConfigError, ("sip0.cube0.pe0 is listed twice",)),
    ApiCase("gemm-plan-tiles-overflow-scratch",
            lambda: _core.gemm_plan(_tiny()._core, 4096, 4096, 4096, tile_m=4096, tile_n=4096, tile_k=4096),
            CapacityError, ("sip0.cube0.pe0", "need 256 MiB of scratch per PE", "pe.scratch = 1 MiB")),
    ApiCase("gemm-plan-absurd-size", lambda: _core.gemm_plan(_tiny()._core, 1 << 40, 1 << 40, 1 << 40),
            ConfigError, ("beyond 2^56 bytes",)),
    # ---- the GPU target's kernel models and measurement functions ----------------------------
    ApiCase("gpu-gemm-on-a-sip-machine", lambda: _core.gpu_gemm(_tiny()._core, PE0, 64, 64, 64), ConfigError,
            ("gpu.sms: 0", "no SM array", "sip0.cube0.pe0", "pe.target: gpu")),
    ApiCase("gpu-gemm-on-a-switch", lambda: _core.gpu_gemm(_h100()._core, "nvswitch0", 64, 64, 64), UsageError,
            ("nvswitch0", "not a PE")),
    ApiCase("gpu-gemm-dimension-past-2-31", lambda: _core.gpu_gemm(_h100()._core, "gpu0", 1 << 40, 64, 64),
            UsageError, ("gpu gemm on gpu0", "m = 1099511627776", "1 .. 2^31")),
    ApiCase("gpu-gemm-zero-k", lambda: _core.gpu_gemm(_h100()._core, "gpu0", 64, 64, 0), UsageError, ("k = 0",)),
    ApiCase("gpu-gemm-mode-the-gpu-lacks", lambda: _core.gpu_gemm(_a100()._core, "gpu0", 64, 64, 64, "fp8"),
            ConfigError, ("gpu0", "pe.gemm.fp8 is 0", "no fp8 mode")),
    ApiCase("gpu-stream-negative", lambda: _core.gpu_stream(_h100()._core, "gpu0", -1), UsageError,
            ("gpu stream kernel on gpu0", "negative bytes")),
    ApiCase("gpu-stream-past-1-tib", lambda: _core.gpu_stream(_h100()._core, "gpu0", 1 << 50), UsageError,
            ("gpu stream kernel on gpu0",)),
    ApiCase("gpu-attention-more-queries-than-keys",
            lambda: _core.gpu_attention(_h100()._core, "gpu0", 1, 8, 8, 16, 8, 128), UsageError,
            ("gpu attention on gpu0", "q_len 16 > kv_len 8")),
    ApiCase("gpu-attention-heads-not-grouped", lambda: _core.gpu_attention(_h100()._core, "gpu0", 1, 8, 3, 1, 8, 128),
            UsageError, ("8 query heads are not a multiple of 3 KV heads",)),
    ApiCase("program-kernel-negative-duration", lambda: _h100().program("p").kernel("gpu0", -1), UsageError,
            ("duration_ps = -1", "out of range")),
    ApiCase("gpu-stream-function-unknown-kernel", lambda: _measure("gpu.stream", kernel="scale"), UsageError,
            ("kernel 'scale'", "copy, mul, add, triad, dot")),
    ApiCase("model-inference-unknown-model", lambda: _measure("model.inference", model="llama9"), WorkloadError,
            ("unknown model 'llama9'", "llama2-70b")),
    ApiCase("model-inference-does-not-fit", lambda: _measure("model.inference", model="llama2-70b", output=2),
            WorkloadError, ("does not fit in gpu0's memory", "weights", "GiB short", "gpu.memory_utilization")),
    ApiCase("model-inference-zero-output", lambda: _measure("model.inference", model="llama3-8b", output=0),
            UsageError, ("output must be >= 1",)),
    # ---- issue 54 (reliability round 4): serving.run's arguments, one checker (kernbench.serving_args) ----------
    ApiCase("r4-serve-block-size-0", lambda: _serve(block_size=0), ServingError,
            ("serving.run: block_size = 0", "allowed: 1 .. 1048576")),
    ApiCase("r4-serve-seed-fraction", lambda: _serve(seed=1.5), ServingError, ("seed 1.5", "expected an integer")),
    ApiCase("r4-serve-seed-text", lambda: _serve(seed="1"), ServingError, ("seed '1'", "expected an integer")),
    ApiCase("r4-serve-dtype-int4", lambda: _serve(dtype="int4"), ServingError, ("dtype = 'int4'", "bf16")),
    ApiCase("r4-serve-check-fraction", lambda: _serve(check=2.5), ServingError, ("check", "fraction 2.5")),
    ApiCase("r4-serve-cv-text", lambda: _serve(cv="2"), ServingError, ("cv must be a number", "'2'")),
    ApiCase("r4-serve-disaggregate-three", lambda: _serve(disaggregate=(1, 1, 1)), ServingError,
            ("disaggregate must be (prefill, decode)", "(1, 1, 1)")),
    ApiCase("r4-serve-disaggregate-fraction", lambda: _serve(disaggregate=(1.5, 1)), ServingError,
            ("disaggregate[0]", "fraction 1.5")),
    ApiCase("r4-serve-warmup-count-past-requests", lambda: _serve(warmup=8), ServingError,
            ("warmup = 8 requests", "allowed: 0 .. 7")),
    ApiCase("r4-serve-warmup-bool", lambda: _serve(warmup=True), ServingError, ("warmup", "got True")),
    ApiCase("r4-serve-max-batched-tokens-0", lambda: _serve(max_batched_tokens=0), ServingError,
            ("max_batched_tokens = 0", "out of range")),
    ApiCase("r4-serve-replicas-2p40", lambda: _serve(replicas=2**40), ServingError,
            ("replicas = 1099511627776", "out of range"), isolate=True),
    ApiCase("r4-serve-requests-2p31", lambda: _serve(requests=2**31), ServingError,
            ("requests = 2147483648", "allowed: 1 .. 10000000"), isolate=True),
    ApiCase("r4-serve-prompt-past-positions", lambda: _serve(prompt=200_000), ServingError,
            ("prompt 200000 + output 16 = 200016 tokens", "8192 positions (max_positions)")),
    ApiCase("r4-serve-empty-trace", lambda: _serve(trace=_trace(arrival_s=[], prompt=[], output=[])), ServingError,
            ("Trace: the trace has no requests",)),
    ApiCase("r4-trace-fractional-prompt", lambda: _trace(prompt=[64.7]), ServingError,
            ("Trace: prompt[0] = 64.7", "not a whole number", "nothing is truncated")),
    ApiCase("r4-trace-arrival-1e7-s", lambda: _trace(arrival_s=[0.0, 1e7], prompt=[64, 64], output=[16, 16]),
            ServingError, ("last arrival, at 1e+07 s", "past 1e+06 s")),
    ApiCase("r4-trace-columns-of-two-lengths", lambda: _trace(prompt=[64, 64]), ServingError,
            ("Trace: prompt must be one list of numbers per request (1 requests)",)),
    ApiCase("r4-kv-capacity-negative-batched-tokens", lambda: _kv_capacity(max_batched_tokens=-100000),
            ServingError, ("kv_capacity: max_batched_tokens = -100000", "out of range")),
    ApiCase("r4-kv-capacity-block-size-negative", lambda: _kv_capacity(block_size=-16), ServingError,
            ("kv_capacity: block_size = -16",)),
    ApiCase("r4-make-trace-seed-negative", lambda: __import__("kernbench.serving").serving.make_trace(4, 1.0, seed=-1),
            ServingError, ("make_trace: seed -1", "out of range")),
    ApiCase("r4-slo-bound-twice", lambda: __import__("kernbench.serving").serving.parse_slo(
        {"ttft": "1ms", "TTFT": "2ms"}), ServingError, ("slo: ttft is given twice",)),
    # ---- issue 54: negative sizes and impossible values in the other APIs ---------------------------------------
    ApiCase("r4-footprint-negative-batch", lambda: _footprint(batch=-1), WorkloadError,
            ("inference_footprint: batch must be an integer >= 1, got -1",)),
    ApiCase("r4-footprint-negative-prompt", lambda: _footprint(prompt=-128), WorkloadError,
            ("inference_footprint: prompt must be an integer >= 1, got -128",)),
    ApiCase("r4-plan-sp-text", lambda: __import__("kernbench.workloads").workloads.ParallelPlan(tp=2, sp="no"),
            WorkloadError, ("plan: sp must be True or False", "'no'")),
    ApiCase("r4-alltoall-bound-negative", lambda: _alltoall(-1), UsageError,
            ("alltoall_bound: bytes_per_pair = -1", "negative size")),
    ApiCase("r4-alltoall-bound-nan", lambda: _alltoall(float("nan")), UsageError,
            ("alltoall_bound: bytes_per_pair", "finite")),
    ApiCase("r4-estimate-inference-prompt-past-positions", _estimate_long_prompt, WorkloadError,
            ("kv_len 10000000", "8192 positions (max_positions)")),
    # ---- issue 54: left from round 3 ---------------------------------------------------------------------------
    ApiCase("r4-plan-rule-naming-no-op", _plan_rule_naming_no_op, WorkloadError,
            ("plan: rules['nope'] names no op of gpt2",)),
    ApiCase("r4-matmul-flops-not-its-attrs", _gemm_flops_not_its_attrs, WorkloadError,
            ("flops = 1000000000000000", "4 x 4 x 4", "= 128")),
    ApiCase("r4-memory-of-unknown-node", lambda: _tiny().memory_of("nope"), TopologyError, ("unknown node 'nope'",)),
    ApiCase("r4-load-seed-negative", lambda: _tiny(seed=-1), ConfigError, ("seed -1", "out of range")),
    ApiCase("r4-dist-all-gather-none", _all_gather_none, UsageError, ("all_gather: give a list of tensors", "None")),
    ApiCase("r4-training-step-empty-graph", _train_empty, WorkloadError, ("training_step: the graph 'empty' has no ops",)),
]
API_BY_ID = {c.id: c for c in API_CASES}


# ---- the manifest cases ------------------------------------------------------------------

CONFIG_CASES: list[dict[str, Any]] = MANIFEST["configs"]
CONFIG_BY_FILE = {c["file"]: c for c in CONFIG_CASES}


def _validate_cli_cases() -> list[dict[str, Any]]:
    """`kernbench validate FILE` for each config case marked `validate: true`."""
    out = []
    for c in CONFIG_CASES:
        if c.get("validate"):
            out.append({"id": "validate-" + Path(c["file"]).stem, "args": ["validate", "{configs}/" + c["file"]],
                        "exit": 1, "words": [c["file"], *c["words"]], **({"bug": c["bug"]} if "bug" in c else {})})
    return out


CLI_CASES: list[dict[str, Any]] = MANIFEST["cli"] + _validate_cli_cases()


def _marks(case) -> list:
    bug = case.bug if isinstance(case, ApiCase) else case.get("bug")
    return [pytest.mark.xfail(strict=True, reason=bug)] if bug else []


# ---- running a case ----------------------------------------------------------------------


@dataclass
class Outcome:
    """What a case raised: the class's module and name and the message (None: nothing raised)."""

    module: str | None
    name: str | None
    message: str

    @classmethod
    def of(cls, call: Callable[[], Any]) -> "Outcome":
        try:
            call()
        except Exception as e:  # noqa: BLE001 -- the class is what is checked
            return cls(type(e).__module__, type(e).__qualname__, str(e))
        return cls(None, None, "")


def _limit_child() -> None:
    """preexec_fn: cap the child's address space so a runaway allocation fails instead of swapping."""
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (CHILD_MEMORY_BYTES, CHILD_MEMORY_BYTES))
    except (ImportError, ValueError, OSError):
        pass


def _child_env() -> dict[str, str]:
    return dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", PYTHONFAULTHANDLER="1")


def _run_child(args: list[str], timeout_s: float, cwd: Path | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout_s, cwd=cwd, env=_child_env(),
                              preexec_fn=_limit_child if os.name == "posix" else None)
    except subprocess.TimeoutExpired:
        pytest.fail(f"did not finish within {timeout_s} s (a hang?): {' '.join(args)}")


def _isolated(kind: str, key: str, timeout_s: float) -> Outcome:
    """Run one case in a child process (this module as a script) and read its outcome."""
    proc = _run_child([sys.executable, __file__, "child", kind, key], timeout_s)
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0 and lines, (
        f"the child running {kind} case {key!r} crashed (exit {proc.returncode}):\n{proc.stderr[-3000:]}")
    return Outcome(**json.loads(lines[-1]))


def _check(outcome: Outcome, error: type[BaseException], words, where: str) -> None:
    """Exactly `error`, with every one of `words` in the message."""
    assert outcome.name is not None, f"{where}: nothing was raised; expected {error.__name__}"
    assert (outcome.module, outcome.name) == (error.__module__, error.__qualname__), (
        f"{where}: raised {outcome.module}.{outcome.name}, expected {error.__module__}.{error.__qualname__}: "
        f"{outcome.message}")
    missing = [w for w in words if w not in outcome.message]
    assert not missing, f"{where}: the message lacks {missing}: {outcome.message}"


def _child_main(argv: list[str]) -> int:
    """`python test_bad_inputs.py child api|config KEY`: run one case here, print its Outcome as JSON."""
    if len(argv) != 3 or argv[0] != "child" or argv[1] not in ("api", "config"):
        print("usage: test_bad_inputs.py child api|config KEY", file=sys.stderr)
        return 2
    kind, key = argv[1], argv[2]
    _limit_child()  # also when started by hand: an absurd machine must not take the host's memory
    if kind == "api":
        outcome = Outcome.of(API_BY_ID[key].call)
    else:
        outcome = Outcome.of(lambda: kernbench.System.load(CONFIGS / key))
    print(json.dumps(outcome.__dict__))
    return 0


# ---- the tests ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "case", [pytest.param(c, id=Path(c["file"]).stem, marks=_marks(c)) for c in CONFIG_CASES])
def test_bad_config(case):
    """Loading a broken config raises exactly its error class, with the expected words and the file name."""
    error = ERRORS[case["error"]]
    if case.get("isolate"):
        outcome = _isolated("config", case["file"], CHILD_TIMEOUT_S)
    else:
        outcome = Outcome.of(lambda: kernbench.System.load(CONFIGS / case["file"]))
    _check(outcome, error, [*case["words"], case["file"]], case["file"])


@pytest.mark.parametrize("case", [pytest.param(c, id=c["id"], marks=_marks(c)) for c in CLI_CASES])
def test_bad_cli_call(case, tmp_path):
    """A bad CLI call exits non-zero with one `kernbench: error:` line holding the words, and no traceback."""
    subst = {"{configs}": str(CONFIGS), "{out}": str(tmp_path / "out")}

    def expand(arg: str) -> str:
        for k, v in subst.items():
            arg = arg.replace(k, v)
        return arg

    args = [expand(str(a)) for a in case["args"]]
    proc = _run_child([sys.executable, "-m", "kernbench", *args], CHILD_TIMEOUT_S, cwd=tmp_path)
    where = f"kernbench {' '.join(args)}"
    assert "Traceback" not in proc.stderr, f"{where}: printed a traceback:\n{proc.stderr[-3000:]}"
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kernbench: error:"), (
        f"{where}: expected one 'kernbench: error:' line on stderr, got:\n{proc.stderr[-3000:]}")
    assert proc.returncode == case["exit"], f"{where}: exit {proc.returncode}, expected {case['exit']}"
    assert proc.stdout == "", f"{where}: printed on stdout: {proc.stdout[-1000:]}"
    missing = [w for w in case["words"] if w not in lines[0]]
    assert not missing, f"{where}: the message lacks {missing}: {lines[0]}"


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id, marks=_marks(c)) for c in API_CASES])
def test_bad_api_call(case):
    """A bad Python API call raises exactly its error class, with every expected word in the message."""
    if case.isolate:
        outcome = _isolated("api", case.id, case.timeout_s)
    else:
        outcome = Outcome.of(case.call)
    _check(outcome, case.error, case.words, case.id)


def test_corpus_size():
    """The corpus cannot silently shrink: at least 40 cases in all, and each part keeps its current size.

    Removing a case means lowering a floor here, on purpose, in the same change.
    """
    assert len(CONFIG_CASES) >= 84
    assert len(CLI_CASES) >= 90
    assert len(API_CASES) >= 105
    assert len(CONFIG_CASES) + len(CLI_CASES) + len(API_CASES) >= 40


def test_manifest_is_consistent():
    """Case ids are unique, errors are kernbench classes, words are given, and every config file is used."""
    for kind, ids in (("config", [c["file"] for c in CONFIG_CASES]), ("cli", [c["id"] for c in CLI_CASES]),
                      ("api", [c.id for c in API_CASES])):
        dupes = {i for i in ids if ids.count(i) > 1}
        assert not dupes, f"duplicate {kind} case ids: {sorted(dupes)}"
    for c in CONFIG_CASES:
        assert set(c) <= {"file", "error", "words", "validate", "isolate", "bug"}, c
        assert c["error"] in ERRORS and c["words"], c
        assert (CONFIGS / c["file"]).is_file(), c["file"]
    for c in CLI_CASES:
        assert set(c) <= {"id", "args", "exit", "words", "bug"}, c
        assert c["exit"] != 0 and c["words"], c
    for c in API_CASES:
        assert c.words and issubclass(c.error, _core.KernbenchError), c.id
    helpers = {"include_cycle_b.yaml"}  # reached through include_cycle_a.yaml
    unused = sorted(p.name for p in CONFIGS.glob("*.yaml")
                    if not p.name.startswith("_") and p.name not in CONFIG_BY_FILE and p.name not in helpers)
    assert not unused, f"config files with no case in cases.yaml: {unused}"


def test_base_configs_are_valid():
    """The configs the broken ones include load, so each case fails for its own reason only."""
    assert len(kernbench.System.load(BASE_SYSTEM).pes()) == 2
    assert kernbench.System.load(BASE_GRAPH).num_nodes == 3


if __name__ == "__main__":
    sys.exit(_child_main(sys.argv[1:]))
