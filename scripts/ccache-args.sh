# Sourced by the build scripts (after setting $root): `ccache_args` holds the CMake options
# that route the compilers through ccache when it is installed (setup.sh installs it), and
# the repository root becomes ccache's base directory, so clones in other places (CI's)
# reuse each other's objects. Without ccache the array is empty and nothing changes.
ccache_args=()
if command -v ccache > /dev/null; then
  export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$root}"
  ccache_args=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
