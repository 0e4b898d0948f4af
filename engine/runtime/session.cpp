#include "runtime/session.hpp"

#include <fmt/format.h>
#include <oneapi/tbb/task_arena.h>

#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "common/build_options.hpp"
#include "common/error.hpp"
#include "kernels/reference/reference_backend.hpp"
#ifndef EMBER_NO_FAST_ROUTE
#include "kernels/fast/fast_backend.hpp"
#endif

namespace ember::runtime {
namespace {

// The memory a cache may take: what the kernel says is available now (MemAvailable; a
// cache of nearly all the RAM is met by the OOM killer, not by an error), else the RAM,
// and no more than a cgroup limit.
std::uint64_t memory_limit_bytes() {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
    std::uint64_t limit = pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page)
                                                : std::numeric_limits<std::uint64_t>::max();
    std::ifstream meminfo("/proc/meminfo");
    for (std::string key; meminfo >> key;) {
        std::uint64_t kib = 0;
        if (key == "MemAvailable:" && meminfo >> kib) {
            limit = std::min(limit, kib * 1024);
            break;
        }
        meminfo.ignore(std::numeric_limits<std::streamsize>::max(), '\n');
    }
    std::ifstream cgroup("/sys/fs/cgroup/memory.max");
    std::uint64_t cgroup_limit = 0;
    if (cgroup >> cgroup_limit && cgroup_limit > 0) limit = std::min(limit, cgroup_limit);  // "max" reads as nothing
    return limit;
}

std::size_t checked_context(const models::ModelConfig& config, std::size_t requested, kernels::KvType kv_type) {
    const std::size_t n = requested == 0 ? default_context_length(config) : requested;
    // Positions are int32 in llama.cpp and floats in RoPE; stay far below both limits.
    constexpr std::size_t max_context = std::size_t{1} << 24;
    if (n > max_context) throw Error(fmt::format("context length {} is larger than the maximum {}", n, max_context));
    // The KV cache is allocated whole up front: a cache larger than the machine is refused
    // with its size before anything is allocated, not met by the OOM killer. (n <= 2^24 and
    // the per-position bytes of any model that loaded keep this far from overflowing.)
    const double need = static_cast<double>(models::KvCache::bytes_for(config, n, kv_type));
    const double have = static_cast<double>(memory_limit_bytes());
    if (need > have)
        throw Error(fmt::format("--ctx {}: the {} KV cache needs {:.1f} GB ({} layers), more than the {:.1f} GB of memory "
                                "available on this machine; give a smaller --ctx{}",
                                n, kernels::kv_type_name(kv_type), need / 1e9, config.layers.size(), have / 1e9,
                                kv_type == kernels::KvType::f32 ? " (or --kv-type f16, half the size)" : ""));
    return n;
}

}  // namespace

struct Session::Arena {
    explicit Arena(std::size_t threads) : arena(static_cast<int>(threads)) {}
    tbb::task_arena arena;
};

std::string_view route_name(Route route) { return route == Route::Reference ? "reference" : "fast"; }

std::optional<Route> route_from_name(std::string_view name) {
    if (name == "reference") return Route::Reference;
    if (name == "fast") return Route::Fast;
    return std::nullopt;
}

bool has_route(Route route) { return route == Route::Reference || has_fast_route(); }
Route default_route() { return has_fast_route() ? Route::Fast : Route::Reference; }

void require_route(Route route) {
    if (!has_route(route)) {
        throw Error(fmt::format("route '{}': this build of ember has no {} route (it was configured with "
                                "-DEMBER_FAST=OFF); use the reference route",
                                route_name(route), route_name(route)));
    }
}

std::unique_ptr<kernels::Backend> make_backend(Route route) {
    require_route(route);
    switch (route) {
        case Route::Reference: return kernels::reference::make_reference_backend();
        case Route::Fast:
#ifndef EMBER_NO_FAST_ROUTE
            return kernels::fast::make_fast_backend();
#else
            break;
#endif
    }
    throw Error("unknown route");
}

std::size_t default_context_length(const models::ModelConfig& config) {
    return std::min<std::size_t>(4096, config.n_ctx_train);
}

