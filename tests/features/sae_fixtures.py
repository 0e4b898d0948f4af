#!/usr/bin/env python3
"""Fixture SAEs for Ember's feature tests, and their NumPy reference.

    sae_fixtures.py write OUT_DIR ACTS.npy LAYER SEED
        Writes one directory per fixture under OUT_DIR (SAELens 5.x and 6.x layouts, every
        architecture and option Ember reads, F32/F16/BF16 weights, a transcoder, Gemma
        Scope's params.npz) and OUT_DIR/fixtures.json listing them. ACTS.npy, activations of
        the site the SAEs read ([T, d_in]), only sets the weights' scale so that about half
        the features fire.

    sae_fixtures.py reference SAE_DIR ACTS.npy OUT_PREFIX
        Computes, in float64 from the files alone (the formulas of SAELens's encode/decode,
        not Ember's code), OUT_PREFIX.features.npy [T, d_sae], OUT_PREFIX.recon.npy
        [T, d_out], OUT_PREFIX.margin.npy [T, d_sae]: how far each pre-activation is from
        the boundary that decides whether the feature fires, and OUT_PREFIX.scale.npy
        [T, d_sae]: sum_i |x_c[i] W_enc[i, j]| (gated: the larger of its two paths'), what
        a float32 sum's rounding error is bounded by (an encoder summing in float32).

The safetensors files are written by hand (an 8-byte header length, the JSON header, the
data), so the tests need NumPy alone.
"""
import json
import os
import struct
import sys

import numpy as np


# ---- safetensors, written and read by hand ----

def bf16_bits(a):
    """float32 -> bfloat16 bits, rounding to nearest even (as torch does)."""
    bits = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype(np.uint16)


def write_safetensors(path, tensors, dtype="F32", metadata=None):
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype=np.float32)
        if dtype == "F32":
            raw = a.astype("<f4").tobytes()
        elif dtype == "F16":
            raw = a.astype("<f2").tobytes()
        else:
            raw = bf16_bits(a).astype("<u2").tobytes()
        header[name] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    if metadata:
        header["__metadata__"] = metadata
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for raw in blobs:
            f.write(raw)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        raw = body[begin:end]
        if entry["dtype"] == "F32":
            a = np.frombuffer(raw, dtype="<f4")
        elif entry["dtype"] == "F16":
            a = np.frombuffer(raw, dtype="<f2")
        else:
            a = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        out[name] = a.astype(np.float64).reshape(entry["shape"])
    return out


# ---- the fixtures ----

def weights(rng, d_in, d_sae, d_out, scale, arch):
    w = {
        "W_enc": rng.standard_normal((d_in, d_sae)) / (np.sqrt(d_in) * scale),
        "W_dec": rng.standard_normal((d_sae, d_out)) * (scale / np.sqrt(d_sae)),
        "b_dec": rng.standard_normal(d_out) * 0.1 * scale,
    }
    if arch == "gated":
        w["b_gate"] = rng.standard_normal(d_sae) * 0.3
        w["b_mag"] = rng.standard_normal(d_sae) * 0.3
        w["r_mag"] = rng.standard_normal(d_sae) * 0.2
    else:
        w["b_enc"] = rng.standard_normal(d_sae) * 0.3
    if arch == "jumprelu":
        w["threshold"] = np.abs(rng.standard_normal(d_sae)) * 0.4
    return w


def saelens_cfg(version, arch, d_in, d_sae, hook, options):
    cfg = {"d_in": d_in, "d_sae": d_sae, "dtype": "float32", "device": "cpu",
           "apply_b_dec_to_input": options.get("apply_b_dec_to_input", True),
           "normalize_activations": options.get("normalize_activations", "none")}
    if "norm_scaling_factor" in options:
        cfg["norm_scaling_factor"] = options["norm_scaling_factor"]
    if version == 6:
        cfg["architecture"] = arch
        cfg["reshape_activations"] = "none"
        cfg["metadata"] = {"model_name": "fixture", "hook_name": hook, "hook_head_index": None,
                           "prepend_bos": True, "context_size": 128, "sae_lens_version": "6.5.1"}
        if arch == "topk":
            cfg["k"] = options["k"]
    else:
        # 5.x: the hook at the top level, topk as an activation function.
        cfg.update({"architecture": "standard" if arch == "topk" else arch, "hook_name": hook, "hook_layer": 0,
                    "hook_head_index": None, "model_name": "fixture", "context_size": 128,
                    "finetuning_scaling_factor": False, "sae_lens_training_version": "5.9.1",
                    "activation_fn_str": "topk" if arch == "topk" else "relu",
                    "activation_fn_kwargs": {"k": options["k"]} if arch == "topk" else {}})
    return cfg


