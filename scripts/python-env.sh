#!/usr/bin/env bash
# Builds and installs the Python package into a virtual environment under build/, with what its
# tests need. Prints the environment's python. torch goes in first: the torch ops library is built
# against the headers of the torch the build imports, so the package is built without build
# isolation (pip install --no-build-isolation .), with scikit-build-core and nanobind installed
# here beforehand (docs/python.md, "Building"). The package is built CPU-only unless
# MHC_PYTHON_CUDA=1 (CI has 2 cores and no GPU: the CUDA kernels would add their whole compile
# time again).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=${MHC_VENV:-build/venv-test}
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv" >&2
fi
py="$venv/bin/python"
# No wheel cache: torch's wheels are ~3 GB and the cache would hold them a second time next to the
# 5.3 GB installed (a CI run once ran out of disk here; docs/python.md, "Tests").
export PIP_NO_CACHE_DIR=1
echo "python-env: free disk before the install: $(df -h --output=avail . | tail -1 | tr -d ' ')" >&2
"$py" -m pip install -q --upgrade pip >&2
"$py" -m pip install -q numpy pytest "scikit-build-core>=0.11" "nanobind>=2.0" >&2
# torch and transformers for the torch ops' tests (tests/python/requirements.txt says the cost).
"$py" -m pip install -q -r tests/python/requirements.txt >&2
# MHC_PYTHON_DEPS_ONLY=1 stops here: scripts/test.sh installs these while the C++ compiles.
if [ "${MHC_PYTHON_DEPS_ONLY:-0}" = 1 ]; then echo "$py"; exit 0; fi
cuda_flag=-Ccmake.define.MHC_CUDA=OFF variant=cpu
if [ "${MHC_PYTHON_CUDA:-0}" = 1 ]; then cuda_flag=-Ccmake.define.MHC_CUDA=ON variant=cuda; fi
# A build directory kept in the environment, one per variant, so that a second run rebuilds only
# what changed (a plain `pip install .` builds in a fresh temporary directory).
"$py" -m pip install -q --no-build-isolation "$cuda_flag" "-Cbuild-dir=$venv/wheel-$variant" . >&2
echo "$py"
