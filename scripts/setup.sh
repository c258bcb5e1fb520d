#!/usr/bin/env bash
# setup.sh -- install everything kernbench needs on a fresh Debian 12 machine,
# then build and install the package. Safe to run twice: system packages are
# installed only when missing, and the CMake tree in build/ is reused.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
DEB_PACKAGES=(libboost-graph-dev libyaml-cpp-dev nlohmann-json3-dev catch2 g++ cmake ninja-build)

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Build requirements are installed into this environment and the build is
# not isolated, so the CMake cache in build/ keeps pointing at live paths
# and scripts/test.sh can rebuild the Catch2 binary in the same tree.
"$PYTHON" -m pip install -q --disable-pip-version-check \
  "scikit-build-core>=0.10" "pybind11>=2.10" "numpy>=1.22" "matplotlib>=3.5" "pandas>=1.4" \
  "pytest>=7" "simpy>=4,<5" \
  "tqdm>=4.60" "cloudpickle>=2" "dask[distributed]>=2023.1" "jsonschema>=4" "pyyaml>=6" \
  "nbclient>=0.7" "nbformat>=5" "ipykernel>=6" "mkdocs>=1.5"
"$PYTHON" -m pip install -q --disable-pip-version-check --no-build-isolation .
echo "setup: kernbench $("$PYTHON" -c 'import kernbench; print(kernbench.__version__)') installed ($(command -v kernbench || echo 'kernbench not on PATH'))"
