"""Python hooks: observe, intervene, fail.

Rungs: interventions (a Python hook that zeroes after_mlp at layer 1 gives bit for bit what
the built-in ablate plugin gives, in process and through `ember run`'s supervised worker;
steering by writing equals the steer plugin); smoke (observation changes nothing; errors
are Python exceptions naming the problem).
"""

import json
import os

import numpy as np
import pytest

from conftest import model_path, plugin, run_cli

PROMPT = "Once upon a time, there was a little girl"
MODEL = "stories260K"


def zero(x, ctx):
    x[:] = 0.0


def test_zeroing_hook_equals_ablate_plugin_in_process(ember_mod):
    with ember_mod.Model(model_path(MODEL), route="fast", threads=2) as m:
        stages = ["after_mlp", "after_layer", "before_logits"]
        py_logits, py_cache = m.run_with_hooks(PROMPT, hooks={("after_mlp", 1): zero}, stages=stages, logits="all")
        so_logits, so_cache = m.run_with_hooks(PROMPT, experiments=[plugin("ablate")],
                                               config={"stage": "after_mlp", "layers": [1]}, stages=stages,
                                               logits="all")
        plain_logits, plain_cache = m.run_with_cache(PROMPT, stages=stages, logits="all")
    assert set(py_cache) == set(so_cache)
    for key in py_cache:
        assert py_cache[key].tobytes() == so_cache[key].tobytes(), key
    assert py_logits.tobytes() == so_logits.tobytes()
    assert not py_cache["after_mlp", 1].any()
    # The edit reached the model: later layers and the logits differ from the plain run.
    assert py_cache["after_layer", 1].tobytes() != plain_cache["after_layer", 1].tobytes()
    assert py_logits.tobytes() != plain_logits.tobytes()
    assert py_cache["after_layer", 0].tobytes() == plain_cache["after_layer", 0].tobytes()


def test_zeroing_hook_equals_ember_run_with_ablate(ember_mod, tmp_path):
    model = model_path(MODEL)
    config = tmp_path / "ablate.toml"
    out = tmp_path / "run"
    config.write_text(f"""
[model]
path = "{model}"
route = "reference"
threads = 1
[prompt]
text = "{PROMPT}"
[generation]
max_tokens = 1
[output]
dir = "{out}"
extract = true
stages = ["after_layer"]
[hooks]
defaults = false
[[experiment]]
plugin = "{plugin('ablate')}"
[experiment.config]
stage = "after_mlp"
layers = [1]
""")
    run_cli("run", str(config))
    manifest = json.load(open(out / "manifest.json"))
    with ember_mod.Model(model, route="reference", threads=1) as m:
        _, cache = m.run_with_hooks(PROMPT, hooks={("after_mlp", 1): zero}, stages=["after_layer"], logits="none")
        n_layers = m.n_layers
    assert len(manifest["tensors"]) == len(cache) == n_layers
    for t in manifest["tensors"]:
        assert np.load(out / t["file"]).tobytes() == cache[t["stage"], t["layer"]].tobytes(), t["file"]


def test_returning_a_replacement_equals_writing_in_place(ember_mod):
    direction = np.linspace(-1, 1, 64, dtype=np.float32)
    with ember_mod.Model(model_path(MODEL)) as m:
        def add_in_place(x, ctx):
            x += direction

        def add_returned(x, ctx):
            return x + direction

        a_logits, a = m.run_with_hooks(PROMPT, hooks={("after_layer", 2): add_in_place}, stages=["after_layer"])
        b_logits, b = m.run_with_hooks(PROMPT, hooks={("after_layer", 2): add_returned}, stages=["after_layer"])
        _, plain = m.run_with_cache(PROMPT)
    assert a_logits.tobytes() == b_logits.tobytes()
    assert a["after_layer", 4].tobytes() == b["after_layer", 4].tobytes()
    assert np.array_equal(a["after_layer", 2], plain["after_layer", 2] + direction)


def test_observing_changes_nothing_and_sees_the_cached_values(ember_mod):
    seen = {}
    calls = []

    def observe(x, ctx):
        calls.append((ctx.stage, ctx.layer, ctx.phase, tuple(ctx.positions)))
        seen[ctx.layer] = np.array(x)

    with ember_mod.Model(model_path(MODEL)) as m:
        logits, cache = m.run_with_hooks(PROMPT, hooks={("after_layer", "all"): observe})
        plain_logits, plain = m.run_with_cache(PROMPT)
        n = len(m.tokenize(PROMPT))
    assert logits.tobytes() == plain_logits.tobytes()
    assert [c[1] for c in calls] == list(range(len(seen)))  # once per layer, in order
    assert calls[0] == ("after_layer", 0, "prefill", tuple(range(n)))
    for layer, x in seen.items():
        assert x.tobytes() == plain["after_layer", layer].tobytes()


