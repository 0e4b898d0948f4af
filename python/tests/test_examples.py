"""The worked example of docs/python.md, python/examples/arabic_root_probe.py, run as
written (its own process, the fixture model, an output directory that does not exist yet),
so that it cannot rot. Rung: smoke for the script as a whole; its one check of numbers is
its own assertion that run_with_cache gives the bytes extract wrote (activation-reference)."""

import os
import subprocess
import sys

import ember
from conftest import ROOT, model_path

SCRIPT = os.path.join(ROOT, "python", "examples", "arabic_root_probe.py")


def test_arabic_root_probe_runs_as_documented(tmp_path):
    out = tmp_path / "probe"  # not created: the script makes its own output directory
    p = subprocess.run([sys.executable, SCRIPT, model_path("synth-llama3-q8_0"), str(out)], capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, f"the example exited {p.returncode}:\n{p.stdout}\n{p.stderr}"
    lines = p.stdout.splitlines()
    with ember.Model(model_path("synth-llama3-q8_0")) as m:
        n_layers = m.n_layers
    assert sum(line.startswith("layer ") for line in lines) == n_layers, p.stdout
    assert any(line.startswith("best layer ") for line in lines), p.stdout
    assert any(line.startswith("origin of the cached rows:") for line in lines), p.stdout
    run = ember.open_run(str(out / "run"))  # the directory it wrote verifies
    assert len(run.samples) == 36  # the script's 6 roots x 6 templates
