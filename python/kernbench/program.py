"""Programs from Python: build a DAG of ops on PEs, run it, read the results.

    sys = kernbench.System.load(set={"system.sips.w": 1, "system.sips.h": 1})
    prog = kernbench.Program(sys, "demo")
    a = prog.dma("sip0.cube0.pe0", src="sip0.cube0.hbm_ctrl.pe0", dst="sip0.cube0.pe0", bytes=16384, tag="load")
    g = prog.compute("sip0.cube0.pe0", flops=2 * 64**3, precision="fp16", deps=[a], tag="compute")
    res = prog.run()

Whole kernels and collectives compose the same way, each one handle:

    pes = sys.pes()[:8]
    mm = prog.gemm(pes, 4096, 4096, 4096, precision="fp16")              # the GEMM kernel model
    ar = prog.all_reduce(pes, 1 << 20, algorithm="ring", deps=[mm])      # then a collective
    at = prog.attention("prefill", 1, t_q=1024, s_kv=1024, deps=[ar])    # a GQA case
    res.ops_df(); res.log_df(); res.to_chrome_trace("trace.json")   # Perfetto / chrome://tracing

Nodes are given by name or id, tags by label; ops return integer handles
that later ops list in ``deps``. A kernel or a collective is appended as
its whole program (the one the benches run); its handle (a ``Handle``)
stands for the ops that finish it, and adds no op of its own.
"""

from __future__ import annotations

import weakref
from pathlib import Path
from typing import Any, Iterable, Sequence, Union

from kernbench import _core
from kernbench import atomic_output as kio
from kernbench.args import NODE, SIZE, Deps, Nodes, Text, Whole, check, checked
from kernbench.trace import link_counter_events, op_trace

Node = Union[int, str]
#: The order of a run's engine tracks in a trace (a GPU: its host launches, its SMs); other engines after them.
ENGINE_ORDER = ("pe_cpu", "dma", "gemm", "vector", "ipcq", "ipcq_rx", "launch", "sm")


def default_buffer(system) -> str:
    """Where a collective's buffer lives unless asked: ``hbm`` on a GPU machine (a framework's tensors are in device
    memory), ``sram`` (the PE scratch) elsewhere."""
    core = system._core if hasattr(system, "_core") else system
    return "hbm" if _core.exec_target(core) == "gpu" else "sram"


class Op(int):
    """An op's id, as prog.dma / compute / ... return it: an int that knows its Program (``program``), so a
    later op of another Program cannot list it in ``deps``. Each Program's ids are of its own subclass
    (``_op_type``), which holds the Program: an id is then a bare int, made without a Python call or a dict of its
    own (a lowering makes 10**5 to 10**6 of them)."""

    __slots__ = ()

    def __new__(cls, value: int, program: "Program"):
        return program._op_type(value)

    def __reduce__(self):
        return int, (int(self),)  # pickled (a sweep worker's result row) and copied as the plain id


def _op_type(program: "Program") -> type:
    """The Op subclass of ``program``'s ids: made by int's own constructor, knowing the Program by a weak reference
    (a Program and its ids' class would otherwise be a cycle, freed only by the garbage collector)."""
    ref = weakref.ref(program)
    return type("Op", (Op,), {"__slots__": (), "__new__": int.__new__, "program": property(lambda op: ref()),
                              "__module__": __name__})


class Handle:
    """What prog.gemm / all_reduce / ... / attention return: one handle for a whole appended sub-program.

    List it in a later op's ``deps=[...]`` of the same Program (it stands for the sub-program's sinks, the
    ops nothing in it waits for, so it adds no op and no time). ``ops`` is the range of its op ids (rows of
    ``RunResult.ops_df()``), ``sinks`` its last ops, ``program`` the Program it belongs to."""

    __slots__ = ("name", "first", "end", "sinks", "program")

    def __init__(self, name: str, first: int, end: int, sinks: tuple, program: "Program | None" = None):
        self.name, self.first, self.end, self.sinks, self.program = name, first, end, sinks, program

    def __reduce__(self):
        return Handle, (self.name, self.first, self.end, self.sinks)  # pickled without its Program

    @property
    def ops(self) -> range:
        return range(self.first, self.end)

    def __repr__(self) -> str:
        return f"<Handle {self.name!r}: ops {self.first}..{self.end - 1}, {len(self.sinks)} sinks>"


