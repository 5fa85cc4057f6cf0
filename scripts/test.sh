#!/usr/bin/env bash
# Sets up like demo.sh, builds everything and runs every test (lit suites
# and GoogleTest) through CTest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
scripts/setup.sh
ctest --test-dir build --output-on-failure -j "$(nproc)"
