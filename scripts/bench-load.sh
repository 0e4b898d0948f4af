#!/usr/bin/env bash
# What the block-scale check adds to a model file's first load (not part of CI): builds
# ember_load_check_bench and runs it on the 1B-shaped Q4_K_M model (written once by
# `ember synth`, as scripts/bench.sh does). It prints every round of hashing the mapped
# file alone and of hashing it with the check fused in, their medians and the check's
# share. The machine should be otherwise idle: check `uptime` first.
#
#   scripts/bench-load.sh [ROUNDS=9]
set -euo pipefail
rounds=${1:-9}
source "$(dirname "$0")/bench-common.sh"
bench_build_ember
cmake --build "$build" -j 2 --target ember_load_check_bench >/dev/null
model=$(bench_model q4_k_m)
echo "uptime before: $(uptime)"
"$build/tests/bench/ember_load_check_bench" "$model" "$rounds"
echo "uptime after: $(uptime)"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-)"
