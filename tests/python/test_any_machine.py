"""Kernels, collectives and composable Programs on explicit graphs (issue 18 items 1, 2, 5)."""

from __future__ import annotations

import pytest
import yaml

import kernbench
from kernbench import _core, ccl, llama
from kernbench.program import Handle
from kernbench.system import config_path

PE_SECTION = "pe: {clock: 1000 MHz, dispatch: 20 ns, scratch: 4 MiB, ipcq: {bank_hop: 1 ns, slot: 4 KiB}}\n"


def _gpus(n: int, memory: bool = True) -> tuple[list[str], list[str]]:
    nodes, edges = [], []
    for i in range(n):
        mem = f", memory: gpu{i}.hbm" if memory else ""
        nodes.append(f"    - {{name: gpu{i}, kind: pe, overhead: 0 ns{mem}}}")
        nodes.append(f"    - {{name: gpu{i}.hbm, kind: hbm_ctrl, overhead: 5 ns}}")
        edges.append(f"    - {{a: gpu{i}, b: gpu{i}.hbm, class: hbm, bandwidth: 1 TB/s, latency: 1 ns}}")
    return nodes, edges


def switch_box_yaml(layout: bool = True) -> str:
    """8 GPUs (kind pe, each with its HBM node) linked to each of 4 switches that reduce in the network."""
    nodes, edges = _gpus(8)
    for s in range(4):
        nodes.append(f"    - {{name: sw{s}, kind: switch, overhead: 10 ns, reduction: {{bandwidth: 800 GB/s}}}}")
        edges += [f"    - {{a: gpu{i}, b: sw{s}, class: nvlink, bandwidth: 100 GB/s, latency: 50 ns}}"
                  for i in range(8)]
    text = "graph:\n  nodes:\n" + "\n".join(nodes) + "\n  edges:\n" + "\n".join(edges) + "\n"
    if layout:
        text += ("  layout:\n    grid: {w: 4, h: 2}\n    packages: {w: 1, h: 1, topology: ring}\n"
                 "    groups: {w: 2, h: 1}\n    pes_per_group: 4\n")
    return text + PE_SECTION


def mesh_yaml() -> str:
    """8 GPUs as a 4 x 2 mesh written as a graph."""
    nodes, edges = _gpus(8)
    for y in range(2):
        for x in range(4):
            r = y * 4 + x
            if x + 1 < 4:
                edges.append(f"    - {{a: gpu{r}, b: gpu{r + 1}, class: mesh, bandwidth: 100 GB/s, latency: 50 ns}}")
            if y + 1 < 2:
                edges.append(f"    - {{a: gpu{r}, b: gpu{r + 4}, class: mesh, bandwidth: 100 GB/s, latency: 50 ns}}")
    return ("graph:\n  nodes:\n" + "\n".join(nodes) + "\n  edges:\n" + "\n".join(edges) +
            "\n  layout:\n    grid: {w: 4, h: 2}\n    packages: {w: 1, h: 1}\n    groups: {w: 4, h: 2}\n"
            "    pes_per_group: 1\n" + PE_SECTION)


def ring_yaml() -> str:
    """8 GPUs on a ring written as a graph, no layout."""
    nodes, edges = _gpus(8)
    edges += [f"    - {{a: gpu{i}, b: gpu{(i + 1) % 8}, class: ring, bandwidth: 100 GB/s, latency: 50 ns}}"
              for i in range(8)]
    return "graph:\n  nodes:\n" + "\n".join(nodes) + "\n  edges:\n" + "\n".join(edges) + "\n" + PE_SECTION


def test_explicit_pes_groups_and_memories():
    """System.pes(), pes(group=...), memory_of() and layout() read the declared relations."""
    s = kernbench.System.from_yaml(switch_box_yaml())
    assert s.pes() == [f"gpu{i}" for i in range(8)]
    assert s.pes(group=1) == ["gpu4", "gpu5", "gpu6", "gpu7"]
    assert s.pes(package=0) == s.pes()
    assert s.memory_of("gpu3") == "gpu3.hbm"
    lay = s.layout()
    assert lay["declared"] and lay["grid"] == (4, 2) and lay["pes_per_group"] == 4
    r = kernbench.System.from_yaml(ring_yaml())
    assert len(r.pes()) == 8 and not r.layout()["declared"]


def test_generated_machine_states_the_same_relations():
    """The generator fills the same structure: ranks in (sip, cube, pe) order, HBM slices as memories."""
    s = kernbench.System.load(set={"system.sips.w": 1, "system.sips.h": 1, "system.cubes.w": 2, "system.cubes.h": 1})
    lay = s.layout()
    assert lay["declared"] and lay["groups"] == (2, 1)
    assert s.pes(group=1)[0] == "sip0.cube1.pe0"
    assert s.memory_of("sip0.cube1.pe3") == "sip0.cube1.hbm_ctrl.pe3"


