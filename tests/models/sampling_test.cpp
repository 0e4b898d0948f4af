// Rung: smoke (unit). Token choice: greedy ties and NaN, margins, seeded sampling that
// repeats for a seed, top-k / top-p cuts, the sampled distribution, option validation.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "common/error.hpp"
#include "runtime/sampler.hpp"

namespace ember::runtime {

TEST_CASE("greedy: the highest logit, the lowest id on a tie, NaN never wins") {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    CHECK(greedy_token(std::vector<float>{1, 3, 2}) == 1);
    CHECK(greedy_token(std::vector<float>{5, 1, 5, 5}) == 0);
    CHECK(greedy_token(std::vector<float>{nan, 1, 7, 7, nan}) == 2);
    CHECK(greedy_token(std::vector<float>{nan, nan}) == -1);
    CHECK(greedy_token(std::vector<float>{-INFINITY, -INFINITY}) == -1);  // nothing to choose (issue 13)
    CHECK(greedy_token(std::vector<float>{-INFINITY, nan}) == -1);
    CHECK(greedy_token(std::vector<float>{-INFINITY, 2, INFINITY, INFINITY}) == 2);
}

TEST_CASE("seeded sampling picks among +inf logits uniformly, and finds nothing in an all -inf row") {
    const float inf = std::numeric_limits<float>::infinity();
    const float nan = std::numeric_limits<float>::quiet_NaN();
    Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 0.95f, .seed = 3});
    const std::vector<float> logits = {0.0f, inf, 5.0f, nan, inf};
    int ones = 0, fours = 0;
    constexpr int kDraws = 2000;
    for (int i = 0; i < kDraws; ++i) {
        const std::int32_t t = s.sample(logits);
        ones += t == 1;
        fours += t == 4;
    }
    CHECK(ones + fours == kDraws);  // never a finite logit beside +inf
    CHECK(std::abs(ones - kDraws / 2) < 5 * 23);  // binomial(2000, 1/2): sigma = 22.4
    CHECK(s.sample(std::vector<float>{-inf, -inf, nan}) == -1);
    CHECK(no_token_reason(std::vector<float>{-inf, -inf}) == "every logit is -inf");
    CHECK(no_token_reason(std::vector<float>{nan, nan}) == "every logit is NaN");
    CHECK(no_token_reason(std::vector<float>{-inf, nan}) == "every logit is -inf or NaN");
}

TEST_CASE("score: a token's logit and its margin over the best other token") {
    const std::vector<float> logits = {1.0f, 4.0f, 2.5f};
    const TokenScore top = score_token(logits, 1);
    CHECK(top.logit == 4.0f);
    CHECK(top.margin == 1.5f);
    CHECK(score_token(logits, 2).margin == -1.5f);
}

TEST_CASE("seeded sampling repeats for a seed and differs between seeds") {
    std::vector<float> logits(50);
    for (std::size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(i)) * 2;
    auto draw = [&](std::uint64_t seed) {
        Sampler s({.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .seed = seed});
        std::vector<std::int32_t> tokens;
        for (int i = 0; i < 64; ++i) tokens.push_back(s.sample(logits));
        return tokens;
    };
    CHECK(draw(7) == draw(7));
    CHECK(draw(7) != draw(8));
}

TEST_CASE("top-k 1 and a tiny top-p are greedy, temperature 0 is greedy") {
    const std::vector<float> logits = {0.5f, 2.0f, 1.9f, -1.0f};
    Sampler k1({.temperature = 5.0f, .top_k = 1, .top_p = 1.0f, .seed = 1});
    Sampler p0({.temperature = 5.0f, .top_k = 0, .top_p = 1e-6f, .seed = 1});
    Sampler t0({.temperature = 0.0f, .top_k = 40, .top_p = 0.95f, .seed = 1});
    for (int i = 0; i < 100; ++i) {
        CHECK(k1.sample(logits) == 1);
        CHECK(p0.sample(logits) == 1);
        CHECK(t0.sample(logits) == 1);
    }
}

TEST_CASE("sampled frequencies follow softmax(logits / temperature) within the cuts") {
    // p(1) / p(0) = exp(log(3) / 1) = 3 at temperature 1; token 2 is cut by top_k = 2.
    const std::vector<float> logits = {0.0f, std::log(3.0f), -1.0f};
    Sampler s({.temperature = 1.0f, .top_k = 2, .top_p = 1.0f, .seed = 123});
    std::vector<int> counts(3);
    const int n = 40000;
    for (int i = 0; i < n; ++i) ++counts[static_cast<std::size_t>(s.sample(logits))];
    CHECK(counts[2] == 0);
    CHECK(static_cast<double>(counts[1]) / n == doctest::Approx(0.75).epsilon(0.02));

    // top_p = 0.7 keeps only token 1 (0.75 of the mass of the top two).
    Sampler nucleus({.temperature = 1.0f, .top_k = 2, .top_p = 0.7f, .seed = 123});
    for (int i = 0; i < 100; ++i) CHECK(nucleus.sample(logits) == 1);

    // Temperature 2 flattens: p(1) = sqrt(3) / (1 + sqrt(3)).
    Sampler warm({.temperature = 2.0f, .top_k = 2, .top_p = 1.0f, .seed = 5});
    int ones = 0;
    for (int i = 0; i < n; ++i) ones += warm.sample(logits) == 1;
    CHECK(static_cast<double>(ones) / n == doctest::Approx(std::sqrt(3.0) / (1 + std::sqrt(3.0))).epsilon(0.02));
}

TEST_CASE("sampling options out of range are usage errors naming the option") {
    CHECK_THROWS_WITH_AS(Sampler({.temperature = -1.0f}), doctest::Contains("--temperature"), UsageError);
    CHECK_THROWS_WITH_AS(Sampler({.temperature = NAN}), doctest::Contains("--temperature"), UsageError);
    CHECK_THROWS_WITH_AS(Sampler({.temperature = 1.0f, .top_p = 0.0f}), doctest::Contains("--top-p"), UsageError);
    CHECK_THROWS_WITH_AS(Sampler({.temperature = 1.0f, .top_p = 1.5f}), doctest::Contains("--top-p"), UsageError);
}

}  // namespace ember::runtime
