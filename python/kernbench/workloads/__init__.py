"""Workloads from the ecosystem: op graphs imported from PyTorch, ONNX and execution traces.

``graph`` holds the format (``WorkloadGraph`` of ``Op`` records); the
importers and the lowering onto a machine build on it. The importers are
imported lazily, so ``import kernbench`` (and ``kernbench.workloads``) never
needs torch or onnx: ``from_torch``/``import_model`` need the ``torch`` extra,
``from_onnx`` the ``onnx`` extra; ``from_execution_trace`` reads JSON and
needs neither.

``MODELS`` is the model catalog (``catalog``): published decoder configurations
(``MODELS["llama2-70b"]``, or ``get_model("llama2_70b")``), each a
``ModelSpec`` that builds its graph by hand (``spec.graph(batch, seq)``, no
torch) or through the importer (``spec.imported(batch, seq)``).
"""

from kernbench.workloads.graph import (DTYPE_BYTES, KINDS, Block, Op, ParamRef, TensorSpec, WorkloadError,
                                       WorkloadGraph)

from kernbench.workloads.plan import ParallelPlan  # noqa: E402  (the lowering: docs/model-estimates.md)
from kernbench.workloads.lower import Lowered, lower  # noqa: E402
from kernbench.workloads.catalog import MODELS, ModelSpec  # noqa: E402  (no torch: docs/workloads.md)
from kernbench.workloads.model_config import get_model  # noqa: E402  (a name, an HF config.json, a YAML spec)

__all__ = ["DTYPE_BYTES", "KINDS", "Block", "Op", "ParamRef", "TensorSpec", "WorkloadError", "WorkloadGraph",
           "ParallelPlan", "Lowered", "lower", "MODELS", "ModelSpec", "get_model",
           "from_torch", "from_onnx", "from_execution_trace", "import_model"]

# name -> module that defines it (imported on first use).
_LAZY = {"from_torch": "kernbench.workloads.torch_import", "from_onnx": "kernbench.workloads.onnx_import",
         "from_execution_trace": "kernbench.workloads.exec_trace", "import_model": "kernbench.workloads.models"}


# The submodules users reach as attributes (``kernbench.workloads.estimate.inference(...)``), imported on first use.
SUBMODULES = frozenset({"catalog", "estimate", "exec_trace", "graph", "handbuilt", "lower", "memory", "models",
                        "plan", "recipes", "sharding", "step", "targets", "training"})


def __getattr__(name):
    """A lazily imported importer function or submodule (PEP 562)."""
    import importlib
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name in SUBMODULES:
        return importlib.import_module(f"kernbench.workloads.{name}")
    raise AttributeError(f"module 'kernbench.workloads' has no attribute {name!r}")
