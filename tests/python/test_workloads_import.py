"""from_torch and the transformers models: op counts equal the analytic counts of their configurations, exactly.

Every expected figure is derived here from the published configuration
numbers (``kernbench.workloads.models``) and the FLOPs conventions of
``kernbench.workloads.torch_ops`` (2mnk per GEMM, the per-element table),
never read back from the importer.
"""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from kernbench.workloads import WorkloadError, WorkloadGraph, from_torch, import_model  # noqa: E402
from kernbench.workloads import models  # noqa: E402

B, S = 2, 16  # batch and sequence of the transformer imports (small: the counts scale exactly)


# ---- a hand-checkable module ---------------------------------------------------------------------------------
class _MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.act = torch.nn.GELU()
        self.fc2 = torch.nn.Linear(32, 8, bias=False)
        self.norm = torch.nn.LayerNorm(8)

    def forward(self, x):
        return self.norm(self.fc2(self.act(self.fc1(x))).transpose(0, 1).contiguous().transpose(0, 1) + x[..., :8])


def test_mlp_ops_flops_bytes_and_deps():
    """from_torch on a hand-checkable MLP gives its ops in order with FLOPs by the torch_ops conventions (bias adds,
    GELU's 5, LayerNorm's 7 per element), a transpose+contiguous as a real copy, deps through views to the producing
    op, exact parameter and activation bytes, and a lossless dict round trip."""
    with torch.device("meta"):
        m = _MLP()
    g = from_torch(m, (torch.zeros(4, 16, device="meta"),))
    real = [op for op in g.ops if op.kind != "view"]
    assert [(op.name, op.kind) for op in real] == [
        ("fc1", "matmul"), ("act", "elementwise"), ("fc2", "matmul"), ("contiguous", "copy"),
        ("add", "elementwise"), ("norm", "norm")]
    fc1, act, fc2, cont, add, norm = real
    assert fc1.flops == 2 * 4 * 32 * 16 + 4 * 32 and fc1.attrs["m"] == 4 and fc1.attrs["k"] == 16
    assert fc1.attrs["weight"] == "fc1.weight" and fc1.attrs["bias"] == "fc1.bias"
    assert act.flops == 4 * 32 * 5  # gelu, erf form: 5 per element
    assert fc2.flops == 2 * 4 * 8 * 32 and fc2.attrs["bias"] is None
    assert cont.attrs["bytes"] == 4 * 8 * 4 and cont.flops == 0  # the transpose really copies
    assert norm.flops == 4 * 8 * 7  # layer norm with weight and bias: 5 + 2 per element
    idx = {op.name: i for i, op in enumerate(g.ops)}
    # deps pass through the views to the ops that produced the data
    assert g.ops[idx["fc2"]].deps == (idx["act"],)
    assert g.ops[idx["contiguous"]].deps == (idx["fc2"],)
    assert g.ops[idx["add"]].deps == (idx["contiguous"],)  # x[..., :8] is a graph input: no dep
    assert g.param_count == 16 * 32 + 32 + 32 * 8 + 8 + 8
    assert g.param_bytes == 4 * g.param_count
    assert g.activation_bytes == 4 * (4 * 32 * 2 + 4 * 8 * 4)
    assert g.flops == sum(op.flops for op in real)
    assert WorkloadGraph.from_dict(g.to_dict()).ops == g.ops


class _Scores(torch.nn.Module):
    def forward(self, q, k):
        return torch.einsum("bhsd,bhtd->bhst", q, k)


class _WeightView(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.empty(8, 4))

    def forward(self, x):
        return x @ self.w.t()


def test_a_view_of_a_weight_is_the_weight():
    """A matmul by a transposed parameter (x @ w.t()) records the parameter itself as its weight, with the GEMM's
    m/k/n, and no activation input for it."""
    with torch.device("meta"):
        m = _WeightView()
    g = from_torch(m, (torch.zeros(3, 4, device="meta"),))
    (mm,) = [op for op in g.ops if op.kind == "matmul"]
    assert mm.attrs["weight"] == "w" and [p.name for p in mm.params] == ["w"]
    assert (mm.attrs["m"], mm.attrs["k"], mm.attrs["n"]) == (3, 4, 8) and not mm.inputs[1:]


