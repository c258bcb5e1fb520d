"""docs/k200.md's table of C1, C2, C3 and C5 predictions under each assumed alternative is the runs' table: it is
regenerated from kernbench.k200_predictions (the cases' own k200.run_variant, as the k200-cases bench runs them)
and compared line for line, so a model change that moves a prediction fails here until the docs follow."""
from __future__ import annotations

from pathlib import Path

from kernbench import k200_predictions as kp

ROOT = Path(__file__).resolve().parents[2]
BEGIN, END = "<!-- k200-predictions:begin -->", "<!-- k200-predictions:end -->"


def doc_table() -> str:
    text = (ROOT / "docs" / "k200.md").read_text()
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip()


def test_the_predictions_table_is_the_runs_table():
    """Every row of the table (case, variant, batch, alternative, items/s, ms, bound, critical path's largest
    share) is what the run gives now; each alternative applies to the cases it names and C4 is absent (it is
    calibration data, not a prediction)."""
    rows = kp.run()
    printed = doc_table().splitlines()
    assert printed == kp.markdown(rows).splitlines()
    assert {r["case"] for r in rows} == {"C1", "C2", "C3", "C5"}
    alts = {(r["case"], r["alternative"]) for r in rows}
    assert ("C1", "conv implicit") in alts and ("C3", "conv implicit") not in alts
    assert ("C3", "d2d wake high") in alts and ("C1", "framework 200 us") in alts


def test_the_alternatives_move_what_their_mechanism_reaches():
    """Each knob moves only the cases whose work it touches: C3 and C5 run no elementwise kernel or conv (the
    same figures under elementwise hbm); the D2D wake moves C3's solo variant, not its dual baseline."""
    rows = kp.run()
    get = {(r["case"], r["variant"], r["batch"], r["alternative"]): r["latency_ms"] for r in rows}
    for case, variant, batch in (("C3", "baseline", 32), ("C5", "baseline", 32)):
        assert get[(case, variant, batch, "elementwise hbm")] == get[(case, variant, batch, "baseline")]
    assert get[("C3", "baseline", 32, "d2d wake high")] == get[("C3", "baseline", 32, "baseline")]
    assert get[("C3", "solo (one die, D2D)", 32, "d2d wake high")] > get[("C3", "solo (one die, D2D)", 32, "baseline")]
    for b in (1, 8, 32):
        assert get[("C1", "baseline", b, "elementwise hbm")] < get[("C1", "baseline", b, "baseline")]
