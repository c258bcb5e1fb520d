"""Machines from Python: load a config, schedule work, run, read records.

    sys = kernbench.System.load(set={"system.sips.w": 1})      # default config
    sys.dma("read", "sip0.cube0.pe0", "sip0.cube1.hbm_ctrl.pe3", 16384)
    sys.run()
    df = sys.transfers_df()      # one row per transfer, with the latency breakdown

The C++ System does the work; this wrapper adds config lookup, ``set=``
dicts and pandas views.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable, Mapping

from kernbench import _core
from kernbench._core import ConfigError
from kernbench.args import I32, NODE, Ints, Optional, Real, Text, Whole, checked
from kernbench.trace import interval_trace

DEFAULT_CONFIG = "topology.yaml"
#: The four parts of a transfer's (a DMA op's) latency, in the records and in a trace's ``args``.
LATENCY_PARTS = ("overhead_ps", "transmission_ps", "drain_ps", "queuing_ps")


def config_dirs() -> list[Path]:
    """Where named configs are looked up: $KERNBENCH_CONFIGS, the installed package, the source tree."""
    dirs = []
    if os.environ.get("KERNBENCH_CONFIGS"):
        dirs.append(Path(os.environ["KERNBENCH_CONFIGS"]))
    here = Path(__file__).resolve().parent
    dirs.append(here / "configs")                 # installed wheel
    dirs.append(here.parent.parent / "configs")   # source tree (editable install, tests)
    return dirs


INCLUDE_PATH_VAR = "KERNBENCH_INCLUDE_PATH"

def include_dirs(extra: str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | None = None) -> list[str]:
    """The folders a config's ``include:`` may read besides the config's own folder tree.

    ``extra`` (one folder or several) first, then ``$KERNBENCH_INCLUDE_PATH``
    (folders separated by ``os.pathsep``; ``kernbench --include-dir DIR`` adds
    to it) and the packaged configs folders (config_dirs()). An include that
    resolves (symlinks followed) anywhere else is refused, unread.
    """
    if extra is None:
        extras: list = []
    elif isinstance(extra, (str, os.PathLike)):
        extras = [extra]
    else:
        extras = list(extra)
    env = [d for d in os.environ.get(INCLUDE_PATH_VAR, "").split(os.pathsep) if d]
    return [os.fspath(d) for d in extras] + env + [str(d) for d in config_dirs()]


_include_dirs = include_dirs  # the methods below take a keyword of the same name


def _seed(seed: Any) -> int:
    """A machine's seed: an integer 0 .. 2**63 - 1 (runner.check_seed's rule), else ConfigError naming it."""
    from kernbench.args import check_seed

    return check_seed(seed, "seed")


def config_path(name_or_path: str | os.PathLike | None = None) -> Path:
    """Resolve a config: an existing path as given, else a name in config_dirs()."""
    name = Path(name_or_path) if name_or_path is not None else Path(DEFAULT_CONFIG)
    if name.exists():
        return name
    for d in config_dirs():
        if (d / name).exists():
            return d / name
    searched = ", ".join(str(d) for d in config_dirs())
    raise ConfigError(f"{name}: no such config file (also looked in: {searched})")


def override_pairs(set: Mapping[str, Any] | Iterable[str] | None) -> list[tuple[str, str]]:
    """Config overrides as (path, value text) pairs, the form the core takes: a mapping's items, or
    ``PATH=VALUE`` texts (one without ``=`` is a ConfigError); booleans as true/false."""
    if set is None:
        return []
    if isinstance(set, Mapping):
        items = set.items()
    else:
        items = []
        for text in set:
            key, sep, value = str(text).partition("=")
            if not sep:
                raise ConfigError(f"--set {text!r}: expected PATH=VALUE, e.g. system.sips.w=4")
            items.append((key.strip(), value.strip()))
    out = []
    for k, v in items:
        if isinstance(v, bool):
            v = "true" if v else "false"
        out.append((str(k), str(v)))
    return out


class System:
    """A machine ready to run: config, graph, simulation and fabric (see ``_core.System``)."""

    def __init__(self, core: _core.System, source: str = "<string>"):
        self._core = core
        self.source = source

    @classmethod
    def load(cls, path: str | os.PathLike | None = None, *, set=None, seed: int = 1,
             include_dirs=None) -> "System":
        """Load a YAML config (default: the packaged ``topology.yaml``) with overrides.

        Its includes may read its own folder tree and the folders of
        ``include_dirs`` (one folder or a list), ``$KERNBENCH_INCLUDE_PATH`` and the
        packaged configs (see :func:`include_dirs`).
        """
        p = config_path(path)
        out = cls(_core.System.load(str(p), override_pairs(set), _seed(seed), _include_dirs(include_dirs)), str(p))
        out._twin = lambda: cls.load(path, set=set, seed=seed, include_dirs=include_dirs)
        return out

    @classmethod
    def from_yaml(cls, text: str, *, source: str = "<string>", set=None, seed: int = 1,
                  include_dirs=None) -> "System":
        """Build from YAML text (relative includes resolve against, and stay inside, the current folder,
        or ``source``'s folder when it names one; ``include_dirs`` as for load())."""
        dirs = _include_dirs(include_dirs)
        out = cls(_core.System.from_yaml(text, source, override_pairs(set), _seed(seed), dirs), source)
        out._twin = lambda: cls.from_yaml(text, source=source, set=set, seed=seed, include_dirs=include_dirs)
        return out

    def twin(self) -> "System":
        """A fresh machine of the same config, overrides and seed (its own clock and fabric): for a run that
        needs two simulations at once (kernbench.serving's request loop beside the iterations it prices)."""
        make = self.__dict__.get("_twin")
        if make is None:
            raise _core.UsageError("twin: this System was not made by System.load or System.from_yaml")
        return make()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._core, name)

    def __repr__(self) -> str:
        return f"<kernbench.System {self.source}: {self._core.num_nodes} nodes, {self._core.fabric_model} model>"

    # ---- the PEs and their relations --------------------------------------------
    @property
    def target(self) -> str:
        """How workloads run on this machine's PEs (``pe.target``): ``"sip"`` (tiles through the PE engines)
        or ``"gpu"`` (kernels on an SM array; docs/gpu-target.md)."""
        return _core.exec_target(self._core)

    def layout(self) -> dict:
        """The PE relations kernels read (docs/concepts.md): ``ranks`` (PE names in rank order),
        ``memories`` (each rank's memory node, or None), per rank its ``package``, ``group`` and ``pe``
        index, the hierarchy (``packages``, ``package_topology``, ``groups``, ``pes_per_group``,
        ``declared``) and the rank ``grid`` (or None). The same on generated and explicit machines."""
        return self._core.layout()

    def pes(self, group: int | None = None, *, package: int | None = None) -> list[str]:
        """PE names in rank order; ``group=`` keeps one group (cube) index, ``package=`` one package (SIP)."""
        lay = self._core.layout()
        return [name for name, p, g in zip(lay["ranks"], lay["package"], lay["group"])
                if (group is None or g == group) and (package is None or p == package)]

    def memory_of(self, pe) -> str | None:
        """The name of the node holding `pe`'s own memory (its HBM slice), or None for a node of the machine
        that has none; a name the machine lacks is a TopologyError."""
        lay = self._core.layout()
        name = pe if isinstance(pe, str) else self._core.node_name(pe)
        for r, m in zip(lay["ranks"], lay["memories"]):
            if r == name:
                return m
        self._core.node_id(name)  # a name the machine lacks: TopologyError naming it (and some that exist)
        return None

    def explicit_graph(self) -> dict:
        """This machine as an explicit ``graph:`` section (nodes, edges, layout) in plain data: dump it
        with yaml.safe_dump under ``graph:`` (with this config's other sections) to get the same machine
        built from a graph."""
        return self._core.explicit_graph()

    # ---- programs ---------------------------------------------------------------
    def program(self, name: str = "program"):
        """A new Program bound to this machine (nodes by name)."""
        from kernbench.program import Program

        return Program(self, name)

    def run_program(self, program):
        """Run a Program (a kernbench.Program or a _core.Program) to completion; returns a RunResult.

        A kernbench.Program runs on the System it was built on (its node ids are that machine's): another
        machine's is refused, unless it has the very same nodes (a twin(), or the same config loaded again)."""
        from kernbench.program import Program, RunResult

        if isinstance(program, Program):
            if program.system is not self and program.system._core is not self._core \
                    and list(program.system._core.nodes()["name"]) != list(self._core.nodes()["name"]):
                raise _core.UsageError(
                    f"run_program: program {program.name!r} was built on {program.system!r}, not on this machine "
                    f"{self!r}: its node ids would land on other PEs (build it with this System's program())")
            core = program._core
        elif isinstance(program, _core.Program):
            core = program
        else:
            raise _core.UsageError(f"run_program: program must be a kernbench.Program, got {type(program).__name__}")
        return RunResult(_core.run_program(self._core, core), self, program=core)

    # ---- checked fronts of the core's calls (kernbench.args: a wrong argument is a UsageError naming it) ----
    @checked("System.transfer", tag=I32)
    def transfer(self, src, dst, bytes, at_ps=None, tag=0, address=0) -> int:
        """Schedule a transfer of `bytes` from `src` to `dst` (at `at_ps`, default now); returns its id."""
        return self._core.transfer(src, dst, bytes, at_ps, tag, address)

    @checked("System.dma", tag=I32)
    def dma(self, kind, issuer, memory, bytes, at_ps=None, tag=0, address=0) -> int:
        """Schedule a DMA ``read`` or ``write`` of `bytes` by `issuer` on `memory`; returns its index in dma_ops()."""
        return self._core.dma(kind, issuer, memory, bytes, at_ps, tag, address)

    @checked("System.traffic", pattern=Text(), endpoints=Ints(NODE), offered_gbps=Real(None, finite=False),
             packet_bytes=Whole(), start_ps=Whole(), stop_ps=Whole(), injection=Text(), hotspot=Optional(NODE),
             hotspot_fraction=Real(None, finite=False), grid_w=I32, tag=I32, cycle_ps=Optional(Whole()))
    def traffic(self, pattern, endpoints, offered_gbps, packet_bytes, start_ps, stop_ps, injection="poisson",
                hotspot=None, hotspot_fraction=0.5, grid_w=0, tag=0, cycle_ps=None) -> int:
        """Start a synthetic traffic generator over `endpoints` (see ``_core.System.traffic``)."""
        return self._core.traffic(pattern, endpoints, offered_gbps, packet_bytes, start_ps, stop_ps, injection,
                                  hotspot, hotspot_fraction, grid_w, tag, cycle_ps)

    @checked("System.run")
    def run(self, until_ps=None) -> None:
        """Run the simulation (to `until_ps`, default until nothing is left)."""
        return self._core.run(until_ps)

    @checked("System.set_limits", max_events=Optional(Whole()), max_time_ps=Optional(Whole()))
    def set_limits(self, max_events=None, max_time_ps=None) -> None:
        """Stop a run past `max_events` events or `max_time_ps` (None: no limit)."""
        return self._core.set_limits(max_events, max_time_ps)

    @checked("System.node_id", name=Text())
    def node_id(self, name) -> int:
        """The id of the node named `name`."""
        return self._core.node_id(name)

    @checked("System.node_name", id=NODE)
    def node_name(self, id) -> str:
        """The name of node `id` (a name is returned as it is, once found)."""
        return self._core.node_name(id)

    @checked("System.route")
    def route(self, src, dst) -> list[str]:
        """Node names of the route from `src` to `dst`."""
        return self._core.route(src, dst)

    @checked("System.route_info")
    def route_info(self, src, dst) -> dict:
        """Route details (nodes, channels, hops, bottleneck) from `src` to `dst`."""
        return self._core.route_info(src, dst)

    @checked("System.route_paths")
    def route_paths(self, src, dst) -> list[dict]:
        """Every path the router may take from `src` to `dst` (route_info of each)."""
        return self._core.route_paths(src, dst)

    @checked("System.max_min_rates", paths=Ints(Ints(NODE)))
    def max_min_rates(self, paths) -> list[float]:
        """Exact max-min fair rates (B/s) of concurrent (src, dst) paths."""
        for i, p in enumerate(paths):
            if len(p) != 2:
                raise _core.UsageError(f"System.max_min_rates: paths[{i}] must be a (src, dst) pair, got {p!r}")
        return self._core.max_min_rates([tuple(p) for p in paths])

    # ---- traces ---------------------------------------------------------------
    def to_trace(self, label: str | None = None) -> dict[str, Any]:
        """The Trace Event JSON of the DMA ops this System ran (one process per issuer, one track per
        concurrent op, the four-part latency breakdown in ``args``), or without any of its transfers (one
        process per source, one track per concurrent transfer; a spread transfer drawn once, as its parent).
        ValueError when it ran neither."""
        d = self.dma_ops()
        if len(d["issue_ps"]):
            return self._dma_trace(d, label)
        return self._transfer_trace(self.transfers(), label)

    def _dma_trace(self, d, label: str | None) -> dict[str, Any]:
        start = [int(x) for x in d["issue_ps"]]
        end = [int(x) for x in d["end_ps"]]
        parts = [p for p in LATENCY_PARTS if p in d]

        def event(i):
            kind = str(d["kind"][i]) if "kind" in d else "dma"
            args = {"memory": self.node_name(int(d["memory"][i])), "bytes": int(d["bytes"][i]),
                    "issue_ps": start[i], "end_ps": end[i]}
            args.update({p: int(d[p][i]) for p in parts})
            return f"{kind} {args['memory']}", kind, args

        return interval_trace(self, label, "dma", [int(x) for x in d["issuer"]], start, end, "dma", event)

    def _transfer_trace(self, t, label: str | None) -> dict[str, Any]:
        if len(t["issue_ps"]) == 0:
            raise ValueError("this System ran no DMA ops and no transfers: nothing to trace")
        start = [int(x) for x in t["issue_ps"]]
        end = [int(x) for x in t["end_ps"]]

        def event(i):
            dst = self.node_name(int(t["dst"][i]))
            args = {"dst": dst, "bytes": int(t["bytes"][i]), "hops": int(t["hops"][i]), "issue_ps": start[i],
                    "end_ps": end[i]}
            args.update({p: int(t[p][i]) for p in LATENCY_PARTS})
            return f"-> {dst}", "transfer", args

        if "parent" in t:  # the stripes of a spread transfer are drawn as their parent, once
            keep = [i for i in range(len(start)) if int(t["parent"][i]) < 0]
            t = {k: [v[i] for i in keep] for k, v in t.items()}
            start, end = [start[i] for i in keep], [end[i] for i in keep]
        return interval_trace(self, label, "transfers", [int(x) for x in t["src"]], start, end, "transfers", event)

    # ---- pandas views ---------------------------------------------------------
    def _names(self, ids) -> list[str]:
        names = self._core.nodes()["name"]
        return [names[i] for i in ids]

    def transfers_df(self):
        """One row per transfer: endpoints by name, times and the four-part breakdown (ps)."""
        import pandas as pd

        df = pd.DataFrame(self._core.transfers())
        df.insert(2, "src_name", self._names(df["src"]))
        df.insert(4, "dst_name", self._names(df["dst"]))
        df["latency_ps"] = df["end_ps"] - df["issue_ps"]
        return df

    def dma_df(self):
        """One row per DMA op."""
        import pandas as pd

        df = pd.DataFrame(self._core.dma_ops())
        df["issuer_name"] = self._names(df["issuer"])
        df["memory_name"] = self._names(df["memory"])
        df["latency_ps"] = df["end_ps"] - df["issue_ps"]
        return df

    def nodes_df(self):
        import pandas as pd

        return pd.DataFrame(self._core.nodes())

    def channels_df(self):
        """One row per link direction, with bytes carried and busy time so far."""
        import pandas as pd

        df = pd.DataFrame(self._core.channels())
        df.insert(1, "src_name", self._names(df["src"]))
        df.insert(3, "dst_name", self._names(df["dst"]))
        return df
