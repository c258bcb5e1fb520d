#!/usr/bin/env bash
# calibrate_gpu.sh -- the GPU target's calibration (configs/machines/nvidia-gpu.yaml), as committed.
#
#   scripts/calibrate_gpu.sh [OUT]      (default out/calibrate-gpu; a few minutes on 2 cores)
#
# Two runs of `kernbench calibrate` on configs/machines/h100.measured.yaml (H100 SXM: cuBLAS GEMMs,
# BabelStream, the vLLM latency row), six mechanism parameters, each pinned by its own group:
#   gpu.sustained_clock_ratio   gemm-torch and gemm-cublas (the large squares' plateau)
#   gpu.launch_host             gemm-torch (1024^3 through torch.matmul is host-bound)
#   gpu.kernel_latency          gemm-torch 2048^3 (one wave) with gemm-skinny
#   gpu.gemm_memory_efficiency  gemm-skinny (and the decode GEMMs of the inference row)
#   gpu.stream_efficiency       stream
#   gpu.framework_step          inference
# The fit starts from priors that are not fits (the datasheet's: every efficiency 1, the quote clock; a
# launch of 5 us and a kernel latency of 2 us; no framework cost), and so does every fold of the
# leave-one-group-out cross-validation: a parameter only the left-out group pins falls back to its prior,
# and the fold's error says what the model predicts without that group. The fitted values go into
# nvidia-gpu.yaml by hand (each with the rows it was fitted on); --check then recomputes every row.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-out/calibrate-gpu}
export KERNBENCH_INCLUDE_PATH="$(pwd)/configs/machines${KERNBENCH_INCLUDE_PATH:+:$KERNBENCH_INCLUDE_PATH}"
CFG=configs/machines/h100-8x-nvswitch.yaml
mkdir -p "$OUT"
# The priors: the H100 preset with the six parameters at their starting values (a machine of its own, so that
# the fit and every fold start there; it includes the repository's preset).
cat > "$OUT/priors.yaml" <<YAML
include: $(pwd)/configs/machines/h100-8x-nvswitch.yaml
gpu: {sustained_clock_ratio: 1.0, stream_efficiency: 1.0, gemm_memory_efficiency: 1.0, launch_host: 5 us,
      kernel_latency: 2 us, framework_step: 0.1 ms}
YAML
KERNEL=(--free "gpu.sustained_clock_ratio=0.5..1.0" --free "gpu.stream_efficiency=0.5..1.0"
        --free "gpu.gemm_memory_efficiency=0.3..1.0" --free "gpu.launch_host=0.5 us..40 us"
        --free "gpu.kernel_latency=0 us..20 us")
# 1-kernels: the five kernel-level parameters on the three micro-benchmark groups (leave one group out);
#            the inference row is a prediction of them (framework_step at its prior).

kernbench calibrate --data configs/machines/h100.measured.yaml --config "$OUT/priors.yaml" "${KERNEL[@]}" \
  --fit-on gemm-torch,gemm-cublas,gemm-skinny,stream --cv-by group --out "$OUT/1-kernels" --quiet
# 2-framework: the serving framework's host time per step on the inference row, the kernel parameters held at
#              (1)'s values. One row, one parameter: fitted, and its fold falls back to the prior.
python3 - "$OUT" <<'PYEOF'
import json, sys
out = sys.argv[1]
free = json.load(open(f"{out}/1-kernels/result.json"))["free"]
held = ", ".join(f"{f['path'].split('.', 1)[1]}: {f['value']}" for f in free)
open(f"{out}/held.yaml", "w").write(f"include: priors.yaml\ngpu: {{{held}}}\n")
PYEOF

kernbench calibrate --data configs/machines/h100.measured.yaml --config "$OUT/held.yaml" \
  --free "gpu.framework_step=0.01 ms..5 ms" --fit-on inference --cv-by group --out "$OUT/2-framework" --quiet
kernbench calibrate --check "$CFG" --config "$CFG" --data configs/machines/h100.measured.yaml > "$OUT/check.txt" || true
# What the validation report reads: each fitted row's cross-validated error and what it was fitted on (the
# inference row's fold is run 1, which predicted it with gpu.framework_step at its prior).
python3 scripts/calibration_json.py "$OUT" configs/gpu.calibration.json 1-kernels 2-framework \
  --about "written by scripts/calibrate_gpu.sh: the fitted rows of configs/machines/h100.measured.yaml, the parameters fitted on each and its leave-one-group-out cross-validated error (None: no fold could predict it)"
echo "calibrate_gpu: reports in $OUT/{1-kernels,2-framework}/report.md, the check of the committed values in $OUT/check.txt"
