#!/usr/bin/env bash
# calibrate_k200.sh -- the K200 GEMM calibration of configs/k200.yaml, as committed.
#
#   scripts/calibrate_k200.sh [OUT]      (default out/calibrate-k200; about a minute on 2 cores)
#
# Three runs of `kernbench calibrate` on configs/k200.measured.yaml:
#   0-first:  the honest first number. The GEMM parameters fitted on the micro-benchmark groups
#             only (gemm-fit, gemm-square, gemm-k-sweep), the scan's lane limit off (nothing but C4
#             could pin it); C4 is a prediction.
#   1-gemm:   fp32_efficiency, fp16_efficiency, spill_penalty on gemm-fit (three GEMMs), the
#             operand scan held at its C4 values;
#   2-c4:     the operand scan's two limits (bytes and elements per second) on the 12 C4 points
#             (two parameters on C4), the efficiencies held at (1)'s; leave-one-batch-out.
# configs/k200.yaml carries (1) and (2)'s values, the fixed point of the two (rerunning (1)
# after (2) moves nothing); --check then recomputes every row against it without refitting.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-out/calibrate-k200}
DATA=configs/k200.measured.yaml
EFF=(--free "k200.compute.fp32_efficiency=20..100" --free "k200.compute.fp16_efficiency=20..100"
     --free "k200.compute.spill_penalty=0..300")
SCAN=(--free "k200.compute.operand_scan_bandwidth=10 GB/s..1000 GB/s")
LANES=(--free "k200.compute.operand_scan_element_rate=1e9..1e12")
kernbench calibrate --data "$DATA" "${EFF[@]}" "${SCAN[@]}" --fit-on gemm-fit,gemm-square,gemm-k-sweep \
  --set k200.compute.operand_scan_element_rate=0 --cv-by none --out "$OUT/0-first" --quiet
kernbench calibrate --data "$DATA" "${EFF[@]}" --fit-on gemm-fit --cv-by none --out "$OUT/1-gemm" --quiet
kernbench calibrate --data "$DATA" "${SCAN[@]}" "${LANES[@]}" --fit-on c4 --cv-by batch --out "$OUT/2-c4" --quiet
kernbench calibrate --check configs/k200.yaml --data "$DATA" > "$OUT/check.txt" || true
# What the validation report reads: each fitted row's cross-validated error, from the runs above
# (configs/k200.calibration.json; the validation bench refuses to run without it).
python3 scripts/calibration_json.py "$OUT" configs/k200.calibration.json 1-gemm 2-c4 \
  --about "written by scripts/calibrate_k200.sh: the fitted rows of configs/k200.measured.yaml, the parameters fitted on each and its cross-validated error (None: no fold could predict it)"
echo "calibrate_k200: reports in $OUT/{0-first,1-gemm,2-c4}/report.md, the check in $OUT/check.txt"
