#!/usr/bin/env bash
# cpp_example.sh -- install the C++ library from the build tree `pip install`
# left in build/ (no third build of the core), then build and run
# examples/cpp against the installed package (find_package(kernbench)).
# Run scripts/setup.sh first; CI runs this after the tests.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
PYTAG=$("$PYTHON" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
BUILD=${BUILD:-$(ls -d build/"$PYTAG"-* 2>/dev/null | head -n 1 || true)}
if [ -z "$BUILD" ] || [ ! -f "$BUILD/CMakeCache.txt" ]; then
  echo "cpp_example: no build tree for $PYTAG under build/: run scripts/setup.sh first" >&2
  exit 2
fi
PREFIX=${PREFIX:-build/install}
EXAMPLE=${EXAMPLE_BUILD:-build/example}
JOBS=${JOBS:-$(nproc)}
cmake --build "$BUILD" --target kernbench_core -j "$JOBS"      # up to date after pip: nothing to do
rm -rf "$PREFIX"
cmake --install "$BUILD" --component kernbench_dev --prefix "$PREFIX"
cmake -S examples/cpp -B "$EXAMPLE" -DCMAKE_PREFIX_PATH="$(realpath "$PREFIX")" -DCMAKE_BUILD_TYPE=Release
cmake --build "$EXAMPLE" -j "$JOBS"
out=$("$EXAMPLE/gemm_example" configs/topology.yaml 1024 1024 1024 8)
echo "$out"
# The run must have simulated something: a positive makespan within 5 % of the plan's bound.
echo "$out" | "$PYTHON" -c '
import sys
v = dict(l.split()[:2] for l in sys.stdin if l.strip().split()[0] in ("makespan_ps", "plan_ideal_ps"))
m, ideal = int(v["makespan_ps"]), int(v["plan_ideal_ps"])
assert 0 < ideal <= m <= 1.05 * ideal, (m, ideal)
print(f"cpp_example: ok (makespan {m} ps, {m / ideal - 1:+.2%} over the plan bound)")
'
