"""A LLaMA-style decoder written by hand as Op records (no torch): the lowering's reference graph.

``llama_graph(batch, seq, kv_len, dims=..., layers=...)`` builds what the
importer produces for ``LlamaForCausalLM`` in the names HuggingFace uses
(``model.layers.3.mlp.down_proj``) with the shared attrs of graph.py, so the
lowering and the estimates can be built and tested without torch, and a
builder with the signature ``(batch, seq, kv_len) -> WorkloadGraph`` exists
for decode (``seq = 1``, ``kv_len`` = cache length + 1). It has no rotary
embedding ops (the hand-built ``llama-layer`` has none either).
"""

from __future__ import annotations

from typing import Mapping

from kernbench.workloads.graph import Block, Op, ParamRef, TensorSpec, WorkloadGraph

__all__ = ["llama_graph", "resnet50_graph", "LLAMA3_8B", "LLAMA3_70B"]

#: Meta's config.json numbers.
LLAMA3_8B = {"hidden": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128, "intermediate": 14336, "vocab": 128256,
             "layers": 32}
LLAMA3_70B = {"hidden": 8192, "heads": 64, "kv_heads": 8, "head_dim": 128, "intermediate": 28672, "vocab": 128256,
              "layers": 80}


def llama_graph(batch: int = 1, seq: int = 128, kv_len: int | None = None, *, dims: Mapping = LLAMA3_8B,
                layers: int | None = None, dtype: str = "bf16", embed: bool = True, head: bool = True,
                name: str = "llama") -> WorkloadGraph:
    """``layers`` decoder layers (default: the dims'), batch x seq new tokens attending ``kv_len`` keys
    (default seq: prefill). ``embed``/``head``: the embedding and the final norm + LM head around them."""
    H, nh, kv, hd, I = dims["hidden"], dims["heads"], dims["kv_heads"], dims["head_dim"], dims["intermediate"]
    V = dims.get("vocab", 128256)
    L = int(layers if layers is not None else dims.get("layers", 1))
    kv_len = seq if kv_len is None else kv_len
    T = batch * seq
    act = TensorSpec((batch, seq, H), dtype)
    ops: list[Op] = []

    def add(name, kind, target, *, inputs=(), outputs=(), params=(), flops=0, attrs=None, deps=()):
        ops.append(Op(name, kind, target, tuple(inputs), tuple(outputs), tuple(params), int(flops), dict(attrs or {}),
                      tuple(deps)))
        return len(ops) - 1

    def linear(name, x, k, n, dep):
        w = ParamRef(name + ".weight", TensorSpec((n, k), dtype))
        return add(name, "matmul", "aten.linear.default", inputs=[x], outputs=[TensorSpec((batch, seq, n), dtype)],
                   params=[w], flops=2 * T * n * k, attrs={"m": T, "n": n, "k": k, "batch": 1, "weight": w.name},
                   deps=[dep])

    def norm(name, dep):
        w = ParamRef(name + ".weight", TensorSpec((H,), dtype))
        return add(name, "norm", "LlamaRMSNorm", inputs=[act], outputs=[act], params=[w], flops=4 * T * H,
                   attrs={"elements": T * H, "operands": 1, "norm": "rms"}, deps=[dep])

    last = -1
    if embed:
        w = ParamRef("model.embed_tokens.weight", TensorSpec((V, H), dtype))
        last = add("model.embed_tokens", "embedding", "aten.embedding.default",
                   inputs=[TensorSpec((batch, seq), "int64")], outputs=[act], params=[w],
                   attrs={"rows": V, "dim": H, "tokens": T})
    else:  # the hidden states come in: a free view gives the first layer (and the chain of layers) its input
        last = add("model.inputs_embeds", "view", "aten.view.default", inputs=[act], outputs=[act])
    first = len(ops)
    p = "model.layers.0"
    x_in = first - 1  # the block's input: the op just before it (graph.Block / repeat_block)
    dep0 = [x_in]
    n1 = add(f"{p}.input_layernorm", "norm", "LlamaRMSNorm", inputs=[act], outputs=[act],
             params=[ParamRef(f"{p}.input_layernorm.weight", TensorSpec((H,), dtype))], flops=4 * T * H,
             attrs={"elements": T * H, "operands": 1, "norm": "rms"}, deps=dep0)
    q = linear(f"{p}.self_attn.q_proj", act, H, nh * hd, n1)
    k = linear(f"{p}.self_attn.k_proj", act, H, kv * hd, n1)
    v = linear(f"{p}.self_attn.v_proj", act, H, kv * hd, n1)
    qv = add(f"{p}.self_attn.view", "view", "aten.view.default", inputs=[TensorSpec((batch, seq, nh * hd), dtype)],
             outputs=[TensorSpec((batch, nh, seq, hd), dtype)], deps=[q])
    at = add(f"{p}.self_attn.sdpa", "attention", "aten.scaled_dot_product_attention.default",
             inputs=[TensorSpec((batch, nh, seq, hd), dtype)], outputs=[TensorSpec((batch, nh, seq, hd), dtype)],
             flops=4 * batch * nh * seq * kv_len * hd,
             attrs={"batch": batch, "heads": nh, "kv_heads": kv, "q_len": seq, "kv_len": kv_len, "head_dim": hd,
                    "causal": seq > 1}, deps=[qv, k, v])
    o = linear(f"{p}.self_attn.o_proj", TensorSpec((batch, seq, nh * hd), dtype), nh * hd, H, at)
    r1 = add(f"{p}.add", "elementwise", "aten.add.Tensor", inputs=[act, act], outputs=[act], flops=T * H,
             attrs={"elements": T * H, "operands": 2}, deps=[o] + dep0)
    n2 = norm(f"{p}.post_attention_layernorm", r1)
    gt = linear(f"{p}.mlp.gate_proj", act, H, I, n2)
    up = linear(f"{p}.mlp.up_proj", act, H, I, n2)
    mid = TensorSpec((batch, seq, I), dtype)
    si = add(f"{p}.mlp.act_fn", "elementwise", "aten.silu.default", inputs=[mid], outputs=[mid], flops=4 * T * I,
             attrs={"elements": T * I, "operands": 1}, deps=[gt])
    mu = add(f"{p}.mlp.mul", "elementwise", "aten.mul.Tensor", inputs=[mid, mid], outputs=[mid], flops=T * I,
             attrs={"elements": T * I, "operands": 2}, deps=[si, up])
    dn = linear(f"{p}.mlp.down_proj", mid, I, H, mu)
    add(f"{p}.add_1", "elementwise", "aten.add.Tensor", inputs=[act, act], outputs=[act], flops=T * H,
        attrs={"elements": T * H, "operands": 2}, deps=[dn, r1])
    block = ops[first:]
    ops.extend(WorkloadGraph.repeat_block(block, "model.layers", L, offset=first))
    blocks = [Block("model.layers", first, first + len(block), L)]
    if head:
        fn = norm("model.norm", len(ops) - 1)
        linear("lm_head", act, H, V, fn)
    return WorkloadGraph(name, ops, source="hand", inputs=[TensorSpec((batch, seq), "int64")], blocks=blocks,
                         meta={"dims": dict(dims), "batch": batch, "seq": seq, "kv_len": kv_len, "layers": L})


