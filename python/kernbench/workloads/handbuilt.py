"""Decoders written by hand as Op records (no torch): the lowering's reference graphs.

``llama_graph(batch, seq, kv_len, dims=..., layers=...)`` builds what the
importer produces for ``LlamaForCausalLM`` in the names HuggingFace uses
(``model.layers.3.mlp.down_proj``) with the shared attrs of graph.py, so the
lowering and the estimates can be built and tested without torch, and a
builder with the signature ``(batch, seq, kv_len) -> WorkloadGraph`` exists
for decode (``seq = 1``, ``kv_len`` = cache length + 1). It has no rotary
embedding ops (the hand-built ``llama-layer`` has none either).

``decoder_graph`` is the same builder for the other decoder families of the
model catalog (``kernbench.workloads.catalog``): ``dims`` may also say
``family`` (whose HuggingFace names: ``llama`` -- ``LlamaForCausalLM``,
``gpt`` -- ``GPT2LMHeadModel``, ``mpt`` -- ``MptForCausalLM``), ``norm``
(``rms``/``layer``), ``mlp`` (``swiglu``/``gelu``), ``positions``
(``rotary``/``alibi``/``learned``), ``bias`` (biases on every linear and
LayerNorm), ``tied`` (the LM head reads the embedding table) and
``max_positions`` (the learned position table's rows). Rotary and ALiBi add
no ops (ALiBi's bias is marked on the attention op: ``attrs["alibi"]``);
learned positions are a second embedding and an add. ``llama_graph`` is
``decoder_graph`` with LLaMA's defaults.

Mixture of experts: ``dims["experts"]`` (E > 0) makes each layer's MLP an MoE layer (``moe_mlp``): the
router ``{mlp}.gate`` (a linear hidden -> E) and ``{mlp}.topk``, the routed experts as one ``moe`` op
``{mlp}.experts`` (attrs: hidden, experts, top_k, ffn, tokens and the per-expert ``counts`` of
kernbench.workloads.moe, ``capacity``/``capacity_factor`` and the ``dropped`` tokens; params: every expert's
three SwiGLU weights) and, with ``shared_experts`` = n, one always-applied SwiGLU MLP
``{mlp}.shared_experts`` of width ``n x expert_ffn``. Further keys: ``top_k``, ``expert_ffn`` (each expert's
inner width), ``dense_layers`` (the first layers keep the dense MLP of ``intermediate``; the graph then has no
repeated block), ``capacity_factor``, ``routing`` (``skew``, ``hot``, ``counts``, ``seed``: the arguments
of ``moe.routing_counts``), ``moe_module`` (the MLP's module name, Mixtral's ``block_sparse_moe``) and
``expert_linears`` (the experts' gate, up and down names, Mixtral's ``w1, w3, w2``). With ``bias`` the
experts' linears have biases too (GPT-OSS); ``qkv_bias``: biases on q, k and v alone (Qwen2).

Multi-head latent attention (DeepSeek-V2/V3): ``dims["attention"] = "mla"`` with ``q_lora_rank`` (0: one
direct q_proj), ``kv_lora_rank``, ``qk_nope_head_dim``, ``qk_rope_head_dim`` and ``v_head_dim`` replaces q/k/v
by the latent projections (``mla_attention`` below). Its attention ops carry ``v_head_dim`` (the values' width,
``head_dim`` being the queries' and keys'), ``cache_width`` (elements a token caches per layer) and, for the
absorbed decode form (an entry of at most ``MLA_ABSORB_MAX_Q`` new tokens over a longer context),
``kv_shared``: the one KV head's values are the first ``v_head_dim`` columns of its keys.
"""

from __future__ import annotations

from typing import Mapping

from kernbench.workloads.graph import Block, Op, ParamRef, TensorSpec, WorkloadError, WorkloadGraph, whole
from kernbench.workloads.moe import capacity, routing_counts

__all__ = ["llama_graph", "decoder_graph", "resnet50_graph", "LLAMA3_8B", "LLAMA3_70B", "MLA_ABSORB_MAX_Q", "absorbed"]