@pytest.mark.parametrize("name,text,shaped", [("switch box", switch_box_yaml(), True), ("mesh", mesh_yaml(), True),
                                              ("ring", ring_yaml(), False)])
def test_every_algorithm_verified_on_explicit_graphs(name, text, shaped):
    """Every algorithm and collective it has runs verified where its shape exists, else names what is missing
    (nvls_tree, NCCL's NVLS across boxes, on these one-box machines)."""
    for a in ccl.algorithms():
        for what in a["collectives"]:
            s = kernbench.System.from_yaml(text, source=name)
            needs = {"torus2d": "graph.layout.grid", "mesh2d": "graph.layout.grid", "lrab": "graph.layout.groups"}
            if a["name"] == "nvls" and name != "switch box":  # no switch: the error names what is missing
                with pytest.raises(kernbench.KernbenchError, match=r"nvls needs an in-network reducing switch.*"
                                                                   r"reduction: \{bandwidth: \.\.\.\}"):
                    ccl.collective(s, what, 4096 + 12, algorithm=a["name"], verify="on")
                continue
            if a["name"] == "nvls_tree":  # NVLS across boxes: no NIC on these machines, so one box
                with pytest.raises(kernbench.KernbenchError, match="nvls_tree is NCCL's NVLS across boxes.*use nvls"):
                    ccl.collective(s, what, 4096 + 12, algorithm=a["name"], verify="on")
                continue
            if not shaped and a["name"] in needs:
                with pytest.raises(kernbench.KernbenchError, match=needs[a["name"]].replace(".", r"\.")):
                    ccl.collective(s, what, 4096 + 12, algorithm=a["name"], verify="on")
                continue
            r = ccl.collective(s, what, 4096 + 12, algorithm=a["name"], verify="on")
            assert r.verified and r.ranks == 8, (name, a["name"], what)


def test_layout_config_errors_name_the_key():
    """A memory that is not a memory, a rank that is not a PE, a grid that does not fit: ConfigErrors."""
    bad_mem = switch_box_yaml(False).replace("memory: gpu0.hbm", "memory: sw0")
    with pytest.raises(kernbench.ConfigError, match=r"graph\.nodes\[0\]\.memory.*hbm_ctrl or memory"):
        kernbench.System.from_yaml(bad_mem)
    bad_rank = switch_box_yaml(False) + "".join([])
    bad_rank = bad_rank.replace("pe: {", "  layout: {ranks: [gpu0, sw1]}\npe: {", 1)
    with pytest.raises(kernbench.ConfigError, match=r"not a pe"):
        kernbench.System.from_yaml(bad_rank)
    bad_grid = switch_box_yaml().replace("grid: {w: 4, h: 2}", "grid: {w: 3, h: 2}")
    with pytest.raises(kernbench.ConfigError, match=r"does not hold the 8 ranks"):
        kernbench.System.from_yaml(bad_grid)
    partial = switch_box_yaml().replace("    pes_per_group: 4\n", "")
    with pytest.raises(kernbench.ConfigError, match=r"pes_per_group"):
        kernbench.System.from_yaml(partial)


def _generated_and_twin():
    """A small generated machine (1 SIP, 1 cube, a line of 2 routers, 8 PEs) and its explicit twin."""
    sets = {"system.sips.w": 1, "system.sips.h": 1, "system.cubes.w": 1, "system.cubes.h": 1,
            "system.routers.w": 2, "system.routers.h": 1, "system.pes_per_cube": 8}
    gen = kernbench.System.load(set=sets)
    doc = yaml.safe_load(config_path("topology.yaml").read_text())
    for k in ("system", "nodes", "links"):
        doc.pop(k)
    doc["graph"] = gen.explicit_graph()
    text = yaml.safe_dump(doc, sort_keys=False)
    return (lambda: kernbench.System.load(set=sets)), (lambda: kernbench.System.from_yaml(text, source="twin"))


def test_explicit_twin_gives_the_generated_times_to_the_ps():
    """GEMM and the LLaMA layer on the dumped graph take exactly the generated machine's time."""
    gen, twin = _generated_and_twin()
    assert gen().pes() == twin().pes()
    times = []
    for make in (gen, twin):
        s = make()
        pes = s.pes()[:4]
        g = s.run_program(_core.gemm_program(s._core, 1024, 512, 768, "fp16", pes=[s.node_id(p) for p in pes]))
        dims = {"hidden": 1024, "heads": 8, "kv_heads": 2, "head_dim": 128, "intermediate": 2048}
        lay = llama.layer(make(), "prefill", 256, tp=8, dims=dims)
        times.append((g.makespan_ps, lay.latency_ps))
    assert times[0][0] > 0 and times[0][1] > 0
    assert times[0] == times[1]