def resnet50_graph(batch: int = 1, *, dtype: str = "fp32", name: str = "resnet50") -> WorkloadGraph:
    """ResNet-50 v1.5 (HuggingFace ``ResNetModel`` names: stride in the 3x3, no classifier) at 224 x 224:
    convs with their batch norms and ReLUs, the stem max pool, the residual adds, the final average pool."""
    ops: list[Op] = []

    def add(name, kind, target, inputs, outputs, params=(), flops=0, attrs=None, deps=()):
        ops.append(Op(name, kind, target, tuple(inputs), tuple(outputs), tuple(params), int(flops),
                      dict(attrs or {}), tuple(d for d in deps if d >= 0)))
        return len(ops) - 1

    def t(c, h):
        return TensorSpec((batch, c, h, h), dtype)

    def conv(prefix, cin, cout, kk, stride, h, dep, relu=True):
        ho = (h + 2 * (kk // 2) - kk) // stride + 1
        m, n, k = batch * ho * ho, cout, cin * kk * kk
        w = ParamRef(prefix + ".convolution.weight", TensorSpec((cout, cin, kk, kk), dtype))
        c = add(prefix + ".convolution", "conv", "aten.convolution.default", [t(cin, h)], [t(cout, ho)], [w],
                2 * m * n * k, {"batch": batch, "in_channels": cin, "out_channels": cout, "kernel": [kk, kk],
                                "stride": stride, "padding": kk // 2, "groups": 1, "out_hw": [ho, ho],
                                "gemm_m": m, "gemm_n": n, "gemm_k": k}, [dep])
        bn = [ParamRef(f"{prefix}.normalization.{p}", TensorSpec((cout,), dtype))
              for p in ("weight", "bias", "running_mean", "running_var")]
        x = add(prefix + ".normalization", "norm", "aten.batch_norm.default", [t(cout, ho)], [t(cout, ho)], bn,
                2 * batch * cout * ho * ho, {"elements": batch * cout * ho * ho, "operands": 1, "norm": "batch"},
                [c])
        if relu:
            x = add(prefix + ".activation", "elementwise", "aten.relu.default", [t(cout, ho)], [t(cout, ho)], (),
                    batch * cout * ho * ho, {"elements": batch * cout * ho * ho, "operands": 1}, [x])
        return x, ho

    x, h = conv("embedder.embedder", 3, 64, 7, 2, 224, -1)
    x = add("embedder.pooler", "reduce", "aten.max_pool2d.default", [t(64, h)], [t(64, h // 2)], (),
            batch * 64 * (h // 2) ** 2 * 9, {"elements": batch * 64 * h * h, "operands": 1, "kernel": [3, 3]}, [x])
    h //= 2
    cin = 64
    for s, (mid, out, blocks, stride) in enumerate([(64, 256, 3, 1), (128, 512, 4, 2), (256, 1024, 6, 2),
                                                    (512, 2048, 3, 2)]):
        for b in range(blocks):
            st = stride if b == 0 else 1
            p = f"encoder.stages.{s}.layers.{b}"
            inp = x
            # HF ResNetBottleNeckLayer.forward: the layer stack, then the shortcut of the block's input
            y, _ = conv(p + ".layer.0", cin, mid, 1, 1, h, inp)
            y, ho = conv(p + ".layer.1", mid, mid, 3, st, h, y)
            y, _ = conv(p + ".layer.2", mid, out, 1, 1, ho, y, relu=False)
            sc = conv(p + ".shortcut", cin, out, 1, st, h, inp, relu=False)[0] if b == 0 else inp
            el = batch * out * ho * ho
            y = add(p + ".add", "elementwise", "aten.add.Tensor", [t(out, ho)] * 2, [t(out, ho)], (), el,
                    {"elements": el, "operands": 2}, [y, sc])
            x = add(p + ".activation", "elementwise", "aten.relu.default", [t(out, ho)], [t(out, ho)], (), el,
                    {"elements": el, "operands": 1}, [y])
            cin, h = out, ho
    add("pooler", "reduce", "aten.adaptive_avg_pool2d.default", [t(2048, h)], [t(2048, 1)], (), batch * 2048 * h * h,
        {"elements": batch * 2048 * h * h, "operands": 1}, [x])
    return WorkloadGraph(name, ops, source="hand", inputs=[t(3, 224)], meta={"batch": batch})
