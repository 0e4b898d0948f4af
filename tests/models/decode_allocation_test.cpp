// Rung: smoke (resources). After the first decode evaluation, decoding allocates nothing
// on either route: every intermediate lives in the session's preallocated workspace, the
// backend's scratch and the KV cache. Counted by replacing the global operator new (plain
// and aligned) in this test binary (oneTBB's internal task storage does not go through it).
#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "gguf/gguf_file.hpp"
#include "models/model.hpp"
#include "runtime/sampler.hpp"
#include "runtime/session.hpp"
#include "support/fixtures.hpp"

namespace {
std::atomic<std::size_t> g_allocations{0};
}

void* operator new(std::size_t size) {
    g_allocations.fetch_add(1, std::memory_order_relaxed);
    if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void* operator new(std::size_t size, std::align_val_t alignment) {
    g_allocations.fetch_add(1, std::memory_order_relaxed);
    const auto a = static_cast<std::size_t>(alignment);
    if (void* p = std::aligned_alloc(a, (size + a - 1) / a * a)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace ember::test {

namespace {

void check_no_allocations(runtime::Route route, int decoded_tokens) {
    for (const char* name : {"stories260K", "stories260K-q8_0", "synth-qwen3-q8_0", "synth-gemma4-e-q8_0"}) {
        INFO(name);
        const gguf::File file = gguf::File::open(fixture_path(std::string("models/") + name + ".gguf"));
        const std::size_t at_start = g_allocations.load();
        const auto model = models::load_model(file);
        REQUIRE(g_allocations.load() > at_start);  // the counter sees allocations
        const std::vector<std::int32_t> prompt = {2, 10, 20, 30, 40};
        runtime::Session session(*model, {.route = route, .context_length = 128, .threads = 2, .max_batch = prompt.size()});
        auto logits = session.prefill(prompt);
        std::int32_t token = runtime::greedy_token({logits.row(0), logits.cols});
        logits = session.decode(token);  // warms up anything lazily created
        const std::size_t before = g_allocations.load();
        for (int i = 0; i < decoded_tokens; ++i) {
            token = runtime::greedy_token({logits.row(0), logits.cols});
            logits = session.decode(token);
        }
        CHECK(g_allocations.load() - before == 0);
    }
}

}  // namespace

TEST_CASE("decoding allocates nothing per token (reference route, every family)") {
    check_no_allocations(runtime::Route::Reference, 32);
}

TEST_CASE("decoding allocates nothing per token (fast route, every family, 64 tokens)") {
    check_no_allocations(runtime::Route::Fast, 64);
}

}  // namespace ember::test
