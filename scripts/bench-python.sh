#!/usr/bin/env bash
# The Python package's overhead against the CLI (docs/python.md, "Overhead"): on the
# Llama-3.2-1B-shaped Q8_0 model `ember synth` writes (bench-common.sh), run_with_cache
# (every layer's after_layer) against `ember extract`'s prefill of the same prompt and
# capture, and a generation without hooks against `ember generate`; medians of ROUNDS.
# A benchmark, not a test. The machine's load (uptime) is printed before and after: the
# numbers mean little when other work shares the cores.
#
#   scripts/bench-python.sh [ROUNDS]          (EMBER_BENCH_THREADS, EMBER_BUILD_DIR as bench.sh)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/bench-common.sh"
rounds=${1:-3}

bench_build_ember
cmake --build "$build" -j "${EMBER_JOBS:-2}" --target _ember >/dev/null
model=$(bench_model q8_0)
python=${EMBER_PYTHON:-$(grep -E '^Python3_EXECUTABLE:' "$build/CMakeCache.txt" | cut -d= -f2)}
python=${python:-python3}

echo "load before: $(uptime)"
EMBER_BINARY=$ember PYTHONPATH=$build/python "$python" "$root/python/bench/overhead.py" "$model" "$rounds" "$threads"
echo "load after:  $(uptime)"
echo "(nproc $(nproc); a load average above that means the numbers were taken under load)"
