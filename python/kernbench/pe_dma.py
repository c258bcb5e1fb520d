"""The PE DMA study: scenarios, one scenario's measurement, and the reference's magnitudes.

The standard study of the earlier KernBench simulator's outputs (docs/references.md, `kernbench`): 16 KB DMAs, one
PE alone at growing distances, then groups of PEs contending for an HBM
controller, a UCIe side or one slice. ``scenarios(system)`` lists them for
a machine; ``run_scenario(fresh_system, ...)`` runs one and measures it.
The ``pe-dma-perf`` bench (benches/pe_dma_perf.py) prints, plots and
verifies them; the validation report (kernbench.validation) sets the
makespans and bandwidths beside ``REFERENCE``.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

__all__ = ["REFERENCE", "LADDER", "PARTS", "sips_of", "scenarios", "run_scenario"]

# Magnitudes the earlier simulator reported on its own topology (ns, or
# GB/s where noted) -- printed beside ours, never used as targets.
REFERENCE = {
    "SAME_CUBE_PE_LOCAL": 77.0,
    "REMOTE_CUBE_PE_REMOTE_WORST": 573.0,
    "REMOTE_SIP": 409.0,
    "ctrl_hot_1": 82.0,
    "ctrl_hot_2": 158.0,
    "ctrl_hot_3": 230.0,
    "ucie_east_8": 963.0,
    "hot_slice_8": 558.0,
    "all_local_sip": ("27200 GB/s", 27200.0),
    "all_on_pe0_sip": ("134 GB/s", 134.0),
}
LADDER = [
    "SAME_CUBE_PE_LOCAL",
    "SAME_CUBE_PE_REMOTE_BEST",
    "SAME_CUBE_PE_REMOTE_WORST",
    "REMOTE_CUBE_PE_REMOTE_BEST",
    "REMOTE_CUBE_PE_REMOTE_WORST",
]
PARTS = ["overhead_ps", "transmission_ps", "drain_ps", "queuing_ps"]


def sips_of(system) -> list[int]:
    """The SIP (package) indices of a machine's PEs, in order (none on a machine without SIPs)."""
    nodes = system.nodes()
    return sorted({int(s) for s, k in zip(nodes["sip"], nodes["kind"]) if k == "pe" and s >= 0})


def scenarios(system, sip: int = 0) -> list[tuple[str, str, list[tuple[str, str]]]]:
    """(name, kind, [(issuer, memory)]) for the reference's scenario list on SIP ``sip``
    (one of ``sips_of(system)``; another is a UsageError naming it and the machine's range)."""
    from kernbench._core import UsageError
    from kernbench.args import Whole

    sip = Whole(0, 2**31 - 1, below="negative")(sip, "pe_dma.scenarios", "sip")
    have = sips_of(system)
    if have and sip not in have:
        raise UsageError(f"pe_dma.scenarios: sip = {sip} is not a SIP of this machine (it has SIPs "
                         f"{have[0]} .. {have[-1]})")
    nodes = system.nodes()
    names = nodes["name"]
    kinds = nodes["kind"]
    sips, cubes, pes = nodes["sip"], nodes["cube"], nodes["pe"]
    n_cubes = int(cubes[sips == sip].max()) + 1
    pe_of = {}
    hbm_of = {}
    for i, (name, kind) in enumerate(zip(names, kinds)):
        if kind in ("pe", "hbm_ctrl"):
            key = (int(sips[i]), int(cubes[i]), int(pes[i]))
            (pe_of if kind == "pe" else hbm_of)[key] = name
    n_pe = 1 + max(k[2] for k in pe_of if k[0] == sip)
    me = pe_of[(sip, 0, 0)]

    def hops(a, b):
        return system.route_info(a, b)["hops"]

    def by_distance(src, candidates):
        return sorted(candidates, key=lambda c: (hops(c, src), c))

    same_cube = [hbm_of[(sip, 0, q)] for q in range(1, n_pe)]
    other_cubes = [hbm_of[(sip, c, q)] for c in range(1, n_cubes) for q in range(n_pe)]
    sc = by_distance(me, same_cube)
    oc = by_distance(me, other_cubes)
    out = [
        ("SAME_CUBE_PE_LOCAL", "read", [(me, hbm_of[(sip, 0, 0)])]),
        ("SAME_CUBE_PE_REMOTE_BEST", "read", [(me, sc[0])]),
        ("SAME_CUBE_PE_REMOTE_WORST", "read", [(me, sc[-1])]),
        ("REMOTE_CUBE_PE_REMOTE_BEST", "read", [(me, oc[0])]),
        ("REMOTE_CUBE_PE_REMOTE_WORST", "read", [(me, oc[-1])]),
    ]
    other_sips = sorted({int(s) for s in sips if s >= 0 and s != sip})
    if other_sips:
        # The remote-cube-best slice, in the neighbouring SIP: the read
        # crosses PCIe and a cube boundary there.
        near = oc[0].split(".", 1)[1]
        out.append(("REMOTE_SIP", "read", [(me, f"sip{other_sips[0]}.{near}")]))
    hot = hbm_of[(sip, 0, 0)]
    readers = by_distance(hot, [pe_of[(sip, 0, q)] for q in range(n_pe)])
    for k in (1, 2, 3):
        out.append((f"ctrl_hot_{k}", "read", [(r, hot) for r in readers[:k]]))
    if n_cubes > 1:
        out.append(("ucie_east_8", "write", [(pe_of[(sip, 0, q)], hbm_of[(sip, 1, q)]) for q in range(min(8, n_pe))]))
    out.append(("hot_slice_8", "read", [(pe_of[(sip, 0, q)], hot) for q in range(min(8, n_pe))]))
    all_pes = [pe_of[(sip, c, q)] for c in range(n_cubes) for q in range(n_pe)]
    out.append(("all_local_sip", "read", [(a, a.replace(".pe", ".hbm_ctrl.pe")) for a in all_pes]))
    out.append(("all_on_pe0_sip", "read", [(a, hot) for a in all_pes]))
    return out


