"""The K200 platform's lowering, as an execution target: what each op kind of a workload graph becomes on a
Kunlun K200 die (kernbench.workloads.targets registers it as the ``k200`` target).

The SIP and GPU targets append kernels to a Program through the lowerer; the K200 host runs a workload as
one stream of its own steps (kernel launches, copies, a wait: src/platforms/k200), so this target turns op
records into those steps, one method per op kind::

    from kernbench.k200_lowering import K200Target
    steps = K200Target(precision="fp16", ncluster=8).lower(graph.ops)     # = kernbench.k200.lower_ops
    kernbench.k200.run_ops(system, graph.ops)                            # the steps as one stream, run

| op kind | K200 steps |
|---|---|
| matmul | one xdnn fc GEMM (``batch x m`` rows) |
| conv | its im2col GEMM; the lowering reads the input unless 1x1 stride 1 |
| elementwise, reduce, norm, softmax | the elementwise kernel over the op's elements (with ``fold``, a norm or a one-operand elementwise op -- batch norm folded into the conv, ReLU its epilogue -- costs nothing) |
| attention | no fused K200 kernel: the score GEMM, the softmax as the elementwise kernel over the scores, the context GEMM |
| copy, embedding | a device-to-device copy (an embedding: the rows it gathers) |
| view | nothing |

The step constructors (``fc_step``, ``conv_step``, ``elementwise_step``, ``copy_step``) are the ones the
hand-written K200 cases use too (kernbench.k200).
"""

from __future__ import annotations

from typing import Any, Callable

from kernbench._core import ConfigError

__all__ = ["K200Target", "fc_step", "conv_step", "elementwise_step", "copy_step"]


def fc_step(m, n, k, precision, ncluster, die, label):
    """One xdnn fc GEMM launch on ``die``."""
    return {"op": "launch", "label": label, "die": die,
            "kernel": {"kind": "gemm", "m": int(m), "n": int(n), "k": int(k), "precision": precision,
                       "ncluster": int(ncluster)}}


def conv_step(m, n, k, lowered_from, precision, ncluster, die, label, framework_us=0.0):
    """A conv as its GEMM (m output pixels x n output channels x k = Cin x kernel area) after its lowering:
    ``lowered_from`` input elements read by the im2col (0: a 1x1 stride-1 conv, whose input already is A)."""
    return {"op": "launch", "label": label, "die": die,
            "kernel": {"kind": "conv", "m": int(m), "n": int(n), "k": int(k), "lowered_from": int(lowered_from),
                       "precision": precision, "ncluster": int(ncluster),
                       "framework_overhead_ps": int(round(framework_us * 1e6))}}


def elementwise_step(elements, ncluster, die, label, precision="fp32", framework_us=0.0):
    """One elementwise kernel launch over ``elements``."""
    return {"op": "launch", "label": label, "die": die,
            "kernel": {"kind": "elementwise", "elements": int(elements), "ncluster": int(ncluster),
                       "precision": precision, "framework_overhead_ps": int(round(framework_us * 1e6))}}


def copy_step(kind, direction, nbytes, die, label, peer=None):
    """One host or device copy (kind pinned, pageable, stock, peer or d2d)."""
    d = {"op": "copy", "label": label, "kind": kind, "direction": direction, "bytes": int(nbytes), "die": die}
    if peer is not None:
        d["peer"] = peer
    return d


class K200Target:
    """Op records -> K200 stream steps (module doc). ``framework_op_us``: a framework's host time per launched
    op; ``fold``: inference through a framework that folds norms and activations into the GEMMs."""

    name = "k200"

    def __init__(self, *, precision: str = "fp32", ncluster: int = 8, die=(0, 0), framework_op_us: float = 0.0,
                 fold: bool = True):
        self.precision, self.ncluster, self.die = precision, int(ncluster), tuple(die)
        self.fw, self.fold = float(framework_op_us), bool(fold)
        self._by_kind: dict[str, Callable[[Any], list[dict[str, Any]]]] = {
            "view": lambda op: [], "matmul": self.gemm, "conv": self.conv, "elementwise": self.vector,
            "reduce": self.vector, "norm": self.vector, "softmax": self.vector, "copy": self.copy,
            "attention": self.attention, "embedding": self.embedding}

    def _named(self, st: dict[str, Any], name: str, framework: bool = False) -> dict[str, Any]:
        if framework:
            st["kernel"]["framework_overhead_ps"] = int(round(self.fw * 1e6))
        st["name"] = name
        return st

    def gemm(self, op) -> list[dict[str, Any]]:
        a = op.attrs
        st = fc_step(int(a.get("batch", 1)) * int(a["m"]), int(a["n"]), int(a["k"]), self.precision, self.ncluster,
                     self.die, "conv/fc")
        return [self._named(st, op.name, framework=True)]

    def conv(self, op) -> list[dict[str, Any]]:
        a = op.attrs
        kern = list(a["kernel"])
        stride = a.get("stride", 1)
        stride = list(stride) if isinstance(stride, (list, tuple)) else [stride]
        pointwise = kern == [1, 1] and all(int(x) == 1 for x in stride)
        lowered_from = 0 if pointwise else (op.inputs[0].numel if op.inputs else 0)
        groups = int(a.get("groups", 1))
        st = conv_step(int(a["gemm_m"]) * groups, int(a["gemm_n"]), int(a["gemm_k"]), lowered_from, self.precision,
                       self.ncluster, self.die, "conv/fc", self.fw)
        return [self._named(st, op.name)]

    def vector(self, op) -> list[dict[str, Any]]:
        a = op.attrs
        if op.kind in ("norm", "elementwise") and self.fold and int(a.get("operands", 1)) < 2:
            return []  # folded into the conv (batch norm) or its epilogue (ReLU)
        label = {"elementwise": "residual add", "softmax": "softmax"}.get(op.kind, op.kind)
        st = elementwise_step(int(a["elements"]), self.ncluster, self.die, label, self.precision, self.fw)
        return [self._named(st, op.name)]

    def copy(self, op) -> list[dict[str, Any]]:
        return [copy_step("d2d", "h2d", int(op.attrs["bytes"]), self.die, "d2d")]

    def attention(self, op) -> list[dict[str, Any]]:
        a = op.attrs
        rows = int(a["batch"]) * int(a["heads"]) * int(a["q_len"])
        kv, d = int(a["kv_len"]), int(a["head_dim"])
        parts = (("scores", fc_step(rows, kv, d, self.precision, self.ncluster, self.die, "attention")),
                 ("softmax", elementwise_step(rows * kv, self.ncluster, self.die, "softmax", self.precision, self.fw)),
                 ("context", fc_step(rows, int(a.get("v_head_dim") or d), kv, self.precision, self.ncluster, self.die,
                                     "attention")))
        return [self._named(st, f"{op.name}.{part}", framework=True) for part, st in parts]

    def embedding(self, op) -> list[dict[str, Any]]:
        return [self._named(copy_step("d2d", "h2d", op.bytes_written, self.die, "embedding"), op.name)]

    def lower(self, ops) -> list[dict[str, Any]]:
        """Every op, in execution order, as its steps; a kind with no K200 lowering is a ConfigError naming
        the op."""
        steps: list[dict[str, Any]] = []
        for i, op in enumerate(ops):
            fn = self._by_kind.get(op.kind)
            if fn is None:
                raise ConfigError(f"k200: op {i} {op.name!r} ({op.kind}, {op.target}): no K200 lowering for a "
                                  f"{op.kind} op")
            steps += fn(op)
        return steps
