"""The whole-model decode estimate of docs/model-estimates.md: LLaMA-3.1-70B (80 layers), batch 1, prompt 128,
N decode steps on one SIP with the flow fabric model.
    python scripts/model_decode_speed.py TP STEPS KV_SAMPLES|all [import]
``import``: the imported LlamaForCausalLM (kernbench[torch]), traced once per (batch, new tokens) and its
attention re-shaped to each cache length (estimate.with_kv_len); else the hand-built op graph."""
import functools, time, sys
import kernbench
from kernbench.workloads import handbuilt, estimate, ParallelPlan
SIP = {"system.sips.w": 1, "system.sips.h": 1, "fabric.model": "flow"}
tp = int(sys.argv[1]) if len(sys.argv) > 1 else 8
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 128
samples = None if (len(sys.argv) > 3 and sys.argv[3] == "all") else int(sys.argv[3]) if len(sys.argv) > 3 else 9
t0 = time.perf_counter()
dims = handbuilt.LLAMA3_70B
if len(sys.argv) > 4 and sys.argv[4] == "import":
    from kernbench.workloads import import_model
    traced = functools.lru_cache(maxsize=None)(lambda b, s: import_model("llama3_70b", batch=b, seq=s))
    build = lambda b, s, kv: estimate.with_kv_len(traced(b, s), kv)
else:
    build = lambda b, s, kv: handbuilt.llama_graph(b, s, kv, dims=dims)
system = kernbench.System.load(set=SIP)
est = estimate.inference(build, system, ParallelPlan(tp=tp), batch=1, prompt=128, decode_steps=steps, kv_samples=samples)
print(f"70B, 80 layers, tp={tp}, one SIP, flow: TTFT {est.ttft_ms:.3f} ms, TPOT {est.tpot_ms:.3f} ms, "
      f"tokens/s {est.tokens_per_s:.1f}, simulated steps {sum(s['simulated'] for s in est.steps)}/{steps}, "
      f"wall {time.perf_counter() - t0:.1f} s")
print("decode by kind (us):", {k: round(v, 1) for k, v in est.breakdown["decode"]["by_kind"].items()})
