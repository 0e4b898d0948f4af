// The fast kernels of one CPU variant, as a table of function pointers chosen once.
//
// A KernelSet is an immutable value: pass it (by const reference) to whatever runs
// kernels. Each function pointer targets code compiled for that variant's instruction
// set in its own translation unit (the rest of the engine is built for baseline x86-64).
// Numerics of every variant (docs/fast-path.md):
//   - quantize_row_q8_0 / _q8_1 / _q8_K and every quantized product (Q8_0, the legacy
//     formats and the K-quants) are bit-identical across variants and with llama.cpp on
//     x86 (model-math §2.2 runtime rule, §2.8, §2.9; docs/fast-path.md);
//   - round_row_f16 / round_row_bf16 are bit-identical across variants (§2.1);
//   - F16, BF16 and F32 products accumulate in F32 with a per-variant reduction order
//     (one vector accumulator per output, fixed final tree): identical between the
//     matrix-vector and matrix-matrix paths and for any thread count within a variant,
//     within a few F32 ulps of the exact sum across variants.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kernels/fast/cpu_features.hpp"
#include "kernels/fast/kernel_types.hpp"
#include "kernels/weight_format.hpp"

namespace ember::kernels::fast {

struct KernelSet {
    CpuVariant variant = CpuVariant::scalar;
    // The variant and the optional extensions in use: "avx512+vnni+bf16", "avx2", ...
    std::string_view description;

    // ---- activation conversion: one row of n floats into what a weight type's dot reads
    // Q8_0 blocks with the x86 runtime rule (d = amax/127 as fp16, id = 127/amax, round
    // half to even, saturate to int8); n is a multiple of 32.
    void (*quantize_row_q8_0)(const float* x, BlockQ8_0* y, std::size_t n) = nullptr;
    // Q8_1 blocks the same way, plus s = fp16(d * sum of the quants); n a multiple of 32.
    void (*quantize_row_q8_1)(const float* x, BlockQ8_1* y, std::size_t n) = nullptr;
    // Q8_K super-blocks by quantize_row_q8_K_ref (model-math §2.8); n a multiple of 256.
    void (*quantize_row_q8_K)(const float* x, BlockQ8_K* y, std::size_t n) = nullptr;
    // Sixteen tokens of Q8_0 activations (from `acts`, `row_bytes` apart, n a multiple of
    // 32) into n / 32 TokenLanes, for the products that read them: null where none does.
    void (*pack_token_lanes)(const std::byte* acts, std::size_t row_bytes, std::size_t n, TokenLanes* out) = nullptr;
    // n_tokens tokens of Q8_0 activations (n columns) widened into TokenPairs (token t
    // block b at pairs[t * (n / 32) + b]) and F32 scales, for the products that read them:
    // null where none does.
    void (*pack_token_pairs)(const std::byte* acts, std::size_t row_bytes, std::size_t n_tokens, std::size_t n,
                             TokenPairs* pairs, float* scales) = nullptr;
    void (*round_row_f16)(const float* x, std::uint16_t* y, std::size_t n) = nullptr;
    void (*round_row_bf16)(const float* x, std::uint16_t* y, std::size_t n) = nullptr;

    // ---- matrix products over a range of rows, all tokens (kernel_types.hpp): one slot
    // per row of the weight-format table (WeightFormat::index), weights of that format
    // times activations of its ActivationType. A null slot is refused by name.
    std::array<MatmulRowsFn, kWeightFormatCount> matmul_rows{};
    MatmulRowsFn matmul(gguf::GgmlType type) const { return matmul_rows[weight_format(type).index]; }

    // ---- activations, one row of n values
    // out = silu(gate) * up, silu(x) = x / (1 + exp(-x)): whole groups of 16 use
    // llama.cpp's vector exp (vector_exp.hpp), the rest the C library's expf, as
    // llama.cpp's AVX-512 build does; bit-identical across variants.
    void (*swiglu_row)(const float* gate, const float* up, float* out, std::size_t n) = nullptr;
    // out = gelu(gate) * up through llama.cpp's F16 GELU table (`table`: 65536 F32
    // values indexed by the F16 bits of the input; gate <= -10 gives 0, gate >= 10 gives
    // gate * up), as ggml_vec_geglu_f32; bit-identical across variants.
    void (*geglu_row)(const float* gate, const float* up, float* out, std::size_t n, const float* table) = nullptr;

    // ---- attention pieces (attention.hpp puts them together)
    // In place over one row of n scores: s *= scale; p = exp(s - max) / sum, with the
    // vector exp and the sum in double.
    void (*softmax_row)(float* scores, std::size_t n, float scale) = nullptr;
    WeightedSumFn weighted_sum_f32 = nullptr;  // F32 values
    WeightedSumFn weighted_sum_f16 = nullptr;  // F16 values
};

// The kernel set of `variant` on a CPU with `features`; ember::Error if the CPU lacks
// what the variant needs. Optional extensions (VNNI, BF16) are used only if present in
// `features`, so tests can build the AVX-512 set without them.
KernelSet make_kernel_set(CpuVariant variant, const CpuFeatures& features);

// The set for this process, chosen on first use from the CPU and EMBER_CPU (see
// cpu_features.hpp) and never changed afterwards.
const KernelSet& process_kernel_set();

}  // namespace ember::kernels::fast
