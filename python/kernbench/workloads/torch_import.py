"""``from_torch``: a PyTorch module, traced with ``torch.export`` on the meta device, as a WorkloadGraph.

No weights are allocated: a module built under ``torch.device("meta")`` (as
``kernbench.workloads.models`` does) is traced with meta example inputs, so
tracing an 80-layer 70B model costs what tracing its Python does. A module
with real weights is traced as it is (``torch.export`` works on fake copies
of them; nothing is copied).

How the FX graph becomes op records (``torch_ops`` holds the op table and
the FLOPs conventions):

* every ``call_function`` node of the exported graph (default pre-dispatch
  ATen IR, where ``linear``, ``conv2d``, ``scaled_dot_product_attention``
  and ``layer_norm`` are still whole ops) is one op, except asserts and
  shape queries (no op) and the nodes of a *fused module* (below);
* **fused modules**: a module whose class is a norm (class name ending in
  ``Norm``/``Norm1d``/``Norm2d``..., e.g. LLaMA's ``LlamaRMSNorm``, which
  is written as eight pointwise ATen ops) or an activation (class name ending
  in ``Activation``, e.g. GPT-2's ``NewGELUActivation``, eight ops) becomes
  one op, of kind ``norm`` or ``elementwise``: its FLOPs are the sum of its
  ATen ops', it reads the module's inputs and parameters once and writes its
  outputs once -- what a fused kernel does, and what the hand-built models
  (``llama-layer``) count. ``fuse_modules=False`` keeps the ATen ops;
* names: the module path of the innermost module of the node
  (``node.meta["nn_module_stack"]``), e.g. ``model.layers.3.mlp.down_proj``;
  where a module runs more than one (non-view) op, each gets a suffix,
  ``model.layers.3.self_attn.sdpa``, ``model.layers.3.add``,
  ``model.layers.3.add_1`` (views always carry one:
  ``model.layers.3.self_attn.view``);
* params: the parameters and buffers an op reads, by fully qualified name
  from the exported program's graph signature (a view of a weight, such as
  ``weight.t()``, is passed through to the weight);
* deps: the ops whose outputs an op reads; a view is passed through to the
  op that produced the data, so dropping the (free) views leaves the
  dependencies intact;
* an ATen op that is not in the table is an error (``WorkloadError``) naming
  the op and the module path it was called from -- the importer raises
  rather than record an op it cannot count.

Repeated layers (``repeat="auto"``): when the module holds a ModuleList of
at least three structurally identical blocks (``model.layers``,
``transformer.h``, ``encoder.layer``), the module is traced with the list cut
to its first two blocks; the second block's ops are checked against the
first's and stamped out for blocks 2..n-1 (renamed, dependencies shifted),
and the graph gets a ``Block`` saying so. The first two blocks are traced
(not one) so that which inputs a block takes from the block before it and
which from shared ops before all blocks (LLaMA's rotary tables) is read off
the trace, not guessed. The op list is the same as a full trace's (a test
compares them on a three-layer model).
"""

from __future__ import annotations

import re
import time
import warnings
from typing import Any, Mapping, Sequence

from kernbench.workloads import torch_ops as T
from kernbench.workloads.graph import Block, Op, ParamRef, TensorSpec, WorkloadError, WorkloadGraph
from kernbench.workloads.stamp import rename as _rename, stamp as _stamp

__all__ = ["from_torch", "find_repeated_blocks"]

_NORM_CLASS = re.compile(r"Norm(\d+d)?$")
_ACT_CLASS = re.compile(r"(Activation|GELU|SiLU|Swish|Mish|GLU)$")
#: Kinds a fused module may contain: no GEMM-engine work inside a norm or an activation.
_FUSABLE = frozenset(("elementwise", "norm", "reduce", "view", "copy", "softmax"))


def _torch():
    try:
        import torch
    except ImportError as e:  # pragma: no cover - the extra is missing
        raise WorkloadError("from_torch needs PyTorch: pip install 'kernbench[torch]'") from e
    return torch


# ---- the module list to repeat -----------------------------------------------------------------------------
def _signature(mod) -> tuple:
    return (type(mod),) + tuple((n, tuple(p.shape), p.dtype) for n, p in mod.named_parameters()) + \
        tuple((n, tuple(b.shape), b.dtype) for n, b in mod.named_buffers())


