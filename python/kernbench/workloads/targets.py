"""Execution targets: what each op kind of a workload graph becomes on a machine (docs/architecture.md,
"Execution targets").

The lowering (kernbench.workloads.lower) walks the graph, places ops on ranks and keeps the books (GEMM
FLOPs, spans, per-PE order); for every op it asks the machine's target for the kernel that runs it. A
target is one object with four methods, each given the lowerer ``L`` (its program, system, plan) and
returning the handle that finishes the op:

* ``gemm(L, pe, m, n, k, op, deps)``
* ``vector(L, pe, elements, row, esize, loads, passes, stores, name, deps)`` -- a memory-bound op
* ``copy(L, pe, nbytes, name, deps)``
* ``attention(L, i, group, deps, pass_)`` -- rank-indexed handle lists

``SipTarget`` is the KernBench PE (tiles through the PE engines, a PE_CPU dispatch per command, scratch
budgets, DMA channels); ``GpuTarget`` runs kernels priced by the GPU kernel models of src/kernels/gpu
(``_core.gpu_gemm``, ``gpu_stream``, ``gpu_attention``), each with its launch cost, on the GPU's SM
array. The K200 host is the third target (``kernbench.k200_lowering.K200Target``, the platform's own
lowering): the same op kinds, each a method, but it emits the steps of one K200 stream instead of Program
ops, so a K200 machine runs a graph with ``kernbench.k200.run_ops`` rather than ``lower``.
``target_for(system)`` picks by the machine (a ``k200:`` section, else ``pe.target``); ``TARGETS``
registers them by name.
"""

from __future__ import annotations

from typing import Any

from kernbench import _core
from kernbench.workloads.gpu_kernels import DEFAULT_ATTENTION, scale_attention
from kernbench.workloads.graph import DTYPE_BYTES, WorkloadError

__all__ = ["SipTarget", "GpuTarget", "TARGETS", "target_for", "is_k200", "LAUNCHES", "gpu_attention_plan",
           "mean_head_dim"]

VECTOR_TILE = 64 * 1024  # target bytes per vector tile and load stream (src/workloads/llama.cpp kVectorTile)
COPY_TILE = 256 * 1024  # most bytes per tile of a copy through scratch (copy(): two or three tiles in flight)
LAUNCHES = ("host", "graph")


def _divisor_at_most(n: int, cap: int) -> int:
    for d in range(min(n, max(cap, 1)), 1, -1):
        if n % d == 0:
            return d
    return 1


