"""kernbench: a discrete-event simulator of accelerator hardware.

The C++ core (``kernbench._core``) runs the simulation; this package
describes, drives and analyses. Start with the CLI (``kernbench list``,
``kernbench run --bench NAME``) or, from Python::

    import kernbench
    sim = kernbench.Simulation(seed=1)
    r = kernbench.run_queue(sim, mean_interarrival_ps=1_000_000, mean_service_ps=900_000)
    log = sim.take_op_log().columns()      # numpy views, no copies
"""

from kernbench._core import (
    MICROSECOND,
    MILLISECOND,
    NANOSECOND,
    PICOSECOND,
    SECOND,
    CapacityError,
    ConfigError,
    DeadlockError,
    InternalError,
    KernbenchError,
    LimitError,
    OpLog,
    ProcessError,
    Simulation,
    TopologyError,
    UsageError,
    VerificationError,
    run_phold,
    run_queue,
)
from kernbench.registry import Bench, BenchAuditError, bench, get_bench, list_benches
from kernbench.program import Program, RunResult
from kernbench.system import System, config_path
from kernbench.sweeps import Point, sweep
from kernbench import critical_path  # kernbench.critical_path.summarize(result)
from kernbench import energy  # kernbench.energy.summarize(result)
from kernbench.version import __version__

# The public modules, loaded on first use: `import kernbench` then `kernbench.ccl.all_reduce(...)` works as the docs
# write it, without importing every model (and numpy-heavy module) up front.
PUBLIC_MODULES = frozenset({
    "calibrate", "ccl", "config", "critical_path", "diff", "energy", "goldens", "gqa", "io", "k200", "k200_reference",
    "llama", "nccl", "provenance",
    "program", "references", "registry", "runner", "serving", "serving_load", "sweepjson", "sweeps", "system", "trace",
    "units", "validation", "vgpu", "workloads",
})


def __getattr__(name: str):
    """``kernbench.<module>`` for a public module not imported yet: imported now (PEP 562)."""
    if name in PUBLIC_MODULES:
        import importlib
        return importlib.import_module(f"kernbench.{name}")
    raise AttributeError(f"module 'kernbench' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The package's names, the public modules included."""
    return sorted(set(globals()) | PUBLIC_MODULES)

__all__ = [
    "MICROSECOND",
    "MILLISECOND",
    "NANOSECOND",
    "PICOSECOND",
    "SECOND",
    "Bench",
    "BenchAuditError",
    "CapacityError",
    "ConfigError",
    "DeadlockError",
    "InternalError",
    "KernbenchError",
    "LimitError",
    "OpLog",
    "Point",
    "ProcessError",
    "Program",
    "RunResult",
    "Simulation",
    "System",
    "TopologyError",
    "UsageError",
    "VerificationError",
    "bench",
    "config_path",
    "get_bench",
    "list_benches",
    "run_phold",
    "run_queue",
    "sweep",
]
