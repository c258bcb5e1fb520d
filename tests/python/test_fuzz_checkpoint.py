"""Fuzz the sweep checkpoint reader of ``--resume`` (issue 31): ``kernbench.sweeps.checkpoint.Checkpoint.read``.

Generated checkpoints -- good and wrong headers, records with fields missing, mistyped, repeated or nested deep,
random JSON values, huge numbers and NaN, lines cut short, blank lines, CRLF, garbage bytes, other encodings,
or only random bytes -- must load (every record as ``kernbench.sweeps`` writes one, the file then a header and
those records) or be refused with one ConfigError naming the file, the file left byte for byte as it was; never
another exception or a hang. And every checkpoint a sweep writes (start, then appends) reads back as its records.
Findings are reproduced in tests/python/test_r3_fuzz_findings.py.

Default: a short seeded run (a few seconds). ``KERNBENCH_FUZZ_SECONDS=30`` fuzzes that much longer (``.ci/run``).
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("hypothesis")
from hypothesis import strategies as st  # noqa: E402

from fuzz_support import encoded, fuzz, json_values, outcome  # noqa: E402
from kernbench._core import ConfigError  # noqa: E402
from kernbench.sweeps.checkpoint import (CHECKPOINT_FORMAT, CHECKPOINT_VERSION, MAX_DEPTH, RECORD_FIELDS,  # noqa: E402
                                         STATUSES, Checkpoint)

IDENTITY = {"target": "r3-nan-metric", "seed": 1, "config_hash": None, "sets": ["bench.bad=none"]}
HEADER = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION, "identity": IDENTITY}
PLUGINS = Path(__file__).resolve().parents[1] / "bad_inputs" / "outputs_r3" / "plugins"

_JSON = json_values()
ODD = ["NaN", "Infinity", "-1", "1e400", "1" * 400, "1" * 5000, "true", "1.0", '"x"', "[]", "{}", "null",
       "[" * 150 + "]" * 150, "[" * 600 + "]" * 600, "[" * 3000 + "]" * 3000, '"\\ud800"']


def _record(rnd: random.Random, i: int) -> dict:
    return {"key": json.dumps({"bench.n": str(i)}), "point": i, "params": {"bench.n": i},
            "status": rnd.choice(STATUSES), "error": "", "wall_s": rnd.choice([0.01, 0, 3, 1e-9]),
            "rows": [{"n": i, "latency_ns": rnd.choice([1.5, float("nan"), 2])}]}


@st.composite
def _line(draw, rnd: random.Random, obj: dict) -> str:
    """One JSON line of ``obj``, often intact, else with a field dropped, repeated or replaced by anything."""
    pick = rnd.randrange(10)
    if pick < 5 or not obj:
        return json.dumps(obj)
    key = rnd.choice(list(obj))
    if pick == 5:
        return json.dumps({k: v for k, v in obj.items() if k != key})
    if pick == 6:
        return json.dumps(obj)[:-1] + f", {json.dumps(key)}: {json.dumps(obj[key])}}}"  # a key twice
    if pick in (7, 8):
        value = rnd.choice(ODD)
    else:
        value = json.dumps(draw(_JSON))
    text = json.dumps({**obj, key: "@@"})
    return text.replace('"@@"', value, 1)


@st.composite
def _checkpoints(draw) -> bytes:
    """A checkpoint file's bytes: a header (good, wrong or missing), records, damage, an encoding; or bytes."""
    rnd = random.Random(draw(st.integers(0, 2**32)))  # a real PRNG: hypothesis's own draws lean to extremes
    kind = rnd.randrange(12)
    if kind == 0:
        return draw(st.binary(max_size=120))
    lines = []
    if kind != 1:
        header = dict(HEADER)
        if rnd.randrange(5) == 0:
            header[rnd.choice(list(header))] = rnd.choice([2, True, 1.0, None, "x", [], {"seed": 1},
                                                           {**IDENTITY, "seed": 2}])
        lines.append(draw(_line(rnd, header)))
    for i in range(rnd.choice([0, 1, 2, 3, 5])):
        lines.append(draw(_line(rnd, _record(rnd, i))) if rnd.randrange(8) else json.dumps(draw(_JSON)))
    if lines and rnd.randrange(4) == 0:  # cut short: the last line, or somewhere else
        at = rnd.randrange(len(lines))
        lines[at] = lines[at][:rnd.randrange(len(lines[at]) + 1)]
    if rnd.randrange(6) == 0:
        lines.insert(rnd.randrange(len(lines) + 1), rnd.choice(["", " ", "\t", "garbage", "5", "\x00\x01"]))
    text = rnd.choice(["\n", "\n", "\r\n"]).join(lines) + rnd.choice(["\n", "\n", ""])
    raw = draw(encoded(text)) if rnd.randrange(3) == 0 else text.encode()
    return raw


