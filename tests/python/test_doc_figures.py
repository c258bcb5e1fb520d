"""Figures in docs/ that come from a run are checked against that run: the GQA latency tables of docs/gqa.md
against `kernbench run --bench milestone-1h-gqa` at its default size, each number within its printed rounding."""
from __future__ import annotations

import csv
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LABELS = {"prefill": {"128": 128, "512": 512, "2048": 2048, "8192": 8192},
          "decode": {"8k": 8192, "32k": 32768, "128k": 131072}}


def doc_tables(text: str) -> dict[tuple[str, int, str], str]:
    """{(phase, sweep point, case): printed latency} of the two tables after 'Prefill, T_q = S_kv' and 'Decode'."""
    out = {}
    for phase, heading in (("prefill", "Prefill, T_q = S_kv; latency in us:"), ("decode", "Decode, T_q = 1; latency in us:")):
        block = text.split(heading, 1)[1].split("\n\n", 2)[1]
        for line in block.splitlines()[2:]:
            cells = [c.strip() for c in line.strip("|").split("|")]
            for case, value in zip("1234", cells[1:]):
                out[(phase, LABELS[phase][cells[0]], case)] = value
    return out


def within_rounding(printed: str, value: float) -> bool:
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    return abs(float(printed) - value) <= 0.5 * 10 ** -decimals + 1e-9


def test_gqa_tables_match_the_bench(cli, tmp_path):
    """Every number of docs/gqa.md's prefill and decode latency tables (28 points) is the default run's latency
    in us, within the rounding it is printed with; the doc's "28 points" is the run's count."""
    cli("run", "--bench", "milestone-1h-gqa", "--out", str(tmp_path / "gqa"))
    with (tmp_path / "gqa" / "gqa.csv").open() as f:
        rows = list(csv.DictReader(f))
    run = {(r["phase"], int(r["t_q"] if r["phase"] == "prefill" else r["s_kv"]), r["case"]): float(r["latency_ns"]) / 1e3
           for r in rows}
    text = (ROOT / "docs" / "gqa.md").read_text()
    printed = doc_tables(text)
    assert len(printed) == 28 == len(run)
    assert re.search(r"\b28 points\b", text)
    wrong = {k: (v, round(run[k], 3)) for k, v in printed.items() if not within_rounding(v, run[k])}
    assert wrong == {}, "docs/gqa.md is stale (printed, run): " + repr(wrong)
