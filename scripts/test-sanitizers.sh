#!/usr/bin/env bash
# Builds the loader tests (everything that reads untrusted files) in the sanitizer tree
# (sanitizer-build.sh: clang, AddressSanitizer + UndefinedBehaviorSanitizer) and runs them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$("$root/scripts/sanitizer-build.sh" loader_tests)
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir "$build" -R "$(cat "$build/loader_tests.regex")" --output-on-failure -j 2
