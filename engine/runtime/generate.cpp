#include "runtime/generate.hpp"

#include <fmt/format.h>

#include <chrono>

#include "common/error.hpp"

namespace ember::runtime {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void check_fits(const Session& session, std::size_t prompt_tokens, std::size_t max_tokens) {
    const std::size_t ctx = session.context_length();
    if (prompt_tokens == 0) throw Error("the prompt has no tokens");
    if (prompt_tokens > ctx) {
        throw Error(fmt::format("the prompt has {} tokens but the context holds only {} (--ctx)", prompt_tokens, ctx));
    }
    // Every generated token but the last is evaluated at the next position.
    const std::size_t needed = prompt_tokens + (max_tokens > 0 ? max_tokens - 1 : 0);
    if (needed > ctx) {
        throw Error(fmt::format("the prompt ({} tokens) and {} generated tokens need {} positions, more than the context "
                                "of {} (--ctx)",
                                prompt_tokens, max_tokens, needed, ctx));
    }
}

// The sampling step as one more operation for an attached observer (tracing).
void report_sampling(const Session& session, const Sampler& sampler, std::size_t n_vocab, Clock::time_point start) {
    kernels::OpObserver* observer = session.observer();
    if (observer == nullptr) return;
    kernels::OpRecord record;
    record.site = {"sampling", kernels::kNoLayer, kernels::OpKind::Sampling};
    record.route = session.backend().route();
    record.kernel = sampler.greedy() ? "sampler.greedy" : "sampler.seeded";
    record.input_shape = {1, n_vocab};
    record.output_shape = {1, 1};
    record.input_bytes = n_vocab * sizeof(float);
    record.output_bytes = sizeof(std::int32_t);
    record.start = start;
    record.duration_ns = static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
    observer->on_op(record);
}

}  // namespace

GenerationResult generate(Session& session, std::span<const std::int32_t> prompt, const GenerationOptions& options,
                          const std::function<bool(std::int32_t)>& is_end_of_generation,
                          const std::function<void(std::int32_t)>& on_token, hooks::ActiveHooks* hooks) {
    session.reset();
    check_fits(session, prompt.size(), options.max_tokens);
    Sampler sampler(options.sampling);
    GenerationResult result;
    result.tokens.reserve(options.max_tokens);
    result.steps.reserve(options.max_tokens);

    auto start = Clock::now();
    kernels::ConstRows logits = session.prefill(prompt, options.all_prompt_logits, hooks);
    result.timings.prefill_ms = ms_since(start);

    for (std::size_t i = 0; i < options.max_tokens; ++i) {
        start = Clock::now();
        const std::span<const float> row(logits.row(logits.rows - 1), logits.cols);  // the last position's
        const std::int32_t token = sampler.sample(row);
        if (token < 0) throw Error(fmt::format("{} at step {}; cannot choose a token", no_token_reason(row), i));
        const TokenScore score = score_token(row, token);
        result.timings.sampling_ms += ms_since(start);
        report_sampling(session, sampler, row.size(), start);

        if (is_end_of_generation && is_end_of_generation(token)) {
            result.stop_reason = StopReason::EndOfGeneration;
            return result;
        }
        result.tokens.push_back(token);
        result.steps.push_back({token, score.logit, score.margin});
        if (on_token) on_token(token);
        if (i + 1 == options.max_tokens) break;

        start = Clock::now();
        logits = session.decode(token, hooks);
        result.timings.decode_ms += ms_since(start);
        ++result.timings.decode_evaluations;
    }
    result.stop_reason = StopReason::MaxTokens;
    return result;
}

}  // namespace ember::runtime
