"""Workloads from the ecosystem: op graphs imported from PyTorch, ONNX and execution traces.

``graph`` holds the format (``WorkloadGraph`` of ``Op`` records); the
importers and the lowering onto a machine build on it.
"""

from kernbench.workloads.graph import (DTYPE_BYTES, KINDS, Block, Op, ParamRef, TensorSpec, WorkloadError,
                                       WorkloadGraph)

from kernbench.workloads.plan import ParallelPlan  # noqa: E402  (the lowering: docs/model-estimates.md)
from kernbench.workloads.lower import Lowered, lower  # noqa: E402

__all__ = ["ParallelPlan", "Lowered", "lower", "DTYPE_BYTES", "KINDS", "Block", "Op", "ParamRef", "TensorSpec", "WorkloadError", "WorkloadGraph"]
