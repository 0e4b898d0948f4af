#include "support/tiny_gguf.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <random>

namespace ember::test {
namespace {

std::uint16_t to_f16(float f) {
    // Round-to-nearest-even F32 -> F16 for normal values in range (test data only).
    std::uint32_t x;
    std::memcpy(&x, &f, 4);
    const std::uint32_t sign = (x >> 16) & 0x8000;
    const int exp = static_cast<int>((x >> 23) & 0xff) - 127 + 15;
    std::uint32_t mant = x & 0x7fffff;
    if (exp <= 0) return static_cast<std::uint16_t>(sign);
    std::uint32_t h = sign | (static_cast<std::uint32_t>(exp) << 10) | (mant >> 13);
    const std::uint32_t rest = mant & 0x1fff;
    if (rest > 0x1000 || (rest == 0x1000 && (h & 1))) ++h;
    return static_cast<std::uint16_t>(h);
}

std::vector<std::byte> encode(const std::vector<float>& values, gguf::GgmlType type) {
    std::vector<std::byte> out;
    auto put = [&out](const void* p, std::size_t n) {
        const auto* b = static_cast<const std::byte*>(p);
        out.insert(out.end(), b, b + n);
    };
    switch (type) {
        case gguf::GgmlType::F32:
            put(values.data(), values.size() * 4);
            break;
        case gguf::GgmlType::F16:
            for (float v : values) {
                const std::uint16_t h = to_f16(v);
                put(&h, 2);
            }
            break;
        case gguf::GgmlType::BF16:
            for (float v : values) {
                std::uint32_t x;
                std::memcpy(&x, &v, 4);
                const auto h = static_cast<std::uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
                put(&h, 2);
            }
            break;
        case gguf::GgmlType::Q8_0:
            for (std::size_t b = 0; b < values.size(); b += 32) {
                float amax = 0;
                for (std::size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(values[b + j]));
                const float d = amax / 127.0f;
                const float id = d != 0 ? 1.0f / d : 0.0f;
                const std::uint16_t dh = to_f16(d);
                put(&dh, 2);
                for (std::size_t j = 0; j < 32; ++j) {
                    const auto q = static_cast<std::int8_t>(std::round(values[b + j] * id));
                    put(&q, 1);
                }
            }
            break;
        default:
            throw std::runtime_error("tiny_gguf: unsupported weight type");
    }
    return out;
}

class TensorMaker {
public:
    TensorMaker(gguf::Writer& w, std::uint32_t seed) : writer_(w), rng_(seed) {}

    void matrix(const std::string& name, std::uint64_t in, std::uint64_t out, gguf::GgmlType type) {
        std::normal_distribution<float> dist(0.0f, 1.0f / std::sqrt(static_cast<float>(in)));
        std::vector<float> v(in * out);
        for (float& x : v) x = dist(rng_);
        const std::uint64_t ne[2] = {in, out};
        writer_.add_tensor(name, type, ne, encode(v, type));
    }

    void constant(const std::string& name, std::uint64_t n, float value) {
        const std::vector<float> v(n, value);
        const std::uint64_t ne[1] = {n};
        writer_.add_tensor(name, gguf::GgmlType::F32, ne, encode(v, gguf::GgmlType::F32));
    }