#: MLA entries of at most this many new tokens over a longer context run the absorbed (decode) form: the GPU
#: decode attention kernel's range (src/kernels/gpu/attention.hpp kDecodeMaxQ); vLLM likewise sends requests
#: with a cache and a few new tokens to its MLA decode path and prefills through multi-head attention.
MLA_ABSORB_MAX_Q = 16


def absorbed(entry: tuple) -> bool:
    """Whether an attention entry ``(batch, q_len, kv_len, causal)`` of an MLA model runs the absorbed form."""
    _, q, k, _ = entry
    return q <= MLA_ABSORB_MAX_Q and q < k

#: Meta's config.json numbers.
LLAMA3_8B = {"hidden": 4096, "heads": 32, "kv_heads": 8, "head_dim": 128, "intermediate": 14336, "vocab": 128256,
             "layers": 32}
LLAMA3_70B = {"hidden": 8192, "heads": 64, "kv_heads": 8, "head_dim": 128, "intermediate": 28672, "vocab": 128256,
              "layers": 80}


#: The HuggingFace module names of each decoder family (the importer's names for the same model).
_NAMES: dict[str, dict[str, str]] = {
    "llama": {"root": "model", "layers": "model.layers", "embed": "model.embed_tokens", "pos": "",
              "ln1": "input_layernorm", "ln2": "post_attention_layernorm", "attn": "self_attn", "qkv": "",
              "o": "o_proj", "mlp": "mlp", "up": "up_proj", "act": "act_fn", "down": "down_proj",
              "add1": "add", "add2": "add_1", "final": "model.norm"},
    "gpt": {"root": "transformer", "layers": "transformer.h", "embed": "transformer.wte", "pos": "transformer.wpe",
            "ln1": "ln_1", "ln2": "ln_2", "attn": "attn", "qkv": "c_attn", "o": "c_proj", "mlp": "mlp", "up": "c_fc",
            "act": "act", "down": "c_proj", "add1": "add", "add2": "add_1", "final": "transformer.ln_f"},
    "mpt": {"root": "transformer", "layers": "transformer.blocks", "embed": "transformer.wte", "pos": "",
            "ln1": "norm_1", "ln2": "norm_2", "attn": "attn", "qkv": "Wqkv", "o": "out_proj", "mlp": "ffn",
            "up": "up_proj", "act": "act", "down": "down_proj", "add1": "add", "add2": "ffn.add",
            "final": "transformer.norm_f"},
}


def llama_graph(batch: int = 1, seq: int = 128, kv_len: int | None = None, *, dims: Mapping = LLAMA3_8B,
                layers: int | None = None, dtype: str = "bf16", embed: bool = True, head: bool = True,
                name: str = "llama") -> WorkloadGraph:
    """``layers`` decoder layers (default: the dims'), batch x seq new tokens attending ``kv_len`` keys
    (default seq: prefill). ``embed``/``head``: the embedding and the final norm + LM head around them."""
    return decoder_graph(batch, seq, kv_len, dims=dims, layers=layers, dtype=dtype, embed=embed, head=head,
                         name=name)