def test_einsum_is_a_batched_gemm():
    """An attention-score einsum imports as one matmul with batch b*h and the m/n/k of the contraction, and
    2*batch*m*n*k FLOPs."""
    g = from_torch(_Scores(), (torch.zeros(2, 4, 8, 16, device="meta"), torch.zeros(2, 4, 12, 16, device="meta")))
    (op,) = g.ops
    assert op.kind == "matmul" and (op.attrs["batch"], op.attrs["m"], op.attrs["n"], op.attrs["k"]) == (8, 8, 12, 16)
    assert op.flops == 2 * 8 * 8 * 12 * 16


class _Regions(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x):
        with torch.no_grad():
            y = self.lin(x) * 2
        with torch.autocast("cpu", enabled=False):
            y = y + 1
        return y.relu()


def test_no_grad_and_autocast_regions_are_inlined():
    """Ops inside torch.no_grad() and torch.autocast regions are traced inline, in order and with their deps, like
    the rest of the forward."""
    with torch.device("meta"):
        m = _Regions()
    g = from_torch(m, (torch.zeros(2, 8, device="meta"),))
    assert [(op.name, op.kind, op.deps) for op in g.ops] == [
        ("lin", "matmul", ()), ("mul", "elementwise", (0,)), ("add", "elementwise", (1,)),
        ("relu", "elementwise", (2,))]
    assert g.ops[0].attrs["weight"] == "lin.weight"


class _Odd(torch.nn.Module):
    def forward(self, x):
        return torch.sort(x, dim=-1).values


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)
        self.blocks = torch.nn.ModuleDict({"odd": _Odd()})

    def forward(self, x):
        return self.blocks["odd"](self.proj(x))


def test_unknown_op_names_the_op_and_module_path():
    """An aten op with no kernbench kind (sort) is a WorkloadError naming the op, the module path it was called from
    and the module's class."""
    with torch.device("meta"):
        m = _Net()
    with pytest.raises(WorkloadError, match=r"aten\.sort.*'blocks\.odd' \(_Odd\)"):
        from_torch(m, (torch.zeros(2, 8, device="meta"),))


def test_importing_workloads_does_not_import_torch():
    """`import kernbench.workloads` in a fresh interpreter does not import torch: the importers load lazily, so the
    package works without the torch extra."""
    code = "import sys, kernbench.workloads; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


# ---- GPT-2 ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gpt2():
    return import_model("gpt2", batch=B, seq=S)