class Program:
    """A Program bound to a System, so nodes can be named; it runs on that System only (its node ids are
    that machine's), and its op ids and handles are its own (another Program's in ``deps`` is refused)."""

    def __init__(self, system, name: str = "program"):
        if not isinstance(getattr(system, "_core", None), _core.System):  # a kernbench.System (or its kin)
            raise _core.UsageError(f"Program: system must be a kernbench.System (kernbench.System.load), got "
                                   f"{type(system).__module__}.{type(system).__name__}")
        self.system = system
        self._core = _core.Program(check("Program", "name", name, Text()))
        self._node_ids: dict[str, int] = {}
        self._subs: dict[tuple, tuple] = {}  # collective sub-programs and their sinks by their arguments
        self._op_type = _op_type(self)
        self._tags: dict[str, int] = {}  # tag label -> id (the core interns each label by a scan of its list)

    # ---- helpers ---------------------------------------------------------------
    def _id(self, node: Node, where: str = "Program", what: str = "node") -> int:
        if type(node) is str and node in self._node_ids:  # a name seen before: its id (a lowering names each
            return self._node_ids[node]                    # PE thousands of times)
        node = NODE(node, f"{self.name}: {where}", what)
        if not isinstance(node, str):
            return int(node)
        self._node_ids[node] = got = self.system.node_id(node)
        return got

    def _mine(self, d, where: str) -> None:
        """Refuse an op id or handle of another Program (it would bind to this one's unrelated ops)."""
        owner = getattr(d, "program", None)
        if owner is not None and owner._core is not self._core:
            raise _core.UsageError(
                f"{self.name}: {where}: {d!r} is an op of program {owner.name!r}, not of program {self.name!r} "
                "(a handle binds to the ops of the Program that made it only)")

    def _tag(self, tag: str | int | None) -> int:
        if tag is None:
            return 0
        if not isinstance(tag, str):
            return int(tag)
        got = self._tags.get(tag)
        if got is None:
            got = self._tags[tag] = self._core.tag(tag)
        return got

    def _deps(self, deps) -> list[int]:
        # Negative or non-integer handles get a clear error here; ids past the
        # end are refused by the C++ builder ("depends on op N, which does
        # not exist yet").
        out = []
        for d in deps:
            if type(d) is self._op_type:  # this Program's own op (the common case, checked first)
                out.append(int(d))
                continue
            self._mine(d, "dependency")
            if isinstance(d, Handle):
                out.extend(d.sinks)
                continue
            if isinstance(d, bool) or not isinstance(d, int) or d < 0:
                raise _core.UsageError(f"{self.name}: dependency {d!r} is not an op handle")
            out.append(int(d))
        return out

    def _op(self, value: int) -> Op:
        return self._op_type(value)

    @staticmethod
    def _model_deps(deps) -> list:
        """A lowering's own dependencies as the core takes them: op ids as they are (an ``Op`` is an int),
        handles by their sinks; no ownership or range check (the lowering made them all in this Program)."""
        out = []
        for d in deps:
            if type(d) is Handle:
                out.extend(d.sinks)
            else:
                out.append(d)
        return out

    def _moves(self, moves: Iterable[Sequence], where: str, what: str) -> list[tuple[int, int, int]]:
        if isinstance(moves, (str, bytes, dict)) or not hasattr(moves, "__iter__"):
            raise _core.UsageError(f"{where}: {what} must be a list of (src, dst, bytes), got {moves!r}")
        out = []
        for i, move in enumerate(moves):
            if isinstance(move, (str, bytes)) or not hasattr(move, "__len__") or len(move) != 3:
                raise _core.UsageError(f"{where}: {what}[{i}] must be a (src, dst, bytes) triple, got {move!r}")
            s, d, b = move
            out.append((self._id(s, where, f"{what}[{i}] src"), self._id(d, where, f"{what}[{i}] dst"),
                        SIZE(b, where, f"{what}[{i}] bytes")))
        return out

    def __len__(self) -> int:
        return len(self._core)

    @property
    def name(self) -> str:
        return self._core.name

    # ---- ops -------------------------------------------------------------------------
    @checked("Program.dma")
    def dma(self, agent: Node, src: Node, dst: Node, bytes: int, deps=(), name: str = "", tag=None) -> int:
        """Move `bytes` from `src` to `dst` with `agent`'s DMA engine (a read asks `src` first).

        Every op takes an optional ``name=`` (errors, traces and ``RunResult.ops_df()``'s name
        column) and, where it runs on an engine, ``tag=`` (a label; ``ops_df()``'s tag column)."""
        return self._op(self._core.dma(self._id(agent), self._id(src), self._id(dst), bytes, self._deps(deps),
                                       name, self._tag(tag)))

    @checked("Program.compute", flops=None)  # the core's check names it "gemm: flops"
    def compute(self, agent: Node, flops: float, precision: str = "fp16", deps=(), name: str = "", tag=None) -> int:
        """`flops` on `agent`'s GEMM engine at `precision` (one engine op; ``gemm()`` is the whole kernel)."""
        return self._op(self._core.gemm(self._id(agent), flops, precision, self._deps(deps), name, self._tag(tag)))

    @checked("Program.kernel", ctas=Whole(0, 2**31 - 1), sms=Whole(0, 2**31 - 1))
    def kernel(self, agent: Node, duration_ps: int, *, launch_ps: int = 0, flops: float = 0.0,
               precision: str = "bf16", bytes: int = 0, deps=(), name: str = "", tag=None, ctas: int = 0,
               sms: int = 0) -> int:
        """One GPU kernel priced by a kernel model (``_core.gpu_gemm(...)["duration_ps"]`` and its kin): a
        launch op of ``launch_ps`` on the agent's launch queue, after the agent's previous launch (none when
        0), then the kernel of ``duration_ps`` on its SM array after that launch and ``deps``. ``ctas`` and
        ``sms`` (a compute-bound kernel's CTAs and the SMs it was priced on; both 0 or both > 0): started while
        collectives' kernels hold ``h`` of the GPU's SMs it runs ceil(ctas / (sms - h)) waves instead of
        ceil(ctas / sms), its duration scaled by their ratio (docs/gpu-target.md). Returns the kernel op;
        neither pays a PE_CPU dispatch."""
        return self._op(self._core.kernel(self._id(agent), duration_ps, launch_ps, flops, precision, bytes,
                                          self._deps(deps), name, self._tag(tag), ctas, sms))

    def _kernel_from_model(self, agent: str, duration_ps: int, launch_ps: int, flops: float, precision: str,
                           nbytes: int, deps, name: str, tag: str, ctas: int = 0, sms: int = 0) -> Op:
        """``kernel()`` for a lowering whose figures come from a kernel model (whole, in range: the checks of
        ``kernel()`` cannot fail on them), without the per-argument checks: a model's lowering appends 10**5
        of them. ``agent`` is a node name, ``deps`` op ids or handles of this Program."""
        return self._op_type(self._core.kernel(self._node_ids.get(agent) or self._id(agent), duration_ps, launch_ps,
                                               flops, precision, nbytes, self._model_deps(deps), name,
                                               self._tags.get(tag) or self._tag(tag), ctas, sms))

    def _dma_from_model(self, agent: str, src: str, dst: str, nbytes: int, deps, name: str, tag: str) -> Op:
        """``dma()`` for a lowering's own transfer (node names, a whole byte count >= 1, deps of this Program),
        without the per-argument checks, as ``_kernel_from_model``."""
        return self._op(self._core.dma(self._id(agent), self._id(src), self._id(dst), nbytes,
                                       self._model_deps(deps), name, self._tag(tag)))

    def _barrier_from_model(self, agent: str, deps, name: str) -> Op:
        """``barrier()`` for a lowering's own join (a node name, deps of this Program), without the per-argument
        checks, as ``_kernel_from_model``."""
        return self._op_type(self._core.barrier(self._id(agent), self._model_deps(deps), name))

    # ---- whole kernels and collectives ----------------------------------------------
    def _append(self, sub, deps, name: str, per_agent: dict[int, list] | None = None, deps_of=None,
                sinks: Sequence[int] | None = None) -> "Handle":
        """Append a sub-program after `deps` (and its ops on an agent of ``per_agent`` after that agent's list);
        its handle stands for its sinks (no extra op, no extra time). ``deps_of``: how dependency lists become
        the core's (``_deps``, checked, unless given); ``sinks``: the sub-program's own (``sub.sinks()``)."""
        deps_of = deps_of or self._deps
        first = self._core.append(sub, deps_of(deps), {a: deps_of(d) for a, d in (per_agent or {}).items()})
        # The appended ops' sinks are the sub-program's, shifted: appending adds no op, and every dependency it adds
        # is on an op before ``first`` (Program::append); the core's sinks(first) would scan the whole program.
        own = sub.sinks() if sinks is None else sinks
        return Handle(name or sub.name, first, len(self._core), tuple(first + s for s in own), self)

    def _ids(self, pes, where: str = "Program", what: str = "pes") -> list[int]:
        """Node ids of a list of PEs (a lone one counts as one; None: none). ``[]`` is an error: say None."""
        if pes is None:
            return []
        pes = Nodes(empty=False, why_empty=" (pass None, or leave it out, for the default PEs)")(
            pes, f"{self.name}: {where}", what)
        return [self._id(p, where, what) for p in pes]

    @checked("Program.gemm")
    def gemm(self, pes, m: int, n: int, k: int, precision: str = "fp16", *, tile_m: int = 0, tile_n: int = 0,
             tile_k: int = 0, pinned: bool = False, buffers: int = 2, homes=None, deps=(), name: str = "") -> Handle:
        """C[m,n] = A[m,k] B[k,n] on `pes` (names or ids; the M x N split over them), the whole GEMM kernel
        model (the plan and program of the GEMM benches: tiles from each PE's HBM slice, N-buffered). Returns
        one handle."""
        ids = self._ids(pes, "Program.gemm")
        sub = _core.gemm_program(self.system._core, m, n, k, precision, ids, tile_m, tile_n, tile_k, pinned,
                                 buffers, self._ids(homes, "Program.gemm", "homes") if homes else [])
        return self._append(sub, deps, name)

    @checked("Program.collective")
    def collective(self, what: str, pes, bytes: int, *, algorithm: str = "ring", buffer: str | None = None,
                   grid_w: int = 0, grid_h: int = 0, inter: str = "", pieces: int = 4, root: int = 0, deps=(),
                   name: str = "", protocol: str = "auto", channels: int = 0, fidelity: str = "auto",
                   rank_deps=None) -> Handle:
        """One collective (`what`: all_reduce, reduce_scatter, all_gather, broadcast, alltoall) over `pes` in rank
        order (None: every PE), built by kernbench.ccl's algorithm (on a GPU machine as NCCL runs it: see
        kernbench.ccl.collective for ``algorithm="auto"``, ``protocol``, ``channels`` and ``fidelity``). Every rank
        waits for ``deps``; ``rank_deps`` (one list per PE of ``pes``) adds what each rank alone waits for: on a GPU
        a rank's NCCL kernel starts once its own inputs are ready and waits in the kernel for its peers, as a
        rank's kernel on its NCCL stream does. Returns one handle."""
        ids = self._ids(pes, f"Program.{what}") if pes is not None else None  # None: every PE; [] is an error
        if rank_deps is not None and (ids is None or len(rank_deps) != len(ids)):
            raise _core.UsageError(f"{self.name}: Program.{what}: rank_deps has {len(rank_deps)} lists for "
                                   f"{'every PE' if ids is None else f'{len(ids)} PEs'} (give one per PE of pes)")
        args = (what, algorithm, bytes, None if ids is None else tuple(ids), buffer or default_buffer(self.system),
                grid_w, grid_h, inter, pieces, root, protocol, channels, fidelity)
        return self._append_collective(args, deps, name, rank_deps, self._deps)

    def _collective_from_model(self, what: str, pes: Sequence[str], nbytes: int, *, algorithm: str, buffer: str,
                               fidelity: str, deps, name: str, rank_deps=None) -> Handle:
        """``collective()`` for a lowering's own collective (PE names, a whole byte count, deps of this Program,
        one ``rank_deps`` list per PE), without the per-argument checks, as ``_kernel_from_model``; the other
        arguments at collective()'s defaults."""
        ids = tuple(self._id(p) for p in pes)
        args = (what, algorithm, nbytes, ids, buffer, 0, 0, "", 4, 0, "auto", 0, fidelity)
        return self._append_collective(args, deps, name, rank_deps, self._model_deps)

    def _append_collective(self, args: tuple, deps, name: str, rank_deps, deps_of) -> Handle:
        """Append the collective of ``args`` (collective()'s, in its order, the PEs as ids), its sub-program
        built once per ``args``; ``deps_of`` turns dependency lists into the core's."""
        ids = args[3]
        per_agent = None if rank_deps is None else {a: d for a, d in zip(ids, rank_deps)}
        got = self._subs.get(args)
        if got is None:  # a collective's program is a function of its arguments and the machine: built once
            sub = _core.collective_program(self.system._core, args[0], args[1], args[2],
                                           None if ids is None else list(ids), *args[4:])
            got = sub, sub.sinks()
            if len(sub) <= 1 << 14 and len(self._subs) < 1 << 12:  # small ones (a big one is rarely repeated)
                self._subs[args] = got
        return self._append(got[0], deps, name, per_agent, deps_of, got[1])

    @checked("Program.all_reduce")
    def all_reduce(self, pes, bytes: int, algorithm: str = "ring", **kw) -> Handle:
        """Every rank ends with the sum of every rank's `bytes`-byte buffer (see collective())."""
        return self.collective("all_reduce", pes, bytes, algorithm=algorithm, **kw)

    @checked("Program.reduce_scatter")
    def reduce_scatter(self, pes, bytes: int, algorithm: str = "ring", **kw) -> Handle:
        """Each rank ends with its share of the sum (see collective())."""
        return self.collective("reduce_scatter", pes, bytes, algorithm=algorithm, **kw)

    @checked("Program.all_gather")
    def all_gather(self, pes, bytes: int, algorithm: str = "ring", **kw) -> Handle:
        """Each rank ends with every rank's share (see collective())."""
        return self.collective("all_gather", pes, bytes, algorithm=algorithm, **kw)

    @checked("Program.alltoall")
    def alltoall(self, pes, bytes: int, algorithm: str = "pairwise", **kw) -> Handle:
        """Rank i's block j of its `bytes`-byte buffer reaches rank j (see collective(), kernbench.ccl.alltoall)."""
        return self.collective("alltoall", pes, bytes, algorithm=algorithm, **kw)

    @checked("Program.broadcast")
    def broadcast(self, pes, bytes: int, algorithm: str = "double_binary_tree", root: int = 0, **kw) -> Handle:
        """Rank `root`'s buffer reaches every rank (see collective())."""
        return self.collective("broadcast", pes, bytes, algorithm=algorithm, root=root, **kw)

    @checked("Program.attention")
    def attention(self, phase: str, case: int, t_q: int, s_kv: int, *, tile_q: int = 256, tile_s: int = 256,
                  kv_buffers: int = 2, sip: int = 0, cubes=(), precision: str = "fp16", h_q: int = 8,
                  d_head: int = 128, elem_bytes: int = 2, pe_first: int = 0, pe_count: int = 0, deps=(),
                  name: str = "") -> Handle:
        """One GQA attention case (kernbench.gqa: phase prefill/decode, case 1..4) on the cubes (groups)
        of package `sip`: one KV group of `h_q` query heads of `d_head` (defaults: LLaMA's 8 x 128) on PEs
        `pe_first` .. `pe_first + pe_count - 1` of each cube (0: every PE from pe_first). Returns one handle."""
        sub = _core.gqa_program(self.system._core, phase, case, t_q, s_kv, tile_q, tile_s, kv_buffers, sip,
                                list(cubes), precision, h_q, d_head, elem_bytes, pe_first, pe_count)
        return self._append(sub, deps, name)

    @checked("Program.vector")
    def vector(self, agent: Node, bytes: int, deps=(), name: str = "", tag=None) -> int:
        """`bytes` through `agent`'s vector engine (softmax, elementwise)."""
        return self._op(self._core.vector(self._id(agent), bytes, self._deps(deps), name, self._tag(tag)))

    @checked("Program.alloc")
    def alloc(self, agent: Node, bytes: int, deps=(), name: str = "") -> int:
        """Claim scratch on `agent` (CapacityError past the PE's budget)."""
        return self._op(self._core.alloc(self._id(agent), bytes, self._deps(deps), name))

    @checked("Program.free", alloc=Deps.ids)
    def free(self, alloc: int, deps=(), name: str = "") -> int:
        """Return an alloc's scratch."""
        self._mine(alloc, "free")
        return self._op(self._core.free(int(alloc), self._deps(deps), name))

    @checked("Program.send")
    def send(self, agent: Node, peer: Node, bytes: int, key: int, deps=(), name: str = "", tag=None,
             source: Node | None = None) -> int:
        """IPCQ send of `bytes` to PE `peer`, in slot-sized segments (blocks while the slots there are full).

        `source` is where the payload is read (default: the agent's scratch; e.g. its HBM slice)."""
        return self._op(self._core.send(self._id(agent), self._id(peer), bytes, key, self._deps(deps), name,
                                        self._tag(tag), None if source is None else self._id(source)))

    @checked("Program.recv")
    def recv(self, agent: Node, peer: Node, key: int, deps=(), name: str = "", tag=None, mode: str = "consume") -> int:
        """IPCQ recv on `agent` of `peer`'s send with this key.

        mode: ``consume`` (read each slot out of scratch), ``reduce`` (add each slot into the buffer on the
        vector engine) or ``no_consume`` (free slots unread: a diagnostic to compare with raw DMA)."""
        return self._op(self._core.recv(self._id(agent), self._id(peer), key, self._deps(deps), name,
                                        self._tag(tag), mode))

    @checked("Program.barrier")
    def barrier(self, agent: Node, deps, name: str = "") -> int:
        """Join dependencies (no work)."""
        return self._op(self._core.barrier(self._id(agent), self._deps(deps), name))

    @checked("Program.composite", loads=None, stores=None)  # checked by _moves, naming the item
    def composite(self, agent: Node, tiles: int, loads, flops: float = 0.0, *, compute: str = "gemm",
                  precision: str = "fp16", vector_bytes: int = 0, stores=(), buffers: int = 2, deps=(),
                  name: str = "", tag=None, load_tag=None, compute_tag=None, store_tag=None) -> int:
        """A tile pipeline dispatched once: per tile `loads` (src, dst, bytes), compute, `stores`; N-buffered."""

        def stage(t):
            return -1 if t is None else self._tag(t)

        where = f"{self.name}: Program.composite"
        return self._op(self._core.composite(
            self._id(agent), tiles, self._moves(loads, where, "loads"), compute, flops, precision, vector_bytes,
            self._moves(stores, where, "stores"), buffers, self._deps(deps), name, self._tag(tag), stage(load_tag),
            stage(compute_tag), stage(store_tag)))

    @checked("Program.depend", op=Deps.ids, on=Deps.ids)
    def depend(self, op: int, on: int) -> None:
        """Add a dependency after the fact (a cycle ends the run in a DeadlockError)."""
        self._mine(op, "depend")
        self._mine(on, "depend")
        self._core.depend(int(op), int(on))

    def run(self) -> "RunResult":
        """Run on the bound System from its current time."""
        return self.system.run_program(self)


