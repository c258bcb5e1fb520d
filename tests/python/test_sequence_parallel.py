"""Sequence parallelism's bytes and gathers (issue 53 item 5): with ``sp=True`` the tensor-parallel layer's
reduce-scatters and all-gathers carry the whole activation of the tp group (s x b x h elements), and the backward
has Megatron's gathers -- Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models"
(arXiv:2205.05198), section 4.2.2: g (all-gather forward, reduce-scatter backward) before each column-parallel
linear, g-bar (reduce-scatter forward, all-gather backward) after each row-parallel one, and the sequence shard of a
column-parallel linear's input all-gathered again for its weight gradient (Megatron-LM's
``LinearWithGradAccumulationAndAsyncCommunication.backward``). Per layer: forward 2 all-gathers + 2 reduce-scatters,
backward 4 all-gathers + 2 reduce-scatters, where plain tensor parallelism runs 2 + 2 all-reduces.

Bytes are read off the NVLinks of the H100 box (every GPU pair through the NVSwitches: two link crossings per
transfer). The machine runs NCCL's Simple protocol (its tuner's LL and LL128 latencies set out of reach, as
NCCL_PROTO=Simple does) with SM stores at the full link rate (``nccl.link_efficiency`` 1), so that the wire carries
the payload: a ring all-gather or reduce-scatter of B bytes over t GPUs moves (t - 1) / t B per GPU, an all-reduce
twice that, plus Simple's flag of each step (< 1 % here)."""

from __future__ import annotations

import pytest

import kernbench
from kernbench.program import Program
from kernbench.workloads import estimate, get_model
from kernbench.workloads.lower import lower
from kernbench.workloads.plan import ParallelPlan

H100 = "machines/h100-8x-nvswitch.yaml"
SIMPLE = {"nccl.link_efficiency": 1, "nccl.tuner.ll_base": "1 s", "nccl.tuner.ll128_base": "1 s"}
MODEL, SEQ = "llama3-8b", 128  # hidden 4096, one embedding table (GPT's position table is lowered vocab-parallel too)
B = SEQ * get_model(MODEL).hidden * 2  # s x b x h bf16 elements: the activation every tp collective carries


def box():
    return kernbench.System.load(H100, set=SIMPLE)


def nvlink(system) -> int:
    ch = system._core.channels()
    return sum(int(b) for c, b in zip(ch["class"], ch["bytes"]) if c == "nvlink")


def alone(what: str, tp: int, fidelity: str = "pipeline") -> int:
    """NVLink bytes of one ``what`` of the whole activation over the first tp GPUs, appended as a training step's
    lowering does (NCCL's ring on the flow fabric as the channel pipeline: Lowerer.fidelity; an inference pass's
    at ``auto``)."""
    s = box()
    p = Program(s)
    p.collective(what, s.pes()[:tp], B, algorithm="ring", buffer="hbm", fidelity=fidelity)
    p.run()
    return nvlink(s)


def ring(tp: int) -> float:
    """The paper's count of one all-gather or reduce-scatter of B on the NVLinks: (t - 1) / t B per GPU, t GPUs,
    two link crossings (GPU -> NVSwitch -> GPU)."""
    return 2 * tp * (tp - 1) / tp * B


def train(tp: int, sp: bool, *, layers: int, embed=False, head=False, microbatches=1, recompute="none"):
    """A training step (dp 1, pp 1): its NVLink bytes and its Lowered."""
    s = box()
    g = get_model(MODEL).graph(1, SEQ, layers=layers, embed=embed, head=head)
    lw = lower(g, s, ParallelPlan(tp=tp, sp=sp, microbatches=microbatches, recompute=recompute), phase="train")
    lw.run()
    return nvlink(s), lw


def collectives(lw, prefix: str) -> dict[tuple[str, str], int]:
    """(pass, kind) -> how many tp collectives the ops named ``prefix...`` ran."""
    out: dict[tuple[str, str], int] = {}
    for s in lw.spans:
        if s.kind in ("all_gather", "reduce_scatter", "all_reduce") and s.name.startswith(prefix):
            out[(s.pass_, s.kind)] = out.get((s.pass_, s.kind), 0) + 1
    return out


def test_a_collective_moves_the_ring_count():
    """The oracle: alone, a ring all-gather and a reduce-scatter of the whole activation move (t - 1) / t of it per
    GPU and an all-reduce twice that, within Simple's step flags (0.5 %)."""
    for tp in (2, 4):
        ag, rs, ar = alone("all_gather", tp), alone("reduce_scatter", tp), alone("all_reduce", tp)
        assert ag == rs == pytest.approx(ring(tp), rel=5e-3) and ag >= ring(tp)
        assert ar == ag + rs  # an all-reduce is a reduce-scatter and an all-gather


