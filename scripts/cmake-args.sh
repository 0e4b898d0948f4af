# Sourced by the build scripts (after setting $root), for the CMake options every tree shares.
# `ccache_args` routes the compilers through ccache when it is installed (setup.sh installs
# it), and the repository root becomes ccache's base directory, so clones in other places
# (CI's) reuse each other's objects. Without ccache the array is empty and nothing changes.
ccache_args=()
if command -v ccache > /dev/null; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"
  # With -g (the sanitizer and fuzz trees) ccache also hashes the working directory, which
  # debug info records, so a clone at a new path missed every one of those objects; the
  # objects then name the first clone's directories in their debug info.
  export CCACHE_NOHASHDIR="${CCACHE_NOHASHDIR:-1}"
  # The precompiled headers (cmake/precompiled_headers.cmake): without these ccache does not
  # cache a file compiled with one (it runs the compiler every time).
  export CCACHE_SLOPPINESS="${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}"
  ccache_args=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi

# `ember_generator DIR` sets `generator_args`: Ninja for a new tree when it is installed
# (setup.sh installs it). Ninja compiles a target's files while the libraries it links are
# still compiling, where make waits for them: the demo from nothing on 2 cores took 2 min
# 38 s with Ninja against 3 min 4 s with make. A tree configured before keeps its generator.
ember_generator() {
  generator_args=()
  if command -v ninja > /dev/null && [ ! -f "$1/CMakeCache.txt" ]; then generator_args=(-G Ninja); fi
}

# `quietly COMMAND...`: a build command with its output held back and shown on stderr if it
# fails (Ninja writes a compiler's errors to stdout, which callers discard).
quietly() {
  local log
  log=$(mktemp)
  if "$@" > "$log" 2>&1; then rm -f "$log"; return 0; fi
  cat "$log" >&2
  rm -f "$log"
  return 1
}
