"""Serving under load (src/workloads/serving, kernbench.serving): the request loop against queueing theory and
its own conservation laws with a known iteration price, and on the H100 preset with the hardware model's."""

from __future__ import annotations

import numpy as np
import pytest

from kernbench import _core, serving

H100 = "machines/h100-8x-nvswitch.yaml"


def price(prefill_us=2000.0, per_token_us=1.0, decode_us=500.0, per_seq_us=10.0):
    """An affine iteration price (ps): a prefill part and a decode part."""
    def f(s):
        t = 0.0
        if s["prefill_tokens"]:
            t += prefill_us + per_token_us * s["prefill_tokens"]
        if s["decode_seqs"]:
            t += decode_us + per_seq_us * s["decode_seqs"]
        return t * 1e6
    return f


def core(trace, policy="vllm", blocks=10_000, f=None, seqs=256, budget=2048, block=16, preemption="recompute"):
    out = _core.serving_simulate((trace.arrival_s * 1e12).round().astype(np.int64), trace.prompt, trace.output,
                                 policy, seqs, budget, block, blocks, preemption, 1024, f or price(), None,
                                 int(max(budget, trace.prompt.max() * seqs)), int((trace.prompt + trace.output).max()) + 1)
    return out


def trace_of(arr, p, o):
    return serving.Trace(np.asarray(arr, float), np.asarray(p, np.int64), np.asarray(o, np.int64))


def test_one_request_alone_is_its_iterations_end_to_end():
    """E2E = TTFT + (output - 1) x TPOT, and TTFT is the prefill iteration's price, each decode step the decode's."""
    f = price()
    for policy in serving.SCHEDULERS:
        r = core(trace_of([0.0], [300], [50]), policy, f=f)
        it = r["iterations"]
        assert len(it["start_ps"]) == 50  # one prefill, 49 decodes
        ttft = r["first_token_ps"][0] - r["arrival_ps"][0]
        assert ttft == round(f({"prefill_tokens": 300, "decode_seqs": 0}))
        e2e = r["finish_ps"][0] - r["arrival_ps"][0]
        tpot = round(f({"prefill_tokens": 0, "decode_seqs": 1}))
        assert e2e == ttft + 49 * tpot
        assert e2e == int((it["end_ps"] - it["start_ps"]).sum())


def test_static_batch_one_is_an_md1_queue_pollaczek_khinchine():
    """static, batch 1, fixed lengths, Poisson arrivals at utilisation 0.5: the mean wait is rho S / (2 (1 - rho))
    within 3 % over 20,000 requests."""
    f = price()
    S = (f({"prefill_tokens": 128, "decode_seqs": 0}) + 15 * f({"prefill_tokens": 0, "decode_seqs": 1})) * 1e-12
    rho = 0.5
    tr = serving.make_trace(20_000, rho / S, prompt=128, output=16, seed=3)
    r = core(tr, "static", f=f, seqs=1)
    wait = (r["scheduled_ps"] - r["arrival_ps"]) * 1e-12
    expect = rho * S / (2 * (1 - rho))
    assert wait.mean() == pytest.approx(expect, rel=0.03)


def test_littles_law_and_low_load_queueing():
    """Mean number in system (sampled at random times) = arrival rate x mean E2E within 2 %; at low load the mean
    queue delay is under 1 % of TTFT."""
    tr = serving.make_trace(4000, 2.0, prompt="uniform:64:512", output="uniform:16:128", seed=5)
    r = core(tr)
    a, fin = r["arrival_ps"] * 1e-12, r["finish_ps"] * 1e-12
    rng = np.random.default_rng(1)
    t = rng.uniform(a[0], a[-1], 20_000)
    in_system = (np.searchsorted(np.sort(a), t) - np.searchsorted(np.sort(fin), t)).mean()
    lam = (len(a) - 1) / (a[-1] - a[0])
    assert in_system == pytest.approx(lam * (fin - a).mean(), rel=0.02)
    low = core(serving.make_trace(500, 0.02, prompt=256, output=32, seed=2))
    queue = (low["scheduled_ps"] - low["arrival_ps"]).mean()
    ttft = (low["first_token_ps"] - low["arrival_ps"]).mean()
    assert queue < 0.01 * ttft


