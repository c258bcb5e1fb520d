#!/usr/bin/env python3
"""gpu_figures.py -- the figures of docs/gpu-target.md, from the model (run after a change to the GPU target):

    python3 scripts/gpu_figures.py [OUT_DIR]      (default docs/img; a few seconds)

gpu-gemm-vs-m.png: GEMM TFLOPS against M at N = K = 8192 (BF16) on the four NVIDIA presets, with the measured
H100 skinny (FP16) and square points of configs/machines/h100.measured.yaml beside them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from kernbench.calibrate import REGISTRY, Context  # noqa: E402

PRESETS = ["h100-8x-nvswitch", "h200-8x-nvswitch", "a100-8x-nvswitch", "l40s-8x-pcie"]
MS = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192]
#: (M, TFLOPS) measured on H100 SXM at N = K = 8192 (configs/machines/h100.measured.yaml).
MEASURED = [(1, 2.30), (2, 4.63), (4, 9.26), (8192, 797.51)]


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    gemm = REGISTRY.get("gpu.gemm").fn
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    for preset in PRESETS:
        ctx = Context(config=f"machines/{preset}.yaml", sets={})
        tf = [gemm(ctx, m=m, n=8192, k=8192, precision="bf16")["tflops"] for m in MS]
        ax.plot(MS, tf, marker="o", ms=3, label=f"{preset} (model{'' if preset.startswith('h100') else ', predicted'})")
    ax.scatter([m for m, _ in MEASURED], [t for _, t in MEASURED], marker="x", color="k", zorder=5,
               label="H100 SXM measured (cuBLAS)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("M, with N = K = 8192")
    ax.set_ylabel("TFLOPS, calls back to back")
    ax.set_title("GEMM on the GPU target: weights read once, then tiles in waves")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path = out / "gpu-gemm-vs-m.png"
    fig.savefig(path, dpi=110)
    print(f"gpu_figures: wrote {path}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "docs" / "img")
