"""The model catalog: published decoder configurations, each buildable by hand (no torch) or through the importer.

``MODELS`` maps a hyphenated name (``llama2-7b``; ``llama2_7b`` is accepted
too) to a ``ModelSpec``: the numbers of the model's published configuration,
with where they come from. A spec builds

* ``graph(batch, seq, kv_len)``: the hand-built op graph
  (``kernbench.workloads.handbuilt.decoder_graph``, in the HuggingFace module
  names of the family), needing neither torch nor transformers;
* ``builder()``: a callable ``(batch, seq, kv_len) -> WorkloadGraph`` for
  ``kernbench.workloads.estimate.inference`` (decode at ``seq = 1``);
* ``imported(batch, seq)``: the graph of the ``transformers`` model built from
  the same numbers on the meta device and traced by ``from_torch``
  (``kernbench.workloads.models``; needs ``kernbench[torch]``)::

    from kernbench.workloads import get_model
    spec = get_model("llama2-70b")
    g = spec.graph(1, 2048)                    # hand-built prefill
    est = estimate.inference(spec.builder(), system, ParallelPlan(tp=8), batch=8, prompt=512, decode_steps=64)
    spec.params, spec.weight_bytes("bf16")

The hand-built and the imported graph have the same GEMMs (the
tests compare them); the imported one also has the views, casts and the
rotary/mask ops the modelling code runs. bert-base (an encoder) and resnet50
(a CNN) are not decoders: they stay in ``models`` (``import_model``) and
``handbuilt.resnet50_graph``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kernbench.workloads.graph import DTYPE_BYTES, WorkloadError, WorkloadGraph

__all__ = ["ModelSpec", "MODELS", "ATTENTIONS", "MLA_KEYS"]

#: Attention kinds: ``gqa`` (query heads sharing KV heads; MHA and MQA are its ends) and ``mla`` (DeepSeek-V2/V3's
#: multi-head latent attention: K and V rebuilt from one cached latent per token, DeepSeek-V2 paper, sec. 2.1).
ATTENTIONS = ("gqa", "mla")
#: The MLA sizes (DeepSeek's config.json names).
MLA_KEYS = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer's published configuration.

    ``family`` fixes the module names (``llama``: ``LlamaForCausalLM``, ``gpt``: ``GPT2LMHeadModel``, ``mpt``:
    ``MptForCausalLM``); ``ffn`` is the MLP's inner width; ``bias``: every linear and LayerNorm has a bias;
    ``tied``: the LM head is the embedding table; ``max_positions``: the positions the model was trained for
    (the rows of a learned position table).
    """

    name: str
    family: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    vocab: int
    norm: str            # "rms" | "layer"
    mlp: str             # "swiglu" | "gelu"
    positions: str       # "rotary" | "alibi" | "learned"
    dtype: str = "bf16"
    source: str = ""
    bias: bool = False
    tied: bool = False
    max_positions: int = 2048
    experts: int = 0                 # routed experts per MoE layer (0: a dense model)
    top_k: int = 0
    expert_ffn: int = 0              # each expert's inner width (ffn is the dense layers')
    shared_experts: int = 0          # always-applied experts (one SwiGLU MLP of shared_experts x expert_ffn)
    dense_layers: int = 0            # the first layers keep the dense MLP
    moe_module: str = "mlp"
    expert_linears: tuple[str, str, str] = ("gate_proj", "up_proj", "down_proj")
    attention: str = "gqa"           # "gqa" (MHA and MQA included) | "mla" (DeepSeek's multi-head latent attention)
    q_lora_rank: int = 0             # MLA: the query's compressed width (0: one direct q projection)
    kv_lora_rank: int = 0            # MLA: the cached latent's width
    qk_nope_head_dim: int = 0        # MLA: each head's query/key dims without rotary positions
    qk_rope_head_dim: int = 0        # MLA: the rotary dims (one key part shared by all heads, cached)
    v_head_dim: int = 0              # MLA: each head's value dim
    qkv_bias: bool = False           # biases on q, k and v only (Qwen2; ``bias`` puts them on every linear)

    def __post_init__(self):
        if self.family not in ("llama", "gpt", "mpt") or self.norm not in ("rms", "layer") \
                or self.mlp not in ("swiglu", "gelu") or self.positions not in ("rotary", "alibi", "learned") \
                or self.dtype not in DTYPE_BYTES:
            raise WorkloadError(f"{self.name}: family {self.family!r}, norm {self.norm!r}, mlp {self.mlp!r}, "
                                f"positions {self.positions!r} or dtype {self.dtype!r} unknown")
        for key in ("hidden", "layers", "heads", "kv_heads", "head_dim", "ffn", "vocab", "max_positions"):
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise WorkloadError(f"{self.name}: {key} = {v!r}: expected a whole number >= 1")
        for key in ("experts", "top_k", "expert_ffn", "shared_experts", "dense_layers") + MLA_KEYS:
            v = getattr(self, key)
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise WorkloadError(f"{self.name}: {key} = {v!r}: expected a whole number >= 0")
        if self.heads % self.kv_heads:
            raise WorkloadError(f"{self.name}: {self.heads} heads are not a multiple of {self.kv_heads} KV heads")
        if self.experts and not (1 <= self.top_k <= self.experts and self.expert_ffn >= 1 and self.mlp == "swiglu"):
            raise WorkloadError(f"{self.name}: {self.experts} experts need 1 <= top_k ({self.top_k}) <= experts, "
                                f"expert_ffn ({self.expert_ffn}) >= 1 and a SwiGLU MLP ({self.mlp})")
        if self.attention not in ATTENTIONS:
            raise WorkloadError(f"{self.name}: attention {self.attention!r} unknown (known: {', '.join(ATTENTIONS)})")
        if self.attention == "mla":
            short = [k for k in MLA_KEYS if k != "q_lora_rank" and getattr(self, k) < 1]
            if short or self.family != "llama" or self.bias or self.qkv_bias or self.kv_heads != self.heads \
                    or self.head_dim != self.qk_nope_head_dim + self.qk_rope_head_dim:
                raise WorkloadError(
                    f"{self.name}: MLA needs kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim and v_head_dim >= 1"
                    f"{' (not ' + ', '.join(short) + ')' if short else ''}, the llama family without biases, "
                    f"kv_heads = heads ({self.kv_heads}, {self.heads}) and head_dim = qk_nope_head_dim + "
                    f"qk_rope_head_dim ({self.head_dim})")

    @property
    def activation(self) -> str:
        """The MLP's activation (``swiglu`` | ``gelu``): a YAML spec's ``activation`` key, the ``mlp`` field."""
        return self.mlp

    # ---- graphs -----------------------------------------------------------------------------------------
    @property
    def dims(self) -> dict:
        """The numbers as ``handbuilt.decoder_graph``'s ``dims``."""
        return {"hidden": self.hidden, "heads": self.heads, "kv_heads": self.kv_heads, "head_dim": self.head_dim,
                "intermediate": self.ffn, "vocab": self.vocab, "layers": self.layers, "family": self.family,
                "norm": self.norm, "mlp": self.mlp, "positions": self.positions, "bias": self.bias,
                "tied": self.tied, "max_positions": self.max_positions, **self.moe_dims, **self.attention_dims}

    @property
    def attention_dims(self) -> dict:
        """The attention keys of ``dims`` beyond GQA's (empty for a GQA model without q/k/v-only biases)."""
        out: dict = {"qkv_bias": True} if self.qkv_bias else {}
        if self.attention == "mla":
            out.update({"attention": "mla", **{k: getattr(self, k) for k in MLA_KEYS}})
        return out

    @property
    def moe_dims(self) -> dict:
        """The MoE keys of ``dims`` (handbuilt's module doc; empty for a dense model)."""
        if not self.experts:
            return {}
        return {"experts": self.experts, "top_k": self.top_k, "expert_ffn": self.expert_ffn,
                "shared_experts": self.shared_experts, "dense_layers": self.dense_layers,
                "moe_module": self.moe_module, "expert_linears": tuple(self.expert_linears)}

    def graph(self, batch: int = 1, seq: int = 128, kv_len: int | None = None, *, layers: int | None = None,
              dtype: str | None = None, embed: bool = True, head: bool = True, routing: dict | None = None,
              capacity_factor: float | None = None) -> WorkloadGraph:
        """The hand-built graph: ``layers`` layers (default all), batch x seq new tokens attending ``kv_len`` keys
        (default seq: a prefill); ``embed``/``head``: the embeddings and the final norm + LM head. An MoE model
        also takes ``routing`` (``skew``, ``hot``, ``counts``, ``seed``: kernbench.workloads.moe) and
        ``capacity_factor`` (None: dropless)."""
        from kernbench.workloads.handbuilt import decoder_graph
        dims = self.dims
        if routing is not None or capacity_factor is not None:
            if not self.experts:
                raise WorkloadError(f"{self.name}: routing and capacity_factor are MoE inputs; the model has no "
                                    "experts")
            dims.update(routing=dict(routing or {}), capacity_factor=capacity_factor)
        g = decoder_graph(batch, seq, kv_len, dims=dims, layers=layers, dtype=dtype or self.dtype,
                          embed=embed, head=head, name=self.name)
        g.meta["model"] = self.name
        return g

    def builder(self, **kw) -> Callable[[int, int, int], WorkloadGraph]:
        """``(batch, seq, kv_len) -> graph(batch, seq, kv_len, **kw)``: the model argument of
        ``estimate.inference``."""
        return lambda batch, seq, kv_len: self.graph(batch, seq, kv_len, **kw)

    def imported(self, batch: int = 1, seq: int = 128, *, layers: int | None = None,
                 dtype: str | None = None) -> WorkloadGraph:
        """The graph of the ``transformers`` model built from these numbers (meta device) and traced by
        ``from_torch`` (``models.import_model``); ``dtype`` defaults to the spec's."""
        try:
            import torch  # noqa: F401
            import transformers  # noqa: F401
        except ImportError as e:
            raise WorkloadError(f"{self.name}: importing needs torch and transformers: "
                                "pip install 'kernbench[torch]' (graph() needs neither)") from e
        from kernbench.workloads.models import import_model
        return import_model(self.name, batch, seq, layers=layers, dtype=dtype or self.dtype)

    # ---- sizes ------------------------------------------------------------------------------------------
    @property
    def embedding_params(self) -> int:
        """The token table (twice if the LM head is untied) and a learned position table."""
        n = self.vocab * self.hidden * (1 if self.tied else 2)
        return n + (self.max_positions * self.hidden if self.positions == "learned" else 0)

    @property
    def layer_params(self) -> int:
        """One dense decoder layer: attention, MLP and the two norms (biases where the model has them)."""
        mlp = (3 if self.mlp == "swiglu" else 2) * self.hidden * self.ffn + (self.ffn + self.hidden if self.bias else 0)
        return self.attention_params + mlp + 2 * self.norm_params

    @property
    def attention_params(self) -> int:
        """One layer's attention projections (and MLA's two latent norms)."""
        H = self.hidden
        if self.attention == "mla":  # DeepSeek-V2 paper, eqs. (9)-(18): W^DQ, W^UQ/W^QR, W^DKV/W^KR, W^UK/W^UV, W^O
            nh, ql, kl, qk = self.heads, self.q_lora_rank, self.kv_lora_rank, self.head_dim
            q = H * ql + ql + ql * nh * qk if ql else H * nh * qk
            return q + H * (kl + self.qk_rope_head_dim) + kl + kl * nh * (self.qk_nope_head_dim + self.v_head_dim) \
                + nh * self.v_head_dim * H
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        return H * (q + 2 * kv) + q * H + (q + 2 * kv + H if self.bias else q + 2 * kv if self.qkv_bias else 0)

    def moe_layer_params(self, experts: int) -> int:
        """One MoE layer counting ``experts`` routed experts (all of them: its parameters; top_k: the active
        ones): attention, the router, the experts, the shared experts and the two norms (with ``bias``: the
        router's and every expert linear's biases too, as GPT-OSS has them)."""
        H, F, S = self.hidden, self.expert_ffn, self.shared_experts
        biases = self.experts + experts * (2 * F + H) + (2 * S * F + H if S else 0) if self.bias else 0
        return self.attention_params + H * self.experts + 3 * H * F * (experts + S) + 2 * self.norm_params + biases

    @property
    def norm_params(self) -> int:
        return self.hidden * (2 if self.norm == "layer" and self.bias else 1)

    @property
    def params(self) -> int:
        """Parameters: the layers, the final norm and the embeddings (a tied LM head once)."""
        return self._params(self.experts)

    @property
    def active_params(self) -> int:
        """Parameters one token runs through: an MoE layer's top_k routed experts only (= params when dense)."""
        return self._params(self.top_k)

    def _params(self, experts: int) -> int:
        if not self.experts:
            return self.layers * self.layer_params + self.norm_params + self.embedding_params
        dense = min(self.dense_layers, self.layers)
        return dense * self.layer_params + (self.layers - dense) * self.moe_layer_params(experts) \
            + self.norm_params + self.embedding_params

    def kv_bytes_per_token(self, dtype: str | None = None, *, tp: int = 1, layers: int | None = None) -> int:
        """KV-cache bytes one token takes on one tensor-parallel rank over ``layers`` layers (default all), in
        ``dtype`` (default the spec's). GQA: K and V, ``2 x kv_heads / tp x head_dim`` per layer (at least one KV
        head: replicated when tp exceeds them, as vLLM does); MLA: the compressed latent and the shared rotary
        key, ``kv_lora_rank + qk_rope_head_dim`` per layer, whole on every rank (vLLM keeps it replicated).
        The one formula of memory.py, serving and estimate (through ``cache_width``)."""
        d = dtype or self.dtype
        if d not in DTYPE_BYTES:
            raise WorkloadError(f"unknown dtype {d!r} (known: {', '.join(DTYPE_BYTES)})")
        n = self.layers if layers is None else layers
        return self.cache_width(tp) * n * DTYPE_BYTES[d]

    def cache_width(self, tp: int = 1) -> int:
        """Elements one token caches per layer on one of ``tp`` ranks (``kv_bytes_per_token``'s)."""
        if self.attention == "mla":
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * max(1, self.kv_heads // tp) * self.head_dim

    def weight_bytes(self, dtype: str | None = None) -> int:
        """Bytes of the parameters stored in ``dtype`` (default the spec's)."""
        d = dtype or self.dtype
        if d not in DTYPE_BYTES:
            raise WorkloadError(f"unknown dtype {d!r} (known: {', '.join(DTYPE_BYTES)})")
        return self.params * DTYPE_BYTES[d]


def _llama(name: str, hidden: int, layers: int, heads: int, kv_heads: int, ffn: int, vocab: int, source: str,
           max_positions: int, dtype: str = "bf16") -> ModelSpec:
    # RMSNorm, rotary positions, SwiGLU MLP, no biases, an untied LM head.
    return ModelSpec(name, "llama", hidden, layers, heads, kv_heads, hidden // heads, ffn, vocab, "rms", "swiglu",
                     "rotary", dtype=dtype, source=source, max_positions=max_positions)


def _mpt(name: str, hidden: int, layers: int, heads: int, source: str) -> ModelSpec:
    # ALiBi, LayerNorm without bias, GELU MLP of 4 x d, no biases, tied LM head; vocab 50368 (the yaml's).
    return ModelSpec(name, "mpt", hidden, layers, heads, heads, hidden // heads, 4 * hidden, 50368, "layer", "gelu",
                     "alibi", source=source, tied=True, max_positions=2048)


def _megatron(name: str, hidden: int, layers: int, heads: int, source: str) -> ModelSpec:
    # GPT-style: learned positions, LayerNorm and linears with biases, GELU MLP of 4 h, tied embeddings,
    # vocab 51200 (GPT-2's BPE padded to a multiple of 1024 x TP 8), sequence 2048.
    return ModelSpec(name, "gpt", hidden, layers, heads, heads, hidden // heads, 4 * hidden, 51200, "layer", "gelu",
                     "learned", source=source, bias=True, tied=True, max_positions=2048)


class _Catalog(dict):
    """A dict of specs by hyphenated name that also finds ``llama2_7b`` or ``Llama2-7B`` (``[]``, ``in``, ``get``)."""

    def _key(self, name):
        return name.lower().replace("_", "-") if isinstance(name, str) else name

    def __missing__(self, name):
        key = self._key(name)
        if key != name and dict.__contains__(self, key):
            return self[key]
        raise KeyError(f"unknown model {name!r} (known: {', '.join(self)})")

    def __contains__(self, name) -> bool:
        return dict.__contains__(self, self._key(name))

    def get(self, name, default=None):
        return self[name] if name in self else default


#: The catalog: name -> spec, each with its source (``_`` is accepted for ``-``: ``MODELS["llama2_7b"]``).
MODELS: dict[str, ModelSpec] = _Catalog((s.name, s) for s in [
    # https://huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json (models.LLAMA3_8B)
    _llama("llama3-8b", 4096, 32, 32, 8, 14336, 128256, "meta-llama/Meta-Llama-3-8B config.json", 8192),
    # https://huggingface.co/meta-llama/Meta-Llama-3-70B/blob/main/config.json (models.LLAMA3_70B)
    _llama("llama3-70b", 8192, 80, 64, 8, 28672, 128256, "meta-llama/Meta-Llama-3-70B config.json", 8192),
    # https://huggingface.co/meta-llama/Llama-2-7b-hf/blob/main/config.json (models.LLAMA2_7B)
    # (the published weights are fp16, as for all three LLaMA-2 sizes)
    _llama("llama2-7b", 4096, 32, 32, 32, 11008, 32000, "meta-llama/Llama-2-7b-hf config.json", 4096, "fp16"),
    # https://huggingface.co/meta-llama/Llama-2-13b-hf/blob/main/config.json (models.LLAMA2_13B)
    _llama("llama2-13b", 5120, 40, 40, 40, 13824, 32000, "meta-llama/Llama-2-13b-hf config.json", 4096, "fp16"),
    # https://huggingface.co/meta-llama/Llama-2-70b-hf/blob/main/config.json (models.LLAMA2_70B): GQA, 8 KV heads
    _llama("llama2-70b", 8192, 80, 64, 8, 28672, 32000, "meta-llama/Llama-2-70b-hf config.json", 4096, "fp16"),
    # llm-foundry scripts/train/yamls/pretrain/mpt-7b.yaml (models.MPT_7B)
    _mpt("mpt-7b", 4096, 32, 32, "mosaicml/llm-foundry scripts/train/yamls/pretrain/mpt-7b.yaml"),
    # llm-foundry scripts/train/yamls/pretrain/mpt-13b.yaml (models.MPT_13B)
    _mpt("mpt-13b", 5120, 40, 40, "mosaicml/llm-foundry scripts/train/yamls/pretrain/mpt-13b.yaml"),
    # Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", Table 1
    _megatron("megatron-22b", 6144, 48, 64, "Korthikanti et al. 2022 (arXiv:2205.05198), Table 1: 22B"),
    # the same Table 1 (GPT-3 of Brown et al. 2020, "Language Models are Few-Shot Learners", Table 2.1)
    _megatron("gpt3-175b", 12288, 96, 96, "Korthikanti et al. 2022 (arXiv:2205.05198), Table 1: 175B (GPT-3)"),
    # the same Table 1: 530B (MT-NLG, Smith et al. 2022), 1T (as Narayanan et al. 2021, "Efficient Large-Scale
    # Language Model Training on GPU Clusters Using Megatron-LM", Table 1: hidden 25600, 128 layers, 160 heads)
    _megatron("turing-530b", 20480, 105, 128, "Korthikanti et al. 2022 (arXiv:2205.05198), Table 1: 530B "
              "(Megatron-Turing NLG)"),
    _megatron("megatron-1t", 25600, 128, 160, "Korthikanti et al. 2022 (arXiv:2205.05198), Table 1: 1T; "
              "Narayanan et al. 2021 (arXiv:2104.04473), Table 1"),
    # https://huggingface.co/openai-community/gpt2/blob/main/config.json (models.GPT2): fp32 weights, 1024
    # positions, gelu_new (the importer counts its tanh form as 8 FLOPs per element, the hand graph 5)
    ModelSpec("gpt2", "gpt", 768, 12, 12, 12, 64, 3072, 50257, "layer", "gelu", "learned", dtype="fp32",
              source="openai-community/gpt2 config.json", bias=True, tied=True, max_positions=1024),
    # Mixture of experts. https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json: hidden 4096,
    # 32 layers, 32 heads (8 KV), intermediate 14336 per expert, vocab 32000, num_local_experts 8,
    # num_experts_per_tok 2, max_position_embeddings 32768, sliding_window null; HF modules block_sparse_moe.gate
    # and block_sparse_moe.experts.{e}.w1 (gate), w3 (up), w2 (down)
    ModelSpec("mixtral-8x7b", "llama", 4096, 32, 32, 8, 128, 14336, 32000, "rms", "swiglu", "rotary",
              source="mistralai/Mixtral-8x7B-v0.1 config.json", max_positions=32768, experts=8, top_k=2,
              expert_ffn=14336, moe_module="block_sparse_moe", expert_linears=("w1", "w3", "w2")),
    # https://huggingface.co/deepseek-ai/deepseek-moe-16b-base/blob/main/config.json: hidden 2048, 28 layers,
    # 16 heads (16 KV), intermediate 10944 (the dense first layer: first_k_dense_replace 1), moe_intermediate_size
    # 1408, n_routed_experts 64, n_shared_experts 2, num_experts_per_tok 6, vocab 102400, max_position_embeddings
    # 4096, untied; HF modules mlp.gate, mlp.experts.{e}.{gate,up,down}_proj, mlp.shared_experts (one MLP of
    # 2 x 1408)
    ModelSpec("deepseek-moe-16b", "llama", 2048, 28, 16, 16, 128, 10944, 102400, "rms", "swiglu", "rotary",
              source="deepseek-ai/deepseek-moe-16b-base config.json", max_positions=4096, experts=64, top_k=6,
              expert_ffn=1408, shared_experts=2, dense_layers=1),
    # Llama 3.1: https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json (and -70B, -405B): the
    # Llama-3 architecture at max_position_embeddings 131072, rope_scaling {rope_type llama3, factor 8,
    # original_max_position_embeddings 8192} (a frequency rescaling: no op, no parameter). 405B: hidden 16384,
    # intermediate 53248, 126 layers, 128 heads, 8 KV heads, vocab 128256 (models.LLAMA3_1_*)
    _llama("llama3.1-8b", 4096, 32, 32, 8, 14336, 128256, "meta-llama/Llama-3.1-8B config.json", 131072),
    _llama("llama3.1-70b", 8192, 80, 64, 8, 28672, 128256, "meta-llama/Llama-3.1-70B config.json", 131072),
    _llama("llama3.1-405b", 16384, 126, 128, 8, 53248, 128256, "meta-llama/Llama-3.1-405B config.json", 131072),
    # https://huggingface.co/meta-llama/Llama-3.3-70B-Instruct/blob/main/config.json: Llama-3.1-70B's numbers
    _llama("llama3.3-70b", 8192, 80, 64, 8, 28672, 128256, "meta-llama/Llama-3.3-70B-Instruct config.json", 131072),
    # Grok-1 (314B): github.com/xai-org/grok-1 run.py's LanguageModelConfig -- vocab_size 128 * 1024,
    # sequence_len 8192, emb_size 48 * 128 = 6144, key_size 128, num_q_heads 48, num_kv_heads 8, num_layers 64,
    # num_experts 8, num_selected_experts 2, widening_factor 8 (model.py ffn_size: int(8 x 6144) x 2 // 3 =
    # 32768); model.py InOutEmbed decodes with the input table (tied). Modelled: a gated MLP of three matrices per
    # expert (Grok's is GELU-gated, counted as SwiGLU: the same GEMMs); not modelled: its four RMSNorms per layer
    # (two counted: 2 x 6144 x 64 parameters fewer), the attention-logit and output soft-caps (elementwise)
    ModelSpec("grok-1", "llama", 6144, 64, 48, 8, 128, 32768, 131072, "rms", "swiglu", "rotary",
              source="xai-org/grok-1 run.py, model.py", tied=True, max_positions=8192, experts=8, top_k=2,
              expert_ffn=32768),
    # https://huggingface.co/Qwen/Qwen3-30B-A3B/blob/main/config.json: hidden 2048, 48 layers, 32 heads, 4 KV heads,
    # head_dim 128, intermediate_size 6144 (no dense layer uses it: decoder_sparse_step 1, mlp_only_layers []),
    # moe_intermediate_size 768, num_experts 128, num_experts_per_tok 8, vocab 151936, max_position_embeddings 40960,
    # untied. Not modelled: Qwen3's q/k RMSNorm per head (2 x 128 parameters a layer, elementwise work)
    ModelSpec("qwen3-30b-a3b", "llama", 2048, 48, 32, 4, 128, 6144, 151936, "rms", "swiglu", "rotary",
              source="Qwen/Qwen3-30B-A3B config.json", max_positions=40960, experts=128, top_k=8, expert_ffn=768),
    # https://huggingface.co/Qwen/Qwen3-235B-A22B/blob/main/config.json: hidden 4096, 94 layers, 64 heads, 4 KV
    # heads, head_dim 128, intermediate_size 12288 (unused as above), moe_intermediate_size 1536, 128 experts top-8,
    # vocab 151936, max_position_embeddings 40960, untied (q/k norms as Qwen3-30B-A3B's)
    ModelSpec("qwen3-235b-a22b", "llama", 4096, 94, 64, 4, 128, 12288, 151936, "rms", "swiglu", "rotary",
              source="Qwen/Qwen3-235B-A22B config.json", max_positions=40960, experts=128, top_k=8,
              expert_ffn=1536),
    # https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json: hidden 7168, 61 layers, 128 heads
    # (num_key_value_heads 128), q_lora_rank 1536, kv_lora_rank 512, qk_nope_head_dim 128, qk_rope_head_dim 64,
    # v_head_dim 128, intermediate_size 18432 (first_k_dense_replace 3 dense layers), moe_intermediate_size 2048,
    # n_routed_experts 256, num_experts_per_tok 8, n_shared_experts 1, vocab 129280, max_position_embeddings
    # 163840, untied; torch_dtype bfloat16 (the released weights are FP8 blocks: weight_bytes("fp8")). The main
    # model is counted (671B total, 37B activated: DeepSeek-V3 technical report, arXiv:2412.19437, sec. 2 and
    # the repo's README_WEIGHTS.md); not modelled: the MTP module (num_nextn_predict_layers 1: 11.5B more, a
    # training-time extra layer), the router's e_score_correction_bias (256 a layer), group-limited routing
    ModelSpec("deepseek-v3", "llama", 7168, 61, 128, 128, 192, 18432, 129280, "rms", "swiglu", "rotary",
              source="deepseek-ai/DeepSeek-V3 config.json", max_positions=163840, experts=256, top_k=8,
              expert_ffn=2048, shared_experts=1, dense_layers=3, attention="mla", q_lora_rank=1536,
              kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128),
    # https://huggingface.co/openai/gpt-oss-120b/blob/main/config.json: hidden 2880, 36 layers, 64 heads of 64, 8
    # KV heads, intermediate_size 2880 per expert, num_local_experts 128, num_experts_per_tok 4, vocab 201088,
    # max_position_embeddings 131072, attention_bias true (q, k, v, o; the router and the experts have biases
    # too), untied. Not modelled: the sliding window of 128 tokens on every other layer (layer_types: every
    # layer attends the whole context here), the per-head attention sinks (64 a layer), the SwiGLU clamp, MXFP4
    # expert weights (bf16 here: weight_bytes of another dtype prices them)
    ModelSpec("gpt-oss-120b", "llama", 2880, 36, 64, 8, 64, 2880, 201088, "rms", "swiglu", "rotary",
              source="openai/gpt-oss-120b config.json", bias=True, max_positions=131072, experts=128, top_k=4,
              expert_ffn=2880),
])
