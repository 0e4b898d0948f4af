// `ember synth`: a random-weight model of a real shape, carrying the tokenizer of another
// GGUF, for benchmarks that need no download. Weights are deterministic for a seed:
// element i of a tensor depends only on (seed, tensor name, i), never on threads.
// Matrices are uniform with standard deviation 0.02 (activations stay finite through the
// whole stack: each projection's outputs have about unit scale), norm weights are 1.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/ggml_type.hpp"

namespace ember::model_tools {

// A Llama-family shape (tied output embedding, no output.weight).
struct SynthShape {
    std::string_view name;
    std::uint32_t n_embd;
    std::uint32_t n_layer;
    std::uint32_t n_head;
    std::uint32_t n_head_kv;
    std::uint32_t n_ff;
    std::uint32_t context_length;
    float rope_freq_base;
    float rms_epsilon;
};

// The shapes `--shape` accepts: "llama-1b" (Llama 3.2 1B: 2048, 16 layers, 32/8 heads,
// n_ff 8192), "llama-tiny" (a few MB, for tests) and "llama-tiny-k" (n_embd 256, n_ff
// 768: rows a multiple of 256, for the K-quant file types).
const std::vector<SynthShape>& synth_shapes();

struct SynthOptions {
    std::string shape = "llama-1b";
    std::filesystem::path vocab_from;  // every tokenizer.* key is copied from this GGUF
    // "f16", or a file type of `ember quantize` (file_type_names: "q8_0", "q4_k_m", ...): each
    // matrix gets the type llama-quantize gives it in that file type (quantize.hpp)
    std::string type = "q8_0";
    std::uint64_t seed = 1;
};

// Writes the model atomically; ember::Error / UsageError for an unknown shape or type, or
// a vocabulary file without tokenizer.ggml.tokens.
void write_synth_model(const SynthOptions& options, const std::filesystem::path& output);

}  // namespace ember::model_tools
