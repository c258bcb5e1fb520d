"""Published training recipes as data: the model, the machine, and every knob of Megatron-LM / NeMo's plan.

    from kernbench.workloads import recipes
    r = recipes.get("nemo-llama3.1-70b-64")
    system = r.system()                         # the recipe's cluster preset, with enough boxes
    tr = estimate.training_step(r.graph(), system, r.plan())

A recipe names its model (a catalog name), its cluster preset and the GPU count, and the plan in Megatron's knob
names: ``tp``, ``pp``, ``cp``, ``ep``, ``vp`` (interleave), ``micro_batch``, ``global_batch`` (dp follows from the
GPUs: ``gpus / (tp x pp x cp)``; the micro-batches per replica from ``global_batch / (dp x micro_batch)``),
``seq``, ``sp``, ``sharding`` and ``recompute``. Each carries its source; where the source leaves a knob unsaid the
recipe says what it assumes. Every recipe here runs with Megatron's distributed optimizer (``zero1``) and fits an
80 GB H100 (or A100) by kernbench's memory check (tests/python/test_recipes.py).

The rows of the training-scale bench (``kernbench run --bench training-scale --set bench.recipes=all``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernbench.workloads.graph import WorkloadError

__all__ = ["Recipe", "RECIPES", "get", "names", "cluster_for"]

H100_CLUSTER = "machines/dgx-h100-cluster.yaml"
A100_CLUSTER = "machines/dgx-a100-cluster.yaml"


@dataclass(frozen=True)
class Recipe:
    """One published training configuration (module doc)."""

    name: str
    model: str
    machine: str
    gpus: int
    tp: int
    pp: int
    global_batch: int
    seq: int
    source: str
    cp: int = 1
    ep: int = 1
    vp: int = 1
    micro_batch: int = 1
    sp: bool = False
    sharding: str = "zero1"
    recompute: str = "none"
    #: config overrides the machine needs beyond its box count (a third switch tier past two tiers' reach)
    machine_set: dict[str, Any] = field(default_factory=dict)

    @property
    def dp(self) -> int:
        """Data-parallel replicas: the GPUs over tp x pp x cp (a recipe whose GPUs do not divide is refused)."""
        per = self.tp * self.pp * self.cp
        if self.gpus % per:
            raise WorkloadError(f"recipe {self.name}: {self.gpus} GPUs are not a multiple of tp x pp x cp = {per}")
        return self.gpus // per

    @property
    def microbatches(self) -> int:
        """Micro-batches per replica and step: global_batch / (dp x micro_batch)."""
        per = self.dp * self.micro_batch
        if self.global_batch % per:
            raise WorkloadError(f"recipe {self.name}: global_batch {self.global_batch} is not a multiple of dp x "
                                f"micro_batch = {per}")
        return self.global_batch // per

    def plan(self, **overrides):
        """The ParallelPlan (``overrides``: any ParallelPlan keyword, e.g. ``fidelity``)."""
        from kernbench.workloads.plan import ParallelPlan

        kw = dict(dp=self.dp, tp=self.tp, pp=self.pp, cp=self.cp, ep=self.ep, interleave=self.vp,
                  microbatches=self.microbatches, sp=self.sp, sharding=self.sharding, recompute=self.recompute)
        kw.update(overrides)
        return ParallelPlan(**kw)

    def graph(self, layers: int | None = None):
        """One micro-batch's forward graph of the recipe's model (``layers``: fewer, for a quick look)."""
        from kernbench.workloads.model_config import get_model

        return get_model(self.model).graph(self.micro_batch, self.seq, layers=layers)

    def system(self, config: str | None = None, overrides: dict | None = None, seed: int = 1):
        """The recipe's machine (``config``: another cluster preset) with the boxes its GPUs need."""
        return cluster_for(config or self.machine, self.gpus, {**self.machine_set, **dict(overrides or {})}, seed)


