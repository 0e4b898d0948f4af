"""The three families' forward passes in PyTorch float64, from a GGUF file's dequantized
weights (gguf_reader.py) and the per-layer geometry Ember's manifest records: the
independent reference `ember attribute`'s gradients are checked against by autograd.

Where Ember's reference route rounds on purpose, this model does the same so that both
compute one function: RoPE angles by llama.cpp's float32 recurrence (model-math §3.2), and
Gemma 4's GELU through llama.cpp's F16 table. The table is piecewise constant, so its
gradient is taken as that of the smooth tanh-GELU at the input (docs/attribution.md):
gelu_table(x) = gelu(x) + (table(x) - gelu(x)).detach().
"""
import math

import numpy as np
import torch

F64 = torch.float64


def gelu_table_values():
    """llama.cpp's 65536-entry F16 GELU table, evaluated as the C code does in float32."""
    x = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32)
    a = np.float32(0.044715)
    c = np.float32(0.79788456080286535587989211986876)
    with np.errstate(all="ignore"):
        inner = ((a * x).astype(np.float64) * x.astype(np.float64) + 1.0).astype(np.float32)  # fma(a*x, x, 1)
        z = (c * x) * inner
        t = np.tanh(z.astype(np.float64)).astype(np.float32)
        y = (np.float32(0.5) * x) * (np.float32(1.0) + t)
    return y.astype(np.float16).astype(np.float64)


_TABLE = None
# Table reads whose input is within AMBIGUOUS (relative to its row) of an F16 rounding boundary: there
# an F32 input (Ember's) and an F64 one (this model's) may read neighbouring entries.
AMBIGUOUS = 1e-6
ambiguous_reads = 0


def f16_bits(x):
    return torch.from_numpy(x.numpy().astype(np.float32).astype(np.float16).view(np.uint16).astype(np.int64))


def gelu_f16(x):
    """Forward: the F16 table (0 for x <= -10, x for x >= 10); gradient: the smooth tanh-GELU's."""
    global _TABLE, ambiguous_reads
    if _TABLE is None:
        _TABLE = torch.tensor(gelu_table_values(), dtype=F64)
    xs = x.detach()
    bits = f16_bits(xs)
    inside = (xs > -10) & (xs < 10)
    # F32 rounding of a sum is relative to its terms, not to the result: a margin relative to the row's largest value.
    margin = AMBIGUOUS * xs.abs().amax(dim=-1, keepdim=True)
    split = f16_bits(xs - margin) != f16_bits(xs + margin)
    ambiguous_reads += int((inside & split).sum())
    table = _TABLE[bits]
    table = torch.where(xs <= -10, torch.zeros_like(xs), torch.where(xs >= 10, xs, table))
    smooth = torch.nn.functional.gelu(x, approximate="tanh")
    return smooth + (table - smooth.detach())


