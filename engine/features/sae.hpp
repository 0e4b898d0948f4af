// A sparse autoencoder (or transcoder) as Ember computes with it: F32 weights, the
// architecture's encoder, and the site it reads (and, for a transcoder, the site it
// writes). Loaded by sae_loader (SAELens directories, Gemma Scope params.npz, Gemma
// Scope 2 params.safetensors); docs/features.md gives the formulas.
//
//   x_in   = normalize(x)                    [T, d_in]  (none / constant_norm_rescale /
//                                                        layer_norm / a scaling factor)
//   pre    = (x_in - b_dec·apply_b_dec) W_enc + b_enc   [T, d_sae]
//   f      = standard: relu(pre); jumprelu: pre where pre > threshold (and > 0), else 0;
//            topk: relu of the k largest pre, 0 elsewhere; gated: (pre_gate > 0) ·
//            relu(x_c (W_enc ∘ exp(r_mag)) + b_mag) with pre_gate = x_c W_enc + b_gate
//   decode = denormalize(f W_dec + b_dec)    [T, d_in]
//
// Normalization is per row and affine on the way out, so the change a feature edit makes
// to the reconstruction is (f' - f) W_dec times the row's output scale: `splice_delta`
// computes exactly that (zero, bit for bit, when nothing was edited).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "hooks/hook_names.hpp"

namespace ember::features {

enum class Architecture { Standard, JumpRelu, TopK, Gated };
enum class Normalization { None, ScalingFactor, ConstantNormRescale, LayerNorm };

std::string_view architecture_name(Architecture a);
std::string_view normalization_name(Normalization n);

// A file the SAE was read from, recorded as an input of the run.
struct SaeInput {
    std::filesystem::path path;
    std::string sha256;
};

struct Sae {
    std::string name;            // the directory's name unless the config names it
    std::filesystem::path path;  // the directory (or file) it was loaded from
    std::string format;          // "saelens-5", "saelens-6", "gemma-scope", "gemma-scope-2"
    std::vector<SaeInput> inputs;

    Architecture architecture = Architecture::Standard;
    std::size_t d_in = 0, d_sae = 0;
    std::size_t d_out = 0;  // d_in, except for a transcoder
    std::size_t k = 0;  // topk
    bool apply_b_dec_to_input = false;
    Normalization normalization = Normalization::None;
    float scaling_factor = 1.0f;  // Normalization::ScalingFactor: x_in = x · factor

    std::string hook_name;  // as the file names the site
    hooks::HookSite site;   // where it reads
    // A transcoder writes its reconstruction to another site.
    std::optional<std::string> output_hook_name;
    std::optional<hooks::HookSite> output_site;

    std::vector<float> W_enc;      // [d_in, d_sae]
    std::vector<float> b_enc;      // [d_sae] (gated: empty)
    std::vector<float> W_dec;      // [d_sae, d_out]
    std::vector<float> b_dec;      // [d_out]
    std::vector<float> threshold;  // [d_sae], jumprelu
    std::vector<float> b_gate, b_mag, r_mag;  // [d_sae], gated

    bool is_transcoder() const { return output_site.has_value(); }
};

// Per-row normalization state of one encode, needed to decode:
// x_in = (x - in_shift) · in_scale, decode = recon · out_scale + out_shift (layer_norm's out_scale
// is the row's std, its in_scale 1 / (std + eps), as SAELens computes them).
struct RowNorm {
    std::vector<float> in_scale, in_shift;    // [T]
    std::vector<float> out_scale, out_shift;  // [T]; a transcoder's output is not denormalized (1, 0)
};

// f = encode(x): x [T, d_in] row-major, features [T, d_sae]. Sums in double: the
// reference encoder (fast_encoder.hpp computes the product with the fast route's kernels).
void encode(const Sae& sae, const float* x, std::size_t T, float* features, RowNorm& norm);

// The encoder's steps, shared by both encoders:
// `norm` sized for T rows, every row's normalization the identity.
void reset_norm(std::size_t T, RowNorm& norm);
// Row t's normalization into `norm`, and the encoder's input x_c [d_in] = normalize(row) - b_dec·apply.
void encoder_input(const Sae& sae, const float* row, std::size_t t, RowNorm& norm, double* x_c);
// A row's features [d_sae] from its product `pre` = x_c W_enc [d_sae] (no bias; changed in place).
void features_from_product(const Sae& sae, std::vector<double>& pre, float* f);

// The reconstruction of every row: out [T, d_out] = denormalize(f W_dec + b_dec), the
// decoder read for active features only.
void decode(const Sae& sae, const float* features, std::size_t T, const RowNorm& norm, float* out);

// out [T, d_out] = ((edited - original) W_dec) · out_scale, row by row: exactly 0 where a row's
// features are unchanged. Returns whether any row changed.
bool splice_delta(const Sae& sae, const float* original, const float* edited, std::size_t T, const RowNorm& norm,
                  float* out);

}  // namespace ember::features
