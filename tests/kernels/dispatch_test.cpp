// Rung: below the ladder (kernel unit tests). CPU variant selection: names, EMBER_CPU
// parsing, refusal of variants the CPU lacks, complete kernel tables, and the thread
// pool's chunking.
#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "kernels/fast/cpu_features.hpp"
#include "kernels/fast/kernel_set.hpp"
#include "kernels/fast/thread_pool.hpp"

namespace fast = ember::kernels::fast;

namespace {

fast::CpuFeatures avx2_only() {
    fast::CpuFeatures f;
    f.avx2 = f.fma = f.f16c = true;
    return f;
}

fast::CpuFeatures full_avx512() {
    fast::CpuFeatures f = avx2_only();
    f.avx512f = f.avx512bw = f.avx512vl = f.avx512dq = f.avx512vnni = f.avx512bf16 = true;
    return f;
}

}  // namespace

TEST_CASE("dispatch: variant names round-trip and unknown names are rejected") {
    for (fast::CpuVariant v : fast::kAllCpuVariants) CHECK(fast::parse_variant(fast::variant_name(v)) == v);
    CHECK_FALSE(fast::parse_variant("avx"));
    CHECK_FALSE(fast::parse_variant("AVX2"));
    CHECK_FALSE(fast::parse_variant(""));
}

TEST_CASE("dispatch: the best variant follows the features") {
    CHECK(fast::best_variant(fast::CpuFeatures{}) == fast::CpuVariant::scalar);
    CHECK(fast::best_variant(avx2_only()) == fast::CpuVariant::avx2);
    CHECK(fast::best_variant(full_avx512()) == fast::CpuVariant::avx512);
    fast::CpuFeatures no_fma = avx2_only();
    no_fma.fma = false;
    CHECK(fast::best_variant(no_fma) == fast::CpuVariant::scalar);
    fast::CpuFeatures no_bw = full_avx512();
    no_bw.avx512bw = false;
    CHECK(fast::best_variant(no_bw) == fast::CpuVariant::avx2);
    fast::CpuFeatures vnni = avx2_only();
    vnni.avxvnni = true;
    CHECK(fast::best_variant(vnni) == fast::CpuVariant::avxvnni);
    no_bw.avxvnni = true;
    CHECK(fast::best_variant(no_bw) == fast::CpuVariant::avxvnni);
    fast::CpuFeatures everything = full_avx512();
    everything.avxvnni = true;
    CHECK(fast::best_variant(everything) == fast::CpuVariant::avx512);
}

TEST_CASE("dispatch: EMBER_CPU picks a variant, refuses one the CPU lacks and unknown names") {
    CHECK(fast::choose_variant(full_avx512(), nullptr) == fast::CpuVariant::avx512);
    CHECK(fast::choose_variant(full_avx512(), "") == fast::CpuVariant::avx512);
    CHECK(fast::choose_variant(full_avx512(), "scalar") == fast::CpuVariant::scalar);
    CHECK(fast::choose_variant(full_avx512(), "avx2") == fast::CpuVariant::avx2);
    CHECK_THROWS_WITH_AS(fast::choose_variant(avx2_only(), "avx512"),
                         "EMBER_CPU=avx512: this CPU cannot run the avx512 kernels (missing avx512f, avx512bw, avx512vl, avx512dq)",
                         ember::Error);
    CHECK_THROWS_WITH_AS(fast::choose_variant(full_avx512(), "avxvnni"),
                         "EMBER_CPU=avxvnni: this CPU cannot run the avxvnni kernels (missing avxvnni)", ember::Error);
    CHECK_THROWS_WITH_AS(fast::choose_variant(full_avx512(), "sse"),
                         "EMBER_CPU=sse: unknown CPU variant (expected scalar, avx2, avxvnni or avx512)", ember::Error);
    CHECK_THROWS_WITH_AS(fast::choose_variant(full_avx512(), "amx"),
                         "EMBER_CPU=amx: this build has no AMX kernels (none was built without a machine that has AMX to "
                         "test them on); expected scalar, avx2, avxvnni or avx512",
                         ember::Error);
    CHECK_THROWS_AS(fast::make_kernel_set(fast::CpuVariant::avx2, fast::CpuFeatures{}), ember::Error);
}

TEST_CASE("dispatch: every kernel set this CPU runs is complete and says what it uses") {
    const fast::CpuFeatures cpu = fast::detect_cpu_features();
    for (fast::CpuVariant v : fast::kAllCpuVariants) {
        if (!fast::supports(cpu, v)) continue;
        const fast::KernelSet k = fast::make_kernel_set(v, cpu);
        CAPTURE(k.description);
        CHECK(k.variant == v);
        CHECK(k.description.substr(0, fast::variant_name(v).size()) == fast::variant_name(v));
        CHECK((k.quantize_row_q8_0 != nullptr));
        CHECK((k.round_row_f16 != nullptr));
        CHECK((k.round_row_bf16 != nullptr));
        CHECK((k.quantize_row_q8_1 != nullptr));
        CHECK((k.quantize_row_q8_K != nullptr));
        for (const ember::kernels::WeightFormat& f : ember::kernels::weight_formats()) {
            CAPTURE(f.name);
            CHECK((k.matmul_rows[f.index] != nullptr));
        }
    }
    if (fast::supports(cpu, fast::CpuVariant::avx512)) {
        const auto k = fast::make_kernel_set(fast::CpuVariant::avx512, cpu);
        CHECK((k.description.find("vnni") != std::string_view::npos) == cpu.avx512vnni);
        CHECK((k.description.find("bf16") != std::string_view::npos) == cpu.avx512bf16);
    }
}

// ctest runs this case again with EMBER_CPU set to each variant (tests/kernels/CMakeLists.txt).
TEST_CASE("dispatch: the process kernel set honours EMBER_CPU") {
    const char* env = std::getenv("EMBER_CPU");
    const fast::CpuFeatures cpu = fast::detect_cpu_features();
    const auto requested = env && *env ? fast::parse_variant(env) : std::optional<fast::CpuVariant>{};
    if (requested && !fast::supports(cpu, *requested)) {
        CHECK_THROWS_AS(fast::process_kernel_set(), ember::Error);
        return;
    }
    const fast::KernelSet& k = fast::process_kernel_set();
    CHECK(k.variant == (requested ? *requested : fast::best_variant(cpu)));
    CHECK(&k == &fast::process_kernel_set());  // chosen once
    MESSAGE("kernel set: " << std::string(k.description));
}

TEST_CASE("thread pool: chunks cover the range exactly once, any thread count") {
    CHECK_THROWS_AS(fast::ThreadPool(0), ember::Error);
    for (int threads : {1, 2, 3}) {
        fast::ThreadPool pool(threads);
        CHECK(pool.threads() == threads);
        for (std::size_t n : {0, 1, 5, 64, 1000}) {
            for (std::size_t grain : {1, 3, 100}) {
                std::vector<std::atomic<int>> seen(n);
                pool.for_chunks(n, grain, [&](std::size_t b, std::size_t e) {
                    CHECK(b < e);
                    for (std::size_t i = b; i < e; ++i) seen[i]++;
                });
                for (std::size_t i = 0; i < n; ++i) REQUIRE(seen[i].load() == 1);
            }
        }
    }
}