def cluster_for(config: str, gpus: int, overrides: dict | None = None, seed: int = 1):
    """The cluster preset ``config`` (with ``overrides``) loaded with the boxes ``gpus`` GPUs need (its
    ``cluster.nodes``: the GPUs over its boxes' GPUs, rounded up)."""
    from kernbench.system import System

    base = dict(overrides or {})
    per_box = System.load(config, set=base, seed=seed).cluster()["gpus_per_node"]
    return System.load(config, set={**base, "cluster.nodes": -(-gpus // per_box)}, seed=seed)


def _nemo_gpt3(gpus: int) -> Recipe:
    return Recipe(f"nemo-gpt3-175b-{gpus}", "gpt3-175b", H100_CLUSTER, gpus, tp=4, pp=8, vp=12, sp=True,
                  global_batch=2 * gpus, seq=2048,
                  source="NeMo's GPT-3 175B recipe on DGX H100 (TP 4, PP 8, VP 12, MBS 1, BF16), weak-scaled at a "
                         "global batch of 2 x GPUs (the issue's statement of it); sequence parallelism on, as NeMo's "
                         "GPT-3 configs set it")


def _nemo_llama70b(gpus: int) -> Recipe:
    dp = gpus // (4 * 4 * 2)
    return Recipe(f"nemo-llama3.1-70b-{gpus}", "llama3.1-70b", H100_CLUSTER, gpus, tp=4, pp=4, cp=2, vp=5, sp=True,
                  global_batch=64 * dp, seq=8192,
                  source="NeMo's Llama-3.1-70B pre-training recipe (TP 4, PP 4, CP 2, VP 5, seq 8192, MBS 1), 64 "
                         "micro-batches per replica")


def _nemo_llama405b(gpus: int) -> Recipe:
    dp = gpus // (8 * 9 * 2)
    return Recipe(f"nemo-llama3.1-405b-{gpus}", "llama3.1-405b", H100_CLUSTER, gpus, tp=8, pp=9, cp=2, vp=7, sp=True,
                  global_batch=63 * dp, seq=8192, machine_set={"cluster.fabric.tiers": 3},
                  source="NeMo's Llama-3.1-405B pre-training recipe (TP 8, PP 9, CP 2, VP 7, seq 8192, MBS 1), 63 "
                         "micro-batches per replica, on three switch tiers")


def _megatron_table5(model: str, gpus: int, pp: int, vp: int, selective: bool) -> Recipe:
    size = model.split("-")[-1]
    how = "selective" if selective else "full"
    return Recipe(f"megatron-{size}-{how}-{gpus}", model, A100_CLUSTER, gpus, tp=8, pp=pp, vp=vp, sp=selective,
                  recompute="selective" if selective else "full", global_batch=gpus, seq=2048,
                  source=f"Korthikanti et al. 2022 (arXiv:2205.05198), Table 5 / Table 3: {size} on {gpus} A100s at "
                         f"TP 8, PP {pp}" + (f", VP {vp}" if vp > 1 else "") + f", global batch {gpus}, "
                         + ("sequence parallelism with selective recompute (the paper's 'present work')"
                            if selective else "full recompute without sequence parallelism (its baseline)"))


RECIPES: dict[str, Recipe] = {r.name: r for r in [
    *(_nemo_gpt3(g) for g in (128, 512, 2048)),
    *(_nemo_llama70b(g) for g in (64, 2048)),
    *(_nemo_llama405b(g) for g in (576, 2304)),
    *(_megatron_table5(m, g, pp, vp, sel) for m, g, pp, vp in (("gpt3-175b", 64, 8, 1), ("turing-530b", 280, 35, 3),
                                                               ("megatron-1t", 512, 64, 1))
      for sel in (False, True)),
    Recipe("grok-1-512", "grok-1", H100_CLUSTER, 512, tp=4, pp=8, cp=2, ep=8, vp=8, sp=True, global_batch=512,
           seq=8192, source="the issue's Grok-1 plan (TP 4, PP 8, CP 2, EP 8, VP 8, seq 8192) on 512 H100s; "
                            "64 micro-batches per replica assumed"),
]}


def names() -> list[str]:
    return list(RECIPES)


def get(name: str) -> Recipe:
    """The recipe called ``name``; an unknown name lists the known ones."""
    try:
        return RECIPES[name]
    except KeyError:
        raise WorkloadError(f"unknown recipe {name!r} (known: {', '.join(RECIPES)})") from None