Session::Session(const models::Model& model, const SessionOptions& options)
    : model_(model),
      backend_(make_backend(options.route)),
      ops_(*backend_, options.observer),
      context_length_(checked_context(model.config(), options.context_length, options.kv_type)),
      threads_(options.threads),
      state_{models::KvCache(model.config(), context_length_, options.kv_type), models::Workspace{}} {
    if (threads_ == 0) throw Error("the thread count must be at least 1");
    if (context_length_ == 0) throw Error("the context length must be at least 1");
    arena_ = std::make_unique<Arena>(threads_);
    const models::ModelConfig& c = model.config();
    const std::size_t batch = std::clamp<std::size_t>(options.max_batch, 1, context_length_);
    state_.workspace.reserve(c, batch, options.all_logits ? batch : 1);
    const models::MaxDims dims = models::max_dims(c);
    const kernels::ScratchLimits limits{.max_tokens = batch,
                                        .max_context = context_length_,
                                        .max_heads = dims.n_head,
                                        .max_head_dim = dims.head_dim,
                                        .max_matmul_cols = std::max({std::size_t{c.n_embd}, dims.q_width, dims.n_ff})};
    arena_->arena.execute([&] { backend_->reserve(limits); });  // per-thread scratch for this arena's threads
}

Session::~Session() = default;

void Session::reset() {
    position_ = 0;
    step_ = 0;
    started_ = false;
    packed_ = false;
}

kernels::ConstRows Session::prefill(std::span<const std::int32_t> tokens, bool all_logits, hooks::ActiveHooks* hooks) {
    return evaluate(tokens, hooks::Phase::Prefill, all_logits, hooks);
}

kernels::ConstRows Session::prefill_packed(std::span<const std::int32_t> tokens, std::span<const std::size_t> lengths,
                                          bool all_logits, std::span<const bool> sequence_all_logits,
                                          hooks::ActiveHooks* hooks) {
    if (position_ != 0) throw Error("a packed evaluation needs an empty session (reset() first)");
    if (sequence_all_logits.size() != lengths.size())
        throw Error(fmt::format("packed sequences: {} lengths but {} logits flags", lengths.size(), sequence_all_logits.size()));
    std::vector<models::Segment> segments;
    std::size_t row = 0;
    for (std::size_t i = 0; i < lengths.size(); ++i) {
        const std::size_t n = lengths[i];
        if (n == 0) throw Error("a packed evaluation's sequences need at least one token each");
        segments.push_back({.row_begin = row, .rows = n, .position = 0, .kv_begin = row, .all_logits = sequence_all_logits[i]});
        row += n;
    }
    if (row != tokens.size())
        throw Error(fmt::format("packed sequences of {} tokens in all, but {} tokens given", row, tokens.size()));
    const kernels::ConstRows logits = evaluate(tokens, hooks::Phase::Prefill, all_logits, hooks, segments);
    packed_ = true;
    return logits;
}

kernels::ConstRows Session::decode(std::int32_t token, hooks::ActiveHooks* hooks) {
    return evaluate(std::span<const std::int32_t>(&token, 1), hooks::Phase::Decode, false, hooks);
}

kernels::ConstRows Session::evaluate(std::span<const std::int32_t> tokens, hooks::Phase phase, bool all_logits,
                                     hooks::ActiveHooks* hooks, std::span<const models::Segment> segments) {
    const models::ModelConfig& c = model_.config();
    if (tokens.empty()) throw Error("an evaluation needs at least one token");
    if (packed_) throw Error("the session holds a packed evaluation: reset() before the next one");
    if (tokens.size() > context_length_ - position_) {
        throw Error(fmt::format("{} tokens at position {} do not fit in the context of {} tokens (--ctx)", tokens.size(),
                                position_, context_length_));
    }
    for (std::size_t i = 0; i < tokens.size(); ++i) {
        if (tokens[i] < 0 || static_cast<std::size_t>(tokens[i]) >= c.n_vocab) {
            throw Error(fmt::format("token id {} at position {} is outside the vocabulary of {} tokens", tokens[i],
                                    position_ + i, c.n_vocab));
        }
    }

    const std::size_t rows = all_logits ? tokens.size() : 1;
    state_.workspace.reserve(c, tokens.size(), rows);  // allocates only beyond the preallocated size

    models::Evaluation eval;
    eval.tokens = tokens;
    eval.info.phase = phase;
    eval.info.start_position = position_;
    eval.info.n_tokens = tokens.size();
    eval.info.step = started_ ? step_ + 1 : 0;
    eval.info.tracing = ops_.observer() != nullptr;
    eval.info.all_logits = all_logits;
    eval.segments = segments;

    if (kernels::OpObserver* observer = ops_.observer()) {
        observer->begin_evaluation({hooks::phase_name(phase), eval.info.step, position_, tokens.size()});
    }
    arena_->arena.execute([&] {
        if (hooks != nullptr) {
            model_.evaluate(eval, state_, ops_, *hooks);
        } else {
            hooks::DisabledHooks disabled;
            model_.evaluate(eval, state_, ops_, disabled);
        }
    });

    position_ += tokens.size();
    step_ = eval.info.step;
    started_ = true;
    return {state_.workspace.logits.data(), rows, c.n_vocab};
}

}  // namespace ember::runtime
