#!/usr/bin/env bash
# sanitize.sh -- build the C++ core and the Catch2 tests with clang's
# AddressSanitizer + UndefinedBehaviorSanitizer and run them. clang, not
# GCC: GCC's ASan overflows the stack on coroutine-heavy code (BUILD-NOTES).
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
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++-14 -DKERNBENCH_SANITIZE=ON -DKERNBENCH_BUILD_PYTHON=OFF >/dev/null
cmake --build "$BUILD" --target kernbench_tests -j "${JOBS:-$(nproc)}"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir "$BUILD" --output-on-failure -j "${JOBS:-$(nproc)}"
