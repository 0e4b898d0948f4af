"""The PEP 517 build backend of `pip install .` (pyproject.toml; docs/python.md).

It needs nothing but the standard library, CMake and the project's build dependencies
(scripts/setup.sh), so `pip install --no-build-isolation .` works without network: it
configures and builds the native module with the project's CMake for the Python running
pip, in its own build directory ($EMBER_BUILD_DIR, default build-pip/, so the build/ of
the README keeps its own Python and options; through ccache when installed, as
scripts/build.sh), then packs the package CMake assembled (python/ember in that build
directory) into a wheel.
"""

import base64
import hashlib
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _version() -> str:
    text = open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8").read()
    return re.search(r"project\(ember VERSION ([0-9.]+)", text).group(1)


def _tag() -> str:
    impl = f"cp{sys.version_info.major}{sys.version_info.minor}"
    abi = impl + getattr(sys, "abiflags", "")
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{impl}-{abi}-{platform}"


def _build_package() -> str:
    build = os.environ.get("EMBER_BUILD_DIR", os.path.join(ROOT, "build-pip"))
    jobs = os.environ.get("EMBER_JOBS", "2")
    launcher = []
    if shutil.which("ccache"):  # as scripts/cmake-args.sh
        os.environ.setdefault("CCACHE_BASEDIR", ROOT)
        launcher = ["-DCMAKE_CXX_COMPILER_LAUNCHER=ccache", "-DCMAKE_C_COMPILER_LAUNCHER=ccache"]
    subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release", "-DEMBER_PYTHON=ON",
                           "-DEMBER_BUILD_TESTS=OFF", f"-DPython3_EXECUTABLE={sys.executable}", *launcher],
                          stdout=sys.stderr)
    subprocess.check_call(["cmake", "--build", build, "-j", jobs, "--target", "_ember"], stdout=sys.stderr)
    package = os.path.join(build, "python", "ember")
    if not any(n.startswith("_ember") for n in os.listdir(package)):
        raise RuntimeError(f"{package}: the native module was not built (is pybind11-dev installed? scripts/setup.sh)")
    return package


def _metadata(version: str) -> str:
    return (f"Metadata-Version: 2.1\nName: ember\nVersion: {version}\n"
            "Summary: Ember's engine in process: GGUF models' internals as NumPy arrays, and run directories\n"
            "Requires-Python: >=3.9\nRequires-Dist: numpy\n")


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = _version()
    package = _build_package()
    tag = _tag()
    dist_info = f"ember-{version}.dist-info"
    name = f"ember-{version}-{tag}.whl"
    entries = []
    for n in sorted(os.listdir(package)):
        if n.endswith(".py") or (n.startswith("_ember") and n.endswith(".so")):
            entries.append((f"ember/{n}", open(os.path.join(package, n), "rb").read()))
    entries.append((f"{dist_info}/METADATA", _metadata(version).encode()))
    entries.append((f"{dist_info}/WHEEL", f"Wheel-Version: 1.0\nGenerator: ember_build\nRoot-Is-Purelib: false\nTag: {tag}\n".encode()))
    record = [_record_line(n, d) for n, d in entries] + [f"{dist_info}/RECORD,,"]
    entries.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode()))
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as wheel:
        for n, d in entries:
            wheel.writestr(n, d)
    return name


def build_sdist(sdist_directory, config_settings=None):
    raise RuntimeError("ember has no sdist: install from a checkout (pip install --no-build-isolation .)")


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []
