// Shared by the tokenizer suites: the fixture vocabularies, llama.cpp's test-vector files,
// and the span invariant every encoding must satisfy.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace ember::test {

// The tokenizer of a fixture file (relative to the fixtures dir), loaded once per process.
const tokenizer::Tokenizer& fixture_tokenizer(const std::string& relative_path);

// The four vocabularies of ../shared/fixtures/tokenizer and where each one lives.
struct VectorVocab {
    const char* name;        // ggml-vocab-NAME.gguf.inp / .out
    const char* model_path;  // the GGUF holding that vocabulary
};
inline constexpr VectorVocab kVectorVocabs[] = {
    {"llama-spm", "tokenizer/ggml-vocab-llama-spm.gguf"},
    {"llama-bpe", "models/synth-llama3-q8_0.gguf"},
    {"qwen2", "models/synth-qwen3-q8_0.gguf"},
    {"gemma-4", "models/synth-gemma4-q8_0.gguf"},
};

struct TestVector {
    std::string text;
    std::vector<std::int32_t> ids;
};
// Reads ggml-vocab-NAME.gguf.inp/.out as the fixtures README says to split them.
std::vector<TestVector> read_test_vectors(const std::string& name);

std::string read_file(const std::string& path);
std::string hex_decode(std::string_view hex);
std::vector<std::int32_t> ids_of(const std::vector<tokenizer::Token>& tokens);

// Checks (doctest CHECKs) that the spans are in order and tile text exactly.
void check_spans_tile(const std::vector<tokenizer::Token>& tokens, std::string_view text);

}  // namespace ember::test
