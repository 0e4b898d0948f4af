// What the CPU can do, and which kernel variant runs on it.
//
// Four variants exist, each a complete set of kernels (kernel_set.hpp):
//   scalar   portable C++ for any x86-64 (or other) CPU
//   avx2     AVX2 + FMA + F16C
//   avxvnni  avx2 + AVX-VNNI (256-bit vpdpbusd: Alder Lake and later, Sapphire Rapids, Zen 5)
//   avx512   AVX-512 F/BW/VL/DQ on top of avx2; within it, AVX512_VNNI and AVX512_BF16
//            kernels are used where the CPU has them (the set's `description` says which)
// The variant is chosen once per process: the best one the CPU supports, or the one
// named by EMBER_CPU=scalar|avx2|avxvnni|avx512 (an unknown name, or a variant this CPU
// lacks, is refused with an error naming the missing features).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ember::kernels::fast {

enum class CpuVariant { scalar, avx2, avxvnni, avx512 };

// From the least to the most capable.
inline constexpr CpuVariant kAllCpuVariants[] = {CpuVariant::scalar, CpuVariant::avx2, CpuVariant::avxvnni,
                                                 CpuVariant::avx512};

// Instruction-set extensions the kernels use, each true only if the CPU reports it and
// the operating system saves the registers it needs (XCR0), so it is safe to execute.
struct CpuFeatures {
    bool avx2 = false;
    bool fma = false;
    bool f16c = false;
    bool avxvnni = false;  // the VEX (256-bit) vpdpbusd
    bool avx512f = false;
    bool avx512bw = false;
    bool avx512vl = false;
    bool avx512dq = false;
    bool avx512vnni = false;
    bool avx512bf16 = false;
};

// The features of the CPU this process runs on (cpuid + xgetbv).
CpuFeatures detect_cpu_features();

// "scalar", "avx2", "avxvnni", "avx512".
std::string_view variant_name(CpuVariant variant);
// The inverse of variant_name; nullopt for anything else.
std::optional<CpuVariant> parse_variant(std::string_view name);

// Whether `features` has everything `variant` needs; when not, `missing` (if given) lists
// the absent features ("avx512bw, avx512vl").
bool supports(const CpuFeatures& features, CpuVariant variant, std::string* missing = nullptr);

// The most capable variant `features` supports.
CpuVariant best_variant(const CpuFeatures& features);

// The variant for this process: EMBER_CPU when it is set and non-empty, else the best.
// `ember_cpu` is the value of EMBER_CPU (nullptr when unset). Throws ember::Error for an
// unknown name or a variant `features` lacks.
CpuVariant choose_variant(const CpuFeatures& features, const char* ember_cpu);

}  // namespace ember::kernels::fast
