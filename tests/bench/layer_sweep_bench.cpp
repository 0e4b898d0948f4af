// A forward-pass-shaped benchmark (not part of ctest): runs every matrix product, RMS
// norm, attention and SwiGLU of a Llama-family GGUF (e.g. `ember synth --shape
// llama-1b`) with the fast kernels, as a decode loop and as one prefill, to show what
// the kernels allow end to end before the model code exists. RoPE, the KV-cache writes
// and sampling are left out (small); the weights are the mmapped file's.
//
//   ember_layer_sweep_bench MODEL.gguf [--threads N] [--prompt-tokens P] [--gen-tokens G]
#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "gguf/gguf_file.hpp"
#include "gguf/layout.hpp"
#include "kernels/fast/aligned_buffer.hpp"
#include "kernels/fast/attention.hpp"
#include "kernels/fast/matmul.hpp"
#include "kernels/fast/row_ops.hpp"

namespace fast = ember::kernels::fast;
using ember::kernels::WeightMatrix;

namespace {

WeightMatrix weight(const ember::gguf::File& f, const std::string& name) {
    const auto* t = f.find_tensor(name);
    if (!t) throw std::runtime_error("missing tensor " + name);
    return {t->type, f.tensor_data(*t).data(), t->ne[1], t->ne[0], ember::gguf::row_bytes(t->type, t->ne[0])};
}

const float* vector(const ember::gguf::File& f, const std::string& name) {
    return reinterpret_cast<const float*>(f.tensor_data(*f.find_tensor(name)).data());
}

struct Layer {
    WeightMatrix q, k, v, o, gate, up, down;
    const float* attn_norm;
    const float* ffn_norm;
};

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        fmt::print(stderr, "usage: ember_layer_sweep_bench MODEL.gguf [--threads N] [--prompt-tokens P] [--gen-tokens G]\n");
        return 2;
    }
    int threads = 2;
    std::size_t prompt = 128, generate = 64;
    for (int i = 2; i + 1 < argc; i += 2) {
        const std::string arg = argv[i];
        if (arg == "--threads") threads = std::stoi(argv[i + 1]);
        else if (arg == "--prompt-tokens") prompt = std::stoul(argv[i + 1]);
        else if (arg == "--gen-tokens") generate = std::stoul(argv[i + 1]);
    }
    const auto file = ember::gguf::File::open(argv[1]);
    const std::size_t E = *file.get_u32("llama.embedding_length");
    const std::size_t n_layer = *file.get_u32("llama.block_count");
    const std::size_t n_head = *file.get_u32("llama.attention.head_count");
    const std::size_t n_head_kv = *file.get_u32("llama.attention.head_count_kv");
    const std::size_t D = E / n_head, KV = n_head_kv * D;
    std::vector<Layer> layers;
    for (std::size_t l = 0; l < n_layer; ++l) {
        const std::string b = fmt::format("blk.{}.", l);
        layers.push_back({weight(file, b + "attn_q.weight"), weight(file, b + "attn_k.weight"), weight(file, b + "attn_v.weight"),
                          weight(file, b + "attn_output.weight"), weight(file, b + "ffn_gate.weight"),
                          weight(file, b + "ffn_up.weight"), weight(file, b + "ffn_down.weight"),
                          vector(file, b + "attn_norm.weight"), vector(file, b + "ffn_norm.weight")});
    }
    const WeightMatrix lm_head = file.find_tensor("output.weight") ? weight(file, "output.weight") : weight(file, "token_embd.weight");
    const std::size_t F = layers[0].gate.rows, V = lm_head.rows;
    const std::size_t max_tokens = prompt, max_positions = prompt + generate;

    const fast::KernelSet& k = fast::process_kernel_set();
    fast::ThreadPool pool(threads);
    // every buffer once, before the loop
    std::vector<float> x(max_tokens * E, 0.01f), h(max_tokens * E), q(max_tokens * E), attn(max_tokens * E);
    std::vector<float> g(max_tokens * F), u(max_tokens * F), logits(V);
    std::vector<float> keys(n_layer * max_positions * KV, 0.1f), values(n_layer * max_positions * KV, 0.1f);
    fast::AlignedBuffer act(fast::activation_workspace_bytes(layers[0].q.type, std::max(E, F), max_tokens));
    const fast::AttentionShape shape{n_head, n_head_kv, D, 1.0f / std::sqrt(static_cast<float>(D)), 0};
    fast::AlignedBuffer attn_ws(fast::attention_workspace_bytes(threads, shape, max_positions));

    auto forward = [&](std::size_t T, std::size_t first) {
        for (std::size_t l = 0; l < n_layer; ++l) {
            const Layer& L = layers[l];
            float* k_rows = keys.data() + (l * max_positions + first) * KV;
            float* v_rows = values.data() + (l * max_positions + first) * KV;
            fast::rms_norm(pool, x.data(), E, L.attn_norm, 1e-5f, h.data(), E, T, E);
            const auto xa = fast::convert_activations(k, pool, L.q.type, h.data(), T, E, act.span());  // shared by Q, K, V
            fast::matmul(k, pool, L.q, xa, q.data());
            fast::matmul(k, pool, L.k, xa, k_rows);
            fast::matmul(k, pool, L.v, xa, v_rows);
            const fast::KvCacheView kv{fast::KvType::f32, reinterpret_cast<const std::byte*>(keys.data() + l * max_positions * KV),
                                       reinterpret_cast<const std::byte*>(values.data() + l * max_positions * KV), KV * 4,
                                       first + T};
            fast::attention(k, pool, q.data(), E, T, kv, first, shape, attn.data(), E, attn_ws.span());
            fast::matmul(k, pool, L.o, attn.data(), T, h.data(), act.span());
            for (std::size_t i = 0; i < T * E; ++i) x[i] += h[i];
            fast::rms_norm(pool, x.data(), E, L.ffn_norm, 1e-5f, h.data(), E, T, E);
            const auto xf = fast::convert_activations(k, pool, L.gate.type, h.data(), T, E, act.span());  // gate and up
            fast::matmul(k, pool, L.gate, xf, g.data());
            fast::matmul(k, pool, L.up, xf, u.data());
            fast::swiglu(k, pool, g.data(), F, u.data(), F, g.data(), F, T, F);
            fast::matmul(k, pool, L.down, g.data(), T, h.data(), act.span());
            for (std::size_t i = 0; i < T * E; ++i) x[i] += h[i];
        }
        fast::rms_norm(pool, x.data() + (T - 1) * E, E, nullptr, 1e-5f, h.data(), E, 1, E);
        fast::matmul(k, pool, lm_head, h.data(), 1, logits.data(), act.span());  // logits of the last token only
    };

    using Clock = std::chrono::steady_clock;
    forward(1, 0);  // warm the page cache and the thread pool
    const auto p0 = Clock::now();
    forward(prompt, 0);
    const double prefill_s = std::chrono::duration<double>(Clock::now() - p0).count();
    const auto d0 = Clock::now();
    for (std::size_t i = 0; i < generate; ++i) forward(1, prompt + i);
    const double decode_s = std::chrono::duration<double>(Clock::now() - d0).count();
    fmt::print("{}: kernel set {}, {} threads\n", argv[1], k.description, threads);
    fmt::print("prefill {} tokens: {:.1f} tok/s   decode {} tokens: {:.1f} tok/s\n", prompt, prompt / prefill_s, generate,
               generate / decode_s);
    return 0;
}
