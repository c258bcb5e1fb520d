#!/usr/bin/env bash
# calibrate_nccl.sh -- the NCCL model's calibration (the nccl: section of configs/machines/nvidia-gpu.yaml), as
# committed.
#
#   scripts/calibrate_nccl.sh [OUT]      (default out/calibrate-nccl; about ten minutes on 2 cores)
#
# Two runs of `kernbench calibrate` on the nccl-tests groups of configs/machines/h100.measured.yaml (section 1 of
# the GPU reference), six mechanism parameters, each pinned by its own rows:
#   nccl.call_host        nccl-launch-4 (the 4-GPU campaign's 8 B row: one host thread launches 4 GPUs' kernels,
#                         host-bound): run 1, alone, so that no larger row pulls the launch into its own time
#   nccl.ll_step          nccl-ring-4 64 KiB (LL steps)
#   nccl.simple_step      nccl-ring-4 16 MiB (Simple steps, the rise to the plateau)
#   nccl.link_efficiency  nccl-ring-4 256 MiB .. 8 GiB (the ring's plateau)
#   nccl.nvls_base        nccl-nvls-8 64 KiB, 1 MiB (the NVLS kernel's fixed cost)
#   nccl.nvls_issue       nccl-nvls-8 256 MiB .. 8 GiB (the GPUs' multimem issue rate, NVLS's plateau)
# The priors are NCCL's own tuning constants (src/graph/tuning.cc: Ring baseLat and NVLink hwLat, NVLS hwLat
# 25 us), a 5 us launch, the line rate (efficiency 1) and the issue rate at which NVLS reaches NCCL's own NVLS
# efficiency for Hopper (nvlsEfficiency 0.85: n x issue / 2 = 0.85 x 450 GB/s on 8 GPUs, 96 GB/s); every
# fold of the leave-one-group-out cross-validation starts there, so a parameter only the left-out group pins
# falls back to its prior. The fitted values go into nvidia-gpu.yaml by hand; --check recomputes every row.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-out/calibrate-nccl}
export KERNBENCH_INCLUDE_PATH="$(pwd)/configs/machines${KERNBENCH_INCLUDE_PATH:+:$KERNBENCH_INCLUDE_PATH}"
CFG=configs/machines/h100-8x-nvswitch.yaml
mkdir -p "$OUT"
cat > "$OUT/priors.yaml" <<YAML
include: $(pwd)/$CFG
nccl: {call_host: 5 us, ll_step: 600 ns, simple_step: 3400 ns, link_efficiency: 1.0, nvls_base: 25 us,
       nvls_issue: 96 GB/s}
YAML
# 1-launch: the host's launch on the host-bound row; the others are predictions of it here.
kernbench calibrate --data configs/machines/h100.measured.yaml --config "$OUT/priors.yaml" \
  --free "nccl.call_host=0.5 us..20 us" --fit-on nccl-launch-4 --cv-by group --out "$OUT/1-launch" --quiet
python3 - "$OUT" <<'PYEOF'
import json, sys
out = sys.argv[1]
free = json.load(open(f"{out}/1-launch/result.json"))["free"]
held = ", ".join(f"{f['path'].split('.', 1)[1]}: {f['value']}" for f in free)
open(f"{out}/held.yaml", "w").write(f"include: priors.yaml\nnccl: {{{held}}}\n")
PYEOF
# 2-fit: the step latencies, the link efficiency and NVLS's two parameters, the launch held at run 1's value.
kernbench calibrate --data configs/machines/h100.measured.yaml --config "$OUT/held.yaml" \
  --free "nccl.ll_step=0.1 us..5 us" --free "nccl.simple_step=0.1 us..20 us" \
  --free "nccl.link_efficiency=0.5..1.0" --free "nccl.nvls_base=1 us..80 us" --free "nccl.nvls_issue=50 GB/s..1000 GB/s" \
  --fit-on nccl-ring-4,nccl-nvls-8 --cv-by group --max-nfev ${MAX_NFEV:-120} --out "$OUT/fit" --quiet
kernbench calibrate --check "$CFG" --config "$CFG" --data configs/machines/h100.measured.yaml > "$OUT/check.txt" || true
# What the validation report reads: the NCCL rows' cross-validated errors, beside calibrate_gpu.sh's rows.
python3 scripts/calibration_json.py "$OUT" configs/gpu.calibration.json 1-launch fit --merge \
  --about "written by scripts/calibrate_nccl.sh: the nccl-tests rows of configs/machines/h100.measured.yaml, the nccl parameters fitted on each and its leave-one-group-out cross-validated error"
echo "calibrate_nccl: reports in $OUT/{1-launch,fit}/report.md, the check of the committed values in $OUT/check.txt"
