// A summary of a GGUF's tokenizer metadata (model-math §8.1-8.2), with llama.cpp's
// per-model defaults applied. Cheap: it reads no vocabulary strings.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "gguf/gguf_file.hpp"

namespace ember::tokenizer {

struct TokenizerInfo {
    std::string model;  // tokenizer.ggml.model: "llama", "gpt2", "gemma4"
    std::string pre;    // tokenizer.ggml.pre, empty if absent
    std::uint64_t vocab_size = 0;
    std::optional<std::uint32_t> bos_id;
    std::optional<std::uint32_t> eos_id;
    bool add_bos = false;
    bool add_eos = false;
};

// Throws ember::Error naming the key on a missing model, a wrong type, or a special id
// outside the vocabulary.
TokenizerInfo read_tokenizer_info(const gguf::File& file);

}  // namespace ember::tokenizer
