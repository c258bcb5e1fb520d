"""The lowering's speed target (issue 53, Speed; docs/model-estimates.md "The lowering's cost"): one GPT-3 175B
training step on the DGX H100 cluster, TP 4, PP 8, interleave 12, 64 microbatches, replica 0 lowered for all
(``replicas="one"``), the memory check off (the recipe predates it). Prints the CPU seconds of
``estimate.training_step`` (process time: wall time on shared cores is noise) and the step.
    python scripts/training_step_speed.py [DP=4] [--save FILE | --compare FILE] [--profile]
``--save`` pickles the figures a speed change must leave bit-identical (step_ms, parts, counts, gemm_flops, the
program ops of each run, the bubble and the data-parallel times); ``--compare`` checks them against such a file
(exit 1 on any difference). ``--profile``: cProfile's 25 costliest functions."""
import cProfile, pickle, pstats, sys, time
from kernbench.system import System
from kernbench.workloads import ParallelPlan, estimate, get_model

args = [a for a in sys.argv[1:] if not a.startswith("--")]
flags = [a for a in sys.argv[1:] if a.startswith("--")]
dp = int(args[0]) if args else 4
g = get_model("gpt3-175b").graph(1, 2048)
system = System.load("machines/dgx-h100-cluster.yaml", set={"cluster.nodes": dp * 32 // 8})
plan = ParallelPlan(dp=dp, tp=4, pp=8, interleave=12, microbatches=64, fidelity="pipeline")
profile = cProfile.Profile() if "--profile" in flags else None
t = time.process_time()
if profile:
    profile.enable()
tr = estimate.training_step(g, system, plan, replicas="one", check_memory=False)
if profile:
    profile.disable()
    pstats.Stats(profile).sort_stats("tottime").print_stats(25)
print(f"dp {dp}: cpu_s {time.process_time() - t:.2f} step_ms {tr.step_ms!r} ops {tr.reuse['ops']}")
figures = {"step_ms": tr.step_ms, "parts": sorted(tr.parts.items()), "counts": sorted(tr.counts.items()),
           "gemm_flops": sorted(tr.gemm_flops.items()), "ops": tr.reuse["ops"], "bubble": tr.bubble,
           "dp_ms": tr.dp_ms, "dp_exposed_by_stage": tr.dp_exposed_by_stage}
if "--save" in flags:
    with open(args[1], "wb") as f:
        pickle.dump(figures, f)
if "--compare" in flags:
    with open(args[1], "rb") as f:
        before = pickle.load(f)
    moved = [k for k in figures if repr(figures[k]) != repr(before.get(k))]
    print("bit-identical" if not moved else f"DIFFERENT: {moved}")
    sys.exit(1 if moved else 0)
