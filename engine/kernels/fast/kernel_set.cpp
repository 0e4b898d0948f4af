#include "kernels/fast/kernel_set.hpp"

#include <cstdlib>

#include <fmt/format.h>

#include "common/error.hpp"
#include "kernels/fast/variant_kernels.hpp"

namespace ember::kernels::fast {

namespace {

using gguf::GgmlType;

void set_matmul(KernelSet& k, GgmlType type, MatmulRowsFn fn) { k.matmul_rows[weight_format(type).index] = fn; }

// The quantized products and quantizers every variant starts from (scalar_quants.cpp:
// they reproduce llama.cpp's order exactly); the SIMD sets replace some products with
// their own, which give the same bits.
void set_shared_quant_kernels(KernelSet& k) {
    k.quantize_row_q8_1 = scalar::quantize_row_q8_1;
    k.quantize_row_q8_K = scalar::quantize_row_q8_K;
    set_matmul(k, GgmlType::Q4_0, scalar::q4_0_matmul_rows);
    set_matmul(k, GgmlType::Q4_1, scalar::q4_1_matmul_rows);
    set_matmul(k, GgmlType::Q5_0, scalar::q5_0_matmul_rows);
    set_matmul(k, GgmlType::Q5_1, scalar::q5_1_matmul_rows);
    set_matmul(k, GgmlType::Q2_K, scalar::q2_k_matmul_rows);
    set_matmul(k, GgmlType::Q3_K, scalar::q3_k_matmul_rows);
    set_matmul(k, GgmlType::Q4_K, scalar::q4_k_matmul_rows);
    set_matmul(k, GgmlType::Q5_K, scalar::q5_k_matmul_rows);
    set_matmul(k, GgmlType::Q6_K, scalar::q6_k_matmul_rows);
}

KernelSet scalar_set() {
    KernelSet k;
    k.variant = CpuVariant::scalar;
    k.description = "scalar";
    k.quantize_row_q8_0 = scalar::quantize_row_q8_0;
    k.round_row_f16 = scalar::round_row_f16;
    k.round_row_bf16 = scalar::round_row_bf16;
    set_matmul(k, GgmlType::Q8_0, scalar::q8_0_matmul_rows);
    set_matmul(k, GgmlType::F16, scalar::f16_matmul_rows);
    set_matmul(k, GgmlType::BF16, scalar::bf16_matmul_rows);
    set_matmul(k, GgmlType::F32, scalar::f32_matmul_rows);
    set_shared_quant_kernels(k);
    k.swiglu_row = scalar::swiglu_row;
    k.geglu_row = scalar::geglu_row;
    k.softmax_row = scalar::softmax_row;
    k.weighted_sum_f32 = scalar::weighted_sum_f32;
    k.weighted_sum_f16 = scalar::weighted_sum_f16;
    return k;
}

KernelSet avx2_set() {
    KernelSet k;
    k.variant = CpuVariant::avx2;
    k.description = "avx2";
    k.quantize_row_q8_0 = avx2::quantize_row_q8_0;
    k.round_row_f16 = avx2::round_row_f16;
    k.round_row_bf16 = avx2::round_row_bf16;
    set_matmul(k, GgmlType::Q8_0, avx2::q8_0_matmul_rows);
    set_matmul(k, GgmlType::F16, avx2::f16_matmul_rows);
    set_matmul(k, GgmlType::BF16, avx2::bf16_matmul_rows);
    set_matmul(k, GgmlType::F32, avx2::f32_matmul_rows);
    set_shared_quant_kernels(k);
    k.quantize_row_q8_1 = avx2::quantize_row_q8_1;
    k.quantize_row_q8_K = avx2::quantize_row_q8_K;
    k.pack_token_pairs = avx2::pack_token_pairs;  // for the Q8_0 / Q4_0 / Q5_0 prompts
    set_matmul(k, GgmlType::Q4_0, avx2::q4_0_matmul_rows);
    set_matmul(k, GgmlType::Q4_K, avx2::q4_k_matmul_rows);
    set_matmul(k, GgmlType::Q6_K, avx2::q6_k_matmul_rows);
    set_matmul(k, GgmlType::Q4_1, avx2::q4_1_matmul_rows);
    set_matmul(k, GgmlType::Q5_1, avx2::q5_1_matmul_rows);
    set_matmul(k, GgmlType::Q2_K, avx2::q2_k_matmul_rows);
    set_matmul(k, GgmlType::Q3_K, avx2::q3_k_matmul_rows);
    set_matmul(k, GgmlType::Q5_K, avx2::q5_k_matmul_rows);
    set_matmul(k, GgmlType::Q5_0, avx2::q5_0_matmul_rows);
    k.swiglu_row = avx2::swiglu_row;
    k.geglu_row = avx2::geglu_row;
    k.softmax_row = avx2::softmax_row;
    k.weighted_sum_f32 = avx2::weighted_sum_f32;
    k.weighted_sum_f16 = avx2::weighted_sum_f16;
    return k;
}

// The AVX2 set with the prompt products of the formats that take Q8_0 activations by
// AVX-VNNI's 256-bit vpdpbusd, and Q4_K's and Q6_K's by its vpdpwssd (the same bits).
KernelSet avxvnni_set() {
    KernelSet k = avx2_set();
    k.variant = CpuVariant::avxvnni;
    k.description = "avxvnni";
    k.pack_token_pairs = nullptr;  // its prompts read biased bytes, packed per slab
    set_matmul(k, GgmlType::Q8_0, avxvnni::q8_0_matmul_rows);
    set_matmul(k, GgmlType::Q4_0, avxvnni::q4_0_matmul_rows);
    set_matmul(k, GgmlType::Q5_0, avxvnni::q5_0_matmul_rows);
    set_matmul(k, GgmlType::Q4_K, avxvnni::q4_k_matmul_rows);
    set_matmul(k, GgmlType::Q6_K, avxvnni::q6_k_matmul_rows);
    return k;
}

// AVX-512 F/BW/VL/DQ kernels; without VNNI the quantized products are the AVX2 ones, with it all
// but Q4_1 and Q5_1 (AVX2 in both) are VNNI kernels; without
// AVX512_BF16 the BF16 product converts to F32 and uses FMA.
KernelSet avx512_set(const CpuFeatures& f) {
    KernelSet k = avx2_set();
    k.variant = CpuVariant::avx512;
    k.quantize_row_q8_0 = avx512::quantize_row_q8_0;
    k.round_row_f16 = avx512::round_row_f16;
    k.round_row_bf16 = avx512::round_row_bf16;
    set_matmul(k, GgmlType::F16, avx512::f16_matmul_rows);
    set_matmul(k, GgmlType::BF16, avx512::bf16_matmul_rows);
    set_matmul(k, GgmlType::F32, avx512::f32_matmul_rows);
    k.swiglu_row = avx512::swiglu_row;
    k.geglu_row = avx512::geglu_row;
    k.softmax_row = avx512::softmax_row;
    k.weighted_sum_f32 = avx512::weighted_sum_f32;
    k.weighted_sum_f16 = avx512::weighted_sum_f16;
    if (f.avx512vnni) {
        set_matmul(k, GgmlType::Q8_0, avx512_vnni::q8_0_matmul_rows);
        k.pack_token_lanes = avx512_vnni::pack_token_lanes;
        k.pack_token_pairs = nullptr;
        set_matmul(k, GgmlType::Q4_0, avx512_vnni::q4_0_matmul_rows);
        set_matmul(k, GgmlType::Q5_0, avx512_vnni::q5_0_matmul_rows);
        set_matmul(k, GgmlType::Q4_K, avx512_vnni::q4_k_matmul_rows);
        set_matmul(k, GgmlType::Q6_K, avx512_vnni::q6_k_matmul_rows);
        set_matmul(k, GgmlType::Q2_K, avx512_vnni::q2_k_matmul_rows);
        set_matmul(k, GgmlType::Q3_K, avx512_vnni::q3_k_matmul_rows);
        set_matmul(k, GgmlType::Q5_K, avx512_vnni::q5_k_matmul_rows);
    }
    if (f.avx512bf16) set_matmul(k, GgmlType::BF16, avx512_bf16::bf16_matmul_rows);
    if (f.avx512vnni && f.avx512bf16) k.description = "avx512+vnni+bf16";
    else if (f.avx512vnni) k.description = "avx512+vnni";
    else if (f.avx512bf16) k.description = "avx512+bf16";
    else k.description = "avx512";
    return k;
}

}  // namespace

KernelSet make_kernel_set(CpuVariant variant, const CpuFeatures& features) {
    std::string missing;
    if (!supports(features, variant, &missing)) {
        throw Error(fmt::format("this CPU cannot run the {} kernels (missing {})", variant_name(variant), missing));
    }
    switch (variant) {
        case CpuVariant::scalar: return scalar_set();
        case CpuVariant::avx2: return avx2_set();
        case CpuVariant::avxvnni: return avxvnni_set();
        case CpuVariant::avx512: return avx512_set(features);
    }
    throw Error("unknown CPU variant");
}

const KernelSet& process_kernel_set() {
    static const KernelSet chosen = [] {
        const CpuFeatures features = detect_cpu_features();
        return make_kernel_set(choose_variant(features, std::getenv("EMBER_CPU")), features);
    }();
    return chosen;
}

}  // namespace ember::kernels::fast
