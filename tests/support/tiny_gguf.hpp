// Small, complete GGUF models written in memory for tests and the fuzz seed corpus:
// valid metadata for each family, a tiny SentencePiece vocabulary, and deterministic
// random weights. Tests break them on purpose; nothing here reads the fixtures.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/gguf_writer.hpp"

namespace ember::test {

struct TinySpec {
    std::string arch = "llama";  // llama | qwen3 | gemma4
    std::uint32_t n_layers = 2;
    std::uint32_t n_embd = 32;
    std::uint32_t n_head = 4;
    std::uint32_t n_head_kv = 2;
    std::uint32_t n_ff = 64;
    std::uint32_t n_ctx = 64;
    gguf::GgmlType weight_type = gguf::GgmlType::F32;  // matrices; norms stay F32
    bool tied_output = false;
    std::uint32_t seed = 1;
    std::uint32_t alignment = 32;  // general.alignment (written only when not the default)
};

// Writer with every key and tensor of the spec already added; tests may add more.
gguf::Writer tiny_model_writer(const TinySpec& spec);
std::vector<std::byte> tiny_model_bytes(const TinySpec& spec);

// The tiny vocabulary: <unk>, <s>, </s>, 256 byte tokens, then a few words.
std::vector<std::string> tiny_vocab();

}  // namespace ember::test
