#include "model_tools/quantize.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "gguf/gguf_file.hpp"
#include "gguf/gguf_writer.hpp"
#include "gguf/layout.hpp"
#include "kernels/fast/half_precision.hpp"
#include "model_tools/tensor_rows.hpp"

namespace ember::model_tools {

using gguf::GgmlType;
using kernels::fast::BlockQ8_0;
using kernels::fast::kQ8_0BlockSize;

namespace {

constexpr std::uint32_t kQuantizationVersion = 2;  // GGML_QNT_VERSION
constexpr std::uint32_t kFileTypeMostlyQ8_0 = 7;   // LLAMA_FTYPE_MOSTLY_Q8_0

bool ends_with(std::string_view s, std::string_view suffix) {
    return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::vector<std::byte> quantize_tensor(const std::vector<float>& values, std::size_t row_length) {
    std::vector<std::byte> out(values.size() / kQ8_0BlockSize * sizeof(BlockQ8_0));
    auto* blocks = reinterpret_cast<BlockQ8_0*>(out.data());
    for (std::size_t r = 0; r < values.size() / row_length; ++r) {
        quantize_row_q8_0_file_rule(values.data() + r * row_length, blocks + r * (row_length / kQ8_0BlockSize), row_length);
    }
    return out;
}

std::vector<std::byte> to_f16_tensor(const std::vector<float>& values) {
    std::vector<std::byte> out(values.size() * 2);
    for (std::size_t i = 0; i < values.size(); ++i) {
        const std::uint16_t h = kernels::fast::fp32_to_fp16(values[i]);
        std::memcpy(out.data() + 2 * i, &h, 2);
    }
    return out;
}

}  // namespace

void quantize_row_q8_0_file_rule(const float* x, BlockQ8_0* y, std::size_t n) {
    for (std::size_t b = 0; b < n / kQ8_0BlockSize; ++b) {
        const float* xb = x + b * kQ8_0BlockSize;
        float amax = 0.0f;
        for (std::size_t j = 0; j < kQ8_0BlockSize; ++j) amax = std::max(amax, std::fabs(xb[j]));
        const float d = amax / 127.0f;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = kernels::fast::fp32_to_fp16(d);
        for (std::size_t j = 0; j < kQ8_0BlockSize; ++j) y[b].qs[j] = static_cast<std::int8_t>(std::round(xb[j] * id));
    }
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

QuantizeSummary quantize_model_q8_0(const std::filesystem::path& input, const std::filesystem::path& output) {
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
    writer.set_u32("general.file_type", kFileTypeMostlyQ8_0);

    std::vector<const gguf::TensorInfo*> order;
    for (const auto& t : in.tensors()) order.push_back(&t);
    std::sort(order.begin(), order.end(), [](const gguf::TensorInfo* a, const gguf::TensorInfo* b) {
        const int la = tensor_layer(a->name), lb = tensor_layer(b->name);
        return la != lb ? la < lb : a->name < b->name;
    });

    QuantizeSummary summary;
    for (const gguf::TensorInfo* t : order) {
        const std::span<const std::uint64_t> ne(t->ne.data(), t->n_dims);
        const auto data = in.tensor_data(*t);  // mapped: copied when the file is written
        const auto copy = [data](std::span<std::byte> out) { std::memcpy(out.data(), data.data(), out.size()); };
        const GgmlType target = t->ne[0] % kQ8_0BlockSize == 0 ? GgmlType::Q8_0 : GgmlType::F16;
        if (!is_quantizable_weight(t->name, t->n_dims) || t->type == target) {
            writer.add_tensor(t->name, t->type, ne, copy);
            ++summary.copied;
            continue;
        }
        // converted while the file is written, one tensor in memory at a time
        writer.add_tensor(t->name, target, ne, [&in, t, target](std::span<std::byte> out) {
            const std::vector<float> values = tensor_as_f32(in, *t);
            const std::vector<std::byte> converted =
                target == GgmlType::Q8_0 ? quantize_tensor(values, t->ne[0]) : to_f16_tensor(values);
            std::memcpy(out.data(), converted.data(), out.size());
        });
        ++(target == GgmlType::Q8_0 ? summary.to_q8_0 : summary.to_f16);
    }
    writer.write_file(output);
    summary.output_bytes = std::filesystem::file_size(output);
    return summary;
}

}  // namespace ember::model_tools