class RunResult:
    """What a Program did: op timings, engine occupancy, counts, the op log, traces."""

    def __init__(self, core: _core.RunResult, system, program: _core.Program | None = None):
        self._core = core
        self.system = system
        self.program_core = program  # the Program that ran (energy, HBM traffic)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._core, name)

    @property
    def makespan_ns(self) -> float:
        return self._core.makespan_ps / 1e3

    def critical_path(self):
        """The chain of ops and waits that sets the makespan (docs/critical-path.md): a
        kernbench.critical_path.CriticalPath with .steps, .share, .length, .summary()."""
        from kernbench import critical_path

        return critical_path.of(self)

    def energy(self) -> dict:
        """Energy of this run (docs/energy.md): total, dynamic, static joules, by label and by op kind."""
        from kernbench import energy

        return energy.report(self)

    def hbm_traffic(self) -> list[dict]:
        """Bytes read / written per pseudo-channel of every HBM slice this run's moves touched."""
        from kernbench import energy

        return energy.hbm_traffic(self)

    def ops_df(self):
        """One row per program op, by id: name (as given to ``name=``), kind, tag (label), pe, then
        ready, start, end (ps).

        Name, kind, tag and pe come from the Program that ran; a result built without it (a
        kernel that made its Program in C++) has them empty.
        """
        import pandas as pd

        times = self._core.ops()
        n = len(times["start_ps"])
        if self.program_core is not None and hasattr(self.program_core, "op_columns"):
            cols = self.program_core.op_columns()
            tags = self._core.tags
            info = {
                "name": list(cols["name"][:n]),
                "kind": list(cols["kind"][:n]),
                "tag": [_tag_text(tags, t) for t in cols["tag"][:n]],
                "pe": [self.system.node_name(a) for a in cols["agent"][:n]],
            }
        else:
            info = {k: [""] * n for k in ("name", "kind", "tag", "pe")}
        return pd.DataFrame({**info, **times})

    def log_df(self):
        """One row per op and pipeline stage, with kind, tag, PE and engine names."""
        import pandas as pd

        log = self._core.log()
        df = pd.DataFrame({k: v.copy() for k, v in log.items()})
        kinds = self._core.kind_names
        tags = self._core.tags
        eng = self._core.engines()
        df["kind_name"] = [kinds[k] for k in df["kind"]]
        df["tag_name"] = [_tag_text(tags, t) for t in df["tag"]]
        df["engine"] = [eng["name"][r] if r >= 0 else "" for r in df["resource"]]
        df["name"] = self._core.log_names
        df["pe"] = [self.system.node_name(a) for a in df["agent"]]
        return df

    def engines_df(self):
        """Per PE engine: busy time, grants, queueing wait, utilisation over the makespan."""
        import pandas as pd

        df = pd.DataFrame(self._core.engines())
        span = max(self._core.makespan_ps, 1)
        df["utilization"] = df["busy_ps"] / (span * df["capacity"])
        return df

    def to_trace(self, label: str | None = None) -> dict:
        """The Trace Event JSON of the run (kernbench.trace's op-log writer, as every model's): one process
        per agent (PE), one track per engine unit in ``ENGINE_ORDER``, a "control" track for ops that hold
        no engine, one event per op-log row, and the critical path."""
        core = self._core
        log = core.log()
        eng = core.engines()
        kinds = core.kind_names
        tags = core.tags
        names = core.log_names
        n = len(log["op"])
        res = [int(x) for x in log["resource"]]
        agents = [int(x) for x in log["agent"]]

        def track_of(r: int):
            if r < 0:
                return None
            kind = str(eng["engine"][r])
            return (ENGINE_ORDER.index(kind) if kind in ENGINE_ORDER else len(ENGINE_ORDER), kind)

        track = [track_of(r) for r in res]
        units: dict = {}
        for r in set(res):
            if r >= 0:
                t = track_of(r)
                units[t] = max(units.get(t, 1), int(eng["capacity"][r]))

        def event(i):
            kind_name = kinds[int(log["kind"][i])]
            t = int(log["tag"][i])
            return names[i] or kind_name, kind_name, {
                "op": int(log["op"][i]), "kind": kind_name, "tag": _tag_text(tags, t),
                "bytes": int(log["bytes"][i]), "work": float(log["work"][i]), "issue_ps": int(log["issue_ps"][i])}

        critical = _core.critical_path(core) if isinstance(core, _core.RunResult) and int(core.makespan_ps) > 0 \
            else None
        trace = op_trace(n, start=[int(x) for x in log["start_ps"]], end=[int(x) for x in log["end_ps"]],
                         process=agents, track=track, units=units, event=event,
                         process_names={a: self.system.node_name(a) for a in set(agents)}, critical=critical,
                         control_order=len(ENGINE_ORDER) + 1,
                         other={"panel": label, "program": core.program, "makespan_ps": int(core.makespan_ps),
                                "source": "program"})
        # Link tracks: per channel its utilisation over the run (packet fabric), a process after the others.
        links = core.links()
        pid = 1 + max((e["pid"] for e in trace["traceEvents"] if "pid" in e), default=0)
        counters = link_counter_events(links, int(core.start_ps), int(core.end_ps), pid)
        trace["traceEvents"] += counters
        trace["otherData"]["link_tracks"] = len(set(e["name"] for e in counters if e["ph"] == "C"))
        trace["otherData"]["link_bin_ps"] = int(links["bin_ps"])
        return trace

    def chrome_trace(self) -> dict:
        """The Trace Event format (kernbench.trace, the one writer of every model's traces): one process
        per PE, one track per engine unit, one event per op-log row, and the critical path."""
        return self.to_trace(None)

    def to_chrome_trace(self, path: str | Path) -> Path:
        """Write the Chrome/Perfetto trace (JSON, atomically)."""
        return kio.write_json(Path(path), self.chrome_trace())


def _tag_text(tags: list[str], t: int) -> str:
    """A tag id's label; an id no label was made for (``tag=1000000``) shows as its number, never as no tag."""
    t = int(t)
    return tags[t] if 0 <= t < len(tags) else ("" if t < 0 else str(t))
