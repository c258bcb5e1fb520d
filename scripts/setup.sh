#!/usr/bin/env bash
# setup.sh -- install everything kernbench needs on a fresh Debian 12 machine,
# then build and install the package. Safe to run twice: system packages are
# installed only when missing, and the CMake tree in build/ is reused.
#
# The interpreter is $PYTHON (default python3). When it is externally managed
# (PEP 668: Debian's /usr/bin/python3), pip may not install into it, so the
# package goes into a venv, .venv/ in the repository (python3-venv and
# python3-dev are installed if missing), and a `kernbench` launcher is linked
# into /usr/local/bin (root or writable), else ~/.local/bin. The interpreter
# and build tree used are recorded in build/setup.env for scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)

PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
KERNBENCH_EXTRAS=${KERNBENCH_EXTRAS:-}
DEB_PACKAGES=(libboost-graph-dev libyaml-cpp-dev nlohmann-json3-dev catch2 g++ cmake ninja-build)

if ! command -v "$PYTHON" >/dev/null 2>&1; then
  echo "setup: no Python interpreter '$PYTHON' (set PYTHON=...)" >&2
  exit 2
fi
# Externally managed: the marker is in the stdlib dir and we are not in a venv.
managed=$("$PYTHON" -c 'import os, sys, sysconfig
print(int(sys.prefix == sys.base_prefix
          and os.path.isfile(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED"))))')
if [ "$managed" = 1 ]; then
  # The venv module (ensurepip) and the headers the extension module builds against.
  DEB_PACKAGES+=(python3-venv python3-dev)
fi

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

# scikit-build-core's default build-dir is build/{wheel_tag} (pyproject.toml).
# A venv made from Debian's python has the same tag (cp311) as, say, a pyenv
# 3.11: it gets its own tree so the two CMake caches never mix.
build_dir='build/{wheel_tag}'
if [ "$managed" = 1 ]; then
  base_prefix=$("$PYTHON" -c 'import sys; print(sys.prefix)')
  # Reuse the venv only if it is healthy and made from this interpreter.
  if ! venv_base=$("$VENV/bin/python" -c 'import sys; print(sys.base_prefix)' 2>/dev/null) \
     || [ "$venv_base" != "$base_prefix" ]; then
    echo "setup: $PYTHON is externally managed (PEP 668): creating the venv $VENV"
    "$PYTHON" -m venv --clear "$VENV"
  else
    echo "setup: $PYTHON is externally managed (PEP 668): using the venv $VENV"
  fi
  PYTHON="$ROOT/$VENV/bin/python"
  build_dir='build/venv-{wheel_tag}'
fi
PYEXE=$("$PYTHON" -c 'import sys; print(sys.executable)')
# PYTHON=.venv/bin/python given by hand: the same tree as above.
if [ "$("$PYTHON" -c 'import os, sys; print(os.path.realpath(sys.prefix))')" = "$(realpath -m "$VENV")" ]; then
  build_dir='build/venv-{wheel_tag}'
fi
TAG=$("$PYTHON" -c 'import sys, sysconfig
v = "cp%d%d" % sys.version_info[:2]
print("%s-%s-%s" % (v, v, sysconfig.get_platform().replace("-", "_").replace(".", "_")))')
BUILD=${build_dir/\{wheel_tag\}/$TAG}

# A tree configured for another interpreter would keep its cached Python paths:
# drop the cache (the objects stay; ccache, when there, makes the rest cheap).
if [ -f "$BUILD/CMakeCache.txt" ]; then
  cached=$(sed -n 's/^Python_EXECUTABLE:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
  if [ -n "$cached" ] && [ "$cached" != "$PYEXE" ]; then
    echo "setup: $BUILD was configured for $cached, not $PYEXE: reconfiguring it"
    rm -rf "$BUILD/CMakeCache.txt" "$BUILD/CMakeFiles"
  fi
fi
# Use ccache when it is there (not required).
if [ -z "${CMAKE_CXX_COMPILER_LAUNCHER:-}" ] && command -v ccache >/dev/null 2>&1; then
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$ROOT}
fi

# Build requirements are installed into this environment and the build is
# not isolated, so the CMake cache in build/ keeps pointing at live paths
# and scripts/test.sh can rebuild the Catch2 binary in the same tree.
"$PYTHON" -m pip install -q --disable-pip-version-check \
  "scikit-build-core>=0.10" "pybind11>=2.10" "numpy>=1.22" "matplotlib>=3.5" "pandas>=1.4" "scipy>=1.8" "networkx>=2.6" \
  "pytest>=7" "simpy>=4,<5" "hypothesis>=6" \
  "tqdm>=4.60" "cloudpickle>=2" "dask[distributed]>=2023.1" "jsonschema>=4" "pyyaml>=6" \
  "nbclient>=0.7" "nbformat>=5" "ipykernel>=6" "mkdocs>=1.5" "clang-format==19.1.7"
"$PYTHON" -m pip install -q --disable-pip-version-check --no-build-isolation \
  --config-settings=build-dir="$build_dir" .

# Optional extras, opt-in: KERNBENCH_EXTRAS=torch,onnx (CI sets it) installs
# the workload importers' pinned packages (pyproject.toml's [torch] and [onnx]
# extras; keep the pins in step). The pin matters: on these machines
# torch==2.13.0 resolves to the CPU wheel that lies on disk (pip's
# find-links), while an open range pulls a CUDA build of several GB. Without
# KERNBENCH_EXTRAS nothing is downloaded and the tests that need them skip.
TORCH_PIN="torch==2.13.0"; TRANSFORMERS_PIN="transformers==5.24.0"; ONNX_PIN="onnx==1.23.2"
for extra in ${KERNBENCH_EXTRAS//,/ }; do
  case "$extra" in
    torch)
      "$PYTHON" -m pip install -q --disable-pip-version-check "$TORCH_PIN"
      "$PYTHON" -m pip install -q --disable-pip-version-check "$TRANSFORMERS_PIN" ;;
    onnx)
      "$PYTHON" -m pip install -q --disable-pip-version-check "$ONNX_PIN" ;;
    *)
      echo "setup: unknown extra '$extra' in KERNBENCH_EXTRAS (known: torch, onnx)" >&2
      exit 2 ;;
  esac
done

if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  echo "setup: WARNING: expected the build tree in $BUILD, found none there" >&2
fi
mkdir -p build
printf 'python=%s\nbuild=%s\n' "$PYEXE" "$BUILD" > build/setup.env

version=$("$PYTHON" -c 'import kernbench; print(kernbench.__version__)')
if [ "$managed" = 1 ]; then
  # A venv's bin is not on PATH: put a launcher into a bin dir that is. It is
  # a small script (not a symlink, which a later pip could write through),
  # marked so that a rerun replaces it and never a kernbench that is not ours.
  target="$ROOT/$VENV/bin/kernbench"
  marker="# kernbench launcher written by scripts/setup.sh"
  ours() { [ ! -e "$1" ] || [ -L "$1" ] || grep -qs "^$marker" "$1"; }
  bindir=/usr/local/bin
  if ! { [ "$(id -u)" -eq 0 ] || [ -w "$bindir" ]; } || ! ours "$bindir/kernbench"; then
    bindir="$HOME/.local/bin"
  fi
  if ! ours "$bindir/kernbench"; then
    echo "setup: $bindir/kernbench exists and is not a launcher of ours: left alone; run $target" >&2
  else
    mkdir -p "$bindir"
    q=${target//\'/\'\\\'\'}
    printf '#!/bin/sh\n%s (%s)\nexec '\''%s'\'' "$@"\n' "$marker" "$ROOT" "$q" > "$bindir/.kernbench.$$"
    chmod 755 "$bindir/.kernbench.$$"
    mv -f "$bindir/.kernbench.$$" "$bindir/kernbench"
  fi
  echo "setup: kernbench $version installed in $VENV ($bindir/kernbench -> $target)"
  case ":$PATH:" in
    *":$bindir:"*) ;;
    *) echo "setup: WARNING: $bindir is not on PATH: add it (export PATH=\"$bindir:\$PATH\") or run $target" >&2 ;;
  esac
  found=$(command -v kernbench || true)
  if [ -n "$found" ] && [ "$found" != "$bindir/kernbench" ]; then
    echo "setup: WARNING: another kernbench ($found) comes first on PATH; this install is $target" >&2
  fi
else
  echo "setup: kernbench $version installed ($(command -v kernbench || echo 'kernbench not on PATH'))"
fi