def rope_cos_sin(n_tokens, layer, freq_factors):
    """cos, sin [T, n_rot/2] of llama.cpp's float32 angle recurrence theta *= base^(-2/n_rot)."""
    n_rot = layer["n_rot"]
    base = np.float32(layer["rope_base"])
    scale = np.float32(layer["rope_freq_scale"])
    theta_scale = np.power(base, np.float32(-2.0) / np.float32(n_rot), dtype=np.float32)
    cos = np.zeros((n_tokens, n_rot // 2))
    sin = np.zeros((n_tokens, n_rot // 2))
    for t in range(n_tokens):
        theta = np.float32(t)
        for i in range(n_rot // 2):
            factor = np.float32(1.0) if freq_factors is None else np.float32(freq_factors[i])
            angle = scale * (theta / factor)
            cos[t, i] = math.cos(float(angle))
            sin[t, i] = math.sin(float(angle))
            theta = np.float32(theta * theta_scale)
    return torch.tensor(cos, dtype=F64), torch.tensor(sin, dtype=F64)


def rope(x, n_heads, head_dim, n_rot, cos, sin, adjacent):
    """x [T, n_heads * head_dim] rotated pairwise (adjacent pairs for Llama, half-split otherwise)."""
    T = x.shape[0]
    h = x.reshape(T, n_heads, head_dim)
    rot, rest = h[..., :n_rot], h[..., n_rot:]
    if adjacent:
        a, b = rot[..., 0::2], rot[..., 1::2]
    else:
        a, b = rot[..., : n_rot // 2], rot[..., n_rot // 2:]
    c, s = cos[:, None, :], sin[:, None, :]
    ra, rb = a * c - b * s, a * s + b * c
    if adjacent:
        rot = torch.stack([ra, rb], dim=-1).reshape(T, n_heads, n_rot)
    else:
        rot = torch.cat([ra, rb], dim=-1)
    return torch.cat([rot, rest], dim=-1).reshape(T, n_heads * head_dim)


def rms_norm(x, weight, eps):
    y = x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + eps)
    return y if weight is None else y * weight


class TorchModel:
    def __init__(self, gguf, manifest_model):
        self.g = gguf
        self.family = manifest_model["family"]
        self.arch = gguf.meta["general.architecture"]
        dims = manifest_model["dims"]
        self.layers = dims["layers"]
        self.n_layers = dims["n_layers"]
        self.E = dims["n_embd"]
        self.PL = dims.get("n_embd_per_layer", 0)
        self.eps = float(np.float32(gguf.meta[f"{self.arch}.attention.layer_norm_rms_epsilon"]))
        self.gemma = self.family == "gemma4"
        self.softcap = float(gguf.meta.get(f"{self.arch}.final_logit_softcapping", 30.0)) if self.gemma else 0.0
        self.n_swa = gguf.meta.get(f"{self.arch}.attention.sliding_window", 0) if self.gemma else 0
        self.W = {}

    def w(self, name):
        if name not in self.W:
            self.W[name] = torch.tensor(self.g.tensor(name), dtype=F64)
        return self.W[name]

    def opt(self, name):
        return self.w(name) if self.g.has(name) else None

    def forward(self, tokens):
        """Returns (logits [T, V], sites {(stage, layer): tensor}) with every site retaining its grad."""
        T = len(tokens)
        sites = {}

        def site(stage, layer, t):
            t.retain_grad()
            sites[(stage, layer)] = t
            return t

        ids = torch.tensor(tokens)
        x = self.w("token_embd.weight")[ids]
        if self.gemma:
            x = x * float(np.float32(math.sqrt(self.E)))
            if self.PL > 0:
                ple = self.per_layer_inputs(ids, x.detach())  # computed before before_layer(0): constants there
        x = x.clone().requires_grad_(True)
        freqs = self.opt("rope_freqs.weight")
        kv_cache = {}
        self.masks = {}
        for l in range(self.n_layers):
            L = self.layers[l]
            p = f"blk.{l}."
            x = site("before_layer", l, x)
            H, Hkv, D = L["n_head"], L["n_head_kv"], L["head_dim"]
            h = rms_norm(x, self.w(p + "attn_norm.weight"), self.eps)
            q = h @ self.w(p + "attn_q.weight").T
            if self.g.has(p + "attn_q_norm.weight"):
                q = rms_norm(q.reshape(T, H, D), self.w(p + "attn_q_norm.weight"), self.eps).reshape(T, H * D)
            cos, sin = rope_cos_sin(T, L, freqs.numpy() if (freqs is not None and L["uses_rope_freqs"]) else None)
            adjacent = self.family == "llama"
            q = rope(q, H, D, L["n_rot"], cos, sin, adjacent)
            if L["kv_source"] == l:
                k_raw = h @ self.w(p + "attn_k.weight").T
                v_raw = h @ self.w(p + "attn_v.weight").T if self.g.has(p + "attn_v.weight") else k_raw
                v = rms_norm(v_raw.reshape(T, Hkv, D), None, self.eps).reshape(T, Hkv * D) if self.gemma else v_raw
                k = k_raw
                if self.g.has(p + "attn_k_norm.weight"):
                    k = rms_norm(k.reshape(T, Hkv, D), self.w(p + "attn_k_norm.weight"), self.eps).reshape(T, Hkv * D)
                k = rope(k, Hkv, D, L["n_rot"], cos, sin, adjacent)
                kv_cache[l] = (k, v)
            k, v = kv_cache[L["kv_source"]]
            window = self.n_swa if L["attention"] == "sliding_window" else 0
            qh = q.reshape(T, H, D).transpose(0, 1)                  # [H, T, D]
            kh = k.reshape(T, Hkv, D).transpose(0, 1).repeat_interleave(H // Hkv, dim=0)
            vh = v.reshape(T, Hkv, D).transpose(0, 1).repeat_interleave(H // Hkv, dim=0)
            scores = (qh @ kh.transpose(1, 2)) * L["attention_scale"]  # [H, T, T]
            tq = torch.arange(T)[:, None]
            tk = torch.arange(T)[None, :]
            visible = tk <= tq
            if window:
                visible = visible & (tq - tk < window)
            scores = scores.masked_fill(~visible, float("-inf"))
            self.masks[l] = visible.numpy()
            pattern = site("attention_pattern", l, torch.softmax(scores, dim=-1))
            heads = site("head_outputs", l, (pattern @ vh).transpose(0, 1).reshape(T, H * D))
            attn = heads @ self.w(p + "attn_output.weight").T
            if self.gemma:
                attn = rms_norm(attn, self.w(p + "post_attention_norm.weight"), self.eps)
            attn = site("after_attention", l, attn)
            x = site("residual_mid", l, x + attn)
            h2 = site("mlp_input", l, rms_norm(x, self.w(p + "ffn_norm.weight"), self.eps))
            gate = h2 @ self.w(p + "ffn_gate.weight").T
            up = h2 @ self.w(p + "ffn_up.weight").T
            act = gelu_f16(gate) * up if self.gemma else torch.nn.functional.silu(gate) * up
            if self.gemma:
                act = torch.where(gate.detach() <= -10, torch.zeros_like(act), act)
            act = site("mlp_activation", l, act)
            mlp = act @ self.w(p + "ffn_down.weight").T
            if self.gemma:
                mlp = rms_norm(mlp, self.w(p + "post_ffw_norm.weight"), self.eps)
            mlp = site("after_mlp", l, mlp)
            x = x + mlp
            if self.gemma and self.PL > 0:
                g = gelu_f16(x @ self.w(p + "inp_gate.weight").T)
                g = g * ple[:, l * self.PL:(l + 1) * self.PL]
                x = x + rms_norm(g @ self.w(p + "proj.weight").T, self.w(p + "post_norm.weight"), self.eps)
            if self.g.has(p + "layer_output_scale.weight"):
                x = x * self.w(p + "layer_output_scale.weight").reshape(-1)[0]
            x = site("after_layer", l, x)
        normed = site("before_logits", None, rms_norm(x, self.w("output_norm.weight"), self.eps))
        out = self.opt("output.weight")
        logits = normed @ (out if out is not None else self.w("token_embd.weight")).T
        if self.softcap:
            logits = self.softcap * torch.tanh(logits / self.softcap)
        return logits, sites

    def per_layer_inputs(self, ids, x0):
        PL, n = self.PL, self.n_layers
        T = x0.shape[0]
        selected = self.w("per_layer_token_embd.weight")[ids] * float(np.float32(math.sqrt(PL)))
        projected = (x0 @ self.w("per_layer_model_proj.weight").T) * float(np.float32(1.0 / math.sqrt(self.E)))
        projected = rms_norm(projected.reshape(T, n, PL), self.w("per_layer_proj_norm.weight"), self.eps).reshape(T, n * PL)
        return (projected + selected) * float(np.float32(1.0 / math.sqrt(2.0)))


def metric(logits, evaluation, name):
    """The manifest's metric of one evaluation, from its terms (attribution/metric.hpp)."""
    total = 0
    for term in evaluation["terms"]:
        z = logits[term["row"]]
        if name == "logit-diff" and "contrast" in term:
            total = total + z[term["token"]] - z[term["contrast"]]
        elif name == "prob":
            total = total + torch.softmax(z, dim=-1)[term["token"]]
        else:
            total = total + torch.log_softmax(z, dim=-1)[term["token"]]
    return total
