"""Collectives on a simulated machine, and a torch.distributed-shaped front.

The algorithms live in C++ (``src/ccl``): each builds a Program of IPCQ sends
and recvs, runs it, and checks it symbolically (every slice of every rank's
buffer must end up reduced over all ranks exactly once)::

    import kernbench
    from kernbench import ccl

    system = kernbench.System.load()                     # the default machine
    r = ccl.all_reduce(system, 96 * 1024, algorithm="lrab")
    r.latency_us, r.phases_df(), r.link_bytes

``ccl.algorithms()`` lists the algorithms and what each implements. ``nvls`` is the in-network all-reduce:
on a machine whose switches declare ``reduction: {bandwidth: ...}`` (the HGX H100 preset's NVSwitch gen3),
each rank sends every chunk once to a switch, which reduces the contributions and multicasts the sum back
(``pieces``: chunks per switch); elsewhere it fails naming what is missing (docs/ccl.md)::

    h100 = kernbench.System.load("machines/h100-8x-nvswitch.yaml")
    ccl.all_reduce(h100, 64 << 20, algorithm="nvls", pieces=16).latency_us

The ``dist`` front lets scripts written against ``torch.distributed`` port
with few changes: one call stands for the call every rank makes, and time
advances on a simulated world clock::

    from kernbench.ccl import dist
    dist.init_process_group(system=system)               # every PE is a rank
    dist.all_reduce(np.zeros(24576, np.float32))         # 96 KiB per rank
    dist.barrier()
    dist.elapsed_us()
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from kernbench import _core
from kernbench.args import I64, Nodes, Optional, checked

__all__ = ["CollectiveResult", "algorithms", "all_reduce", "reduce_scatter", "all_gather", "broadcast", "alltoall",
           "collective", "dist"]

VerificationError = _core.VerificationError

#: The external reference for an all-reduce: another simulator, on its own
#: topology, at 96 KiB per PE (docs/references.md, `kernbench`). The
#: milestone-1h-ccl bench sets the default machine beside it; the
#: validation report lists it (kernbench.references).
REFERENCE_ALL_REDUCE_US = 366.0
REFERENCE_ALL_REDUCE_BYTES = 96 * 1024


def algorithms() -> list[dict]:
    """Every algorithm: name, description, the collectives it implements, and ``in_network`` (it reduces on
    switches that declare ``reduction:``, as nvls)."""
    return _core.ccl_algorithms()


@dataclass
class CollectiveResult:
    """What a collective did. Times in ps (``*_us`` helpers for microseconds)."""

    algorithm: str
    collective: str
    ranks: int
    bytes_per_pe: int
    latency_ps: int
    verified: bool
    slices: int
    phases: list[str]
    phase_windows: dict[str, tuple[int, int]]
    link_bytes: dict[str, int]
    op_counts: dict[str, int]
    run: Any = field(repr=False)  # kernbench.RunResult: op log, engines, traces
    model: str = "sip"            # sip | nccl (a GPU machine: src/ccl/nccl.hpp)
    protocol: str = ""            # nccl: ll | ll128 | simple
    channels: int = 1
    step_bytes: int = 0           # payload of one step (0: whole transfers)
    calls: int = 1
    predicted_ps: int = 0         # nccl: the tuner's time for the choice
    received: list[int] = field(default_factory=list)  # alltoall with counts: bytes delivered to each rank
    fidelity: str = "steps"       # nccl: steps (every protocol step simulated) | pipeline (a coflow per channel)

    @property
    def latency_us(self) -> float:
        return self.latency_ps / 1e6

    @property
    def algorithm_bandwidth(self) -> float:
        """Bytes per PE / latency, in bytes per second."""
        return self.bytes_per_pe / (self.latency_ps * 1e-12) if self.latency_ps else 0.0

    def phase_times_ps(self) -> dict[str, int]:
        """Duration (last end - first start) of each phase, in order."""
        return {p: self.phase_windows[p][1] - self.phase_windows[p][0] for p in self.phases}

    def phases_df(self):
        import pandas as pd

        return pd.DataFrame(
            [{"phase": p, "start_us": self.phase_windows[p][0] / 1e6, "end_us": self.phase_windows[p][1] / 1e6,
              "duration_us": (self.phase_windows[p][1] - self.phase_windows[p][0]) / 1e6} for p in self.phases])

    def summary(self) -> dict:
        """A flat dict for tables and sweep.json."""
        out = {"algorithm": self.algorithm, "collective": self.collective, "ranks": self.ranks,
               **({"protocol": self.protocol, "channels": self.channels, "fidelity": self.fidelity}
                  if self.model == "nccl" else {}),
               "bytes_per_pe": self.bytes_per_pe, "latency_us": self.latency_us,
               "algbw_GBps": self.algorithm_bandwidth / 1e9, "verified": self.verified}
        for p, d in self.phase_times_ps().items():
            out[f"phase_{p}_us"] = d / 1e6
        for cls, b in sorted(self.link_bytes.items()):
            out[f"bytes_{cls}"] = b
        return out


def _core_system(system):
    core = system._core if hasattr(system, "_core") else system
    if not isinstance(core, _core.System):
        raise _core.UsageError(f"system must be a kernbench.System, got {type(system).__name__}")
    return core


_PES = Optional(Nodes())  # None: every PE; [] is refused by the core, naming it


@checked("ccl.collective", pes=_PES)
def collective(system, what: str, bytes_per_pe: int, *, algorithm: str = "ring", buffer: str | None = None,
               pes: Sequence[int | str] | None = None, grid: tuple[int, int] | None = None, inter: str | None = None,
               pieces: int = 4, root: int = 0, verify: str = "auto", protocol: str = "auto", channels: int = 0,
               calls: int = 1, host_threads: int = 0,
               counts: Sequence[Sequence[int]] | None = None, fidelity: str = "auto") -> CollectiveResult:
    """Run one collective (``all_reduce``, ``reduce_scatter``, ``all_gather``, ``broadcast``, ``alltoall``) on
    ``system``. ``alltoall`` takes ``algorithm="pairwise"`` (or ``auto``): each rank's buffer is one block per
    rank, block j going to rank j, out of place (a receive buffer of the same size beside it).

    ``pes``: the ranks (node names or ids, in rank order; default every PE). ``buffer``: ``sram`` (the PE
    scratch; must fit) or ``hbm`` (each PE's HBM slice); default ``kernbench.program.default_buffer(system)``: hbm
    on a GPU machine. ``grid``: (w, h) of the 2-D algorithms (default the
    most square). ``inter``: lrab's exchange across SIPs (``ring``/``torus``/``mesh``; default the machine's).
    ``pieces``: pipeline pieces of chains and trees, chunks per switch of ``nvls`` (on a GPU machine NCCL's own:
    steps, channels and ``nccl.nvls_chunk`` set the cut).
    ``verify``: ``auto`` checks the schedule symbolically when the state is small, ``on`` always, ``off`` never.

    On a GPU machine (``pe.target: gpu``) the collective runs as NCCL runs it (docs/ccl.md, "On a GPU
    machine"): ``algorithm="auto"`` takes the tuner's ring, tree or nvls and ``protocol`` (``auto``, ``ll``,
    ``ll128``, ``simple``) its protocol; ``channels`` (0: NCCL's count for the size); ``calls`` back to back
    on one stream (latency: the steady-state time per call, as nccl-tests reports it); ``host_threads``
    launching the ranks' kernels (0: one per rank; nccl-tests ``-t 1 -g 4`` is 1).

    ``fidelity`` (GPU machines; docs/ccl.md, "Fidelity"): ``steps`` simulates every protocol step of every channel
    (and checks the schedule symbolically); ``pipeline`` runs each channel as one coflow over its hops on the flow
    fabric (ring, and tree across boxes; thousands of GPUs in seconds, not checked symbolically); ``auto`` (the
    default) takes the pipeline across boxes on a flow fabric where the steps would pass a million sends. The
    result's ``fidelity`` says which ran.

    ``counts`` (alltoall only; NCCL's grouped sends of uneven sizes, an MoE dispatch): ``counts[i][j]`` is the bytes
    rank i sends rank j (the diagonal stays local); ``bytes_per_pe`` is then only the nominal size. No symbolic check
    runs: the bytes the run delivered to each rank (``received``) are checked against the column sums.
    """
    from kernbench.program import RunResult
    from kernbench.program import default_buffer as _default_buffer

    # Numbers go to the core as given: it refuses fractions, bools and strings
    # (nothing is truncated). pes=None means every PE; an empty list is an error.
    if grid is not None:
        if isinstance(grid, (str, bytes)) or not hasattr(grid, "__len__") or len(grid) != 2:
            raise _core.UsageError(f"collective: grid must be a (w, h) pair, got {grid!r}")
        gw, gh = (I64(v, "ccl.collective", f"grid[{i}]") for i, v in enumerate(grid))
    else:
        gw, gh = 0, 0
    flat: list[int] = []
    if counts is not None:
        rows = [list(r) for r in counts]
        if any(len(r) != len(rows) for r in rows):
            raise _core.UsageError(f"collective: counts must be a square matrix (one row per rank), got rows of "
                                   f"{sorted({len(r) for r in rows})} for {len(rows)} rows")
        flat = [I64(v, "ccl.collective", f"counts[{i}][{j}]") for i, r in enumerate(rows) for j, v in enumerate(r)]
    core = _core.run_collective(_core_system(system), what, algorithm, bytes_per_pe, pes, buffer or _default_buffer(system), gw, gh,
                                inter or "", pieces, root,
                                verify, protocol, channels, calls, host_threads, flat, fidelity)
    return CollectiveResult(
        algorithm=core.algorithm, collective=core.collective, ranks=core.ranks, bytes_per_pe=core.bytes_per_pe,
        latency_ps=core.latency_ps, verified=core.verified, slices=core.slices, phases=list(core.phases),
        phase_windows={k: tuple(v) for k, v in core.phase_windows.items()}, link_bytes=dict(core.link_bytes),
        op_counts=dict(core.op_counts), run=RunResult(core.run, system), model=core.model, protocol=core.protocol,
        channels=core.channels, step_bytes=core.step_bytes, calls=core.calls, predicted_ps=core.predicted_ps,
        received=list(core.received), fidelity=core.fidelity)


@checked("ccl.all_reduce", pes=_PES)
def all_reduce(system, bytes_per_pe: int, algorithm: str = "ring", **kw) -> CollectiveResult:
    """Every rank ends with the sum over ranks of every rank's buffer."""
    return collective(system, "all_reduce", bytes_per_pe, algorithm=algorithm, **kw)


@checked("ccl.reduce_scatter", pes=_PES)
def reduce_scatter(system, bytes_per_pe: int, algorithm: str = "ring", **kw) -> CollectiveResult:
    """Every rank ends with its part of the sum (which part: the algorithm's)."""
    return collective(system, "reduce_scatter", bytes_per_pe, algorithm=algorithm, **kw)


@checked("ccl.all_gather", pes=_PES)
def all_gather(system, bytes_per_pe: int, algorithm: str = "ring", **kw) -> CollectiveResult:
    """Every rank starts with its part and ends with all of them."""
    return collective(system, "all_gather", bytes_per_pe, algorithm=algorithm, **kw)


@checked("ccl.alltoall", pes=_PES)
def alltoall(system, bytes_per_pe: int, algorithm: str = "auto", **kw) -> CollectiveResult:
    """Rank i's block j (of ``bytes_per_pe / ranks``) ends in rank j's receive buffer as block i (NCCL's grouped
    send/recv; on a GPU machine its p2p channels and protocol)."""
    return collective(system, "alltoall", bytes_per_pe, algorithm=algorithm, **kw)


@checked("ccl.broadcast", pes=_PES)
def broadcast(system, bytes_per_pe: int, algorithm: str = "double_binary_tree", root: int = 0, **kw) -> CollectiveResult:
    """Every rank ends with rank ``root``'s buffer."""
    return collective(system, "broadcast", bytes_per_pe, algorithm=algorithm, root=root, **kw)


class _World:
    """The simulated process group behind ``dist``: a machine, ranks, a world clock."""

    def __init__(self, system, pes, algorithm, buffer):
        self.system = system
        self.pes = list(pes) if pes is not None else None
        self.algorithm = algorithm
        self.buffer = buffer
        if self.pes is None:
            nodes = _core_system(system).nodes()
            self.size = sum(1 for k in nodes["kind"] if k == "pe")
        else:
            self.size = len(self.pes)
        self.history: list[CollectiveResult] = []

    def now_ps(self) -> int:
        return _core_system(self.system).now


class _Dist:
    """A torch.distributed-shaped front over one simulated world.

    Each call stands for the same call on every rank (SPMD); it runs the
    collective on the machine from the current simulated time and returns its
    CollectiveResult (``async_op`` is accepted for compatibility: the work is
    done when the call returns). Tensors are anything with ``nbytes`` (numpy,
    torch) or a byte count."""

    class ReduceOp:
        SUM = "sum"

    def __init__(self):
        self._world: _World | None = None

    def init_process_group(self, backend: str = "kernbench", *, system=None, pes=None, algorithm: str = "ring",
                           buffer: str | None = None, world_size: int | None = None, rank: int | None = None, **_: Any):
        if system is None:
            from kernbench.system import System

            system = System.load()
        self._world = _World(system, pes, algorithm, buffer)
        if world_size is not None and world_size != self._world.size:
            raise _core.UsageError(f"init_process_group: world_size={world_size} but the machine gives "
                                   f"{self._world.size} ranks (pass pes=[...] to choose them)")

    def is_initialized(self) -> bool:
        return self._world is not None

    def _w(self) -> _World:
        if self._world is None:
            raise _core.UsageError("the default process group is not initialized: call init_process_group() first")
        return self._world

    def get_world_size(self) -> int:
        return self._w().size

    def get_rank(self) -> int:
        return 0  # the script plays every rank at once

    @staticmethod
    def _nbytes(tensor) -> int:
        # A tensor's nbytes, or a byte count under the bindings' one rule
        # (an int, or an integral float; never truncated).
        if hasattr(tensor, "nbytes"):
            return _core._int_arg(tensor.nbytes, "tensor.nbytes")
        return _core._int_arg(tensor, "tensor (a byte count)")

    @classmethod
    def _total(cls, what: str, tensors) -> int:
        """The bytes of a list of tensors (or byte counts); anything else is a UsageError naming the call."""
        if isinstance(tensors, (str, bytes, dict)) or not hasattr(tensors, "__iter__"):
            raise _core.UsageError(f"{what}: give a list of tensors (or byte counts), got {type(tensors).__name__} "
                                   f"{tensors!r}"[:200])
        return sum(cls._nbytes(t) for t in tensors)

    def _run(self, what: str, tensor, algorithm=None, **kw) -> CollectiveResult:
        w = self._w()
        r = collective(w.system, what, self._nbytes(tensor), algorithm=algorithm or w.algorithm, buffer=w.buffer,
                       pes=w.pes, **kw)
        w.history.append(r)
        return r

    def all_reduce(self, tensor, op: str = "sum", group=None, async_op: bool = False, algorithm: str | None = None):
        if op != "sum":
            raise _core.UsageError(f"all_reduce: only ReduceOp.SUM is modelled, got {op!r}")
        return self._run("all_reduce", tensor, algorithm)

    def reduce_scatter(self, output, input_list=None, op: str = "sum", group=None, async_op: bool = False,
                       algorithm: str | None = None):
        total = self._total("reduce_scatter", input_list) if input_list is not None else self._nbytes(output)
        return self._run("reduce_scatter", total, algorithm)

    def all_gather(self, tensor_list, tensor=None, group=None, async_op: bool = False, algorithm: str | None = None):
        total = (self._nbytes(tensor) * self._w().size if tensor is not None
                 else self._total("all_gather", tensor_list))
        return self._run("all_gather", total, algorithm)

    def broadcast(self, tensor, src: int = 0, group=None, async_op: bool = False, algorithm: str | None = None):
        return self._run("broadcast", tensor, algorithm or "double_binary_tree", root=src)

    def all_to_all_single(self, output, input, output_split_sizes=None, input_split_sizes=None, group=None,
                          async_op: bool = False, algorithm: str | None = None):
        """Equal splits only: ``input`` is cut into one block per rank (uneven splits are not modelled)."""
        if output_split_sizes is not None or input_split_sizes is not None:
            raise _core.UsageError("all_to_all_single: only equal splits are modelled (give no split sizes)")
        return self._run("alltoall", input, algorithm or "pairwise")

    def all_to_all(self, output_tensor_list, input_tensor_list, group=None, async_op: bool = False,
                   algorithm: str | None = None):
        self._total("all_to_all", input_tensor_list)
        sizes = {self._nbytes(t) for t in input_tensor_list}
        if len(input_tensor_list) != self._w().size or len(sizes) != 1:
            raise _core.UsageError(f"all_to_all: give one equal-sized input tensor per rank ({self._w().size}), got "
                                   f"{len(input_tensor_list)} of sizes {sorted(sizes)}")
        return self._run("alltoall", sizes.pop() * len(input_tensor_list), algorithm or "pairwise")

    def barrier(self, group=None, async_op: bool = False):
        """A barrier is an all-reduce of one byte (the cheapest message that joins every rank)."""
        return self._run("all_reduce", 1, "double_binary_tree")

    def elapsed_us(self) -> float:
        """Simulated time of the world so far."""
        return self._w().now_ps() / 1e6

    def history(self) -> list[CollectiveResult]:
        return list(self._w().history)

    def destroy_process_group(self) -> None:
        self._world = None


dist = _Dist()