def _check(tmp: Path, raw: bytes, seen: list[int]) -> None:
    path = tmp / "checkpoint.jsonl"
    path.write_bytes(raw)
    records, err = outcome(lambda: Checkpoint(path, IDENTITY).read(), path, allowed=(ConfigError,))
    after = path.read_bytes()
    if err is not None:
        assert after == raw, f"{path}: refused ({err}) but the file was changed"
        return
    for key, rec in records.items():
        assert set(rec) >= set(RECORD_FIELDS) and rec["key"] == key and rec["status"] in STATUSES, rec
        assert isinstance(rec["point"], int) and not isinstance(rec["point"], bool) and rec["point"] >= 0, rec
        assert all(isinstance(r, dict) for r in rec["rows"]), rec
        assert 0 <= float(rec["wall_s"]) < float("inf"), rec
        assert _depth(rec) <= MAX_DEPTH, f"{path}: a record nested deeper than {MAX_DEPTH} loaded (the sweep recurses)"
    if raw:
        assert after.strip(), f"{path}: the bytes {raw[:40]!r} loaded as an empty checkpoint and were dropped"
        first = json.loads(after.split(b"\n", 1)[0])
        assert first == HEADER, f"{path}: loaded without our header: {first!r}"
        assert Checkpoint(path, IDENTITY).read() == records or _has_nan(records), "a second read differs"
        assert path.read_bytes() == after, "a second read rewrote the file"
    seen.append(len(records))


def _depth(obj, d: int = 1) -> int:
    if isinstance(obj, dict):
        return max([_depth(v, d + 1) for v in obj.values()], default=d)
    if isinstance(obj, list):
        return max([_depth(v, d + 1) for v in obj], default=d)
    return d - 1


def _has_nan(obj) -> bool:
    return "NaN" in json.dumps(obj)  # NaN != NaN: such records compare unequal to themselves


def test_fuzz_checkpoint_reading(tmp_path):
    """Generated checkpoints (good, damaged, cut, garbage, other encodings) load as well-formed records or are
    refused with a ConfigError naming the file, which is then unchanged; no other exception, no hang."""
    seen: list[int] = []
    fuzz(_checkpoints(), lambda raw: _check(tmp_path, raw, seen), examples=200, at_seed=8)
    assert any(seen), "no generated checkpoint with records ever loaded: the generator only makes errors"
    assert MAX_DEPTH >= 10  # a real record (4 deep) always fits


def test_cli_resume_refuses_a_fuzzed_checkpoint_and_leaves_it(tmp_path):
    """One CLI case: `kernbench sweep --resume` on a checkpoint whose record repeats a key exits 2 with one
    `kernbench: error:` line naming the file, and the file is left as it was."""
    out = tmp_path / "s"
    out.mkdir()
    ckpt = out / "checkpoint.jsonl"
    rec = json.dumps(_record(random.Random(1), 1))
    raw = (json.dumps(HEADER) + "\n" + rec[:-1] + ', "status": "failed"}\n').encode()
    ckpt.write_bytes(raw)
    proc = subprocess.run([sys.executable, "-m", "kernbench", "sweep", "--bench", "r3-nan-metric", "--bench-path",
                           str(PLUGINS), "--grid", "bench.n=1,2", "--set", "bench.bad=none", "--executor", "serial",
                           "--resume", "--out", str(out), "--quiet"], capture_output=True, text=True, timeout=120)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert lines[0].startswith("kernbench: error: ") and str(ckpt) in lines[0] and "twice" in lines[0], proc.stderr
    assert ckpt.read_bytes() == raw


@st.composite
def _written(draw) -> list[dict]:
    """Records as a sweep writes them: any key text, any status, rows of any JSON metrics (NaN included)."""
    keys = draw(st.lists(st.text(max_size=8), min_size=0, max_size=5))
    return [{"key": k, "point": i, "params": draw(st.dictionaries(st.text(max_size=4), _JSON, max_size=2)),
             "status": draw(st.sampled_from(STATUSES)), "error": draw(st.text(max_size=8)),
             "rows": draw(st.lists(st.dictionaries(st.text(max_size=4), _JSON, max_size=3), max_size=2)),
             "wall_s": draw(st.floats(0, 1e9))} for i, k in enumerate(keys)]


def test_fuzz_written_checkpoints_read_back(tmp_path):
    """Every checkpoint the sweep writes (start with some records, then one append per point) reads back as those
    records, the last of a key winning, and is not rewritten by the read."""
    path = tmp_path / "checkpoint.jsonl"

    def check(records):
        ck = Checkpoint(path, IDENTITY)
        cut = len(records) // 2
        ck.start(records[:cut])
        for r in records[cut:]:
            ck.append(r)
        before = path.read_bytes()
        got, err = outcome(ck.read, path, allowed=(ConfigError,))
        assert err is None, f"a written checkpoint was refused: {err}"
        want = {r["key"]: r for r in records}
        assert json.dumps(got, sort_keys=True) == json.dumps(want, sort_keys=True)
        assert path.read_bytes() == before

    fuzz(_written(), check, examples=60, at_seed=18, share=0.0)
