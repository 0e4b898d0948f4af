// Rung: smoke (resources). Once a session is constructed, evaluating allocates nothing on
// either route, the first prefill and decode included, and with an F16 cache: every
// intermediate lives in the session's preallocated workspace, the backend's scratch
// (reserved up front for the session's limits) and the KV cache. Counted by replacing
// the global operator new (plain and aligned) in this test binary. oneTBB's runtime
// allocates once when a worker thread first joins an arena (its bookkeeping, not ours):
// allocations whose caller is inside libtbb are counted apart and allowed only before
// the first decode.
#include <doctest/doctest.h>

#include <dlfcn.h>

#include <atomic>
#include <cstring>
#include <cstdlib>
#include <new>
#include <vector>

#include "gguf/gguf_file.hpp"
#include "models/model.hpp"
#include "runtime/sampler.hpp"
#include "runtime/session.hpp"
#include "support/fixtures.hpp"

namespace {
std::atomic<std::size_t> g_allocations{0};      // by the engine (and the test)
std::atomic<std::size_t> g_tbb_allocations{0};  // by oneTBB's runtime

void count(const void* caller) {
    Dl_info info;
    const bool by_tbb = dladdr(caller, &info) != 0 && info.dli_fname != nullptr && std::strstr(info.dli_fname, "libtbb");
    (by_tbb ? g_tbb_allocations : g_allocations).fetch_add(1, std::memory_order_relaxed);
}
}  // namespace

// These replace the global allocation functions, so malloc/free pair up; GCC cannot see
// that and warns where a standard allocator's delete is inlined into free().
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

void* operator new(std::size_t size) {
    count(__builtin_return_address(0));
    if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void* operator new(std::size_t size, std::align_val_t alignment) {
    count(__builtin_return_address(0));
    const auto a = static_cast<std::size_t>(alignment);
    if (void* p = std::aligned_alloc(a, (size + a - 1) / a * a)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace ember::test {

namespace {

void check_no_allocations(runtime::Route route, kernels::KvType kv_type, int decoded_tokens) {
    for (const char* name : {"stories260K", "stories260K-q8_0", "synth-qwen3-q8_0", "synth-gemma4-e-q8_0"}) {
        INFO(name);
        const gguf::File file = gguf::File::open(fixture_path(std::string("models/") + name + ".gguf"));
        const std::size_t at_start = g_allocations.load();
        const auto model = models::load_model(file);
        REQUIRE(g_allocations.load() > at_start);  // the counter sees allocations
        const std::vector<std::int32_t> prompt = {2, 10, 20, 30, 40};
        runtime::Session session(*model, {.route = route, .kv_type = kv_type, .context_length = 128, .threads = 2,
                                          .max_batch = prompt.size()});
        const std::size_t before = g_allocations.load();
        auto logits = session.prefill(prompt);
        std::int32_t token = runtime::greedy_token({logits.row(0), logits.cols});
        logits = session.decode(token);
        const std::size_t after_first_decode = g_allocations.load(), tbb_before = g_tbb_allocations.load();
        for (int i = 0; i < decoded_tokens; ++i) {
            token = runtime::greedy_token({logits.row(0), logits.cols});
            logits = session.decode(token);
        }
        const std::size_t after_decoding = g_allocations.load(), tbb_after = g_tbb_allocations.load();
        CHECK_MESSAGE(after_first_decode - before == 0, "the first evaluations (prefill, decode) allocated");
        CHECK_MESSAGE(after_decoding - after_first_decode == 0, decoded_tokens << " decoded tokens allocated");
        CHECK_MESSAGE(tbb_after - tbb_before == 0, "oneTBB allocated while decoding");
    }
}

}  // namespace

TEST_CASE("decoding allocates nothing, first evaluation included (reference route, every family)") {
    check_no_allocations(runtime::Route::Reference, kernels::KvType::f32, 32);
}

TEST_CASE("decoding allocates nothing per token (fast route, every family, 64 tokens, F32 and F16 caches)") {
    if (test::fast_route_missing()) return;
    check_no_allocations(runtime::Route::Fast, kernels::KvType::f32, 64);
    check_no_allocations(runtime::Route::Fast, kernels::KvType::f16, 64);
}

}  // namespace ember::test
