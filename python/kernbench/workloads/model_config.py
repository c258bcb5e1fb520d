"""Models described by a file: a Hugging Face ``config.json`` or a small YAML spec, read into a ``ModelSpec``.

``get_model`` (exported as ``kernbench.workloads.get_model``) is the one entry point: a catalog name, or a path
to either file::

    get_model("llama3.1-70b")                 # the catalog (kernbench.workloads.catalog)
    get_model("ckpt/Meta-Llama-3-8B/config.json")
    get_model("my-model.yaml")

A YAML spec's keys are ``ModelSpec``'s field names (``activation`` for the MLP's, the field ``mlp``)::

    name: gpt-1.7b                 # default: the file's stem
    hidden: 2304
    layers: 24
    heads: 24
    ffn: 9216
    vocab: 51200
    norm: layer                    # rms (default) | layer
    activation: gelu               # swiglu (default) | gelu
    positions: learned             # rotary (default) | alibi | learned
    max_positions: 2048
    tied: true
    bias: true

``YAML_KEYS`` lists them all with their defaults; a key outside it is an error naming the file and the key.
A Hugging Face ``config.json`` is read by its ``model_type`` (``HF_TYPES``): keys kernbench does not use are
ignored; a key it needs and cannot find is an error naming the key and the file. Impossible shapes (heads
not dividing hidden without a head_dim, heads not a multiple of kv_heads, experts < top_k, sizes below 1)
are errors naming the file and the keys.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Mapping

from kernbench.workloads.catalog import ATTENTIONS, MLA_KEYS, MODELS, ModelSpec
from kernbench.workloads.graph import DTYPE_BYTES, WorkloadError

__all__ = ["get_model", "YAML_KEYS", "HF_TYPES", "load_model_file", "from_yaml_spec", "from_hf_config",
           "is_model_file", "to_yaml_spec"]

_NONE = object()  # a required key
#: A YAML spec's keys and their defaults (``_NONE``: required; None: derived, see ``from_yaml_spec``).
YAML_KEYS: dict[str, Any] = {
    "name": None, "family": "llama", "hidden": _NONE, "layers": _NONE, "heads": _NONE, "kv_heads": None,
    "head_dim": None, "ffn": _NONE, "vocab": _NONE, "norm": "rms", "activation": "swiglu", "positions": "rotary",
    "tied": False, "bias": False, "qkv_bias": False, "max_positions": 2048, "dtype": "bf16", "source": None,
    "experts": 0, "top_k": 0, "expert_ffn": None, "shared_experts": 0, "dense_layers": 0, "attention": "gqa",
    **{k: 0 for k in MLA_KEYS},
}
_CHOICES = {"family": ("llama", "gpt", "mpt"), "norm": ("rms", "layer"), "activation": ("swiglu", "gelu"),
            "positions": ("rotary", "alibi", "learned"), "attention": ATTENTIONS, "dtype": tuple(DTYPE_BYTES)}
_BOOLS = ("tied", "bias", "qkv_bias")
_TORCH_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


def get_model(model) -> ModelSpec:
    """The one way to name a model: a catalog name (``-`` or ``_``, any case), a path to a Hugging Face
    ``config.json`` or to a YAML model spec (kernbench.workloads.model_config), or a ``ModelSpec`` (returned as
    is). An unknown name raises WorkloadError listing the catalog."""
    if isinstance(model, ModelSpec):
        return model
    if isinstance(model, str) and model in MODELS:
        return MODELS[model]
    if is_model_file(model):
        return load_model_file(model)
    raise WorkloadError(f"unknown model {model!r} (known: {', '.join(MODELS)}; or a path to a Hugging Face "
                        "config.json or a YAML model spec)")


def is_model_file(model: Any) -> bool:
    """Whether ``model`` names a model file (a path ending .json, .yaml or .yml) rather than a catalog name."""
    return str(model).lower().endswith((".json", ".yaml", ".yml"))


def load_model_file(path: str | Path, name: str | None = None) -> ModelSpec:
    """The spec in ``path``: a Hugging Face config.json (``.json``) or a YAML spec (``.yaml``/``.yml``)."""
    p = Path(path)
    if not p.is_file():
        raise WorkloadError(f"model file {str(p)!r} not found (a model is a catalog name, a Hugging Face "
                            "config.json or a YAML model spec)")
    if p.suffix.lower() == ".json":
        try:
            data = json.loads(p.read_text())
        except (OSError, ValueError) as e:
            raise WorkloadError(f"{p}: not a readable JSON file: {e}") from None
        return from_hf_config(data, where=str(p), name=name or _default_name(p))
    try:
        import yaml
    except ImportError:  # pragma: no cover - pyyaml is missing
        raise WorkloadError(f"{p}: reading a YAML model spec needs pyyaml: pip install pyyaml") from None
    try:
        data = yaml.safe_load(p.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise WorkloadError(f"{p}: not a readable YAML file: {e}") from None
    return from_yaml_spec(data, where=str(p), name=name or _default_name(p))


def _default_name(p: Path) -> str:
    # a checkpoint's config.json is named by its folder (Meta-Llama-3-8B/config.json -> Meta-Llama-3-8B)
    return (p.parent.name if p.name.lower() == "config.json" and p.parent.name else p.stem) or "model"


def _whole(v: Any, where: str, key: str, least: int) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < least:
        raise WorkloadError(f"{where}: {key} = {v!r}: expected a whole number >= {least}")
    return v


def _build(fields: dict[str, Any], where: str, keys: Mapping[str, str]) -> ModelSpec:
    """The spec of ``fields`` after the shape checks, each error naming ``where`` and the file's keys
    (``keys``: field -> the file's key for it)."""
    k = lambda f: keys.get(f, f)  # noqa: E731
    H, nh = fields["hidden"], fields["heads"]
    if fields.get("attention") == "mla":  # prefill runs MLA as multi-head attention over the rebuilt K and V
        fields["kv_heads"] = nh if fields.get("kv_heads") is None else fields["kv_heads"]
        if fields.get("head_dim") is None and fields.get("qk_nope_head_dim", 0) + fields.get("qk_rope_head_dim", 0):
            fields["head_dim"] = fields["qk_nope_head_dim"] + fields["qk_rope_head_dim"]
    if fields.get("head_dim") is None:
        if H % nh:
            raise WorkloadError(f"{where}: {k('heads')} = {nh} does not divide {k('hidden')} = {H} (and no "
                                f"{k('head_dim')} is given)")
        fields["head_dim"] = H // nh
    if fields.get("kv_heads") is None:
        fields["kv_heads"] = nh
    if nh % fields["kv_heads"]:
        raise WorkloadError(f"{where}: {k('heads')} = {nh} is not a multiple of {k('kv_heads')} = "
                            f"{fields['kv_heads']}")
    if fields.get("experts"):
        if fields.get("top_k", 0) < 1 or fields["experts"] < fields["top_k"]:
            raise WorkloadError(f"{where}: {k('experts')} = {fields['experts']} experts need 1 <= {k('top_k')} "
                                f"({fields.get('top_k', 0)}) <= {k('experts')}")
        if fields.get("expert_ffn") is None:
            fields["expert_ffn"] = fields["ffn"]
    else:
        fields["expert_ffn"] = fields.get("expert_ffn") or 0
    try:
        return ModelSpec(**fields)
    except WorkloadError as e:
        raise WorkloadError(f"{where}: {e}") from None


# ---- the YAML spec ---------------------------------------------------------------------------------------
def from_yaml_spec(data: Any, *, where: str = "model spec", name: str = "model") -> ModelSpec:
    """A spec from a YAML spec's mapping (``YAML_KEYS``); ``where`` names the file in errors."""
    if not isinstance(data, Mapping):
        raise WorkloadError(f"{where}: a model spec is a mapping of {', '.join(YAML_KEYS)}; got "
                            f"{type(data).__name__}")
    unknown = [key for key in data if key not in YAML_KEYS]
    if unknown:
        raise WorkloadError(f"{where}: unknown key {unknown[0]!r} (known: {', '.join(YAML_KEYS)})")
    missing = [key for key, d in YAML_KEYS.items() if d is _NONE and key not in data]
    if missing:
        raise WorkloadError(f"{where}: missing key {missing[0]!r} (required: hidden, layers, heads, ffn, vocab)")
    fields: dict[str, Any] = {}
    for key, default in YAML_KEYS.items():
        v = data.get(key, default)
        if v is None and key not in ("name", "source"):
            fields[key] = None
            continue
        if key in _CHOICES:
            if v not in _CHOICES[key]:
                raise WorkloadError(f"{where}: {key} = {v!r}: expected one of {', '.join(_CHOICES[key])}")
        elif key in _BOOLS:
            if not isinstance(v, bool):
                raise WorkloadError(f"{where}: {key} = {v!r}: expected true or false")
        elif key not in ("name", "source"):
            least = 1 if default is _NONE or key in ("head_dim", "kv_heads", "max_positions") else 0
            v = _whole(v, where, key, least)
        fields[key] = v
    fields["mlp"] = fields.pop("activation")
    fields["name"] = str(fields["name"] or name)
    fields["source"] = str(fields["source"] or where)
    return _build(fields, where, {})


def to_yaml_spec(spec: ModelSpec) -> dict[str, Any]:
    """``spec`` as a YAML spec's mapping (every key of ``YAML_KEYS``): ``from_yaml_spec`` of it gives ``spec``
    back (the HF module names of ``moe_module``/``expert_linears`` are not YAML keys: their defaults)."""
    return {k: getattr(spec, "mlp" if k == "activation" else k) for k in YAML_KEYS}


# ---- Hugging Face config.json ----------------------------------------------------------------------------
class _Hf:
    """A config.json's keys, read with the file named in every error."""

    def __init__(self, data: Mapping, where: str):
        self.data, self.where = data, where

    def need(self, key: str, least: int = 1) -> int:
        if key not in self.data or self.data[key] is None:
            raise WorkloadError(f"{self.where}: key {key!r} not found (model_type {self.data.get('model_type')!r} "
                                "needs it)")
        return _whole(self.data[key], self.where, key, least)

    def opt(self, key: str, default: Any, least: int = 0) -> Any:
        v = self.data.get(key)
        return default if v is None else _whole(v, self.where, key, least)

    def flag(self, key: str, default: bool = False) -> bool:
        v = self.data.get(key, default)
        if not isinstance(v, bool):
            raise WorkloadError(f"{self.where}: {key} = {v!r}: expected true or false")
        return v


def _dense(c: _Hf) -> dict[str, Any]:
    """The keys every supported model_type shares (LlamaConfig's names)."""
    act = c.data.get("hidden_act", "silu")
    if act not in ("silu", "swish"):
        raise WorkloadError(f"{c.where}: hidden_act = {act!r}: model_type {c.data.get('model_type')!r} is read "
                            "as a SwiGLU MLP (silu)")
    dt = c.data.get("torch_dtype", c.data.get("dtype", "bfloat16"))
    heads = c.need("num_attention_heads")
    return {"family": "llama", "hidden": c.need("hidden_size"), "layers": c.need("num_hidden_layers"),
            "heads": heads, "kv_heads": c.opt("num_key_value_heads", heads, 1), "head_dim": c.opt("head_dim", None, 1),
            "ffn": c.need("intermediate_size"), "vocab": c.need("vocab_size"), "norm": "rms", "mlp": "swiglu",
            "positions": "rotary", "tied": c.flag("tie_word_embeddings"),
            "max_positions": c.need("max_position_embeddings"), "dtype": _TORCH_DTYPES.get(dt, "bf16")}


def _no_attention_bias(c: _Hf, f: dict) -> dict:
    # LLaMA-style: attention_bias puts biases on q, k, v and o, mlp_bias on the MLP; kernbench's ``bias`` is both
    ab, mb = c.flag("attention_bias"), c.flag("mlp_bias")
    if ab != mb:
        raise WorkloadError(f"{c.where}: attention_bias = {ab} with mlp_bias = {mb}: biases on the attention "
                            "alone or the MLP alone are not modelled (both or neither)")
    return {**f, "bias": ab}


def _llama(c: _Hf) -> dict:
    return _no_attention_bias(c, _dense(c))


def _qwen2(c: _Hf) -> dict:
    return {**_dense(c), "qkv_bias": True}  # Qwen2Attention: q_proj, k_proj, v_proj with bias; o_proj without


def _mixtral(c: _Hf) -> dict:
    f = _dense(c)
    return {**f, "experts": c.need("num_local_experts"), "top_k": c.need("num_experts_per_tok"),
            "expert_ffn": f["ffn"], "moe_module": "block_sparse_moe", "expert_linears": ("w1", "w3", "w2")}


def _qwen3_moe(c: _Hf) -> dict:
    f = _no_attention_bias(c, _dense(c))
    layers, step = f["layers"], c.opt("decoder_sparse_step", 1, 1)
    only = c.data.get("mlp_only_layers") or []
    dense = [i for i in range(layers) if i in only or (i + 1) % step]
    if dense != list(range(len(dense))):
        raise WorkloadError(f"{c.where}: mlp_only_layers {only} with decoder_sparse_step {step} make layers "
                            f"{dense} dense: only the first layers may be (dense_layers)")
    return {**f, "experts": c.need("num_experts"), "top_k": c.need("num_experts_per_tok"),
            "expert_ffn": c.need("moe_intermediate_size"), "dense_layers": len(dense)}


def _deepseek_v3(c: _Hf) -> dict:
    f = _dense(c)
    f.update(attention="mla", q_lora_rank=c.opt("q_lora_rank", 0), kv_lora_rank=c.need("kv_lora_rank"),
             qk_nope_head_dim=c.need("qk_nope_head_dim"), qk_rope_head_dim=c.need("qk_rope_head_dim"),
             v_head_dim=c.need("v_head_dim"), head_dim=None, kv_heads=None)
    if c.data.get("n_routed_experts"):
        if c.opt("moe_layer_freq", 1, 1) != 1:
            raise WorkloadError(f"{c.where}: moe_layer_freq = {c.data['moe_layer_freq']}: only every layer after "
                                "first_k_dense_replace being MoE is modelled")
        f.update(experts=c.need("n_routed_experts"), top_k=c.need("num_experts_per_tok"),
                 expert_ffn=c.need("moe_intermediate_size"), shared_experts=c.opt("n_shared_experts", 0),
                 dense_layers=c.opt("first_k_dense_replace", 0))
    return f


def _gpt_oss(c: _Hf) -> dict:
    f = _dense(c)
    return {**f, "bias": c.flag("attention_bias", True), "experts": c.need("num_local_experts"),
            "top_k": c.need("num_experts_per_tok"), "expert_ffn": f["ffn"]}


#: model_type -> the reader of its config.json (the catalog's families; DeepSeek-V3's MLA and MoE).
HF_TYPES: dict[str, Callable[[_Hf], dict]] = {
    "llama": _llama, "mistral": _llama, "mixtral": _mixtral, "qwen2": _qwen2, "qwen3": _llama,
    "qwen3_moe": _qwen3_moe, "deepseek_v3": _deepseek_v3, "gpt_oss": _gpt_oss}
_HF_KEYS = {"hidden": "hidden_size", "layers": "num_hidden_layers", "heads": "num_attention_heads",
            "kv_heads": "num_key_value_heads", "head_dim": "head_dim", "experts": "num_experts (or "
            "n_routed_experts, num_local_experts)", "top_k": "num_experts_per_tok"}


def from_hf_config(data: Any, *, where: str = "config.json", name: str = "model") -> ModelSpec:
    """A spec from a Hugging Face config.json's mapping, read by its ``model_type`` (``HF_TYPES``)."""
    if not isinstance(data, Mapping):
        raise WorkloadError(f"{where}: a config.json is a JSON object; got {type(data).__name__}")
    mt = data.get("model_type")
    if mt is None:
        raise WorkloadError(f"{where}: key 'model_type' not found (supported: {', '.join(HF_TYPES)})")
    if mt not in HF_TYPES:
        raise WorkloadError(f"{where}: model_type {mt!r} is not supported (supported: {', '.join(HF_TYPES)})")
    fields = HF_TYPES[mt](_Hf(data, where))
    fields.update(name=name, source=where)
    return _build(fields, where, _HF_KEYS)
