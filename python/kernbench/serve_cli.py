"""``kernbench serve``: one serving question on one line (kernbench.serving, docs/serving.md)."""

from __future__ import annotations

import argparse


def add_parser(sub) -> None:
    s = sub.add_parser("serve", help="serve requests under load: TTFT, TPOT and E2E percentiles, throughput, goodput")
    s.add_argument("--config", default=None, metavar="MACHINE", help="machine config (default: the default machine)")
    s.add_argument("--model", required=True,
                   help="a catalog model (kernbench.workloads.MODELS, e.g. llama3-8b), or a path to a Hugging Face "
                        "config.json or a YAML model spec (docs/workloads.md)")
    s.add_argument("--tp", type=int, default=1, help="tensor-parallel devices per instance (default 1)")
    s.add_argument("--pp", type=int, default=1, help="pipeline stages per instance (default 1)")
    s.add_argument("--qps", type=float, default=1.0, help="arrival rate, requests per second (default 1)")
    s.add_argument("--requests", type=int, default=1000, help="requests to generate (default 1000)")
    s.add_argument("--arrival", default="poisson", choices=["poisson", "gamma", "constant"],
                   help="arrival process (default poisson)")
    s.add_argument("--cv", type=float, default=1.0, help="gamma arrivals: coefficient of variation (default 1)")
    s.add_argument("--prompt", default="sharegpt-prompt", metavar="DIST",
                   help="prompt lengths: fixed:N, uniform:LO:HI, lognormal:mean=M,sigma=S, hist:FILE, sharegpt-prompt")
    s.add_argument("--output", default="sharegpt-output", metavar="DIST", help="output lengths (as --prompt)")
    s.add_argument("--trace", default=None, metavar="CSV",
                   help="requests from a CSV (arrival_s,prompt_tokens,output_tokens) instead of generated ones")
    s.add_argument("--scheduler", default="vllm", choices=["vllm", "sarathi", "orca", "static"])
    s.add_argument("--max-num-seqs", type=int, default=256, help="sequences at once (static: the batch; default 256)")
    s.add_argument("--max-batched-tokens", type=int, default=None,
                   help="tokens per iteration (default: vllm 2048, sarathi 512, orca and static 8192)")
    s.add_argument("--block-size", type=int, default=16, help="tokens per KV block (default 16)")
    s.add_argument("--preemption", default="recompute", choices=["recompute", "swap"])
    s.add_argument("--replicas", type=int, default=1, help="instances behind the router (default 1)")
    s.add_argument("--router", default="round_robin", choices=["round_robin", "least_loaded"])
    s.add_argument("--disaggregate", default=None, metavar="P:D",
                   help="P prefill and D decode instances; each request's KV moves over the fabric")
    s.add_argument("--prefix-caching", action="store_true", help="reuse cached shared prefixes' full blocks")
    s.add_argument("--prefix-groups", type=int, default=0, help="generated prompts start with one of N shared prefixes")
    s.add_argument("--prefix-tokens", type=int, default=0, help="tokens of each shared prefix")
    s.add_argument("--slo", default=None, metavar="BOUNDS", help="e.g. ttft=200ms,tpot=50ms (units ms, s, us)")
    s.add_argument("--warmup", type=float, default=0.1, help="fraction of requests left out of the statistics")
    s.add_argument("--check", type=int, default=20,
                   help="iterations simulated directly to measure the interpolation's error (default 20)")
    s.add_argument("--seed", type=int, default=1, help="random seed of the generated requests (default 1)")
    s.add_argument("--out", default=None, help="write requests.csv, timeseries.csv, summary.json and plots here")


def _disaggregate(text: str | None):
    """``P:D`` -> (P, D) as texts' numbers (their range is check_run_args's); a malformed text is refused."""
    from kernbench.serving_load import ServingError

    if text is None:
        return None
    parts = text.split(":")
    if len(parts) != 2 or not all(p.strip().isascii() and p.strip().isdigit() for p in parts):
        raise ServingError(f"--disaggregate {text!r}: give P:D, two whole numbers >= 1, e.g. 2:6")
    return tuple(int(p) for p in parts)


def checked_args(args: argparse.Namespace) -> dict:
    """serving.run's keyword arguments from the command line, each checked (serving_args.check_run_args, the one
    checker serving.run uses too, worded with the flags); also the dry check's (kernbench.cli_check)."""
    from kernbench.serving_args import check_run_args, cli_name

    kw = dict(tp=args.tp, pp=args.pp, qps=args.qps, requests=args.requests, prompt=args.prompt, output=args.output,
              arrival=args.arrival, cv=args.cv, trace=args.trace, scheduler=args.scheduler,
              max_num_seqs=args.max_num_seqs, max_batched_tokens=args.max_batched_tokens, block_size=args.block_size,
              preemption=args.preemption, slo=args.slo, warmup=args.warmup, check=args.check, seed=args.seed,
              replicas=args.replicas, routing=args.router, disaggregate=_disaggregate(args.disaggregate),
              prefix_caching=args.prefix_caching, prefix_groups=args.prefix_groups, prefix_tokens=args.prefix_tokens)
    return check_run_args(kw, "kernbench serve", cli_name)


def run(args: argparse.Namespace) -> int:
    """Every value checked first, the --out folder held locked for the whole run (as ``kernbench run`` holds
    its), then the run."""
    from kernbench import serving
    from kernbench.atomic_output import check_output_dir, hold_output_dir

    kw = checked_args(args)
    if args.out:
        check_output_dir(args.out, "--out")
    with hold_output_dir(args.out or None, "--out"):
        res = serving.run(args.model, config=args.config, **kw)
        print(serving.report(res))
        if args.out:
            for f in res.write(args.out):
                print(f"wrote {args.out}/{f}")
    return 0