def test_program_composes_gemm_and_collectives_with_deps():
    """prog.gemm / all_reduce / reduce_scatter / all_gather / broadcast / attention: one handle each, same times
    as the one-call forms, and deps order them."""
    text = switch_box_yaml()
    s = kernbench.System.from_yaml(text)
    pes = s.pes()
    alone = kernbench.System.from_yaml(text)
    ref_ar = ccl.all_reduce(alone, 1 << 16, algorithm="ring").latency_ps

    prog = s.program("composed")
    ar = prog.all_reduce(pes, 1 << 16, algorithm="ring")
    assert isinstance(ar, Handle) and ar.sinks and ar.first == 0
    res = prog.run()
    assert res.makespan_ps == ref_ar

    s2 = kernbench.System.from_yaml(text)
    prog2 = s2.program("gemm then all-reduce")
    mm = prog2.gemm(pes, 512, 512, 512, precision="fp16")
    ar2 = prog2.all_reduce(pes, 1 << 16, algorithm="ring", buffer="hbm", deps=[mm])
    rs = prog2.reduce_scatter(pes, 1 << 16, deps=[ar2])
    ag = prog2.all_gather(pes, 1 << 16, deps=[rs])
    bc = prog2.broadcast(pes, 1 << 14, deps=[ag])
    last = prog2.compute(pes[0], 1e3, deps=[bc], name="after")
    res2 = prog2.run()
    ops = res2.ops_df()
    assert ops.loc[list(ar2.ops), "start_ps"].min() >= ops.loc[list(mm.sinks), "end_ps"].max()
    assert ops.loc[last, "start_ps"] >= ops.loc[list(bc.sinks), "end_ps"].max()
    assert res2.makespan_ps == ops.loc[last, "end_ps"]

    s3 = kernbench.System.from_yaml(text)
    ref_mm = s3.run_program(_core.gemm_program(s3._core, 512, 512, 512, "fp16",
                                               pes=[s3.node_id(p) for p in pes])).makespan_ps
    s4 = kernbench.System.from_yaml(text)
    p4 = s4.program("gemm")
    p4.gemm(pes, 512, 512, 512)
    assert p4.run().makespan_ps == ref_mm


def test_program_attention_on_a_generated_machine():
    """prog.attention appends one GQA case: the same time as kernbench.gqa.run."""
    from kernbench import gqa

    sets = {"system.sips.w": 1, "system.sips.h": 1, "system.cubes.w": 2, "system.cubes.h": 1}
    ref = gqa.run(kernbench.System.load(set=sets), "decode", 2, 4, 1024, cubes=[0]).latency_ps
    s = kernbench.System.load(set=sets)
    prog = s.program("attn")
    prog.attention("decode", 2, 4, 1024, cubes=[0])
    assert prog.run().makespan_ps == ref


def test_declared_rank_order_is_the_ring_order():
    """layout.ranks sets the rank order: a ring listed out of order runs as fast as one listed in order."""
    order = [0, 2, 4, 6, 1, 3, 5, 7]
    nodes, _ = _gpus(8)
    listed = [nodes[2 * i] + "\n" + nodes[2 * i + 1] for i in order]
    edges = [f"    - {{a: gpu{i}, b: gpu{i}.hbm, class: hbm, bandwidth: 1 TB/s, latency: 1 ns}}" for i in range(8)]
    edges += [f"    - {{a: gpu{i}, b: gpu{(i + 1) % 8}, class: ring, bandwidth: 100 GB/s, latency: 50 ns}}"
              for i in range(8)]
    base = "graph:\n  nodes:\n" + "\n".join(listed) + "\n  edges:\n" + "\n".join(edges) + "\n"
    ranks = "  layout: {ranks: [" + ", ".join(f"gpu{i}" for i in range(8)) + "]}\n"
    scrambled = kernbench.System.from_yaml(base + PE_SECTION)
    declared = kernbench.System.from_yaml(base + ranks + PE_SECTION)
    assert scrambled.pes()[:2] == ["gpu0", "gpu2"] and declared.pes()[:2] == ["gpu0", "gpu1"]
    in_order = ccl.all_reduce(kernbench.System.from_yaml(ring_yaml()), 1 << 16).latency_ps
    assert ccl.all_reduce(declared, 1 << 16).latency_ps == in_order
    assert ccl.all_reduce(scrambled, 1 << 16).latency_ps > in_order