def test_hook_exception_is_the_runs_failure(ember_mod):
    def boom(x, ctx):
        raise ValueError("no thanks")

    with ember_mod.Model(model_path(MODEL)) as m:
        with pytest.raises(ember_mod.HookError) as e:
            m.run_with_hooks(PROMPT, hooks={("after_mlp", 3): boom})
        assert str(e.value) == "python hook 'test_hook_exception_is_the_runs_failure.<locals>.boom' failed in " \
                               "after_mlp (phase=prefill, layer=3): ValueError: no thanks"
        assert isinstance(e.value.__cause__, ValueError)
        # The model is usable after a failed run.
        _, cache = m.run_with_cache(PROMPT)
        assert cache["after_layer", 0].shape[0] == len(m.tokenize(PROMPT))


def test_a_hook_exception_with_an_experiment_stops_both(ember_mod):
    def boom(x, ctx):
        raise RuntimeError("stop")

    with ember_mod.Model(model_path(MODEL)) as m:
        with pytest.raises(ember_mod.HookError, match="after_layer \\(phase=prefill, layer=0\\): RuntimeError: stop"):
            m.run_with_hooks(PROMPT, hooks={("after_layer", 0): boom}, experiments=[plugin("ablate")],
                             config={"stage": "after_mlp", "layers": [1]})


def test_bad_hooks_raise_naming_the_problem(ember_mod):
    with ember_mod.Model(model_path(MODEL)) as m:
        last = m.n_layers - 1
        with pytest.raises(ember_mod.HookError, match=r"returned an array of shape \(3\); the activation is"):
            m.run_with_hooks(PROMPT, hooks={("after_mlp", 0): lambda x, c: np.zeros(3)})
        with pytest.raises(ember_mod.HookError, match="returned a str"):
            m.run_with_hooks(PROMPT, hooks={("after_mlp", 0): lambda x, c: "zero"})
        with pytest.raises(ember_mod.UsageError, match="unknown stage 'after_mpl'"):
            m.run_with_hooks(PROMPT, hooks={("after_mpl", 0): zero})
        with pytest.raises(ember_mod.UsageError, match=f"layer {last + 1} does not exist"):
            m.run_with_hooks(PROMPT, hooks={("after_mlp", last + 1): zero})
        with pytest.raises(ember_mod.UsageError, match="is a layer stage"):
            m.run_with_hooks(PROMPT, hooks={"after_mlp": zero})
        with pytest.raises(ember_mod.UsageError, match="has no layers"):
            m.run_with_hooks(PROMPT, hooks={("after_logits", 0): zero})
        with pytest.raises(TypeError, match="not callable"):
            m.run_with_hooks(PROMPT, hooks={("after_mlp", 0): 3})
        with pytest.raises(ember_mod.HookError, match="read-only"):
            def write_pattern(x, ctx):
                x[0, 0] = 1.0
            m.run_with_hooks(PROMPT, hooks={("attention_pattern", 0): write_pattern})
        with pytest.raises(ember_mod.EmberError, match="running already"):
            m.run_with_hooks(PROMPT, hooks={("after_mlp", 0): lambda x, c: m.run_with_cache(PROMPT) and None})
        with pytest.raises(ember_mod.UsageError, match="unknown stage 'resid'"):
            m.run_with_cache(PROMPT, stages=["resid"])
        with pytest.raises(ember_mod.EmberError, match="layers"):
            m.run_with_cache(PROMPT, layers=[last + 1])
        with pytest.raises(ember_mod.EmberError, match="positions"):
            m.run_with_cache(PROMPT, positions=[500])
        with pytest.raises(ember_mod.EmberError, match="occurs fewer"):
            m.run_with_cache(PROMPT, positions="substring:dragon")
        # Still usable after all of that.
        assert m.run_with_cache(PROMPT)[0].shape == (1, m.info["dims"]["n_vocab"])


def test_logits_stage_hooks(ember_mod):
    with ember_mod.Model(model_path(MODEL)) as m:
        def bump(x, ctx):
            assert ctx.layer is None and ctx.positions == [len(m.tokenize(PROMPT)) - 1]
            x[:, 7] = 100.0

        logits, _ = m.run_with_hooks(PROMPT, hooks={"after_logits": bump})
    assert logits[0, 7] == 100.0


def test_closed_model_raises(ember_mod):
    m = ember_mod.Model(model_path(MODEL))
    m.close()
    for call in (lambda: m.run_with_cache(PROMPT), lambda: m.tokenize(PROMPT), lambda: m.generate(PROMPT),
                 lambda: m.info, lambda: m.n_layers):
        with pytest.raises(ember_mod.EmberError, match="is closed"):
            call()


def test_bad_model_files_raise(ember_mod, tmp_path):
    with pytest.raises(ember_mod.EmberError, match="nothing.gguf"):
        ember_mod.Model(tmp_path / "nothing.gguf")
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\x00" * 20)
    with pytest.raises(ember_mod.EmberError, match="bad.gguf"):
        ember_mod.Model(bad)
    with pytest.raises(ember_mod.UsageError, match="route 'turbo'"):
        ember_mod.Model(model_path(MODEL), route="turbo")