def test_gpt2_params_flops_and_activations_exact(gpt2):
    """GPT-2 imports with exactly its published 124,439,808 parameters (tied wte/lm_head counted once, under the
    first name), and matmul, attention, norm and elementwise FLOPs and activation bytes equal to counts derived here
    from its configuration, with its layers as one block."""
    c = models.GPT2
    d, L, V, P, h = c["n_embd"], c["n_layer"], c["vocab_size"], c["n_positions"], c["n_head"]
    T = B * S
    per_layer = 2 * 2 * d + (d * 3 * d + 3 * d) + (d * d + d) + (d * 4 * d + 4 * d) + (4 * d * d + d)
    params = V * d + P * d + L * per_layer + 2 * d  # wte (tied to lm_head: once), wpe, blocks, ln_f
    assert params == 124_439_808  # the published size: the derivation above is the right one
    assert gpt2.param_count == params and gpt2.meta["buffers"] == []
    assert gpt2.param_bytes == 4 * params
    mm = L * (2 * T * d * 3 * d + T * 3 * d + 2 * T * d * d + T * d + 2 * T * d * 4 * d + T * 4 * d
              + 2 * T * 4 * d * d + T * d) + 2 * T * d * V
    assert sum(op.flops for op in gpt2.ops if op.kind == "matmul") == mm
    att = L * 4 * B * h * S * S * (d // h)
    assert sum(op.flops for op in gpt2.ops if op.kind == "attention") == att
    norm = (2 * L + 1) * T * d * 7
    elem = S + T * d + L * (2 * T * d + 8 * T * 4 * d)  # position add, embedding add; residuals, gelu_new (8)
    assert gpt2.flops == mm + att + norm + elem
    f4 = 4
    act = (T * d * f4 + S * 8 * 2 + S * d * f4 + T * d * f4  # wte, arange + add (int64), wpe, add
           + L * f4 * T * (d + 3 * d + d + d + d + d + d + 4 * d + 4 * d + d + d)  # ln1 .. add
           + T * d * f4 + T * V * f4)  # ln_f, logits
    assert gpt2.activation_bytes == act
    assert gpt2.blocks and gpt2.blocks[0].prefix == "transformer.h" and gpt2.blocks[0].count == L
    (wte,) = [op for op in gpt2.ops if op.name == "transformer.wte"]
    (head,) = [op for op in gpt2.ops if op.name == "lm_head"]
    # the tied weight has the name the module declares first, in both ops
    assert [p.name for p in wte.params] == [p.name for p in head.params] == ["transformer.wte.weight"]


# ---- LLaMA-3-8B ----------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def llama8b():
    return import_model("llama3-8b", batch=B, seq=S)


def _llama_counts(c: dict, b: int, s: int) -> dict:
    d, L, V, I = c["hidden_size"], c["num_hidden_layers"], c["vocab_size"], c["intermediate_size"]
    H, KV = c["num_attention_heads"], c["num_key_value_heads"]
    dh = d // H
    T = b * s
    params = 2 * V * d + L * (d * d + 2 * d * KV * dh + d * d + 3 * d * I + 2 * d) + d
    mm = L * 2 * T * (d * d + 2 * d * KV * dh + d * d + 3 * d * I) + 2 * T * d * V
    att = L * 4 * b * H * s * s * dh
    norm1 = 4 * T * d + 2 * T  # LlamaRMSNorm: pow, mean, mul, weight mul per element; eps add, rsqrt per row
    rope_q, rope_k = 3.5 * T * H * dh, 3.5 * T * KV * dh  # mul, neg (half), mul, add (cat is a copy)
    elem = (s + s * dh // 2 + 4 * s * dh  # position add; rotary table: mul, cos, sin, 2 scaling muls
            + L * (rope_q + rope_k + 2 * T * d + 3 * T * I))  # residual adds; silu (2) + gate mul (1)
    flops = mm + att + (2 * L + 1) * norm1 + int(elem)
    e = 2  # bf16
    act = (T * d * e + s * 8 * 2 + s * 4 + s * dh // 2 * 4 + s * dh * 4 * 5 + s * dh * e * 2  # embed; rotary tables
           + L * e * (T * d + T * d + 2 * T * KV * dh  # norm, q, k, v
                      + T * H * dh * 4 + T * H * dh // 2  # q rope: mul, cat, mul, add; neg
                      + T * KV * dh * 4 + T * KV * dh // 2  # k rope
                      + T * d * 4  # sdpa, contiguous, o_proj, residual add
                      + T * d + 4 * T * I + T * d + T * d)  # norm; gate, silu, up, mul; down; add
           + T * d * e + T * V * e)  # final norm, logits
    return {"params": params, "mm": mm, "att": att, "flops": flops, "act": act, "dh": dh}


def test_llama3_8b_params_flops_and_activations_exact(llama8b):
    """LLaMA-3-8B imports with its published 8,030,261,248 parameters plus the rotary inv_freq buffer, and matmul and
    attention FLOPs, total FLOPs and activation bytes equal to the analytic counts of its configuration."""
    c = models.LLAMA3_8B
    n = _llama_counts(c, B, S)
    assert n["params"] == 8_030_261_248  # the published size (untied embeddings)
    buffers = n["dh"] // 2  # rotary inv_freq, fp32
    assert llama8b.meta["buffers"] == ["model.rotary_emb.inv_freq"]
    assert llama8b.param_count == n["params"] + buffers
    assert llama8b.param_bytes == 2 * n["params"] + 4 * buffers
    assert sum(op.flops for op in llama8b.ops if op.kind == "matmul") == n["mm"]
    assert sum(op.flops for op in llama8b.ops if op.kind == "attention") == n["att"]
    assert llama8b.flops == n["flops"]
    assert llama8b.activation_bytes == n["act"]


def test_llama_names_attrs_and_block(llama8b):
    """The imported LLaMA's ops carry HuggingFace's module names, GEMM shapes and GQA attention attrs (causal, 32
    heads, 8 KV heads), its 32 layers form one block whose instances are renamed copies, and each layer's first norm
    depends on the previous layer's residual add."""
    c = models.LLAMA3_8B
    (down,) = [op for op in llama8b.ops if op.name == "model.layers.3.mlp.down_proj"]
    assert down.kind == "matmul" and down.attrs["weight"] == "model.layers.3.mlp.down_proj.weight"
    assert (down.attrs["m"], down.attrs["k"], down.attrs["n"]) == (B * S, c["intermediate_size"], c["hidden_size"])
    (sdpa,) = [op for op in llama8b.ops if op.name == "model.layers.31.self_attn.sdpa"]
    assert sdpa.kind == "attention" and sdpa.attrs["causal"] and not sdpa.attrs["mask"]
    assert (sdpa.attrs["heads"], sdpa.attrs["kv_heads"], sdpa.attrs["head_dim"]) == (32, 8, 128)
    norms = [op for op in llama8b.find("model.layers.0") if op.kind == "norm"]
    assert [op.name for op in norms] == ["model.layers.0.input_layernorm", "model.layers.0.post_attention_layernorm"]
    (blk,) = llama8b.blocks
    assert blk.prefix == "model.layers" and blk.count == c["num_hidden_layers"]
    assert len(llama8b.ops) == blk.first + blk.size * blk.count + (len(llama8b.ops) - blk.first - blk.size * blk.count)
    for i in (0, 17, 31):  # instance i is instance 0 renamed
        inst = llama8b.ops[blk.first + i * blk.size: blk.first + (i + 1) * blk.size]
        assert all(op.name.startswith(f"model.layers.{i}.") for op in inst)
    # layer i's first norm reads layer i-1's last op (the residual add)
    first = llama8b.ops[blk.first + 5 * blk.size]
    assert first.deps == (blk.first + 5 * blk.size - 1,)


@pytest.mark.parametrize("model", ["llama3-8b", "bert-base"])  # a decoder with shared rotary tables; an encoder
def test_stamped_layers_equal_a_full_trace(model):
    """Stamping one traced layer into N (for a decoder with shared rotary tables and for an encoder) gives exactly
    the ops of tracing all N layers: names, shapes, FLOPs, attrs and deps."""
    full = import_model(model, batch=1, seq=8, layers=3, repeat=False)
    stamped = import_model(model, batch=1, seq=8, layers=3)
    assert not full.blocks and stamped.blocks and stamped.meta["repeat"] == "stamped"
    assert len(full.ops) == len(stamped.ops)
    assert full.ops == stamped.ops  # names, shapes, FLOPs, attrs and deps


def test_llama3_70b_80_layers_in_seconds():
    """LLaMA-3-70B's 80 layers import within the time limit (thanks to stamping) with its published 70,553,706,496
    parameters and the analytic FLOPs and activation bytes."""
    t = time.perf_counter()
    g = import_model("llama3-70b", batch=1, seq=128)
    dt = time.perf_counter() - t
    print(f"\nLLaMA-3-70B, 80 layers: {len(g.ops)} ops imported in {dt:.2f} s")
    n = _llama_counts(models.LLAMA3_70B, 1, 128)
    assert n["params"] == 70_553_706_496
    assert g.param_count == n["params"] + n["dh"] // 2
    assert g.flops == n["flops"] and g.activation_bytes == n["act"]
    assert g.blocks[0].count == 80 and dt < 300


# ---- BERT and ResNet-50 --------------------------------------------------------------------------------------
def test_bert_base_params_and_matmul_flops():
    """bert-base imports with its published 109,482,240 parameters plus its two index buffers, matmul FLOPs equal to
    the analytic count (pooler included), and non-causal self-attention over the whole sequence."""
    c = models.BERT_BASE
    g = import_model("bert-base", batch=B, seq=S)
    d, L, V, I, P = (c["hidden_size"], c["num_hidden_layers"], c["vocab_size"], c["intermediate_size"],
                     c["max_position_embeddings"])
    T = B * S
    params = (V + P + c["type_vocab_size"]) * d + 2 * d + L * (4 * (d * d + d) + 2 * 2 * d + 2 * d * I + I + d) \
        + d * d + d
    assert params == 109_482_240  # bert-base-uncased's published size
    assert sorted(g.meta["buffers"]) == ["embeddings.position_ids", "embeddings.token_type_ids"]
    assert g.param_count == params + 2 * P
    mm = L * (4 * (2 * T * d * d + T * d) + 2 * (2 * T * d * I) + T * I + T * d) + 2 * B * d * d + B * d
    assert sum(op.flops for op in g.ops if op.kind == "matmul") == mm
    (sdpa,) = [op for op in g.ops if op.name == "encoder.layer.7.attention.self.sdpa"]
    assert not sdpa.attrs["causal"] and sdpa.attrs["q_len"] == S


def _resnet50_counts(c: dict, b: int, side: int) -> dict:
    """Per-layer analytic count of HF's ResNetModel (bottleneck, stride on the 3x3, projection shortcuts)."""
    convs, bns, relus, adds = [], [], [], []  # convs: (cin, cout, k, oh); others: elements
    params = buffers = 0

    def conv(cin, cout, k, oh):
        nonlocal params, buffers
        convs.append((cin, cout, k, oh))
        bns.append(b * cout * oh * oh)
        params += cin * cout * k * k + 2 * cout
        buffers += 2 * cout

    hw = side // 2
    conv(c["num_channels"], c["embedding_size"], 7, hw)
    relus.append(b * c["embedding_size"] * hw * hw)
    pool_in, hw = b * c["embedding_size"] * hw * hw, hw // 2
    pool_out = b * c["embedding_size"] * hw * hw
    cin = c["embedding_size"]
    for stage, (cout, depth) in enumerate(zip(c["hidden_sizes"], c["depths"])):
        mid = cout // 4
        for j in range(depth):
            stride = 2 if (stage > 0 and j == 0) else 1
            out_hw = hw // stride
            conv(cin, mid, 1, hw)
            relus.append(b * mid * hw * hw)
            conv(mid, mid, 3, out_hw)
            relus.append(b * mid * out_hw * out_hw)
            conv(mid, cout, 1, out_hw)
            if cin != cout or stride != 1:
                conv(cin, cout, 1, out_hw)
            adds.append(b * cout * out_hw * out_hw)
            relus.append(b * cout * out_hw * out_hw)
            cin, hw = cout, out_hw
    conv_flops = sum(2 * (b * oh * oh) * co * (ci * k * k) for ci, co, k, oh in convs)
    final = b * cin * hw * hw
    flops = conv_flops + 4 * sum(bns) + sum(relus) + sum(adds) + pool_out * 9 + b * cin * hw * hw
    act = 4 * (sum(b * co * oh * oh for _, co, _, oh in convs) + sum(bns) + sum(relus) + sum(adds) + pool_out
               + b * cin)
    del pool_in, final
    return {"params": params, "buffers": buffers, "conv_flops": conv_flops, "flops": flops, "act": act,
            "convs": len(convs)}


@pytest.fixture(scope="module")
def resnet():
    return import_model("resnet50", batch=2)


def test_resnet50_params_flops_and_activations_exact(resnet):
    """ResNet-50 (less its classifier) imports with 23,508,032 parameters plus the BN running statistics it reads,
    its 53 convs' FLOPs, total FLOPs and activation bytes equal to the analytic counts, and a strided conv's output
    size and im2col GEMM shape right."""
    g = resnet
    n = _resnet50_counts(models.RESNET50, 2, 224)
    assert n["params"] == 23_508_032 and n["convs"] == 53  # ResNet-50 less its 2048x1000 classifier
    assert g.param_count == n["params"] + n["buffers"]  # BN running mean and variance are read
    assert g.param_bytes == 4 * (n["params"] + n["buffers"])
    assert sum(op.flops for op in g.ops if op.kind == "conv") == n["conv_flops"]
    assert g.flops == n["flops"]
    assert g.activation_bytes == n["act"]
    conv = g.find("encoder.stages.1.layers.0.layer.1.convolution")[0]
    assert conv.attrs["stride"] == [2, 2] and conv.attrs["out_hw"] == [28, 28]
    assert (conv.attrs["gemm_m"], conv.attrs["gemm_n"], conv.attrs["gemm_k"]) == (2 * 28 * 28, 128, 128 * 9)


def test_resnet50_convs_equal_the_k200_hand_written_layers(resnet):
    """K200 case C1's hand-written ResNet-50 (kernbench.k200.resnet50_layers) is the imported model's convs."""
    from kernbench import k200
    hand = {name: (m, n, k) for name, m, n, k, _ in k200.resnet50_layers(2) if name != "fc"}  # no classifier
    imported = {}
    for op in resnet.ops:
        if op.kind != "conv":
            continue
        if op.name == "embedder.embedder.convolution":
            key = "conv1"
        else:
            parts = op.name.split(".")  # encoder.stages.S.layers.B.(layer.J|shortcut).convolution
            s, b = int(parts[2]), int(parts[4])
            key = f"s{s + 1}b{b + 1}." + (f"conv{int(parts[6]) + 1}" if parts[5] == "layer" else "down")
        imported[key] = (op.attrs["gemm_m"], op.attrs["gemm_n"], op.attrs["gemm_k"])
    assert imported == hand
