"""Issue 31 (reliability round 3), the Python program / collective API: families 6 and 13.

Family 6: op ids, Handles and Programs carry their owner -- another Program's handle in ``deps`` is refused
naming both programs, a Program runs only on a machine with its own System's nodes, and ``pes=[]`` is an
error (None: every PE) in Program collectives as in kernbench.ccl. Family 13: out-of-range or mistyped
arguments are a UsageError naming the method, the argument and the value (kernbench.args, the one checker),
never pybind's "incompatible function arguments"; pe_dma.scenarios refuses a SIP the machine lacks. The CLI
side (bench parameters past the machine) is tests/bad_inputs/cases_r3_api.yaml.
"""

from __future__ import annotations

import numpy as np
import pytest

import kernbench
from kernbench import ccl
from kernbench._core import ConfigError, UsageError
from kernbench.pe_dma import scenarios

ONE_SIP = {"system.sips.w": 1, "system.sips.h": 1}


@pytest.fixture(scope="module")
def system():
    return kernbench.System.load(set=ONE_SIP)


@pytest.fixture(scope="module")
def pes(system):
    return system.pes()


def _hbm(pe: str) -> str:
    return pe.replace(".pe", ".hbm_ctrl.pe")


def _exact(excinfo, error, *words):
    assert type(excinfo.value) is error, f"{type(excinfo.value).__name__}: {excinfo.value}"
    text = str(excinfo.value)
    for w in words:
        assert w in text, f"{w!r} not in {text!r}"


# ---- family 6: handles and programs carry their owner --------------------------------------------------------

def _two_programs(system, pes):
    """Program A: 3 DMAs then a 4-PE all-reduce (its handle's sinks are op ids B also has); B: 200 DMAs."""
    a = system.program("A")
    for _ in range(3):
        a.dma(pes[0], _hbm(pes[0]), pes[0], 4096)
    h = a.all_reduce(pes[:4], 4096)
    b = system.program("B")
    for _ in range(200):
        b.dma(pes[1], _hbm(pes[1]), pes[1], 4096)
    assert max(h.sinks) < len(b)  # before the fix the handle bound silently to B's ops
    return a, h, b


def test_handle_of_another_program_is_refused(system, pes):
    """The reproducer: a Handle from Program A in Program B's deps (whose op ids B also has) is a UsageError naming
    both programs, and B is left as it was."""
    a, h, b = _two_programs(system, pes)
    n = len(b)
    with pytest.raises(UsageError) as e:
        b.dma(pes[2], _hbm(pes[2]), pes[2], 4096, deps=[h])
    _exact(e, UsageError, "program 'A'", "not of program 'B'", "all_reduce")
    assert len(b) == n


def test_op_id_of_another_program_is_refused(system, pes):
    """Variant: a plain op id returned by A's dma (an int that knows its Program) in B's deps, in B.depend and in
    B.free is refused naming both programs; B's own ids and bare ints still work."""
    a, _, b = _two_programs(system, pes)
    op_a = a.dma(pes[0], _hbm(pes[0]), pes[0], 64)
    alloc_a = a.alloc(pes[0], 64)
    for call in (lambda: b.compute(pes[1], 1e3, deps=[op_a]),
                 lambda: b.all_reduce(pes[:2], 64, deps=[op_a]),
                 lambda: b.depend(5, op_a),
                 lambda: b.free(alloc_a)):
        with pytest.raises(UsageError) as e:
            call()
        _exact(e, UsageError, "program 'A'", "not of program 'B'")
    mine = b.compute(pes[1], 1e3, deps=[3])
    b.compute(pes[1], 1e3, deps=[mine, 4])
    assert isinstance(mine, int) and mine == len(b) - 2


def test_program_runs_only_on_its_own_machine(system, pes):
    """The reproducer: a Program built on one System run on another (other nodes) is a UsageError naming the
    program and both machines; on its own System it runs."""
    prog = system.program("mine")
    prog.dma(pes[0], _hbm(pes[0]), pes[0], 4096)
    other = kernbench.System.load(set={"system.sips.w": 2, "system.sips.h": 1})
    with pytest.raises(UsageError) as e:
        other.run_program(prog)
    _exact(e, UsageError, "run_program: program 'mine' was built on", "433 nodes", "866 nodes", "other PEs")
    assert prog.run().makespan_ns > 0


