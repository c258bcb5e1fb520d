#!/usr/bin/env bash
# sanitize.sh -- build the C++ core, the Catch2 tests and the fuzz targets with
# clang's AddressSanitizer + UndefinedBehaviorSanitizer, run the tests, then
# fuzz the YAML loader (and explicit-graph layouts), the program executor (with GEMM shapes and
# collective grids) and System transfers for FUZZ_SECONDS each
# (default 30). clang, not GCC: GCC's
# ASan overflows the stack on coroutine-heavy code (BUILD-NOTES).
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
for p in clang-14 libclang-rt-14-dev; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

BUILD=build/asan
JOBS=${JOBS:-$(nproc)}
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-14 \
  -DKERNBENCH_SANITIZE=ON -DKERNBENCH_FUZZ=ON -DKERNBENCH_BUILD_PYTHON=OFF >/dev/null
cmake --build "$BUILD" --target kernbench_tests fuzz_config fuzz_program fuzz_transfer -j "$JOBS"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS"

# Fixed-seed fuzz runs; findings land in build/asan/fuzz-crashes (and make
# the script fail). The config fuzzer starts from the shipped configs.
mkdir -p "$BUILD/fuzz-config" "$BUILD/fuzz-program" "$BUILD/fuzz-transfer" "$BUILD/fuzz-crashes"
cp configs/*.yaml "$BUILD/fuzz-config"/
# Seeds of fuzz_config's layout mode (a leading 'L': graph.layout grid/packages/groups and link buffers from
# extreme values) and of fuzz_program's GEMM-shape and collective-grid ops (kinds 10 and 11); issue 31.
printf 'L\x07\x01\x07\x0a\x01\x05\x08\x09\x0a\x0b\x0c\x01' >"$BUILD/fuzz-config/seed-layout"
printf '\x05\x00\x00\x0a\x06\x0a\x0a\x00\x00\x0b\x01\x20\x05\x06\xff' >"$BUILD/fuzz-program/seed-gemm-grid"
# fuzz_transfer: System transfers, DMA and traffic with extreme values (its
# bad_alloc in the flow model, stale completion events piling up, is fixed:
# FlowFabric keeps one queued completion).
for target in config program transfer; do
  echo "fuzz_$target: ${FUZZ_SECONDS:-30} s"
  "$BUILD/fuzz_$target" "$BUILD/fuzz-$target" -seed=1 -max_total_time="${FUZZ_SECONDS:-30}" -max_len=4096 \
    -timeout=20 -artifact_prefix="$BUILD/fuzz-crashes/$target-" -print_final_stats=1 2>&1 | tail -n 6
done
