"""The MoE training target of docs/model-estimates.md (issue 35): a Mixtral-8x7B training step on a DGX H100
cluster, TP 1, PP 4, DP DP, EP 8, seq 4096, micro-batch 1, M microbatches per replica, the flow fabric,
fidelity pipeline. Prints the step, its parts, the wall time, the program ops and the peak memory.
    python scripts/mixtral_train_speed.py [NODES=32] [DP=64] [M=8] [REPLICAS=one] [REUSE=0] [LAYERS=32]
``REPLICAS``: all, mirror (EP rank j of every EP group reuses replica j's compute) or one (EP group 0 lowered,
the others only in the data-parallel collectives); ``REUSE``: 1 for the layer and microbatch windows of
estimate.training_step; ``LAYERS``: fewer layers for a quick look. (``kernbench run --bench training-scale`` runs
the same step with reuse on.)"""
import resource, sys, time
import kernbench
from kernbench.workloads import ParallelPlan, estimate, get_model
a = sys.argv[1:] + [None] * 6
nodes, dp, M = int(a[0] or 32), int(a[1] or 64), int(a[2] or 8)
replicas, reuse, layers = a[3] or "one", bool(int(a[4] or 0)), int(a[5] or 0)
t0 = time.perf_counter()
system = kernbench.System.load("machines/dgx-h100-cluster.yaml", set={"cluster.nodes": nodes})
spec = get_model("mixtral-8x7b")
g = spec.graph(1, 4096, layers=layers or None)
plan = ParallelPlan(dp=dp, pp=4, ep=8, microbatches=M, fidelity="pipeline")
tr = estimate.training_step(g, system, plan, reuse=reuse, replicas=replicas)
wall = time.perf_counter() - t0
print(f"Mixtral-8x7B, {plan.size} H100s (dp {dp} x pp 4, ep 8), seq 4096, M {M}, replicas {replicas}, reuse {reuse}: "
      f"step {tr.step_ms:.2f} ms, bubble {tr.bubble:.3f}, {tr.tokens_per_gpu_s:.0f} tokens/GPU/s; wall {wall:.1f} s, "
      f"program ops {tr.reuse['ops']} ({tr.reuse['mode']}), peak RSS "
      f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB")
print("parts (ms):", {k: round(v, 2) for k, v in tr.parts.items()})
print("counts:", tr.counts, "dp bytes:", tr.dp_bytes)
