#!/usr/bin/env bash
# Installs what a fresh Debian 12 machine lacks, then configures and builds
# Weft into ./build. Sourced by demo.sh and test.sh; safe to run again.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

packages=(
  llvm-22-dev libmlir-22-dev mlir-22-tools llvm-22-tools  # MLIR, lit, FileCheck
  libonnx-dev libprotobuf-dev                             # ONNX import
  nlohmann-json3-dev                                      # safetensors headers
  libyaml-cpp-dev                                         # planner: cluster specs
  libopenblas-dev libcli11-dev                            # runtime: GEMM, CLI
  libopenblas-openmp-dev libomp-22-dev                    # executables: one OpenMP team
  libdnnl2                                                # executables: oneDNN GEMMs (dlopen)
  libgloo-dev                                             # runtime: collectives
  iproute2                                                # tests: emulated nodes
  openmpi-bin                                             # tests: mpirun starts ranks
  libgtest-dev                                            # unit tests
  python3-torch python3-onnx python3-numpy                # reference numbers
  cmake ninja-build ccache g++
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

export CCACHE_DIR="${CCACHE_DIR:-$HOME/.cache/weft-ccache}"
# Paths relative to the checkout's parent, so that clones and worktrees
# beside each other share cache entries.
export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$(cd .. && pwd)}"
if [ ! -f build/build.ninja ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
fi
cmake --build build "$@"
