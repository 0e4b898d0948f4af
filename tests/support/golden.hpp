// Reads llama.cpp's golden outputs (../shared/fixtures/README.md, "golden/"):
// for each prompt the token ids, the log-sum-exp and top-40 logits at every position,
// the hidden states after every layer (l_out-N) and the final norm (result_norm), and
// 24 greedy steps. Suites that compare anything with llama.cpp load goldens through here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ember::test {

struct GoldenTensor {
    std::size_t rows = 0;
    std::size_t cols = 0;
    std::vector<float> values;  // row-major [rows, cols]
};

struct GoldenPosition {
    double lse = 0;                                  // log-sum-exp of the position's logits
    std::vector<std::pair<std::int32_t, float>> top;  // the 40 highest (id, logit), best first
};

struct GoldenStep {
    std::int32_t token = -1;
    std::string piece;  // the token's bytes
    float logit = 0;
    float margin = 0;  // top1 - top2
};

struct GoldenPrompt {
    std::string text;
    std::vector<std::int32_t> tokens;  // what the model saw, BOS included when added
    std::vector<std::string> pieces;   // bytes of each token
    std::vector<GoldenPosition> positions;
    std::map<std::string, GoldenTensor> hidden;  // "l_out-0", ..., "result_norm"
    std::vector<GoldenStep> greedy;
};

struct Golden {
    std::size_t n_vocab = 0;
    bool add_bos = false;
    std::vector<GoldenPrompt> prompts;
};

// Loads MODEL.golden.json or MODEL.f32.golden.json; a doctest failure names the file
// and the key when the file is missing or malformed.
Golden load_golden(const std::filesystem::path& path);

// "golden/MODEL.f32.golden.json" under the fixtures, checked to exist.
std::filesystem::path f32_golden_path(const std::string& model);
std::filesystem::path golden_path(const std::string& model);

std::string hex_to_bytes(std::string_view hex);

// The largest |ours - golden| relative to the largest |golden| value: how the reference
// path's tolerances against f32.golden are stated (NaN when the sizes differ).
double relative_error(std::span<const float> ours, std::span<const float> golden);

// The reference path's tolerance against MODEL.f32.golden.json for a family
// ("llama", "qwen3": 1e-5; "gemma4": 2e-3, llama.cpp's GELU goes through an F16 table).
double f32_golden_tolerance(std::string_view family);

}  // namespace ember::test
