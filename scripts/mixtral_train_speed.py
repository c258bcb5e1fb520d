"""The MoE training target of docs/model-estimates.md (issue 35): a Mixtral-8x7B training step on a DGX H100
cluster, TP 1, PP 4, DP DP, EP 8, seq 4096, micro-batch 1, M microbatches per replica, the flow fabric,
fidelity pipeline. Prints the step, its parts, the wall time, the program ops and the peak memory.
    python scripts/mixtral_train_speed.py [NODES=32] [DP=64] [M=8] [mirror=1] [reuse=0] [layers=32]
``mirror``: mirror_replicas (EP rank j of every EP group reuses the compute of replica j); ``reuse``: layer reuse
(estimate.training_step); ``layers``: fewer layers for a quick look."""
import resource, sys, time
import kernbench
from kernbench.workloads import ParallelPlan, estimate, get_model
a = [int(x) for x in sys.argv[1:]] + [None] * 6
nodes, dp, M = a[0] or 32, a[1] or 64, a[2] or 8
mirror, reuse = a[3] is None or bool(a[3]), bool(a[4])
t0 = time.perf_counter()
system = kernbench.System.load("machines/dgx-h100-cluster.yaml", set={"cluster.nodes": nodes})
spec = get_model("mixtral-8x7b")
g = spec.graph(1, 4096, layers=a[5]) if a[5] else spec.graph(1, 4096)
plan = ParallelPlan(dp=dp, pp=4, ep=8, microbatches=M, fidelity="pipeline")
tr = estimate.training_step(g, system, plan, reuse=reuse, mirror_replicas=mirror)
wall = time.perf_counter() - t0
print(f"Mixtral-8x7B, {plan.size} H100s (dp {dp} x pp 4, ep 8), seq 4096, M {M}, mirror {mirror}, reuse {reuse}: "
      f"step {tr.step_ms:.2f} ms, bubble {tr.bubble:.3f}, {tr.tokens_per_gpu_s:.0f} tokens/GPU/s; wall {wall:.1f} s, "
      f"program ops {tr.reuse['ops']} ({tr.reuse['mode']}), peak RSS "
      f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB")
print("parts (ms):", {k: round(v, 2) for k, v in tr.parts.items()})
print("counts:", tr.counts, "dp bytes:", tr.dp_bytes)
