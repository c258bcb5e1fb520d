"""Workloads from the ecosystem: op graphs imported from PyTorch, ONNX and execution traces.

``graph`` holds the format (``WorkloadGraph`` of ``Op`` records); the
importers and the lowering onto a machine build on it.
"""

from kernbench.workloads.graph import (DTYPE_BYTES, KINDS, Block, Op, ParamRef, TensorSpec, WorkloadError,
                                       WorkloadGraph)

__all__ = ["DTYPE_BYTES", "KINDS", "Block", "Op", "ParamRef", "TensorSpec", "WorkloadError", "WorkloadGraph"]