# name, SAELens version, architecture, weight dtype, options
FIXTURES = [
    ("v6-standard", 6, "standard", "F32", {}),
    ("v6-standard-no-bdec", 6, "standard", "F32", {"apply_b_dec_to_input": False}),
    ("v6-jumprelu", 6, "jumprelu", "F32", {}),
    ("v6-topk", 6, "topk", "F32", {"k": 7}),
    ("v6-gated", 6, "gated", "F32", {}),
    ("v6-constant-norm", 6, "standard", "F32", {"normalize_activations": "constant_norm_rescale"}),
    ("v6-layer-norm", 6, "jumprelu", "F32", {"normalize_activations": "layer_norm"}),
    ("v6-scaling-factor", 6, "standard", "F32",
     {"normalize_activations": "expected_average_only_in", "norm_scaling_factor": 1.75}),
    ("v6-f16", 6, "jumprelu", "F16", {}),
    ("v6-bf16", 6, "standard", "BF16", {}),
    ("v5-standard", 5, "standard", "F32", {}),
    ("v5-topk", 5, "topk", "F32", {"k": 5}),
    ("v5-layer-norm", 5, "standard", "F16", {"normalize_activations": "layer_norm"}),
    ("v5-gated", 5, "gated", "F32", {"apply_b_dec_to_input": False}),
]


def write(out_dir, acts_path, layer, seed):
    acts = np.load(acts_path).astype(np.float64)
    d_in = acts.shape[1]
    scale = float(np.sqrt(np.mean(acts ** 2)))
    rng = np.random.default_rng(seed)
    d_sae = 3 * d_in
    hook = f"blocks.{layer}.hook_resid_post"
    listed = []
    for name, version, arch, dtype, options in FIXTURES:
        d = os.path.join(out_dir, name)
        os.makedirs(d)
        w = weights(rng, d_in, d_sae, d_in, scale, arch)
        if options.get("normalize_activations") in ("constant_norm_rescale", "layer_norm"):
            w = weights(rng, d_in, d_sae, d_in, 1.0, arch)  # they read unit-scale inputs
        with open(os.path.join(d, "cfg.json"), "w") as f:
            json.dump(saelens_cfg(version, arch, d_in, d_sae, hook, options), f)
        write_safetensors(os.path.join(d, "sae_weights.safetensors"), w, dtype)
        listed.append({"name": name, "format": f"saelens-{version}", "site": f"after_layer:{layer}"})

    # A transcoder: reads the residual the MLP block reads (hook_resid_mid) and writes the
    # MLP's output (hook_mlp_out), as MLP transcoders do.
    d = os.path.join(out_dir, "v6-transcoder")
    os.makedirs(d)
    w = weights(rng, d_in, d_sae, d_in, scale, "standard")
    cfg = saelens_cfg(6, "transcoder", d_in, d_sae, f"blocks.{layer}.hook_resid_mid", {})
    cfg.update({"d_out": d_in, "hook_name_out": f"blocks.{layer}.hook_mlp_out", "hook_layer_out": layer,
                "hook_head_index_out": None, "apply_b_dec_to_input": False})
    with open(os.path.join(d, "cfg.json"), "w") as f:
        json.dump(cfg, f)
    write_safetensors(os.path.join(d, "sae_weights.safetensors"), w, "F32")
    listed.append({"name": "v6-transcoder", "format": "saelens-6", "site": f"residual_mid:{layer}",
                   "output_site": f"after_mlp:{layer}"})

    # Gemma Scope: params.npz (np.savez: stored zip members), JumpReLU, no site in the file.
    d = os.path.join(out_dir, "gemma-scope")
    os.makedirs(d)
    w = weights(rng, d_in, d_sae, d_in, scale, "jumprelu")
    np.savez(os.path.join(d, "params.npz"), **{k: v.astype(np.float32) for k, v in w.items()})
    listed.append({"name": "gemma-scope", "format": "gemma-scope", "site": f"after_layer:{layer}",
                   "site_given": True})

    # Gemma Scope 2: config.json (Hugging Face module names) + params.safetensors with
    # lowercase keys, JumpReLU; an SAE at model.layers.L.output, and an MLP transcoder
    # reading the MLP's normed input (pre_feedforward_layernorm, as Gemma Scope 2's MLP
    # transcoders do) and writing its output (F16 weights).
    for name, hook_in, hook_out, dtype, site, output_site in (
            ("gemma-scope-2", f"model.layers.{layer}.output", f"model.layers.{layer}.output", "F32",
             f"after_layer:{layer}", None),
            ("gemma-scope-2-transcoder", f"model.layers.{layer}.pre_feedforward_layernorm.output",
             f"model.layers.{layer}.mlp.output", "F16", f"mlp_input:{layer}", f"after_mlp:{layer}")):
        d = os.path.join(out_dir, name)
        os.makedirs(d)
        w = weights(rng, d_in, d_sae, d_in, scale, "jumprelu")
        write_safetensors(os.path.join(d, "params.safetensors"), {k.lower(): v for k, v in w.items()}, dtype)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump({"hf_hook_point_in": hook_in, "hf_hook_point_out": hook_out, "width": d_sae,
                       "model_name": "fixture", "architecture": "jump_relu", "l0": 20,
                       "affine_connection": False, "type": "transcoder" if output_site else "sae"}, f)
        entry = {"name": name, "format": "gemma-scope-2", "site": site}
        if output_site:
            entry["output_site"] = output_site
        listed.append(entry)
    with open(os.path.join(out_dir, "fixtures.json"), "w") as f:
        json.dump(listed, f)


