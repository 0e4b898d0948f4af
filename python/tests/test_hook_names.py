"""TransformerLens and Hugging Face hook names on the cache and the hooks, through the
engine's one hook-name table (engine/hooks/hook_names; no second table in Python).

Rungs: smoke (each alias is the very array of its Ember stage); interventions (a hook
keyed by a TransformerLens name equals the ablate plugin bit for bit).
"""

import numpy as np
import pytest

from conftest import model_path, plugin

PROMPT = "Once upon a time, there was a little girl"


def test_transformer_lens_names_on_the_cache(ember_mod):
    with ember_mod.Model(model_path("stories260K")) as m:
        _, cache = m.run_with_cache(PROMPT, stages="all")
    pairs = [
        (("resid_post", 2), ("after_layer", 2)),
        (("blocks.2.hook_resid_post",), ("after_layer", 2)),
        (("resid_pre", 0), ("before_layer", 0)),
        (("attn_out", 1), ("after_attention", 1)),
        (("mlp_out", 1), ("after_mlp", 1)),
        (("z", 1), ("head_outputs", 1)),
        (("blocks.1.attn.hook_z",), ("head_outputs", 1)),
        (("pattern", 3), ("attention_pattern", 3)),
        (("post", 4), ("mlp_activation", 4)),
        (("blocks.4.mlp.hook_post",), ("mlp_activation", 4)),
        (("model.layers.3.output",), ("after_layer", 3)),
        (("resid_mid", 1), ("residual_mid", 1)),
        # Llama's post_attention_layernorm is the MLP's input norm (Gemma's is the attention post-norm).
        (("model.layers.1.post_attention_layernorm",), ("mlp_input", 1)),
        (("model.layers.1.mlp.input",), ("mlp_input", 1)),
    ]
    for alias, stage in pairs:
        key = alias[0] if len(alias) == 1 else alias
        assert cache[key] is cache[stage], alias
        assert key in cache
    # resid_mid is the residual after the attention add.
    assert np.array_equal(cache["resid_mid", 1], cache["resid_pre", 1] + cache["attn_out", 1])


def test_names_the_table_refuses_say_why(ember_mod):
    with ember_mod.Model(model_path("stories260K")) as m:
        _, cache = m.run_with_cache(PROMPT, stages="all")
        with pytest.raises(ember_mod.EmberError, match="ln_final.hook_normalized"):
            cache["ln_final.hook_normalized"]
        with pytest.raises(ember_mod.EmberError, match="layer 9"):
            cache["blocks.9.hook_resid_post"]
        with pytest.raises(KeyError):
            cache["resid_sideways", 1]
    with ember_mod.Model(model_path("synth-gemma4-k-q4_1")) as g:  # post-normed block outputs
        _, cache = g.run_with_cache(PROMPT, stages=["after_mlp"])
        with pytest.raises(ember_mod.EmberError, match="model.layers.1.mlp"):
            cache["model.layers.1.mlp"]
        assert cache["mlp_out", 1] is cache["after_mlp", 1]


def test_a_hook_keyed_by_a_transformer_lens_name_equals_ablate(ember_mod):
    def zero(x, ctx):
        x[:] = 0.0

    with ember_mod.Model(model_path("stories260K")) as m:
        a_logits, a = m.run_with_hooks(PROMPT, hooks={"blocks.1.hook_mlp_out": zero})
        b_logits, b = m.run_with_hooks(PROMPT, hooks={("mlp_out", 1): zero})
        c_logits, c = m.run_with_hooks(PROMPT, experiments=[plugin("ablate")],
                                       config={"stage": "after_mlp", "layers": [1]})
    assert a_logits.tobytes() == b_logits.tobytes() == c_logits.tobytes()
    for key in a:
        assert a[key].tobytes() == b[key].tobytes() == c[key].tobytes()
