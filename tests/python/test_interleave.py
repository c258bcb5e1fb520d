"""Megatron-LM's interleaved 1F1B (``ParallelPlan.interleave``, kernbench.workloads.training.interleaved_1f1b):
the order is valid, its warm-up is Megatron's, its bubble is (pp - 1) / (v m) of the ideal time exactly on equal
chunks with free communication, bad plans are refused by name, and a real training step's bubble shrinks."""

from __future__ import annotations

from fractions import Fraction

import pytest

from kernbench.system import System
from kernbench.workloads import ParallelPlan, WorkloadError, estimate, handbuilt
from kernbench.workloads.lower import lower
from kernbench.workloads.training import interleaved_1f1b, one_f_one_b, warmup_forwards

H100 = "machines/h100-8x-nvswitch.yaml"
#: A decoder whose GEMMs outlast their launches on the H100 box, so the step is the schedule's (4 layers: 0.1 s).
DIMS = {"hidden": 2048, "heads": 16, "kv_heads": 16, "head_dim": 128, "intermediate": 8192, "vocab": 4096,
        "layers": 4}
#: (pp, v, m) the exact checks run: m a multiple of pp, from one group of pp microbatches to several.
CASES = [(pp, v, m) for pp in (2, 3, 4, 8) for v in (1, 2, 3, 4) for m in (pp, 2 * pp, 3 * pp, 5 * pp)]


def simulate(order, pp: int, v: int, f: int, b: int) -> tuple[int, list[int]]:
    """An exact event simulation of a per-stage order: each stage runs its list in order, an item starts when the
    stage is free and its dependency has ended (F(j, c) after F(j, c - 1), B(j, c) after B(j, c + 1), the last
    chunk's B(j) after its F(j)); a chunk's forward takes f, its backward b, communication nothing. Returns the
    span (the last end; everything starts at 0) and each stage's busy time. A stage blocked on an item no stage
    can reach is a deadlock (AssertionError)."""
    last = pp * v - 1
    end: dict[tuple[str, int, int], int] = {}
    pos, free, busy = [0] * pp, [0] * pp, [0] * pp
    while any(pos[s] < len(order[s]) for s in range(pp)):
        moved = False
        for s in range(pp):
            while pos[s] < len(order[s]):
                what, j, local = order[s][pos[s]]
                c = local * pp + s
                dep = (("F", j, c - 1) if c > 0 else None) if what == "F" else \
                    (("B", j, c + 1) if c < last else ("F", j, c))
                if dep is not None and dep not in end:
                    break
                t = max(free[s], end[dep] if dep else 0) + (f if what == "F" else b)
                end[(what, j, c)] = free[s] = t
                busy[s] += f if what == "F" else b
                pos[s] += 1
                moved = True
        assert moved, f"deadlock at {pos}"
    return max(end.values()), busy


@pytest.mark.parametrize("pp,v,m", CASES)
def test_the_interleaved_bubble_is_pp_minus_1_over_v_m_exactly(pp, v, m):
    """Issue 35: on equal chunks (forward f, backward b = 2f) with free communication, the interleaved 1F1B
    bubble time over the ideal time is (pp - 1) / (v m) exactly on every stage, and its share of the span is
    (pp - 1) / (v m + pp - 1)."""
    span, busy = simulate(interleaved_1f1b(pp, v, m), pp, v, f=1, b=2)
    for s in range(pp):
        assert busy[s] == v * m * 3  # the ideal time: every chunk's forward and backward of every microbatch
        assert Fraction(span - busy[s], busy[s]) == Fraction(pp - 1, v * m)
        assert Fraction(span - busy[s], span) == Fraction(pp - 1, v * m + pp - 1)


@pytest.mark.parametrize("pp,m", [(2, 1), (2, 3), (4, 4), (4, 7), (8, 3)])
def test_v_1_is_the_existing_1f1b(pp, m):
    """interleave 1 is one_f_one_b exactly (any m, also below pp), and its bubble is 1F1B's (pp - 1) / m."""
    order = interleaved_1f1b(pp, 1, m)
    assert order == [[(what, j, 0) for what, j in st] for st in one_f_one_b(pp, m)]
    span, busy = simulate(order, pp, 1, f=1, b=2)
    assert all(Fraction(span - x, x) == Fraction(pp - 1, m) for x in busy)