def test_program_on_a_twin_machine_runs_the_same(system, pes):
    """Variant: the same config loaded again (same nodes, same ids) is the same machine: the Program runs there with
    the same makespan; a non-Program is refused naming its type."""
    prog = system.program("twin")
    prog.dma(pes[0], _hbm(pes[0]), pes[0], 4096)
    twin = kernbench.System.load(set=ONE_SIP)
    assert twin.run_program(prog).makespan_ps == system.twin().run_program(prog).makespan_ps
    with pytest.raises(UsageError) as e:
        twin.run_program("prog")
    _exact(e, UsageError, "run_program: program must be a kernbench.Program", "str")


@pytest.mark.parametrize("call", ["all_reduce", "broadcast", "reduce_scatter", "all_gather", "alltoall"])
def test_program_collective_on_no_pes_is_refused(system, call):
    """The reproducer (and every collective): prog.all_reduce([], 4096) is a UsageError 'pes is an empty list', as
    ccl.all_reduce(pes=[]) and docs/python-api.md say; nothing is appended."""
    prog = system.program("p")
    with pytest.raises(UsageError) as e:
        getattr(prog, call)([], 4096)
    _exact(e, UsageError, f"p: Program.{call}", "pes is an empty list", "None")
    assert len(prog) == 0


def test_empty_pes_refused_none_is_every_pe(system, pes):
    """Variant: gemm on pes=() and ccl.all_reduce(pes=[]) are refused too; pes=None still means every PE."""
    prog = system.program("p")
    with pytest.raises(UsageError) as e:
        prog.gemm((), 64, 64, 64)
    _exact(e, UsageError, "Program.gemm", "pes is an empty list")
    with pytest.raises(UsageError) as e:
        ccl.all_reduce(system, 4096, pes=[])
    _exact(e, UsageError, "pes is an empty list")
    h = prog.all_reduce(None, 64)
    assert h.program is prog and f"on {len(pes)} PEs" in h.name


# ---- family 13: one argument checker, before the pybind call ---------------------------------------------------

