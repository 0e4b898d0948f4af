#include "kernels/fast/cpu_features.hpp"

#include <iterator>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "common/error.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define EMBER_X86 1
#endif

namespace ember::kernels::fast {

namespace {

#ifdef EMBER_X86
// XCR0: which register states the OS saves on a context switch.
unsigned long long read_xcr0() {
    unsigned eax = 0, edx = 0;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return (static_cast<unsigned long long>(edx) << 32) | eax;
}
#endif

bool bit(unsigned value, int index) { return (value >> index) & 1u; }

// "scalar, avx2, avxvnni or avx512"
std::string variant_names() {
    std::string out;
    for (std::size_t i = 0; i < std::size(kAllCpuVariants); ++i) {
        if (i > 0) out += i + 1 == std::size(kAllCpuVariants) ? " or " : ", ";
        out += variant_name(kAllCpuVariants[i]);
    }
    return out;
}

}  // namespace

CpuFeatures detect_cpu_features() {
    CpuFeatures f;
#ifdef EMBER_X86
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
    const bool osxsave = bit(ecx, 27);
    const bool cpu_avx = bit(ecx, 28);
    const bool cpu_fma = bit(ecx, 12);
    const bool cpu_f16c = bit(ecx, 29);
    if (!osxsave || !cpu_avx) return f;
    const unsigned long long xcr0 = read_xcr0();
    const bool os_ymm = (xcr0 & 0x6) == 0x6;            // SSE and AVX state
    const bool os_zmm = os_ymm && (xcr0 & 0xE0) == 0xE0;  // opmask, ZMM_Hi256, Hi16_ZMM
    if (!os_ymm) return f;

    unsigned max_leaf = __get_cpuid_max(0, nullptr);
    if (max_leaf < 7) return f;
    __cpuid_count(7, 0, eax, ebx, ecx, edx);
    f.avx2 = bit(ebx, 5);
    f.fma = cpu_fma;
    f.f16c = cpu_f16c;
    unsigned eax1 = 0, ebx1 = 0, ecx1 = 0, edx1 = 0;  // leaf 7, subleaf 1
    if (eax >= 1) __cpuid_count(7, 1, eax1, ebx1, ecx1, edx1);
    f.avxvnni = bit(eax1, 4);
    if (os_zmm) {
        f.avx512f = bit(ebx, 16);
        f.avx512dq = bit(ebx, 17);
        f.avx512bw = bit(ebx, 30);
        f.avx512vl = bit(ebx, 31);
        f.avx512vnni = bit(ecx, 11);
        f.avx512bf16 = bit(eax1, 5);
    }
#endif
    return f;
}

std::string_view variant_name(CpuVariant variant) {
    switch (variant) {
        case CpuVariant::scalar: return "scalar";
        case CpuVariant::avx2: return "avx2";
        case CpuVariant::avxvnni: return "avxvnni";
        case CpuVariant::avx512: return "avx512";
    }
    return "unknown";
}

std::optional<CpuVariant> parse_variant(std::string_view name) {
    for (CpuVariant v : kAllCpuVariants) {
        if (variant_name(v) == name) return v;
    }
    return std::nullopt;
}

bool supports(const CpuFeatures& f, CpuVariant variant, std::string* missing) {
    std::string absent;
    auto need = [&](bool present, std::string_view name) {
        if (present) return;
        if (!absent.empty()) absent += ", ";
        absent += name;
    };
    if (variant != CpuVariant::scalar) {
        need(f.avx2, "avx2");
        need(f.fma, "fma");
        need(f.f16c, "f16c");
    }
    if (variant == CpuVariant::avxvnni) need(f.avxvnni, "avxvnni");
    if (variant == CpuVariant::avx512) {
        need(f.avx512f, "avx512f");
        need(f.avx512bw, "avx512bw");
        need(f.avx512vl, "avx512vl");
        need(f.avx512dq, "avx512dq");
    }
    if (missing) *missing = absent;
    return absent.empty();
}

CpuVariant best_variant(const CpuFeatures& features) {
    CpuVariant best = CpuVariant::scalar;
    for (CpuVariant v : kAllCpuVariants)
        if (supports(features, v)) best = v;
    return best;
}

CpuVariant choose_variant(const CpuFeatures& features, const char* ember_cpu) {
    if (ember_cpu == nullptr || *ember_cpu == '\0') return best_variant(features);
    const auto variant = parse_variant(ember_cpu);
    if (!variant && std::string_view(ember_cpu) == "amx") {
        throw Error(fmt::format("EMBER_CPU=amx: this build has no AMX kernels (none was built without a machine that "
                                "has AMX to test them on); expected {}",
                                variant_names()));
    }
    if (!variant) {
        throw Error(fmt::format("EMBER_CPU={}: unknown CPU variant (expected {})", ember_cpu, variant_names()));
    }
    std::string missing;
    if (!supports(features, *variant, &missing)) {
        throw Error(fmt::format("EMBER_CPU={}: this CPU cannot run the {} kernels (missing {})", ember_cpu,
                                variant_name(*variant), missing));
    }
    return *variant;
}

}  // namespace ember::kernels::fast