def find_repeated_blocks(module) -> tuple[str, int] | None:
    """``(path, count)`` of the module's largest ModuleList of >= 2 identical blocks, or None.

    Identical: the same class and the same parameter and buffer names,
    shapes and dtypes. The largest by parameter count (the layer stack, not
    a list of heads).
    """
    torch = _torch()
    best, best_size = None, -1
    for path, mod in module.named_modules():
        if not isinstance(mod, torch.nn.ModuleList) or len(mod) < 2:
            continue
        sigs = {_signature(m) for m in mod}
        if len(sigs) != 1:
            continue
        size = sum(p.numel() for p in mod.parameters())
        if size > best_size:
            best, best_size = (path, len(mod)), size
    return best


def _set_submodule(root, path: str, new) -> None:
    parent_path, _, attr = path.rpartition(".")
    parent = root.get_submodule(parent_path) if parent_path else root
    setattr(parent, attr, new)


# ---- tracing -----------------------------------------------------------------------------------------------
def _to_device(x, device, dtype):
    """Example inputs on the module's device (meta: no data), floating ones cast to ``dtype``."""
    torch = _torch()
    if isinstance(x, torch.Tensor):
        dt = dtype if (dtype is not None and x.is_floating_point()) else x.dtype
        if x.device == device:
            return x if x.dtype == dt else x.to(dtype=dt)
        if device.type == "meta":
            return x.to(device="meta", dtype=dt)
        return torch.zeros(x.shape, dtype=dt, device=device)  # a meta input for a module with real weights
    if isinstance(x, (list, tuple)):
        return type(x)(_to_device(v, device, dtype) for v in x)
    if isinstance(x, dict):
        return {k: _to_device(v, device, dtype) for k, v in x.items()}
    return x