def _calls(system, pes):
    """(call, the words its error must hold) for arguments that reached pybind as TypeError before the fix."""
    pe0, pe1 = pes[0], pes[1]
    prog = system.program("p")
    return [
        (lambda: prog.gemm([pe0], 2**70, 64, 64), ("Program.gemm", "m = 1180591620717411303424", "out of range")),
        (lambda: prog.gemm([pe0], 64, 1.5, 64), ("Program.gemm", "n must be a whole number", "1.5")),
        (lambda: prog.gemm([pe0], 64, 64, None), ("Program.gemm", "k must be an integer", "None")),
        (lambda: prog.gemm([pe0], 64, 64, 64, pinned="x"), ("Program.gemm", "pinned must be True or False", "'x'")),
        (lambda: prog.gemm([pe0], 64, 64, 64, buffers=-1), ("Program.gemm", "buffers = -1", "negative")),
        (lambda: prog.gemm([None], 64, 64, 64), ("Program.gemm", "pes[0] must be a node name or id", "None")),
        (lambda: prog.attention("prefill", 1, 64, 64, kv_buffers=-1), ("Program.attention", "kv_buffers = -1")),
        (lambda: prog.attention("prefill", 2**40, 64, 64), ("Program.attention", "case = 1099511627776",
                                                           "out of range")),
        (lambda: prog.attention("prefill", 1, 64, 64, cubes=[None]), ("Program.attention", "cubes[0]")),
        (lambda: prog.attention(None, 1, 64, 64), ("Program.attention", "phase must be a text", "None")),
        (lambda: prog.send(pe0, pe1, 64, key=2**70), ("Program.send", "key = 1180591620717411303424")),
        (lambda: prog.recv(pe0, pe1, key="k"), ("Program.recv", "key must be an integer", "the string 'k'")),
        (lambda: prog.dma(-1, pe0, pe0, 64), ("Program.dma", "agent = -1", "out of range")),
        (lambda: prog.dma(pe0, pe0, pe0, 64, name=5), ("Program.dma", "name must be a text", "int 5")),
        (lambda: prog.dma(pe0, pe0, pe0, 64, tag=2**40), ("Program.dma", "tag = 1099511627776")),
        (lambda: prog.dma(pe0, pe0, pe0, 64, deps=5), ("Program.dma", "deps must be a list of op handles")),
        (lambda: prog.dma(pe0, pe0, pe0, 64, deps=[-1]), ("Program.dma", "deps[0] = -1", "not an op handle")),
        (lambda: prog.dma(pe0, pe0, pe0, 64, bogus=1), ("Program.dma", "unexpected keyword argument 'bogus'")),
        (lambda: prog.kernel(pe0, -5), ("Program.kernel", "duration_ps = -5", "negative")),
        (lambda: prog.kernel(pe0, 10, flops=float("inf")), ("Program.kernel", "flops must be finite")),
        (lambda: prog.composite(pe0, 2, [(pe0, pe0)]), ("Program.composite", "loads[0] must be a (src, dst, bytes)")),
        (lambda: prog.composite(pe0, 2, [(pe0, pe0, -1)]), ("Program.composite", "loads[0] bytes = -1",
                                                           "negative size")),
        (lambda: prog.composite(pe0, 2, 7), ("Program.composite", "loads must be a list")),
        (lambda: prog.all_reduce(pes[:2], 64, algorithm=None), ("Program.all_reduce", "algorithm must be a text")),
        (lambda: prog.all_reduce(pes[:2], 64, grid_w=2**70), ("Program.all_reduce", "grid_w = ")),
        (lambda: prog.depend(-1, 0), ("Program.depend", "op = -1", "not an op handle")),
        (lambda: kernbench.Program(None), ("Program: system must be a kernbench.System", "NoneType")),
        (lambda: kernbench.Program(system, name=3), ("Program: name must be a text", "int 3")),
        (lambda: ccl.all_reduce(system, 2**70), ("ccl.all_reduce", "bytes_per_pe = 1180591620717411303424",
                                                 "allowed: 0 .. 9223372036854775807")),
        (lambda: ccl.all_reduce(system, 64, grid=5), ("collective: grid must be a (w, h) pair", "5")),
        (lambda: ccl.all_reduce(system, 64, grid=("a", 2)), ("ccl.collective", "grid[0] must be an integer")),
        (lambda: ccl.all_reduce(system, 64, pes=[pe0, None]), ("ccl.all_reduce", "pes[1] must be a node")),
        (lambda: ccl.broadcast(system, 64, root=None), ("ccl.broadcast", "root must be an integer")),
        (lambda: ccl.collective(system, 5, 64), ("ccl.collective", "what must be a text", "int 5")),
        (lambda: ccl.all_reduce(object(), 64), ("system must be a kernbench.System", "object")),
        (lambda: system.route(None, pe0), ("System.route", "src must be a node name or id", "None")),
        (lambda: system.node_name(-3), ("System.node_name", "id = -3", "out of range")),
        (lambda: system.node_id(7), ("System.node_id", "name must be a text", "int 7")),
        (lambda: system.dma("read", pe0, _hbm(pe0), 64, tag=2**40), ("System.dma", "tag = 1099511627776")),
        (lambda: system.transfer(pe0, pe1, 64, at_ps="now"), ("System.transfer", "at_ps must be an integer")),
        (lambda: system.run(until_ps=1.5), ("System.run", "until_ps must be a whole number")),
        (lambda: system.max_min_rates([(pe0,)]), ("System.max_min_rates", "paths[0] must be a (src, dst) pair")),
        (lambda: system.traffic("uniform", [pe0, None], 1.0, 64, 0, 1000), ("System.traffic", "endpoints[1]")),
    ]


