#!/usr/bin/env bash
# Installs what building and testing flashattn needs on a fresh Debian/Ubuntu
# machine: compilers and CMake, GoogleTest, CLI11, fmt, nlohmann-json, ccache,
# NumPy/pytest for the CLI checks, and what the Python package builds with.
# Cheap when everything is already there.
set -euo pipefail

packages=(g++ cmake ninja-build ccache libgtest-dev libgmock-dev libbenchmark-dev
          libcli11-dev libfmt-dev nlohmann-json3-dev)
# python3 may come from elsewhere (pyenv): only ask apt for it when absent.
command -v python3 >/dev/null 2>&1 || packages+=(python3 python3-pip)
bash "$(dirname "$0")/apt_install.sh" setup "${packages[@]}"

# NumPy/pytest for the oracle checks; scikit-build-core and nanobind build the Python
# package (pyproject.toml, same ranges); ml_dtypes gives NumPy a bfloat16 for its tests.
py_packages=("numpy>=1.24" "pytest>=7" "scikit-build-core>=0.10,<2" "nanobind>=2.4,<4" "ml_dtypes>=0.2")
if ! python3 -c "import numpy, pytest, scikit_build_core, nanobind, ml_dtypes" >/dev/null 2>&1; then
  echo "setup: installing ${py_packages[*]}"
  python3 -m pip install --quiet "${py_packages[@]}" 2>/dev/null ||
    python3 -m pip install --quiet --break-system-packages "${py_packages[@]}"
fi
