#!/usr/bin/env bash
# Configures and builds the one sanitizer tree, build-asan/ (or $EMBER_ASAN_BUILD_DIR):
# clang with AddressSanitizer + UndefinedBehaviorSanitizer and the libFuzzer targets, at -O1
# with line tables (what ASan's reports need). -O1, not -O0: on a 2-core Zen 3 it cost 948
# CPU-s to compile 150 files against 706 at -O0, and the loader tests ran in 230 s, where at
# -O0 they took 1611 s (beside a build on the same cores, so not like for like; the kill -9
# case, which runs a model to completion under ASan, went from 764 s to 50 s).
# The loader tests (test-sanitizers.sh) and both fuzzers (fuzz-gguf.sh, fuzz-tokenizer.sh)
# share it, so the engine is compiled with the sanitizers once. Arguments are targets.
#   scripts/sanitizer-build.sh TARGET...
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${EMBER_ASAN_BUILD_DIR:-$root/build-asan}
source "$root/scripts/cmake-args.sh"
ember_generator "$build"
CC=clang CXX=clang++ cmake -S "$root" -B "$build" "${generator_args[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only -DNDEBUG" \
  -DEMBER_SANITIZE=ON -DEMBER_FUZZ=ON "${ccache_args[@]}" >/dev/null
quietly cmake --build "$build" -j "${EMBER_JOBS:-2}" --target "$@"
echo "$build"
