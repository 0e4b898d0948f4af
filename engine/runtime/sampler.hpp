// Choosing the next token from a row of logits (docs/generate.md).
//
// Greedy (temperature 0, the default): the highest logit, the lowest id on a tie; NaN
// never wins (llama.cpp's greedy sampler, model-math §9).
//
// Seeded sampling (temperature > 0): candidates sorted by logit (ties: lower id first),
// cut to the top_k best (0 = all), probabilities exp((logit - best) / temperature)
// computed in double, cut to the smallest prefix whose probability mass reaches top_p,
// then one draw u in [0, 1) from std::mt19937_64 seeded with `seed`: the chosen token is
// the first whose cumulative mass exceeds u * (kept mass). u = (rng() >> 11) * 2^-53, so
// the draw depends only on the standard's definition of mt19937_64, never on a library's
// distribution classes. The same logits, options and seed give the same tokens.
// +inf logits outweigh every finite one: when the best is +inf, the token is one of the
// kept +inf logits chosen uniformly by the same draw (floor(u * count), in id order).
// A row with nothing above -inf (every logit -inf or NaN) has no token: -1.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

namespace ember::runtime {

struct SamplingOptions {
    float temperature = 0.0f;  // 0: greedy
    std::uint32_t top_k = 40;  // 0: no cut
    float top_p = 0.95f;       // 1: no cut
    std::uint64_t seed = 42;
};

// Throws ember::UsageError naming the option that is out of range.
void validate(const SamplingOptions& options);

// argmax with the lowest id on a tie; -1 if no logit is a number above -inf.
std::int32_t greedy_token(std::span<const float> logits);

// Why a row has no token to choose: "every logit is NaN", "every logit is -inf", or
// "every logit is -inf or NaN".
std::string no_token_reason(std::span<const float> logits);

// A chosen token's logit and its margin over the best other token (negative when a
// sampled token was not the top one).
struct TokenScore {
    std::int32_t token = -1;
    float logit = 0.0f;
    float margin = 0.0f;
};
TokenScore score_token(std::span<const float> logits, std::int32_t token);

class Sampler {
public:
    explicit Sampler(const SamplingOptions& options);

    std::int32_t sample(std::span<const float> logits);

    const SamplingOptions& options() const { return options_; }
    bool greedy() const { return options_.temperature == 0.0f; }

private:
    struct Candidate {
        std::int32_t token;
        float logit;
        double weight;
    };

    std::int32_t sample_seeded(std::span<const float> logits);
    double uniform();  // [0, 1)

    SamplingOptions options_;
    std::mt19937_64 rng_;
    std::vector<Candidate> candidates_;  // reused between calls
};

}  // namespace ember::runtime