def test_conservation_of_requests_and_blocks_at_every_iteration():
    """Arrived = finished + rejected + in the engine (running or waiting) after every iteration; blocks allocated =
    freed + held; every served request generates exactly its output."""
    tr = serving.make_trace(800, 20.0, prompt="uniform:16:600", output="uniform:1:200", seed=9)
    tr.prompt[5] = 5000  # can never fit 300 blocks of 16: rejected, with the reason
    for policy in serving.SCHEDULERS:
        r = core(tr, policy, blocks=300)
        it = r["iterations"]
        rejected = np.array([bool(x) for x in r["rejected"]])
        need = -(-(5000 + int(tr.output[5])) // 16)
        assert rejected.sum() == 1 and f"needs {need} KV blocks" in r["rejected"][5]
        for k in range(0, len(it["end_ps"]), 37):
            now = it["end_ps"][k]
            arrived = int((r["arrival_ps"] <= now).sum())
            finished = int(((r["finish_ps"] >= 0) & (r["finish_ps"] <= now)).sum())
            gone = int((rejected & (r["arrival_ps"] <= now)).sum())
            held = finished + gone + it["running"][k] + it["waiting"][k]
            # static: a finished sequence stays in its batch (padded) until the batch ends, so it counts twice
            assert arrived == held if policy != "static" else finished + gone + it["waiting"][k] <= arrived <= held
            assert it["kv_used"][k] <= 300
        assert r["blocks_allocated"] == r["blocks_freed"] + r["blocks_held"] and r["blocks_held"] == 0
        served = ~rejected
        assert (r["generated"][served] == r["output"][served]).all() and (r["finish_ps"][served] > 0).all()


def test_a_small_cache_preempts_and_still_finishes_every_request():
    """A cache of 60 blocks under load: sequences are preempted (recompute), each finishes with exactly its output;
    swap without a host link is refused."""
    tr = serving.make_trace(200, 50.0, prompt="uniform:100:300", output="uniform:50:300", seed=4)
    r = core(tr, "vllm", blocks=60)
    assert r["preemptions_total"] > 0 and r["preemptions"].sum() == r["preemptions_total"]
    assert (r["generated"] == r["output"]).all()
    with pytest.raises(_core.UsageError, match="preemption=swap needs a host link"):
        core(tr, "vllm", blocks=60, preemption="swap")


def test_bad_input_names_the_field(tmp_path):
    """A trace with a negative time or output 0, an SLO without a unit, a bad distribution, a plan with no room for
    the KV cache: each a ServingError naming the file and line, the bound, or the shortfall."""
    bad = tmp_path / "t.csv"
    bad.write_text("arrival_s,prompt_tokens,output_tokens\n0.5,10,5\n-1,10,5\n")
    with pytest.raises(serving.ServingError, match=r"t.csv:3: arrival_s -1.0 must be a finite time >= 0"):
        serving.read_trace(bad)
    bad.write_text("arrival_s,prompt_tokens,output_tokens\n0.5,10,0\n")
    with pytest.raises(serving.ServingError, match=r"t.csv:2: output_tokens = 0: at least 1 token"):
        serving.read_trace(bad)
    with pytest.raises(serving.ServingError, match="ttft='200': give a time with a unit"):
        serving.parse_slo("ttft=200,tpot=50ms")
    with pytest.raises(serving.ServingError, match="unknown bound 'tbt'"):
        serving.parse_slo("tbt=50ms")
    assert serving.parse_slo("ttft=0.2s,tpot=50ms") == {"ttft_ms": 200.0, "tpot_ms": 50.0}
    with pytest.raises(serving.ServingError, match="uniform:LO:HI"):
        serving.Dist.parse("uniform:9:3")
    from kernbench.system import System
    from kernbench.workloads import get_model

    with pytest.raises(serving.ServingError, match=r"llama2-70b at tp 1 pp 1 leaves no KV cache on gpu0.*GiB short"):
        serving.kv_capacity(get_model("llama2-70b"), System.load(H100))


@pytest.fixture(scope="module")
def h100_run():
    return serving.run("llama3-8b", config=H100, qps=4, requests=200, scheduler="vllm", slo="ttft=200ms,tpot=50ms",
                       check=30, seed=11)


def test_on_the_h100_preset_the_interpolation_is_within_two_percent_of_direct_simulation(h100_run):
    """LLaMA-3-8B on one H100: 30 iterations off the lattice, simulated directly, within 2 % of the interpolated
    times the run used; the summary's percentiles are ordered and goodput is at most throughput."""
    s = h100_run.summary()
    assert s["interpolation"]["checked"] == 30 and s["interpolation"]["max_abs_error"] < 0.02
    assert s["completed"] == 200 - 20 and s["rejected"] == 0  # 10 % warm-up left out
    assert 0 < s["p50_ttft_ms"] <= s["p90_ttft_ms"] <= s["p99_ttft_ms"]
    assert s["request_goodput"] <= s["request_throughput"]
    # KV capacity: what 80 GB x 0.9 leaves after 16 GB of weights, 128 KiB of KV a token (32 layers x 8 heads).
    assert h100_run.kv["kv_bytes_per_token"] == 2 * 8 * 128 * 32 * 2


def test_same_seed_same_per_request_csv(tmp_path, h100_run):
    """The same seed gives the same per-request CSV, byte for byte; write() lands every file."""
    again = serving.run("llama3-8b", config=H100, qps=4, requests=200, scheduler="vllm", slo="ttft=200ms,tpot=50ms",
                        check=30, seed=11)
    h100_run.write(tmp_path / "a", plots=False)
    files = again.write(tmp_path / "b")
    assert (tmp_path / "a" / "requests.csv").read_bytes() == (tmp_path / "b" / "requests.csv").read_bytes()
    assert {"requests.csv", "summary.json", "timeseries.csv", "latency_cdf.png", "kv_over_time.png"} <= set(files)


def test_kernbench_serve_on_the_default_machine(cli, tmp_path):
    """`kernbench serve` prints the percentiles, throughput and goodput, and writes its files; a bad SLO is one
    error line naming the bound."""
    out = tmp_path / "s"
    proc = cli("serve", "--model", "gpt2", "--qps", "2", "--requests", "30", "--prompt", "uniform:16:64",
               "--output", "uniform:4:16", "--slo", "ttft=500ms,tpot=100ms", "--check", "3", "--out", str(out),
               check=True)
    assert "TTFT" in proc.stdout and "goodput" in proc.stdout and "interpolation vs direct" in proc.stdout
    summary = __import__("json").loads((out / "summary.json").read_text())
    assert summary["completed"] == 27 and summary["scheduler"] == "vllm"
    bad = cli("serve", "--model", "gpt2", "--requests", "5", "--slo", "ttft=5")
    assert bad.returncode == 2 and "give a time with a unit" in bad.stderr


def test_disaggregated_prefill_moves_each_requests_kv_over_the_fabric():
    """Prefill and decode instances: each request's KV (summed over the tp shards) = layers x 2 x kv_heads x
    head_dim x prompt x bytes per element, moved after its first token, and on the machine's links (each byte
    crosses GPU memory -> GPU -> switch -> GPU -> GPU memory: two memory links and two NVLinks)."""
    d = serving.run("llama3-8b", config=H100, tp=2, qps=8, requests=60, disaggregate=(1, 1), check=0, seed=2)
    q = d.requests
    assert (q["kv_bytes"] == 32 * 2 * 8 * 128 * q["prompt"] * 2).all()
    assert (q["instance"] == 0).all() and (q["decoder"] == 1).all()
    assert (q["kv_start_ps"] >= q["first_token_ps"]).all() and (q["kv_end_ps"] > q["kv_start_ps"]).all()
    links = d.params["fabric_link_bytes"]
    assert links["nvlink"] == 2 * int(q["kv_bytes"].sum()) and links["hbm"] == 2 * int(q["kv_bytes"].sum())
    assert (d.requests["generated"] == d.requests["output"]).all()


def test_replicas_behind_a_router_share_the_load():
    """Round robin deals requests out evenly over 4 instances; least-loaded uses every one; too many instances for
    the machine's devices is refused with the count."""
    rr = serving.run("llama3-8b", config=H100, qps=8, requests=101, replicas=4, check=0)
    counts = np.bincount(rr.requests["instance"], minlength=4)
    assert counts.max() - counts.min() <= 1 and counts.sum() == 101  # round robin
    ll = serving.run("llama3-8b", config=H100, qps=8, requests=101, replicas=4, routing="least_loaded", check=0)
    assert (np.bincount(ll.requests["instance"], minlength=4) > 0).all()
    with pytest.raises(serving.ServingError, match="9 instances of tp 1 x pp 1 need 9 devices; the machine has 8"):
        serving.run("llama3-8b", config=H100, requests=5, replicas=9)


def test_prefix_caching_reuses_the_shared_prefixes_full_blocks():
    """4 shared prefixes of 400 tokens: with caching most requests reuse all 25 blocks (TTFT falls), without none;
    the hit tokens add up and the blocks are conserved (held: the prefixes still cached)."""
    kw = dict(config=H100, qps=8, requests=200, prefix_groups=4, prefix_tokens=400, check=0, seed=3)
    on = serving.run("llama3-8b", prefix_caching=True, **kw)
    off = serving.run("llama3-8b", **kw)
    cached = on.requests["cached_tokens"]
    assert (cached % 16 == 0).all() and (cached <= 400).all() and (cached == 400).sum() > 150
    assert off.requests["cached_tokens"].sum() == 0
    assert on.summary()["mean_ttft_ms"] < off.summary()["mean_ttft_ms"]
    c = on.counters
    assert c["prefix_hit_tokens"] == int(cached.sum())
    assert c["blocks_allocated"] == c["blocks_freed"] + c["blocks_held"]  # held: the prefixes still cached


def test_a_trace_file_with_shared_prefixes(tmp_path):
    """A trace CSV's prefix_id/prefix_tokens columns: the second request of a group reuses the first one's
    cached full blocks; a prefix as long as the prompt is refused naming the line."""
    t = tmp_path / "trace.csv"
    t.write_text("arrival_s,prompt_tokens,output_tokens,prefix_id,prefix_tokens\n0,300,4,7,256\n1.0,280,4,7,256\n"
                 "1.5,100,4,,\n")
    r = serving.run("llama3-8b", config=H100, trace=t, prefix_caching=True, check=0, warmup=0)
    assert list(r.requests["cached_tokens"]) == [0, 256, 0]
    t.write_text("arrival_s,prompt_tokens,output_tokens,prefix_id,prefix_tokens\n0,300,4,1,300\n")
    with pytest.raises(serving.ServingError, match=r"trace.csv:2: prefix_tokens = 300"):
        serving.read_trace(t)


@pytest.mark.parametrize("config", [None, "k200.yaml"])
def test_any_machine_serves_the_default_sip_machine_and_the_k200_host(config):
    """The default SIP machine (its PE lowering) and the K200 host (its platform's lowering, one die): every
    request completes and the interpolation stays within 2 % of direct simulation."""
    r = serving.run("gpt2", config=config, qps=2, requests=40, prompt="uniform:16:64", output="uniform:4:16",
                    check=10, seed=5)
    s = r.summary()
    assert s["completed"] == 36 and s["rejected"] == 0
    assert s["interpolation"]["checked"] == 10 and s["interpolation"]["max_abs_error"] < 0.02
    if config == "k200.yaml":
        assert r.kv["capacity_bytes"] == 8 << 30  # one die's HBM
        with pytest.raises(serving.ServingError, match="on the K200 host an instance is one die"):
            serving.run("gpt2", config=config, tp=2, requests=2)


def test_the_serving_bench_smoke_on_the_default_config_and_swap_needs_a_host(cli, tmp_path):
    """`kernbench run --bench serving --smoke` on the default SIP machine (a model that fits a PE's HBM slice):
    no failure, and every row carries TTFT and TPOT p50/p90/p99 and goodput; swap on that machine, which has no
    host, is refused naming the fix."""
    out = tmp_path / "b"
    default = __import__("pathlib").Path(__file__).resolve().parents[2] / "configs" / "topology.yaml"
    cli("run", "--bench", "serving", "--smoke", "--config", str(default), "--set", "bench.model=gpt2",
        "--set", "bench.prompt_mean=48", "--set", "bench.output_mean=12", "--set", "bench.requests=40",
        "--out", str(out), "--quiet", check=True)
    sweep = __import__("json").loads((out / "sweep.json").read_text())
    assert not sweep["failures"] and len(sweep["results"]) == 2
    for row in sweep["results"]:
        assert all(f"{q}_{m}_ms" in row for q in ("p50", "p90", "p99") for m in ("ttft", "tpot"))
        assert row["request_goodput"] is not None
    with pytest.raises(serving.ServingError, match="no host .* to swap the KV cache to; use preemption=recompute"):
        serving.run("gpt2", requests=2, preemption="swap")
