#!/usr/bin/env bash
# test.sh -- build the Catch2 binary in the tree that `pip install` left in
# build/, run it through ctest, then run pytest over the installed package.
# Run scripts/setup.sh first (once); this script is what CI runs.
#
# The interpreter and tree are the ones scripts/setup.sh recorded in
# build/setup.env (the venv's python when setup made one); PYTHON=... overrides.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD=""
if [ -f build/setup.env ]; then
  rec_python=$(sed -n 's/^python=//p' build/setup.env)
  rec_build=$(sed -n 's/^build=//p' build/setup.env)
  if [ -z "${PYTHON:-}" ] || [ "$PYTHON" = "$rec_python" ]; then
    PYTHON=$rec_python
    BUILD=$rec_build
  fi
fi
PYTHON=${PYTHON:-python3}
if [ -z "$BUILD" ]; then
  # scikit-build-core's build-dir is build/{wheel_tag}; the tag starts with cpXY.
  PYTAG=$("$PYTHON" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
  BUILD=$(ls -d build/"$PYTAG"-* 2>/dev/null | head -n 1 || true)
fi
if [ -z "$BUILD" ] || [ ! -f "$BUILD/CMakeCache.txt" ]; then
  echo "test: no build tree for $PYTHON under build/: run scripts/setup.sh first" >&2
  exit 2
fi
# The tests that run the `kernbench` command find this interpreter's.
PATH="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_path("scripts"))'):$PATH"
echo "test: $PYTHON, build tree $BUILD"
# The cmake that configured the tree (pip's or the system's), else the one on PATH.
CMAKE=$(sed -n 's/^CMAKE_COMMAND:INTERNAL=//p' "$BUILD/CMakeCache.txt")
CTEST=$(sed -n 's/^CMAKE_CTEST_COMMAND:INTERNAL=//p' "$BUILD/CMakeCache.txt")
[ -x "$CMAKE" ] || CMAKE=cmake
[ -x "$CTEST" ] || CTEST=ctest
JOBS=${JOBS:-$(nproc)}
"$CMAKE" --build "$BUILD" --target kernbench_tests -j "$JOBS"
"$CTEST" --test-dir "$BUILD" --output-on-failure -j "$JOBS"
"$PYTHON" -m pytest "$@"