def test_bad_arguments_are_usage_errors_naming_method_and_argument(system, pes):
    """Mistyped or out-of-range arguments of Program, ccl and System methods (each gave pybind's TypeError
    "incompatible function arguments" before the fix) are a UsageError naming the method, the argument and the
    value."""
    for call, words in _calls(system, pes):
        with pytest.raises(UsageError) as e:
            call()
        _exact(e, UsageError, *words)
        assert "incompatible function arguments" not in str(e.value)


def test_good_arguments_still_pass(system, pes):
    """Integral floats and numpy integers are still taken (and passed on as ints), a lone PE counts as a list of
    one, and a tag label works: the checker refuses only what the call cannot take."""
    prog = system.program("ok")
    a = prog.dma(pes[0], _hbm(pes[0]), pes[0], 4096.0, tag="load")
    g = prog.gemm(pes[0], np.int64(64), 64.0, np.int32(64), deps=[a], buffers=np.uint8(2))
    prog.all_reduce(pes[:2], 1024.0, deps=[g], pieces=np.int64(2))
    prog.attention("decode", 1, 1, 256, cubes=(0,), tile_s=256.0)
    res = prog.run()
    assert res.makespan_ns > 0
    assert ccl.all_reduce(system, np.int64(4096), pes=pes[:2], grid=(2.0, 1)).ranks == 2


def test_pe_dma_scenarios_refuse_a_missing_sip(system):
    """pe_dma.scenarios(system, sip) on a SIP the machine lacks (the API side of `--set bench.sip=5`) is a
    UsageError naming sip, the value and the machine's range, not numpy's 'zero-size array'; a bool is refused."""
    from kernbench.pe_dma import sips_of

    assert sips_of(system) == [0]
    with pytest.raises(UsageError) as e:
        scenarios(system, 5)
    _exact(e, UsageError, "pe_dma.scenarios: sip = 5", "SIPs 0 .. 0")
    with pytest.raises(UsageError) as e:
        scenarios(system, True)
    _exact(e, UsageError, "sip must be an integer", "bool")
    assert scenarios(system, 0)[0][0] == "SAME_CUBE_PE_LOCAL"


def test_bench_sip_refused_before_running(tmp_path):
    """`kernbench run --bench pe-dma-perf --set bench.sip=5` on the default machine (the reproducer, through the
    CLI's main) exits 2 with one error line naming bench.sip, 5 and the range 0 .. 3, and writes no results."""
    import contextlib
    import io

    from kernbench import cli

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        try:
            rc = cli.main(["run", "--bench", "pe-dma-perf", "--quiet", "--out", str(tmp_path / "o"), "--set",
                           "bench.sip=5"])
        except SystemExit as e:
            rc = e.code
    assert rc == 2
    lines = err.getvalue().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kernbench: error: --set bench.sip=5: 5 is out of range"), lines
    assert "allowed: 0 .. 3" in lines[0]
    assert not (tmp_path / "o" / "sweep.json").exists()


def test_config_error_kept_for_meaning(system, pes):
    """The checker leaves meaning to the call: a zero GEMM dimension is still the core's ConfigError 'must be
    positive' and a NaN FLOP count the core's 'FLOPs must be >= 0'."""
    prog = system.program("p")
    with pytest.raises(ConfigError) as e:
        prog.gemm([pes[0]], 0, 64, 64)
    _exact(e, ConfigError, "must be positive")
    with pytest.raises(UsageError) as e:
        prog.compute(pes[0], float("nan"))
    _exact(e, UsageError, "FLOPs must be >= 0")


def test_op_ids_and_handles_pickle_as_plain_values(system, pes):
    """Op ids and Handles that now carry their Program still pickle (a sweep worker sends result rows to its
    owner): an op id as the plain int, a Handle without its Program."""
    import pickle

    prog = system.program("p")
    a = prog.dma(pes[0], _hbm(pes[0]), pes[0], 64)
    h = prog.all_reduce(pes[:2], 64, deps=[a])
    a2, h2 = pickle.loads(pickle.dumps((a, h)))
    assert type(a2) is int and a2 == a
    assert (h2.name, h2.first, h2.end, h2.sinks, h2.program) == (h.name, h.first, h.end, h.sinks, None)