    void norm(const std::string& name, std::uint64_t n) {
        std::uniform_real_distribution<float> dist(0.8f, 1.2f);
        std::vector<float> v(n);
        for (float& x : v) x = dist(rng_);
        const std::uint64_t ne[1] = {n};
        writer_.add_tensor(name, gguf::GgmlType::F32, ne, encode(v, gguf::GgmlType::F32));
    }

private:
    gguf::Writer& writer_;
    std::mt19937 rng_;
};

}  // namespace

std::vector<std::string> tiny_vocab() {
    std::vector<std::string> v = {"<unk>", "<s>", "</s>"};
    for (int b = 0; b < 256; ++b) v.push_back(fmt::format("<0x{:02X}>", b));
    for (const char* w : {"\xe2\x96\x81", "a", "b", "\xe2\x96\x81" "a", "ab", "\xe2\x96\x81the", "\xd9\x83", "\xd8\xaa"}) v.emplace_back(w);
    return v;
}

gguf::Writer tiny_model_writer(const TinySpec& s) {
    gguf::Writer w(s.alignment);
    const std::string& a = s.arch;
    const auto vocab = tiny_vocab();
    const auto n_vocab = static_cast<std::uint32_t>(vocab.size());
    const std::uint32_t head_dim = s.n_embd / s.n_head;

    w.set_string("general.architecture", a);
    w.set_string("general.name", "tiny-" + a);
    w.set_u32(a + ".context_length", s.n_ctx);
    w.set_u32(a + ".embedding_length", s.n_embd);
    w.set_u32(a + ".block_count", s.n_layers);
    w.set_u32(a + ".feed_forward_length", s.n_ff);
    w.set_u32(a + ".attention.head_count", s.n_head);
    w.set_u32(a + ".attention.head_count_kv", s.n_head_kv);
    w.set_f32(a + ".attention.layer_norm_rms_epsilon", 1e-5f);
    w.set_f32(a + ".rope.freq_base", 10000.0f);
    if (a == "gemma4") {
        // Alternating sliding-window (true) and full layers, starting with sliding.
        const auto pattern = std::make_unique<bool[]>(s.n_layers);
        for (std::uint32_t l = 0; l < s.n_layers; ++l) pattern[l] = (l % 2 == 0);
        w.set_bool_array(a + ".attention.sliding_window_pattern", std::span<const bool>(pattern.get(), s.n_layers));
        w.set_u32(a + ".attention.sliding_window", 4);
        w.set_u32(a + ".embedding_length_per_layer_input", 0);
        w.set_u32(a + ".attention.key_length", head_dim);
        w.set_u32(a + ".attention.value_length", head_dim);
        w.set_u32(a + ".attention.key_length_swa", head_dim);
        w.set_u32(a + ".attention.value_length_swa", head_dim);
        w.set_f32(a + ".final_logit_softcapping", 30.0f);
    }
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_string_array("tokenizer.ggml.tokens", std::span<const std::string>(vocab));
    std::vector<float> scores(n_vocab);
    std::vector<std::int32_t> types(n_vocab, 1);
    types[0] = 2;
    types[1] = types[2] = 3;
    for (std::uint32_t i = 3; i < 259; ++i) types[i] = 6;
    for (std::uint32_t i = 0; i < n_vocab; ++i) scores[i] = -static_cast<float>(i);
    w.set_f32_array("tokenizer.ggml.scores", scores);
    w.set_i32_array("tokenizer.ggml.token_type", types);
    w.set_u32("tokenizer.ggml.bos_token_id", 1);
    w.set_u32("tokenizer.ggml.eos_token_id", 2);

    TensorMaker make(w, s.seed);
    make.matrix("token_embd.weight", s.n_embd, n_vocab, s.weight_type);
    make.norm("output_norm.weight", s.n_embd);
    if (!s.tied_output) make.matrix("output.weight", s.n_embd, n_vocab, s.weight_type);
    if (a == "gemma4") make.constant("rope_freqs.weight", head_dim / 2, 1.0f);  // full layers rotate every pair
    for (std::uint32_t l = 0; l < s.n_layers; ++l) {
        const std::string p = fmt::format("blk.{}.", l);
        make.norm(p + "attn_norm.weight", s.n_embd);
        make.matrix(p + "attn_q.weight", s.n_embd, s.n_head * head_dim, s.weight_type);
        make.matrix(p + "attn_k.weight", s.n_embd, s.n_head_kv * head_dim, s.weight_type);
        make.matrix(p + "attn_v.weight", s.n_embd, s.n_head_kv * head_dim, s.weight_type);
        make.matrix(p + "attn_output.weight", s.n_head * head_dim, s.n_embd, s.weight_type);
        if (a == "qwen3" || a == "gemma4") {
            make.norm(p + "attn_q_norm.weight", head_dim);
            make.norm(p + "attn_k_norm.weight", head_dim);
        }
        if (a == "gemma4") {
            make.norm(p + "post_attention_norm.weight", s.n_embd);
            make.norm(p + "post_ffw_norm.weight", s.n_embd);
        }
        make.norm(p + "ffn_norm.weight", s.n_embd);
        make.matrix(p + "ffn_gate.weight", s.n_embd, s.n_ff, s.weight_type);
        make.matrix(p + "ffn_up.weight", s.n_embd, s.n_ff, s.weight_type);
        make.matrix(p + "ffn_down.weight", s.n_ff, s.n_embd, s.weight_type);
    }
    return w;
}

std::vector<std::byte> tiny_model_bytes(const TinySpec& spec) { return tiny_model_writer(spec).to_bytes(); }

}  // namespace ember::test
