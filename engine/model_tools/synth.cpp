#include "model_tools/synth.hpp"

#include <oneapi/tbb/parallel_for.h>

#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "common/error.hpp"
#include "gguf/gguf_file.hpp"
#include "gguf/gguf_writer.hpp"
#include "model_tools/quantize.hpp"

namespace ember::model_tools {

using gguf::GgmlType;

namespace {

constexpr float kWeightStd = 0.02f;

// splitmix64: a good 64-bit mix, so each element's value is a pure function of its index.
std::uint64_t mix(std::uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

std::uint64_t name_hash(std::string_view name) {  // FNV-1a
    std::uint64_t h = 0xCBF29CE484222325ull;
    for (char c : name) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001B3ull;
    return h;
}

// Row `row` of a [rows, cols] matrix: uniform in [-a, a) with standard deviation kWeightStd.
void random_row(std::uint64_t stream, std::size_t row, std::size_t cols, float* out) {
    const float half_width = kWeightStd * std::sqrt(3.0f);
    for (std::size_t c = 0; c < cols; ++c) {
        const std::uint64_t bits = mix(stream ^ mix(row * cols + c));
        const float unit = static_cast<float>(bits >> 40) * 0x1p-24f;  // [0, 1)
        out[c] = (2.0f * unit - 1.0f) * half_width;
    }
}

// Fills `data` with a [rows, cols] matrix (ne = {cols, rows}) of random weights in `type`.
void random_matrix(std::uint64_t seed, std::string_view name, GgmlType type, std::size_t rows, std::size_t cols,
                   std::span<std::byte> data) {
    const auto traits = *gguf::type_traits(static_cast<std::uint32_t>(type));
    const std::size_t row_bytes = cols / traits.block_size * traits.type_size;
    const std::uint64_t stream = mix(seed) ^ name_hash(name);
    oneapi::tbb::parallel_for(oneapi::tbb::blocked_range<std::size_t>(0, rows, 64), [&](const auto& range) {
        std::vector<float> values(cols);
        for (std::size_t r = range.begin(); r < range.end(); ++r) {
            random_row(stream, r, cols, values.data());
            const std::vector<std::byte> row = quantize_rows(type, values, cols);
            std::memcpy(data.data() + r * row_bytes, row.data(), row_bytes);
        }
    });
}

std::vector<std::byte> ones(std::size_t n) {
    std::vector<std::byte> data(n * 4);
    const float one = 1.0f;
    for (std::size_t i = 0; i < n; ++i) std::memcpy(data.data() + 4 * i, &one, 4);
    return data;
}

const SynthShape& find_shape(std::string_view name) {
    for (const auto& s : synth_shapes()) {
        if (s.name == name) return s;
    }
    std::string known;
    for (const auto& s : synth_shapes()) {
        if (!known.empty()) known += ", ";
        known += s.name;
    }
    throw UsageError(fmt::format("unknown shape '{}' (known: {})", name, known));
}

}  // namespace

const std::vector<SynthShape>& synth_shapes() {
    static const std::vector<SynthShape> shapes = {
        {"llama-1b", 2048, 16, 32, 8, 8192, 131072, 500000.0f, 1e-5f},
        // Two of llama-1b's layers (its embeddings and head): what one layer costs, at a
        // fraction of the time (the attribution memory measurements, docs/attribution.md).
        {"llama-1b-2layer", 2048, 2, 32, 8, 8192, 131072, 500000.0f, 1e-5f},
        {"llama-tiny", 64, 2, 4, 2, 128, 2048, 10000.0f, 1e-5f},
        {"llama-tiny-k", 256, 2, 4, 2, 768, 2048, 10000.0f, 1e-5f},  // rows of 256: every K-quant applies
    };
    return shapes;
}

void write_synth_model(const SynthOptions& options, const std::filesystem::path& output) {
    const SynthShape& shape = find_shape(options.shape);
    // F16 / BF16 files hold every matrix in that type (general.file_type MOSTLY_F16 = 1,
    // MOSTLY_BF16 = 32); the other types are llama-quantize's per-tensor mixes.
    const bool f16 = options.type == "f16", bf16 = options.type == "bf16";
    const FileType file_type = f16 || bf16 ? FileType::q8_0 : parse_file_type(options.type);
    const gguf::File vocab = gguf::File::open(options.vocab_from);
    const auto tokens = vocab.get_string_array("tokenizer.ggml.tokens");
    if (!tokens || tokens->empty()) {
        throw Error(fmt::format("{}: no tokenizer.ggml.tokens: not a vocabulary to copy", vocab.source()));
    }
    const std::size_t n_vocab = tokens->size();
    const std::uint32_t head_dim = shape.n_embd / shape.n_head;

    gguf::Writer w;
    w.set_string("general.architecture", "llama");
    w.set_string("general.name", fmt::format("synth-{}", shape.name));
    w.set_u32("llama.context_length", shape.context_length);
    w.set_u32("llama.embedding_length", shape.n_embd);
    w.set_u32("llama.feed_forward_length", shape.n_ff);
    w.set_u32("llama.block_count", shape.n_layer);
    w.set_u32("llama.attention.head_count", shape.n_head);
    w.set_u32("llama.attention.head_count_kv", shape.n_head_kv);
    w.set_u32("llama.rope.dimension_count", head_dim);
    w.set_f32("llama.rope.freq_base", shape.rope_freq_base);
    w.set_f32("llama.attention.layer_norm_rms_epsilon", shape.rms_epsilon);
    w.set_u32("llama.vocab_size", static_cast<std::uint32_t>(n_vocab));
    w.set_u32("general.quantization_version", 2);
    w.set_u32("general.file_type", f16 ? 1u : bf16 ? 32u : static_cast<std::uint32_t>(file_type));
    for (const auto& entry : vocab.metadata()) {
        if (entry.key.substr(0, 10) == "tokenizer.") w.copy_entry(vocab, entry);
    }

    const std::uint64_t E = shape.n_embd, F = shape.n_ff, KV = static_cast<std::uint64_t>(shape.n_head_kv) * head_dim;
    // Each matrix is generated while the file is written (one in memory at a time).
    auto matrix = [&](const std::string& name, std::uint64_t rows, std::uint64_t cols) {
        const std::uint64_t ne[2] = {cols, rows};
        const GgmlType type = f16    ? GgmlType::F16
                              : bf16 ? GgmlType::BF16
                                     : target_type(file_type, name, cols, tensor_layer(name), static_cast<int>(shape.n_layer), false,
                                                   static_cast<int>(shape.n_head / shape.n_head_kv));
        w.add_tensor(name, type, ne, [seed = options.seed, name, type, rows, cols](std::span<std::byte> out) {
            random_matrix(seed, name, type, rows, cols, out);
        });
    };
    auto norm = [&](const std::string& name) {
        const std::uint64_t ne[1] = {E};
        w.add_tensor(name, GgmlType::F32, ne, ones(E));
    };
    matrix("token_embd.weight", n_vocab, E);  // also the LM head (tied)
    norm("output_norm.weight");
    for (std::uint32_t l = 0; l < shape.n_layer; ++l) {
        const std::string blk = fmt::format("blk.{}.", l);
        norm(blk + "attn_norm.weight");
        matrix(blk + "attn_q.weight", E, E);
        matrix(blk + "attn_k.weight", KV, E);
        matrix(blk + "attn_v.weight", KV, E);
        matrix(blk + "attn_output.weight", E, E);
        norm(blk + "ffn_norm.weight");
        matrix(blk + "ffn_gate.weight", F, E);
        matrix(blk + "ffn_up.weight", F, E);
        matrix(blk + "ffn_down.weight", E, F);
    }
    w.write_file(output);
}

}  // namespace ember::model_tools
