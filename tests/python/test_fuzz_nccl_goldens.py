"""Fuzz the nccl-tests log reader and the golden-file reader (issue 31): a sound result, or one named error.

* ``kernbench.nccl.parse_log`` on generated logs (nccl-tests' layout with fields drawn from sound numbers,
  ``nan``, ``inf``, negatives, garbage and huge integers; lines dropped, duplicated or cut; bytes flipped) must
  either return a log whose every number is finite and >= 0 -- so ``compare`` and the JSON writer take it -- or
  raise ``NcclLogError`` whose message starts ``FILE:LINE:`` with a line of the file.
* ``kernbench.goldens.load_golden`` on mutations of a sound golden (a field replaced by any JSON value, NaN
  included, removed or added; keys given twice; text cut; a BOM) must either return a golden that compares
  equal to itself with every tolerance usable, or raise ``ConfigError`` naming the file.

Nothing is simulated, so every example takes milliseconds. Default: a short run (well under 20 s, fixed
seeds). ``KERNBENCH_FUZZ_SECONDS=60`` keeps fuzzing with fresh seeds for that long (``.ci/run`` does).
Findings so far (each fixed, each in tests/bad_inputs/cases_r3_nccl.yaml or ``test_known_findings`` below): a
``nan``/``inf``/negative field anywhere in a row, a bad last row taken for a row cut short, a size past
2^63 - 1, a relative error overflowing to inf (measured 5e-324 us), an ``inf`` golden value (1e999) "within"
any relative tolerance.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import time
from pathlib import Path

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kernbench import goldens, nccl  # noqa: E402
from kernbench._core import ConfigError  # noqa: E402
from kernbench.atomic_output import json_bytes  # noqa: E402
from kernbench.registry import get_bench  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SOUND_LOG = ROOT / "bad_inputs" / "nccl_r3" / "good_all_reduce.txt"
SOUND_GOLDEN = ROOT / "goldens" / "perf-phold.json"
MAX_SIZE = (1 << 63) - 1  # the largest size or count a row may give (kernbench.nccl.MAX_SIZE)
SETTINGS = dict(deadline=None, database=None, derandomize=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])

# ---- nccl-tests logs --------------------------------------------------------------------------------------------

_HEAD = ["# nccl-tests version 2.17.1 nccl-headers=22602 nccl-library=22602",
         "# Collective test starting: all_reduce_perf",
         "# nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20",
         "#", "# Using devices"]
_LEAD = ["size", "count", "type", "redop", "root"]
_GROUP = ["time", "algbw", "busbw", "#wrong"]


def _tokens() -> st.SearchStrategy[str]:
    floats = st.floats(allow_nan=True, allow_infinity=True)
    return st.one_of(
        st.floats(0, 1e4).map(lambda x: f"{x:.2f}"),
        st.integers(-5, 1 << 40).map(str),
        floats.map(repr),
        st.integers(-(10 ** 30), 10 ** 30).map(str),
        st.sampled_from(["nan", "NaN", "-nan", "inf", "-inf", "Infinity", "1e999", "-1e999", "5e-324", "N/A", "-",
                         "0", "-0", "0.00", "-0.00", "1_000", "+5", "٣", "0x10", "abc", "", "1e308", "#", "N/A",
                         "9" * 40]))


@st.composite
def _logs(draw) -> str:
    ranks = draw(st.integers(0, 10))
    lead = _LEAD if draw(st.booleans()) else _LEAD[:3]  # old versions print no redop/root
    groups = draw(st.integers(1, 2))
    lines = list(_HEAD)
    lines += [f"#  Rank {r} Group  0 Pid 4{r} on host device {r} [0000:18:00] NVIDIA H100" for r in range(ranks)]
    lines.append("#  " + "  ".join(lead + _GROUP * groups))
    lines.append("#  (B) (elements)" + "  (us)  (GB/s)  (GB/s)" * groups)
    for size in draw(st.lists(st.integers(0, 1 << 34), min_size=0, max_size=6)):
        good = [str(size), str(size // 4), "float", "sum", "-1"][:len(lead)]
        good += ["13.55", "0.60", "1.05", "0"] * groups
        for i in draw(st.lists(st.integers(0, len(good) - 1), max_size=3)):
            good[i] = draw(_tokens())
        lines.append("  ".join(t for t in good if t != "") if draw(st.booleans()) else "  " + "  ".join(good))
    footer = ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {draw(_tokens())}", "#"]
    lines += footer[:draw(st.integers(0, 3))]
    for _ in range(draw(st.integers(0, 2))):  # a line dropped, duplicated or replaced by noise
        if not lines:
            break
        i = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["drop", "dup", "noise"]))
        if action == "drop":
            del lines[i]
        elif action == "dup":
            lines.insert(i, lines[i])
        else:
            lines[i] = draw(st.text(max_size=30))
    text = "\n".join(lines) + "\n"
    if draw(st.booleans()):
        text = text[:draw(st.integers(0, len(text)))]  # a log cut short
    return text


def _check_log(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    n_lines = max(1, len(data.decode("utf-8", errors="replace").splitlines()))
    try:
        log = nccl.parse_log(path)
    except nccl.NcclLogError as e:
        m = re.match(rf"{re.escape(str(path))}:(\d+): ", str(e))
        assert m, f"the error does not start FILE:LINE: {e}"
        assert 1 <= int(m.group(1)) <= n_lines, f"line {m.group(1)} of a {n_lines}-line file: {e}"
        return
    assert log.rows, "a log without rows was accepted"
    for r in log.rows:
        assert 0 <= r.size <= MAX_SIZE and 0 <= r.count <= MAX_SIZE, r
        for g in r.groups:
            for k in ("time_us", "algbw", "busbw", "wrong"):
                v = g[k]
                assert v is None or (math.isfinite(v) and v >= 0), (k, v, r.line)
        assert r.time_us is not None and r.time_us >= 0
    assert log.avg_busbw is None or (math.isfinite(log.avg_busbw) and log.avg_busbw >= 0)
    # the comparison of any such log with any sound model is JSON (no NaN or inf reaches the writer)
    model = [{"size": r.size, "time_us": 10.0 + r.size * 1e-6, "busbw": 100.0} for r in log.rows]
    json_bytes({"rows": nccl.compare(log, model)})


def _fuzz_logs(tmp: Path, examples: int, at_seed: int) -> None:
    @seed(at_seed)
    @settings(max_examples=examples, **SETTINGS)
    @given(_logs(), st.one_of(st.none(), st.tuples(st.integers(0, 4000), st.binary(min_size=1, max_size=4))))
    def run(text, flip):
        data = text.encode()
        if flip is not None and data:  # bytes replaced (a binary or damaged file)
            at = flip[0] % len(data)
            data = data[:at] + flip[1] + data[at + len(flip[1]):]
        _check_log(tmp / "log.txt", data)

    run()


def test_fuzz_nccl_log_reader(tmp_path):
    """Generated nccl-tests logs (seeded; longer with KERNBENCH_FUZZ_SECONDS) parse to finite numbers >= 0 that
    compare and JSON take, or are refused with NcclLogError naming the file and a line of it."""
    budget = float(os.environ.get("KERNBENCH_FUZZ_SECONDS", "0") or 0)
    _fuzz_logs(tmp_path, examples=200, at_seed=31)
    deadline = time.monotonic() + budget
    n = 1
    while time.monotonic() < deadline:
        _fuzz_logs(tmp_path, examples=300, at_seed=31 + n)
        n += 1


# ---- golden files -----------------------------------------------------------------------------------------------

def _json_values() -> st.SearchStrategy:
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2 ** 70), 2 ** 70),
                        st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
                        st.sampled_from(["exact", "rel=1e-6", "rel=nan", "abs=-1", "rel=inf", "abs=0", "rel=",
                                         "64x1", "population"]))
    return st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=3),
                                                         st.dictionaries(st.text(max_size=6), inner, max_size=3)),
                        max_leaves=6)


def _paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, prefix + (i,))


@st.composite
def _goldens(draw) -> bytes:
    doc = json.loads(SOUND_GOLDEN.read_text())
    for _ in range(draw(st.integers(0, 3))):
        paths = [p for p in _paths(doc) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        parent = doc
        for k in path[:-1]:
            parent = parent[k]
        action = draw(st.sampled_from(["replace", "replace", "drop", "add"]))
        if action == "replace":
            parent[path[-1]] = draw(_json_values())
        elif action == "drop":
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.text(max_size=8))] = draw(_json_values())
        else:
            parent.append(draw(_json_values()))
    text = json.dumps(doc, indent=2)  # NaN and Infinity written as JSON's non-standard literals
    if draw(st.booleans()):
        text = text.replace('"64x4"', '"64x1"', 1)  # a key given twice (where it is a key)
    if draw(st.booleans()):
        text = text[:draw(st.integers(0, len(text)))]
    data = text.encode()
    if draw(st.booleans()):
        data = b"\xef\xbb\xbf" + data
    if draw(st.booleans()) and data:
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + draw(st.binary(min_size=1, max_size=3)) + data[at + 1:]
    return data


def _check_golden(path: Path, data: bytes, bench) -> None:
    path.write_bytes(data)
    try:
        golden = goldens.load_golden(path, bench) if bench is not None else goldens.load_golden(path)
    except ConfigError as e:
        assert str(path) in str(e), f"the error does not name the file: {e}"
        return
    assert goldens.compare(golden, copy.deepcopy(golden)) == []
    for name, row in golden["rows"].items():
        for m, v in row.items():
            spec = golden["tolerances"].get(m) or goldens.default_tolerance(v)
            assert goldens.within(v, v, spec), (name, m, v, spec)
    json_bytes(golden)  # a golden that loads can be written back


def _fuzz_goldens(tmp: Path, examples: int, at_seed: int) -> None:
    bench = get_bench("perf-phold")

    @seed(at_seed)
    @settings(max_examples=examples, **SETTINGS)
    @given(_goldens(), st.booleans())
    def run(data, with_bench):
        _check_golden(tmp / "perf-phold.json", data, bench if with_bench else None)

    run()


def test_fuzz_golden_reader(tmp_path):
    """Mutated golden files (seeded; longer with KERNBENCH_FUZZ_SECONDS) load to goldens that compare equal to
    themselves with usable tolerances, or are refused with ConfigError naming the file."""
    budget = float(os.environ.get("KERNBENCH_FUZZ_SECONDS", "0") or 0)
    _fuzz_goldens(tmp_path, examples=150, at_seed=31)
    deadline = time.monotonic() + budget
    n = 1
    while time.monotonic() < deadline:
        _fuzz_goldens(tmp_path, examples=300, at_seed=31 + n)
        n += 1


def test_the_sound_inputs_pass_the_checks(tmp_path):
    """The unmutated log and golden the fuzzers start from pass their checks (so a failure is the mutation's)."""
    _check_log(tmp_path / "log.txt", SOUND_LOG.read_bytes())
    assert len(nccl.parse_log(tmp_path / "log.txt").rows) == 4
    _check_golden(tmp_path / "perf-phold.json", SOUND_GOLDEN.read_bytes(), get_bench("perf-phold"))
    assert goldens.load_golden(tmp_path / "perf-phold.json")["bench"] == "perf-phold"


@pytest.mark.parametrize("row", [
    "  2097152  524288  float  sum  -1  5e-324  89.29  156.26  0",      # a relative error that overflows
    "  2097152  524288  float  sum  -1  -0.00  89.29  156.26  0",       # negative zero: a zero
    "  2097152  524288  float  sum  -1  23.49  89.29  156.26  -1",      # a negative #wrong
    "  1_000  250  float  sum  -1  23.49  89.29  156.26  0",            # not a size nccl-tests prints
    "  ٣  250  float  sum  -1  23.49  89.29  156.26  0",                # a digit, but not an ASCII one
])
def test_known_findings(tmp_path, row):
    """Rows the fuzzer found or that sit on its edges: each is refused at its line or reads as finite numbers."""
    lines = SOUND_LOG.read_text().splitlines()
    lines[18] = row
    _check_log(tmp_path / "log.txt", ("\n".join(lines) + "\n").encode())
