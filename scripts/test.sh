#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, runs every suite and the
# one-host Slurm test, then the sanitizer build of the loader tests and 60 seconds of
# fuzzing the GGUF loader.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
echo "== build (Release)"
"$root/scripts/build.sh"
echo "== tests"
ctest --test-dir "${EMBER_BUILD_DIR:-$root/build}" --output-on-failure -j 2
echo "== ember sweep --slurm on a one-host Slurm cluster"
"$root/scripts/test-slurm.sh"
echo "== loader tests under ASan + UBSan"
"$root/scripts/test-sanitizers.sh"
echo "== fuzzing the GGUF loader"
"$root/scripts/fuzz-gguf.sh" "${EMBER_FUZZ_SECONDS:-60}"
echo "== fuzzing the tokenizers"
"$root/scripts/fuzz-tokenizer.sh" "${EMBER_TOKENIZER_FUZZ_SECONDS:-30}"
