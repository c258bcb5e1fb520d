"""The importers' pinned versions agree between pyproject.toml's extras and scripts/setup.sh (no torch needed)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_extras_pins_match_setup_sh():
    """The torch and onnx extras in pyproject.toml pin exactly the versions scripts/setup.sh installs, and CI
    installs those extras, so the traced op lists are reproducible."""
    py = (ROOT / "pyproject.toml").read_text()
    sh = (ROOT / "scripts" / "setup.sh").read_text()
    extras = dict(re.findall(r'^(torch|onnx) = \[(.*)\]$', py, flags=re.M))
    pins = set(re.findall(r'"([a-z]+==[0-9.]+)"', " ".join(extras.values())))
    assert pins == {"torch==2.13.0", "transformers==5.24.0", "onnx==1.23.2"}
    assert pins == set(re.findall(r'_PIN="([a-z]+==[0-9.]+)"', sh))
    assert "KERNBENCH_EXTRAS=torch,onnx scripts/setup.sh" in (ROOT / ".ci" / "run").read_text()
