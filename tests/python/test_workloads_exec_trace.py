"""from_execution_trace: a trace recorded here with torch's ExecutionTraceObserver imports to the MLP it ran."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from kernbench.workloads import WorkloadError, from_execution_trace, from_torch  # noqa: E402


class _MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.act = torch.nn.ReLU()
        self.fc2 = torch.nn.Linear(32, 8)

    def forward(self, x):
        return torch.softmax(self.fc2(self.act(self.fc1(x))), dim=-1)


def _record(path, m, x):
    from torch.profiler import ExecutionTraceObserver
    et = ExecutionTraceObserver()
    et.register_callback(str(path))
    et.start()
    try:
        with torch.no_grad(), torch.profiler.record_function("mlp"):
            m(x)
    finally:
        et.stop()
        et.unregister_callback()


def test_recorded_trace_imports_as_the_mlp(tmp_path):
    """An execution trace recorded with torch's ExecutionTraceObserver imports to the MLP it ran: its four ops in
    order with their deps, the linear's m/k/n and parameters, the inputs, and the same FLOPs and bytes as tracing the
    module with from_torch."""
    torch.manual_seed(0)
    m = _MLP().eval()
    x = torch.randn(4, 16)
    path = tmp_path / "et.json"
    _record(path, m, x)
    assert json.loads(path.read_text())["nodes"]
    g = from_execution_trace(path)
    assert [(op.name, op.kind) for op in g.ops] == [("mlp.linear", "matmul"), ("mlp.relu", "elementwise"),
                                                   ("mlp.linear_1", "matmul"), ("mlp.softmax", "softmax")]
    assert [op.deps for op in g.ops] == [(), (0,), (1,), (2,)]
    fc1 = g.ops[0]
    assert (fc1.attrs["m"], fc1.attrs["k"], fc1.attrs["n"]) == (4, 16, 32)
    assert len(fc1.params) == 2 and fc1.attrs["weight"] == fc1.params[0].name
    assert g.param_count == 16 * 32 + 32 + 32 * 8 + 8
    assert g.inputs and g.inputs[0].shape == (4, 16)
    # the same counts as tracing the module itself
    t = from_torch(m, (x,))
    assert [op.kind for op in t.ops] == [op.kind for op in g.ops]
    assert (t.flops, t.param_bytes, t.activation_bytes) == (g.flops, g.param_bytes, g.activation_bytes)


def test_bad_traces_are_clear_errors(tmp_path):
    """A missing trace file, a trace without a 'nodes' list, and a node whose operator has no kernbench kind are each
    a WorkloadError naming the problem (the node by id and name)."""
    with pytest.raises(WorkloadError, match="no file"):
        from_execution_trace(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    with pytest.raises(WorkloadError, match="no 'nodes' list"):
        from_execution_trace(bad)
    node = {"id": 2, "name": "aten::sort", "ctrl_deps": 1,
            "inputs": {"values": [[5, 6, 0, 4, 4, "cpu"]], "shapes": [[4]], "types": ["Tensor(float)"]},
            "outputs": {"values": [[7, 8, 0, 4, 4, "cpu"]], "shapes": [[4]], "types": ["Tensor(float)"]}}
    root = {"id": 1, "name": "[pytorch|profiler|execution_trace|thread]", "ctrl_deps": 1}
    with pytest.raises(WorkloadError, match=r"node 2 \(aten::sort\).*no kernbench kind"):
        from_execution_trace({"nodes": [root, node]})
