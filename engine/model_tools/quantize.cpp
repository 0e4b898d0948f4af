#include "model_tools/quantize.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "gguf/gguf_file.hpp"
#include "gguf/gguf_writer.hpp"
#include "gguf/layout.hpp"
#include "kernels/quant_blocks.hpp"
#include "model_tools/tensor_rows.hpp"

namespace ember::model_tools {

using gguf::GgmlType;

namespace {

constexpr std::uint32_t kQuantizationVersion = 2;  // GGML_QNT_VERSION

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// use_more_bits (llama-quant.cpp): the first and last eighth of the layers, and every
// third one between.
bool use_more_bits(int i_layer, int n_layers) {
    return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

GgmlType base_type(FileType type) {
    switch (type) {
        case FileType::q8_0: return GgmlType::Q8_0;
        case FileType::q4_0: return GgmlType::Q4_0;
        case FileType::q4_1: return GgmlType::Q4_1;
        case FileType::q5_1: return GgmlType::Q5_1;
        case FileType::q2_k: return GgmlType::Q2_K;
        case FileType::q3_k_m: return GgmlType::Q3_K;
        case FileType::q4_k_m: return GgmlType::Q4_K;
        case FileType::q5_k_m: return GgmlType::Q5_K;
        case FileType::q6_k: return GgmlType::Q6_K;
    }
    throw Error("unknown file type");
}

constexpr std::pair<std::string_view, FileType> kFileTypes[] = {
    {"q8_0", FileType::q8_0},     {"q4_0", FileType::q4_0},     {"q4_1", FileType::q4_1},
    {"q5_1", FileType::q5_1},     {"q2_k", FileType::q2_k},     {"q3_k_m", FileType::q3_k_m},
    {"q4_k_m", FileType::q4_k_m}, {"q5_k_m", FileType::q5_k_m}, {"q6_k", FileType::q6_k}};

// llama_tensor_get_type_impl's changes for a layer matrix (not the LM head) of a dense
// (non-MoE, non-Falcon) model: attn_v, ffn_down and attn_output by file type. The
// counters llama.cpp keeps (i_attention_wv, i_ffn_down) are the layer numbers here.
GgmlType layer_type(FileType file_type, GgmlType type, std::string_view name, int layer, int n_layers, int n_gqa) {
    const bool attn_v = name.find("attn_v.weight") != std::string_view::npos;
    const bool ffn_down = name.find("ffn_down") != std::string_view::npos;
    const bool attn_output = name.find("attn_output.weight") != std::string_view::npos;
    switch (file_type) {
        case FileType::q2_k:
            if (attn_v) return n_gqa >= 4 ? GgmlType::Q4_K : GgmlType::Q3_K;
            if (ffn_down || attn_output) return GgmlType::Q3_K;
            return type;
        case FileType::q3_k_m:
            if (attn_v) return layer < 2 ? GgmlType::Q5_K : GgmlType::Q4_K;
            if (ffn_down) return layer < n_layers / 16 ? GgmlType::Q5_K : GgmlType::Q4_K;
            if (attn_output) return GgmlType::Q4_K;
            return type;
        case FileType::q4_k_m:
        case FileType::q5_k_m:
            return (attn_v || ffn_down) && layer >= 0 && use_more_bits(layer, n_layers) ? GgmlType::Q6_K : type;
        default: return type;
    }
}

}  // namespace

FileType parse_file_type(std::string_view name) {
    std::string lower(name);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const auto& [n, t] : kFileTypes) {
        if (lower == n) return t;
    }
    throw UsageError(fmt::format("type '{}' is not supported ({})", name, file_type_names(", ")));
}

std::string file_type_names(std::string_view separator) {
    std::string names;
    for (const auto& [n, t] : kFileTypes) {
        if (!names.empty()) names += separator;
        names += n;
    }
    return names;
}

std::string_view file_type_name(FileType type) {
    for (const auto& [n, t] : kFileTypes) {
        if (t == type) return n;
    }
    return "?";
}

GgmlType target_type(FileType file_type, std::string_view name, std::uint64_t row_length, int layer, int n_layers,
                     bool has_output, int n_gqa) {
    GgmlType type = base_type(file_type);
    if (name == "output.weight" || (!has_output && name == "token_embd.weight")) {
        if (row_length % kernels::kQK_K != 0) type = GgmlType::Q8_0;
        else if (type != GgmlType::Q8_0) type = GgmlType::Q6_K;
    } else if (layer >= 0) {
        type = layer_type(file_type, type, name, layer, n_layers, n_gqa);
    }
    const std::uint32_t block = gguf::type_traits(static_cast<std::uint32_t>(type))->block_size;
    if (row_length % block == 0) return type;
    // tensor_type_fallback: a 32-element type stays (and becomes F16 below), Q2_K / Q3_K
    // fall back to Q4_0, Q5_K to Q5_1, Q6_K to Q8_0, Q4_K to Q5_0
    if (type == GgmlType::Q2_K || type == GgmlType::Q3_K) type = GgmlType::Q4_0;
    else if (type == GgmlType::Q5_K) type = GgmlType::Q5_1;
    else if (type == GgmlType::Q6_K) type = GgmlType::Q8_0;
    else if (type == GgmlType::Q4_K) {
        throw Error(fmt::format("tensor '{}': rows of {} are not a multiple of 256, and llama.cpp's fallback for {} (Q5_0) "
                                "is a type ember cannot write yet",
                                name, row_length, gguf::type_name(type)));
    }
    return row_length % kernels::kQK == 0 ? type : GgmlType::F16;
}

int n_gqa_of(const gguf::File& file) {
    const auto arch = file.get_string("general.architecture");
    const auto layers = arch ? file.get_u32(fmt::format("{}.block_count", *arch)) : std::nullopt;
    if (!layers || *layers == 0) return 1;
    const auto heads = file.get_per_layer(fmt::format("{}.attention.head_count", *arch), *layers);
    const auto kv = file.get_per_layer(fmt::format("{}.attention.head_count_kv", *arch), *layers);
    if (!heads || heads->front() <= 0) return 1;
    if (!kv) return 1;  // head_count_kv defaults to head_count
    return kv->front() > 0 ? static_cast<int>(heads->front() / kv->front()) : 0;
}

int tensor_layer(std::string_view name) {
    // sscanf(name, "blk.%d.", &layer): optional sign, then digits
    if (name.substr(0, 4) != "blk.") return -1;
    std::size_t i = 4;
    bool negative = false;
    if (i < name.size() && (name[i] == '-' || name[i] == '+')) negative = name[i++] == '-';
    if (i >= name.size() || name[i] < '0' || name[i] > '9') return -1;
    long long value = 0;
    for (; i < name.size() && name[i] >= '0' && name[i] <= '9'; ++i) value = std::min<long long>(value * 10 + (name[i] - '0'), 1LL << 31);
    return static_cast<int>(negative ? -value : std::min<long long>(value, 0x7FFFFFFF));
}

bool is_quantizable_weight(std::string_view name, std::size_t n_dims) {
    if (!ends_with(name, "weight") || n_dims < 2) return false;
    // kept as they are by llama-quantize (llama-quant.cpp): norms, MoE routers, small
    // Gemma 3n / 4 side tensors, positional and token-type embeddings, small state-space
    // and RWKV weights, T5 relative position bias
    for (std::string_view keep : {"_norm.weight", "ffn_gate_inp.weight", "altup", "laurel", "per_layer_model_proj",
                                  "ssm_conv1d.weight", "time_mix_first.weight", "time_mix_w0.weight",
                                  "time_mix_w1.weight", "time_mix_w2.weight", "time_mix_v0.weight", "time_mix_v1.weight",
                                  "time_mix_v2.weight", "time_mix_a0.weight", "time_mix_a1.weight", "time_mix_a2.weight",
                                  "time_mix_g1.weight", "time_mix_g2.weight", "time_mix_decay_w1.weight",
                                  "time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight"}) {
        if (name.find(keep) != std::string_view::npos) return false;
    }
    return name != "position_embd.weight" && name != "token_types.weight";
}

QuantizeSummary quantize_model(const std::filesystem::path& input, const std::filesystem::path& output, FileType type) {
    const gguf::File in = gguf::File::open(input);
    std::error_code ec;
    if (std::filesystem::exists(output) && std::filesystem::equivalent(input, output, ec)) {
        throw Error(fmt::format("{}: the output would overwrite the input", output.string()));
    }

    gguf::Writer writer(static_cast<std::uint32_t>(in.alignment()));
    for (const auto& entry : in.metadata()) {
        if (entry.key == "general.quantization_version" || entry.key == "general.file_type") continue;
        if (entry.key == "general.alignment" && in.alignment() != gguf::Limits::default_alignment) continue;  // the writer sets it
        writer.copy_entry(in, entry);
    }
    writer.set_u32("general.quantization_version", kQuantizationVersion);
    writer.set_u32("general.file_type", static_cast<std::uint32_t>(type));

    std::vector<const gguf::TensorInfo*> order;
    for (const auto& t : in.tensors()) order.push_back(&t);
    std::sort(order.begin(), order.end(), [](const gguf::TensorInfo* a, const gguf::TensorInfo* b) {
        const int la = tensor_layer(a->name), lb = tensor_layer(b->name);
        return la != lb ? la < lb : a->name < b->name;
    });

    const bool has_output = in.find_tensor("output.weight") != nullptr;
    const int n_gqa = n_gqa_of(in);
    int n_layers = 0;
    for (const gguf::TensorInfo* t : order) n_layers = std::max(n_layers, tensor_layer(t->name) + 1);

    QuantizeSummary summary;
    for (const gguf::TensorInfo* t : order) {
        const std::span<const std::uint64_t> ne(t->ne.data(), t->n_dims);
        const auto data = in.tensor_data(*t);  // mapped: copied when the file is written
        const auto copy = [data](std::span<std::byte> out) { std::memcpy(out.data(), data.data(), out.size()); };
        const bool quantizable = is_quantizable_weight(t->name, t->n_dims);
        const GgmlType target =
            quantizable ? target_type(type, t->name, t->ne[0], tensor_layer(t->name), n_layers, has_output, n_gqa) : t->type;
        if (!quantizable || t->type == target) {
            writer.add_tensor(t->name, t->type, ne, copy);
            ++summary.copied;
            continue;
        }
        // converted while the file is written, one tensor in memory at a time
        writer.add_tensor(t->name, target, ne, [&in, t, target](std::span<std::byte> out) {
            const std::vector<float> values = tensor_as_f32(in, *t);
            const std::vector<std::byte> converted = quantize_rows(target, values, t->ne[0]);
            std::memcpy(out.data(), converted.data(), out.size());
        });
        ++summary.written[std::string(gguf::type_name(target))];
    }
    writer.write_file(output);
    summary.output_bytes = std::filesystem::file_size(output);
    return summary;
}

}  // namespace ember::model_tools