@pytest.mark.parametrize("pp,v,m", CASES)
def test_the_order_is_valid(pp, v, m):
    """Every stage runs each (microbatch, chunk) it holds exactly once forward and once backward, the forward
    first; each chunk's microbatches go in order both ways; and the stages never deadlock (simulate asserts)."""
    order = interleaved_1f1b(pp, v, m)
    assert len(order) == pp
    for st in order:
        assert sorted(st) == sorted((w, j, c) for w in "FB" for j in range(m) for c in range(v))
        for j in range(m):
            for c in range(v):
                assert st.index(("F", j, c)) < st.index(("B", j, c))
        for w in "FB":
            for c in range(v):
                assert [j for x, j, y in st if (x, y) == (w, c)] == list(range(m))
    simulate(order, pp, v, f=1, b=2)


def test_warm_up_and_chunk_order_are_megatrons():
    """Stage s warms up with (pp - s - 1) x 2 + (v - 1) x pp forwards (at most v m; 1F1B: pp - s - 1, at most m),
    then runs a forward and a backward alternately, so its first backward comes after one more forward (none when
    the warm-up ran them all); the k-th forward's chunk is (k // pp) % v, the k-th backward's v - 1 - (k // pp) % v."""
    for pp, v, m in CASES:
        order = interleaved_1f1b(pp, v, m)
        for s, st in enumerate(order):
            first_b = next(k for k, x in enumerate(st) if x[0] == "B")
            want = min(pp - s - 1, m) if v == 1 else min((pp - s - 1) * 2 + (v - 1) * pp, v * m)
            assert warmup_forwards(pp, v, m, s) == want
            assert first_b == want + (1 if want < v * m else 0)
            if v > 1:
                fw = [c for w, _, c in st if w == "F"]
                bw = [c for w, _, c in st if w == "B"]
                assert fw == [(k // pp) % v for k in range(v * m)]
                assert bw == [v - 1 - (k // pp) % v for k in range(v * m)]
    assert interleaved_1f1b(2, 2, 2)[0] == [("F", 0, 0), ("F", 1, 0), ("F", 0, 1), ("F", 1, 1), ("B", 0, 1),
                                            ("B", 1, 1), ("B", 0, 0), ("B", 1, 0)]
    assert interleaved_1f1b(2, 2, 2)[1] == [("F", 0, 0), ("F", 1, 0), ("F", 0, 1), ("B", 0, 1), ("F", 1, 1),
                                            ("B", 1, 1), ("B", 0, 0), ("B", 1, 0)]


def test_bad_interleaved_plans_are_refused_by_name():
    """Interleave needs an integer >= 1, pp > 1 and microbatches a multiple of pp (Megatron's condition); the
    layers must cut into pp x v equal chunks; an inference lowering refuses it. Each error names the numbers."""
    with pytest.raises(WorkloadError, match="interleave must be an integer >= 1, got 0"):
        ParallelPlan(pp=2, interleave=0)
    with pytest.raises(WorkloadError, match="interleave must be an integer >= 1, got True"):
        ParallelPlan(pp=2, interleave=True)
    with pytest.raises(WorkloadError, match=r"interleave = 2 .* needs pp > 1 \(pp = 1\)"):
        ParallelPlan(interleave=2)
    with pytest.raises(WorkloadError, match="interleave = 2 .*microbatches = 6 is not a multiple of pp = 4"):
        ParallelPlan(pp=4, interleave=2, microbatches=6)
    with pytest.raises(WorkloadError, match="microbatches = 3 is not a multiple of pp = 2"):
        interleaved_1f1b(2, 2, 3)
    with pytest.raises(WorkloadError, match="needs pp > 1"):
        interleaved_1f1b(1, 2, 4)
    h100 = System.load(H100)
    g = handbuilt.llama_graph(1, 64, dims=DIMS, layers=6, embed=False, head=False)
    with pytest.raises(WorkloadError, match=r"interleave = 2 x pp = 2 = 4 model chunks: the 6 layers of block "
                                            r"'model.layers' do not divide into 4 equal chunks"):
        estimate.training_step(g, h100.twin(), ParallelPlan(pp=2, interleave=2, microbatches=2))
    with pytest.raises(WorkloadError, match="interleave = 2 is a training step's pipeline schedule"):
        lower(g, h100.twin(), ParallelPlan(pp=2, interleave=2, microbatches=2))


def test_an_interleaved_step_has_the_smaller_bubble():
    """A real step (4 layers, pp 2, m 4 on the H100 box): interleave 2 runs 4 chunks, crossing the stages 3 times
    per microbatch each way instead of once (3x the stage-to-stage transfers), the same GEMM FLOPs, and a smaller
    simulated bubble and step; each simulated bubble is within 0.01 of its analytic form (share 1/5 -> 1/9, ratio
    1/4 -> 1/8), and the step is the same whatever the run."""
    h100 = System.load(H100)
    g = handbuilt.llama_graph(4, 1024, dims=DIMS, layers=4, embed=False, head=False)
    plain = estimate.training_step(g, h100.twin(), ParallelPlan(pp=2, microbatches=4), reuse=False)
    inter = estimate.training_step(g, h100.twin(), ParallelPlan(pp=2, microbatches=4, interleave=2), reuse=False)
    again = estimate.training_step(g, h100.twin(), ParallelPlan(pp=2, microbatches=4, interleave=2), reuse=False)
    assert inter.step_ms == again.step_ms and inter.bubble == again.bubble
    assert inter.counts["p2p"] == 3 * plain.counts["p2p"]
    assert inter.gemm_flops == plain.gemm_flops
    assert (plain.bubble_analytic, inter.bubble_analytic) == (pytest.approx(1 / 5), pytest.approx(1 / 9))
    assert (plain.bubble_ratio_analytic, inter.bubble_ratio_analytic) == (0.25, 0.125)
    assert inter.bubble < plain.bubble and inter.step_ms < plain.step_ms
    for tr in (plain, inter):
        assert tr.bubble == pytest.approx(tr.bubble_analytic, abs=0.01)
        assert tr.bubble_ratio == pytest.approx(tr.bubble / (1 - tr.bubble))
        assert tr.bubble_ratio == pytest.approx(tr.bubble_ratio_analytic, abs=0.01)
        assert tr.row()["interleave"] == tr.plan.interleave and tr.row()["bubble_ratio"] == tr.bubble_ratio


def test_reuse_extends_an_interleaved_step_exactly():
    """24 layers at pp 2, v 2 (6 per chunk): the reuse simulates 2, 3, 4 layers per chunk, keeps the chunks equal,
    and extends the step to the full simulation's makespan."""
    h100 = System.load(H100)
    dims = {"hidden": 512, "heads": 8, "kv_heads": 8, "head_dim": 64, "intermediate": 2048, "vocab": 4096,
            "layers": 24}
    g = handbuilt.llama_graph(2, 256, dims=dims, layers=24)
    plan = ParallelPlan(pp=2, microbatches=2, interleave=2)
    fast = estimate.training_step(g, h100.twin(), plan)
    full = estimate.training_step(g, h100.twin(), plan, reuse=False)
    assert fast.reuse["mode"] == "extrapolated" and fast.reuse["simulated"][0] == [2, 2, 2, 2]
    assert fast.step_ms == pytest.approx(full.step_ms, rel=1e-9)
    assert fast.bubble == pytest.approx(full.bubble, abs=1e-3)


def test_model_training_passes_interleave_to_the_plan():
    """model.training's ``interleave`` reaches the plan: gpt2 (12 layers) at pp 2, m 2 runs 4 chunks at
    interleave 2 (a different step from plain 1F1B's, the same tokens per step), and an m that is not a multiple
    of pp is refused by name."""
    from kernbench.calibrate import REGISTRY, Context

    fn = REGISTRY.get("model.training").fn
    ctx = Context(config=H100, sets={})
    plain = fn(ctx, model="gpt2", pp=2, seq=128, grad_accum=2)
    inter = fn(ctx, model="gpt2", pp=2, seq=128, grad_accum=2, interleave=2)
    assert inter["step"] != plain["step"]
    assert inter["tokens_per_gpu"] * inter["step"] == pytest.approx(plain["tokens_per_gpu"] * plain["step"])
    with pytest.raises(WorkloadError, match="microbatches = 3 is not a multiple of pp = 2"):
        fn(ctx, model="gpt2", pp=2, seq=128, grad_accum=3, interleave=2)