class SipTarget:
    """The SIP PE: GEMM tiles within scratch, vector tile pipelines, DMA copies, the GQA cases."""

    name = "sip"

    def gemm(self, L, pe, m, n, k, op, deps):
        return L.prog.gemm([pe], m, n, k, precision=L.prec(op), deps=deps, name=op.name)

    def vector(self, L, pe, elements, row, esize, loads, passes, stores, name, deps):
        """The llama layer's vector tile pipeline: HBM -> scratch -> vector engine -> HBM."""
        row = max(1, min(row, elements))
        rows = -(-elements // row)
        row_bytes = row * esize
        # 64 KiB tiles as the llama layer (<= 4 streams); more streams (Adam's 8) shrink the tile so the
        # double-buffered scratch stays within 512 KiB.
        target = min(VECTOR_TILE, (512 * 1024) // (2 * (loads + stores)))
        per_tile = _divisor_at_most(rows, max(1, target // row_bytes))
        tiles, tb = rows // per_tile, per_tile * row_bytes
        hbm = L.hbm(pe)
        a = L.prog.alloc(pe, 2 * (loads + stores) * tb, deps=deps, name=name + " scratch")
        c = L.prog.composite(pe, tiles, [(hbm, pe, tb)] * loads, compute="vector",
                             vector_bytes=max(1, passes) * tb, stores=[(pe, hbm, tb)] * stores, buffers=2,
                             deps=[a], name=name, tag="vector", load_tag="vector load",
                             compute_tag="vector", store_tag="vector store")
        return L.prog.free(a, deps=[c], name="free " + name + " scratch")

    def copy(self, L, pe, nbytes, name, deps):
        """HBM -> scratch -> HBM in tiles of at most COPY_TILE (a layout copy, an im2col): tile j+1 loads while
        tile j is stored; each store follows the one before it, so the last one ends the copy."""
        hbm = L.hbm(pe)
        tiles = -(-nbytes // COPY_TILE)
        L.count("dma", 2 * tiles)
        load, store = None, None
        for j in range(tiles):
            b = nbytes // tiles + (1 if j < nbytes % tiles else 0)
            load = L.prog.dma(pe, src=hbm, dst=pe, bytes=b, deps=deps if load is None else [load], name=name,
                              tag="copy")
            store = L.prog.dma(pe, src=pe, dst=hbm, bytes=b, deps=[load] + ([store] if store else []),
                               name=name, tag="copy")
        return store

    def attention(self, L, i, group, deps, pass_):
        """The GQA cases on the group's PEs; the backward (dQ, dK, dV, dS: 2x the forward's two matmuls) is two
        forward programs, one after the other."""
        if pass_ == "backward":
            return self._attention(L, i, group, self._attention(L, i, group, deps))
        return self._attention(L, i, group, deps)

    def _attention(self, L, i, group, deps):
        op, a = L.g.ops[i], L.g.ops[i].attrs
        tp = len(group)
        B, H, KV = int(a["batch"]), int(a["heads"]), int(a["kv_heads"])
        q, s, d = int(a["q_len"]), int(a["kv_len"]), mean_head_dim(a)  # MLA's two head dims: their mean
        _check_heads(L, i, H, KV, tp)
        G = max(1, tp // KV)
        per_rank = max(1, KV // tp)
        h_q = H // KV
        e = L.esize(op)
        phase = "decode" if q == 1 else "prefill"
        case = 2 if G == 1 else (1 if phase == "prefill" else 4)
        if G > 1 and phase == "prefill" and q % G:
            raise L.err(i, f"prefill case 1 splits the {q} query tokens over the {G} PEs of a KV group")
        res: list[list] = [list(x) for x in deps]
        for g in range(KV):
            first = g * G if G > 1 else g // per_rank
            gpes = group[first:first + G]
            p0, c0, i0 = L.where[gpes[0]]
            for j, pe in enumerate(gpes[1:], 1):
                pj = L.where[pe]
                if pj != (p0, c0, i0 + j):
                    raise L.err(i, f"KV group {g} needs {G} consecutive PEs of one cube, got {gpes[0]} ... {pe}")
            for _ in range(B):
                chain = sum((L.chain.get(pe, []) for pe in gpes), [])
                dd = chain + sum((deps[group.index(pe)] for pe in gpes), [])
                h = L.prog.attention(phase, case, q, s, tile_q=L.tiles[0], tile_s=L.tiles[1], sip=p0,
                                     cubes=[c0], precision=L.prec(op), h_q=h_q, d_head=d, elem_bytes=e,
                                     pe_first=i0, pe_count=G, deps=dd, name=op.name)
                L.count("attention")
                for pe in gpes:
                    L.chain[pe] = [h]
            if G > 1:  # re-layout O from the case's split to heads per rank (llama.cpp)
                cols = h_q * d // G
                per_pair = (B * (q // G) * cols * e) if phase == "prefill" else B * q * cols * e
                got: dict[str, list] = {}
                for si, src in enumerate(gpes):
                    if phase == "decode" and si != 0:
                        continue  # the case-4 writer holds O
                    for dst in gpes:
                        if dst == src:
                            continue
                        k = L.key
                        L.key -= 1
                        L.prog.send(src, dst, per_pair, k, deps=L.chain[src], name=op.name + " relayout",
                                    tag="relayout", source=L.hbm(src))
                        got.setdefault(dst, []).append(L.prog.recv(dst, src, k, deps=L.chain[dst],
                                                                   name=op.name + " relayout", tag="relayout"))
                        L.count("send")
                for dst, recvs in got.items():
                    L.chain[dst] = L.chain[dst] + recvs
            for pe in gpes:
                res[group.index(pe)] = list(L.chain[pe])
        return res


def _check_heads(L, i, H, KV, tp):
    if H % KV:
        raise L.err(i, f"{H} query heads are not a multiple of the {KV} KV heads")
    if H % tp:
        raise L.err(i, f"tp = {tp} does not divide the {H} query heads (every rank gets whole heads)")
    if not (KV % tp == 0 or tp % KV == 0):
        raise L.err(i, f"tp = {tp} neither divides nor is a multiple of the {KV} KV heads")


class GpuTarget:
    """A GPU: every op one kernel, priced by src/kernels/gpu and launched from the host or a CUDA graph.

    ``launch``: ``"host"`` (eager: ``gpu.launch_host`` of host time per kernel, overlapping the GPU) or
    ``"graph"`` (a graph replay: ``gpu.launch_graph`` per kernel). No PE_CPU dispatch, no scratch, no DMA
    channels: memory-bound ops stream their bytes at ``gpu.stream_efficiency`` of the memory bandwidth.
    """

    name = "gpu"

    def __init__(self, launch: str = "host"):
        if launch not in LAUNCHES:
            raise WorkloadError(f"launch {launch!r}: expected one of {', '.join(LAUNCHES)}")
        self.launch = launch
        self._spec: dict[str, dict] = {}
        self._gpu: dict[str, tuple[int, int, int]] = {}  # pe -> (its launch ps, its SMs, the number of its spec)
        self._specs: dict[tuple, int] = {}  # a spec (gpu_spec past the names) -> its number
        # kernel plans and their costs by (spec number, kernel, shape): a model's layers repeat the same ones
        self._plans: dict[tuple, tuple[dict, tuple[int, int, int]]] = {}

    def spec(self, L, pe) -> dict:
        if pe not in self._spec:
            self._spec[pe] = _core.gpu_spec(L.system._core, pe)
        return self._spec[pe]

    def _gpu_of(self, L, pe) -> tuple[int, int, int]:
        """``pe``'s launch cost (ps), SMs and spec number. The kernel models read a GPU's spec only (its name only
        in their errors), so GPUs whose gpu_spec agrees past the names share their plans: one number per spec
        without ``name`` and ``memory`` (the memory's bandwidth stays in it)."""
        got = self._gpu.get(pe)
        if got is None:
            sp = self.spec(L, pe)
            launch = sp["launch_host_ps"] if self.launch == "host" else sp["launch_graph_ps"]
            key = tuple(sorted((k, tuple(sorted(v.items())) if isinstance(v, dict) else v)
                               for k, v in sp.items() if k not in ("name", "memory")))
            got = self._gpu[pe] = (int(launch), int(sp["sms"]), self._specs.setdefault(key, len(self._specs)))
        return got

    def _add_plan(self, key: tuple, plan: dict) -> tuple[dict, tuple[int, int, int]]:
        """Keep ``plan`` under ``key`` with its cost: duration (ps), bytes, and its CTAs when compute-bound (else 0)."""
        # a compute-bound kernel runs more waves while collectives hold some of the SMs (Program.kernel)
        compute = plan.get("bound") == "compute" or plan.get("compute_ps", -1) >= plan.get("memory_ps", 0) > 0
        ctas = int(plan.get("ctas", 0)) if compute else 0
        got = self._plans[key] = (plan, (int(plan["duration_ps"]), int(plan.get("bytes", 0)), ctas))
        return got

    def _kernel(self, L, pe, gpu: tuple[int, int, int], cost: tuple[int, int, int], flops: float, precision: str,
                name: str, deps, tag: str):
        """Append one kernel of ``cost`` (``_add_plan``) on ``pe`` (``gpu``: its ``_gpu_of``) with its launch."""
        launch, sms, _ = gpu
        duration, nbytes, ctas = cost
        L.count("kernel")
        k = L.prog._kernel_from_model(pe, duration, launch, float(flops), precision, nbytes, deps, name, tag, ctas,
                                      sms if ctas else 0)
        if launch > 0:
            L.out.launches[k - 1] = pe  # Program.kernel adds the launch op just before its kernel
        return k

    def _stream(self, L, pe, nbytes: int, name: str, deps, tag: str):
        """One memory-bound kernel moving ``nbytes``."""
        gpu = self._gpu.get(pe) or self._gpu_of(L, pe)
        key = (gpu[2], "stream", nbytes)
        plan, cost = self._plans.get(key) or self._add_plan(key, _core.gpu_stream(L.system._core, pe, nbytes))
        return self._kernel(L, pe, gpu, cost, 0.0, "bf16", name, deps, tag)

    def gemm(self, L, pe, m, n, k, op, deps):
        prec = L.prec(op)
        gpu = self._gpu.get(pe) or self._gpu_of(L, pe)
        key = (gpu[2], "gemm", m, n, k, prec)
        plan, cost = self._plans.get(key) or self._add_plan(key, _core.gpu_gemm(L.system._core, pe, m, n, k, prec))
        return self._kernel(L, pe, gpu, cost, plan["flops"], prec, op.name, deps, "gemm")

    def vector(self, L, pe, elements, row, esize, loads, passes, stores, name, deps):
        # One fused kernel: each operand read once, each result written once (passes stay in registers).
        return self._stream(L, pe, int(elements) * int(esize) * (int(loads) + int(stores)), name, deps, "stream")

    def copy(self, L, pe, nbytes, name, deps):
        return self._stream(L, pe, 2 * int(nbytes), name, deps, "copy")  # read and write

    def attention(self, L, i, group, deps, pass_):
        """One fused attention kernel per rank over the whole batch: the rank's query heads (heads / tp) and
        its KV heads (kv_heads / tp, or one replicated KV head when tp exceeds them, as vLLM replicates)."""
        op, a = L.g.ops[i], L.g.ops[i].attrs
        tp = len(group)
        B, H, KV = int(a["batch"]), int(a["heads"]), int(a["kv_heads"])
        q, s = int(a["q_len"]), int(a["kv_len"])
        _check_heads(L, i, H, KV, tp)
        causal = bool(a.get("causal", q > 1))

        def run(t, pe):
            h, _ = self.attention_kernel(L, pe, op, B, H // tp, max(1, KV // tp), q, s, causal,
                                         L.chain.get(pe, []) + deps[t], pass_)
            L.chain[pe] = [h]
            return [h]
        return L.each_rank(group, run)  # every rank, or rank 0 for its group (Lowerer.represent_tp_ranks)

    def attention_kernel(self, L, pe, op, batch, heads, kv_heads, q_len, kv_len, causal, deps, pass_="forward"):
        """One fused attention kernel of ``op``'s head dim and dtype on ``pe``: ``heads`` query and ``kv_heads`` KV
        heads, ``q_len`` queries over ``kv_len`` keys (``causal``: the mask over the last q_len keys), after
        ``deps`` (the PE's chain is the caller's); ``pass_`` ``backward``: the backward kernel (dQ, dK, dV with
        the scores recomputed: kernbench.workloads.gpu_kernels). Returns (the kernel op, its FLOPs)."""
        e = DTYPE_BYTES.get(op.dtype, 2)
        prec = L.prec(op)
        a = op.attrs
        which = "backward" if pass_ == "backward" else "forward"
        gpu = self._gpu.get(pe) or self._gpu_of(L, pe)
        key = (gpu[2], "attention", which, batch, heads, kv_heads, q_len, kv_len, a["head_dim"], a.get("v_head_dim"),
               bool(a.get("kv_shared")), e, causal, prec)
        plan, cost = self._plans.get(key) or self._add_plan(
            key, gpu_attention_plan(L.system, pe, batch, heads, kv_heads, q_len, kv_len, a, e, causal, prec, which))
        h = self._kernel(L, pe, gpu, cost, plan["flops"], prec, op.name, deps, "attention")
        L.count("attention")
        return h, float(plan["flops"])


def mean_head_dim(a) -> int:
    """The one head dim a kernel model of one ``head_dim`` prices an attention op at: its FLOPs (QK^T over the
    queries' and keys' ``head_dim``, PV over ``v_head_dim``) and its Q, K, V and O bytes are linear in the head
    dim, so two dims cost what their mean costs (rounded up when their sum is odd)."""
    d = int(a["head_dim"])
    return -(-(d + int(a.get("v_head_dim") or d)) // 2)


def gpu_attention_plan(system, pe, B, H, KV, q, s, a, e, causal, prec, pass_: str = "forward") -> dict:
    """``_core.gpu_attention`` for attention op attrs ``a`` (``H``/``KV``: the rank's heads). One head dim: the
    kernel model as it is. A separate ``v_head_dim`` (MLA): priced at ``mean_head_dim``. ``kv_shared`` (MLA's
    absorbed decode: the values are the first columns of the one cached latent): the decode kernel streams that
    latent once, ``head_dim`` elements a token, not a K and a V -- its memory term priced at half the head dim
    (kv bytes = 2 x head_dim / 2), its compute at the mean, the kernel taking the longer of the two as the
    model does (src/kernels/gpu/attention.hpp). No C++ change: both terms are the model's own. A prefill kernel
    (either pass) is then the default implementation's (gpu_kernels.scale_attention: fixed cost per CTA, the
    softmax, a causal mask's whole diagonal tiles, the backward's 2.5x FLOPs at its own efficiency)."""
    d = int(a["head_dim"])
    if int(a.get("v_head_dim") or d) == d and not a.get("kv_shared"):
        plan = _core.gpu_attention(system._core, pe, B, H, KV, q, s, d, e, causal, prec)
        return scale_attention(plan, q, s, d, causal, DEFAULT_ATTENTION, pass_)
    dm = mean_head_dim(a)
    plan = dict(_core.gpu_attention(system._core, pe, B, H, KV, q, s, dm, e, causal, prec))
    plan = scale_attention(plan, q, s, dm, causal, DEFAULT_ATTENTION, pass_)
    if a.get("kv_shared") and plan["decode"]:
        mem = _core.gpu_attention(system._core, pe, B, H, KV, q, s, -(-d // 2), e, causal, prec)
        latency = int(plan["duration_ps"]) - max(int(plan["compute_ps"]), int(plan["memory_ps"]))
        plan.update(bytes=mem["bytes"], memory_ps=mem["memory_ps"],
                    duration_ps=latency + max(int(plan["compute_ps"]), int(mem["memory_ps"])))
    return plan


def _k200_target():
    from kernbench.k200_lowering import K200Target

    return K200Target


TARGETS = {"sip": SipTarget, "gpu": GpuTarget, "k200": _k200_target}


def is_k200(system) -> bool:
    """Whether `system` is a K200 host (its config has a `k200:` section)."""
    try:
        _core.k200_info(system._core)
    except _core.ConfigError:  # no k200: section
        return False
    return True


def target_for(system, launch: str | None = None):
    """The machine's target: the K200 platform's for a K200 host, else the one ``pe.target`` names
    (``launch`` only applies to a GPU)."""
    if is_k200(system):
        return _k200_target()()
    name = system.target
    if name == "gpu":  # one per machine and launch mode: its kernel plans are the machine's, kept across lowerings
        targets = system.__dict__.setdefault("_gpu_targets", {})
        launch = launch or "host"
        return targets.get(launch) or targets.setdefault(launch, GpuTarget(launch))
    if name not in TARGETS:
        raise WorkloadError(f"pe.target {name!r}: no lowering (known: {', '.join(TARGETS)})")
    return TARGETS[name]()
