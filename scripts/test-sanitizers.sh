#!/usr/bin/env bash
# Builds the loader tests (everything that reads untrusted files) with AddressSanitizer +
# UndefinedBehaviorSanitizer in build-asan/ and runs them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${EMBER_ASAN_BUILD_DIR:-$root/build-asan}
source "$root/scripts/ccache-args.sh"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEMBER_SANITIZE=ON "${ccache_args[@]}" >/dev/null
cmake --build "$build" -j "${EMBER_JOBS:-2}" --target loader_tests >/dev/null
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir "$build" -R "$(cat "$build/loader_tests.regex")" --output-on-failure -j 2
