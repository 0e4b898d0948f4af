#!/usr/bin/env bash
# The README's test command: installs what is missing, builds, runs every suite and the
# one-host Slurm test, then the sanitizer build of the loader tests and 60 seconds of
# fuzzing the GGUF loader. It ends by saying how long it took.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
"$root/scripts/setup.sh"
echo "== build (Release)"
"$root/scripts/build.sh"
echo "== tests"
ctest --test-dir "${EMBER_BUILD_DIR:-$root/build}" --output-on-failure -j 2
echo "== ember sweep --slurm on a one-host Slurm cluster"
"$root/scripts/test-slurm.sh"
echo "== without the fast route (-DEMBER_FAST=OFF, as off x86-64): the reference-route suites"
# Its own build directory; only ember and a few suites, so it stays a few minutes on 2 cores.
no_fast_dir="${EMBER_NO_FAST_BUILD_DIR:-$root/build-nofast}"
no_fast_suites=(reference_kernels_test hostile_files_test validation_test golden_test generate_cli_test)
source "$root/scripts/cmake-args.sh"
ember_generator "$no_fast_dir"
cmake -S "$root" -B "$no_fast_dir" "${generator_args[@]}" -DCMAKE_BUILD_TYPE=Release -DEMBER_FAST=OFF "${ccache_args[@]}" > /dev/null
cmake --build "$no_fast_dir" -j 2 --target ember "${no_fast_suites[@]}"
no_fast_regex=$(IFS='|'; echo "^(${no_fast_suites[*]})/")
ctest --test-dir "$no_fast_dir" --output-on-failure -j 2 -R "$no_fast_regex"
echo "== loader tests under ASan + UBSan"
"$root/scripts/test-sanitizers.sh"
echo "== fuzzing the GGUF loader"
"$root/scripts/fuzz-gguf.sh" "${EMBER_FUZZ_SECONDS:-60}"
echo "== fuzzing the tokenizers"
"$root/scripts/fuzz-tokenizer.sh" "${EMBER_TOKENIZER_FUZZ_SECONDS:-30}"
# Its own duration, so a newcomer knows what to expect: 24 min 41 s on 2 cores (Intel Xeon,
# 2026-12-03, a clean clone with an empty compiler cache; README).
echo "test.sh: every suite passed in $((SECONDS / 60)) min $((SECONDS % 60)) s"
