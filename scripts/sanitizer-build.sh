#!/usr/bin/env bash
# Configures and builds the one sanitizer tree, build-asan/ (or $EMBER_ASAN_BUILD_DIR):
# clang with AddressSanitizer + UndefinedBehaviorSanitizer and the libFuzzer targets, at -O0
# with line tables (what ASan's reports need; the cheapest to compile, the slowest to run).
# The loader tests (test-sanitizers.sh) and both fuzzers (fuzz-gguf.sh, fuzz-tokenizer.sh)
# share it, so the engine is compiled with the sanitizers once. Arguments are targets.
#   scripts/sanitizer-build.sh TARGET...
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${EMBER_ASAN_BUILD_DIR:-$root/build-asan}
source "$root/scripts/ccache-args.sh"
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O0 -gline-tables-only -DNDEBUG" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O0 -gline-tables-only -DNDEBUG" \
  -DEMBER_SANITIZE=ON -DEMBER_FUZZ=ON "${ccache_args[@]}" >/dev/null
cmake --build "$build" -j "${EMBER_JOBS:-2}" --target "$@" >/dev/null
echo "$build"
