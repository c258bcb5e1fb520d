#!/usr/bin/env bash
# test.sh -- build the Catch2 binary in the tree that `pip install` left in
# build/, run it through ctest, then run pytest over the installed package.
# Run scripts/setup.sh first (once); this script is what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
# scikit-build-core's build-dir is build/{wheel_tag}; the tag starts with cpXY.
PYTAG=$("$PYTHON" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
BUILD=$(ls -d build/"$PYTAG"-* 2>/dev/null | head -n 1 || true)
if [ -z "$BUILD" ] || [ ! -f "$BUILD/CMakeCache.txt" ]; then
  echo "test: no build tree for $PYTAG under build/: run scripts/setup.sh first" >&2
  exit 2
fi
JOBS=${JOBS:-$(nproc)}
cmake --build "$BUILD" --target kernbench_tests -j "$JOBS"
ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS"
"$PYTHON" -m pytest "$@"
