"""run_with_cache against `ember extract`, bit for bit, on every family and both routes.

Rungs: activation-reference (the arrays are the CLI's own .npy bytes, and after_layer
matches llama.cpp's f32 goldens within the extraction tests' tolerance); smoke (origin,
read-only views, lifetimes).
"""

import gc
import json
import os

import numpy as np
import pytest

from conftest import FAMILY_MODELS, ROUTES, fixture, model_path, run_cli

PROMPT = "كتب الطالب الدرس في المكتبة"


def npy_equal_bytes(path, array):
    """The array is the file's data: same dtype, shape and bytes (the .npy header aside)."""
    on_disk = np.load(path)
    assert on_disk.dtype == np.float32 and array.dtype == np.float32
    assert on_disk.shape == array.shape, path
    assert on_disk.tobytes() == np.ascontiguousarray(array).tobytes(), f"{path}: the values differ"


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", FAMILY_MODELS)
def test_every_stage_equals_ember_extract(ember_mod, tmp_path, name, route):
    model = model_path(name)
    out = tmp_path / "cli"
    run_cli("extract", "--model", model, "--prompt", PROMPT, "--out", str(out), "--stages",
            ",".join(s["name"] for s in ember_mod.stages() if s["extractable"]), "--logits", "last", "--route", route, "--threads", "2")
    manifest = json.load(open(out / "manifest.json"))

    with ember_mod.Model(model, route=route, threads=2) as m:
        logits, cache = m.run_with_cache(PROMPT, stages="all", logits="last")
    assert len(cache) == len(manifest["tensors"])
    for t in manifest["tensors"]:
        a = cache[t["stage"], t["layer"]] if t["layer"] is not None else cache[t["stage"]]
        npy_equal_bytes(out / t["file"], a)
        o = a.origin
        assert (o.stage, o.layer, o.phase) == (t["stage"], t["layer"], t["phase"])
        assert list(o.positions) == t["positions"]
        assert o.model_sha256 == manifest["model"]["sha256"]
        assert (o.route, o.kernel) == (manifest["backend"]["route"], manifest["backend"]["variant"])
    npy_equal_bytes(out / "logits.npy", logits)


@pytest.mark.parametrize("route", ROUTES)
def test_selection_spec_equals_select(ember_mod, tmp_path, route):
    model = model_path("synth-llama3-q8_0")
    out = tmp_path / "cli"
    run_cli("extract", "--model", model, "--prompt", PROMPT, "--out", str(out), "--stages", "after_layer,after_mlp",
            "--layers", "0,2", "--select", "substring:الدرس", "--logits", "selected", "--route", route)
    manifest = json.load(open(out / "manifest.json"))
    with ember_mod.Model(model, route=route) as m:
        logits, cache = m.run_with_cache(PROMPT, stages=["after_layer", "after_mlp"], layers=[0, 2],
                                         positions="substring:الدرس", logits="selected")
    assert sorted(cache) == [("after_layer", 0), ("after_layer", 2), ("after_mlp", 0), ("after_mlp", 2)]
    for t in manifest["tensors"]:
        npy_equal_bytes(out / t["file"], cache[t["stage"], t["layer"]])
        assert cache[t["stage"], t["layer"]].origin.select == "substring:الدرس"
    npy_equal_bytes(out / "logits.npy", logits)


@pytest.mark.parametrize("name", ["stories260K", "synth-qwen3-k-q5_1"])
def test_after_layer_matches_llama_cpp_f32_golden(ember_mod, name):
    golden = json.load(open(fixture(f"golden/{name}.f32.golden.json")))
    with ember_mod.Model(model_path(name), route="reference") as m:
        for p in golden["prompts"]:
            assert m.tokenize(p["text"]).ids == p["tokens"]
            _, cache = m.run_with_cache(p["text"], stages=["after_layer", "before_logits"])
            for key, h in p["hidden"].items():
                want = np.array(h["values"], dtype=np.float64).reshape(h["rows"], h["cols"])
                got = cache["before_logits"] if key == "result_norm" else cache["after_layer", int(key.split("-")[1])]
                scale = np.abs(want).max()
                assert np.abs(got - want).max() <= 1e-6 * scale, f"{name} {key}"


def test_arrays_are_read_only_views_that_outlive_the_model(ember_mod):
    m = ember_mod.Model(model_path("stories260K"))
    _, cache = m.run_with_cache("Once upon a time")
    a = cache["after_layer", 1]
    with pytest.raises(ValueError):
        a[0, 0] = 1.0
    first = np.array(a)
    m.close()
    del m, cache
    gc.collect()
    assert np.array_equal(a, first)  # the view keeps its values alive
    assert a.base is not None and not a.flags.owndata  # no copy was made


def test_cache_keys_and_missing_entries(ember_mod):
    with ember_mod.Model(model_path("stories260K")) as m:
        _, cache = m.run_with_cache("Once upon a time", stages=["after_layer", "before_logits"], layers=[1])
        assert ("after_layer", 1) in cache and "before_logits" in cache
        # A logits stage at every position makes the prefill compute every row's (as --logits all).
        assert cache["before_logits"].shape == (len(m.tokenize("Once upon a time")), m.info["dims"]["n_embd"])
        with pytest.raises(KeyError, match="after_mlp"):
            cache["after_mlp", 1]
        with pytest.raises(KeyError, match="after_layer layers \\[1\\]"):
            cache["after_layer", 0]
        with pytest.raises(TypeError):
            cache["after_layer", "1"]
