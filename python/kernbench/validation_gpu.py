"""The GPU target's rows of the validation report (kernbench.validation): the H100 rows it is calibrated on,
fitted, each with what it was fitted on (declared beside the fitted values: kernbench.provenance) and its
cross-validated error (configs/gpu.calibration.json, written by scripts/calibrate_gpu.sh), and the other NVIDIA presets' predictions from their datasheets, apart.
"""

from __future__ import annotations

from typing import Any

from kernbench.validation_rows import make_row

__all__ = ["GPU_DATA", "GPU_FITTED_ON", "GPU_PREDICTED", "GPU_PROBES", "gpu_calibration", "gpu_rows"]

GPU_DATA = "machines/h100.measured.yaml"
GPU_FITTED_ON = "machines/h100-8x-nvswitch.yaml"
#: The presets predicted from their datasheets with the H100's mechanism parameters (nvidia-gpu.yaml).
GPU_PREDICTED = ("h200-8x-nvswitch", "a100-8x-nvswitch", "l40s-8x-pcie")
#: What each preset is asked (measurement function, parameters, metric, unit, label).
GPU_PROBES = (
    ("gpu.gemm", {"m": 8192, "n": 8192, "k": 8192, "precision": "bf16"}, "tflops", "TFLOPS", "GEMM 8192^3 BF16"),
    ("gpu.gemm", {"m": 1024, "n": 1024, "k": 1024, "precision": "bf16"}, "tflops", "TFLOPS", "GEMM 1024^3 BF16"),
    ("gpu.gemm", {"m": 1, "n": 8192, "k": 8192, "precision": "fp16"}, "tflops", "TFLOPS",
     "GEMM 1 x 8192 x 8192 FP16"),
    ("gpu.stream", {"kernel": "copy"}, "bandwidth", "TB/s", "BabelStream copy (2^25 doubles)"),
    ("model.inference", {"model": "llama3-8b", "tp": 1, "batch": 8, "prompt": 32, "output": 128}, "latency", "ms",
     "LLaMA-3-8B latency, batch 8, 32 in / 128 out, TP 1"),
    ("gpu.nccl", {"bytes": 8, "ranks": 8}, "time", "us", "NCCL all-reduce, 8 B, 8 GPUs (auto)"),
    ("gpu.nccl", {"bytes": 1 << 30, "ranks": 8}, "busbw", "GB/s", "NCCL all-reduce busbw, 1 GiB, 8 GPUs (auto)"),
)


def gpu_calibration() -> dict[str, Any]:
    """configs/gpu.calibration.json (written by scripts/calibrate_gpu.sh and calibrate_nccl.sh): per fitted row
    its leave-one-group-out cross-validated error."""
    import json

    from kernbench.system import config_path

    return json.loads(config_path("gpu.calibration.json").read_text())


def gpu_rows(*, failures: list | None = None) -> list[dict[str, Any]]:
    """The H100 rows the GPU target is calibrated on (fitted, with their cross-validated error), then every other
    NVIDIA preset's answers to the same questions: predictions from its datasheet, no reference here (the
    measurements that judge them are held back)."""
    from kernbench.calibrate import REGISTRY, Context, check
    from kernbench.system import config_path

    rows: list[dict[str, Any]] = []
    try:
        cal = gpu_calibration()["rows"]
        h100 = config_path(GPU_FITTED_ON)
        result = check(h100, config_path(GPU_DATA), config=h100)
    except Exception as e:
        if failures is None:
            raise
        failures.append({"name": "gpu calibration rows", "error": f"{type(e).__name__}: {e}"})
        return rows
    for r in result["rows"]:
        # fitted or predicted, and on which parameters: what the preset declares beside its values (provenance)
        c = cal.get(r["id"])
        rows.append(make_row(source="gpu", group=f"GPU target, H100 SXM ({r['group']})", quantity=r["id"],
                             unit=r["unit"], status=r["role"], value=r["measured"],
                             model=r["model"], tolerance=r["tolerance"], fitted_on=", ".join(r["fitted_on"]),
                             cv_error=c["cv_error"] if c else None, error_text=r.get("failure") or "",
                             note=f"call: {r['call']}" if "call" in r else ""))
    for name in GPU_PREDICTED:
        for fn, params, metric, unit, label in GPU_PROBES:
            try:
                got = REGISTRY.get(fn).fn(Context(config=f"machines/{name}.yaml", sets={}), **params)[metric]
                err = ""
            except Exception as e:
                got, err = None, f"{type(e).__name__}: {e}"
                if failures is not None:
                    failures.append({"name": f"{name}: {label}", "error": err})
            rows.append({"source": "gpu", "group": f"GPU target, {name} (predictions from its datasheet)",
                         "quantity": label, "unit": unit, "status": "predicted", "reference": None,
                         "reference_text": "held back", "check": "point", "model": got, "error": None,
                         "tolerance": None, "verdict": "prediction" if got is not None else "error",
                         "fitted_on": "", "cv_error": None, "note": err})
    return rows