def run_scenario(system, name: str, kind: str, ops, nbytes: int,
                 on_run: Callable[[Any, str], None] | None = None) -> dict[str, Any]:
    """Run one scenario on a fresh ``system`` and measure it: one row (makespan, latencies, bandwidth,
    utilisations, the four-part breakdown of the op that finished last, UCIe busy time).

    ``on_run(system, name)`` is called once the DMAs ran, before they are measured (a bench offers
    the run as a trace panel there).
    """
    for i, (issuer, memory) in enumerate(ops):
        # Each issuer works on its own buffer: distinct addresses spread the
        # ops over the lanes of multi-connection links.
        system.dma(kind, issuer, memory, nbytes, address=i * nbytes)
    system.run()
    if on_run is not None:
        on_run(system, name)
    d = system.dma_ops()
    if not d["done"].all():
        raise RuntimeError(f"{(~d['done']).sum()} DMA ops did not finish")
    issue, end = d["issue_ps"], d["end_ps"]
    makespan = int(end.max() - issue.min())
    last = int(np.argmax(end))
    n = len(ops)
    eff = n * nbytes / (makespan * 1e-12) / 1e9  # GB/s
    # Data-leg paths (reads bring data back to the issuer).
    paths = [(m, i) if kind == "read" else (i, m) for i, m in ops]
    first = system.route_info(*paths[0])
    rates = system.max_min_rates(paths)
    peak = sum(rates) / 1e9
    # What the first issuer's path gives a lone transfer (its narrowest
    # channel, counting the lanes it stripes over): util_single's denominator.
    single = system.max_min_rates(paths[:1])[0] / 1e9
    ch = system.channels()
    classes = np.array(ch["class"])
    ucie_busy = float(np.sum(np.array(ch["busy_ps"])[classes == "ucie"]))
    lat = end - issue
    row = {
        "scenario": name,
        "kind": kind,
        "n_issuers": n,
        "bytes_each": nbytes,
        "first_issuer": ops[0][0],
        "first_memory": ops[0][1],
        "hops": first["hops"],
        "makespan_ns": makespan / 1e3,
        "latency_mean_ns": float(lat.mean()) / 1e3,
        "latency_max_ns": float(lat.max()) / 1e3,
        "effective_GBps": eff,
        "path_peak_GBps": single,
        "lane_bottleneck_GBps": first["bottleneck_Bps"] / 1e9,
        "maxmin_peak_GBps": peak,
        "util_single": eff / single,
        "util_aggregate": eff / peak,
        "ucie_busy_ns": ucie_busy / 1e3,
    }
    for part in PARTS:
        row[part.replace("_ps", "_ns")] = float(d[part][last]) / 1e3
        row[part.replace("_ps", "_mean_ns")] = float(d[part].mean()) / 1e3
    row["parts_sum_ok"] = bool(np.all(sum(d[p] for p in PARTS) == lat))
    return row
