#include "runtime/sampler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.hpp"

namespace ember::runtime {

void validate(const SamplingOptions& options) {
    if (!(std::isfinite(options.temperature) && options.temperature >= 0.0f)) {
        throw UsageError(fmt::format("--temperature {} must be a finite number >= 0", options.temperature));
    }
    if (!(options.top_p > 0.0f && options.top_p <= 1.0f)) {
        throw UsageError(fmt::format("--top-p {} must be in (0, 1]", options.top_p));
    }
}

std::int32_t greedy_token(std::span<const float> logits) {
    std::int32_t best = -1;
    for (std::size_t i = 0; i < logits.size(); ++i) {
        if (std::isnan(logits[i])) continue;
        if (best < 0 || logits[i] > logits[static_cast<std::size_t>(best)]) best = static_cast<std::int32_t>(i);
    }
    // Nothing above -inf: no token is more likely than another, and none can be chosen.
    if (best >= 0 && logits[static_cast<std::size_t>(best)] == -std::numeric_limits<float>::infinity()) return -1;
    return best;
}

std::string no_token_reason(std::span<const float> logits) {
    bool nan = false, minus_inf = false;
    for (float v : logits) {
        nan = nan || std::isnan(v);
        minus_inf = minus_inf || v == -std::numeric_limits<float>::infinity();
    }
    if (nan && minus_inf) return "every logit is -inf or NaN";
    return nan ? "every logit is NaN" : "every logit is -inf";
}

TokenScore score_token(std::span<const float> logits, std::int32_t token) {
    TokenScore s;
    s.token = token;
    s.logit = logits[static_cast<std::size_t>(token)];
    float runner_up = -std::numeric_limits<float>::infinity();
    for (std::size_t i = 0; i < logits.size(); ++i) {
        if (static_cast<std::int32_t>(i) != token && logits[i] > runner_up) runner_up = logits[i];
    }
    s.margin = s.logit - runner_up;
    return s;
}

Sampler::Sampler(const SamplingOptions& options) : options_(options), rng_(options.seed) { validate(options_); }

std::int32_t Sampler::sample(std::span<const float> logits) {
    if (greedy()) return greedy_token(logits);
    return sample_seeded(logits);
}

double Sampler::uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

std::int32_t Sampler::sample_seeded(std::span<const float> logits) {
    candidates_.clear();
    for (std::size_t i = 0; i < logits.size(); ++i) {
        if (!std::isnan(logits[i])) candidates_.push_back({static_cast<std::int32_t>(i), logits[i], 0.0});
    }
    if (candidates_.empty()) return -1;

    // Best first; equal logits in id order, so the order is fully determined.
    const auto better = [](const Candidate& a, const Candidate& b) {
        return a.logit != b.logit ? a.logit > b.logit : a.token < b.token;
    };
    std::size_t kept = candidates_.size();
    if (options_.top_k > 0 && options_.top_k < kept) kept = options_.top_k;
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(kept), candidates_.end(), better);

    const double best = candidates_[0].logit;
    if (best == -std::numeric_limits<double>::infinity()) return -1;  // every logit is -inf
    if (best == std::numeric_limits<double>::infinity()) {
        // +inf outweighs everything (greedy picks it too): one of the kept +inf logits, uniformly.
        std::size_t infinite = 0;
        while (infinite < kept && candidates_[infinite].logit == candidates_[0].logit) ++infinite;
        const auto pick = static_cast<std::size_t>(uniform() * static_cast<double>(infinite));
        return candidates_[std::min(pick, infinite - 1)].token;
    }
    double total = 0.0;
    for (std::size_t i = 0; i < kept; ++i) {
        candidates_[i].weight = std::exp((candidates_[i].logit - best) / options_.temperature);
        total += candidates_[i].weight;
    }

    // The smallest prefix holding top_p of the mass (at least one candidate).
    double mass = 0.0;
    std::size_t nucleus = 0;
    while (nucleus < kept) {
        mass += candidates_[nucleus].weight;
        ++nucleus;
        if (mass >= options_.top_p * total) break;
    }

    const double target = uniform() * mass;
    double cumulative = 0.0;
    for (std::size_t i = 0; i < nucleus; ++i) {
        cumulative += candidates_[i].weight;
        if (cumulative > target) return candidates_[i].token;
    }
    return candidates_[nucleus - 1].token;
}

}  // namespace ember::runtime