def decoder_graph(batch: int = 1, seq: int = 128, kv_len: int | None = None, *, dims: Mapping = LLAMA3_8B,
                  layers: int | None = None, dtype: str = "bf16", embed: bool = True, head: bool = True,
                  name: str = "decoder", attention: list[tuple[int, int, int, bool]] | None = None,
                  head_tokens: int | None = None) -> WorkloadGraph:
    """A pre-norm decoder of any family in ``_NAMES`` (see the module doc for the keys of ``dims`` beyond
    LLaMA's; absent keys take LLaMA's values). Arguments as ``llama_graph``'s.

    ``attention``: a ragged batch (a serving iteration, kernbench.serving): the dense ops see ``batch x seq``
    tokens as given, and each layer's attention is one op per entry ``(batch, q_len, kv_len, causal)`` (the
    argument ``kv_len`` is then unused). ``head_tokens``: the tokens the final norm
    and LM head see (default all; a serving engine computes logits only for each sequence's last token)."""
    H, nh, kv, hd, I = dims["hidden"], dims["heads"], dims["kv_heads"], dims["head_dim"], dims["intermediate"]
    V = dims.get("vocab", 128256)
    family, norm_kind = dims.get("family", "llama"), dims.get("norm", "rms")
    mlp_kind, positions = dims.get("mlp", "swiglu"), dims.get("positions", "rotary")
    bias, tied = bool(dims.get("bias", False)), bool(dims.get("tied", False))
    if family not in _NAMES or norm_kind not in ("rms", "layer") or mlp_kind not in ("swiglu", "gelu") \
            or positions not in ("rotary", "alibi", "learned"):
        raise WorkloadError(f"{name}: family {family!r} (known: {', '.join(_NAMES)}), norm {norm_kind!r} "
                            f"(rms, layer), mlp {mlp_kind!r} (swiglu, gelu), positions {positions!r} "
                            "(rotary, alibi, learned)")
    N = _NAMES[family]
    # every size enters here: a whole number >= 1 (4.7 is refused, not truncated; 0 would lower to nothing)
    for key in ("hidden", "heads", "kv_heads", "head_dim", "intermediate"):
        whole(dims[key], f"{name}: dims[{key!r}]", 1)
    whole(V, f"{name}: dims['vocab']", 1)
    L = whole(layers if layers is not None else dims.get("layers", 1), f"{name}: layers", 1)
    batch, seq = whole(batch, f"{name}: batch", 1), whole(seq, f"{name}: seq", 1)
    given = kv_len is not None  # a serving iteration's graph leaves it out: its attention parts carry the keys
    kv_len = seq if kv_len is None else whole(kv_len, f"{name}: kv_len", 1)
    if positions == "learned" and kv_len > dims.get("max_positions", kv_len):
        raise WorkloadError(f"{name}: kv_len {kv_len} exceeds the {dims['max_positions']} learned positions")
    if given and kv_len > dims.get("max_positions", kv_len):  # rotary and ALiBi models too: past what it learned
        raise WorkloadError(f"{name}: kv_len {kv_len} (prompt + generated tokens) is past the model's "
                            f"{dims['max_positions']} positions (max_positions)")
    T = batch * seq
    act = TensorSpec((batch, seq, H), dtype)
    ops: list[Op] = []

    def add(name, kind, target, *, inputs=(), outputs=(), params=(), flops=0, attrs=None, deps=()):
        ops.append(Op(name, kind, target, tuple(inputs), tuple(outputs), tuple(params), flops, dict(attrs or {}),
                      tuple(deps)))
        return len(ops) - 1

    def linear(name, x, k, n, dep, weight=None, with_bias=bias, rows=None, tp=None, w=None):
        t = T if rows is None else rows
        w = w or ParamRef(weight or name + ".weight", TensorSpec((n, k), dtype))
        attrs, params, flops = {"m": t, "n": n, "k": k, "batch": 1, "weight": w.name}, [w], 2 * t * n * k
        if tp:  # the tensor-parallel rule the data flow would not give (lowerer.Lowerer.matmul)
            attrs["tp_rule"] = tp
        if with_bias:  # as the importer counts an addmm: the GEMM, then one add per output element
            b = ParamRef(name + ".bias", TensorSpec((n,), dtype))
            params.append(b)
            attrs.update(bias=b.name, bias_flops=t * n)
            flops += t * n
        return add(name, "matmul", "aten.linear.default", inputs=[x], outputs=[TensorSpec((batch, seq, n), dtype)],
                   params=params, flops=flops, attrs=attrs, deps=dep if isinstance(dep, list) else [dep])

    def norm(name, dep, rows=None, width=None):
        t, W = (T if rows is None else rows), (H if width is None else width)
        params = [ParamRef(name + ".weight", TensorSpec((W,), dtype))]
        if norm_kind == "rms":
            x = act if width is None else TensorSpec((batch, seq, W), dtype)
            return add(name, "norm", "LlamaRMSNorm", inputs=[x], outputs=[x], params=params, flops=4 * t * W,
                       attrs={"elements": t * W, "operands": 1, "norm": "rms"}, deps=[dep])
        if bias:
            params.append(ParamRef(name + ".bias", TensorSpec((H,), dtype)))
        # the importer's count: 5 FLOPs per element to normalise, 1 each for the weight and the bias
        return add(name, "norm", "aten.layer_norm.default", inputs=[act], outputs=[act], params=params,
                   flops=(5 + len(params)) * t * H, attrs={"elements": t * H, "operands": 1, "norm": "layer_norm"},
                   deps=[dep])

    def residual(name, deps):
        return add(name, "elementwise", "aten.add.Tensor", inputs=[act, act], outputs=[act], flops=T * H,
                   attrs={"elements": T * H, "operands": 2}, deps=deps)

    ids = TensorSpec((batch, seq), "int64")
    table = N["embed"] + ".weight"
    if embed:
        w = ParamRef(table, TensorSpec((V, H), dtype))
        te = add(N["embed"], "embedding", "aten.embedding.default", inputs=[ids], outputs=[act], params=[w],
                 attrs={"rows": V, "dim": H, "tokens": T})
        if positions == "learned":  # GPT-2's wpe: a second table, added to the token embeddings
            P = whole(dims.get("max_positions", kv_len), f"{name}: dims['max_positions']", 1)
            wp = ParamRef(N["pos"] + ".weight", TensorSpec((P, H), dtype))
            pe = add(N["pos"], "embedding", "aten.embedding.default", inputs=[ids], outputs=[act], params=[wp],
                     attrs={"rows": P, "dim": H, "tokens": T})
            residual(N["root"] + ".add", [te, pe])
    else:  # the hidden states come in: a free view gives the first layer (and the chain of layers) its input
        add(N["root"] + ".inputs_embeds", "view", "aten.view.default", inputs=[act], outputs=[act])
    moe_module = dims.get("moe_module", N["mlp"])

    def moe_mlp(m, x):
        """The MoE MLP ``m`` reading op ``x``: the router (a linear hidden -> experts, then top-k), the routed
        experts as one ``moe`` op (kernbench.workloads.moe_lower lowers it: dispatch, expert GEMMs, combine) and
        the shared experts (one SwiGLU MLP of ``shared_experts x expert_ffn``, DeepSeek-MoE's layout)."""
        E = whole(dims["experts"], f"{name}: dims['experts']", 1)
        K = whole(dims.get("top_k", 2), f"{name}: dims['top_k']", 1)
        Fe = whole(dims.get("expert_ffn", I), f"{name}: dims['expert_ffn']", 1)
        shared = whole(dims.get("shared_experts", 0), f"{name}: dims['shared_experts']", 0)
        rt = dict(dims.get("routing") or {})
        if set(rt) - {"skew", "hot", "counts", "seed"}:
            raise WorkloadError(f"{name}: dims['routing'] keys {sorted(set(rt) - {'skew', 'hot', 'counts', 'seed'})}"
                                ": expected skew, hot, counts, seed")
        counts = routing_counts(T, E, K, where=f"{name}: {m}", **rt)
        cf = dims.get("capacity_factor")
        cap = capacity(T, E, K, cf)
        kept = sum(counts) if cap is None else sum(min(c, cap) for c in counts)
        gate = linear(f"{m}.gate", act, H, E, x)  # the router
        topk = add(f"{m}.topk", "softmax", "aten.topk.default", inputs=[TensorSpec((batch, seq, E), dtype)],
                   outputs=[TensorSpec((batch, seq, K), "int64")], flops=5 * T * E,
                   attrs={"elements": T * E, "operands": 1}, deps=[gate])
        lin = dims.get("expert_linears", ("gate_proj", "up_proj", "down_proj"))
        params = [ParamRef(f"{m}.experts.{e}.{nm}.weight", TensorSpec(shape, dtype)) for e in range(E)
                  for nm, shape in zip(lin, ((Fe, H), (Fe, H), (H, Fe)))]
        if bias:  # GPT-OSS: every expert linear has a bias
            params += [ParamRef(f"{m}.experts.{e}.{nm}.bias", TensorSpec((n,), dtype)) for e in range(E)
                       for nm, n in zip(lin, (Fe, Fe, H))]
        moe = add(f"{m}.experts", "moe", "kernbench.moe", inputs=[act], outputs=[act], params=params,
                  flops=kept * (6 * H * Fe + 5 * Fe), deps=[x, topk],
                  attrs={"hidden": H, "experts": E, "top_k": K, "ffn": Fe, "tokens": T, "counts": counts,
                         "capacity": cap or 0, "capacity_factor": cf, "dropped": T * K - kept,
                         "linears": list(lin)})
        if not shared:
            return [moe]
        S, sm = shared * Fe, f"{m}.shared_experts"
        mid = TensorSpec((batch, seq, S), dtype)
        gt = linear(f"{sm}.gate_proj", act, H, S, x)
        up = linear(f"{sm}.up_proj", act, H, S, x)
        si = add(f"{sm}.act_fn", "elementwise", "aten.silu.default", inputs=[mid], outputs=[mid], flops=4 * T * S,
                 attrs={"elements": T * S, "operands": 1}, deps=[gt])
        hm = add(f"{sm}.mul", "elementwise", "aten.mul.Tensor", inputs=[mid, mid], outputs=[mid], flops=T * S,
                 attrs={"elements": T * S, "operands": 2}, deps=[si, up])
        return [moe, linear(f"{sm}.down_proj", mid, S, H, hm)]

    mla = dims.get("attention", "gqa") == "mla"

    def mla_attention(a, n1, parts):
        """DeepSeek's multi-head latent attention (DeepSeek-V2 paper, arXiv:2405.04434, sec. 2.1; HF
        DeepseekV3Attention's names) reading op ``n1``; returns the o_proj op. The query through its low-rank
        pair (q_a_proj, q_a_layernorm, q_b_proj: nh x (nope + rope) columns); one latent per token
        (kv_a_proj_with_mqa: kv_lora_rank + rope columns, the rope part one key shared by every head; its
        norm) -- what the cache holds. Prefill entries (and training) rebuild each head's key and value from the
        latents of the keys they attend (kv_b_proj over those tokens) and run multi-head attention of qk dim
        nope + rope and v dim v_head_dim. Decode entries (``absorbed``) fold kv_b_proj into the query and the
        output (kv_b_proj.q_absorb: nope -> kv_lora_rank per head; .o_absorb: kv_lora_rank -> v_head_dim per
        head; each one GEMM of the heads side by side: the weights and FLOPs of the per-head products, a
        per-head input read once) and attend the cached latents directly: every query head over one shared KV
        head of width kv_lora_rank + rope whose first kv_lora_rank columns are the values (``kv_shared``), as
        vLLM and FlashMLA run it. q_a_proj and kv_a_proj_with_mqa are replicated over a tensor-parallel group
        (one GEMM: the lowering fuses them), q_b/kv_b/absorbs column-parallel by heads, o_proj row-parallel."""
        ql = whole(dims.get("q_lora_rank", 0), f"{name}: dims['q_lora_rank']", 0)
        kl, dn, dr, dv = (whole(dims[k], f"{name}: dims[{k!r}]", 1) for k in
                          ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"))
        dq = dn + dr
        if ql:
            qa = linear(f"{a}.q_a_proj", act, H, ql, n1, tp="replicated")
            qn = norm(f"{a}.q_a_layernorm", qa, width=ql)
            q = linear(f"{a}.q_b_proj", TensorSpec((batch, seq, ql), dtype), ql, nh * dq, qn)
        else:
            q = linear(f"{a}.q_proj", act, H, nh * dq, n1)
        kva = linear(f"{a}.kv_a_proj_with_mqa", act, H, kl + dr, n1, tp="replicated")
        kvn = norm(f"{a}.kv_a_layernorm", kva, width=kl)
        wb = ParamRef(f"{a}.kv_b_proj.weight", TensorSpec((nh * (dn + dv), kl), dtype))
        lat = [absorbed(p) for p in parts]
        ats, outs = [], []
        if not all(lat):  # the keys' and values' heads rebuilt from the latents the queries attend
            rows = sum(b * k for (b, _, k, _), ab in zip(parts, lat) if not ab)
            kvb = linear(f"{a}.kv_b_proj", TensorSpec((batch, seq, kl), dtype), kl, nh * (dn + dv), kvn, rows=rows,
                         w=wb)
        if any(lat):
            rows = sum(b * q_ for (b, q_, _, _), ab in zip(parts, lat) if ab)
            qab = linear(f"{a}.kv_b_proj.q_absorb", TensorSpec((batch, seq, nh * dn), dtype), dn, nh * kl, q,
                         rows=rows, tp="column", w=wb)
        for j, ((ab, aq, akv, causal), lt) in enumerate(zip(parts, lat)):
            d, vd, kvh = (kl + dr, kl, 1) if lt else (dq, dv, nh)
            at_attrs = {"batch": ab, "heads": nh, "kv_heads": kvh, "q_len": aq, "kv_len": akv, "head_dim": d,
                        "v_head_dim": vd, "causal": bool(causal), "cache_width": kl + dr}
            if lt:
                at_attrs["kv_shared"] = True
            at = add(f"{a}.sdpa" + (f".{j}" if len(parts) > 1 else ""), "attention",
                     "aten.scaled_dot_product_attention.default", inputs=[TensorSpec((ab, nh, aq, d), dtype)],
                     outputs=[TensorSpec((ab, nh, aq, vd), dtype)], flops=2 * ab * nh * aq * akv * (d + vd),
                     attrs=at_attrs, deps=[qab, kvn] if lt else [q, kvb])
            (ats if lt else outs).append(at)
        if ats:
            outs.append(linear(f"{a}.kv_b_proj.o_absorb", TensorSpec((batch, seq, nh * kl), dtype), kl, nh * dv,
                               ats, rows=rows, tp="column", w=wb))
        return linear(f"{a}.o_proj", TensorSpec((batch, seq, nh * dv), dtype), nh * dv, H, outs)

    def layer(p, x_in, moe_layer):
        """One decoder layer named ``p`` reading op ``x_in``: attention, then the MLP (or the MoE layer)."""
        dep0 = [x_in]
        a, m = f"{p}.{N['attn']}", f"{p}.{N['mlp']}"
        n1 = norm(f"{p}.{N['ln1']}", x_in)
        parts = attention if attention is not None else [(batch, seq, kv_len, seq > 1)]
        if any(min(b, q, k) < 1 or q > k for b, q, k, _ in parts):
            raise WorkloadError(f"{name}: attention entries {parts}: each needs batch, q_len, kv_len >= 1 and "
                                "q_len <= kv_len")
        if mla:
            o = mla_attention(a, n1, parts)
        else:
            if N["qkv"]:  # one fused projection (GPT-2's c_attn, MPT's Wqkv)
                qkv = linear(f"{a}.{N['qkv']}", act, H, (nh + 2 * kv) * hd, n1)
                qkv_deps = [add(f"{a}.view", "view", "aten.view.default",
                                inputs=[TensorSpec((batch, seq, (nh + 2 * kv) * hd), dtype)],
                                outputs=[TensorSpec((batch, nh, seq, hd), dtype)], deps=[qkv])]
            else:
                qkv_b = bias or bool(dims.get("qkv_bias", False))  # Qwen2: biases on q, k and v alone
                q = linear(f"{a}.q_proj", act, H, nh * hd, n1, with_bias=qkv_b)
                k = linear(f"{a}.k_proj", act, H, kv * hd, n1, with_bias=qkv_b)
                v = linear(f"{a}.v_proj", act, H, kv * hd, n1, with_bias=qkv_b)
                qv = add(f"{a}.view", "view", "aten.view.default", inputs=[TensorSpec((batch, seq, nh * hd), dtype)],
                         outputs=[TensorSpec((batch, nh, seq, hd), dtype)], deps=[q])
                qkv_deps = [qv, k, v]
            ats = []
            for j, (ab, aq, akv, causal) in enumerate(parts):
                at_attrs = {"batch": ab, "heads": nh, "kv_heads": kv, "q_len": aq, "kv_len": akv, "head_dim": hd,
                            "causal": bool(causal)}
                if positions == "alibi":  # a per-head linear bias on the scores, added inside the attention kernel
                    at_attrs["alibi"] = True
                ats.append(add(f"{a}.sdpa" + (f".{j}" if len(parts) > 1 else ""), "attention",
                               "aten.scaled_dot_product_attention.default",
                               inputs=[TensorSpec((ab, nh, aq, hd), dtype)],
                               outputs=[TensorSpec((ab, nh, aq, hd), dtype)],
                               flops=4 * ab * nh * aq * akv * hd, attrs=at_attrs, deps=qkv_deps))
            o = linear(f"{a}.{N['o']}", TensorSpec((batch, seq, nh * hd), dtype), nh * hd, H, ats)
        r1 = residual(f"{p}.{N['add1']}", [o] + dep0)
        n2 = norm(f"{p}.{N['ln2']}", r1)
        if moe_layer:
            out = moe_mlp(f"{p}.{moe_module}", n2)
            return residual(f"{p}.{N['add2']}", out + [r1])
        mid = TensorSpec((batch, seq, I), dtype)
        if mlp_kind == "swiglu":
            gt = linear(f"{m}.gate_proj", act, H, I, n2)
            up = linear(f"{m}.{N['up']}", act, H, I, n2)
            si = add(f"{m}.{N['act']}", "elementwise", "aten.silu.default", inputs=[mid], outputs=[mid],
                     flops=4 * T * I, attrs={"elements": T * I, "operands": 1}, deps=[gt])
            hidden = add(f"{m}.mul", "elementwise", "aten.mul.Tensor", inputs=[mid, mid], outputs=[mid], flops=T * I,
                         attrs={"elements": T * I, "operands": 2}, deps=[si, up])
        else:  # GELU (erf form: 5 FLOPs per element, the importer's count)
            up = linear(f"{m}.{N['up']}", act, H, I, n2)
            hidden = add(f"{m}.{N['act']}", "elementwise", "aten.gelu.default", inputs=[mid], outputs=[mid],
                         flops=5 * T * I, attrs={"elements": T * I, "operands": 1}, deps=[up])
        dn = linear(f"{m}.{N['down']}", mid, I, H, hidden)
        return residual(f"{p}.{N['add2']}", [dn, r1])
    first = len(ops)
    experts = int(dims.get("experts", 0) or 0)
    D = min(L, whole(dims.get("dense_layers", 0), f"{name}: dims['dense_layers']", 0)) if experts else L
    meta = {"dims": dict(dims), "batch": batch, "seq": seq, "kv_len": kv_len, "layers": L, "dtype": dtype}
    if D and D < L:  # DeepSeek-MoE's dense first layer(s): every layer stamped out, no repeated block
        x = first - 1
        for li in range(L):
            x = layer(f"{N['layers']}.{li}", x, li >= D)
        blocks = []
        meta["layer_prefix"] = N["layers"]  # the layers are still named {prefix}.{i} (training's full recompute)
    else:
        layer(N["layers"] + ".0", first - 1, experts > 0 and D == 0)
        block = ops[first:]
        ops.extend(WorkloadGraph.repeat_block(block, N["layers"], L, offset=first))
        blocks = [Block(N["layers"], first, first + len(block), L)]
    if head:
        fn = norm(N["final"], len(ops) - 1, rows=head_tokens)
        linear("lm_head", act, H, V, fn, weight=table if tied else None, with_bias=False, rows=head_tokens)
    return WorkloadGraph(name, ops, source="hand", inputs=[TensorSpec((batch, seq), "int64")], blocks=blocks,
                         meta=meta)


def resnet50_graph(batch: int = 1, *, dtype: str = "fp32", name: str = "resnet50") -> WorkloadGraph:
    """ResNet-50 v1.5 (HuggingFace ``ResNetModel`` names: stride in the 3x3, no classifier) at 224 x 224:
    convs with their batch norms and ReLUs, the stem max pool, the residual adds, the final average pool."""
    ops: list[Op] = []

    def add(name, kind, target, inputs, outputs, params=(), flops=0, attrs=None, deps=()):
        ops.append(Op(name, kind, target, tuple(inputs), tuple(outputs), tuple(params), flops,
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
