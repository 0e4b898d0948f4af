// The route-neutral operator interface. Model code computes a forward pass only through
// these operations (via kernels::Ops, which names each call site); a route implements
// them: reference/ with plain scalar loops that define what is correct, fast/ with SIMD
// kernels held to the reference within fixed envelopes.
//
// Operations are at the granularity of one llama.cpp graph node, with explicit shapes
// and no knowledge of models, tensor names or layers. Activations are F32 `Rows`
// ([rows = tokens, cols = features] unless stated otherwise); weights are WeightMatrix
// views in their stored type. Unless an operation says otherwise, `out` may alias an input
// of the same shape (in-place), and every output row depends only on the same input row,
// so a result never depends on how the work is split between threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "kernels/kv_rows.hpp"
#include "kernels/rows.hpp"
#include "kernels/weight.hpp"

namespace ember::kernels {

// Which pairs of a head vector RoPE rotates (model-math §3.2).
enum class RopePairing {
    Adjacent,   // llama.cpp NORM: (x[2i], x[2i+1])
    HalfSplit,  // llama.cpp NEOX: (x[i], x[i + n_rot/2])
};

struct RopeParams {
    RopePairing pairing = RopePairing::Adjacent;
    std::size_t n_heads = 0;
    std::size_t head_dim = 0;
    std::size_t n_rot = 0;  // rotated dims per head (even, <= head_dim); the rest is copied
    float freq_base = 10000.0f;
    float freq_scale = 1.0f;
    std::span<const float> freq_factors;  // one per pair (n_rot / 2), or empty
    // YaRN (ext_factor != 0 only when the file asks for it).
    float ext_factor = 0.0f;
    float attn_factor = 1.0f;
    float beta_fast = 32.0f;
    float beta_slow = 1.0f;
    std::uint32_t n_ctx_orig = 0;
};

struct AttentionParams {
    std::size_t n_head = 0;
    std::size_t n_head_kv = 0;  // query head h reads KV head h / (n_head / n_head_kv)
    std::size_t head_dim = 0;
    float scale = 1.0f;         // multiplies q.k before the mask and softmax
    std::size_t window = 0;     // 0: causal; else also mask keys with q_pos - k_pos >= window
};

// The largest shapes a backend's scratch must serve (Backend::reserve).
struct ScratchLimits {
    std::size_t max_tokens = 1;      // rows of one evaluation
    std::size_t max_context = 1;     // cached positions attended over
    std::size_t max_heads = 1;       // query heads
    std::size_t max_head_dim = 1;
    std::size_t max_matmul_cols = 1;  // the widest matmul input (n_embd, n_head * head_dim, n_ff)
};

// Which backend method ran, for kernel names in traces.
enum class KernelId {
    GetRows, Matmul, RmsNorm, Rope, StoreKv, Attention, Swiglu, Geglu, Gelu, Add, Mul, Scale, Softcap, Copy,
};

class Backend {
public:
    virtual ~Backend() = default;

    // "reference" or "fast".
    virtual std::string_view route() const = 0;
    // The kernels this backend runs, for traces, manifests and benchmark records:
    // "scalar-reference" for the reference route, the fast route's kernel set
    // (e.g. "avx512+vnni+bf16", "avx2", "scalar"; kernels/fast/kernel_set.hpp).
    virtual std::string_view variant() const = 0;
    // The implementation that serves `kernel` for a weight of `weight_type` (ignored by
    // kernels without a weight), e.g. "reference.matmul.q8_0". Static strings.
    virtual std::string_view kernel_name(KernelId kernel, gguf::GgmlType weight_type) const = 0;

    // Sizes internal scratch for evaluations within `limits`, so that calls within them
    // (the first evaluation included) allocate nothing.
    virtual void reserve(const ScratchLimits& limits) = 0;

    // out[t] = the row ids[t] of `table`, converted to F32.  out: [ids.size(), table.cols]
    virtual void get_rows(const WeightMatrix& table, std::span<const std::int32_t> ids, Rows out) = 0;

    // y[t] = W x[t].  x: [T, W.cols], y: [T, W.rows]; y must not alias x.
    virtual void matmul(ConstRows x, const WeightMatrix& w, Rows y) = 0;

    // y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight (weight empty: no weight).
    // weight: [x.cols] or empty.
    virtual void rms_norm(ConstRows x, std::span<const float> weight, float eps, Rows y) = 0;

    // Rotates every head of x in place; row t is at position first_position + t.
    // x: [T, n_heads * head_dim]
    virtual void rope(Rows x, std::size_t first_position, const RopeParams& params) = 0;

    // dst[t] = x[t] in the cache's element type (F16: rounded to nearest even, as
    // llama.cpp's copy into its cache).  x: [T, dst.cols], dst: T cached rows.
    virtual void store_kv(ConstRows x, KvRows dst) = 0;

    // Softmax attention of T queries at positions first_position + t over the cached keys
    // and values at positions 0 .. keys.rows - 1, masked causally (and by the window).
    // q: [T, n_head * head_dim], keys/values: [n_kv, n_head_kv * head_dim] of one type,
    // out: [T, n_head * head_dim]; out must not alias q.
    // pattern: empty (pattern.data null: nothing is materialised), or [n_head * T, n_kv]
    // (contiguous) receiving the probabilities that weighted the values: row h * T + t,
    // column j = key position j, exactly 0 at masked positions.
    virtual void attention(ConstRows q, ConstKvRows keys, ConstKvRows values, std::size_t first_position,
                           const AttentionParams& params, Rows out, Rows pattern) = 0;

    // out = silu(gate) * up                (SwiGLU)
    virtual void swiglu(ConstRows gate, ConstRows up, Rows out) = 0;
    // out = gelu_tanh(gate) * up           (GEGLU, llama.cpp's F16-table GELU)
    virtual void geglu(ConstRows gate, ConstRows up, Rows out) = 0;
    // out = gelu_tanh(x)
    virtual void gelu(ConstRows x, Rows out) = 0;

    // out = a + b, out = a * b (element-wise, same shapes)
    virtual void add(ConstRows a, ConstRows b, Rows out) = 0;
    virtual void mul(ConstRows a, ConstRows b, Rows out) = 0;
    // out = x * factor
    virtual void scale(ConstRows x, float factor, Rows out) = 0;
    // out = cap * tanh(x * (1 / cap))
    virtual void softcap(ConstRows x, float cap, Rows out) = 0;
    // out = x
    virtual void copy(ConstRows x, Rows out) = 0;
};

}  // namespace ember::kernels
