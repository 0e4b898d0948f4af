"""Shared fixtures of the Python suites: the fixture models, the CLI, the plugins.

ctest (python/CMakeLists.txt) sets PYTHONPATH to build/python, EMBER_BINARY to the CLI,
EMBER_PLUGIN_DIR to build/plugins and EMBER_DEFAULT_FIXTURES to ../shared/fixtures
(EMBER_FIXTURES overrides it, as for the C++ suites). A missing fixture fails the test.
"""

import json
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# One small model per family (and the Llama 3 tokenizer), as the dataset suites use them.
FAMILY_MODELS = ["stories260K", "synth-llama3-k-q4_0", "synth-qwen3-k-q5_1", "synth-gemma4-k-q4_1"]
ROUTES = ["reference", "fast"]


def fixtures_dir() -> str:
    return os.environ.get("EMBER_FIXTURES") or os.environ.get("EMBER_DEFAULT_FIXTURES") or os.path.join(
        ROOT, "..", "shared", "fixtures")


def fixture(relative: str) -> str:
    path = os.path.join(fixtures_dir(), relative)
    if not os.path.exists(path):
        pytest.fail(f"FIXTURE MISSING: {path} -- the fixture tests need ../shared/fixtures beside the source "
                    "tree; set EMBER_FIXTURES=/path/to/fixtures to point elsewhere")
    return path


def model_path(name: str) -> str:
    return fixture(f"models/{name}.gguf")


def ember_binary() -> str:
    path = os.environ.get("EMBER_BINARY") or os.path.join(ROOT, "build", "app", "ember")
    if not os.path.exists(path):
        pytest.fail(f"the ember CLI is not at {path}: build it (cmake --build build --target ember) or set EMBER_BINARY")
    return path


def plugin(name: str) -> str:
    path = os.path.abspath(os.path.join(os.environ.get("EMBER_PLUGIN_DIR") or os.path.join(ROOT, "build", "plugins"), f"lib{name}.so"))
    if not os.path.exists(path):
        pytest.fail(f"plugin {path} is not built (cmake --build build --target {name})")
    return path


def run_cli(*args, check=True) -> subprocess.CompletedProcess:
    p = subprocess.run([ember_binary(), *args], capture_output=True, text=True)
    if check and p.returncode != 0:
        pytest.fail(f"ember {' '.join(args)} exited {p.returncode}: {p.stderr}")
    return p


def cli_json(*args) -> dict:
    return json.loads(run_cli(*args, "--json").stdout)


@pytest.fixture(scope="session")
def ember_mod():
    import ember

    return ember
