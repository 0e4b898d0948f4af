// A summary of a GGUF's tokenizer metadata (model-math §8.1-8.2), with llama.cpp's
// per-model defaults applied. Cheap: it reads no vocabulary strings. Lenient about what
// Ember cannot tokenize (an unknown model or pre-tokenizer is recorded, not refused) so
// that `ember inspect` can describe any file; Tokenizer::from_gguf refuses those.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "gguf/gguf_file.hpp"

namespace ember::tokenizer {

// tokenizer.ggml.model: "llama" -> Spm, "gpt2" -> Bpe, "gemma4" -> Gemma4.
enum class VocabType { Spm, Bpe, Gemma4, Unsupported };

// How a BPE tokenizer cuts text into words before merging (model-math §8.5).
enum class PreTokenizer {
    None,      // SPM: no pre-tokenizer
    Llama3,    // the llama3 regex, digits in groups of three
    Qwen2,     // the same with single digits
    Newlines,  // Gemma 4: runs of '\n' and runs of anything else
    Unsupported,
};

std::string_view vocab_type_name(VocabType type);
std::string_view pre_tokenizer_name(PreTokenizer pre);
// The tokenizer.ggml.pre values Ember's byte-level BPE accepts, for error messages.
std::string supported_bpe_pre_names();

struct TokenizerInfo {
    std::string model;  // tokenizer.ggml.model: "llama", "gpt2", "gemma4"
    std::string pre;    // tokenizer.ggml.pre, empty if absent
    std::uint64_t vocab_size = 0;
    std::optional<std::uint32_t> bos_id;
    std::optional<std::uint32_t> eos_id;
    bool add_bos = false;
    bool add_eos = false;

    VocabType type = VocabType::Unsupported;
    PreTokenizer pre_tokenizer = PreTokenizer::None;
    std::optional<std::uint32_t> eot_id;  // from the key; Vocabulary also finds it by text
    std::optional<std::uint32_t> eom_id;
    std::optional<std::uint32_t> unk_id;
    std::optional<std::uint32_t> sep_id;
    std::optional<std::uint32_t> pad_id;
    std::optional<std::uint32_t> mask_id;
    std::optional<std::uint32_t> fim_pad_id;
    std::optional<std::uint32_t> fim_rep_id;
    std::optional<std::uint32_t> fim_sep_id;
    bool add_space_prefix = false;  // SPM: a space before the text and after each special token
    bool ignore_merges = false;     // llama3: a word that is a whole token skips the merges
    bool clean_spaces = false;      // llama.cpp's detokenizer clean-up; recorded, decode() does not apply it
};

// Throws ember::Error naming the key on a missing model or token list, a wrong type, or a
// special-token id outside the vocabulary. An id of 0xFFFFFFFF (-1 as written by the
// converters) means "none" and leaves llama.cpp's default in place.
TokenizerInfo read_tokenizer_info(const gguf::File& file);

}  // namespace ember::tokenizer