@pytest.mark.parametrize("tp", [2, 4])
def test_one_layer_forward_and_backward_bytes_are_korthikanti_count(tp):
    """One transformer layer's forward and backward (a 2-layer step less a 1-layer step: the second layer's input
    comes sequence-sharded from the first) on the NVLinks. Plain tensor parallelism: 2 all-reduces forward, 2
    backward -- 8 (t - 1) / t s b h per GPU. With sp: 2 all-gathers + 2 reduce-scatters forward, the conjugates
    (2 + 2) backward and the 2 re-gathers of the column-parallel inputs -- 10 (t - 1) / t s b h per GPU; each
    exactly the bytes of that many collectives of s x b x h run alone."""
    ag, rs, ar = alone("all_gather", tp), alone("reduce_scatter", tp), alone("all_reduce", tp)
    one_tp, _ = train(tp, False, layers=1)
    two_tp, lw_tp = train(tp, False, layers=2)
    one_sp, _ = train(tp, True, layers=1)
    two_sp, lw_sp = train(tp, True, layers=2)
    layer = "model.layers.1."
    assert collectives(lw_tp, layer) == {("forward", "all_reduce"): 2, ("backward", "all_reduce"): 2}
    assert collectives(lw_sp, layer) == {("forward", "all_gather"): 2, ("forward", "reduce_scatter"): 2,
                                         ("backward", "all_gather"): 4, ("backward", "reduce_scatter"): 2}
    assert two_tp - one_tp == 4 * ar
    assert two_sp - one_sp == 6 * ag + 4 * rs
    assert two_tp - one_tp == pytest.approx(8 * ring(tp), rel=5e-3)
    assert two_sp - one_sp == pytest.approx(10 * ring(tp), rel=5e-3)


def test_a_step_with_sp_moves_only_the_regathers_more():
    """A whole step (embeddings, 2 layers, final norm and LM head; 2 microbatches; tp 4) moves, with sp, more
    NVLink bytes than without by the re-gathers of the column-parallel inputs alone: 2 per layer and 1 for the LM
    head per microbatch, M (2 L + 1) all-gathers of s x b x h -- every other all-reduce became a reduce-scatter and
    an all-gather of the same bytes (the embeddings' too: reduce-scattered forward, their gradient all-gathered)."""
    tp, L, M = 4, 2, 2
    plain, _ = train(tp, False, layers=L, embed=True, head=True, microbatches=M)
    seq, lw = train(tp, True, layers=L, embed=True, head=True, microbatches=M)
    assert seq - plain == M * (2 * L + 1) * alone("all_gather", tp)
    re_gathers = sum(1 for s in lw.spans if s.kind == "all_gather" and s.name.endswith("input all-gather"))
    assert re_gathers == M * (2 * L + 1)


def test_full_recompute_with_sp_repeats_the_forward_collectives():
    """recompute='full' with sp runs each layer's forward again, its collectives with it: per layer 2 all-gathers
    and 2 reduce-scatters more (Megatron's checkpointed layer reruns them), pass recompute."""
    tp, L = 2, 2
    none, _ = train(tp, True, layers=L)
    full, lw = train(tp, True, layers=L, recompute="full")
    assert collectives(lw, "model.layers.1.")[("recompute", "all_gather")] == 2
    assert collectives(lw, "model.layers.1.")[("recompute", "reduce_scatter")] == 2
    # layer 0's input is the graph's (replicated): its qkv gathers nothing, forward or recomputed
    assert full - none == (2 * L - 1) * alone("all_gather", tp) + 2 * L * alone("reduce_scatter", tp)


@pytest.mark.parametrize("reuse", [False, True])
def test_an_inference_forward_with_sp_moves_what_tensor_parallelism_moves(reuse):
    """estimate.inference's prefill at tp 4: with sp each all-reduce becomes a reduce-scatter and an all-gather of
    the same activation, so the NVLinks carry the same bytes (the embeddings' and the layers' all-reduces, and the
    LM head's gather), and not zero: the whole activation each time."""
    g = get_model(MODEL).graph(1, SEQ, layers=2)
    got = {}
    for sp in (False, True):
        s = box()
        est = estimate.inference(g, s, ParallelPlan(tp=4, sp=sp), batch=1, prompt=SEQ, reuse=reuse)
        got[sp] = (nvlink(s), collectives(est.prefill.lowered, ""))
    (plain, n_plain), (seq, n_seq) = got[False], got[True]
    assert seq == plain > 0
    ar = n_plain[("forward", "all_reduce")]
    assert n_seq == {("forward", "reduce_scatter"): ar, ("forward", "all_gather"): ar}
    if not reuse:  # the embedding + 2 per layer; with reuse one layer is simulated
        assert ar == 1 + 2 * 2
        assert plain == ar * alone("all_reduce", 4, "auto")