# ---- the reference: SAELens's formulas in float64 ----

def load(sae_dir):
    if os.path.exists(os.path.join(sae_dir, "params.npz")):
        z = np.load(os.path.join(sae_dir, "params.npz"))
        w = {k: z[k].astype(np.float64) for k in z.files}
        return {"architecture": "jumprelu", "apply_b_dec_to_input": False, "normalize_activations": "none"}, w
    if os.path.exists(os.path.join(sae_dir, "params.safetensors")):  # Gemma Scope 2
        with open(os.path.join(sae_dir, "config.json")) as f:
            raw = json.load(f)
        w = {k.replace("w_enc", "W_enc").replace("w_dec", "W_dec"): v
             for k, v in read_safetensors(os.path.join(sae_dir, "params.safetensors")).items()}
        transcoder = raw["hf_hook_point_out"] != raw["hf_hook_point_in"]
        return {"architecture": "jumprelu_transcoder" if transcoder else "jumprelu", "apply_b_dec_to_input": False,
                "normalize_activations": "none"}, w
    with open(os.path.join(sae_dir, "cfg.json")) as f:
        cfg = json.load(f)
    w = read_safetensors(os.path.join(sae_dir, "sae_weights.safetensors"))
    if cfg.get("activation_fn_str") == "topk":
        cfg["architecture"] = "topk"
        cfg["k"] = cfg["activation_fn_kwargs"]["k"]
    return cfg, w


def reference(sae_dir, acts_path, out_prefix):
    cfg, w = load(sae_dir)
    x = np.load(acts_path).astype(np.float64)
    arch = cfg["architecture"]
    transcoder = arch.endswith("transcoder")
    norm = cfg.get("normalize_activations", "none")
    if norm == "constant_norm_rescale":
        coeff = np.sqrt(x.shape[1]) / np.linalg.norm(x, axis=-1, keepdims=True)
        x_in, undo = x * coeff, (lambda r: r / coeff)
    elif norm == "layer_norm":
        mu = x.mean(axis=-1, keepdims=True)
        std = (x - mu).std(axis=-1, ddof=1, keepdims=True)  # torch.std is unbiased
        x_in, undo = (x - mu) / (std + 1e-5), (lambda r: r * std + mu)
    elif norm == "expected_average_only_in":
        s = cfg["norm_scaling_factor"]
        x_in, undo = x * s, (lambda r: r / s)
    else:
        x_in, undo = x, (lambda r: r)
    if transcoder:
        undo = lambda r: r
    apply_b_dec = cfg.get("apply_b_dec_to_input", True) and not transcoder
    x_c = x_in - (w["b_dec"] if apply_b_dec else 0.0)
    if arch == "gated":
        gate = x_c @ w["W_enc"] + w["b_gate"]
        magnitude = x_c @ (w["W_enc"] * np.exp(w["r_mag"])) + w["b_mag"]
        features = (gate > 0) * np.maximum(magnitude, 0)
        scale = np.abs(x_c) @ np.abs(w["W_enc"]) * np.maximum(np.exp(w["r_mag"]), 1.0)
        # fires when gate > 0 and magnitude > 0: the nearer boundary decides
        margin = np.minimum(np.abs(gate), np.abs(magnitude))
    else:
        pre = x_c @ w["W_enc"] + w["b_enc"]
        scale = np.abs(x_c) @ np.abs(w["W_enc"])
        if arch in ("standard", "transcoder"):
            features, margin = np.maximum(pre, 0), np.abs(pre)
        elif arch in ("jumprelu", "jumprelu_transcoder"):
            features = np.where(pre > w["threshold"], np.maximum(pre, 0), 0.0)
            margin = np.minimum(np.abs(pre - w["threshold"]), np.abs(pre))
        elif arch == "topk":
            k = cfg["k"]
            order = np.argsort(-pre, axis=-1, kind="stable")
            features = np.zeros_like(pre)
            rows = np.arange(pre.shape[0])[:, None]
            features[rows, order[:, :k]] = np.maximum(pre[rows, order[:, :k]], 0)
            # the boundary: between the k-th and the (k+1)-th largest, and 0
            kth = pre[rows[:, 0], order[:, k - 1]][:, None]
            after = pre[rows[:, 0], order[:, k]][:, None] if k < pre.shape[1] else kth - 1
            boundary = (kth + after) / 2
            margin = np.minimum(np.abs(pre - boundary), np.abs(pre))
        else:
            raise SystemExit(f"unknown architecture {arch}")
    recon = undo(features @ w["W_dec"] + w["b_dec"])
    np.save(out_prefix + ".features.npy", features.astype(np.float64))
    np.save(out_prefix + ".recon.npy", recon.astype(np.float64))
    np.save(out_prefix + ".margin.npy", margin.astype(np.float64))
    np.save(out_prefix + ".scale.npy", scale.astype(np.float64))


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    elif len(sys.argv) == 5 and sys.argv[1] == "reference":
        reference(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        raise SystemExit(__doc__)
