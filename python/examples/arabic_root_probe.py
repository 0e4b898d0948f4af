# %% [markdown]
# # An Arabic-root probe, from Python
#
# Does a model's residual stream tell which triliteral root a word is built on? We build
# a dataset of sentences from templates and roots, extract the residual stream
# (`after_layer`) at the last token of the root word at every layer with `m.extract`
# (the CLI's `ember extract --dataset`, the same files and manifest), train a linear probe
# per layer on some samples and test it on held-out ones, then ablate the best layer's
# MLP with a Python hook and see what the probe makes of it.
#
#     PYTHONPATH=build/python python3 python/examples/arabic_root_probe.py [MODEL.gguf] [OUT_DIR]
#
# The selected token is (the end of) the root word itself, so even the fixture model's
# random weights separate the roots perfectly (its embedding already does): the point here
# is the workflow. A real study uses a real model (a Llama 3.2 1B GGUF) and also probes
# tokens after the root word, to ask whether the root is carried forward.

# %%
import json
import os
import sys
import tempfile

import numpy as np

import ember

MODEL = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "..", "shared",
                                                           "fixtures", "models", "synth-llama3-q8_0.gguf")
OUT = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp(prefix="ember-probe-")
os.makedirs(OUT, exist_ok=True)

# %% [markdown]
# ## The dataset: roots in the perfect verb form, in sentence templates
# Each sample selects the last token of its root word (`substring:WORD:last`: byte spans,
# so a BPE token that also holds a space is still found).

# %%
roots = {"ktb": "كتب", "drs": "درس", "ʿlm": "علم", "fth": "فتح", "šrb": "شرب", "ḏhb": "ذهب"}
templates = [
    "{w} الطالب في الصباح",
    "هل {w} أخوك أمس؟",
    "قال المعلم إن الولد {w} بسرعة",
    "{w} الرجل ثم عاد إلى البيت",
    "في المساء {w} الجميع",
    "لا أعرف لماذا {w} صديقي",
]
dataset = os.path.join(OUT, "roots.jsonl")
with open(dataset, "w", encoding="utf-8") as f:
    for t_index, template in enumerate(templates):
        for label, word in roots.items():
            f.write(json.dumps({"text": template.format(w=word), "select": f"substring:{word}:last", "root": label,
                                "template": t_index}, ensure_ascii=False) + "\n")

# %% [markdown]
# ## Extract every layer's residual stream at the selected tokens

# %%
m = ember.Model(MODEL)
print(m, m.info["dims"]["n_embd"], "features")
run = m.extract(dataset=dataset, out=os.path.join(OUT, "run"), stages=["after_layer"], overwrite=True)
samples = run.samples
rows = run.rows if isinstance(run.rows, list) else run.rows.to_dict("records")
labels = sorted(roots)
y = np.array([labels.index(samples[r["sample"]]["metadata"]["root"]) for r in rows])
template = np.array([samples[r["sample"]]["metadata"]["template"] for r in rows])
print(len(rows), "rows from", len(samples), "samples; the manifest is verified:", run.manifest["manifest_sha256"][:12])

# %% [markdown]
# ## A linear probe per layer, tested on held-out templates
# Least squares onto one-hot roots; the two last templates are never seen in training,
# so the probe must generalise over contexts, not memorise sentences.

# %%
def fit_probe(X, y, n_classes):
    A = np.c_[X, np.ones(len(X))]
    W = np.linalg.lstsq(A, np.eye(n_classes)[y], rcond=None)[0]
    return W


def accuracy(W, X, y):
    return float((np.argmax(np.c_[X, np.ones(len(X))] @ W, axis=1) == y).mean())


train, test = template < len(templates) - 2, template >= len(templates) - 2
scores = []
for layer in range(m.n_layers):
    X = np.asarray(run.array("after_layer", layer), dtype=np.float64)
    W = fit_probe(X[train], y[train], len(labels))
    scores.append(accuracy(W, X[test], y[test]))
    print(f"layer {layer:2d}: held-out accuracy {scores[-1]:.2f} (chance {1 / len(labels):.2f})")
best = int(np.argmax(scores))

# %% [markdown]
# ## The same rows in process, and an intervention
# `run_with_cache` gives the bytes `extract` wrote; a hook zeroing the best layer's MLP
# output shows how much of the probe's signal that block adds.

# %%
X_best = np.asarray(run.array("after_layer", best), dtype=np.float64)
W = fit_probe(X_best[train], y[train], len(labels))
sample0 = samples[0]
_, cache = m.run_with_cache(sample0["text"], layers=[best], positions=sample0["select"])
assert cache["after_layer", best].tobytes() == np.asarray(run.array("after_layer", best)[:1]).tobytes()


def zero(x, ctx):
    x[:] = 0.0


ablated = []
for s in samples:
    _, c = m.run_with_hooks(s["text"], hooks={("after_mlp", best): zero}, layers=[best], positions=s["select"])
    ablated.append(c["after_layer", best][-1])
ablated = np.array(ablated, dtype=np.float64)
y_samples = np.array([labels.index(s["metadata"]["root"]) for s in samples])
test_samples = np.array([s["metadata"]["template"] >= len(templates) - 2 for s in samples])
print(f"best layer {best}: held-out accuracy {scores[best]:.2f}; with its MLP zeroed "
      f"{accuracy(W, ablated[test_samples], y_samples[test_samples]):.2f}")
print("origin of the cached rows:", cache["after_layer", best].origin)
m.close()