def _export(module, args: tuple, kwargs: dict):
    torch = _torch()
    with warnings.catch_warnings():
        # torch.export and transformers warn about their own internals while
        # tracing (deprecations, tracer notes); they say nothing about the
        # workload, and the test suite turns warnings into errors.
        warnings.simplefilter("ignore")
        try:
            return torch.export.export(module, args, kwargs=kwargs, strict=False)
        except WorkloadError:
            raise
        except Exception as e:
            raise WorkloadError(f"torch.export could not trace {type(module).__name__}: "
                                f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from e


# ---- walking the exported graph ----------------------------------------------------------------------------
def _val_tensors(val) -> list:
    torch = _torch()
    if isinstance(val, torch.Tensor):
        return [val]
    if isinstance(val, (list, tuple)):
        return [v for x in val for v in _val_tensors(x)]
    return []


def _spec(t) -> TensorSpec:
    return TensorSpec(tuple(int(d) for d in t.shape), T.dtype_name(t.dtype))


def _module_of(node) -> tuple[str, str, list]:
    """(path, class name, stack entries) of the innermost module a node was called from."""
    stack = node.meta.get("nn_module_stack") or {}
    entries = [(k, v[0], v[1]) for k, v in stack.items()]
    if not entries:
        return "", "", []
    _, path, cls = entries[-1]
    return path, (cls.rsplit(".", 1)[-1] if isinstance(cls, str) else getattr(cls, "__name__", str(cls))), entries


def _fuse_key(node) -> tuple[str, str, str] | None:
    """(stack key, path, class) of the outermost norm/activation module a node runs in, if any."""
    for key, path, cls in _module_of(node)[2]:
        name = cls.rsplit(".", 1)[-1] if isinstance(cls, str) else getattr(cls, "__name__", str(cls))
        if _NORM_CLASS.search(name) or _ACT_CLASS.search(name):
            return key, path, name
    return None


def _is_ignored(node) -> bool:
    """An assert or shape query reading a node (not a consumer of its data)."""
    return getattr(node.target, "_opname", None) in T.IGNORED_OPS


def _short(opname: str) -> str:
    return {"scaled_dot_product_attention": "sdpa"}.get(opname, opname.rstrip("_") or opname)


class _Walker:
    """One pass over an exported program's graph, building op records in order."""

    def __init__(self, ep, fuse_modules: bool, canon: Mapping[str, str]):
        torch = _torch()
        self.torch = torch
        sig = ep.graph_signature
        self.param_name: dict[str, str] = {}
        self.buffers: set[str] = set()
        for ph, fqn in sig.inputs_to_parameters.items():
            self.param_name[ph] = canon.get(fqn, fqn)
        for ph, fqn in sig.inputs_to_buffers.items():
            self.param_name[ph] = canon.get(fqn, fqn)
            self.buffers.add(canon.get(fqn, fqn))
        for ph, fqn in getattr(sig, "inputs_to_lifted_tensor_constants", {}).items():
            self.param_name[ph] = f"constant:{fqn}"
            self.buffers.add(f"constant:{fqn}")
        self.user_inputs = list(sig.user_inputs)
        self.graph = ep.graph
        self.graph_module = ep.graph_module
        self.region_outs: dict[Any, list] = {}
        self.fuse = fuse_modules
        self.ops: list[dict] = []       # pending records (named at the end)
        self.prod: dict[Any, int] = {}  # node -> index of the op that produced its data
        self.param_of: dict[Any, str] = {}
        self.param_spec: dict[str, TensorSpec] = {}
        self.inputs: list[TensorSpec] = []

    # -- helpers used by torch_ops.Call
    def shape(self, x):
        if isinstance(x, self._node_type):
            ts = _val_tensors(x.meta.get("val"))
            return tuple(int(d) for d in ts[0].shape) if len(ts) == 1 and not isinstance(
                x.meta.get("val"), (list, tuple)) else None
        return None

    def dtype(self, x):
        if isinstance(x, self._node_type):
            ts = _val_tensors(x.meta.get("val"))
            return T.dtype_name(ts[0].dtype) if ts else None
        return None

    def _meta_like(self, x):
        v = x.meta["val"]
        return self.torch.empty_strided(tuple(v.shape), tuple(v.stride()), dtype=v.dtype, device="meta")

    def contiguous(self, x) -> bool:
        try:
            return bool(x.meta["val"].is_contiguous())
        except Exception:
            return False

    def viewable(self, x, shape) -> bool:
        try:
            self._meta_like(x).view(shape)
            return True
        except Exception:
            return False

    def param(self, x):
        return self.param_of.get(x) if isinstance(x, self._node_type) else None

    # -- the walk
    def run(self) -> None:
        import torch.fx as fx
        self._node_type = fx.Node
        for node in self.graph.nodes:
            if node.op == "placeholder":
                if node.name in self.param_name:
                    name = self.param_name[node.name]
                    self.param_of[node] = name
                    ts = _val_tensors(node.meta.get("val"))
                    if ts:
                        self.param_spec[name] = _spec(ts[0])
                else:
                    for t in _val_tensors(node.meta.get("val")):
                        self.inputs.append(_spec(t))
        items = self._items()
        for item in items:
            if isinstance(item, list):
                self._emit_group(item)
            elif item[0] == "alias":  # a region's placeholder is the outer value
                _, inner, outer = item
                if outer in self.prod:
                    self.prod[inner] = self.prod[outer]
                if outer in self.param_of:
                    self.param_of[inner] = self.param_of[outer]
            elif item[0] == "outs":
                self.region_outs[item[1]] = item[2]
            else:
                self._emit(*item)

    def _call(self, node) -> T.Call | None:
        """The classification input of a call_function node, or None for a non-ATen / non-tensor node."""
        target = node.target
        opname = getattr(target, "_opname", None)
        ns = getattr(target, "namespace", None)
        outs = _val_tensors(node.meta.get("val"))
        out_shapes = [tuple(int(d) for d in t.shape) for t in outs]
        if opname is None or ns != "aten":
            return T.Call(str(getattr(target, "__name__", target)), node.args, node.kwargs, out_shapes,
                          self.shape, self.param, self.contiguous, self.viewable, self.dtype,
                          T.dtype_name(outs[0].dtype) if outs else None) if outs else None
        return T.Call(opname, node.args, node.kwargs, out_shapes, self.shape, self.param, self.contiguous,
                      self.viewable, self.dtype, T.dtype_name(outs[0].dtype) if outs else None)

    def _classify(self, node):
        """(kind, flops, attrs) or None (no op); raises naming the op and module for an unknown one."""
        import operator
        if node.target is operator.getitem:
            return "getitem"
        c = self._call(node)
        if c is None:
            return None
        ns = getattr(node.target, "namespace", None)
        try:
            if ns != "aten":
                raise KeyError(c.op)
            return T.classify(c)
        except KeyError:
            path, cls, _ = _module_of(node)
            where = f"module {path!r} ({cls})" if path else "the top-level module"
            raise WorkloadError(f"op {node.target} (node {node.name!r}) in {where} has no kernbench kind: "
                                "add it to kernbench.workloads.torch_ops or rewrite the module without it") \
                from None

    def _flat(self, graph):
        """The graph's call_function nodes in order, with the bodies of grad-mode / autocast regions inlined.

        ``torch.no_grad()`` or ``autocast`` blocks in a forward export as a
        higher-order op over a submodule; its body is ordinary ops. Yields
        nodes, and ("alias", inner, outer) / ("outs", hop, [inner outputs])
        markers that connect the body's placeholders and outputs.
        """
        for node in graph.nodes:
            if node.op != "call_function":
                continue
            name = getattr(node.target, "__name__", "")
            if name in ("wrap_with_set_grad_enabled", "wrap_with_autocast"):
                j = next((i for i, a in enumerate(node.args)
                          if isinstance(a, self._node_type) and a.op == "get_attr"), None)
                if j is None:
                    raise WorkloadError(f"{name} node {node.name!r} without a submodule")
                sub = self.graph_module.get_submodule(node.args[j].target)
                phs = [n for n in sub.graph.nodes if n.op == "placeholder"]
                for ph, outer in zip(phs, node.args[j + 1:]):
                    if outer in self.param_of:  # weights are known before the walk: classify reads them
                        self.param_of[ph] = self.param_of[outer]
                    yield ("alias", ph, outer)
                yield from self._flat(sub.graph)
                out = next(n for n in sub.graph.nodes if n.op == "output")
                res = out.args[0]
                yield ("outs", node, list(res) if isinstance(res, (list, tuple)) else [res])
                continue
            yield node

    def _items(self) -> list:
        """Nodes in order as (node, classification) or, for a fused module's run of nodes, a list of them."""
        items: list = []
        group: list = []
        group_key = None
        for node in self._flat(self.graph):
            if isinstance(node, tuple):  # an alias marker ends a fused run
                if group:
                    items.extend(self._close_group(group, group_key))
                group, group_key = [], None
                items.append(node)
                continue
            cls = self._classify(node)
            if cls is None:
                continue
            if cls == "getitem" or cls[0] == "view":  # a view of a weight is the weight, for later classify calls
                srcs = self._tensor_args(node)
                if srcs and srcs[0] in self.param_of:
                    self.param_of[node] = self.param_of[srcs[0]]
            key = _fuse_key(node) if self.fuse else None
            if key is not None and group_key is not None and key[0] == group_key[0]:
                group.append((node, cls))
                continue
            if group:
                items.extend(self._close_group(group, group_key))
            group, group_key = [], None
            if key is not None:
                group, group_key = [(node, cls)], key
            else:
                items.append((node, cls))
        if group:
            items.extend(self._close_group(group, group_key))
        return items

    @staticmethod
    def _close_group(group, key) -> list:
        real = [g for g in group if g[1] != "getitem" and g[1][0] != "view"]
        if len(real) <= 1 or any(g[1][0] not in _FUSABLE for g in real):
            return list(group)  # one op (or GEMM work inside): no fusion
        return [[key] + list(group)]

    # -- emission
    def _tensor_args(self, node) -> list:
        out = []
        for a in list(node.args) + list(node.kwargs.values()):
            for x in (a if isinstance(a, (list, tuple)) else (a,)):
                if isinstance(x, self._node_type) and _val_tensors(x.meta.get("val")):
                    out.append(x)
        return out

    def _reads(self, nodes, internal=frozenset()):
        inputs, params, deps, seen = [], [], set(), set()
        for node in nodes:
            for x in self._tensor_args(node):
                if x in internal or x in seen:
                    continue
                seen.add(x)
                p = self.param_of.get(x)
                if p is not None:
                    if p not in {q.name for q in params}:
                        params.append(ParamRef(p, self.param_spec[p]))
                    continue
                inputs.extend(_spec(t) for t in _val_tensors(x.meta.get("val")))
                if x in self.prod:
                    deps.add(self.prod[x])
        return inputs, params, sorted(deps)

    def _emit(self, node, cls) -> None:
        if cls == "getitem":  # an element of a multi-output op or of a split: the same producer
            src = node.args[0]
            if src in self.region_outs:  # an output of an inlined region: its producer inside
                src = self.region_outs[src][node.args[1]]
            if src in self.prod:
                self.prod[node] = self.prod[src]
            if src in self.param_of:
                self.param_of[node] = self.param_of[src]
            return
        kind, flops, attrs = cls
        path, mcls, _ = _module_of(node)
        outs = [_spec(t) for t in _val_tensors(node.meta.get("val"))]
        inputs, params, deps = self._reads([node])
        if kind == "view":
            srcs = self._tensor_args(node)
            if srcs and srcs[0] in self.param_of:  # a view of a weight is that weight
                self.param_of[node] = self.param_of[srcs[0]]
                return
            params = []
        if kind == "copy":
            attrs = {**attrs, "bytes": sum(t.nbytes for t in outs)}
        self.ops.append({"path": path, "short": _short(node.target._opname), "kind": kind,
                         "target": str(node.target), "inputs": inputs, "outputs": outs, "params": params,
                         "flops": int(flops), "attrs": attrs, "deps": deps, "module": mcls})
        if kind == "view":
            srcs = self._tensor_args(node)
            if srcs and srcs[0] in self.prod:
                self.prod[node] = self.prod[srcs[0]]
        else:
            self.prod[node] = len(self.ops) - 1

    def _emit_group(self, group) -> None:
        (_, path, mcls), members = group[0], group[1:]
        nodes = [n for n, _ in members]
        internal = set(nodes)
        inputs, params, deps = self._reads(nodes, internal)
        outs_nodes = [n for n in nodes if _val_tensors(n.meta.get("val"))
                      and any(u not in internal and not _is_ignored(u) for u in n.users)]
        if not outs_nodes:
            outs_nodes = [nodes[-1]]
        outs = [_spec(t) for n in outs_nodes for t in _val_tensors(n.meta.get("val"))]
        flops = sum(c[1] for _, c in members if c != "getitem")
        kind = "norm" if _NORM_CLASS.search(mcls) else "elementwise"
        fused = [str(n.target) for n, c in members if c != "getitem" and c[0] != "view"]
        attrs = {"elements": outs[0].numel if outs else 0, "operands": len(inputs), "module": mcls,
                 "fused": fused}
        if kind == "norm":
            attrs["norm"] = mcls
            attrs["weight"] = params[0].name if params else None
        self.ops.append({"path": path, "short": mcls.lower(), "kind": kind, "target": f"module:{mcls}",
                         "inputs": inputs, "outputs": outs, "params": params, "flops": int(flops),
                         "attrs": attrs, "deps": deps, "module": mcls, "fused": True})
        for n in nodes:
            self.prod[n] = len(self.ops) - 1

    def records(self) -> list[Op]:
        """The ops, named: a leaf module's only (non-view) op takes its path, else path.short[_i]."""
        real_count: dict[str, int] = {}
        paths = {r["path"] for r in self.ops}
        parents = {p.rsplit(".", j)[0] for p in paths for j in range(1, p.count(".") + 1)}
        for r in self.ops:
            if r["kind"] != "view":
                real_count[r["path"]] = real_count.get(r["path"], 0) + 1
        used: dict[tuple[str, str], int] = {}
        out = []
        for r in self.ops:
            path = r["path"]
            # A module with child modules (model.layers.0.mlp) keeps its path
            # for the prefix of its children's ops: its own ops get a suffix.
            if r["kind"] != "view" and real_count.get(path) == 1 and path and path not in parents:
                name = path
            else:
                j = used.get((path, r["short"]), 0)
                used[(path, r["short"])] = j + 1
                base = f"{path}.{r['short']}" if path else r["short"]
                name = base if j == 0 else f"{base}_{j}"
            out.append(Op(name, r["kind"], r["target"], tuple(r["inputs"]), tuple(r["outputs"]),
                          tuple(r["params"]), r["flops"], r["attrs"], tuple(r["deps"])))
        return out


def _canonical_names(module) -> dict[str, str]:
    """Each parameter/buffer name -> the first name of the same tensor in the module's own order.

    Tied weights have several names (GPT-2's ``transformer.wte.weight`` and
    ``lm_head.weight``) and the exported signature keeps one of them; the
    op records use the first the module declares, whichever export kept.
    """
    first: dict[int, str] = {}
    out: dict[str, str] = {}
    for items in (module.named_parameters(remove_duplicate=False), module.named_buffers(remove_duplicate=False)):
        for n, t in items:
            out[n] = first.setdefault(id(t), n)
    return out


def _trace_ops(module, args, kwargs, fuse_modules) -> tuple[list[Op], list[TensorSpec], set[str]]:
    ep = _export(module, args, kwargs)
    w = _Walker(ep, fuse_modules, _canonical_names(module))
    w.run()
    return w.records(), w.inputs, w.buffers


# ---- the entry point -----------------------------------------------------------------------------------------
def _no_kv_cache(module, kw: dict) -> str:
    """Turns a transformers model's KV cache off for the trace (``kw["use_cache"] = False``) when its config asks
    for one and the caller did not choose: the cache is state returned beside the logits, not an op, and
    ``torch.export`` refuses its ``DynamicCache``. Returns what was done, for the graph's meta ("" if nothing)."""
    if "use_cache" in kw or not getattr(getattr(module, "config", None), "use_cache", False):
        return ""
    kw["use_cache"] = False
    return "turned off for the trace (the model's config.use_cache is true; the KV cache is not an op)"


def from_torch(module, example_inputs: Sequence[Any] | Any = (), *, kwargs: Mapping[str, Any] | None = None,
               name: str | None = None, dtype=None, repeat: str | bool = "auto",
               fuse_modules: bool = True) -> WorkloadGraph:
    """Trace ``module(*example_inputs, **kwargs)`` with ``torch.export`` into a WorkloadGraph.

    ``example_inputs``: a tensor or a tuple of them (shapes and dtypes are
    what counts; meta tensors are fine). ``dtype``: cast the module's
    floating parameters and the floating inputs first (``torch.bfloat16``
    or ``"bf16"``; the module is cast in place, as ``Module.to`` does).
    ``repeat``: ``"auto"`` finds the layer stack (``find_repeated_blocks``),
    a module path names it, ``False`` traces everything. The module is put
    in eval mode (dropout is then free). A transformers model's KV cache
    (``config.use_cache``) is turned off for the trace unless ``kwargs`` sets
    ``use_cache``, and ``meta["use_cache"]`` says so. Raises WorkloadError
    naming the op and module path of an ATen op the table lacks.
    """
    torch = _torch()
    t0 = time.perf_counter()
    if isinstance(dtype, str):
        names = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16, "fp64": torch.float64}
        if dtype not in names:
            raise WorkloadError(f"from_torch: dtype {dtype!r} (known: {', '.join(names)})")
        dtype = names[dtype]
    if dtype is not None:
        module.to(dtype)
    module.eval()
    params = list(module.parameters())
    device = params[0].device if params else torch.device("meta")
    args = example_inputs if isinstance(example_inputs, tuple) else \
        (tuple(example_inputs) if isinstance(example_inputs, list) else (example_inputs,))
    args = _to_device(args, device, dtype)
    kw = _to_device(dict(kwargs or {}), device, dtype)
    cache_note = _no_kv_cache(module, kw)

    rep = None
    if repeat == "auto":
        rep = find_repeated_blocks(module)
    elif isinstance(repeat, str) and repeat:
        lst = module.get_submodule(repeat)
        if not isinstance(lst, torch.nn.ModuleList):
            raise WorkloadError(f"from_torch: repeat={repeat!r} is a {type(lst).__name__}, not a ModuleList")
        rep = (repeat, len(lst))
    note = "full trace"
    blocks: list[Block] = []
    if rep is not None and rep[1] >= 2:  # two: traced whole, checked and declared a Block (pipeline stages need it)
        path, count = rep
        full = module.get_submodule(path)
        _set_submodule(module, path, torch.nn.ModuleList(list(full)[:2]))
        try:
            ops, inputs, buffers = _trace_ops(module, args, kw, fuse_modules)
        finally:
            _set_submodule(module, path, full)
        ops, block, note = _stamp(ops, path, count)
        if block is None:  # not stampable: trace it all (correct, only slower)
            ops, inputs, buffers = _trace_ops(module, args, kw, fuse_modules)
            note = f"full trace ({note})"
        else:
            blocks.append(block)
            buffers = buffers | {_rename(b, f"{path}.1.", f"{path}.{i}.") for b in buffers
                                 for i in range(2, count)}
    else:
        ops, inputs, buffers = _trace_ops(module, args, kw, fuse_modules)
    read = {p.name for op in ops for p in op.params}
    meta = {"module": f"{type(module).__module__}.{type(module).__qualname__}", "torch": torch.__version__,
            "repeat": note, "buffers": sorted(read & buffers), "trace_s": round(time.perf_counter() - t0, 3)}
    if cache_note:
        meta["use_cache"] = cache_note
    return WorkloadGraph(name or type(module).__name__, ops, source="torch", inputs=inputs, blocks=blocks,
                         meta=meta)
